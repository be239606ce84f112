/* The recipe handles of a client, counted so that the client outlives them.
 *
 * A handle freed after zkl_client_close() of its client would reach into a client that
 * is gone; one closed inside its own callback would end the loop that runs the callback.
 * Both are refused here rather than left to crash: a close inside a callback does
 * nothing, and a close while handles are still open ends nothing either, until the last
 * of them is freed, which then closes the client itself. Each refusal is logged as an
 * error and leaves its detail in zkl_last_error(). */
#include "internal.h"

void zkl__client_handle_add(zkl_client *c)
{
	pthread_mutex_lock(&c->mu);
	c->nhandles++;
	pthread_mutex_unlock(&c->mu);
}

void zkl__client_handle_done(zkl_client *c, bool put_off)
{
	pthread_mutex_lock(&c->mu);
	bool close_now = --c->nhandles == 0 && c->close_pending;
	/* The loop cannot end itself, nor a close wait for the end of a handle whose
	 * function calls it. */
	bool on_loop = zkl__on_event_thread(c) || put_off;
	if (close_now && on_loop)
		c->close_pending = false; /* the loop cannot end itself: stay open */
	pthread_mutex_unlock(&c->mu);
	if (close_now && on_loop)
		zkl__log(c, ZKL_LOG_ERROR, "the last handle of a client whose close was put off "
		        "was freed in a callback or a leader's function: the client stays open "
		        "(close it again once the handles are freed, outside its callbacks)");
	else if (close_now)
		zkl_client_close(c);
}

bool zkl__client_close_refused(zkl_client *c)
{
	if (zkl__on_event_thread(c)) {
		zkl__fail(ZKL_EDEADLK, "zkl_client_close() called in a callback of the same "
		         "client: refused, the client stays open (close it outside its "
		         "callbacks)");
		zkl__log(c, ZKL_LOG_ERROR, "%s", zkl_last_error());
		return true;
	}
	pthread_mutex_lock(&c->mu);
	size_t open = c->nhandles;
	if (open > 0)
		c->close_pending = true;
	/* Handles freed in their own callbacks go first, on the loop. */
	while (open == 0 && c->nfreeing > 0)
		if (!zkl__loop_step(c))
			pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	if (open == 0)
		return false;
	zkl__fail(ZKL_EBUSY, "zkl_client_close() called while %zu recipe handle%s made on "
	         "the client %s open: the close is put off until the last of them is freed",
	         open, open == 1 ? "" : "s", open == 1 ? "is" : "are");
	zkl__log(c, ZKL_LOG_ERROR, "%s", zkl_last_error());
	return true;
}

void zkl__client_free_put_off(zkl_client *c)
{
	c->nfreeing++;
}

void zkl__client_free_done(zkl_client *c)
{
	c->nfreeing--;
	pthread_cond_broadcast(&c->cv);
}
