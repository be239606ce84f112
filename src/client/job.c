/* The jobs of the client's own blocking calls: requests a thread sends and waits for
 * (zkl__request, zkl__requests), a condition of a recipe's state (zkl__loop_wait), and
 * the connection (zkl__await_connection). Each is a job of the loop (loop.c, "Jobs"):
 * its steps run on the loop, and the calling thread waits on the job alone. */
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

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
