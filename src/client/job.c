/* Jobs: what a thread asks of ZooKeeper and waits for, run by the client's loop.
 *
 * Design notes.
 *
 * A job is a loop waiter (zkl__waiter_enter_loop) with a step function. The loop runs
 * the step, with the client mutex held, whenever the job is woken: an answer to a
 * request it sent, a watch it armed, a session change, a cancel of its owner, or the
 * time it asked to be run at (zkl__waiter_wake_at). The step sends what comes next and
 * returns ZKL_JOB_WAIT, or returns the job's result. Nothing in a step blocks.
 *
 * The thread that asked waits on the job's own semaphore, not on the client's mutex
 * (zkl__job_wait), so a blocking call is a thin wait on the loop: the same as a
 * blocking acquire, which is a job too (src/engine/acquire.c). A job reaches the loop as
 * a call (zkl__call), behind everything handed to the loop before it, and from then on
 * only the loop touches it, until its end.
 *
 * The client's event thread cannot wait for a job: nothing would run it. Such a call (a
 * callback's) fails at once with ZKL_EDEADLK (zkl__job_run), and so does one on the
 * application's loop thread (external_loop), which never waits for the server. With
 * external_loop, the C
 * client's completion thread applies the answers as they come, and the waiting thread
 * runs its job's steps itself when they are due: the application's loop may be that
 * very thread, or not run at all while it waits.
 *
 * A job's step may start another job from the loop (zkl__job_begin): a recipe
 * made of engine acquisitions (a semaphore's gate, then its lease) starts each as the
 * child of its own job, and is woken when the child ends. The child is run where its
 * parent is: by the loop, or by the parent's waiting thread with external_loop. So a
 * blocking call and an asynchronous one are the same job, waited for or with an end.
 *
 * A blocking call made of asynchronous acquisitions one after the other (a multi-lock's
 * members, possibly on several clients) drives them (zkl__drive_begin): with
 * external_loop, the job with an end that such a thread starts is run by that thread
 * (zkl__drive_run), as a waited job is, and its end tells the thread to start the next. */
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* Wakes the thread that waits for j. A semaphore, not a condition variable: the woken
 * thread takes no mutex the loop may still hold, and may free j as soon as it wakes. */
static void tell(struct zkl_job *j)
{
	sem_post(&j->done);
}

/* The drive current on this thread (zkl__drive_begin), if any. */
static _Thread_local struct zkl__drive *driving;

static void job_step(zkl_client *c, struct zkl_waiter *w)
{
	struct zkl_job *j = (struct zkl_job *)w;
	int rc = c->closing && !j->runs_closing ? zkl__fail(ZKL_ECLOSED, "the client is closing")
	                                        : j->step(c, j);
	if (rc == ZKL_JOB_WAIT)
		return;
	if (rc != 0 && !j->error[0])
		snprintf(j->error, sizeof j->error, "%s", zkl_last_error());
	j->rc = rc;
	if (j->drop)
		j->drop(c, j);
	zkl__waiter_leave(c, &j->w);
	if (j->end) {
		struct zkl_job *parent = j->parent;
		/* A driven job ends: its thread stops running it before the end may start
		 * the next (which then becomes the drive's). */
		if (driving && driving->job == j)
			driving->job = NULL;
		pthread_mutex_unlock(&c->mu);
		j->end(c, j); /* j may be gone */
		pthread_mutex_lock(&c->mu);
		if (parent) {
			/* A child job (it has an end): its parent looks at what the end left. */
			parent->child = NULL;
			zkl__waiter_wake(c, &parent->w);
		}
		return;
	}
	if (j->w.own_thread) {
		j->finished = true;
		zkl__kick(c); /* its thread waits in zkl__io_wait() (zkl__job_wait) */
		return;
	}
	if (!c->external && zkl__on_event_thread(c)) {
		/* Told when the loop lets go of the mutex (loop.c, unlock_and_tell). */
		j->told_next = c->told;
		c->told = j;
		return;
	}
	tell(j);
}

