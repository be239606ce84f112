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

struct zkl_hold *zkl__hold_new(const char *path, uint64_t gen,
                              void (*on_lost)(struct zkl_hold *h, void *ctx), void *ctx)
{
	size_t len = path ? strlen(path) : 0;
	struct zkl_hold *h = calloc(1, sizeof *h + len + 1);
	if (!h)
		return NULL;
	h->gen = gen;
	atomic_init(&h->state, ZKL_HOLD_HELD);
	atomic_init(&h->lost, false);
	atomic_init(&h->releasing, false);
	h->on_lost = on_lost;
	h->ctx = ctx;
	if (len)
		memcpy(h->path, path, len + 1);
	return h;
}

void zkl__hold_add(zkl_client *c, struct zkl_hold *h)
{
	h->prev = NULL;
	h->next = c->holds;
	if (c->holds)
		c->holds->prev = h;
	c->holds = h;
	/* A hold of a session the loop has moved on from, or given up, is lost already:
	 * zkl__holds_notify() reports it on this turn. */
	if (h->gen != c->gen || (c->sess && c->sess->given_up))
		zkl__hold_mark_lost(c, h);
}

void zkl__hold_mark_lost(zkl_client *c, struct zkl_hold *h)
{
	if (atomic_load(&h->lost))
		return;
	atomic_store(&h->lost, true);
	c->holds_lost = true;
	zkl__loop_wake(c);
}

static void hold_end_apply(zkl_client *c, struct zkl_msg *m)
{
	zkl__hold_unlink(c, (struct zkl_hold *)((char *)m - offsetof(struct zkl_hold, end)));
}

/* Hands the loop a hold's end (no lock held), or applies it here: with external_loop,
 * and on the loop's own thread (a callback). */
