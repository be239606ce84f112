/* The acquisition: one contender's way through a lock queue, as a state machine that
 * the client's event thread runs (DESIGN.md, "The core is event-driven").
 *
 * Design notes.
 *
 * The protocol (engine.c has the whole of it): create our ephemeral-sequential node and
 * list the queue in one round trip, ask the recipe's predicate whether we hold, and if
 * not, watch the one node it names and wait until that node goes (then we hold without
 * listing again when the predicate says nothing can take its place), or list again.
 * A create whose answer was lost is found again by the uuid in its name; everything we
 * leave on failure is deleted before we report it.
 *
 * Nothing here blocks. An acquisition is a job of the client's loop (src/client/loop.c, "Jobs"):
 * each request it sends and each watch it arms names its waiter, so the answer, the
 * watch event, every session change, a cancel, a change of a shared count, and its own
 * deadline wake it, and the loop calls step(), with the client mutex held. step() looks
 * at the current state, at what has arrived, and moves on: it sends the next request
 * (letting go of the mutex while it does, as every sender must), or returns to wait. A
 * state that waits says until when (zkl__waiter_wake_at).
 *
 *   TOP ──▶ CREATE ──▶ LIST ──▶ WATCH ──▶ WAIT ──▶ TOP (list again) or held
 *    │        │ └▶ ENSURE (folder missing) ──▶ TOP
 *    │        │ └▶ FOLDER (another acquisition makes that folder: wait for it) ──▶ TOP
 *    │        └▶ SETTLE (cancelled with the create out) ──▶ withdraw
 *    └▶ FIND ──▶ FIND_EXISTS (after a create with no answer) ──▶ LIST or CREATE
 *   RECOVER (wait for the connection) and TURN (our turn came past the loss deadline:
 *   wait for the new session) lead back to TOP; any failure ends in WITHDRAW.
 *
 * An acquisition reaches the loop as a call (zkl__call): an application thread queues
 * it in the client's inbox, behind what was handed to the loop before (so a cancel made
 * after it finds it), and from then on only the loop touches it. The thread that asked
 * waits on the job's own semaphore, not for the loop's turn
 * (zkl__engine_acquire); with external_loop that thread runs the steps itself instead of
 * the loop. A thread that runs the loop must not wait: nothing would ever run the
 * acquisition. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "acquisition.h"
#include "engine_internal.h"

/* One more of what zkl_client_get_stats() counts. */
static void tally(atomic_uint_fast64_t *k)
{
	atomic_fetch_add_explicit(k, 1, memory_order_relaxed);
}

/* Whether op has its answer (ANSWERED) or is still out (WAIT: the loop runs us again at
 * `deadline` at the latest), or the wait is over: ZKL_ECANCELED or ZKL_ETIMEDOUT. */
int zkl__acq_await(struct zkl_acquisition *a, const struct zkl_op *op, int64_t deadline)
{
	if (op->done)
		return ANSWERED;
	if (a->job.w.canceled)
		return ZKL_ECANCELED;
	if (zkl__now_ms() >= deadline)
		return ZKL_ETIMEDOUT;
	zkl__waiter_wake_at(a->q->c, &a->job.w, deadline);
	return WAIT;
}

/* The deadline of a wait for an answer: the call's (trying once, ZKL_TRY_ONCE_MS from
 * its start). */
static int64_t answer_deadline(const zkl_client *c, const struct zkl_acquisition *a,
                               const struct zkl_op *op)
{
	(void)c;
	(void)op;
	return a->deadline;
}

/* t, or sooner: ZKL_WITHDRAW_MS past the call's deadline (or past now, once that has
 * passed). A wait that withdraws what we queued ends there; the background goes on. */
static int64_t withdraw_until(const struct zkl_acquisition *a, int64_t t)
{
	const int64_t now = zkl__now_ms();
	const int64_t from = a->deadline > now ? a->deadline : now;
	if (from > INT64_MAX - ZKL_WITHDRAW_MS)
		return t;
	return t < from + ZKL_WITHDRAW_MS ? t : from + ZKL_WITHDRAW_MS;
}

int zkl__acq_gave_up(const struct zkl_acquisition *a, int rc)
{
	if (rc == ZKL_ETIMEDOUT)
		return zkl__fail(rc, "timed out waiting for %s", a->q->path);
	return zkl__fail(rc, "acquire of %s was cancelled", a->q->path);
}

/* Drops every request still out. A create whose answer has not come carries the
 * cleanup of what it may make to its completion. */
