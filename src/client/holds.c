/* Holds, and the watch each keeps on its own node.
 *
 * A hold is what the loop reports lost, once, when a session ends or is given up, or
 * when its node goes. The loop owns the record (DESIGN.md, "One owner"): the engine
 * makes and links it at the grant, its owner ends it from any thread through its atomic
 * state, and the loop unlinks and frees it.
 *
 * The watch on the node (the second half of this file).
 *
 * A lock node can go while its session lives: anyone with the folder's ACL may delete
 * it (an operator "clearing a stuck lock" in ZooKeeper's shell). The next contender then
 * holds as soon as it hears of it, so the holder must hear of it as soon as the server
 * says so: from the grant on, the loop keeps an exists watch on the node of every hold
 * the engine makes (zkl__hold_watch_node), and marks the hold lost, as an expiry does,
 * when the server says the node is gone: the watch fires with ZOO_DELETED_EVENT, or the
 * exists that sets it is answered ZNONODE (the node went before the watch was set). The
 * loss is then reported on the same turn of the loop as any other (holds_notify): the
 * lost callback, with ZKL_EDELETED as its reason (zkl_hold.node_gone) since the next
 * contender may hold already, is_held false, release ZKL_ELOST. Whether someone else
 * deleted it, or it went with its session's end, is then asked of the session
 * (zkl_hold.deleted, node_gone()), for a recipe that tells the two apart (an election).
 *
 * The watch is a loop waiter of its own (struct zkl_nodewatch) with an ordinary node
 * watch (struct zkl_watch) and exists request, so the client's bookkeeping of watches
 * and requests (sessions closed, adopted handles) covers it. It follows the hold:
 *   - a data change (a revocation request, a peer writing over the data) fires the
 *     watch too: it is set again;
 *   - a connection lost with the exists out: it is sent again once connected. A watch
 *     set before the connection dropped stays with the C client, which sets it again on
 *     the server when it reconnects to the same session (and the server then tells of a
 *     deletion meanwhile);
 *   - the session changes: the hold is lost with its session, and the watch stops;
 *   - the hold ends (its owner lets go): the watch goes with it. Its owner marks it
 *     releasing before its own delete is sent (zkl__engine_release), and the hold may
 *     live on until that delete is out or answered: from the mark on, the node's
 *     deletion is the release's own, never taken for a loss.
 *
 * What it costs a lock cycle is kept to the request: nobody waits for the exists' success,
 * so an answer ZOK does not wake the loop (zkl__op_exists_quiet), which applies it on its
 * next turn; a ZNONODE or a failure does, at once. And the event of the release's own
 * delete is no news: the watch's quiet_if points at the hold's releasing flag, read by
 * the C client's completion thread as it queues the event (zkl__inbox_put), which then
 * does not wake the loop either. A deletion by someone else comes while the hold is not
 * releasing, and wakes it as before.
 * The exists goes quiet only while no recipe waits for a proof (below): one that asks
 * for it (zkl__hold_follow, zkl__hold_confirm) hastens the exists out.
 *
 * The node shown ours. The exists's answer carries the node's Stat: a node there whose
 * ephemeral owner is not the hold's session is not ours (ours was deleted, and one of
 * its name made again by another), and the hold is lost as well. One that is ours
 * proves the hold alive on the server at that moment, after the grant: a recipe that
 * must know that before it tells its application (an election announcing leadership,
 * as Curator reads its node first) asks for the proof (zkl__hold_confirmed), and asks
 * for a new one after a suspension (zkl__hold_confirm): an exists sent once the
 * connection is back is served after the C client has set the watch again, so a
 * deletion meanwhile is told before it, and its answer is the proof. The watch's own
 * exists is the first proof; with the watch armed, a plain exists is sent for a later
 * one. The recipe's waiter (zkl__hold_follow) is woken when a proof comes; a loss comes
 * through the hold's on_lost, as any other.
 *
 * Everything here runs on the loop, sends included. */
#include <errno.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static struct zkl_waiter *hold_end_apply(zkl_client *c, struct zkl_msg *m);

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
	h->end.kind = MSG_HOLD_END;
	h->end.apply = hold_end_apply;
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

static struct zkl_waiter *hold_end_apply(zkl_client *c, struct zkl_msg *m)
{
	zkl__hold_unlink(c, (struct zkl_hold *)((char *)m - offsetof(struct zkl_hold, end)));
	return NULL;
}

