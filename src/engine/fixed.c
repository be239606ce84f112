/* The engine's node of a fixed name (engine.c's design notes). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"

/* ---- a node of a fixed name ------------------------------------------------------ */

/* A node bound to a session (q->gen) cannot be made: that session is gone. */
static int lost_session(const struct zkl_queue *q)
{
	return zkl__fail(ZKL_ELOST, "the session that %s was taken on has ended", q->path);
}

/* fixed_answer(): send the next request. */
enum { AGAIN = ZKL_JOB_WAIT + 1 };

/* The create of "<q->path>/<name>", as a job. A create that failed with connection loss
 * may have been applied: the retry's "exists" answer is ours if its ephemeral owner is
 * our session. */
struct fixed_job {
	struct zkl_job job;            /* first */
	const struct zkl_queue *q;
	struct zkl_node *node;         /* the caller's */
	char *target;
	bool try_once;                 /* timeout 0: one round trip, then give up */
	int64_t deadline;
	struct zkl_op *op;             /* the create or the exists out */
	bool exists;                   /* op is the exists */
	bool retried;                  /* a create was sent again after a loss */
	bool recover;                  /* waiting for the connection */
	const char *stands_on;         /* the node ours stands on (a downgrade's write
	                                * node): asked for right after each create */
	struct zkl_op *check;          /* that exists, out with op */
	uint64_t unknown;              /* a create whose answer was lost went out on this
	                                * session: the node may be there */
	int64_t since;                 /* when the call began */
	void (*done_fn)(void *arg, int rc); /* started by zkl__engine_create_fixed_start: */
	void *done_arg;                /* its end */
};

/* The deadline of op's answer: the call's (trying once, ZKL_TRY_ONCE_MS from its
 * start). */
static int64_t fixed_until(const zkl_client *c, const struct fixed_job *f)
{
	(void)c;
	return f->deadline;
}

static int fixed_gave_up(const struct fixed_job *f, int rc)
{
	if (rc == ZKL_ECANCELED)
		return zkl__fail(rc, "the creation of %s was cancelled", f->target);
	return zkl__fail(rc, "timed out creating %s", f->target);
}

static int fixed_made(zkl_client *c, struct fixed_job *f, const struct zkl_op *op)
{
	struct zkl_node *node = f->node;
	if (f->check && (f->check->rc != ZOK || f->check->s != op->s)) {
		/* The node ours stands on was not there just after ours was made (served in
		 * order): a writer behind it may hold already, and ours must go
		 * (fixed_drop()). Unknown (no answer on this connection) counts as gone. */
		if (f->check->rc == ZNONODE && f->check->s == op->s)
			return zkl__fail(ZKL_ELOST, "%s is gone: the hold %s stood on is lost",
			                f->stands_on, f->target);
		return zkl__fail(ZKL_ECONNLOSS, "the connection was lost before %s could be "
		                "confirmed: %s is withdrawn", f->stands_on, f->target);
	}
	node->path = f->target;
	f->target = NULL;
	node->gen = op->s->gen;
	/* A node that stands on another's hold (a downgrade's read node) carries that
	 * hold's token: it was made after the nodes queued behind that one, and its own
	 * czxid would put it after them, where its place in the queue is before. */
	node->czxid = f->check ? f->check->stat.czxid : op->stat.czxid;
	zkl__node_known(f->q, node);
	int rc = zkl__engine_hold(c, f->q, node, f->since);
	if (rc != 0) {
		zkl__task_delete(c, node->path, node->gen);
		zkl__node_forget(f->q, node);
		zkl__node_clear(node);
	}
	return rc;
}

static int fixed_answer(zkl_client *c, struct fixed_job *f)
{
	const struct zkl_queue *q = f->q;
	struct zkl_op *op = f->op;
	const int zrc = op->rc;
	const uint64_t gen = op->s->gen;
	if (q->gen && (gen != q->gen || c->gen != q->gen || zkl__now_ms() >= zkl__lost_at(c))) {
		/* Sent after the session changed, answered after it did, or answered once it is
		 * being given up for lost (as a turn is, acquire.c): whatever it made goes. */
		if (zrc == ZOK || zkl__zk_transient(zrc))
			zkl__task_delete(c, f->target, gen);
		return lost_session(q);
	}
	if (f->exists) {
		/* Ours if made on the session the exists went on (the client may be on a new
		 * one by now, which the check above has settled for a node that stands on a
		 * hold). */
		if (op->rc == ZOK && op->stat.ephemeralOwner == op->s->id)
			return fixed_made(c, f, op);
		if (op->rc == ZNONODE) {
			/* Not there after all (gone since the create found it): make it. */
			f->exists = false;
			return AGAIN;
		}
		if (zkl__zk_transient(op->rc)) {
			if (f->try_once)
				return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper was lost");
			f->recover = true;
			return AGAIN;
		}
		if (zkl__zk_session_gone(op->rc))
			return q->gen ? lost_session(q) :
			       zkl__fail_zk(op->rc, "cannot look for", f->target);
		if (op->rc != ZOK)
			return zkl__fail_zk(op->rc, "cannot look for", f->target);
		return zkl__fail(ZKL_EZK, "%s exists and belongs to another session", f->target);
	}
	if (zrc == ZOK)
		return fixed_made(c, f, op);
	if (zrc == ZNODEEXISTS && f->retried) {
		/* Our earlier attempt may have got through before the connection dropped. */
		f->exists = true;
		return AGAIN;
	}
	if (q->gen && zkl__zk_session_gone(zrc))
		return lost_session(q);
	if (q->gen && zrc == ZNONODE)
		/* The folder is gone, so is the node of the hold this one stands on (a
		 * downgrade's write lock, whose loss is on its way). */
		return zkl__fail(ZKL_ELOST, "the folder %s is gone, and with it the hold this "
		                "node stood on", q->path);
	if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc)) {
		if (zkl__zk_transient(zrc))
			f->unknown = gen;
		if (f->try_once)
			return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper was lost");
		f->retried = true;
		f->recover = true;
		return AGAIN;
	}
	return zkl__fail_zk(zrc, "cannot create", f->target);
}

