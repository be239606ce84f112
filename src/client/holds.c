/* Holds: what the loop reports lost, once, when a session ends or is given up. The loop
 * owns the record (DESIGN.md, "One owner"): the engine makes and links it at the grant,
 * its owner ends it from any thread through its atomic state, and the loop unlinks and
 * frees it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

struct zkl_hold *zkl_hold_new(const char *path, uint64_t gen,
                              void (*on_lost)(struct zkl_hold *h, void *ctx), void *ctx)
{
	size_t len = path ? strlen(path) : 0;
	struct zkl_hold *h = calloc(1, sizeof *h + len + 1);
	if (!h)
		return NULL;
	h->gen = gen;
	atomic_init(&h->state, ZKL_HOLD_HELD);
	atomic_init(&h->lost, false);
	h->on_lost = on_lost;
	h->ctx = ctx;
	if (len)
		memcpy(h->path, path, len + 1);
	return h;
}

void zkl_hold_add_locked(zkl_client *c, struct zkl_hold *h)
{
	h->prev = NULL;
	h->next = c->holds;
	if (c->holds)
		c->holds->prev = h;
	c->holds = h;
	/* A hold of a session the loop has moved on from, or given up, is lost already:
	 * zkl__holds_notify() reports it on this turn. */
	if (h->gen != c->gen || (c->sess && c->sess->given_up))
		zkl_hold_mark_lost(c, h);
}

void zkl_hold_mark_lost(zkl_client *c, struct zkl_hold *h)
{
	if (atomic_load(&h->lost))
		return;
	atomic_store(&h->lost, true);
	c->holds_lost = true;
	zkl__loop_wake(c);
}

/* Hands the loop a hold's end (no lock held), or applies it here: with external_loop,
 * and on the loop's own thread (a callback). */
static void hold_post(zkl_client *c, struct zkl_msg *m)
{
	if (c->external || zkl__running_loop == c) {
		pthread_mutex_lock(&c->mu);
		zkl__msg_run(c, m);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	zkl__inbox_put(c, m, true);
}

/* Takes h off the client's list and frees it (mu held): an ended hold, or one whose
 * owner is the loop. One whose on_lost runs right now goes when it returns. */
void zkl__hold_unlink(zkl_client *c, struct zkl_hold *h)
{
	zkl_hold_unwatch_node(c, h);
	if (h->prev)
		h->prev->next = h->next;
	else
		c->holds = h->next;
	if (h->next)
		h->next->prev = h->prev;
	if (h->in_dispatch)
		h->unlinked = true;
	else
		free(h);
}

/* Moves h from held to ended, waiting out a dispatch of its on_lost on another thread;
 * returns whether it was lost. */
static bool hold_finish(zkl_client *c, struct zkl_hold *h)
{
	for (;;) {
		int st = ZKL_HOLD_HELD;
		if (atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED))
			break;
		if (st != ZKL_HOLD_DISPATCHING)
			break; /* ended already */
		if (zkl_on_event_thread(c)) {
			/* Only the loop dispatches: this is a release inside h's own on_lost. */
			atomic_store(&h->state, ZKL_HOLD_ENDED);
			break;
		}
		pthread_mutex_lock(&c->mu);
		while (atomic_load(&h->state) == ZKL_HOLD_DISPATCHING)
			pthread_cond_wait(&c->cv, &c->mu);
		pthread_mutex_unlock(&c->mu);
	}
	return atomic_load(&h->lost);
}

bool zkl_hold_end(zkl_client *c, struct zkl_hold *h)
{
	bool lost = hold_finish(c, h);
	/* No wake: an ended hold is nothing to the loop but memory. */
	h->end.kind = MSG_HOLD_END;
	hold_post(c, &h->end);
	return lost;
}

void zkl_hold_end_locked(zkl_client *c, struct zkl_hold *h)
{
	atomic_store(&h->state, ZKL_HOLD_ENDED);
	zkl__hold_unlink(c, h);
}

/* Marks every hold of a session other than the current one lost, and calls on_lost for
 * each once, with mu released (event thread). Every turn of the loop calls it: it looks
 * through the holds only when the session changed or a hold was marked lost since it
 * last found nothing to do, so that a client holding many locks does not pay for them
 * on every answer. */
void zkl__holds_notify(zkl_client *c)
{
	if (c->holds_gen == c->gen && !c->holds_lost)
		return;
	for (;;) {
		struct zkl_hold *h;
		for (h = c->holds; h; h = h->next) {
			if (h->gen != c->gen)
				h->lost = true;
			if (h->lost && !h->notified)
				break;
		}
		if (!h) {
			/* One look through them all, mu held throughout, found nothing. */
			c->holds_gen = c->gen;
			c->holds_lost = false;
			return;
		}
		h->notified = true;
		int st = ZKL_HOLD_HELD;
		if (!atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_DISPATCHING))
			continue; /* ended by its owner: nobody to tell */
		h->in_dispatch = true;
		pthread_mutex_unlock(&c->mu);
		if (h->on_lost)
			h->on_lost(h, h->ctx);
		pthread_mutex_lock(&c->mu);
		h->in_dispatch = false;
		st = ZKL_HOLD_DISPATCHING;
		atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_HELD);
		pthread_cond_broadcast(&c->cv);
		if (h->unlinked)
			free(h);
	}
}

