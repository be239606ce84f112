/* Leader election: zkl_leader (Curator's LeaderLatch layout, "latch-" nodes) and
 * zkl_selector (Curator's LeaderSelector, a mutex, "lock-" nodes), on one core.
 *
 * Design notes
 *
 * What it takes from the engine. Our node is an engine acquisition (zkl__engine_start,
 * the predicate "first"), and the engine makes its hold at the grant (zkl_queue.on_lost),
 * as it does a mutex's. The hold is what watches our node while we lead (the engine's
 * hold.c): its exists shows the node ours (there, its ephemeral owner our session)
 * before leadership is announced, and again after a suspension (zkl__node_confirm); its
 * loss is the end of leadership, with its session or with its node deleted from outside
 * (zkl__node_stands). A latch told of revocation asks the engine for the revocation
 * watch a mutex has (zkl_queue.on_revoke). The election keeps no watch and sends no
 * read of its own: what is left here is recipe logic, the announce and its callbacks,
 * the selector's thread, requeue, backoff and leaving.
 *
 * The machine. An election is an engine stage (zkl__stage_start) for its whole life:
 * step() runs on the client's loop whenever something it waits for arrives: the
 * engine's acquisition of our node ends, the hold shows our node ours (zkl__node_follow)
 * or is lost, a revocation is asked, the state listener saw the connection drop, a
 * thread asked for something (start, close, release, requeue, interrupt, an acquire of
 * the view), the selector's function returned, or a timer it set is due. Nothing here
 * blocks the loop; every user callback runs on the loop (zkl__loop_callout).
 *
 *   OUT ──join──▶ QUEUE ──our node heads the queue──▶ LEAD ──▶ ENDING ──▶ LEAVING ──▶ OUT
 *    ▲              └─ failed (an ACL, memory) ──▶ BACKOFF ──┘ (join again later)
 *
 * One owner. Only the loop touches the election's state. A public call from another
 * thread hands the loop a call and waits for its answer (zkl__loop_run,
 * election_calls.c); a blocking one then waits for a condition of the state on the
 * stage (zkl__stage_wait), which the machine tells after each of its steps; what
 * other threads read without asking (whether we lead, the token, our node) the loop
 * publishes (zkl__election_publish). The notifications below come on the loop too, or,
 * for the selector's function, from its thread, as calls.
 *
 * Who wants to be in the election: a started latch (until closed), a started selector
 * until its function has run (again with requeue), or the view's acquire (zkl_lock:
 * one leadership, given back with zkl_lock_release()). A latch is one or the other.
 *
 * Leading. Leadership is announced only once the hold's watch has shown our node ours
 * (zkl__node_confirmed; Curator reads its node too): the engine says we are first, and
 * the exists sent after the grant proves the node is ours and alive. After a suspension
 * a new proof is asked for, and waited for, before leadership is announced again.
 * Leadership ends when:
 *
 *   - the hold is lost: its session is gone (ZKL_ELOST), or its watch saw our node
 *     deleted from outside (ZKL_ENOTHELD, once an answer on the session says that it
 *     lived on: a session closed from elsewhere deletes the node too, and that is
 *     ZKL_ELOST), or found it owned by another session (ZKL_ELOST); its on_lost clears
 *     `leading` at once, and the callbacks follow once the reason is known;
 *   - the connection drops (lose_on_suspend): the state listener clears `leading` at
 *     once and counts the suspension; a latch keeps its node and leads again once the
 *     hold shows it still ours; a selector or a view's leadership ends;
 *   - close, a release of the view, an interrupt, or the selector's function returning.
 *
 * Revocation of a latch. A revoker writes "__REVOKE__" into the leader's node; the
 * engine's revocation watch on it (revwatch.c, armed while the node lives, as a
 * mutex's) tells us, and on_revoke runs once per node, after gained (a request made
 * while queued is told as soon as we lead). Nothing else changes: the application gives
 * leadership up when it is ready (an interrupt, a release of the view), so the node
 * stays while it still acts as leader.
 *
 * has_leadership turns false on the loop as soon as the end is known, before any
 * callback. A latch's gained and lost callbacks run on the loop, one at a time, so they
 * alternate. A selector's function runs on a thread started for each leadership (it may
 * run long, and the loop must go on); the node is deleted only once it has returned, so
 * no other participant leads while it still runs.
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

/* ---- what the loop publishes (loop) ---- */