void zkl__hold_end_here(zkl_client *c, struct zkl_hold *h)
{
	pthread_mutex_lock(&c->mu);
	hold_end_apply(c, &h->end);
	pthread_mutex_unlock(&c->mu);
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

static void hold_dispatched(zkl_client *c, struct zkl_hold *h);

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
	hold_dispatched(c, h);
}

/* A hold's end that is not the usual one, handed to the loop (a call): its owner waits
 * on `done`, never on the client's mutex. */
struct hold_finish {
	struct zkl__call call; /* first */
	struct zkl_hold *h;
	enum zkl_hold_ending how;
	bool ended; /* the owner moved it from held to ended, and the session changed */
	bool here;  /* the owner runs the loop (a callback on the loop's thread) */
	bool lost;  /* the answer */
	sem_t done;
};

/* A hold's end, applied as the loop (mu held): true once h has ended, false if its
 * on_lost runs right now on the loop, deeper in this thread's stack (a callback that
 * drove the loop from inside it): the end is applied again when on_lost returns
 * (hold_dispatched). A hold that is lost but not yet reported is reported first, so
 * that its owner hears of every loss once, on the loop, whether or not a release found
 * it first. With external_loop, and the owner not on the thread that runs it, the
 * loop's thread reports it and this waits for that (its turn, never the server). */
static bool finish_apply(zkl_client *c, struct hold_finish *f)
{
	struct zkl_hold *h = f->h;
	if (f->how == ZKL_HOLD_END_LOST)
		atomic_store(&h->lost, true); /* its release found it lost */
	if (f->ended && !h->reported) {
		/* The session changed as it ended, and the loop may have passed it over:
		 * look again as if it were held. */
		atomic_store(&h->state, ZKL_HOLD_HELD);
		h->notified = false;
		f->ended = false;
	}
	for (;;) {
		int st = atomic_load(&h->state);
		if (st == ZKL_HOLD_ENDED)
			break; /* ended already: a release inside its own on_lost */
		if (st == ZKL_HOLD_DISPATCHING) {
			if (f->here && h->in_dispatch) {
				/* Only the loop dispatches: this is a release inside h's own
				 * on_lost. */
				atomic_store(&h->state, ZKL_HOLD_ENDED);
				break;
			}
			if (!c->external) {
				h->finish = f;
				return false;
			}
			zkl__cond_wait_until(&c->cv, &c->mu, INT64_MAX);
			continue;
		}
		if (f->how == ZKL_HOLD_END_QUIET || !hold_doomed(c, h) || h->notified ||
		    c->loop_ended) {
			atomic_store(&h->state, ZKL_HOLD_ENDED);
			break;
		}
		if (f->here || !c->external) {
			hold_report_here(c, h);
			continue;
		}
		atomic_store(&h->lost, true);
		c->holds_lost = true;
		zkl__loop_wake(c);
		zkl__cond_wait_until(&c->cv, &c->mu, INT64_MAX);
	}
	f->lost = atomic_load(&h->lost);
	return true;
}

static void finish_call(zkl_client *c, struct zkl__call *call)
{
	struct hold_finish *f = (struct hold_finish *)(void *)call;
	if (finish_apply(c, f))
		sem_post(&f->done);
}

/* h's on_lost has returned (loop, mu held): an end its owner asked for meanwhile. */
static void hold_dispatched(zkl_client *c, struct zkl_hold *h)
{
	pthread_cond_broadcast(&c->cv);
	struct hold_finish *f = h->finish;
	h->finish = NULL;
	if (f && finish_apply(c, f))
		sem_post(&f->done);
}

/* Moves h from held to ended and returns whether it was lost; on any thread, with no
 * lock held. (The usual end is zkl__hold_end()'s, inline; ended: it moved h to ended,
 * and then found the session changed.) A quiet end is atomics alone; any other is a
 * call to the loop, and so is a quiet end while on_lost runs, which it waits out. */
static bool hold_finish(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how,
                        bool ended)
{
	struct hold_finish f = {.call.fn = finish_call, .h = h, .how = how, .ended = ended};
	if (how == ZKL_HOLD_END_QUIET) {
		int st = ZKL_HOLD_HELD;
		if (atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED) ||
		    st != ZKL_HOLD_DISPATCHING)
			return atomic_load(&h->lost); /* ended now, or already */
	}
	f.here = zkl__is_loop_thread(c);
	sem_init(&f.done, 0, 0);
	zkl__call_wait(c, &f.call, &f.done);
	sem_destroy(&f.done);
	return f.lost;
}