static void drop_requests(zkl_client *c, struct zkl_acquisition *a)
{
	if (a->folder_made)
		zkl__acq_folder_leave(c, a, false);
	zkl__acq_put_op(c, &a->folder);
	if (a->create && !a->create->done) {
		a->create->cleanup_parent = strdup(a->q->path);
		memcpy(a->create->uuid, a->node->uuid, sizeof a->node->uuid);
	}
	zkl__acq_put_op(c, &a->create);
	zkl__acq_put_op(c, &a->list);
	zkl__acq_put_op(c, &a->op);
	zkl__acq_put_op(c, &a->withdrawal.op);
	if (a->wt) {
		zkl__watch_put(c, a->wt);
		a->wt = NULL;
	}
	free(a->found);
	a->found = NULL;
	free(a->ensure);
	a->ensure = NULL;
}

/* The end of an acquisition started by zkl__engine_start (the job's end, on the loop,
 * no lock held): the done function runs, and a is freed after it. */
static void end_async(zkl_client *c, struct zkl_job *j)
{
	(void)c;
	struct zkl_acquisition *a = (struct zkl_acquisition *)j;
	if (j->rc != 0)
		zkl__fail(j->rc, "%s", j->error);
	else
		zkl__clear_error();
	a->done_fn(a->done_arg, j->rc);
	zkl__job_destroy(j);
	free(a);
}

static void drop_job(zkl_client *c, struct zkl_job *j)
{
	struct zkl_acquisition *a = (struct zkl_acquisition *)j;
	zkl__near_set(c, &a->near_counted, false);
	drop_requests(c, a);
	free(a->target);
	a->target = NULL;
}

/* ---- the way in ---------------------------------------------------------------- */

static int start_create(zkl_client *c, struct zkl_acquisition *a);
static int start_list(zkl_client *c, struct zkl_acquisition *a);

/* After a transient failure: wait for the connection, unless trying once. */
int zkl__acq_start_recover(struct zkl_acquisition *a)
{
	if (a->try_once)
		return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper was lost");
	a->st = A_RECOVER;
	return GO_ON;
}

static int on_recover(zkl_client *c, struct zkl_acquisition *a)
{
	if (a->job.w.canceled)
		return zkl__acq_gave_up(a, ZKL_ECANCELED);
	if (c->sess->connected) {
		a->st = A_TOP;
		return GO_ON;
	}
	if (zkl__now_ms() >= a->deadline)
		return zkl__fail(ZKL_ETIMEDOUT, "timed out while disconnected from ZooKeeper");
	zkl__waiter_wake_at(a->q->c, &a->job.w, a->deadline);
	return WAIT;
}

/* Whether a grant of node stands: its session is current, not given up, and short of its
 * loss deadline. */
static bool grant_stands(zkl_client *c, const struct zkl_node *node)
{
	return node->gen == c->gen && !c->sess->given_up && zkl__now_ms() < zkl__lost_at(c);
}

bool zkl__engine_grant_stands(zkl_client *c, const struct zkl_node *node)
{
	return grant_stands(c, node);
}

/* Our turn has come. The grant stands, or it waits. A watch event proves nothing about
 * the server hearing us (a client cut off one way still hears it), so:
 *
 *   - a grant is reported only while the session's last committed write is recent
 *     (zkl__proof_fresh()): the new hold's loss deadline counts from it. A session
 *     that waited far back sent no write meanwhile (liveness.c), so its turn first
 *     proves the session with one: a check of our own node (A_PROVE), one quorum round
 *     trip, which also shows the node still there;
 *   - a turn learned once the session is being given up waits for the new session the
 *     event thread is about to open, and queues again there (an adopted session given
 *     up waits until it counts again, on_turn). */
static int take_turn(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_node *node = a->node;
	if (grant_stands(c, node) && zkl__proof_fresh(c))
		return HELD;
	if (node->gen == c->gen && !c->sess->given_up && zkl__now_ms() < zkl__giveup_at(c)) {
		int err = 0;
		const struct zkl_req check = {.kind = ZKL_OP_CHECK, .path = node->path};
		struct zkl_op *op = zkl__op_send(c, &a->job.w, &check, &err);
		if (!op)
			return err;
		tally(&c->n_proof_writes);
		zkl__proof_sent(c);
		a->op = op;
		a->st = A_PROVE;
		return GO_ON;
	}
	zkl__log(c, ZKL_LOG_INFO, "turn for %s came past the session's loss deadline; "
	        "queueing again on a new session", node->path);
	a->st = A_TURN;
	return GO_ON;
}

