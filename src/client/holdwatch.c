/* The watch a hold keeps on its own node.
 *
 * Design notes
 *
 * A lock node can go while its session lives: anyone with the folder's ACL may delete
 * it (an operator "clearing a stuck lock" in ZooKeeper's shell). The next contender then
 * holds as soon as it hears of it, so the holder must hear of it as soon as the server
 * says so: from the grant on, the loop keeps an exists watch on the node of every hold
 * the engine makes (zkl__hold_watch_node), and marks the hold lost, as an expiry does,
 * when the server says the node is gone: the watch fires with ZOO_DELETED_EVENT, or the
 * exists that sets it is answered ZNONODE (the node went before the watch was set). The
 * loss is then reported on the same turn of the loop as any other (holds_notify): the
 * lost callback, is_held false, release ZKL_ELOST.
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
 *
 * Everything here runs on the loop with mu held; mu is let go only to send the exists,
 * and a hold unlinked meanwhile (busy) leaves the freeing to the sender. */
#include <stdlib.h>

#include "internal.h"

struct zkl_nodewatch {
	struct zkl_waiter w;     /* first */
	struct zkl_hold *h;      /* NULL once the hold is unlinked */
	struct zkl_watch *wt;    /* the watch set (or being set), or NULL */
	struct zkl_op *op;       /* the exists under way, or NULL */
	bool busy;               /* run() has let go of mu to send */
	bool stopped;            /* out of the waiters: nothing more to watch */
};

static void nodewatch_stop(zkl_client *c, struct zkl_nodewatch *nw)
{
	if (!nw->stopped)
		zkl__waiter_leave(c, &nw->w);
	nw->stopped = true;
	zkl__op_put(c, nw->op);
	nw->op = NULL;
	if (nw->wt) {
		zkl__watch_settle_quiet(c, nw->wt);
		zkl__watch_put(c, nw->wt);
	}
	nw->wt = NULL;
}

static void nodewatch_free(zkl_client *c, struct zkl_nodewatch *nw)
{
	nodewatch_stop(c, nw);
	free(nw);
}

/* The server says the node is gone while the hold lasts. */
static void node_gone(zkl_client *c, struct zkl_nodewatch *nw)
{
	struct zkl_hold *h = nw->h;
	if (atomic_load(&h->state) != ZKL_HOLD_ENDED && !atomic_load(&h->lost))
		zkl__log(c, ZKL_LOG_WARN, "the node %s of a lock held was deleted by someone else: "
		        "the lock is lost", h->path);
	zkl__hold_mark_lost(c, h);
	nodewatch_stop(c, nw);
}

static void nodewatch_run(zkl_client *c, struct zkl_waiter *w)
{
	struct zkl_nodewatch *nw = (struct zkl_nodewatch *)w;
	struct zkl_hold *h = nw->h;
	if (atomic_load(&h->state) == ZKL_HOLD_ENDED || atomic_load(&h->lost) ||
	    atomic_load(&h->releasing) || h->gen != c->gen) {
		nodewatch_stop(c, nw); /* nothing left to tell */
		return;
	}
	if (nw->op && nw->op->done) {
		const int rc = nw->op->rc;
		zkl__op_put(c, nw->op);
		nw->op = NULL;
		if (rc == ZNONODE) {
			node_gone(c, nw);
			return;
		}
		if (rc != ZOK) {
			/* No watch was set: set it again (connection loss), or let the session's
			 * end tell the loss. */
			zkl__watch_settle_quiet(c, nw->wt);
			zkl__watch_put(c, nw->wt);
			nw->wt = NULL;
		}
	}
	if (nw->wt && nw->wt->fired) {
		const int event = nw->wt->event;
		zkl__watch_settle_quiet(c, nw->wt);
		zkl__watch_put(c, nw->wt);
		nw->wt = NULL;
		if (event == ZOO_DELETED_EVENT) {
			node_gone(c, nw);
			return;
		}
		/* Its data changed (a revocation request, a peer's write): watch it again. */
	}
	if (nw->wt || nw->op || c->closing || !c->sess->connected)
		return; /* armed, or waiting: a session event wakes every waiter */
	struct zkl_watch *wt = zkl__watch_new(c, &nw->w);
	if (!wt) {
		zkl__waiter_wake_at(c, &nw->w, zkl__now_ms() + 100);
		return;
	}
	/* Its events once the owner's release has begun are no news: they do not wake
	 * the loop (zkl_watch.quiet_if; the hold's unwatch settles it before the hold
	 * goes, busy or not). */
	wt->quiet_if = &h->releasing;
	int err = 0;
	nw->busy = true;
	nw->wt = wt;
	pthread_mutex_unlock(&c->mu);
	/* Nobody waits for its success: only a ZNONODE (the node went before the watch
	 * was set) or a failure wakes the loop at once. */
	struct zkl_op *op = zkl__op_exists_quiet(c, &nw->w, h->path, wt, &err);
	pthread_mutex_lock(&c->mu);
	nw->busy = false;
	nw->op = op;
	if (!op) {
		zkl__watch_settle_quiet(c, wt);
		zkl__watch_put(c, wt);
		nw->wt = NULL;
	}
	if (!nw->h) {
		nodewatch_free(c, nw); /* the hold went meanwhile */
		return;
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
	h->nw = nw;
	zkl__waiter_enter_loop(c, &nw->w, nw, nodewatch_run);
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
	if (!nw->busy)
		nodewatch_free(c, nw);
}
