/* The zkl_lock view of an election (zkl_leader_lock(), zkl_selector_lock()): one
 * leadership per acquire.
 *
 * An acquire hands the loop the view's asynchronous acquire (view_start); the machine
 * (election.c) joins the election and answers it once this participant leads, or when
 * it cannot. A blocking acquire is that same acquire and a wait for its callback
 * (leader_acquire), refused at once on a thread that runs the loop, which nothing would
 * then run. What the verbs read without asking the loop (is_held, token, node) the loop
 * publishes. */
#include <semaphore.h>
#include <stdio.h>
#include <string.h>

#include "election.h"

#define ELECTION(l) ((struct election *)(void *)(l))

/* ---- acquire ---- */

enum view_refusal { V_NONE, V_STARTED, V_CLOSED, V_LOST, V_HELD, V_PENDING, V_BUSY };

struct view_start {
	struct election *e;
	int timeout_ms;
	zkl_lock_acquired_fn fn;
	void *data;
	enum view_refusal why;
};

/* Begins an acquire of the view (loop). */
static void view_start_run(zkl_client *c, void *arg)
{
	struct view_start *k = arg;
	struct election *e = k->e;
	if (e->started)
		k->why = V_STARTED;
	else if (e->closing || c->closing)
		k->why = V_CLOSED;
	else if (e->view_lost)
		k->why = V_LOST;
	else if (e->view_held)
		k->why = V_HELD;
	else if (e->view_pending)
		k->why = V_PENDING;
	else {
		/* The view's asynchronous acquire is guarded by its mutex (pub_mu, a leaf). */
		pthread_mutex_lock(e->lock.mu);
		if (zkl__lock_async_claim(&e->lock, &e->async, k->fn, k->data) != 0)
			k->why = V_BUSY;
		pthread_mutex_unlock(e->lock.mu);
	}
	if (k->why != V_NONE)
		return;
	e->view_pending = true;
	e->view_cancel = false;
	e->view_timeout = k->timeout_ms;
	e->view_deadline = k->timeout_ms > 0 ? zkl__deadline(k->timeout_ms) : INT64_MAX;
	zkl__election_wake(e);
}

static int view_start(struct election *e, int timeout_ms, zkl_lock_acquired_fn fn,
                      void *data)
{
	const char *path = e->lock.path;
	if (e->fn)
		return zkl__fail(ZKL_ENOTSUP, "a selector of %s leads through zkl_selector_start() "
		                "and runs its function; to hold leadership as a lock, use a "
		                "zkl_leader's zkl_leader_lock()", path);
	struct view_start k = {.e = e, .timeout_ms = timeout_ms, .fn = fn, .data = data};
	zkl__loop_run(e->lock.c, view_start_run, &k);
	switch (k.why) {
	case V_STARTED:
		return zkl__fail(ZKL_EBUSY, "the latch of %s was started with zkl_leader_start(): "
		                "it leads by itself (see zkl_leader_await())", path);
	case V_CLOSED:
		return zkl__fail(ZKL_ECLOSED, "the leader handle of %s is closed", path);
	case V_LOST:
		return zkl__fail(ZKL_ELOST, "leadership of %s was lost: release it first", path);
	case V_HELD:
		return zkl__fail(ZKL_EBUSY, "already the leader of %s: release it first", path);
	case V_PENDING:
		return zkl__fail(ZKL_EBUSY, "an acquire of leadership of %s is under way", path);
	case V_BUSY:
		return zkl__fail(ZKL_EBUSY, "an asynchronous acquire of %s is under way or holds "
		                "it: release it first", path);
	default:
		return 0;
	}
}

static int leader_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	return view_start(ELECTION(lk), timeout_ms, fn, data);
}

/* A blocking acquire's wait for its own callback. */
struct view_wait {
	sem_t done;
	int rc;
	char error[256];
};

static void view_waited(zkl_lock *lk, int rc, void *data)
{
	(void)lk;
	struct view_wait *w = data;
	w->rc = rc;
	snprintf(w->error, sizeof w->error, "%s", rc ? zkl_last_error() : "");
	sem_post(&w->done);
}

