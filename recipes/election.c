/* Leader election: zkl_leader (Curator's LeaderLatch layout, "latch-" nodes) and
 * zkl_selector (Curator's LeaderSelector, a mutex, "lock-" nodes), on one core.
 *
 * Design notes
 *
 * The machine. An election is a loop waiter (zkl__waiter_enter_loop) for its whole life:
 * step() runs on the client's loop, with the client mutex held, whenever something it
 * waits for arrives: the engine's acquisition of our node ends, the read of our node is
 * answered, the watch on it fires, the session changes, the state listener saw the
 * connection drop, a thread asked for something (start, close, release, requeue,
 * interrupt, an acquire of the view), the selector's function returned, or a timer it
 * set is due. Nothing here blocks the loop; every user callback runs on the loop.
 *
 *   OUT ──join──▶ QUEUE ──our node heads the queue──▶ LEAD ──▶ ENDING ──▶ LEAVING ──▶ OUT
 *    ▲              └─ failed (an ACL, memory) ──▶ BACKOFF ──┘ (join again later)
 *
 * Who wants to be in the election: a started latch (until closed), a started selector
 * until its function has run (again with requeue), or the view's acquire (zkl_lock:
 * one leadership, given back with zkl_lock_release()). A latch is one or the other.
 *
 * Leading. Leadership is announced only after a read of our node shows that its
 * ephemeral owner is our current session (Curator reads it with getData too): the engine
 * says we are first, and the read proves the node is ours and alive. After a suspension
 * the read is done again before leadership is announced again. Leadership ends when:
 *
 *   - the session is gone: a hold (zkl__hold_add_locked) whose on_lost clears `leading`
 *     at once;
 *   - the connection drops (lose_on_suspend): the state listener clears `leading` at
 *     once and counts the suspension; a latch keeps its node and leads again once the
 *     read shows it still ours; a selector or a view's leadership ends;
 *   - our node is deleted from outside (the data watch on it);
 *   - close, a release of the view, an interrupt, or the selector's function returning.
 *
 * Revocation of a latch. A revoker writes "__REVOKE__" into the leader's node; the data
 * watch on it fires, the read that follows sees the request, and on_revoke runs once per
 * leadership (after gained). Nothing else changes: the application gives leadership up
 * when it is ready (an interrupt, a release of the view), so the node stays while it
 * still acts as leader.
 *
 * has_leadership turns false on the thread that learns of the end, before any callback.
 * A latch's gained and lost callbacks run on the loop, one at a time, so they alternate.
 * A selector's function runs on a thread started for each leadership (it may run long,
 * and the loop must go on); the node is deleted only once it has returned, so no other
 * participant leads while it still runs.
 *
 * Freeing. A handle freed on the loop's thread (in a callback) cannot wait for the
 * machine: it is marked, and the machine frees it once at rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/leader.h>

#include "election.h"
#include "predicates.h"

/* What a state's function tells step(). */
enum { GO_ON, WAIT, GONE };

/* ---- notifications from other threads (no lock held) ---- */

/* The session that held our node is gone (loop). */
static void hold_lost(struct zkl_hold *h, void *ctx)
{
	(void)h;
	struct election *e = ctx;
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	e->leading = false;
	zkl__waiter_wake(c, &e->w);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&c->mu);
	zkl__log(c, ZKL_LOG_WARN, "leadership of %s lost with the session", e->lock.path);
}

/* Connection states (loop). */
static void state_changed(zkl_client *c, zkl_state st, void *data)
{
	struct election *e = data;
	pthread_mutex_lock(&c->mu);
	if (st == ZKL_STATE_SUSPENDED) {
		e->suspended = true;
		e->suspensions++;
		if (e->lose_on_suspend)
			e->leading = false;
	} else if (st == ZKL_STATE_CONNECTED || st == ZKL_STATE_RECONNECTED) {
		e->suspended = false;
	}
	zkl__waiter_wake(c, &e->w);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&c->mu);
}

/* The engine's acquisition of our node ended (loop). */
static void queued(void *arg, int rc)
{
	struct election *e = arg;
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	e->queue_done = true;
	e->queue_rc = rc;
	snprintf(e->queue_error, sizeof e->queue_error, "%s", rc ? zkl_last_error() : "");
	zkl__waiter_wake(c, &e->w);
	pthread_mutex_unlock(&c->mu);
}