/* The check that proves the session for our turn is answered. */
static int on_prove(zkl_client *c, struct zkl_acquisition *a)
{
	int rc = zkl__acq_await(a, a->op, a->deadline);
	if (rc == WAIT)
		return WAIT;
	if (rc < 0)
		return zkl__acq_gave_up(a, rc);
	const int zrc = a->op->rc;
	zkl__acq_put_op(c, &a->op);
	if (zrc == ZOK)
		return take_turn(c, a); /* the check moved the proof, unless it took too long */
	if (zrc == ZNONODE) {
		a->st = A_TOP; /* our node is gone: the listing queues us again */
		return GO_ON;
	}
	if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc))
		return zkl__acq_start_recover(a);
	return zkl__fail_zk(zrc, "cannot prove the session with a check of", a->node->path);
}

static int on_turn(zkl_client *c, struct zkl_acquisition *a)
{
	/* Look again once the session has changed, or the grant would stand after all: an
	 * application's session (zkl_client_adopt) given up by the loss rule is not
	 * replaced, but counts again once ZooKeeper answers a write sent after
	 * (liveness.c), and our node, which lived on with it, may take its turn there. */
	if (a->node->gen != c->gen || a->job.w.canceled ||
	    (!c->sess->given_up && zkl__now_ms() < zkl__giveup_at(c))) {
		a->st = A_TOP;
		return GO_ON;
	}
	if (zkl__now_ms() >= a->deadline)
		return zkl__fail(ZKL_ETIMEDOUT, "timed out while the session was given up");
	zkl__waiter_wake_at(a->q->c, &a->job.w, a->deadline);
	return WAIT;
}

static int on_top(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	struct zkl_node *node = a->node;
	if (a->job.w.canceled)
		return zkl__acq_gave_up(a, ZKL_ECANCELED);
	a->epoch = q->epoch ? *q->epoch : 0;
	if (node->path && node->gen != c->gen) {
		/* Our session ended while we queued: the node went with it. Queue again on
		 * the new session. */
		zkl__log(c, ZKL_LOG_INFO, "session changed while waiting for %s; queueing again",
		        q->path);
		zkl__node_forget(a->q, node);
		zkl__uuid(node->uuid);
	}
	if (!node->path && a->unknown) {
		a->unknown = false;
		if (a->unknown_gen == c->gen) {
			int err = 0;
			const struct zkl_req list = {.kind = ZKL_OP_CHILDREN, .path = q->path};
			struct zkl_op *op = zkl__op_send(c, &a->job.w, &list, &err);
			if (!op)
				return err;
			tally(&c->n_listings);
			a->op = op;
			a->st = A_FIND;
			return GO_ON;
		}
		zkl__uuid(node->uuid);
	}
	return node->path ? start_list(c, a) : start_create(c, a);
}

/* Looking for our node by uuid after a create whose outcome is unknown. It is adopted
 * only if its ephemeral owner is our current session: a node of an older session dies
 * with that session. */
static int on_find(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	int rc = zkl__acq_await(a, a->op, answer_deadline(c, a, a->op));
	if (rc == WAIT)
		return WAIT;
	if (rc < 0) {
		a->unknown = true; /* the withdrawal looks for it in the background */
		return zkl__acq_gave_up(a, rc);
	}
	struct zkl_op *op = a->op;
	char *found = NULL;
	rc = 0;
	if (op->rc == ZOK) {
		for (int i = 0; i < op->count && !found; i++)
			if (zkl__name_has_uuid(op->names[i], a->node->uuid))
				found = zkl__path_join(q->path, op->names[i]);
	} else if (op->rc != ZNONODE) {
		rc = zkl__zk_transient(op->rc) || zkl__zk_session_gone(op->rc)
		             ? ZKL_ECONNLOSS
		             : zkl__fail_zk(op->rc, "cannot list", q->path);
	}
	const uint64_t gen = op->s->gen;
	zkl__acq_put_op(c, &a->op);
	if (!found) {
		if (rc == ZKL_ECONNLOSS) {
			a->unknown = true;
			return zkl__acq_start_recover(a);
		}
		if (rc != 0)
			return rc;
		zkl__uuid(a->node->uuid);
		return start_create(c, a);
	}
	int err = 0;
	const struct zkl_req exists = {.kind = ZKL_OP_EXISTS, .path = found};
	op = zkl__op_send(c, &a->job.w, &exists, &err);
	if (!op) {
		free(found);
		return err;
	}
	a->op = op;
	a->found = found;
	a->found_gen = gen;
	a->st = A_FIND_EXISTS;
	return GO_ON;
}