static int fixed_step(zkl_client *c, struct zkl_job *j)
{
	struct fixed_job *f = (struct fixed_job *)j;
	const struct zkl_queue *q = f->q;
	for (;;) {
		if (f->recover) {
			int rc = zkl__job_await_connected(c, j, f->deadline);
			if (rc == ZKL_JOB_WAIT)
				return rc;
			if (rc == ZKL_ETIMEDOUT)
				return zkl__fail(rc, "timed out while disconnected from ZooKeeper");
			if (rc != 0)
				return fixed_gave_up(f, rc);
			f->recover = false;
		}
		if (!f->op) {
			if (q->gen && c->gen != q->gen)
				return lost_session(q);
			const struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = f->target,
			                               .data = q->data, .len = q->data_len,
			                               .mode = ZOO_EPHEMERAL};
			const struct zkl_req exists = {.kind = ZKL_OP_EXISTS, .path = f->target};
			int rc = zkl__job_send(c, j, f->exists ? &exists : &create, &f->op);
			if (rc != 0)
				return rc;
			if (f->stands_on) {
				const struct zkl_req check = {.kind = ZKL_OP_EXISTS,
				                              .path = f->stands_on};
				if ((rc = zkl__job_send(c, j, &check, &f->check)) != 0)
					return rc;
			}
		}
		int rc = zkl__job_await(c, j, f->op, fixed_until(c, f));
		if (rc == 0 && f->check)
			rc = zkl__job_await(c, j, f->check, fixed_until(c, f));
		if (rc == ZKL_JOB_WAIT)
			return rc;
		if (rc != 0)
			return fixed_gave_up(f, rc); /* fixed_drop() sees to the create */
		rc = fixed_answer(c, f);
		if (rc != 0 && rc != AGAIN)
			return rc; /* fixed_drop() sees to what op may have made */
		zkl__op_put(c, f->op);
		f->op = NULL;
		if (f->check) {
			zkl__op_put(c, f->check);
			f->check = NULL;
		}
		if (rc != AGAIN)
			return rc;
	}
}

static void fixed_drop(zkl_client *c, struct zkl_job *j)
{
	struct fixed_job *f = (struct fixed_job *)j;
	if (!f->node->path && f->target) {
		/* Given up with a node of ours maybe there: a create still out or answered
		 * (its check then failed, or its wait ran out), a node found by exists, or a
		 * create whose answer was lost. Its session owns it, and nobody else would
		 * ever delete it (the owner's next acquire would queue behind it). */
		uint64_t gen = f->unknown;
		if (f->op && (!f->op->done || f->op->rc == ZOK))
			gen = f->op->s->gen;
		if (gen)
			zkl__task_delete(c, f->target, gen);
	}
	if (f->op) {
		zkl__op_put(c, f->op);
		f->op = NULL;
	}
	if (f->check) {
		zkl__op_put(c, f->check);
		f->check = NULL;
	}
}

/* The end of a creation started by zkl__engine_create_fixed_start (on the loop, no lock
 * held): the done function runs, and f is freed after it. */
static void fixed_end(zkl_client *c, struct zkl_job *j)
{
	(void)c;
	struct fixed_job *f = (struct fixed_job *)j;
	if (j->rc != 0)
		zkl__fail(j->rc, "%s", j->error);
	else
		zkl__clear_error();
	f->done_fn(f->done_arg, j->rc);
	zkl__job_destroy(j);
	free(f->target);
	free(f);
}

int zkl__engine_create_fixed_start(const struct zkl_queue *q, const char *name,
                                  const char *stands_on, int timeout_ms,
                                  struct zkl_node *node, void (*done)(void *arg, int rc),
                                  void *arg)
{
	memset(node, 0, sizeof *node);
	struct fixed_job *f = calloc(1, sizeof *f);
	char *target = zkl__path_join(q->path, name);
	if (!f || !target) {
		free(f);
		free(target);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	*f = (struct fixed_job){.job = {.step = fixed_step, .drop = fixed_drop, .end = fixed_end},
	                        .q = q, .node = node, .target = target, .stands_on = stands_on,
	                        .try_once = timeout_ms == 0,
	                        .deadline = zkl__deadline(timeout_ms ? timeout_ms :
	                                                 ZKL_TRY_ONCE_MS),
	                        .since = zkl__now_ms(), .done_fn = done, .done_arg = arg};
	int rc = zkl__job_start(q->c, &f->job, q->owner);
	if (rc != 0) {
		free(f->target);
		free(f);
	}
	return rc;
}

int zkl__engine_create_fixed(const struct zkl_queue *q, const char *name,
                            const char *stands_on, int timeout_ms, struct zkl_node *node)
{
	memset(node, 0, sizeof *node);
	struct fixed_job f = {.job = {.step = fixed_step, .drop = fixed_drop}, .q = q,
	                      .stands_on = stands_on,
	                      .node = node, .try_once = timeout_ms == 0,
	                      .deadline = zkl__deadline(timeout_ms ? timeout_ms :
	                                               ZKL_TRY_ONCE_MS),
	                      .since = zkl__now_ms()};
	f.target = zkl__path_join(q->path, name);
	if (!f.target)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl__job_run(q->c, &f.job, q->owner, "a node's creation");
	free(f.target);
	return rc;
}
