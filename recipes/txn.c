/* Guarded transactions: the caller's operations and a check of the hold's own node,
 * committed in one ZooKeeper multi (<zklocks/lock.h>, zkl_lock_txn()).
 *
 * The calling thread checks the arguments, copies them, and reads the node of the hold
 * the verbs see from the lock's view (its own mutex alone, as zkl_lock_is_held() does).
 * From then on the transaction is a job of the loop: its first step asks the engine how
 * the hold of that node stands among the client's (zkl__held_at), and sends the multi
 * only while the hold is there, neither ended, nor being released, nor lost, and on the
 * current session; the check of the node comes first in the multi, so that a node that
 * is gone shows as the first operation's ZNONODE and never hides behind a failure of the
 * caller's. When the server answers that the node is gone and the hold is still its
 * owner's, the step has the engine mark the hold lost (zkl__held_at_gone): the loop
 * reports it as any loss, on its next turn.
 * A release racing the transaction either sends its delete after the multi (the write is
 * applied, then the lock released) or before (the check fails, and the hold, ended or
 * being released, makes it ZKL_ENOTHELD). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/lock.h>
#include <zklocks/record.h>

#include "lock_internal.h"

struct txn {
	struct zkl_job job;         /* first */
	zkl_lock *l;                /* only handed back to the callback */
	const char *kind;           /* l's, for the details: static */
	char *lpath;                /* l's path, copied (the handle may go meanwhile) */
	size_t n;                   /* the caller's operations; mops has n + 1 */
	struct zkl_mop *mops;       /* [0]: the check of the hold's node */
	zkl_txn_op *ops;            /* the caller's, copied (paths and data in mops) */
	zkl_txn_result *results;    /* n of them */
	char node[ZKL_NODE_MAX];
	struct zkl_req req;
	struct zkl_op *op;
	zkl_txn_fn fn;              /* asynchronous: its callback */
	void *fn_data;
};

static const char *kind_name(zkl_txn_kind k)
{
	switch (k) {
	case ZKL_TXN_CREATE:
		return "create";
	case ZKL_TXN_SET:
		return "set";
	case ZKL_TXN_DELETE:
		return "delete";
	case ZKL_TXN_CHECK:
		return "check";
	}
	return "?";
}

static void txn_free(struct txn *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->mops && i <= t->n; i++) {
		free((char *)t->mops[i].path);
		free((void *)t->mops[i].data);
	}
	free(t->mops);
	free(t->ops);
	free(t->results);
	free(t->lpath);
	free(t);
}

static int op_check(const zkl_txn_op *o, size_t i)
{
	const char *what = kind_name(o->kind);
	if (o->kind < ZKL_TXN_CREATE || o->kind > ZKL_TXN_CHECK)
		return zkl__fail(ZKL_EINVAL, "operation %zu of the transaction is of no kind (%d)", i,
		                 (int)o->kind);
	int rc = zkl__path_check(o->path, "transaction path");
	if (rc != 0)
		return zkl__fail(rc, "operation %zu (%s): %s", i, what, zkl_last_error());
	if (o->kind == ZKL_TXN_CREATE || o->kind == ZKL_TXN_SET) {
		if (!o->data && o->len > 0)
			return zkl__fail(ZKL_EINVAL, "operation %zu (%s %s): data is NULL with a "
			                 "length of %zu", i, what, o->path, o->len);
		if (o->len > ZKL_RECORD_MAX)
			return zkl__fail(ZKL_EINVAL, "operation %zu (%s %s): %zu bytes of data, at "
			                 "most %d", i, what, o->path, o->len, ZKL_RECORD_MAX);
	}
	if (o->kind == ZKL_TXN_CREATE &&
	    (o->flags & ~(ZKL_TXN_EPHEMERAL | ZKL_TXN_SEQUENTIAL)) != 0)
		return zkl__fail(ZKL_EINVAL, "operation %zu (%s %s): unknown flags %#x", i, what,
		                 o->path, o->flags);
	if (o->kind != ZKL_TXN_CREATE && o->version < -1)
		return zkl__fail(ZKL_EINVAL, "operation %zu (%s %s): version %d (-1 for any)", i,
		                 what, o->path, o->version);
	return 0;
}