static int on_find_exists(zkl_client *c, struct zkl_acquisition *a)
{
	struct zkl_node *node = a->node;
	struct zkl_op *op = a->op;
	int rc = zkl__acq_await(a, op, answer_deadline(c, a, op));
	if (rc == WAIT)
		return WAIT;
	if (rc < 0) {
		a->unknown = true;
		return zkl__acq_gave_up(a, rc);
	}
	const uint64_t gen = a->found_gen;
	if (op->rc == ZOK && gen == c->gen && op->s->gen == gen &&
	    op->stat.ephemeralOwner == c->sess->id) {
		node->path = a->found;
		a->found = NULL;
		node->gen = gen;
		node->czxid = op->stat.czxid;
		zkl__acq_put_op(c, &a->op);
		zkl__node_known(a->q, node);
		return start_list(c, a);
	}
	const bool transient = zkl__zk_transient(op->rc);
	zkl__acq_put_op(c, &a->op);
	free(a->found);
	a->found = NULL;
	if (transient) {
		a->unknown = true;
		return zkl__acq_start_recover(a);
	}
	zkl__uuid(node->uuid);
	return start_create(c, a);
}

/* Creates our node and lists the queue in the same round trip. While the client keeps
 * finding new folders, a handle that has not seen its folder yet bets that it is new
 * too: it creates the folder (as a container) ahead of its node, and leaves the list
 * out, which a new folder does not need. */
static int start_create(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	/* A uuid names creates of one session. One sent on an older session may have made
	 * a node after all, which lives as long as that session does; a search by uuid on
	 * this session (on_find()) would find that node first, take ours for someone
	 * else's, and leave ours in the queue for good. */
	if (a->uuid_gen && a->uuid_gen != c->gen)
		zkl__uuid(a->node->uuid);
	a->uuid_gen = c->gen;
	if (a->target && strcmp(a->target_uuid, a->node->uuid) != 0) {
		free(a->target); /* named for a uuid given up since */
		a->target = NULL;
	}
	if (!a->target && (a->target = zkl__node_path(q->path, a->node->uuid, q->kind)))
		memcpy(a->target_uuid, a->node->uuid, sizeof a->target_uuid);
	if (!a->target)
		return errno == EINVAL ? zkl__fail(ZKL_EINVAL, "cannot name a node under %s",
		                                   q->path)
		                       : zkl__fail(ZKL_ENOMEM, "out of memory");
	int err = 0;
	const bool make_folder = q->folder_seen && !*q->folder_seen && c->folders_new;
	/* Nobody waits for the folder's answer alone (it comes before the node's): it is
	 * bound to no waiter, and the node's answer, or the list's, wakes the loop. */
	struct zkl_req reqs[2];
	struct zkl_op *ops[2];
	int n = 0;
	if (make_folder)
		reqs[n++] = (struct zkl_req){.kind = ZKL_OP_CREATE, .path = q->path,
		                             .mode = zkl__folder_mode(c), .unbound = true};
	reqs[n++] = (struct zkl_req){.kind = ZKL_OP_CREATE, .path = a->target, .data = q->data,
	                             .len = q->data_len, .mode = ZOO_EPHEMERAL_SEQUENTIAL};
	if (!make_folder)
		reqs[n++] = (struct zkl_req){.kind = ZKL_OP_CHILDREN, .path = q->path};
	const int sent = zkl__ops_send(c, &a->job.w, reqs, ops, n, &err);
	a->folder = make_folder ? ops[0] : NULL;
	a->create = ops[make_folder ? 1 : 0];
	a->list = make_folder ? NULL : ops[1];
	if (a->list)
		tally(&c->n_listings);
	if (sent < n)
		return err;
	a->st = A_CREATE;
	return GO_ON;
}

