/* The engine's confirmed release of a node we hold (engine.c's design notes). */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"

/* ---- a confirmed release ---------------------------------------------------------- */

/* The delete of a node we hold, as a job: retried through connection loss until it
 * succeeds or its session is given up for lost, and says which. A node whose delete is
 * not confirmed while its session may live goes to the background task, which retries
 * until it succeeds or the session ends.
 *
 * It shares the bounded delete's deadline and reading of the answer
 * (zkl__delete_deadline, zkl__delete_answer), not its start and wait
 * (zkl__withdraw_start): a release's caller waits to be told the node is gone, so
 * disconnected it waits for the connection rather than hand the node to the
 * background task at once, it sends the delete again itself after an answer lost, it
 * tells the caller what happened (ZKL_ELOST, a refusal), and its delete may be a
 * transaction with the caller's operations and a note, whose answer it reads further. */
struct delete_job {
	struct zkl_job job;            /* first */
	struct zkl_node *node;         /* the caller's */
	/* A release with the caller's operations (zkl__engine_release_txn): they go in one
	 * transaction with the delete (and the note); dropped once they failed. */
	const struct zkl_mop *subs;
	int nsubs;
	struct zkl_op *answer;         /* the transaction's answer, kept for the caller */
	int failed;                    /* what the caller is told once the node is gone */
	bool unsure;                   /* a transaction went out and its answer was lost */
	struct zkl_op *op;             /* the delete out */
	int64_t until;                 /* its answer's deadline */
	bool reconnect;                /* waiting for the connection after a loss */
	bool decided;                  /* release_step: release_decide() has run */
};

static int gone_with_session(const struct zkl_node *node)
{
	return zkl__fail(ZKL_ELOST, "the session of %s is gone; the node goes with it",
	                node->path);
}

static int delete_step(zkl_client *c, struct zkl_job *j)
{
	struct delete_job *d = (struct delete_job *)j;
	struct zkl_node *node = d->node;
	for (;;) {
		if (node->gen != c->gen)
			return gone_with_session(node);
		/* Past the loss deadline the session is being given up: its node goes with
		 * it, or with the background task if it turns out to be alive. */
		const int64_t lost_at = zkl__lost_at(c);
		if (zkl__now_ms() >= lost_at) {
			zkl__task_delete(c, node->path, node->gen);
			return gone_with_session(node);
		}
		if (d->reconnect) {
			/* Wait for the connection, but no longer than the session can be alive. */
			int rc = zkl__job_await_connected(c, j, lost_at);
			if (rc == ZKL_JOB_WAIT)
				return rc;
			if (rc != 0)
				continue; /* past the loss deadline, or the session changed */
			d->reconnect = false;
		}
		if (!d->op) {
			/* The caller's operations, then the delete, then a tracking hold's note,
			 * all in one transaction. */
			char note[192];
			int n = node->note ? snprintf(note, sizeof note, "released %s%s%s",
			                              zkl__basename(node->path),
			                              node->note_end[0] ? "\n" : "",
			                              node->note_end) : 0;
			const bool noted = node->note && n > 0 && (size_t)n < sizeof note;
			const int total = d->nsubs + 1 + noted;
			struct zkl_mop *subs = calloc((size_t)total, sizeof *subs);
			if (!subs) {
				zkl__task_delete(c, node->path, node->gen);
				return zkl__fail(ZKL_ENOMEM, "out of memory");
			}
			for (int i = 0; i < d->nsubs; i++)
				subs[i] = d->subs[i];
			subs[d->nsubs] = (struct zkl_mop){.type = ZOO_DELETE_OP, .path = node->path,
			                                  .version = -1};
			if (noted)
				subs[d->nsubs + 1] = (struct zkl_mop){.type = ZOO_SETDATA_OP,
				                                      .path = node->note, .data = note,
				                                      .len = n, .version = -1};
			const struct zkl_req multi = {.kind = ZKL_OP_MULTI, .mops = subs,
			                              .nmops = total};
			const struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = node->path};
			int rc = zkl__job_send(c, j, total > 1 ? &multi : &del, &d->op);
			free(subs);
			if (rc != 0) {
				zkl__task_delete(c, node->path, node->gen);
				return rc;
			}
			d->until = zkl__delete_deadline(c, INT64_MAX);
		}
		int rc = zkl__job_await(c, j, d->op, d->until);
		if (rc == ZKL_JOB_WAIT)
			return rc;
		const int zrc = rc == 0 ? d->op->rc : ZOPERATIONTIMEOUT;
		/* Which operation of a transaction failed: the caller's (< nsubs), the delete
		 * (nsubs), the note (nsubs + 1). */
		int at = -1;
		if (zrc != ZOK && d->op->kind == ZKL_OP_MULTI && zkl__zk_answered(zrc)) {
			for (int i = 0; i < d->op->nmops && at < 0; i++)
				if (d->op->results[i].err != ZOK)
					at = i;
		}
		if (d->nsubs && d->op->kind == ZKL_OP_MULTI && (zrc == ZOK || at >= 0)) {
			if (d->answer)
				zkl__op_put(c, d->answer);
			d->answer = d->op; /* the caller reads the results */
		} else {
			zkl__op_put(c, d->op);
		}
		d->op = NULL;
		if (at >= 0 && at == d->nsubs + 1) {
			/* Refused for its note alone (deleted meanwhile): again, without one. */
			free(node->note);
			node->note = NULL;
			continue;
		}
		if (at >= 0 && at < d->nsubs) {
			/* The caller's operations failed, and nothing was applied; or, after an
			 * answer lost, they may have been applied by the first transaction. The
			 * node goes anyway, alone. */
			d->failed = d->unsure ? zkl__fail(ZKL_ECONNLOSS, "the connection was lost "
			                                  "with the transaction out; it may or may not "
			                                  "have been applied")
			                      : zkl__fail_zk(d->answer->results[at].err,
			                                     "operation of the release's transaction "
			                                     "failed at", d->subs[at].path);
			d->subs = NULL;
			d->nsubs = 0;
			continue;
		}
		switch (zkl__delete_answer(c, node->path, zrc)) {
		case ZKL_DELETE_DONE:
			if (zrc == ZNONODE && d->nsubs && !d->unsure)
				return zkl__fail(ZKL_ELOST, "the node %s is gone: the lock was "
				                 "lost, and nothing of the transaction was applied",
				                 node->path);
			if (zrc == ZNONODE && d->nsubs)
				return zkl__fail(ZKL_ECONNLOSS, "the connection was lost with the "
				                 "transaction out; it may or may not have been applied");
			return d->failed;
		case ZKL_DELETE_SESSION_GONE:
			return gone_with_session(node);
		case ZKL_DELETE_REFUSED:
			return zkl__fail_zk(zrc, "cannot delete", node->path);
		case ZKL_DELETE_UNSURE:
			break;
		}
		if (d->nsubs)
			d->unsure = true;
		d->reconnect = true;
	}
}