void zkl__jobs_tell(struct zkl_job *list)
{
	while (list) {
		struct zkl_job *next = list->told_next;
		tell(list); /* list may be gone */
		list = next;
	}
}

/* On the loop (mu held): the job begins with its first step. */
static void job_begin(zkl_client *c, struct zkl__call *call)
{
	struct zkl_job *j = (struct zkl_job *)((char *)call - offsetof(struct zkl_job, call));
	zkl__waiter_enter_loop(c, &j->w, j->owner, job_step);
}

/* What every start of a job sets. */
static void job_init(struct zkl_job *j, const void *owner)
{
	j->owner = owner;
	j->rc = 0;
	j->error[0] = '\0';
	j->finished = false;
	j->parent = j->child = NULL;
	sem_init(&j->done, 0, 0);
}

/* Whether j (no parent) is run by the thread that starts it: with external_loop, a job
 * waited for, or the first with an end started by a thread that drives (it becomes the
 * drive's). */
static bool own_thread(zkl_client *c, struct zkl_job *j)
{
	if (!c->external)
		return false;
	if (!j->end)
		return true;
	if (!driving || driving->job)
		return false;
	driving->c = c;
	driving->job = j;
	return true;
}

void zkl__job_begin(zkl_client *c, struct zkl_job *j, const void *owner,
                          struct zkl_job *parent)
{
	job_init(j, owner);
	if (parent) {
		j->parent = parent;
		parent->child = j;
	}
	/* A child is run by whoever runs its parent: with external_loop, the thread that
	 * waits for the parent (zkl__job_wait, zkl__drive_run). */
	j->w.own_thread = parent ? parent->w.own_thread : own_thread(c, j);
	zkl__waiter_enter_loop(c, &j->w, owner, job_step);
}

int zkl__job_start(zkl_client *c, struct zkl_job *j, const void *owner)
{
	job_init(j, owner);
	j->call.fn = job_begin;
	j->w.own_thread = own_thread(c, j);
	if (!zkl__call(c, &j->call)) {
		if (driving && driving->job == j)
			driving->job = NULL;
		zkl__job_destroy(j);
		return zkl__fail(ZKL_ECLOSED, "the client is closing");
	}
	return 0;
}

/* Runs the step of j or of its child that is due, on the thread that runs j (mu
 * held), or waits until one is. j may be gone after a step that ended it with an end. */
static void run_own(zkl_client *c, struct zkl_job *j)
{
	struct zkl_job *k = j->child;
	if (k && zkl__waiter_due(&k->w))
		job_step(c, &k->w); /* k may be gone */
	else if (zkl__waiter_due(&j->w))
		job_step(c, &j->w);
	else
		zkl__io_wait(c, k && k->w.wake_at < j->w.wake_at ? k->w.wake_at : j->w.wake_at);
}

void zkl__drive_begin(struct zkl__drive *d)
{
	d->c = NULL;
	d->job = NULL;
	d->prev = driving;
	driving = d;
}

void zkl__drive_end(struct zkl__drive *d)
{
	driving = d->prev;
}

void zkl__drive_run(struct zkl__drive *d)
{
	zkl_client *c = d->c;
	if (!d->job)
		return;
	struct zkl__drive *was = driving;
	driving = d; /* so that the end of d's job clears it */
	pthread_mutex_lock(&c->mu);
	while (d->job && d->c == c)
		run_own(c, d->job);
	pthread_mutex_unlock(&c->mu);
	driving = was;
}

int zkl__job_wait(zkl_client *c, struct zkl_job *j)
{
	if (c->external) {
		/* The waiting thread runs its job itself, as the completion thread applies
		 * what it hears: the application's loop may be this very thread, and then
		 * nothing else would run it. The loop leaves it alone (own_thread). */
		pthread_mutex_lock(&c->mu);
		while (!j->finished)
			run_own(c, j);
		pthread_mutex_unlock(&c->mu);
	} else {
		while (sem_wait(&j->done) != 0)
			; /* EINTR: a signal handler ran */
	}
	zkl__job_destroy(j);
	if (j->rc != 0)
		zkl__fail(j->rc, "%s", j->error);
	else
		zkl__clear_error();
	return j->rc;
}