/* The results of a transaction refused before it started: each gets rc, unless ops or
 * n is not valid, and nothing is written then (n may be a count the caller's array does
 * not have). */
static void results_refused(zkl_txn_result *results, const zkl_txn_op *ops, size_t n,
                            int rc)
{
	if (!results || !ops || n == 0 || n > ZKL_TXN_MAX)
		return;
	for (size_t i = 0; i < n; i++)
		results[i] = (zkl_txn_result){.rc = rc};
}

/* Checks and copies the arguments, and reads the node of l's hold. */
static int txn_new(zkl_lock *l, const zkl_txn_op *ops, size_t n, bool blocking,
                   struct txn **out)
{
	*out = NULL;
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (!ops)
		return zkl__fail(ZKL_EINVAL, "operations are NULL");
	if (n == 0 || n > ZKL_TXN_MAX)
		return zkl__fail(ZKL_EINVAL, "a transaction of %zu operations: 1 to %d", n,
		                 ZKL_TXN_MAX);
	if (!l->ops->hold_node || !l->c)
		return zkl__fail(ZKL_ENOTSUP, "a %s has no node of its own to guard with: each of "
		                 "its members has one (guard with a member)", l->kind);
	for (size_t i = 0; i < n; i++) {
		int rc = op_check(&ops[i], i);
		if (rc != 0)
			return rc;
	}
	if (blocking && zkl__is_loop_thread(l->c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for a guarded transaction's answer on "
		                 "a thread that runs the client's loop (a callback, or the "
		                 "application's loop thread): use zkl_lock_txn_async()");
	struct txn *t = calloc(1, sizeof *t);
	if (!t)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	t->l = l;
	t->kind = l->kind;
	t->n = n;
	if (!(t->lpath = strdup(l->path))) {
		free(t);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(l->mu);
	int held = l->ops->hold_node(l, t->node, sizeof t->node);
	pthread_mutex_unlock(l->mu);
	if (held <= 0) {
		free(t->lpath);
		free(t);
		if (held < 0)
			return zkl__fail(ZKL_ELOST, "%s %s was lost: release it", l->kind, l->path);
		return zkl__fail(ZKL_ENOTHELD, "%s %s is not held here", l->kind, l->path);
	}
	t->mops = calloc(n + 1, sizeof *t->mops);
	t->ops = calloc(n, sizeof *t->ops);
	t->results = calloc(n, sizeof *t->results);
	if (!t->mops || !t->ops || !t->results || !(t->mops[0].path = strdup(t->node))) {
		txn_free(t);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	t->mops[0].type = ZOO_CHECK_OP;
	t->mops[0].version = -1; /* a revocation request writes the node's data */
	for (size_t i = 0; i < n; i++) {
		const zkl_txn_op *o = &ops[i];
		struct zkl_mop *m = &t->mops[i + 1];
		t->ops[i] = *o;
		m->version = o->version;
		m->len = (int)o->len;
		if (!(m->path = strdup(o->path))) {
			txn_free(t);
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		}
		switch (o->kind) {
		case ZKL_TXN_CREATE:
			m->type = ZOO_CREATE_OP;
			m->mode = ((o->flags & ZKL_TXN_EPHEMERAL) ? ZOO_EPHEMERAL : 0) |
			          ((o->flags & ZKL_TXN_SEQUENTIAL) ? ZOO_SEQUENCE : 0);
			m->version = -1;
			break;
		case ZKL_TXN_SET:
			m->type = ZOO_SETDATA_OP;
			break;
		case ZKL_TXN_DELETE:
			m->type = ZOO_DELETE_OP;
			break;
		case ZKL_TXN_CHECK:
			m->type = ZOO_CHECK_OP;
			break;
		}
		if ((o->kind == ZKL_TXN_CREATE || o->kind == ZKL_TXN_SET) && o->data) {
			void *copy = malloc(o->len ? o->len : 1);
			if (!copy) {
				txn_free(t);
				return zkl__fail(ZKL_ENOMEM, "out of memory");
			}
			memcpy(copy, o->data, o->len);
			m->data = copy;
		}
		t->ops[i].path = m->path;
		t->ops[i].data = m->data;
	}
	t->req = (struct zkl_req){.kind = ZKL_OP_MULTI, .path = t->mops[0].path,
	                          .mops = t->mops, .nmops = (int)n + 1};
	*out = t;
	return 0;
}

/* Every result says rc (zk_rc: zrc): the transaction failed as a whole. */
static void results_all(struct txn *t, int rc, int zrc)
{
	for (size_t i = 0; i < t->n; i++) {
		t->results[i].rc = rc;
		t->results[i].zk_rc = zrc;
	}
}

/* The multi's answer (on the loop). */
static int txn_answered(zkl_client *c, struct txn *t)
{
	const struct zkl_op *op = t->op;
	const int zrc = op->rc;
	if (zrc == ZOK) {
		for (size_t i = 0; i < t->n; i++) {
			zkl_txn_result *r = &t->results[i];
			r->rc = 0;
			r->zk_rc = ZOK;
			if (t->ops[i].kind == ZKL_TXN_CREATE && op->made[i + 1])
				snprintf(r->path, sizeof r->path, "%s", op->made[i + 1]);
			if (t->ops[i].kind == ZKL_TXN_SET)
				r->version = op->stats[i + 1].version;
		}
		return 0;
	}
	/* The server answered an operation's failure: each has its err. Else the request
	 * failed as a whole (the connection, the session). */
	const bool answered = zkl__zk_class(zrc) == ZKL_ZK_ANSWER;
	if (answered && op->results[0].err != ZOK) {
		results_all(t, ZKL_ECANCELED, ZRUNTIMEINCONSISTENCY);
		if (op->results[0].err == ZNONODE && zkl__held_at_gone(c, t->node)) {
			results_all(t, ZKL_ELOST, ZRUNTIMEINCONSISTENCY);
			return zkl__fail(ZKL_ELOST, "%s %s was lost: its node %s is gone; the "
			                 "transaction was not applied", t->kind, t->lpath, t->node);
		}
		if (op->results[0].err == ZNONODE &&
		    zkl__held_at(c, t->node) == ZKL_HELD_AT_GONE_LOST) {
			results_all(t, ZKL_ELOST, ZRUNTIMEINCONSISTENCY);
			return zkl__fail(ZKL_ELOST, "%s %s was lost; the transaction was not applied",
			                 t->kind, t->lpath);
		}
		if (op->results[0].err == ZNONODE) {
			results_all(t, ZKL_ENOTHELD, ZRUNTIMEINCONSISTENCY);
			return zkl__fail(ZKL_ENOTHELD, "%s %s was released before the transaction "
			                 "reached the server; it was not applied", t->kind, t->lpath);
		}
		int rc = zkl__fail_zk(op->results[0].err, "cannot check the hold's node", t->node);
		results_all(t, rc, ZRUNTIMEINCONSISTENCY);
		return rc;
	}
	if (answered) {
		for (size_t i = 0; i < t->n; i++) {
			const int err = op->results[i + 1].err;
			if (err == ZOK || err == ZRUNTIMEINCONSISTENCY)
				continue;
			results_all(t, ZKL_ECANCELED, ZRUNTIMEINCONSISTENCY);
			t->results[i].zk_rc = err;
			char what[64];
			snprintf(what, sizeof what, "operation %zu (%s) of the transaction", i,
			         kind_name(t->ops[i].kind));
			int rc = zkl__fail_zk(err, what, t->ops[i].path);
			/* ZKL_ECANCELED and ZKL_ELOST mean something else here. */
			if (rc == ZKL_ELOST || rc == ZKL_ECANCELED)
				rc = zkl__fail(ZKL_EZK, "%s", zkl_last_error());
			t->results[i].rc = rc;
			return zkl__fail(rc, "%s; none was applied", zkl_last_error());
		}
	}
	/* The request's own failure. */
	int rc;
	if (zkl__zk_session_gone(zrc))
		rc = zkl__fail(ZKL_ELOST, "%s %s was lost with its session (%s); the transaction "
		               "was not applied", t->kind, t->lpath, zerror(zrc));
	else
		rc = zkl__fail_zk(zrc, "transaction guarded by", t->node);
	results_all(t, rc, zrc);
	return rc;
}

/* Waits for the session (on the loop): its events wake the job, and the client gives
 * it up for lost by its deadline (zkl__loss_deadline()), which marks the hold lost. Looked at
 * again now and then until then, never at once (the deadline may be due on this very
 * turn of the loop, before the loop has marked anything). */
static void wait_session(zkl_client *c, struct txn *t)
{
	const int64_t now = zkl__now_ms();
	int64_t at = zkl__loss_deadline(c);
	if (at > now + 1000)
		at = now + 1000;
	if (at < now + 50)
		at = now + 50;
	zkl__job_wake_at(c, &t->job, at);
}

/* The connection went before the answer (on the loop): the transaction may or may
 * not have been applied. Whatever it was, it was while the hold's node existed. The
 * answer waits until the session's fate is known: it lives on (ZKL_ECONNLOSS: read back
 * and write again), or the hold is lost with it (ZKL_ELOST: stop; a holder paused past
 * its session hears this, and its write was not applied after the loss). The loop gives
 * a session up by its own deadline, so the wait ends. */
static int txn_unknown(zkl_client *c, struct txn *t)
{
	const int zrc = t->op->rc;
	const enum zkl_held_at h = zkl__held_at(c, t->node);
	if (h == ZKL_HELD_AT_LOST) {
		results_all(t, ZKL_ELOST, zrc);
		return zkl__fail(ZKL_ELOST, "%s %s was lost after the connection went, before "
		                 "ZooKeeper answered the transaction (%s): if it was applied, it "
		                 "was while the hold's node existed", t->kind, t->lpath, zerror(zrc));
	}
	if (h != ZKL_HELD_AT_HELD || c->sess->connected) {
		results_all(t, ZKL_ECONNLOSS, zrc);
		return zkl__fail(ZKL_ECONNLOSS, "the connection was lost before ZooKeeper answered "
		                 "the transaction (%s): it may or may not have been applied",
		                 zerror(zrc));
	}
	wait_session(c, t);
	return ZKL_JOB_WAIT;
}

static int txn_step(zkl_client *c, struct zkl_job *j)
{
	struct txn *t = (struct txn *)j;
	if (!t->op) {
		const enum zkl_held_at h = zkl__held_at(c, t->node);
		if (h == ZKL_HELD_AT_NONE || h == ZKL_HELD_AT_GONE_LOST) {
			results_all(t, ZKL_ENOTHELD, 0);
			return zkl__fail(ZKL_ENOTHELD, "%s %s was released before the transaction "
			                 "was sent", t->kind, t->lpath);
		}
		if (h == ZKL_HELD_AT_LOST) {
			results_all(t, ZKL_ELOST, 0);
			return zkl__fail(ZKL_ELOST, "%s %s was lost; the transaction was not sent",
			                 t->kind, t->lpath);
		}
		if (!c->sess->connected) {
			/* Sent now, it would fail at once: it waits for the connection, or for
			 * the hold's loss. */
			wait_session(c, t);
			return ZKL_JOB_WAIT;
		}
		int rc = zkl__job_send(c, j, &t->req, &t->op);
		if (rc != 0) {
			results_all(t, rc, 0);
			return rc;
		}
	}
	/* Every request is answered, if only by the loss of its connection. */
	int rc = zkl__job_await(c, j, t->op, INT64_MAX);
	if (rc != 0)
		return rc; /* ZKL_JOB_WAIT */
	if (zkl__zk_transient(t->op->rc))
		return txn_unknown(c, t);
	return txn_answered(c, t);
}

static void txn_drop(zkl_client *c, struct zkl_job *j)
{
	struct txn *t = (struct txn *)j;
	if (t->op)
		zkl__op_put(c, t->op);
	t->op = NULL;
}

int zkl_lock_txn(zkl_lock *l, const zkl_txn_op *ops, size_t n, zkl_txn_result *results)
{
	struct txn *t;
	int rc = txn_new(l, ops, n, true, &t);
	if (rc == 0) {
		t->job.step = txn_step;
		t->job.drop = txn_drop;
		rc = zkl__job_run(l->c, &t->job, NULL, "a guarded transaction's answer");
		if (results) {
			/* A job that never reached the loop set no result. */
			for (size_t i = 0; i < n; i++)
				if (t->results[i].rc == 0 && rc != 0)
					t->results[i].rc = rc;
			memcpy(results, t->results, n * sizeof *results);
		}
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		txn_free(t);
		if (rc != 0)
			zkl__fail(rc, "%s", saved);
		return rc;
	}
	results_refused(results, ops, n, rc);
	return rc;
}

/* The end of an asynchronous transaction (loop, no lock held). */
static void txn_end(zkl_client *c, struct zkl_job *j)
{
	(void)c;
	struct txn *t = (struct txn *)j;
	zkl__job_destroy(j);
	for (size_t i = 0; i < t->n; i++)
		if (t->results[i].rc == 0 && t->job.rc != 0)
			t->results[i].rc = t->job.rc; /* it ended before its first step */
	if (t->job.rc != 0)
		zkl__fail(t->job.rc, "%s", t->job.error);
	else
		zkl__clear_error();
	t->fn(t->l, t->job.rc, t->results, t->n, t->fn_data);
	txn_free(t);
}

int zkl_lock_txn_async(zkl_lock *l, const zkl_txn_op *ops, size_t n, zkl_txn_fn fn,
                       void *data)
{
	struct txn *t;
	if (!fn) {
		zkl__clear_error();
		return zkl__fail(ZKL_EINVAL, "callback is NULL");
	}
	int rc = txn_new(l, ops, n, false, &t);
	if (rc != 0)
		return rc;
	t->job.step = txn_step;
	t->job.drop = txn_drop;
	t->job.end = txn_end;
	t->fn = fn;
	t->fn_data = data;
	rc = zkl__job_start(l->c, &t->job, NULL);
	if (rc != 0)
		txn_free(t);
	return rc;
}

int zkl_lock_guarded_set(zkl_lock *l, const char *path, const void *data, size_t len)
{
	const zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = path, .data = data, .len = len,
	                       .version = -1};
	return zkl_lock_txn(l, &op, 1, NULL);
}

int zkl_lock_guarded_create(zkl_lock *l, const char *path, const void *data, size_t len)
{
	const zkl_txn_op op = {.kind = ZKL_TXN_CREATE, .path = path, .data = data, .len = len};
	return zkl_lock_txn(l, &op, 1, NULL);
}

int zkl_record_set_guarded(zkl_lock *l, const char *path, const void *data, size_t len)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	zkl_txn_result r;
	for (int attempt = 0; attempt < 5; attempt++) {
		zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = path, .data = data, .len = len,
		                 .version = -1};
		int rc = zkl_lock_txn(l, &op, 1, &r);
		if (rc == 0 || r.zk_rc != ZNONODE)
			return rc;
		/* Not there: made in a transaction of its own, its folders first. */
		op.kind = ZKL_TXN_CREATE;
		rc = zkl_lock_txn(l, &op, 1, &r);
		if (rc != 0 && r.zk_rc == ZNONODE && l->c) {
			if ((rc = zkl__record_folders(l->c, path)) != 0)
				return rc;
			rc = zkl_lock_txn(l, &op, 1, &r);
		}
		if (rc == 0 || (r.zk_rc != ZNONODE && r.zk_rc != ZNODEEXISTS))
			return rc;
		/* It came, or its folder went, meanwhile: again. */
	}
	return zkl__fail(ZKL_EZK, "cannot set record %s: it keeps changing", path);
}