static void delete_drop(zkl_client *c, struct zkl_job *j)
{
	struct delete_job *d = (struct delete_job *)j;
	if (d->op)
		zkl__op_put(c, d->op); /* abandoned: the client is closing */
	d->op = NULL;
	zkl__node_clear(d->node);
}

/* What a release does with its node, on the loop: done (0, or ZKL_ELOST with
 * its session gone), or ZKL_JOB_WAIT for a delete the caller waits for. On a thread that
 * runs the loop (a callback, or the application's loop thread) nothing waits for the
 * server, not even with confirm_release: the delete goes to the background task, sent at
 * once if connected. */
static int release_decide(zkl_client *c, struct zkl_node *node, bool on_loop, bool wait)
{
	if (!node->path)
		return 0;
	zkl__node_rev_drop(c, node);
	int rc = 0;
	if (node->gen != c->gen)
		rc = gone_with_session(node);
	else if ((node->note || wait) && !on_loop)
		return ZKL_JOB_WAIT; /* its note, or the caller's operations, go in one
		                      * transaction with the delete */
	else if ((on_loop || !c->confirm_release) && c->sess->connected)
		zkl__task_delete_now(c, node->path, node->gen);
	else if (on_loop)
		zkl__task_delete(c, node->path, node->gen);
	else
		return ZKL_JOB_WAIT; /* confirmed, or disconnected: wait for the delete */
	zkl__node_clear(node);
	return rc;
}

/* A release from an application's thread: decided on the loop, then the delete waited
 * for if it must be. */
static int release_step(zkl_client *c, struct zkl_job *j)
{
	struct delete_job *d = (struct delete_job *)j;
	if (!d->decided) {
		d->decided = true;
		int rc = release_decide(c, d->node, false, d->nsubs > 0);
		if (rc != ZKL_JOB_WAIT)
			return rc;
	}
	return delete_step(c, j);
}

