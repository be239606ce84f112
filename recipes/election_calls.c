/* The public calls of an election (zkl_leader, zkl_selector), from any thread.
 *
 * Only the loop touches the election's state (election.c): each call here hands the
 * loop a function that does what the call asks and writes down its answer
 * (zkl__loop_run), and a call that waits, waits for a condition of the state with a job
 * of its own (zkl__election_wait), which the machine wakes after each of its steps. The
 * detail of a refusal is set here, on the calling thread, which zkl_last_error() reads. */
#include <string.h>

#include "election.h"

static const char *what(const struct election *e)
{
	return e->fn ? "selector" : "latch";
}

/* ---- start ---- */

enum refusal { R_NONE, R_CLOSED, R_STARTED, R_VIEW, R_CLIENT_CLOSING, R_NOT_STARTED };

struct asked {
	struct election *e;
	enum refusal why;
};

static void start_run(zkl_client *c, void *arg)
{
	struct asked *k = arg;
	struct election *e = k->e;
	if (e->closing)
		k->why = R_CLOSED;
	else if (e->started)
		k->why = R_STARTED;
	else if (e->view_pending || e->view_held)
		k->why = R_VIEW;
	else if (c->closing)
		k->why = R_CLIENT_CLOSING;
	if (k->why != R_NONE)
		return;
	e->started = true;
	zkl__election_publish(e);
	zkl__election_wake(e);
}

int zkl__election_start(struct election *e)
{
	struct asked k = {.e = e};
	zkl__loop_run(e->lock.c, start_run, &k);
	switch (k.why) {
	case R_CLOSED:
		return zkl__fail(ZKL_ECLOSED, "the %s of %s is closed", what(e), e->lock.path);
	case R_STARTED:
		return zkl__fail(ZKL_EBUSY, "the %s of %s was started already", what(e),
		                e->lock.path);
	case R_VIEW:
		return zkl__fail(ZKL_EBUSY, "leadership of %s is taken through its lock view: "
		                "release it first", e->lock.path);
	case R_CLIENT_CLOSING:
		return zkl__fail(ZKL_ECLOSED, "the client is closing");
	default:
		return 0;
	}
}

/* ---- close and free ---- */

static void close_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	e->closing = true;
	e->leading = false;
	zkl__election_publish(e);
	zkl__election_wake(e);
}

static bool at_rest(zkl_client *c, void *arg)
{
	(void)c;
	return zkl__election_at_rest(arg);
}

int zkl__election_close(struct election *e)
{
	bool waits = !zkl__election_must_not_wait(e);
	zkl__loop_run(e->lock.c, close_run, e);
	if (waits)
		zkl__election_wait(e, at_rest, e, INT64_MAX, "the end of the election");
	zkl__clear_error();
	return 0;
}

static void cancel_view_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	e->view_cancel = true;
	zkl__election_wake(e);
}

/* Freed on the loop's thread (or from the selector's function): the machine frees the
 * handle once at rest. */
static void free_later_run(zkl_client *c, void *arg)
{
	struct election *e = arg;
	e->closing = true;
	e->leading = false;
	e->view_cancel = true;
	e->freeing = true;
	zkl__client_free_put_off(c);
	zkl__election_publish(e);
	zkl__election_wake(e);
}

bool zkl__election_free(struct election *e)
{
	if (zkl__election_must_not_wait(e)) {
		/* The machine frees the handle once at rest (a selector's function, which may
		 * be the caller, has returned and its thread is joined by then); a callback of
		 * the view's acquire that runs now learns the handle is gone. */
		zkl__lock_async_drain(&e->lock);
		zkl__loop_run(e->lock.c, free_later_run, e);
		return true;
	}
	zkl__loop_run(e->lock.c, cancel_view_run, e);
	zkl__election_close(e);
	zkl__lock_async_drain(&e->lock);
	zkl__election_dispose(e);
	return false;
}

/* ---- requeue, interrupt ---- */

static void requeue_run(zkl_client *c, void *arg)
{
	(void)c;
	struct asked *k = arg;
	struct election *e = k->e;
	if (e->closing) {
		k->why = R_CLOSED;
	} else if (!e->started) {
		k->why = R_NOT_STARTED;
	} else if (e->idle) {
		e->idle = false;
		zkl__election_wake(e);
	} else if (e->in_lead) {
		e->again = true;
	}
}

int zkl__election_requeue(struct election *e)
{
	struct asked k = {.e = e};
	zkl__loop_run(e->lock.c, requeue_run, &k);
	if (k.why == R_CLOSED)
		return zkl__fail(ZKL_ECLOSED, "the selector of %s is closed", e->lock.path);
	if (k.why == R_NOT_STARTED)
		return zkl__fail(ZKL_EINVAL, "the selector of %s was not started", e->lock.path);
	return 0;
}

static void interrupt_run(zkl_client *c, void *arg)
{
	(void)c;
	struct election *e = arg;
	if (e->leading && e->started) {
		e->interrupt = true;
		e->leading = false;
		zkl__election_publish(e);
		zkl__election_wake(e);
	}
}

void zkl__election_interrupt(struct election *e)
{
	zkl__loop_run(e->lock.c, interrupt_run, e);
}

/* ---- await ---- */

struct look {
	struct election *e;
	bool want;
	bool started, closing, done;
};

static bool look_done(zkl_client *c, void *arg)
{
	(void)c;
	struct look *k = arg;
	struct election *e = k->e;
	k->started = e->started;
	k->closing = e->closing;
	k->done = k->want ? e->leading || e->closing : !e->leading;
	return k->done;
}

static void look_run(zkl_client *c, void *arg)
{
	look_done(c, arg);
}

int zkl__election_await(struct election *e, bool want, int timeout_ms)
{
	zkl_client *c = e->lock.c;
	struct look k = {.e = e, .want = want};
	zkl__loop_run(c, look_run, &k);
	if (want && !k.started && !k.closing)
		return zkl__fail(ZKL_EINVAL, "the %s of %s was not started", what(e), e->lock.path);
	if (timeout_ms != 0 && zkl__is_loop_thread(c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for leadership of %s on the thread that "
		                "runs the client's loop (in a callback, or the application's loop "
		                "thread)", e->lock.path);
	bool ok = k.done;
	if (!ok && timeout_ms != 0)
		ok = zkl__election_wait(e, look_done, &k, zkl__deadline(timeout_ms),
		                       "leadership") == 0;
	if (want && k.closing)
		return zkl__fail(ZKL_ECLOSED, "the %s of %s is closed", what(e), e->lock.path);
	if (!ok)
		return want ? zkl__fail(ZKL_ETIMEDOUT, "not the leader of %s", e->lock.path)
		            : ZKL_ETIMEDOUT;
	return 0;
}

/* ---- who leads ---- */

int zkl__election_leader_id(struct election *e, char **id)
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