/* ---- a release with the caller's operations (zkl_lock_release_txn) ----
 *
 * The operations go in one transaction with the delete of the hold's node (and a
 * tracking hold's note, previous.c): the delete is the check. The hold ends whatever
 * comes (src/engine's zkl__engine_release_txn()); results say what became of each. */

/* The results of ops from the release's transaction answer (NULL: none came), rc the
 * release's. */
static void release_results(struct txn *t, const struct zkl_op *answer, int rc)
{
	if (rc == 0 && answer && answer->rc == ZOK) {
		for (size_t i = 0; i < t->n; i++) {
			zkl_txn_result *r = &t->results[i];
			*r = (zkl_txn_result){.rc = 0, .zk_rc = ZOK};
			if (t->ops[i].kind == ZKL_TXN_CREATE && answer->made[i])
				snprintf(r->path, sizeof r->path, "%s", answer->made[i]);
			if (t->ops[i].kind == ZKL_TXN_SET)
				r->version = answer->stats[i].version;
		}
		return;
	}
	/* An operation of the caller's failed: it has the code, the others were not
	 * applied because of it. Else the transaction failed as a whole. */
	if (answer && rc != ZKL_ECONNLOSS && rc != ZKL_ELOST && rc != 0) {
		for (size_t k = 0; k < t->n; k++) {
			const int err = answer->results[k].err;
			if (err == ZOK || err == ZRUNTIMEINCONSISTENCY)
				continue;
			results_all(t, ZKL_ECANCELED, ZRUNTIMEINCONSISTENCY);
			t->results[k].rc = rc;
			t->results[k].zk_rc = err;
			return;
		}
	}
	results_all(t, rc, answer ? answer->rc : 0);
}