/* A release on a thread that runs the loop: the call runs at once, on this thread. */
struct release_call {
	struct zkl__call call;
	struct zkl_node *node;
	int rc;
};

static void release_on_loop(zkl_client *c, struct zkl__call *call)
{
	struct release_call *r = (struct release_call *)call;
	r->rc = release_decide(c, r->node, true, false);
}

/* Deletes node (its hold ended), with subs[0..n) in the same transaction if n > 0; as
 * zkl__engine_release_txn(). */
static int release_node(zkl_client *c, struct zkl_node *node, const struct zkl_mop *subs,
                        int n, struct zkl_op **answer)
{
	/* The usual release, from an application's thread: its delete is sent from here,
	 * not by the loop (the one such request), and the loop takes its answer over. */
	if (node->path && n == 0 && !node->rev && !node->note && !c->confirm_release &&
	    !zkl__on_event_thread(c) &&
	    zkl__task_delete_sent(c, node->path, node->gen)) {
		node->path = NULL; /* the task's now */
		zkl__node_clear(node);
		return 0;
	}
	if (!node->path)
		return 0;
	if (zkl__is_loop_thread(c)) {
		/* Nothing waits for the server here: released without the transaction. */
		struct release_call r = {.call.fn = release_on_loop, .node = node};
		if (!zkl__call(c, &r.call))
			zkl__node_clear(node); /* the loop has ended: the session goes with it */
		if (n > 0)
			return zkl__fail(ZKL_EDEADLK, "a release with a transaction waits for the "
			                 "server: not on a thread that runs the client's loop");
		return r.rc;
	}
	struct delete_job d = {.job = {.step = release_step, .drop = delete_drop}, .node = node,
	                       .subs = subs, .nsubs = n};
	int rc = zkl__job_run(c, &d.job, NULL, "a release");
	if (answer)
		*answer = d.answer;
	return rc;
}

int zkl__engine_release_txn(zkl_client *c, struct zkl_node *node, const struct zkl_mop *subs,
                           int n, struct zkl_op **answer)
{
	/* The hold lives until the delete is out, or answered for a release that waits for
	 * it: a loss found meanwhile, or by the release, is reported to on_lost once (its
	 * end reports one the loop has not yet), and release says ZKL_ELOST as well (a
	 * transaction's keeps its own detail). */
	if (answer)
		*answer = NULL;
	struct zkl_hold *h = node->hold;
	node->hold = NULL;
	if (h)
		atomic_store(&h->releasing, true); /* our delete is no loss (holds.c) */
	int rc = release_node(c, node, subs, n, answer);
	if (h && zkl__hold_end(c, h, rc == ZKL_ELOST ? ZKL_HOLD_END_LOST : ZKL_HOLD_END) &&
	    (n == 0 || rc != ZKL_ELOST))
		rc = zkl__fail(ZKL_ELOST, "the lock was lost before it was released");
	return rc;
}

int zkl__engine_release(zkl_client *c, struct zkl_node *node)
{
	return zkl__engine_release_txn(c, node, NULL, 0, NULL);
}

/* A background release handed to the loop: the node, moved out of its owner. */
struct release_later {
	struct zkl__call call;
	struct zkl_node node;
};

void zkl__engine_release_now(zkl_client *c, struct zkl_node *node)
{
	if (!node->path)
		return;
	zkl__node_rev_drop(c, node);
	if (node->gen == c->gen) /* else its session, and so the node, is gone */
		zkl__task_delete_now(c, node->path, node->gen);
	zkl__node_clear(node);
}

static void release_later_run(zkl_client *c, struct zkl__call *call)
{
	struct release_later *r = (struct release_later *)call;
	zkl__engine_release_now(c, &r->node);
	free(r);
}

void zkl__engine_release_later(zkl_client *c, struct zkl_node *node)
{
	if (node->hold)
		zkl__hold_end(c, node->hold, ZKL_HOLD_END_QUIET);
	node->hold = NULL;
	if (!node->path)
		return;
	struct release_later *r = malloc(sizeof *r);
	if (!r) {
		/* Out of memory: the node stays until its session ends. */
		zkl__log(c, ZKL_LOG_ERROR, "out of memory: %s stays until its session ends",
		        node->path);
		zkl__node_clear(node);
		return;
	}
	r->call.fn = release_later_run;
	r->node = *node;
	memset(node, 0, sizeof *node);
	if (!zkl__call(c, &r->call)) {
		zkl__node_clear(&r->node); /* the loop has ended: the session goes with it */
		free(r);
	}
}
