/* The lock-queue engine.
 *
 * Design notes.
 *
 * Every recipe queues the same way (DESIGN.md, "The one mechanism"): create an
 * ephemeral-sequential node "_c_<uuid>-<marker><seq>" under the lock path, list the
 * children, sort them by sequence number, and ask the recipe's predicate whether we hold.
 * If not, watch the one node it names with a get-with-watch (a get on a vanished node
 * registers nothing, so no stray watch is left) and sleep until that node changes, the
 * session changes, the deadline passes or the owner cancels; then list again, unless the
 * node was the only one that could stand ahead of ours (the predicate's heir): a handoff then
 * costs the server one watch event and no read.
 *
 * The create and the first list are sent together: the session serves requests in order,
 * so the list always sees the node, and an uncontended acquire waits for one round trip.
 * A client whose last first acquire found its folder missing bets that the next one is
 * new too: it sends the folder's (container) create ahead of the node's, without the
 * list. If that made the folder and our node took number 0, nothing was ever made in the
 * folder before ours, and the queue is ours alone: a new path costs its two writes and
 * nothing more. A lost bet costs a second round trip for the list, and ends the betting
 * until a folder is found missing again.
 *
 * A create that failed with connection loss or a timeout may still have been applied.
 * The uuid in the name finds it again, and it is adopted only if its ephemeral owner is
 * our current session; a node from an older session dies with that session.
 *
 * Everything we leave on failure is deleted: synchronously when we can, else by the
 * client's background task, retried until it succeeds or its session is gone. A create
 * still in flight when we give up carries the cleanup to its completion.
 *
 * The acquisition itself is a state machine the client's event thread runs (acquire.c).
 * This file holds what it shares, and the other requests a thread makes and waits for:
 * a confirmed release, the queue's listing and participants, the downgrade's node of a
 * fixed name. Each is a job the loop runs (src/client/job.c), and the thread waits on
 * the job alone, never for the loop's turn, and only the loop sends.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"

bool zkl__queue_alone(bool made_folder, const zkl_child *own)
{
	return made_folder && own->seq == 0;
}

/* Forgets our node (on the loop): its revocation watch goes too, and the recipe is
 * told. */
void zkl__node_forget(const struct zkl_queue *q, struct zkl_node *node)
{
	zkl__revwatch_remove(q->c, node->rev);
	node->rev = NULL;
	const bool had = node->path != NULL;
	free(node->path);
	node->path = NULL;
	if (had && q->on_node)
		q->on_node(q->node_ctx);
}

/* Our node is known (on the loop): arm its revocation watch if the recipe asks for one,
 * and tell the recipe if it asks. */
void zkl__node_known(const struct zkl_queue *q, struct zkl_node *node)
{
	if (q->on_node)
		q->on_node(q->node_ctx);
	if (q->on_revoke && !node->rev)
		node->rev = zkl__revwatch_add(q->c, node->path, node->gen, q->revoke_decode,
		                             q->on_revoke, q->revoke_ctx);
}

void zkl__node_clear(struct zkl_node *node)
{
	free(node->note);
	free(node->path);
	memset(node, 0, sizeof *node);
}