void zkl__job_destroy(struct zkl_job *j)
{
	sem_destroy(&j->done);
}

static int refuse_on_loop(zkl_client *c, const char *what)
{
	if (!zkl__is_loop_thread(c))
		return 0;
	if (c->external && !zkl__on_event_thread(c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the application's loop "
		                "thread: nothing on the loop's thread waits for the server (call "
		                "it from another thread)", what);
	return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the client's event thread (in a "
	                "callback): the loop would wait for itself", what);
}

int zkl__job_run(zkl_client *c, struct zkl_job *j, const void *owner, const char *what)
{
	int rc = refuse_on_loop(c, what);
	if (rc == 0)
		rc = zkl__job_start(c, j, owner);
	if (rc != 0) {
		if (j->drop) {
			pthread_mutex_lock(&c->mu);
			j->drop(c, j);
			pthread_mutex_unlock(&c->mu);
		}
		return rc;
	}
	return zkl__job_wait(c, j);
}

int zkl__job_send(zkl_client *c, struct zkl_job *j, const struct zkl_req *r, struct zkl_op **op)
{
	int err = 0;
	*op = zkl__op_send(c, &j->w, r, &err);
	return *op ? 0 : err;
}

/* 0 once ready; else ZKL_JOB_WAIT until deadline, ZKL_ECANCELED or ZKL_ETIMEDOUT. */
static int await_until(zkl_client *c, struct zkl_job *j, bool ready, int64_t deadline)
{
	if (ready)
		return 0;
	if (j->w.canceled)
		return ZKL_ECANCELED;
	if (zkl__now_ms() >= deadline)
		return ZKL_ETIMEDOUT;
	zkl__waiter_wake_at(c, &j->w, deadline);
	return ZKL_JOB_WAIT;
}

int zkl__job_await(zkl_client *c, struct zkl_job *j, const struct zkl_op *op, int64_t deadline)
{
	return await_until(c, j, op->done, deadline);
}

int zkl__job_await_connected(zkl_client *c, struct zkl_job *j, int64_t deadline)
{
	return await_until(c, j, c->sess->connected, deadline);
}

/* ---- requests run to their answers ------------------------------------------------ */

struct request_job {
	struct zkl_job job;        /* first */
	const struct zkl_req *r;
	size_t n;
	int64_t deadline;
	struct zkl_op **ops;
	size_t sent;               /* r[0..sent) are out, with their ops */
	zkl_answered_fn answered;  /* or NULL: the ops go to the caller */
	void *arg;
};

static int request_step(zkl_client *c, struct zkl_job *j)
{
	struct request_job *k = (struct request_job *)j;
	for (; k->sent < k->n; k->sent++) {
		int rc = zkl__job_send(c, j, &k->r[k->sent], &k->ops[k->sent]);
		if (rc != 0)
			return rc;
	}
	for (size_t i = 0; i < k->n; i++) {
		int rc = zkl__job_await(c, j, k->ops[i], k->deadline);
		if (rc == ZKL_ETIMEDOUT)
			return zkl__fail(rc, "no answer from ZooKeeper for %s in time", k->r[i].path);
		if (rc != 0)
			return rc; /* ZKL_JOB_WAIT */
	}
	/* Every one answered, whatever ZooKeeper said. */
	return k->answered ? k->answered(c, k->ops, k->n, k->arg) : 0;
}

/* Drops the ops that are there (mu held). */
static void ops_put(zkl_client *c, struct zkl_op **ops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ops[i])
			zkl__op_put(c, ops[i]);
		ops[i] = NULL;
	}
}