void zkl__election_publish(struct election *e)
{
	bool held = e->leading && (e->started || (e->view_held && !e->view_lost));
	atomic_store(&e->held_pub, held);
	atomic_store(&e->token_pub, e->leading ? e->token : (int64_t)ZKL_ENOTHELD);
	const char *node = e->view_lost || e->let_go || (e->st != E_QUEUE && e->st != E_LEAD)
	                   ? NULL : e->node.path;
	/* Only the loop writes node_pub: it reads it without pub_mu. */
	if (node ? e->node_pub && strcmp(node, e->node_pub) == 0 : !e->node_pub)
		return;
	char *copy = node ? strdup(node) : NULL; /* without memory: no node to show */
	pthread_mutex_lock(&e->pub_mu);
	char *old = e->node_pub;
	e->node_pub = copy;
	pthread_mutex_unlock(&e->pub_mu);
	free(old);
}

void zkl__election_wake(struct election *e)
{
	zkl__stage_wake(e->lock.c, &e->stage);
}

/* ---- notifications (loop, no lock held) ---- */

static void hold_lost_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	e->leading = false;
	zkl__election_publish(e);
	zkl__election_wake(e);
}

/* The hold the engine made at the grant is lost: the session that held our node is
 * gone, or the watch on our node (holds.c) saw it deleted by someone else. */
static void hold_lost(struct zkl_hold *h, void *ctx)
{
	struct election *e = ctx;
	zkl__loop_run(e->lock.c, hold_lost_run, e);
	zkl__log(e->lock.c, ZKL_LOG_WARN, "leadership of %s lost %s", e->lock.path,
	        zkl__loss_outside(h) ? "with its node, deleted from outside" : "with the session");
}

static void revoked_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	e->revoke_seen = true;
	zkl__election_wake(e);
}

/* A revoker asks for our node (the engine's revocation watch, as a mutex's). */
static void revoked(void *ctx, const char *path)
{
	(void)path;
	struct election *e = ctx;
	zkl__loop_run(e->lock.c, revoked_run, e);
}

struct state_seen {
	struct election *e;
	zkl_state st;
};

static void state_run(zkl_client *c, void *arg)
{
	(void)c;
	struct state_seen *k = arg;
	struct election *e = k->e;
	if (!e->listening)
		return; /* not on the loop yet: zkl__election_attach() reads the state */
	if (k->st == ZKL_STATE_SUSPENDED) {
		e->suspended = true;
		e->suspensions++;
		if (e->lose_on_suspend)
			e->leading = false;
	} else if (k->st == ZKL_STATE_CONNECTED || k->st == ZKL_STATE_RECONNECTED) {
		e->suspended = false;
	}
	zkl__election_publish(e);
	zkl__election_wake(e);
}

/* Connection states. */
static void state_changed(zkl_client *c, zkl_state st, void *data)
{
	struct state_seen k = {.e = data, .st = st};
	zkl__loop_run(c, state_run, &k);
}

struct queued_end {
	struct election *e;
	int rc;
	const char *error;
};

static void queued_run(zkl_client *c, void *arg)
{
	(void)c;
	struct queued_end *k = arg;
	struct election *e = k->e;
	e->queue_done = true;
	e->queue_rc = k->rc;
	snprintf(e->queue_error, sizeof e->queue_error, "%s", k->error);
	zkl__election_wake(e);
}

/* The engine's acquisition of our node ended. */
static void queued(void *arg, int rc)
{
	struct election *e = arg;
	struct queued_end k = {.e = e, .rc = rc, .error = rc ? zkl_last_error() : ""};
	zkl__loop_run(e->lock.c, queued_run, &k);
}

/* The election whose selector function runs on this thread. */
static _Thread_local const struct election *in_worker;

static void worker_done_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	e->fn_done = true;
	e->leading = false; /* given up, though the node goes a moment later */
	zkl__election_publish(e);
	zkl__election_wake(e);
}