bool zkl__hold_end_other(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how,
                         bool ended)
{
	bool lost = hold_finish(c, h, how, ended);
	if (how == ZKL_HOLD_END && !lost)
		zkl__hold_observe(c, h, ZKL_EVENT_RELEASED);
	zkl__hold_post_end(c, h);
	return lost;
}

void zkl__hold_drop(zkl_client *c, struct zkl_hold *h)
{
	atomic_store(&h->state, ZKL_HOLD_ENDED);
	zkl__hold_unlink(c, h);
}

/* Marks every hold of a session other than the current one lost, and calls on_lost for
 * each once, with mu released (event thread). The loop calls it only when the session
 * changed or a hold was marked lost since it last found nothing to do (holds_gen,
 * holds_lost), so that a client holding many locks does not pay for them on every
 * answer; a loss path calls it at once. */
void zkl__holds_notify(zkl_client *c)
{
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
		hold_dispatched(c, h);
		if (h->unlinked)
			free(h);
	}
}


struct zkl_nodewatch {
	struct zkl_waiter w;     /* first */
	struct zkl_hold *h;      /* NULL once the hold is unlinked */
	struct zkl_watch *wt;    /* the watch set (or being set), or NULL */
	struct zkl_op *op;       /* the exists under way, or NULL */
	bool stopped;            /* out of the waiters: nothing more to watch */
	/* Proofs that the node is ours (zkl__hold_confirm): asked for (the grant asks the
	 * first), and the last one an answer gave; op_ask and check_ask, what had been
	 * asked when op and check were sent. */
	unsigned asked, proven, op_ask, check_ask;
	struct zkl_op *check;    /* a plain exists for a proof, with the watch armed */
	int64_t check_at;        /* not sent before (after a failed one) */
	struct zkl_waiter *follow; /* woken when a proof comes, or NULL */
	bool probing;            /* the watch saw the node go: check asks whether the
	                          * session lives on (zkl_hold.deleting) */
};

/* Lets go of the watch on the node, if any: its events, queued or to come, are no news. */
static void watch_drop(zkl_client *c, struct zkl_nodewatch *nw)
{
	if (nw->wt) {
		zkl__watch_settle_quiet(c, nw->wt);
		zkl__watch_put(c, nw->wt);
	}
	nw->wt = NULL;
}

/* Drops the requests out (op, check) and the watch on the node. */
static void nodewatch_drop(zkl_client *c, struct zkl_nodewatch *nw)
{
	zkl__op_put(c, nw->op);
	nw->op = NULL;
	zkl__op_put(c, nw->check);
	nw->check = NULL;
	watch_drop(c, nw);
}

static void nodewatch_stop(zkl_client *c, struct zkl_nodewatch *nw)
{
	if (!nw->stopped)
		zkl__waiter_leave(c, &nw->w);
	nw->stopped = true;
	nodewatch_drop(c, nw);
}

static void nodewatch_free(zkl_client *c, struct zkl_nodewatch *nw)
{
	nodewatch_stop(c, nw);
	free(nw);
}

/* The server says the node is gone while the hold lasts: the hold is lost at once. If
 * an answer on the hold's session said so (answered), that session lived then, and
 * someone else deleted the node (zkl_hold.deleted). The watch's event does not say as
 * much: the session's own end (a close from elsewhere) deletes its ephemeral nodes and
 * tells the watch too. A plain exists then asks the session: answered, it lived on
 * after the node went; its end, or its being given up, says the node went with it.
 * Meanwhile zkl_hold.deleting says that this is being asked (nodewatch_probe). */
static void node_gone(zkl_client *c, struct zkl_nodewatch *nw, bool answered)
{
	struct zkl_hold *h = nw->h;
	const bool held = atomic_load(&h->state) != ZKL_HOLD_ENDED && !atomic_load(&h->lost);
	if (held) {
		zkl__log(c, ZKL_LOG_WARN, "the node %s of a lock held was deleted by someone else: "
		        "the lock is lost", h->path);
		h->node_gone = true;
	}
	zkl__hold_mark_lost(c, h);
	if (!held || answered) {
		h->deleted = held;
		nodewatch_stop(c, nw);
		return;
	}
	nodewatch_drop(c, nw); /* the waiter stays, to send the probe */
	h->deleting = true;
	nw->probing = true;
	zkl__waiter_wake(c, &nw->w);
}

/* Sends the plain exists (no watch) of a probe or a proof as nw->check, with what is
 * asked as it goes; a failure to send tries again in a while. */