static int on_create(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	struct zkl_node *node = a->node;
	struct zkl_op *create = a->create;
	int rc = zkl__acq_await(a, create, answer_deadline(c, a, create));
	if (rc == WAIT)
		return WAIT;
	if (rc == ZKL_ECANCELED) {
		/* A cancelled acquire returns with nothing of its own left in the queue: wait
		 * for the create's answer (unless cancelled again), then withdraw. */
		a->job.w.canceled = false;
		a->until = withdraw_until(a, zkl__now_ms() + zkl__session_timeout_ms(c));
		a->st = A_SETTLE;
		return GO_ON;
	}
	if (rc < 0)
		return zkl__acq_gave_up(a, rc); /* the create's completion cleans up */
	const int zrc = create->rc;
	/* The session answers in order: the folder's answer came first. */
	struct zkl_op *folder = a->folder;
	const bool made = folder && folder->done && folder->rc == ZOK;
	if (folder && folder->done && (folder->rc == ZOK || folder->rc == ZNODEEXISTS))
		c->folders_new = made;
	zkl__acq_put_op(c, &a->folder);
	if (zrc == ZOK) {
		node->path = create->value;
		create->value = NULL;
		node->gen = create->s->gen;
		node->czxid = create->stat.czxid;
		zkl__node_known(q, node);
	}
	const uint64_t cgen = create->s->gen;
	zkl_child me;
	/* Only a folder this create made may hold ours alone: the name is read only then. */
	if (zrc == ZOK && made && !a->job.w.canceled &&
	    zkl__child_parse(zkl__basename(node->path), &me) && zkl__queue_alone(made, &me)) {
		/* No node was ever made in the folder before ours: no list needed. */
		size_t watch = 0;
		node->seq = 0;
		*q->folder_seen = true;
		if (q->pred->holds(&me, 1, 0, q->pred_arg, &watch) && grant_stands(c, node))
			return HELD;
	}
	/* The create's request, read, goes with the list's (on_list; or at the job's end). */
	if (zrc == ZOK)
		return start_list(c, a);
	zkl__acq_put_op(c, &a->create);
	zkl__acq_put_op(c, &a->list);
	if (zrc == ZNONODE)
		return zkl__acq_folder_missing(c, a);
	if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc)) {
		a->unknown = zkl__zk_transient(zrc);
		a->unknown_gen = cgen;
		return zkl__acq_start_recover(a);
	}
	return zkl__fail_zk(zrc, "cannot create a node under", q->path);
}

static int on_settle(struct zkl_acquisition *a)
{
	struct zkl_op *create = a->create;
	if (!create->done) {
		if (a->job.w.canceled || zkl__now_ms() >= a->until)
			return zkl__acq_gave_up(a, ZKL_ECANCELED); /* the completion cleans up */
		zkl__waiter_wake_at(a->q->c, &a->job.w, a->until);
		return WAIT;
	}
	if (create->rc == ZOK && create->value) {
		a->node->path = create->value;
		create->value = NULL;
		a->node->gen = create->s->gen;
	} else if (zkl__zk_transient(create->rc)) {
		/* Made or not, nobody knows: look for it by uuid in the background. */
		a->unknown = true;
		a->unknown_gen = create->s->gen;
	}
	return zkl__acq_gave_up(a, ZKL_ECANCELED);
}

/* ---- the queue ------------------------------------------------------------------ */

static int start_list(zkl_client *c, struct zkl_acquisition *a)
{
	if (!a->list) {
		int err = 0;
		const struct zkl_req req = {.kind = ZKL_OP_CHILDREN, .path = a->q->path};
		struct zkl_op *list = zkl__op_send(c, &a->job.w, &req, &err);
		if (!list)
			return err;
		tally(&c->n_listings);
		a->list = list;
	}
	a->st = A_LIST;
	return GO_ON;
}