void zkl__names_free(char **names, int count)
{
	if (!names)
		return;
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

/* Parses and sorts op's children into a new array (on the loop), leaving out our own
 * nodes whose delete is on its way. Takes the names from the op. */
int zkl__take_queue(zkl_client *c, const char *path, struct zkl_op *op, zkl_child **queue,
                   size_t *n, char ***names, int *count)
{
	size_t plen = strlen(path);
	*names = op->names;
	*count = op->count;
	op->names = NULL;
	op->count = 0;
	*queue = NULL;
	*n = 0;
	if (*count == 0)
		return 0;
	zkl_child *q = malloc((size_t)*count * sizeof *q);
	if (!q)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	/* Our own nodes on their way out, looked up once for the whole listing. */
	const char *leaving[16];
	size_t nleaving = zkl__tasks_pending(c, path, plen, leaving, 16);
	size_t k = 0;
	for (int i = 0; i < *count; i++) {
		if (!zkl__child_parse((*names)[i], &q[k]))
			continue;
		bool gone = false;
		if (nleaving > 16) {
			gone = zkl__task_pending(c, path, plen, (*names)[i]); /* too many to keep */
		} else {
			for (size_t j = 0; j < nleaving && !gone; j++)
				gone = strcmp(leaving[j], (*names)[i]) == 0;
		}
		if (!gone) {
			q[k].index = (size_t)i;
			k++;
		}
	}
	zkl__children_sort(q, k);
	*queue = q;
	*n = k;
	return 0;
}

const char *zkl__basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ---- the bounded delete of a node of ours ----------------------------------------- */

int64_t zkl__delete_deadline(zkl_client *c, int64_t cap)
{
	int64_t until = zkl__now_ms() + zkl__session_timeout_ms(c);
	if (until > cap)
		until = cap;
	const int64_t lost_at = zkl__giveup_at(c);
	return until > lost_at ? lost_at : until;
}

enum zkl_delete_answer zkl__delete_answer(zkl_client *c, const char *path, int zrc)
{
	if (zrc == ZOK || zrc == ZNONODE)
		return ZKL_DELETE_DONE;
	if (zkl__zk_session_gone(zrc))
		return ZKL_DELETE_SESSION_GONE;
	if (zkl__zk_transient(zrc))
		return ZKL_DELETE_UNSURE;
	zkl__log(c, ZKL_LOG_ERROR, "cannot delete %s: %s", path, zerror(zrc));
	return ZKL_DELETE_REFUSED;
}

bool zkl__withdraw_start(zkl_client *c, struct zkl_waiter *w, struct zkl_node *node,
                        int64_t cap, struct zkl_withdrawal *wd)
{
	wd->op = NULL;
	zkl__revwatch_remove(c, node->rev);
	node->rev = NULL;
	if (!node->path || node->gen != c->gen)
		return false; /* none, or gone with its session */
	if (c->closing || !c->sess->connected || zkl__now_ms() >= zkl__giveup_at(c)) {
		zkl__task_delete(c, node->path, node->gen);
		return false;
	}
	int err = 0;
	const struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = node->path};
	wd->op = zkl__op_send_locked(c, w, &del, &err);
	if (!wd->op) {
		zkl__task_delete(c, node->path, node->gen);
		return false;
	}
	wd->until = zkl__delete_deadline(c, cap);
	return true;
}

bool zkl__withdraw_poll(zkl_client *c, struct zkl_waiter *w, const struct zkl_node *node,
                       struct zkl_withdrawal *wd)
{
	struct zkl_op *op = wd->op;
	if (!op)
		return false;
	if (!op->done && !c->closing && zkl__now_ms() < wd->until) {
		zkl__waiter_wake_at(c, w, wd->until);
		return true;
	}
	const int zrc = op->done ? op->rc : ZOPERATIONTIMEOUT;
	zkl__op_put(c, op);
	wd->op = NULL;
	if (zkl__delete_answer(c, node->path, zrc) == ZKL_DELETE_UNSURE)
		zkl__task_delete(c, node->path, node->gen);
	return false;
}

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
	zkl__revwatch_remove(c, node->rev);
	node->rev = NULL;
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
		atomic_store(&h->releasing, true); /* our delete is no loss (holdwatch.c) */
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

void zkl__engine_release_locked(zkl_client *c, struct zkl_node *node)
{
	if (!node->path)
		return;
	zkl__revwatch_remove(c, node->rev);
	node->rev = NULL;
	if (node->gen == c->gen) /* else its session, and so the node, is gone */
		zkl__task_delete_now(c, node->path, node->gen);
	zkl__node_clear(node);
}