static int leader_acquire(zkl_lock *lk, int timeout_ms)
{
	if (zkl__is_loop_thread(lk->c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for leadership of %s on the thread that "
		                "runs the client's loop (in a callback, or the application's loop "
		                "thread): nothing would run the election", lk->path);
	struct view_wait w = {.rc = 0};
	sem_init(&w.done, 0, 0);
	int rc = view_start(ELECTION(lk), timeout_ms, view_waited, &w);
	if (rc == 0) {
		while (sem_wait(&w.done) != 0)
			; /* EINTR: a signal handler ran */
		rc = w.rc;
		if (rc != 0)
			zkl__fail(rc, "%s", w.error);
		else
			zkl__clear_error();
	}
	sem_destroy(&w.done);
	return rc;
}

/* ---- release, cancel ---- */

struct view_release {
	struct election *e;
	bool waits;
	int rc;
};

static void release_run(zkl_client *c, void *arg)
{
	(void)c;
	struct view_release *k = arg;
	struct election *e = k->e;
	if (!e->view_held) {
		k->rc = ZKL_ENOTHELD;
	} else if (e->view_lost) {
		e->view_held = e->view_lost = false;
		k->rc = ZKL_ELOST;
	} else {
		e->view_held = false;
		e->leading = false;
		if (!k->waits && e->st == E_LEAD)
			e->let_go = true;
		zkl__election_wake(e);
	}
	zkl__election_publish(e);
}

/* The node of the leadership released is gone, or its delete is out (without
 * confirm_release). */
static bool left_lead(zkl_client *c, void *arg)
{
	struct election *e = arg;
	if (e->st == E_LEAVING)
		return e->leave.op && !c->confirm_release;
	return e->st != E_LEAD && e->st != E_ENDING;
}

static int leader_release(zkl_lock *lk)
{
	struct election *e = ELECTION(lk);
	if (e->fn)
		return zkl__fail(ZKL_ENOTSUP, "a selector's leadership of %s ends when its function "
		                "returns (or with zkl_selector_interrupt())", lk->path);
	struct view_release k = {.e = e, .waits = !zkl__election_must_not_wait(e)};
	zkl__loop_run(lk->c, release_run, &k);
	if (k.rc == ZKL_ENOTHELD)
		return zkl__fail(ZKL_ENOTHELD, "leadership of %s was not taken through this lock",
		                lk->path);
	if (k.rc == ZKL_ELOST)
		return zkl__fail(ZKL_ELOST, "leadership of %s had been lost", lk->path);
	if (k.waits)
		zkl__election_wait(e, left_lead, e, INT64_MAX, "the end of the leadership");
	zkl__clear_error();
	return 0;
}

static void cancel_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	if (e->view_pending) {
		e->view_cancel = true;
		zkl__election_wake(e);
	}
}

static void leader_cancel(zkl_lock *lk)
{
	zkl__loop_run(lk->c, cancel_run, ELECTION(lk));
}

/* ---- what the loop publishes ---- */

static bool leader_is_held(zkl_lock *lk)
{
	return atomic_load(&ELECTION(lk)->held_pub);
}

static int64_t leader_token(zkl_lock *lk)
{
	int64_t t = atomic_load(&ELECTION(lk)->token_pub);
	if (t == ZKL_ENOTHELD)
		return zkl__fail(ZKL_ENOTHELD, "not the leader of %s", lk->path);
	return t;
}

/* lk->mu (pub_mu) held. */
static const char *leader_node(zkl_lock *lk)
{
	return ELECTION(lk)->node_pub;
}

/* lk->mu (pub_mu) held. A lost leadership is published as none. */
static int leader_hold_node(zkl_lock *lk, char *buf, size_t size)
{
	const char *node = ELECTION(lk)->node_pub;
	if (!atomic_load(&ELECTION(lk)->held_pub) || !node || strlen(node) >= size)
		return 0;
	strcpy(buf, node);
	return 1;
}

/* Loop (zkl__lock_async_claim). */
static bool leader_holds_async(zkl_lock *lk)
{
	return ELECTION(lk)->view_held;
}

static int leader_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	return zkl__engine_participants(lk->c, lk->path, 1, out, count);
}

/* ---- node data: the participant's id ---- */

struct set_id {
	struct election *e;
	struct zkl_data *id;
};

static void set_id_run(zkl_client *c, void *arg)
{
	(void)c;
	struct set_id *k = arg;
	struct zkl_data old = k->e->id;
	k->e->id = *k->id;
	*k->id = old;
}

static int leader_set_data(zkl_lock *lk, const void *data, size_t len)
{
	struct zkl_data id = {0};
	int rc = zkl__data_set(&id, data, len);
	if (rc != 0)
		return rc;
	struct set_id k = {.e = ELECTION(lk), .id = &id};
	zkl__loop_run(lk->c, set_id_run, &k);
	zkl__data_free(&id);
	return 0;
}

const struct zkl_lock_ops zkl__leader_ops = {
	.acquire = leader_acquire,
	.start = leader_start,
	.release = leader_release,
	.cancel = leader_cancel,
	.is_held = leader_is_held,
	.token = leader_token,
	.node = leader_node,
	.hold_node = leader_hold_node,
	.holds_async = leader_holds_async,
	.participants = leader_participants,
	.set_data = leader_set_data,
};