static int on_list(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	struct zkl_node *node = a->node;
	int rc = zkl__acq_await(a, a->list, answer_deadline(c, a, a->list));
	if (rc == WAIT)
		return WAIT;
	zkl__acq_put_op(c, &a->create); /* read by on_create, if the list followed it */
	if (rc < 0)
		return zkl__acq_gave_up(a, rc);
	zkl_child *queue = NULL;
	size_t n = 0;
	char **names = NULL;
	int count = 0;
	const int lrc = a->list->rc;
	rc = 0;
	if (lrc == ZOK && q->folder_seen)
		*q->folder_seen = true;
	if (lrc == ZOK)
		zkl__op_take_names(a->list, &names, &count);
	zkl__acq_put_op(c, &a->list);
	if (lrc == ZOK)
		rc = zkl__take_queue(c, q->path, names, count, &queue, &n);
	if (rc != 0)
		return rc;
	if (lrc != ZOK) {
		if (lrc == ZNONODE) {
			/* The folder is gone, and our node with it. */
			zkl__node_forget(a->q, node);
			zkl__uuid(node->uuid);
			a->st = A_TOP;
			return GO_ON;
		}
		if (zkl__zk_transient(lrc) || zkl__zk_session_gone(lrc))
			return zkl__acq_start_recover(a);
		return zkl__fail_zk(lrc, "cannot list", q->path);
	}
	const char *own = zkl__basename(node->path);
	size_t self = n;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(queue[i].name, own) == 0) {
			self = i;
			break;
		}
	}
	if (self == n) {
		/* Our node is not there: deleted from outside. Queue again. */
		zkl__log(c, ZKL_LOG_WARN, "node %s vanished while queued; queueing again",
		        node->path);
		zkl__node_forget(a->q, node);
		zkl__uuid(node->uuid);
		free(queue);
		zkl__names_free(names, count);
		a->st = A_TOP;
		return GO_ON;
	}
	node->seq = queue[self].seq;
	if (a->job.w.canceled) {
		/* Its owner may be gone, and the predicate's argument with it. */
		free(queue);
		zkl__names_free(names, count);
		return zkl__acq_gave_up(a, ZKL_ECANCELED);
	}
	size_t watch = 0;
	if (q->pred->holds(queue, n, self, q->pred_arg, &watch)) {
		free(queue);
		zkl__names_free(names, count);
		return take_turn(c, a);
	}
	const bool folder = watch == ZKL_WATCH_CHILDREN;
	/* When the watched node goes, do we hold without listing again? And may the next
	 * release grant us (the session then keeps its proof recent, liveness.c)? */
	a->heir = !folder && watch < self && q->pred->heir && q->pred->heir(queue, self, watch);
	a->near = folder || a->heir || watch == 0;
	a->watch_folder = folder;
	a->listed = n;
	char *target = folder ? strdup(q->path) : zkl__path_join(q->path, queue[watch].name);
	if (!folder)
		snprintf(node->pred, sizeof node->pred, "%s", queue[watch].name);
	free(queue);
	zkl__names_free(names, count);
	if (a->try_once) {
		free(target);
		return zkl__fail(ZKL_ETIMEDOUT, "%s is held", q->path);
	}
	if (q->name && !a->told_queued) {
		a->told_queued = true;
		const zkl_lock_event ev = {.type = ZKL_EVENT_QUEUED, .kind = q->name,
		                           .path = q->path, .node = node->path,
		                           .ahead = (int)self, .at_ms = zkl__now_ms()};
		zkl__observe(c, &ev);
	}
	if (!target)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	/* Watch the one node before us (a get on a vanished node registers nothing, so no
	 * stray watch is left), or the folder's children. */
	struct zkl_watch *wt = zkl__watch_new(c, &a->job.w);
	if (!wt) {
		free(target);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	int err = 0;
	const struct zkl_req req = {.kind = folder ? ZKL_OP_CHILDREN : ZKL_OP_GET, .path = target,
	                            .watch = wt};
	struct zkl_op *get = zkl__op_send(c, &a->job.w, &req, &err);
	free(target);
	if (get && folder)
		tally(&c->n_listings);
	a->wt = wt;
	if (!get)
		return err;
	a->op = get;
	a->st = A_WATCH;
	return GO_ON;
}

/* The watch is armed (grc ZOK), or its target was gone already (ZNONODE), or the
 * request failed: what now? */
static int after_watch(zkl_client *c, struct zkl_acquisition *a, int grc)
{
	const struct zkl_node *node = a->node;
	const bool gone = grc == ZNONODE || (a->wt->fired && a->wt->event == ZOO_DELETED_EVENT);
	zkl__watch_put(c, a->wt);
	a->wt = NULL;
	if (a->heir && gone && !a->job.w.canceled && a->ggen == node->gen && c->gen == node->gen)
		return take_turn(c, a); /* the one node ahead is gone, and nothing can take its place */
	if (zkl__zk_transient(grc) || zkl__zk_session_gone(grc))
		return zkl__acq_start_recover(a);
	if (grc != ZOK && grc != ZNONODE)
		return zkl__fail_zk(grc, "cannot watch a node under", a->q->path);
	a->st = A_TOP;
	return GO_ON;
}

static int on_watch(zkl_client *c, struct zkl_acquisition *a)
{
	struct zkl_op *get = a->op;
	int rc = zkl__acq_await(a, get, a->deadline);
	if (rc == WAIT)
		return WAIT;
	if (rc < 0)
		return zkl__acq_gave_up(a, rc);
	const int grc = get->rc;
	a->ggen = get->s->gen;
	/* A folder watch is armed by a fresh listing. If the queue changed between our
	 * first listing and this one, that change will fire no watch: look again at once.
	 * (Folder predicates depend on the number of nodes only.) */
	bool changed = false;
	if (a->watch_folder && grc == ZOK) {
		size_t parsed = 0;
		zkl_child tmp;
		for (int i = 0; i < get->count; i++)
			parsed += zkl__child_parse(get->names[i], &tmp);
		changed = parsed != a->listed;
	}
	zkl__acq_put_op(c, &a->op);
	if (grc == ZOK && !changed) {
		a->st = A_WAIT;
		return GO_ON;
	}
	return after_watch(c, a, grc);
}