static void hold_post(zkl_client *c, struct zkl_msg *m)
{
	m->kind = MSG_HOLD_END;
	m->apply = hold_end_apply;
	if (c->external || zkl__running_loop == c) {
		pthread_mutex_lock(&c->mu);
		hold_end_apply(c, m);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	zkl__inbox_put(c, m, true);
}

/* Takes h off the client's list and frees it (mu held): an ended hold, or one whose
 * owner is the loop. One whose on_lost runs right now goes when it returns. */
void zkl__hold_unlink(zkl_client *c, struct zkl_hold *h)
{
	/* A hold that ends on the current session past its loss deadline dooms the session:
	 * the server may have expired it, and the loop gives it up (liveness.c) even with
	 * nothing held any more. */
	struct zkl_session *s = c->sess;
	if (s && s->gen == h->gen && !s->given_up && !s->expired &&
	    zkl__now_ms() >= zkl__lost_at(c))
		s->doomed = true;
	zkl__hold_unwatch_node(c, h);
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

/* Whether h is lost, or will be found so by the loop's next look (mu held): marked, of a
 * session the client has moved on from, or of an adopted session given up. */
static bool hold_doomed(zkl_client *c, struct zkl_hold *h)
{
	if (atomic_load(&h->lost) || h->gen != c->gen)
		return true;
	const struct zkl_session *s = c->sess;
	return s && s->gen == h->gen &&
	       (s->given_up || s->expired || zkl__now_ms() >= zkl__lost_at(c));
}

/* Reports h lost here, on a thread that runs the loop (mu held, released around the
 * call): what holds_notify() would do on its next turn, done now for an owner that ends
 * h before that turn. */
static void hold_report_here(zkl_client *c, struct zkl_hold *h)
{
	atomic_store(&h->lost, true);
	h->notified = true;
	h->reported = true;
	atomic_store(&h->state, ZKL_HOLD_DISPATCHING);
	h->in_dispatch = true;
	zkl__hold_observe(c, h, ZKL_EVENT_LOST);
	zkl_client *outer = zkl__running_loop;
	zkl__running_loop = c; /* a release inside on_lost is on the loop */
	pthread_mutex_unlock(&c->mu);
	if (h->on_lost)
		h->on_lost(h, h->ctx);
	pthread_mutex_lock(&c->mu);
	zkl__running_loop = outer;
	h->in_dispatch = false;
	int st = ZKL_HOLD_DISPATCHING;
	atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_HELD);
	pthread_cond_broadcast(&c->cv);
}

/* Moves h from held to ended and returns whether it was lost. A hold that is lost but
 * not yet reported is reported first, so that its owner hears of every loss once, on the
 * loop, whether or not a release found it first: on a thread that runs the loop, here;
 * elsewhere the loop does it and this waits for it (the loop's turn, never the server).
 * A dispatch of on_lost on another thread is waited out as well. */
static bool hold_finish(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how)
{
	if (how == ZKL_HOLD_END_QUIET) {
		for (;;) {
			int st = ZKL_HOLD_HELD;
			if (atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED))
				break;
			if (st != ZKL_HOLD_DISPATCHING)
				break; /* ended already */
			pthread_mutex_lock(&c->mu);
			if (zkl__runs_loop(c) && h->in_dispatch) {
				atomic_store(&h->state, ZKL_HOLD_ENDED);
				pthread_mutex_unlock(&c->mu);
				break;
			}
			while (atomic_load(&h->state) == ZKL_HOLD_DISPATCHING)
				zkl__cond_wait_until(&c->cv, &c->mu, INT64_MAX);
			pthread_mutex_unlock(&c->mu);
		}
		return atomic_load(&h->lost);
	}
	/* The usual case, without mu: not lost, on the session the client is on before and
	 * after the hold ended. With external_loop what the C client said may wait in the
	 * inbox for the application's loop (an expiry while the owner worked): the end
	 * applies it first, under mu. */
	struct zkl_session *s = atomic_load(&c->sess_pub);
	bool ended = false;
	if (how == ZKL_HOLD_END && !c->external && s && s->gen == h->gen &&
	    !atomic_load(&h->lost)) {
		int st = ZKL_HOLD_HELD;
		ended = atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED);
		if (ended && atomic_load(&c->sess_pub) == s && !atomic_load(&h->lost))
			return false;
	}
	pthread_mutex_lock(&c->mu);
	if (c->external)
		zkl__inbox_drain(c);
	if (how == ZKL_HOLD_END_LOST)
		atomic_store(&h->lost, true); /* its release found it lost */
	if (ended && !h->reported) {
		/* The session changed as it ended, and the loop may have passed it over:
		 * look again as if it were held. */
		atomic_store(&h->state, ZKL_HOLD_HELD);
		h->notified = false;
	}
	for (;;) {
		int st = atomic_load(&h->state);
		if (st == ZKL_HOLD_ENDED)
			break; /* ended already: a release inside its own on_lost */
		if (st == ZKL_HOLD_DISPATCHING) {
			if (zkl__runs_loop(c) && h->in_dispatch) {
				/* Only the loop dispatches: this is a release inside h's own
				 * on_lost. */
				atomic_store(&h->state, ZKL_HOLD_ENDED);
				break;
			}
			zkl__cond_wait_until(&c->cv, &c->mu, INT64_MAX);
			continue;
		}
		if (!hold_doomed(c, h) || h->notified || c->loop_ended) {
			atomic_store(&h->state, ZKL_HOLD_ENDED);
			break;
		}
		if (zkl__runs_loop(c)) {
			hold_report_here(c, h);
			continue;
		}
		atomic_store(&h->lost, true);
		c->holds_lost = true;
		zkl__loop_wake(c);
		zkl__cond_wait_until(&c->cv, &c->mu, INT64_MAX);
	}
	bool lost = atomic_load(&h->lost);
	pthread_mutex_unlock(&c->mu);
	return lost;
}

bool zkl__hold_end(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how)
{
	bool lost = hold_finish(c, h, how);
	if (how == ZKL_HOLD_END && !lost)
		zkl__hold_observe(c, h, ZKL_EVENT_RELEASED);
	/* No wake: an ended hold is nothing to the loop but memory. */
	hold_post(c, &h->end);
	return lost;
}

void zkl__hold_drop(zkl_client *c, struct zkl_hold *h)
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
		h->reported = true;
		h->in_dispatch = true;
		zkl__hold_observe(c, h, ZKL_EVENT_LOST);
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