/* The selector's function, on a thread of its own. */
static void *worker_main(void *arg)
{
	struct election *e = arg;
	zkl_client *c = e->lock.c;
	e->fn(e->self, e->fn_data);
	pthread_mutex_lock(&c->mu);
	e->fn_done = true;
	e->leading = false; /* given up, though the node goes a moment later */
	zkl__waiter_wake(c, &e->w);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- the machine's helpers (c->mu held, loop) ---- */

/* Why the view's acquire under way must end now, or 0 if it goes on. */
static int view_check(struct election *e)
{
	zkl_client *c = e->lock.c;
	if (!e->view_pending)
		return 0;
	if (e->view_cancel)
		return ZKL_ECANCELED;
	if (e->closing || c->closing)
		return ZKL_ECLOSED;
	if (zkl__now_ms() >= e->view_deadline)
		return ZKL_ETIMEDOUT;
	return 0;
}

/* Whether the handle wants to be in the election. */
static bool want_in(struct election *e)
{
	if (e->closing || e->lock.c->closing)
		return false;
	if (e->started)
		return !(e->fn && e->idle);
	return (e->view_pending && view_check(e) == 0) || (e->view_held && !e->view_lost);
}

/* The machine is at rest: out of the election, not going in, nothing of it running. */
static bool at_rest(struct election *e)
{
	return e->st == E_OUT && !want_in(e) && !e->view_pending && e->calling == 0 &&
	       !e->worker_running;
}

/* Runs the latch's gained or revoke callback (both take the handle and data). */
static void call_user(struct election *e, void (*fn)(zkl_leader *, void *))
{
	if (!fn)
		return;
	zkl_client *c = e->lock.c;
	e->calling++;
	pthread_mutex_unlock(&c->mu);
	fn(e->self, e->data);
	pthread_mutex_lock(&c->mu);
	e->calling--;
}

static void call_lost(struct election *e, int reason)
{
	if (!e->on_lost)
		return;
	zkl_client *c = e->lock.c;
	e->calling++;
	pthread_mutex_unlock(&c->mu);
	e->on_lost(e->self, reason, e->data);
	pthread_mutex_lock(&c->mu);
	e->calling--;
}

/* Answers the view's acquire under way: its waiting thread, or its callback. */
static void view_answer(struct election *e, int rc, const char *error)
{
	zkl_client *c = e->lock.c;
	e->view_pending = false;
	if (rc == 0) {
		e->view_held = true;
		e->view_lost = false;
	}
	char saved[256];
	const char *path = e->lock.path;
	if (rc == 0)
		saved[0] = 0;
	else if (error && *error)
		snprintf(saved, sizeof saved, "%s", error);
	else if (rc == ZKL_ETIMEDOUT)
		snprintf(saved, sizeof saved, "timed out waiting for leadership of %s", path);
	else if (rc == ZKL_ECANCELED)
		snprintf(saved, sizeof saved, "acquire of leadership of %s was cancelled", path);
	else if (rc == ZKL_ECLOSED)
		snprintf(saved, sizeof saved, "the leader handle of %s is closing", path);
	else
		snprintf(saved, sizeof saved, "%s", zkl_strerror(rc));
	if (!e->view_async) {
		e->view_done = true;
		e->view_rc = rc;
		snprintf(e->view_error, sizeof e->view_error, "%s", saved);
		pthread_cond_broadcast(&e->cv);
		return;
	}
	if (!zkl__lock_async_ending(&e->async))
		return; /* the handle is being freed: nobody to tell */
	zkl_lock_acquired_fn fn = e->async.fn;
	void *data = e->async.fn_data;
	e->calling++;
	pthread_mutex_unlock(&c->mu);
	zkl__lock_async_call(&e->lock, fn, data, rc, saved);
	pthread_mutex_lock(&c->mu);
	e->calling--;
}

/* Leaves the election: deletes our node and waits for the answer (E_LEAVING), so that
 * close returns with the node gone; if that cannot be confirmed while the session may
 * live, the client's background task retries it until it succeeds or the session is
 * gone. Then `next` (E_OUT or E_BACKOFF). */
static int leave(zkl_client *c, struct election *e, enum election_state next)
{
	struct zkl_node *node = &e->node;
	e->after_leave = next;
	e->st = E_LEAVING;
	e->let_go = false;
	if (!node->path || node->gen != c->gen)
		return GO_ON; /* none, or gone with its session */
	if (c->closing || !c->sess->connected || zkl__now_ms() >= zkl__lost_at(c)) {
		zkl__task_delete(c, node->path, node->gen);
		return GO_ON;
	}
	int err = 0;
	char *path = node->path;
	pthread_mutex_unlock(&c->mu);
	struct zkl_op *op = zkl__op_delete(c, &e->w, path, &err);
	pthread_mutex_lock(&c->mu);
	if (!op) {
		zkl__task_delete(c, node->path, node->gen);
		return GO_ON;
	}
	e->leave_op = op;
	e->leave_until = zkl__now_ms() + zkl__session_timeout_ms(c);
	if (e->leave_until > zkl__lost_at(c))
		e->leave_until = zkl__lost_at(c);
	return GO_ON;
}

static int on_leaving(zkl_client *c, struct election *e)
{
	struct zkl_op *op = e->leave_op;
	if (op) {
		if (!op->done && !c->closing && zkl__now_ms() < e->leave_until) {
			zkl__waiter_wake_at(c, &e->w, e->leave_until);
			return WAIT;
		}
		const int zrc = op->done ? op->rc : ZOPERATIONTIMEOUT;
		zkl__op_put(c, op);
		e->leave_op = NULL;
		if (zkl__zk_transient(zrc))
			zkl__task_delete(c, e->node.path, e->node.gen);
		else if (zrc != ZOK && zrc != ZNONODE && !zkl__zk_session_gone(zrc))
			zkl__log(c, ZKL_LOG_ERROR, "cannot delete %s: %s", e->node.path, zerror(zrc));
	}
	zkl__node_clear(&e->node);
	e->st = e->after_leave;
	return GO_ON;
}

/* ---- the states ---- */

static int join(zkl_client *c, struct election *e)
{
	int timeout = ZKL_WAIT_FOREVER;
	if (e->view_pending && !e->started) {
		if (e->view_timeout == 0)
			timeout = 0;
		else if (e->view_deadline != INT64_MAX) {
			int64_t left = e->view_deadline - zkl__now_ms();
			timeout = left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left;
		}
	}
	zkl__data_free(&e->qdata);
	int rc = zkl__lock_data_copy(&e->lock, &e->qdata);
	if (rc == 0) {
		e->q = (struct zkl_queue){
			.c = c,
			.path = e->lock.path,
			.kind = e->kind,
			.data = e->qdata.bytes,
			.data_len = e->qdata.len,
			.pred = &zkl_pred_first,
			.owner = e,
			.folder_seen = &e->folder_seen,
		};
		e->queue_done = false;
		e->queue_canceled = false;
		e->st = E_QUEUE;
		pthread_mutex_unlock(&c->mu);
		rc = zkl__engine_start(&e->q, timeout, &e->node, queued, e);
		pthread_mutex_lock(&c->mu);
		if (rc == 0)
			return GO_ON;
	}
	/* on_queue() takes the failure as any other */
	e->queue_done = true;
	e->queue_rc = rc;
	snprintf(e->queue_error, sizeof e->queue_error, "%s", zkl_last_error());
	e->st = E_QUEUE;
	return GO_ON;
}

/* Takes e off the client's loop (c->mu held, at rest); returns whether its state
 * listener is still to be removed. */
static bool unregister(zkl_client *c, struct election *e)
{
	zkl__waiter_leave(c, &e->w);
	bool listening = e->listening;
	e->listening = false;
	return listening;
}

/* Frees e's handle, off the loop already (no lock held). */
static void dispose(struct election *e, bool listening)
{
	if (listening)
		zkl_client_remove_listener(e->lock.c, state_changed, e);
	zkl__data_free(&e->qdata);
	zkl__lock_dispose(&e->lock);
	pthread_cond_destroy(&e->cv);
	free(e->self);
}

static int on_out(zkl_client *c, struct election *e)
{
	if (e->view_pending) {
		int rc = view_check(e);
		if (rc != 0) {
			view_answer(e, rc, NULL);
			return GO_ON;
		}
	}
	if (want_in(e))
		return join(c, e);
	if (e->freeing && at_rest(e)) {
		bool listening = unregister(c, e);
		pthread_mutex_unlock(&c->mu);
		dispose(e, listening);
		pthread_mutex_lock(&c->mu);
		c->nfreeing--;
		pthread_cond_broadcast(&c->cv);
		return GONE;
	}
	return WAIT;
}

static int end_lead(struct election *e, int reason);

static int on_queue(zkl_client *c, struct election *e)
{
	if (!e->queue_done) {
		/* Wanted: the view's deadline (ahead, since want_in() says it has not passed)
		 * is the next thing to look at; else the cancel, whose end wakes us. Never a
		 * time past: the loop would run us again at once, and again. */
		if (want_in(e)) {
			if (e->view_pending && e->view_deadline != INT64_MAX)
				zkl__waiter_wake_at(c, &e->w, e->view_deadline);
		} else if (!e->queue_canceled) {
			e->queue_canceled = true;
			zkl__cancel_owner_locked(c, e);
		}
		return WAIT;
	}
	int rc = e->queue_rc;
	if (rc == 0) {
		if (!want_in(e))
			return leave(c, e, E_OUT);
		e->backoff_ms = 0;
		e->st = E_LEAD;
		e->in_lead = true;
		e->again = false;
		e->interrupt = false;
		e->revoke_seen = false;
		e->revoke_told = false;
		e->fn_done = false;
		e->verified = false;
		e->announced = false;
		e->susp_seen = e->suspensions;
		e->retry_at = 0;
		e->end = 0;
		e->hold = zkl__hold_new(e->node.path, e->node.gen, hold_lost, e);
		if (!e->hold)
			return end_lead(e, zkl__fail(ZKL_ENOMEM, "out of memory"));
		zkl__hold_add_locked(c, e->hold);
		if (e->view_pending && e->view_timeout == 0)
			e->view_deadline = zkl__now_ms() + zkl__session_timeout_ms(c); /* one look */
		return GO_ON;
	}
	e->st = E_OUT;
	if (e->view_pending && !e->started) {
		int why = view_check(e);
		view_answer(e, why ? why : rc, why ? NULL : e->queue_error);
		return GO_ON;
	}
	if (rc == ZKL_ECANCELED || rc == ZKL_ECLOSED || !want_in(e))
		return GO_ON;
	/* Not a wait that ran out: ZooKeeper refused (an ACL) or memory ran out. Try again,
	 * less and less often, until closed. */
	zkl__log(c, ZKL_LOG_ERROR, "cannot join the election at %s: %s: %s", e->lock.path,
	        zkl_strerror(rc), e->queue_error);
	e->backoff_ms = e->backoff_ms ? (e->backoff_ms * 2 > 10000 ? 10000 : e->backoff_ms * 2)
	                              : 250;
	e->retry_at = zkl__now_ms() + e->backoff_ms;
	e->st = E_BACKOFF;
	return GO_ON;
}

static int on_backoff(zkl_client *c, struct election *e)
{
	if (!want_in(e) || zkl__now_ms() >= e->retry_at) {
		e->st = E_OUT;
		return GO_ON;
	}
	zkl__waiter_wake_at(c, &e->w, e->retry_at);
	return WAIT;
}

static int end_lead(struct election *e, int reason)
{
	e->end = reason;
	e->st = E_ENDING;
	e->leading = false;
	e->token = 0;
	return GO_ON;
}

/* The read of our node has its answer: is the node there, and its ephemeral owner the
 * session it was made on, which is current? */
static int on_checked(zkl_client *c, struct election *e)
{
	struct zkl_op *op = e->check;
	e->check = NULL;
	int zrc = op->rc;
	bool ours = zrc == ZOK && op->s->gen == e->node.gen && op->s->gen == c->gen &&
	            op->stat.ephemeralOwner == op->s->id;
	if (ours && op->value && op->value_len == (int)strlen(ZKL_REVOKE_DATA) &&
	    memcmp(op->value, ZKL_REVOKE_DATA, strlen(ZKL_REVOKE_DATA)) == 0)
		e->revoke_seen = true;
	zkl__op_put(c, op);
	if (e->check_watch) {
		if (ours) {
			e->check_watch = false;
			return GO_ON; /* e->wt stays armed */
		}
		zkl__watch_put(c, e->wt);
		e->wt = NULL;
		e->check_watch = false;
	}
	if (zrc == ZOK) {
		if (!ours)
			return end_lead(e, ZKL_ELOST);
		e->verified = true;
		return GO_ON;
	}
	if (zrc == ZNONODE) {
		zkl__log(c, ZKL_LOG_WARN, "node %s was deleted from outside", e->node.path);
		return end_lead(e, ZKL_ENOTHELD);
	}
	if (zkl__zk_transient(zrc) || zkl__zk_class(zrc) == ZKL_ZK_CLOSING) {
		e->retry_at = zkl__now_ms() + 100;
		return GO_ON;
	}
	if (zkl__zk_session_gone(zrc))
		return end_lead(e, ZKL_ELOST);
	zkl__log(c, ZKL_LOG_ERROR, "cannot read %s: %s", e->node.path, zerror(zrc));
	return end_lead(e, ZKL_EZK);
}

/* Sends the read of our node: with a data watch if none is armed, else a plain exists. */
static int send_check(zkl_client *c, struct election *e)
{
	struct zkl_watch *nw = NULL;
	if (!e->wt && !(nw = zkl__watch_new(c, &e->w))) {
		e->retry_at = zkl__now_ms() + 100;
		return GO_ON;
	}
	int err = 0;
	char *path = e->node.path;
	pthread_mutex_unlock(&c->mu);
	struct zkl_op *op = nw ? zkl__op_get(c, &e->w, path, nw, &err)
	                       : zkl__op_exists(c, &e->w, path, NULL, &err);
	pthread_mutex_lock(&c->mu);
	if (!op) {
		if (nw)
			zkl__watch_put(c, nw);
		if (err == ZKL_ECLOSED)
			return end_lead(e, ZKL_ELOST);
		e->retry_at = zkl__now_ms() + 100;
		return GO_ON;
	}
	e->check = op;
	e->check_until = zkl__now_ms() + zkl__session_timeout_ms(c);
	if (nw) {
		e->wt = nw;
		e->check_watch = true;
	}
	return GO_ON;
}

static int announce(zkl_client *c, struct election *e)
{
	e->announced = true;
	e->leading = true;
	e->token = e->node.czxid;
	pthread_cond_broadcast(&e->cv);
	if (e->fn) {
		e->fn_done = false;
		e->loss_told = false;
		e->worker_running = pthread_create(&e->worker, NULL, worker_main, e) == 0;
		if (!e->worker_running) {
			zkl__log(c, ZKL_LOG_ERROR, "cannot start a thread for the leader of %s",
			        e->lock.path);
			return end_lead(e, ZKL_ENOMEM);
		}
		return GO_ON;
	}
	e->gained = true;
	call_user(e, e->on_gained);
	/* The view's acquire is answered after the latch's callback, if it still leads
	 * (else the machine goes on: the leadership ends, and the acquire waits on). */
	if (e->view_pending && e->leading && view_check(e) == 0)
		view_answer(e, 0, NULL);
	return GO_ON;
}

static int on_lead(zkl_client *c, struct election *e)
{
	/* A leadership released without waiting ends before the view leads again. */
	if (e->let_go)
		return end_lead(e, ZKL_ECLOSED);
	if (!want_in(e))
		return end_lead(e, e->view_pending ? view_check(e) : ZKL_ECLOSED);
	/* Past the loss deadline the session may be gone already: the loop gives it up on
	 * this turn, after the waiters run, so a leadership read now must not begin (an
	 * answer read after a long stop proves nothing of the session today). */
	if (zkl__hold_lost(e->hold) || e->node.gen != c->gen || zkl__now_ms() >= zkl__lost_at(c))
		return end_lead(e, ZKL_ELOST);
	if (e->interrupt)
		return end_lead(e, ZKL_ECANCELED);
	if (e->fn_done)
		return end_lead(e, 0);
	if (e->lose_on_suspend && e->susp_seen != e->suspensions) {
		/* The connection dropped since we last looked: read the node again before
		 * leading again. */
		e->susp_seen = e->suspensions;
		e->verified = false;
		if (e->announced) {
			if (e->fn || !e->started)
				return end_lead(e, ZKL_ECONNLOSS);
			e->announced = false;
			e->leading = false;
			e->token = 0;
			pthread_cond_broadcast(&e->cv);
			if (e->gained) {
				e->gained = false;
				call_lost(e, ZKL_ECONNLOSS);
			}
			return GO_ON;
		}
	}
	if (e->check) {
		if (e->check->done)
			return on_checked(c, e);
		if (zkl__now_ms() < e->check_until) {
			zkl__waiter_wake_at(c, &e->w, e->check_until);
			return WAIT;
		}
		/* No answer in a session timeout: drop it and look again. */
		zkl__op_put(c, e->check);
		e->check = NULL;
		if (e->check_watch) {
			zkl__watch_put(c, e->wt);
			e->wt = NULL;
			e->check_watch = false;
		}
		return GO_ON;
	}
	if (e->announced && e->revoke_seen && !e->revoke_told) {
		e->revoke_told = true;
		zkl__log(c, ZKL_LOG_INFO, "revocation of leadership of %s requested", e->lock.path);
		call_user(e, e->on_revoke);
		return GO_ON;
	}
	if (e->wt && e->wt->fired) {
		/* Deleted or changed: look again (and arm a new watch). */
		zkl__watch_put(c, e->wt);
		e->wt = NULL;
		e->verified = false;
	}
	int64_t now = zkl__now_ms();
	if (!e->verified && c->sess->connected && now >= e->retry_at)
		return send_check(c, e);
	if (e->verified && !e->announced && !(e->lose_on_suspend && e->suspended))
		return announce(c, e);
	if (!e->verified && e->retry_at > now)
		zkl__waiter_wake_at(c, &e->w, e->retry_at);
	if (e->view_pending && e->view_deadline != INT64_MAX)
		zkl__waiter_wake_at(c, &e->w, e->view_deadline);
	return WAIT;
}

/* Whether a leadership that ended for this reason was lost (not given up). */
static bool lost_reason(int end)
{
	return end != 0 && end != ZKL_ECANCELED && end != ZKL_ECLOSED;
}

static int on_ending(zkl_client *c, struct election *e)
{
	if (e->fn && e->announced && !e->loss_told && lost_reason(e->end)) {
		/* A selector's loss is told at once, on the loop, while its function may
		 * still run (it sees has_leadership false). */
		e->loss_told = true;
		e->calling++;
		pthread_mutex_unlock(&c->mu);
		zkl__lock_report_lost(&e->lock, e->end);
		pthread_mutex_lock(&c->mu);
		e->calling--;
	}
	if (e->worker_running) {
		if (!e->fn_done) {
			/* The function sees has_leadership false; the node stays until it
			 * returns, and the thread wakes us then. */
			return WAIT;
		}
		pthread_t worker = e->worker;
		pthread_mutex_unlock(&c->mu);
		pthread_join(worker, NULL);
		pthread_mutex_lock(&c->mu);
		e->worker_running = false;
	}
	int end = e->end;
	bool gained = e->gained;
	e->announced = e->gained = false;
	if (e->view_held && !e->view_lost && end != ZKL_ECLOSED) {
		e->view_lost = true;
		e->calling++;
		pthread_mutex_unlock(&c->mu);
		zkl__lock_report_lost(&e->lock, end);
		pthread_mutex_lock(&c->mu);
		e->calling--;
	}
	if (gained && (end != ZKL_ECLOSED || e->notify_on_close))
		call_lost(e, end);
	if (e->check) {
		zkl__op_put(c, e->check);
		e->check = NULL;
	}
	if (e->wt) {
		zkl__watch_put(c, e->wt);
		e->wt = NULL;
	}
	e->check_watch = false;
	if (e->hold) {
		zkl__hold_end_locked(c, e->hold);
		e->hold = NULL;
	}
	e->in_lead = false;
	if (e->fn && !e->requeue && !e->again)
		e->idle = true;
	e->again = false;
	if ((end == ZKL_EZK || end == ZKL_ENOMEM) && want_in(e)) {
		/* Do not spin on a failure that may last: wait a little first. */
		e->retry_at = zkl__now_ms() + 1000;
		return leave(c, e, E_BACKOFF);
	}
	return leave(c, e, E_OUT);
}

static void step(zkl_client *c, struct zkl_waiter *w)
{
	struct election *e = (struct election *)(void *)((char *)w - offsetof(struct election, w));
	int rc = GO_ON;
	while (rc == GO_ON) {
		switch (e->st) {
		case E_OUT: rc = on_out(c, e); break;
		case E_QUEUE: rc = on_queue(c, e); break;
		case E_BACKOFF: rc = on_backoff(c, e); break;
		case E_LEAD: rc = on_lead(c, e); break;
		case E_ENDING: rc = on_ending(c, e); break;
		case E_LEAVING: rc = on_leaving(c, e); break;
		}
	}
	if (rc != GONE)
		pthread_cond_broadcast(&e->cv);
}

/* ---- the core's functions ---- */

/* Waits (c->mu held) until done(e) or, with a deadline, until it passes (returns false
 * then). On the application's loop thread it runs the loop meanwhile. */
static bool wait_for(struct election *e, bool (*done)(struct election *), int64_t deadline)
{
	zkl_client *c = e->lock.c;
	while (!done(e)) {
		if (zkl__now_ms() >= deadline)
			return false;
		if (!zkl__loop_step(c))
			zkl__cond_wait_until(&e->cv, &c->mu, deadline);
	}
	return true;
}

static const struct zkl_lock_ops leader_ops;

int election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                  enum zkl_kind kind, void *self)
{
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(path, "election path");
	const char *name = kind == ZKL_KIND_LOCK ? "selector" : "leader";
	if (rc != 0 || (rc = zkl__lock_init(&e->lock, &leader_ops, name, c, path)) != 0)
		return rc;
	if (id && (rc = zkl_lock_set_data(&e->lock, id, strlen(id))) != 0) {
		zkl__lock_dispose(&e->lock);
		return rc;
	}
	e->kind = kind;
	e->self = self;
	zkl__cond_init(&e->cv);
	return 0;
}