static void check_send(zkl_client *c, struct zkl_nodewatch *nw)
{
	int err = 0;
	nw->check = zkl__op_exists(c, &nw->w, nw->h->path, NULL, &err);
	nw->check_ask = nw->asked;
	if (!nw->check && err != ZKL_ECLOSED) {
		nw->check_at = zkl__now_ms() + 100;
		zkl__waiter_wake_at(c, &nw->w, nw->check_at);
	}
}

/* Whether the session lived on after the watch saw its node go (node_gone). */
static void nodewatch_probe(zkl_client *c, struct zkl_nodewatch *nw)
{
	struct zkl_hold *h = nw->h;
	bool settled = atomic_load(&h->state) == ZKL_HOLD_ENDED || h->gen != c->gen;
	if (nw->check && nw->check->done) {
		struct zkl_op *op = nw->check;
		nw->check = NULL;
		if ((op->rc == ZOK || op->rc == ZNONODE) && op->s->gen == h->gen)
			h->deleted = settled = true;
		else
			nw->check_at = zkl__now_ms() + 100; /* not too often */
		zkl__op_put(c, op);
	}
	if (settled) {
		h->deleting = false;
		if (nw->follow)
			zkl__waiter_wake(c, nw->follow);
		nodewatch_stop(c, nw);
		return;
	}
	if (nw->check || c->closing || !c->sess->connected)
		return; /* answered later, or a session event wakes every waiter */
	if (zkl__now_ms() < nw->check_at) {
		zkl__waiter_wake_at(c, &nw->w, nw->check_at);
		return;
	}
	check_send(c, nw);
}

/* An exists of ours found the node (op, ZOK; ask: what had been asked when it was
 * sent): ours if its ephemeral owner is the session the hold was made on, which op went
 * on. Returns false if it is not: the hold is lost, and the watch stopped. */
static bool node_there(zkl_client *c, struct zkl_nodewatch *nw, const struct zkl_op *op,
                       unsigned ask)
{
	struct zkl_hold *h = nw->h;
	if (op->s->gen != h->gen || op->stat.ephemeralOwner != op->s->id) {
		zkl__log(c, ZKL_LOG_WARN, "the node %s of a lock held belongs to another session: "
		        "the lock is lost", h->path);
		if (!atomic_load(&h->lost) && op->s->gen == h->gen)
			h->node_gone = true; /* ours was deleted, and one of its name made again */
		zkl__hold_mark_lost(c, h);
		nodewatch_stop(c, nw);
		return false;
	}
	if (ask > nw->proven) {
		nw->proven = ask;
		if (nw->follow)
			zkl__waiter_wake(c, nw->follow);
	}
	return true;
}

/* Reads the answer of an exists of ours, *slot (taken and let go of; ask: what had been
 * asked when it was sent) into *rc. Returns false if it ends the watch's news: the node
 * is not ours, or gone (node_gone: the hold is lost). */
static bool exists_answered(zkl_client *c, struct zkl_nodewatch *nw, struct zkl_op **slot,
                            unsigned ask, int *rc)
{
	struct zkl_op *op = *slot;
	*slot = NULL;
	*rc = op->rc;
	const uint64_t op_gen = op->s->gen;
	const bool ours = *rc != ZOK || node_there(c, nw, op, ask);
	zkl__op_put(c, op);
	if (!ours)
		return false;
	if (*rc == ZNONODE) {
		node_gone(c, nw, op_gen == nw->h->gen);
		return false;
	}
	return true;
}

/* The plain exists of a proof (watch armed): its answer, or the next one sent. Returns
 * false if the watch stopped. */
static bool nodewatch_check(zkl_client *c, struct zkl_nodewatch *nw)
{
	if (nw->check) {
		if (!nw->check->done)
			return true;
		int rc;
		if (!exists_answered(c, nw, &nw->check, nw->check_ask, &rc))
			return false;
		if (rc != ZOK)
			nw->check_at = zkl__now_ms() + 100; /* not too often */
	}
	/* Sent for a proof asked for while the watch is armed; without it, the exists that
	 * sets it again gives the proof, and one out is waited for first. */
	if (nw->proven == nw->asked || !nw->wt || nw->op || c->closing || !c->sess->connected)
		return true;
	if (zkl__now_ms() < nw->check_at) {
		zkl__waiter_wake_at(c, &nw->w, nw->check_at);
		return true;
	}
	check_send(c, nw);
	return true;
}