static void request_drop(zkl_client *c, struct zkl_job *j)
{
	struct request_job *k = (struct request_job *)j;
	if (j->rc != 0 || k->answered)
		ops_put(c, k->ops, k->n); /* else the caller's now */
}

int zkl__requests_then(zkl_client *c, const struct zkl_req *r, size_t n, int64_t deadline,
                      struct zkl_op **ops, zkl_answered_fn answered, void *arg)
{
	for (size_t i = 0; i < n; i++)
		ops[i] = NULL;
	if (n == 0)
		return 0;
	struct request_job k = {.job = {.step = request_step, .drop = request_drop},
	                        .r = r, .n = n, .deadline = deadline, .ops = ops,
	                        .answered = answered, .arg = arg};
	return zkl__job_run(c, &k.job, NULL, "ZooKeeper's answer");
}

int zkl__requests(zkl_client *c, const struct zkl_req *r, size_t n, int64_t deadline,
                 struct zkl_op **ops)
{
	return zkl__requests_then(c, r, n, deadline, ops, NULL, NULL);
}

int zkl__request(zkl_client *c, const struct zkl_req *r, int64_t deadline, struct zkl_op **out)
{
	struct zkl_op *op;
	int rc = zkl__requests(c, r, 1, deadline, &op);
	if (rc != 0)
		return rc;
	rc = op->rc;
	if (out)
		*out = op;
	else
		zkl__op_release(c, op);
	return rc;
}

void zkl__ops_release(zkl_client *c, struct zkl_op **ops, size_t n)
{
	pthread_mutex_lock(&c->mu);
	ops_put(c, ops, n);
	pthread_mutex_unlock(&c->mu);
}

/* ---- waiting for a condition of the loop's state ------------------------------- */

struct until_job {
	struct zkl_job job;        /* first */
	bool (*done)(zkl_client *c, void *arg);
	void *arg;
	int64_t deadline;
	const char *what;
};

static int until_step(zkl_client *c, struct zkl_job *j)
{
	struct until_job *k = (struct until_job *)j;
	if (k->done(c, k->arg))
		return 0;
	if (zkl__now_ms() >= k->deadline)
		return zkl__fail(ZKL_ETIMEDOUT, "%s did not come in time", k->what);
	zkl__waiter_wake_at(c, &j->w, k->deadline);
	return ZKL_JOB_WAIT;
}

int zkl__loop_wait(zkl_client *c, const void *tag, bool (*done)(zkl_client *c, void *arg),
                  void *arg, int64_t deadline, const char *what)
{
	struct until_job k = {.job = {.step = until_step, .runs_closing = true}, .done = done,
	                      .arg = arg, .deadline = deadline, .what = what};
	return zkl__job_run(c, &k.job, tag, what);
}

/* ---- waiting for the connection --------------------------------------------------- */

struct connect_job {
	struct zkl_job job;        /* first */
	uint64_t gone;             /* a session to see replaced, or 0 */
	int64_t pause;             /* look again no sooner than this */
	int64_t deadline;
};

static int connect_step(zkl_client *c, struct zkl_job *j)
{
	struct connect_job *k = (struct connect_job *)j;
	const int64_t now = zkl__now_ms();
	if (now < k->pause && now < k->deadline) {
		zkl__waiter_wake_at(c, &j->w, k->pause < k->deadline ? k->pause : k->deadline);
		return ZKL_JOB_WAIT;
	}
	if (c->sess->connected && (!k->gone || c->gen != k->gone))
		return 0;
	if (now >= k->deadline)
		return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper did not come back "
		                "in time");
	zkl__waiter_wake_at(c, &j->w, k->deadline);
	return ZKL_JOB_WAIT;
}

int zkl__await_connection(zkl_client *c, uint64_t gone, int64_t pause, int64_t deadline)
{
	struct connect_job k = {.job = {.step = connect_step}, .gone = gone, .pause = pause,
	                        .deadline = deadline};
	return zkl__job_run(c, &k.job, NULL, "the connection");
}