int election_attach(struct election *e)
{
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	e->suspended = c->state == ZKL_STATE_SUSPENDED;
	pthread_mutex_unlock(&c->mu);
	int rc = zkl_client_add_listener(c, state_changed, e);
	if (rc != 0) {
		pthread_cond_destroy(&e->cv);
		zkl__lock_dispose(&e->lock);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	e->listening = true;
	zkl__waiter_enter_loop(c, &e->w, NULL, step);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int election_start(struct election *e)
{
	zkl_client *c = e->lock.c;
	const char *what = e->fn ? "selector" : "latch";
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	if (e->closing)
		rc = zkl__fail(ZKL_ECLOSED, "the %s of %s is closed", what, e->lock.path);
	else if (e->started)
		rc = zkl__fail(ZKL_EBUSY, "the %s of %s was started already", what, e->lock.path);
	else if (e->view_pending || e->view_held)
		rc = zkl__fail(ZKL_EBUSY, "leadership of %s is taken through its lock view: "
		              "release it first", e->lock.path);
	else if (c->closing)
		rc = zkl__fail(ZKL_ECLOSED, "the client is closing");
	if (rc == 0) {
		e->started = true;
		zkl__waiter_wake(c, &e->w);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* Whether the calling thread must not wait for the machine (mu held): one that runs the
 * loop (a callback, or the application's loop thread, which must never wait for the
 * server), or the selector's function. */
static bool must_not_wait(struct election *e)
{
	zkl_client *c = e->lock.c;
	return zkl__runs_loop(c) ||
	       (e->worker_running && pthread_equal(pthread_self(), e->worker));
}

int election_close(struct election *e)
{
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	e->closing = true;
	e->leading = false;
	zkl__waiter_wake(c, &e->w);
	if (!must_not_wait(e))
		wait_for(e, at_rest, INT64_MAX);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

bool election_free(struct election *e)
{
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	bool on_loop = must_not_wait(e);
	pthread_mutex_unlock(&c->mu);
	if (on_loop) {
		/* The machine frees the handle once at rest (a selector's function, which may
		 * be the caller, has returned and its thread is joined by then); a callback of
		 * the view's acquire that runs now learns the handle is gone. */
		zkl__lock_async_drain(&e->lock);
		pthread_mutex_lock(&c->mu);
		e->closing = true;
		e->leading = false;
		e->view_cancel = true;
		e->freeing = true;
		c->nfreeing++;
		zkl__waiter_wake(c, &e->w);
		pthread_mutex_unlock(&c->mu);
		return true;
	}
	pthread_mutex_lock(&c->mu);
	e->view_cancel = true;
	pthread_mutex_unlock(&c->mu);
	election_close(e);
	zkl__lock_async_drain(&e->lock);
	pthread_mutex_lock(&c->mu);
	bool listening = unregister(c, e);
	pthread_mutex_unlock(&c->mu);
	dispose(e, listening);
	return false;
}

int election_requeue(struct election *e)
{
	zkl_client *c = e->lock.c;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	if (e->closing)
		rc = zkl__fail(ZKL_ECLOSED, "the selector of %s is closed", e->lock.path);
	else if (!e->started)
		rc = zkl__fail(ZKL_EINVAL, "the selector of %s was not started", e->lock.path);
	else if (e->idle) {
		e->idle = false;
		zkl__waiter_wake(c, &e->w);
	} else if (e->in_lead) {
		e->again = true;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void election_interrupt(struct election *e)
{
	zkl_client *c = e->lock.c;
	pthread_mutex_lock(&c->mu);
	if (e->leading && e->started) {
		e->interrupt = true;
		e->leading = false;
		zkl__waiter_wake(c, &e->w);
		pthread_cond_broadcast(&e->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

static bool is_leading(struct election *e)
{
	return e->leading || e->closing;
}

static bool not_leading(struct election *e)
{
	return !e->leading;
}

int election_await(struct election *e, bool want, int timeout_ms)
{
	zkl_client *c = e->lock.c;
	const char *what = e->fn ? "selector" : "latch";
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	if (want && !e->started && !e->closing) {
		rc = zkl__fail(ZKL_EINVAL, "the %s of %s was not started", what, e->lock.path);
	} else if (timeout_ms != 0 && zkl__runs_loop(c)) {
		rc = zkl__fail(ZKL_EDEADLK, "cannot wait for leadership of %s on the thread that "
		              "runs the client's loop (in a callback, or the application's loop "
		              "thread)", e->lock.path);
	} else {
		int64_t deadline = timeout_ms == 0 ? 0 : zkl__deadline(timeout_ms);
		bool ok = wait_for(e, want ? is_leading : not_leading, deadline);
		if (want && e->closing)
			rc = zkl__fail(ZKL_ECLOSED, "the %s of %s is closed", what, e->lock.path);
		else if (!ok)
			rc = want ? zkl__fail(ZKL_ETIMEDOUT, "not the leader of %s", e->lock.path)
			          : ZKL_ETIMEDOUT;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The fencing token of the current leadership, or ZKL_ENOTHELD. */
static int64_t election_token(struct election *e)
{
	pthread_mutex_lock(&e->lock.c->mu);
	int64_t t = e->leading ? e->token : ZKL_ENOTHELD;
	pthread_mutex_unlock(&e->lock.c->mu);
	return t;
}

static int election_participants(struct election *e, zkl_participant **out,
                                 size_t *count)
{
	if (!out || !count)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl__engine_participants(e->lock.c, e->lock.path, 1, out, count);
}

int election_leader_id(struct election *e, char **id)
{
	if (!id)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*id = NULL;
	zkl_participant *list;
	size_t n;
	int rc = zkl__engine_participants(e->lock.c, e->lock.path, 1, &list, &n);
	if (rc != 0)
		return rc;
	if (n == 0)
		return zkl__fail(ZKL_ENOTHELD, "nobody takes part in the election at %s",
		                e->lock.path);
	*id = list[0].data;
	list[0].data = NULL;
	zkl_participants_free(list, n);
	if (!*id)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	return 0;
}

/* ---- the view: one leadership per acquire ---- */

#define ELECTION(l) ((struct election *)(void *)(l))

/* Begins an acquire of the view (c->mu held). */
static int view_begin(struct election *e, int timeout_ms, bool async)
{
	zkl_client *c = e->lock.c;
	const char *path = e->lock.path;
	if (e->fn)
		return zkl__fail(ZKL_ENOTSUP, "a selector of %s leads through zkl_selector_start() "
		                "and runs its function; to hold leadership as a lock, use a "
		                "zkl_leader's zkl_leader_lock()", path);
	if (e->started)
		return zkl__fail(ZKL_EBUSY, "the latch of %s was started with zkl_leader_start(): "
		                "it leads by itself (see zkl_leader_await())", path);
	if (e->closing || c->closing)
		return zkl__fail(ZKL_ECLOSED, "the leader handle of %s is closed", path);
	if (e->view_lost)
		return zkl__fail(ZKL_ELOST, "leadership of %s was lost: release it first", path);
	if (e->view_held)
		return zkl__fail(ZKL_EBUSY, "already the leader of %s: release it first", path);
	if (e->view_pending)
		return zkl__fail(ZKL_EBUSY, "an acquire of leadership of %s is under way", path);
	e->view_pending = true;
	e->view_async = async;
	e->view_cancel = false;
	e->view_done = false;
	e->view_timeout = timeout_ms;
	e->view_deadline = timeout_ms > 0 ? zkl__deadline(timeout_ms) : INT64_MAX;
	zkl__waiter_wake(c, &e->w);
	return 0;
}

static int leader_acquire(zkl_lock *lk, int timeout_ms)
{
	struct election *e = ELECTION(lk);
	zkl_client *c = lk->c;
	pthread_mutex_lock(&c->mu);
	if (zkl__runs_loop(c)) {
		pthread_mutex_unlock(&c->mu);
		return zkl__fail(ZKL_EDEADLK, "cannot wait for leadership of %s on the thread that "
		                "runs the client's loop (in a callback, or the application's loop "
		                "thread): nothing would run the election", lk->path);
	}
	int rc = view_begin(e, timeout_ms, false);
	if (rc == 0) {
		while (!e->view_done)
			pthread_cond_wait(&e->cv, &c->mu);
		e->view_done = false;
		rc = e->view_rc;
		if (rc != 0)
			zkl__fail(rc, "%s", e->view_error);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static int leader_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	struct election *e = ELECTION(lk);
	zkl_client *c = lk->c;
	pthread_mutex_lock(&c->mu);
	int rc = zkl__lock_async_claim(lk, &e->async, fn, data);
	if (rc == 0 && (rc = view_begin(e, timeout_ms, true)) != 0)
		zkl__lock_async_unclaim(lk, &e->async);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* The node of the leadership released is gone, or its delete is out (without
 * confirm_release). */
static bool left_lead(struct election *e)
{
	if (e->st == E_LEAVING)
		return e->leave_op && !e->lock.c->confirm_release;
	return e->st != E_LEAD && e->st != E_ENDING;
}

static int leader_release(zkl_lock *lk)
{
	struct election *e = ELECTION(lk);
	zkl_client *c = lk->c;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	if (e->fn) {
		rc = zkl__fail(ZKL_ENOTSUP, "a selector's leadership of %s ends when its function "
		              "returns (or with zkl_selector_interrupt())", lk->path);
	} else if (!e->view_held) {
		rc = zkl__fail(ZKL_ENOTHELD, "leadership of %s was not taken through this lock",
		              lk->path);
	} else if (e->view_lost) {
		e->view_held = e->view_lost = false;
		rc = zkl__fail(ZKL_ELOST, "leadership of %s had been lost", lk->path);
	} else {
		e->view_held = false;
		e->leading = false;
		zkl__waiter_wake(c, &e->w);
		if (!must_not_wait(e))
			wait_for(e, left_lead, INT64_MAX);
		else if (e->st == E_LEAD)
			e->let_go = true;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static void leader_cancel(zkl_lock *lk)
{
	struct election *e = ELECTION(lk);
	pthread_mutex_lock(&lk->c->mu);
	if (e->view_pending) {
		e->view_cancel = true;
		zkl__waiter_wake(lk->c, &e->w);
	}
	pthread_mutex_unlock(&lk->c->mu);
}

static bool leader_is_held(zkl_lock *lk)
{
	struct election *e = ELECTION(lk);
	pthread_mutex_lock(&lk->c->mu);
	bool held = e->leading && (e->started || (e->view_held && !e->view_lost));
	pthread_mutex_unlock(&lk->c->mu);
	return held;
}

static int64_t leader_token(zkl_lock *lk)
{
	int64_t t = election_token(ELECTION(lk));
	if (t == ZKL_ENOTHELD)
		return zkl__fail(ZKL_ENOTHELD, "not the leader of %s", lk->path);
	return t;
}

static const char *leader_node(zkl_lock *lk)
{
	struct election *e = ELECTION(lk);
	if (e->view_lost || e->let_go || (e->st != E_QUEUE && e->st != E_LEAD))
		return NULL;
	return e->node.path;
}

static bool leader_holds_async(zkl_lock *lk)
{
	return ELECTION(lk)->view_held;
}

static int leader_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	return election_participants(ELECTION(lk), out, count);
}

static const struct zkl_lock_ops leader_ops = {
	.acquire = leader_acquire,
	.start = leader_start,
	.release = leader_release,
	.cancel = leader_cancel,
	.is_held = leader_is_held,
	.token = leader_token,
	.node = leader_node,
	.holds_async = leader_holds_async,
	.participants = leader_participants,
};