/* The selector's function, on a thread of its own. */
static void *worker_main(void *arg)
{
	struct election *e = arg;
	in_worker = e;
	e->fn(e->self, e->fn_data);
	in_worker = NULL;
	zkl__loop_run(e->lock.c, worker_done_run, e);
	return NULL;
}

bool zkl__election_must_not_wait(struct election *e)
{
	return in_worker == e || zkl__is_loop_thread(e->lock.c);
}

/* ---- the machine's helpers (loop) ---- */

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

bool zkl__election_want_in(struct election *e)
{
	if (e->closing || e->lock.c->closing)
		return false;
	if (e->started)
		return !(e->fn && e->idle);
	return (e->view_pending && view_check(e) == 0) || (e->view_held && !e->view_lost);
}

bool zkl__election_at_rest(struct election *e)
{
	return e->st == E_OUT && !zkl__election_want_in(e) && !e->view_pending &&
	       e->calling == 0 && !e->worker_running;
}

/* Runs fn(arg), the application's code, from a step, as a callout (zkl__loop_callout),
 * and what the application may read published first. */
static void call_out(struct election *e, void (*fn)(void *arg), void *arg)
{
	e->calling++;
	zkl__election_publish(e);
	zkl__loop_callout(e->lock.c, fn, arg);
	e->calling--;
}

/* The latch's gained or revoke callback (both take the handle and data). */
struct user_call {
	struct election *e;
	void (*fn)(zkl_leader *, void *);
	int reason;
};

static void user_call(void *arg)
{
	struct user_call *k = arg;
	k->fn(k->e->self, k->e->data);
}

static void call_user(struct election *e, void (*fn)(zkl_leader *, void *))
{
	if (!fn)
		return;
	struct user_call k = {.e = e, .fn = fn};
	call_out(e, user_call, &k);
}

static void lost_call(void *arg)
{
	struct user_call *k = arg;
	k->e->on_lost(k->e->self, k->reason, k->e->data);
}

static void call_lost(struct election *e, int reason)
{
	if (!e->on_lost)
		return;
	struct user_call k = {.e = e, .reason = reason};
	call_out(e, lost_call, &k);
}

static void report_lost_call(void *arg)
{
	struct user_call *k = arg;
	zkl__lock_report_lost(&k->e->lock, k->reason);
}

/* The view's lost callback, and its listeners. */
static void report_lost(struct election *e, int reason)
{
	struct user_call k = {.e = e, .reason = reason};
	call_out(e, report_lost_call, &k);
}

struct acquired_call {
	struct election *e;
	zkl_lock_acquired_fn fn;
	void *data;
	int rc;
	const char *error;
};

static void acquired_call(void *arg)
{
	struct acquired_call *k = arg;
	zkl__lock_async_call(&k->e->lock, k->fn, k->data, k->rc, k->error);
}

/* Answers the view's acquire under way: its callback (a blocking acquire's waits). */
static void view_answer(struct election *e, int rc, const char *error)
{
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
	pthread_mutex_lock(e->lock.mu); /* pub_mu, a leaf: the view's acquire is its */
	const bool tell = zkl__lock_async_ending(&e->async);
	pthread_mutex_unlock(e->lock.mu);
	if (!tell)
		return; /* the handle is being freed: nobody to tell */
	struct acquired_call k = {.e = e, .fn = e->async.fn, .data = e->async.fn_data, .rc = rc,
	                          .error = saved};
	call_out(e, acquired_call, &k);
}

/* Leaves the election: deletes our node and waits for the answer (E_LEAVING), so that
 * close returns with the node gone; if that cannot be confirmed while the session may
 * live, the client's background task retries it until it succeeds or the session is
 * gone (the engine's zkl__stage_withdraw). Then `next` (E_OUT or E_BACKOFF). */
static int leave(zkl_client *c, struct election *e, enum election_state next)
{
	e->after_leave = next;
	e->st = E_LEAVING;
	e->let_go = false;
	zkl__stage_withdraw(c, &e->stage, &e->node, &e->leave);
	return GO_ON;
}

static int on_leaving(zkl_client *c, struct election *e)
{
	if (zkl__stage_withdrawing(c, &e->stage, &e->node, &e->leave))
		return WAIT;
	zkl__node_clear(&e->node);
	e->st = e->after_leave;
	return GO_ON;
}