static int on_wait(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	/* A canceled acquisition reads nothing of its queue's owner, which may be gone. */
	if (!a->job.w.canceled && !a->wt->fired && c->gen == a->ggen &&
	    (!q->epoch || *q->epoch == a->epoch)) {
		if (zkl__now_ms() >= a->deadline)
			return zkl__acq_gave_up(a, ZKL_ETIMEDOUT);
		zkl__waiter_wake_at(a->q->c, &a->job.w, a->deadline);
		return WAIT;
	}
	if (!a->job.w.canceled && c->gen == a->ggen)
		tally(&c->n_wakes); /* what it waited for changed */
	return after_watch(c, a, ZOK);
}

/* ---- the way out ---------------------------------------------------------------- */

/* Withdraws after a failure: nothing of ours may stay in the queue. Our node's delete is
 * tried once and waited for (zkl__withdraw_start), no longer than ZKL_WITHDRAW_MS past
 * the call's deadline; if it cannot be confirmed while its session may live, the
 * client's background task retries it until it succeeds or the session is gone.
 * Returns WAIT while the delete is out. */
static int withdraw(zkl_client *c, struct zkl_acquisition *a)
{
	struct zkl_node *node = a->node;
	if (a->st != A_WITHDRAW) {
		a->st = A_WITHDRAW;
		drop_requests(c, a);
		if (!node->path) {
			if (a->unknown && a->unknown_gen == c->gen)
				zkl__task_find_delete(c, a->q->path, node->uuid, a->unknown_gen);
			return GO_ON;
		}
		if (!zkl__withdraw_start(c, &a->job.w, node, withdraw_until(a, INT64_MAX),
		                         &a->withdrawal))
			return GO_ON;
	}
	return zkl__withdraw_poll(c, &a->job.w, node, &a->withdrawal) ? WAIT : GO_ON;
}

/* Whether an acquisition bound to a session (q->gen) may go on: the client is still on
 * that session, and our node, if any, lives there. */
static bool bound(const zkl_client *c, const struct zkl_acquisition *a)
{
	const uint64_t gen = a->q->gen;
	return !gen || (c->gen == gen && (!a->node->path || a->node->gen == gen));
}

/* The job's step (on the loop): ZKL_JOB_WAIT, or the acquisition's result once
 * everything it leaves on failure is withdrawn. It runs while the client closes too, and
 * then ends at once. */
static int step(zkl_client *c, struct zkl_job *j)
{
	struct zkl_acquisition *a = (struct zkl_acquisition *)j;
	if (!a->begun) {
		a->begun = true;
		tally(&c->n_acquisitions);
	}
	int rc = GO_ON;
	while (rc == GO_ON && a->st != A_WITHDRAW) {
		if (c->closing) {
			rc = zkl__fail(ZKL_ECLOSED, "the client is closing");
			break;
		}
		if (!bound(c, a)) {
			rc = zkl__fail(ZKL_ELOST, "the session of %s changed", a->q->path);
			break;
		}
		switch (a->st) {
		case A_TOP: rc = on_top(c, a); break;
		case A_FIND: rc = on_find(c, a); break;
		case A_FIND_EXISTS: rc = on_find_exists(c, a); break;
		case A_CREATE: rc = on_create(c, a); break;
		case A_SETTLE: rc = on_settle(a); break;
		case A_ENSURE: rc = zkl__acq_on_ensure(c, a); break;
		case A_FOLDER: rc = zkl__acq_on_folder(c, a); break;
		case A_LIST: rc = on_list(c, a); break;
		case A_WATCH: rc = on_watch(c, a); break;
		case A_WAIT: rc = on_wait(c, a); break;
		case A_RECOVER: rc = on_recover(c, a); break;
		case A_TURN: rc = on_turn(c, a); break;
		case A_PROVE: rc = on_prove(c, a); break;
		case A_WITHDRAW: break;
		}
	}
	zkl__near_set(c, &a->near_counted, rc == WAIT &&
	              (a->st == A_PROVE || a->st == A_TURN ||
	               (a->near && (a->st == A_WATCH || a->st == A_WAIT))));
	if (rc == WAIT)
		return ZKL_JOB_WAIT;
	if (rc == HELD && !bound(c, a))
		rc = zkl__fail(ZKL_ELOST, "the session of %s changed", a->q->path);
	if (rc == HELD) {
		int hrc = zkl__engine_hold(c, a->q, a->node, a->since);
		if (hrc != 0)
			rc = hrc;
	}
	if (rc == HELD) {
		tally(&c->n_granted);
		return 0;
	}
	if (a->st != A_WITHDRAW) {
		/* A failure: keep its message for the waiting thread, then withdraw. */
		a->failed = rc;
		snprintf(j->error, sizeof j->error, "%s", zkl_last_error());
	}
	if (withdraw(c, a) == WAIT)
		return ZKL_JOB_WAIT;
	if (a->q->name && (a->failed == ZKL_ETIMEDOUT || a->failed == ZKL_ECANCELED)) {
		const int64_t now = zkl__now_ms();
		const zkl_lock_event ev = {
			.type = a->failed == ZKL_ETIMEDOUT ? ZKL_EVENT_TIMED_OUT : ZKL_EVENT_CANCELED,
			.kind = a->q->name, .path = a->q->path, .node = a->node->path,
			.at_ms = now, .wait_ms = now - a->since};
		zkl__observe(c, &ev);
	}
	zkl__node_forget(a->q, a->node);
	zkl__node_clear(a->node);
	return a->failed;
}