static void nodewatch_run(zkl_client *c, struct zkl_waiter *w)
{
	struct zkl_nodewatch *nw = (struct zkl_nodewatch *)w;
	struct zkl_hold *h = nw->h;
	if (nw->probing) {
		nodewatch_probe(c, nw);
		return;
	}
	if (atomic_load(&h->state) == ZKL_HOLD_ENDED || atomic_load(&h->lost) ||
	    atomic_load(&h->releasing) || h->gen != c->gen) {
		nodewatch_stop(c, nw); /* nothing left to tell */
		return;
	}
	if (nw->op && nw->op->done) {
		int rc;
		if (!exists_answered(c, nw, &nw->op, nw->op_ask, &rc))
			return;
		if (rc != ZOK) {
			/* No watch was set: set it again (connection loss), or let the session's
			 * end tell the loss. */
			watch_drop(c, nw);
		}
	}
	if (nw->wt && nw->wt->fired) {
		const int event = nw->wt->event;
		watch_drop(c, nw);
		if (event == ZOO_DELETED_EVENT) {
			node_gone(c, nw, false);
			return;
		}
		/* Its data changed (a revocation request, a peer's write): watch it again. */
	}
	if (!nodewatch_check(c, nw))
		return;
	if (nw->wt || nw->op || c->closing || !c->sess->connected)
		return; /* armed, or waiting: a session event wakes every waiter */
	struct zkl_watch *wt = zkl__watch_new(c, &nw->w);
	if (!wt) {
		zkl__waiter_wake_at(c, &nw->w, zkl__now_ms() + 100);
		return;
	}
	/* Its events once the owner's release has begun are no news: they do not wake
	 * the loop (zkl_watch.quiet_if; the hold's unwatch settles it before the hold
	 * goes). */
	wt->quiet_if = &h->releasing;
	int err = 0;
	nw->wt = wt;
	/* Unless a recipe waits for a proof, nobody waits for its success: only a ZNONODE
	 * (the node went before the watch was set) or a failure wakes the loop at once. */
	const bool awaited = nw->follow && nw->asked != nw->proven;
	struct zkl_op *op = awaited ? zkl__op_exists(c, &nw->w, h->path, wt, &err)
	                            : zkl__op_exists_quiet(c, &nw->w, h->path, wt, &err);
	nw->op = op;
	nw->op_ask = nw->asked;
	if (!op) {
		zkl__watch_settle_quiet(c, wt);
		zkl__watch_put(c, wt);
		nw->wt = NULL;
	}
	if (!op && err != ZKL_ECLOSED)
		zkl__waiter_wake_at(c, &nw->w, zkl__now_ms() + 100);
}

void zkl__hold_watch_node(zkl_client *c, struct zkl_hold *h)
{
	if (!h->path[0] || h->nw || atomic_load(&h->lost))
		return;
	struct zkl_nodewatch *nw = calloc(1, sizeof *nw);
	if (!nw) {
		zkl__log(c, ZKL_LOG_ERROR, "out of memory: the node %s of a lock held is not "
		        "watched, and its deletion by someone else would go unnoticed", h->path);
		return;
	}
	nw->h = h;
	nw->asked = 1; /* the grant's: the first exists proves it */
	h->nw = nw;
	zkl__waiter_enter_loop(c, &nw->w, nw, nodewatch_run);
}

/* A proof is waited for: the exists out, sent quiet, wakes the loop with its answer. */
static void hasten(zkl_client *c, struct zkl_nodewatch *nw)
{
	if (nw->follow && nw->op && nw->proven != nw->asked)
		zkl__op_hasten(c, nw->op);
}

void zkl__hold_follow(zkl_client *c, struct zkl_hold *h, struct zkl_waiter *w)
{
	if (!h->nw)
		return;
	h->nw->follow = w;
	hasten(c, h->nw);
}

void zkl__hold_confirm(zkl_client *c, struct zkl_hold *h)
{
	struct zkl_nodewatch *nw = h->nw;
	if (!nw || nw->stopped)
		return;
	nw->asked++;
	hasten(c, nw);
	zkl__waiter_wake(c, &nw->w);
}

bool zkl__hold_confirmed(const struct zkl_hold *h)
{
	return h->nw && !h->nw->stopped && h->nw->proven == h->nw->asked;
}

void zkl__hold_unwatch_node(zkl_client *c, struct zkl_hold *h)
{
	struct zkl_nodewatch *nw = h->nw;
	if (!nw)
		return;
	h->nw = NULL;
	nw->h = NULL;
	if (nw->wt)
		zkl__watch_settle_quiet(c, nw->wt); /* h goes now */
	nw->follow = NULL;
	nodewatch_free(c, nw);
}