/* ---- the states ---- */

/* The engine made our node (loop): zkl_lock_node() shows it while we queue. */
static void node_known(void *ctx)
{
	zkl__election_publish(ctx);
}

struct engine_start {
	struct election *e;
	int timeout;
	int rc;
	char error[256];
};

static void engine_start_call(void *arg)
{
	struct engine_start *k = arg;
	struct election *e = k->e;
	k->rc = zkl__engine_start(&e->q, k->timeout, &e->node, queued, e);
	if (k->rc != 0)
		snprintf(k->error, sizeof k->error, "%s", zkl_last_error());
}

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
	struct engine_start k = {.e = e, .timeout = timeout};
	k.rc = zkl__data_set(&e->qdata, e->id.bytes, (size_t)e->id.len);
	if (k.rc != 0)
		snprintf(k.error, sizeof k.error, "%s", zkl_last_error());
	e->st = E_QUEUE;
	e->revoke_seen = false; /* asked of a node of ours: of the next one, from now */
	e->revoke_told = false;
	if (k.rc == 0) {
		/* From the engine: the hold at the grant, whose watch on our node proves it
		 * ours and tells its deletion from outside, and, for a latch told of
		 * revocation, the revocation watch a mutex has. */
		const bool revocable = e->kind == ZKL_KIND_LATCH && e->on_revoke;
		e->q = (struct zkl_queue){
			.c = c,
			.path = e->lock.path,
			.kind = e->kind,
			.data = e->qdata.bytes,
			.data_len = e->qdata.len,
			.pred = &zkl__pred_first,
			.owner = e,
			.folder_seen = &e->folder_seen,
			.name = e->lock.kind,
			.on_node = node_known,
			.node_ctx = e,
			.on_lost = hold_lost,
			.lost_ctx = e,
			.on_revoke = revocable ? revoked : NULL,
			.revoke_ctx = e,
			.revoke_decode = zkl__revoke_decode,
		};
		e->queue_done = false;
		e->queue_canceled = false;
		/* The engine takes the acquisition as a call, which it makes itself. */
		zkl__loop_callout(c, engine_start_call, &k);
		if (k.rc == 0)
			return GO_ON;
	}
	/* on_queue() takes the failure as any other */
	e->queue_done = true;
	e->queue_rc = k.rc;
	snprintf(e->queue_error, sizeof e->queue_error, "%s", k.error);
	return GO_ON;
}