/* Makes uuid (a node's, ZKL_UUID_LEN + 1 bytes) and the path of a node named with it
 * (*target, NULL on failure), and says whether q's create request for that node fits
 * what a server reads (ZKL_EINVAL if not): the path is the acquisition's, so it is made
 * first and measured (zkl__engine_fits() measures without making it). */
static int fits(const struct zkl_queue *q, char *uuid, char **target)
{
	zkl__uuid(uuid);
	*target = zkl__node_path(q->path, uuid, q->kind);
	if (!*target)
		return errno == EINVAL ? 0 /* the acquisition says what is wrong with it */
		                       : zkl__fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl__request_fits(q->c, ZKL_OP_CREATE, q->path, strlen(*target),
	                           q->data ? q->data_len : -1);
	if (rc != 0) {
		free(*target);
		*target = NULL;
	}
	return rc;
}

/* Makes an acquisition and hands it to the loop (no lock held): from here on only the
 * loop touches it, until it is done. done NULL: the caller waits for it. */
static struct zkl_acquisition *start(const struct zkl_queue *q, int timeout_ms,
                                     struct zkl_node *node, void (*done)(void *, int),
                                     void *arg, struct zkl_job *parent, int *err)
{
	zkl_client *c = q->c;
	memset(node, 0, sizeof *node);
	struct zkl_acquisition *a = calloc(1, sizeof *a);
	if (!a) {
		*err = zkl__fail(ZKL_ENOMEM, "out of memory");
		return NULL;
	}
	if ((*err = fits(q, node->uuid, &a->target)) != 0) {
		free(a);
		memset(node, 0, sizeof *node);
		return NULL;
	}
	memcpy(a->target_uuid, node->uuid, sizeof a->target_uuid);
	a->q = q;
	a->node = node;
	node->pred[0] = 0;
	a->st = A_TOP;
	a->try_once = timeout_ms == 0;
	a->since = q->since ? q->since : zkl__now_ms();
	a->deadline = timeout_ms != 0 ? zkl__deadline(timeout_ms) :
	              q->until ? q->until : zkl__deadline(ZKL_TRY_ONCE_MS);
	a->done_fn = done;
	a->done_arg = arg;
	a->job.step = step;
	a->job.drop = drop_job;
	a->job.end = done ? end_async : NULL;
	a->job.runs_closing = true;
	if (parent) {
		zkl__job_begin(c, &a->job, q->owner, parent);
		return a;
	}
	if ((*err = zkl__job_start(c, &a->job, q->owner)) != 0) {
		free(a->target);
		free(a);
		memset(node, 0, sizeof *node);
		return NULL;
	}
	return a;
}

int zkl__engine_fits(const struct zkl_queue *q)
{
	const long len = zkl__node_path_len(q->path, q->kind);
	if (len < 0)
		return 0; /* the acquisition says what is wrong with it */
	return zkl__request_fits(q->c, ZKL_OP_CREATE, q->path, (size_t)len,
	                         q->data ? q->data_len : -1);
}

int zkl__engine_start(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node,
                     void (*done)(void *arg, int rc), void *arg)
{
	int err = 0;
	return start(q, timeout_ms, node, done, arg, NULL, &err) ? 0 : err;
}

int zkl__engine_start_child(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node,
                           struct zkl_job *parent, void (*done)(void *arg, int rc),
                           void *arg)
{
	int err = 0;
	return start(q, timeout_ms, node, done, arg, parent, &err) ? 0 : err;
}

int zkl__engine_acquire(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node)
{
	zkl_client *c = q->c;
	int err = 0;
	if (zkl__is_loop_thread(c)) {
		memset(node, 0, sizeof *node);
		return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the thread that runs the "
		                "client's loop (in a callback, or the application's loop thread): "
		                "nothing would run the acquisition", q->path);
	}
	struct zkl_acquisition *a = start(q, timeout_ms, node, NULL, NULL, NULL, &err);
	if (!a)
		return err;
	int rc = zkl__job_wait(c, &a->job);
	free(a);
	return rc;
}