static void release_later_run(zkl_client *c, struct zkl__call *call)
{
	struct release_later *r = (struct release_later *)call;
	zkl__engine_release_locked(c, &r->node);
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

/* ---- listing ---------------------------------------------------------------------- */

/* A listing's result, taken on the loop. */
struct listing {
	const char *path;
	zkl_child **queue;
	size_t *n;
	char ***names;
	int *count;
};

static int list_answered(zkl_client *c, struct zkl_op **ops, size_t n, void *arg)
{
	(void)n;
	struct listing *l = arg;
	if (ops[0]->rc == ZOK)
		return zkl__take_queue(c, l->path, ops[0], l->queue, l->n, l->names, l->count);
	if (ops[0]->rc != ZNONODE)
		return zkl__fail_zk(ops[0]->rc, "cannot list", l->path);
	return 0;
}

int zkl__engine_list(zkl_client *c, const char *path, zkl_child **queue, size_t *n,
                    char ***names, int *count)
{
	struct zkl_op *op;
	*queue = NULL;
	*n = 0;
	*names = NULL;
	*count = 0;
	const struct zkl_req list = {.kind = ZKL_OP_CHILDREN, .path = path};
	struct listing l = {path, queue, n, names, count};
	return zkl__requests_then(c, &list, 1, INT64_MAX, &op, list_answered, &l);
}

/* The participants' reads, taken on the loop. */
struct reads {
	zkl_participant *p;
	const zkl_child *queue;
	size_t holders;
	size_t kept;
};

static int reads_answered(zkl_client *c, struct zkl_op **ops, size_t n, void *arg)
{
	(void)c;
	struct reads *r = arg;
	zkl_participant *p = r->p;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (ops[i]->rc == ZOK) {
			/* Compact: a node deleted meanwhile is left out. */
			zkl_participant tmp = p[i];
			p[i] = p[k];
			p[k] = tmp;
			p[k].data = ops[i]->value;
			ops[i]->value = NULL;
			p[k].data_len = ops[i]->value_len;
			p[k].sequence = r->queue[i].seq;
			p[k].czxid = ops[i]->stat.czxid;
			p[k].ctime = ops[i]->stat.ctime;
			p[k].holder = k < r->holders;
			k++;
		} else if (ops[i]->rc != ZNONODE) {
			return zkl__fail_zk(ops[i]->rc, "cannot read", p[i].path);
		}
	}
	r->kept = k;
	return 0;
}

int zkl__engine_participants(zkl_client *c, const char *path, size_t holders,
                            zkl_participant **out, size_t *count)
{
	zkl_child *queue;
	size_t n;
	char **names;
	int nnames;
	*out = NULL;
	*count = 0;
	int rc = zkl__engine_list(c, path, &queue, &n, &names, &nnames);
	if (rc != 0)
		return rc;
	if (holders == ZKL_HOLDERS_READERS) {
		holders = 0;
		while (holders < n && !zkl__kind_is_writer(queue[holders].kind))
			holders++;
		if (holders == 0)
			holders = 1;
	}
	zkl_participant *p = n ? calloc(n, sizeof *p) : NULL;
	struct zkl_op **ops = n ? calloc(n, sizeof *ops) : NULL;
	struct zkl_req *gets = n ? calloc(n, sizeof *gets) : NULL;
	if (n && (!p || !ops || !gets)) {
		free(p);
		free(ops);
		free(gets);
		free(queue);
		zkl__names_free(names, nnames);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	/* Read every node's data in one round trip. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		p[i].path = zkl__path_join(path, queue[i].name);
		if (!p[i].path)
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
		gets[i] = (struct zkl_req){.kind = ZKL_OP_GET, .path = p[i].path};
	}
	struct reads r = {.p = p, .queue = queue, .holders = holders};
	if (rc == 0)
		rc = zkl__requests_then(c, gets, n, INT64_MAX, ops, reads_answered, &r);
	const size_t k = r.kept;
	free(ops);
	free(gets);
	free(queue);
	zkl__names_free(names, nnames);
	if (rc != 0) {
		zkl_participants_free(p, n);
		return rc;
	}
	for (size_t i = k; i < n; i++) {
		free(p[i].path);
		p[i].path = NULL;
	}
	*out = p;
	*count = k;
	return 0;
}

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

/* Our node exists (on the loop). */
int zkl__engine_hold(zkl_client *c, const struct zkl_queue *q, struct zkl_node *node,
                    int64_t since)
{
	const int64_t now = zkl__now_ms();
	if (q->on_lost) {
		struct zkl_hold *h = zkl__hold_new(node->path, node->gen, q->on_lost, q->lost_ctx);
		if (!h)
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		h->kind = q->name;
		h->token = node->czxid;
		h->granted_at = now;
		zkl__hold_add_locked(c, h);
		zkl__hold_watch_node(c, h);
		node->hold = h;
	}
	if (q->since)
		since = q->since;
	if (q->name && !q->quiet_grant) {
		zkl__observe_wait(c, now - since);
		const zkl_lock_event ev = {.type = ZKL_EVENT_GRANTED, .kind = q->name,
		                           .path = q->path, .node = node->path,
		                           .token = node->czxid, .at_ms = now,
		                           .wait_ms = now - since};
		zkl__observe(c, &ev);
	}
	return 0;
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