/* Frees e's handle, off the loop already (no lock held). */
static void dispose(void *arg)
{
	struct election *e = arg;
	zkl_client_remove_listener(e->lock.c, state_changed, e);
	zkl__data_free(&e->qdata);
	zkl__data_free(&e->id);
	zkl__lock_dispose(&e->lock);
	free(e->node_pub);
	pthread_mutex_destroy(&e->pub_mu);
	pthread_cond_destroy(&e->pub_cv);
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
	if (zkl__election_want_in(e))
		return join(c, e);
	if (e->freeing && zkl__election_at_rest(e)) {
		zkl__stage_stop(c, &e->stage);
		e->listening = false;
		zkl__loop_callout(c, dispose, e);
		zkl__client_free_done(c);
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
		if (zkl__election_want_in(e)) {
			if (e->view_pending && e->view_deadline != INT64_MAX)
				zkl__stage_wake_at(c, &e->stage, e->view_deadline);
		} else if (!e->queue_canceled) {
			e->queue_canceled = true;
			zkl__engine_cancel(c, e);
		}
		return WAIT;
	}
	int rc = e->queue_rc;
	if (rc == 0) {
		/* The engine made the hold at the grant (node.hold). */
		if (!zkl__election_want_in(e)) {
			zkl__node_hold_end(c, &e->node, ZKL_HOLD_END_QUIET);
			return leave(c, e, E_OUT);
		}
		e->backoff_ms = 0;
		e->st = E_LEAD;
		e->in_lead = true;
		e->again = false;
		e->interrupt = false;
		e->fn_done = false;
		e->announced = false;
		e->susp_seen = e->suspensions;
		e->retry_at = 0;
		e->end = 0;
		if (!zkl__node_follow(c, &e->node, &e->stage)) {
			/* Nothing could prove the node ours, nor tell its deletion. */
			zkl__log(c, ZKL_LOG_ERROR, "out of memory: cannot watch %s", e->node.path);
			return end_lead(e, zkl__fail(ZKL_ENOMEM, "out of memory"));
		}
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
	if (rc == ZKL_ECANCELED || rc == ZKL_ECLOSED || !zkl__election_want_in(e))
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
	if (!zkl__election_want_in(e) || zkl__now_ms() >= e->retry_at) {
		e->st = E_OUT;
		return GO_ON;
	}
	zkl__stage_wake_at(c, &e->stage, e->retry_at);
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

static int announce(zkl_client *c, struct election *e)
{
	e->announced = true;
	e->leading = true;
	e->token = e->node.czxid;
	if (e->fn) {
		e->fn_done = false;
		e->loss_told = false;
		zkl__election_publish(e);
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
	if (!zkl__election_want_in(e))
		return end_lead(e, e->view_pending ? view_check(e) : ZKL_ECLOSED);
	/* Past the loss deadline the session may be gone already: leadership must not be
	 * announced now. Lost, leadership ended at once (hold_lost); the reason may wait for
	 * the hold's watch to learn whether our node was deleted from outside, the session
	 * living on (ZKL_ENOTHELD), or went with the session (ZKL_ELOST). */
	int64_t asking_until;
	const int stands = zkl__node_stands(c, &e->node, &asking_until);
	if (stands == ZKL_HOLD_ASKING) {
		zkl__stage_wake_at(c, &e->stage, asking_until);
		return WAIT;
	}
	if (stands != 0)
		return end_lead(e, stands);
	if (e->interrupt)
		return end_lead(e, ZKL_ECANCELED);
	if (e->fn_done)
		return end_lead(e, 0);
	if (e->lose_on_suspend && e->susp_seen != e->suspensions) {
		/* The connection dropped since we last looked: the node must be shown ours
		 * again before leading again. */
		e->susp_seen = e->suspensions;
		zkl__node_confirm(c, &e->node);
		if (e->announced) {
			if (e->fn || !e->started)
				return end_lead(e, ZKL_ECONNLOSS);
			e->announced = false;
			e->leading = false;
			e->token = 0;
			if (e->gained) {
				e->gained = false;
				call_lost(e, ZKL_ECONNLOSS);
			}
			return GO_ON;
		}
	}
	if (e->announced && e->revoke_seen && !e->revoke_told) {
		e->revoke_told = true;
		zkl__log(c, ZKL_LOG_INFO, "revocation of leadership of %s requested", e->lock.path);
		call_user(e, e->on_revoke);
		return GO_ON;
	}
	/* The hold's watch shows the node ours (after the grant, and after each suspension)
	 * and wakes us then. */
	if (zkl__node_confirmed(&e->node) && !e->announced && !(e->lose_on_suspend && e->suspended))
		return announce(c, e);
	if (e->view_pending && e->view_deadline != INT64_MAX)
		zkl__stage_wake_at(c, &e->stage, e->view_deadline);
	return WAIT;
}

/* Whether a leadership that ended for this reason was lost (not given up). */
static bool lost_reason(int end)
{
	return end != 0 && end != ZKL_ECANCELED && end != ZKL_ECLOSED;
}

static void join_worker(void *arg)
{
	pthread_join(*(pthread_t *)arg, NULL);
}

static int on_ending(zkl_client *c, struct election *e)
{
	if (e->fn && e->announced && !e->loss_told && lost_reason(e->end)) {
		/* A selector's loss is told at once, on the loop, while its function may
		 * still run (it sees has_leadership false). */
		e->loss_told = true;
		report_lost(e, e->end);
	}
	if (e->worker_running) {
		if (!e->fn_done) {
			/* The function sees has_leadership false; the node stays until it
			 * returns, and the thread wakes us then. */
			return WAIT;
		}
		/* It has returned: the join waits only for the thread to end. */
		pthread_t worker = e->worker;
		zkl__loop_callout(c, join_worker, &worker);
		e->worker_running = false;
	}
	int end = e->end;
	bool gained = e->gained;
	e->announced = e->gained = false;
	if (e->view_held && !e->view_lost && end != ZKL_ECLOSED) {
		e->view_lost = true;
		report_lost(e, end);
	}
	if (gained && (end != ZKL_ECLOSED || e->notify_on_close))
		call_lost(e, end);
	/* The observer hears how the leadership ended, once (the engine knows whether the
	 * loop has reported a loss already). */
	zkl__node_hold_end(c, &e->node, lost_reason(end) ? ZKL_HOLD_END_LOST : ZKL_HOLD_END);
	e->in_lead = false;
	if (e->fn && !e->requeue && !e->again)
		e->idle = true;
	e->again = false;
	if (end == ZKL_ENOMEM && zkl__election_want_in(e)) {
		/* Do not spin on a failure that may last (memory, or a thread for the
		 * selector's function): wait a little first. A refusal by ZooKeeper (an
		 * ACL) ends the engine's acquisition, before leading: on_queue() backs
		 * off then. */
		e->retry_at = zkl__now_ms() + 1000;
		return leave(c, e, E_BACKOFF);
	}
	return leave(c, e, E_OUT);
}

static void step(zkl_client *c, struct zkl_stage *s)
{
	struct election *e = (struct election *)(void *)((char *)s - offsetof(struct election, stage));
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
	if (rc == GONE)
		return;
	zkl__election_publish(e);
	/* The threads that wait for its state; one that begins to wait after this look
	 * asks its condition as its wait begins, on the loop. */
	if (atomic_load(&e->waits) > 0)
		zkl__stage_tell(c, &e->stage);
}

/* ---- on and off the loop ---- */

int zkl__election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                      enum zkl_kind kind, void *self)
{
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(path, "election path");
	const char *name = kind == ZKL_KIND_LOCK ? "selector" : "leader";
	if (rc != 0 || (rc = zkl__lock_init(&e->lock, &zkl__leader_ops, name, c, path)) != 0)
		return rc;
	if ((rc = zkl__data_init(&e->id)) != 0 ||
	    (id && (rc = zkl__data_set(&e->id, id, strlen(id))) != 0)) {
		zkl__data_free(&e->id);
		zkl__lock_dispose(&e->lock);
		return rc;
	}
	e->kind = kind;
	e->self = self;
	atomic_init(&e->held_pub, false);
	atomic_init(&e->token_pub, (int64_t)ZKL_ENOTHELD);
	atomic_init(&e->waits, 0);
	pthread_mutex_init(&e->pub_mu, NULL);
	zkl__cond_init(&e->pub_cv);
	e->lock.mu = &e->pub_mu;
	e->lock.cv = &e->pub_cv;
	return 0;
}

static void attach_run(zkl_client *c, void *arg)
{
	struct election *e = arg;
	e->suspended = c->state == ZKL_STATE_SUSPENDED;
	e->listening = true;
	zkl__stage_start(c, &e->stage, step);
}

int zkl__election_attach(struct election *e)
{
	zkl_client *c = e->lock.c;
	int rc = zkl_client_add_listener(c, state_changed, e);
	if (rc != 0) {
		pthread_mutex_destroy(&e->pub_mu);
		pthread_cond_destroy(&e->pub_cv);
		zkl__data_free(&e->id);
		zkl__lock_dispose(&e->lock);
		return rc;
	}
	zkl__loop_run(c, attach_run, e);
	return 0;
}

int zkl__election_wait(struct election *e, bool (*done)(zkl_client *c, void *arg), void *arg,
                      int64_t deadline, const char *what)
{
	atomic_fetch_add(&e->waits, 1);
	int rc = zkl__stage_wait(e->lock.c, &e->stage, done, arg, deadline, what);
	atomic_fetch_sub(&e->waits, 1);
	return rc;
}

static void unregister_run(zkl_client *c, void *arg)
{
	struct election *e = arg;
	zkl__stage_stop(c, &e->stage);
	e->listening = false;
}

void zkl__election_dispose(struct election *e)
{
	zkl__loop_run(e->lock.c, unregister_run, e);
	dispose(e);
}