int zkl_lock_release_txn(zkl_lock *l, const zkl_txn_op *ops, size_t n,
                         zkl_txn_result *results)
{
	struct txn *t;
	int rc = txn_new(l, ops, n, true, &t);
	if (rc == ZKL_ELOST && l->ops->release_txn) {
		/* Lost already: released as any lost hold is (its loss told once). */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		zkl_lock_release(l);
		zkl__fail(rc, "%s; nothing of the transaction was applied", saved);
	}
	if (rc == 0 && !l->ops->release_txn) {
		txn_free(t);
		rc = zkl__fail(ZKL_ENOTSUP, "a %s is not released with a transaction: only a mutex "
		               "and the halves of a read-write lock are (use zkl_lock_txn(), then "
		               "zkl_lock_release())", l->kind);
	}
	/* The release deletes the node itself: an operation of the caller's on it would make
	 * the multi fail as a whole, and leave the node behind. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (strcmp(ops[i].path, t->node) == 0) {
			rc = zkl__fail(ZKL_EINVAL, "operation %zu (%s %s) is on the hold's own node, "
			               "which the release deletes: leave it out", i,
			               kind_name(ops[i].kind), ops[i].path);
			txn_free(t);
		}
	}
	if (rc != 0) {
		results_refused(results, ops, n, rc);
		return rc;
	}
	struct zkl_op *answer = NULL;
	rc = l->ops->release_txn(l, t->mops + 1, (int)n, &answer);
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	release_results(t, answer, rc);
	if (answer)
		zkl__op_release(l->c, answer);
	if (results)
		memcpy(results, t->results, n * sizeof *results);
	txn_free(t);
	if (rc != 0)
		zkl__fail(rc, "%s", saved);
	return rc;
}
