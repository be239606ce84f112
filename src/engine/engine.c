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
 * This file holds what it shares, and the blocking helpers: release, the queue's listing
 * and participants, the downgrade's fixed node. They wait on the calling thread with
 * the client mutex held around state checks, and have the loop send their requests
 * (zkl_send): only the loop sends.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"

bool zkl_queue_alone(bool made_folder, const zkl_child *own)
{
	return made_folder && own->seq == 0;
}

/* Forgets our node (mu held): its revocation watch goes too. */
void zkl_node_forget(zkl_client *c, struct zkl_node *node)
{
	zkl_revwatch_remove(c, node->rev);
	node->rev = NULL;
	free(node->path);
	node->path = NULL;
}

/* Our node is known (mu held): arm its revocation watch if the recipe asks for one. */
void zkl_node_known(const struct zkl_queue *q, struct zkl_node *node)
{
	if (q->on_revoke && !node->rev)
		node->rev = zkl_revwatch_add(q->c, node->path, node->gen, q->on_revoke,
		                             q->revoke_ctx);
}

void zkl_node_clear(struct zkl_node *node)
{
	free(node->path);
	memset(node, 0, sizeof *node);
}

void zkl_names_free(char **names, int count)
{
	if (!names)
		return;
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

/* Parses and sorts op's children into a new array (mu held), leaving out our own nodes
 * whose delete is on its way. Takes the names from the op. */
int zkl_take_queue(zkl_client *c, const char *path, struct zkl_op *op, zkl_child **queue,
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
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	/* Our own nodes on their way out, looked up once for the whole listing. */
	const char *leaving[16];
	size_t nleaving = zkl_tasks_pending(c, path, plen, leaving, 16);
	size_t k = 0;
	for (int i = 0; i < *count; i++) {
		if (!zkl_child_parse((*names)[i], &q[k]))
			continue;
		bool gone = false;
		if (nleaving > 16) {
			gone = zkl_task_pending(c, path, plen, (*names)[i]); /* too many to keep */
		} else {
			for (size_t j = 0; j < nleaving && !gone; j++)
				gone = strcmp(leaving[j], (*names)[i]) == 0;
		}
		if (!gone) {
			q[k].index = (size_t)i;
			k++;
		}
	}
	zkl_children_sort(q, k);
	*queue = q;
	*n = k;
	return 0;
}

const char *zkl_basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Waits for op with mu held. try_once calls wait for answers even past their deadline:
 * "try once" means one round trip, and the C client answers within the session timeout. */
static int wait_op(zkl_client *c, struct zkl_waiter *w, struct zkl_op *op, int64_t deadline,
                   bool try_once)
{
	if (try_once) {
		int64_t t = zkl_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 10000);
		if (t > deadline)
			deadline = t;
	}
	return zkl_op_wait(c, w, op, deadline);
}

/* Deletes *node (mu held). A patient delete (a release) retries through connection loss
 * until the delete succeeds or the session is given up for lost, and says which; an
 * impatient one (withdrawing from a queue) tries once and leaves the rest to the
 * background task. Either way, a node whose delete is not confirmed while its session may
 * live goes to the background task, which retries until it succeeds or the session ends. */
static int delete_node(zkl_client *c, struct zkl_waiter *w, struct zkl_node *node, bool patient)
{
	if (!node->path)
		return 0;
	zkl_revwatch_remove(c, node->rev);
	node->rev = NULL;
	/* A cancelled acquire withdraws its node like any other: wait for the delete. */
	w->canceled = false;
	int result = 0;
	for (;;) {
		if (node->gen != c->gen) {
			result = ZKL_ELOST; /* gone with its session */
			break;
		}
		/* Past the loss deadline the session is being given up: its nodes go with it,
		 * or with the background task if it turns out to be alive. */
		if (zkl_now_ms() >= zkl_lost_at(c) || (!patient && !c->sess->connected)) {
			zkl_task_delete(c, node->path, node->gen);
			result = patient ? ZKL_ELOST : 0;
			break;
		}
		struct zkl_op *op;
		const struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = node->path};
		int err = zkl_send(c, w, &del, 1, &op);
		if (!op) {
			zkl_task_delete(c, node->path, node->gen);
			result = err;
			break;
		}
		int64_t until = zkl_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 10000);
		if (until > zkl_lost_at(c))
			until = zkl_lost_at(c);
		int rc = zkl_op_wait(c, w, op, until);
		int zrc = rc == 0 ? op->rc : ZOPERATIONTIMEOUT;
		zkl_op_put(c, op);
		if (zrc == ZOK || zrc == ZNONODE)
			break;
		if (zkl_zk_session_gone(zrc)) {
			result = ZKL_ELOST;
			break;
		}
		if (!zkl_zk_transient(zrc)) {
			zkl_log(c, ZKL_LOG_ERROR, "cannot delete %s: %s", node->path, zerror(zrc));
			result = zkl_fail_zk(zrc, "cannot delete", node->path);
			break;
		}
		if (!patient) {
			zkl_task_delete(c, node->path, node->gen);
			break;
		}
		/* Wait for the connection, but no longer than the session can be alive. */
		while (!c->sess->connected && node->gen == c->gen &&
		       !c->closing && !zkl_waiter_wait(c, w, zkl_lost_at(c)))
			;
		if (c->closing) {
			result = ZKL_ECLOSED;
			break;
		}
	}
	if (result == ZKL_ELOST)
		zkl_fail(result, "the session of %s is gone; the node goes with it", node->path);
	zkl_node_clear(node);
	return result;
}

int zkl_engine_release(zkl_client *c, struct zkl_node *node)
{
	struct zkl_waiter w;
	pthread_mutex_lock(&c->mu);
	/* On the loop (a callback releases) nothing may wait, not even with confirm_release:
	 * the delete goes to the background task, sent at once if connected. */
	const bool on_loop = zkl_on_event_thread(c);
	if ((on_loop || !c->confirm_release) && node->path && node->gen == c->gen &&
	    c->sess->connected) {
		zkl_revwatch_remove(c, node->rev);
		node->rev = NULL;
		zkl_task_delete_now(c, node->path, node->gen);
		zkl_node_clear(node);
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	if (on_loop) {
		int rc = 0;
		if (node->path) {
			zkl_revwatch_remove(c, node->rev);
			node->rev = NULL;
			if (node->gen == c->gen)
				zkl_task_delete(c, node->path, node->gen);
			else
				rc = zkl_fail(ZKL_ELOST, "the session of %s is gone; the node goes "
				              "with it", node->path);
			zkl_node_clear(node);
		}
		pthread_mutex_unlock(&c->mu);
		return rc;
	}
	zkl_waiter_enter(c, &w, NULL);
	int rc = delete_node(c, &w, node, true);
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void zkl_engine_release_later(zkl_client *c, struct zkl_node *node)
{
	pthread_mutex_lock(&c->mu);
	if (node->path) {
		zkl_revwatch_remove(c, node->rev);
		node->rev = NULL;
		if (node->gen == c->gen) /* else its session, and so the node, is gone */
			zkl_task_delete_now(c, node->path, node->gen);
		zkl_node_clear(node);
	}
	pthread_mutex_unlock(&c->mu);
}

int zkl_engine_list(zkl_client *c, const char *path, zkl_child **queue, size_t *n,
                    char ***names, int *count)
{
	struct zkl_waiter w;
	struct zkl_op *op;
	*queue = NULL;
	*n = 0;
	*names = NULL;
	*count = 0;
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, NULL);
	const struct zkl_req list = {.kind = ZKL_OP_CHILDREN, .path = path};
	int rc = zkl_send(c, &w, &list, 1, &op);
	if (op) {
		rc = zkl_op_wait(c, &w, op, INT64_MAX);
		if (rc == 0) {
			if (op->rc == ZOK)
				rc = zkl_take_queue(c, path, op, queue, n, names, count);
			else if (op->rc != ZNONODE)
				rc = zkl_fail_zk(op->rc, "cannot list", path);
		}
		zkl_op_put(c, op);
	}
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int zkl_engine_participants(zkl_client *c, const char *path, size_t holders,
                            zkl_participant **out, size_t *count)
{
	zkl_child *queue;
	size_t n;
	char **names;
	int nnames;
	*out = NULL;
	*count = 0;
	int rc = zkl_engine_list(c, path, &queue, &n, &names, &nnames);
	if (rc != 0)
		return rc;
	if (holders == ZKL_HOLDERS_READERS) {
		holders = 0;
		while (holders < n && !zkl_kind_is_writer(queue[holders].kind))
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
		zkl_names_free(names, nnames);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	/* Read every node's data in one round trip. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		p[i].path = zkl_path_join(path, queue[i].name);
		if (!p[i].path)
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
		gets[i] = (struct zkl_req){.kind = ZKL_OP_GET, .path = p[i].path};
	}
	struct zkl_waiter w;
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, NULL);
	if (rc == 0)
		rc = zkl_send(c, &w, gets, n, ops);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!ops[i])
			continue;
		int wrc = zkl_op_wait(c, &w, ops[i], INT64_MAX);
		if (rc == 0 && wrc != 0)
			rc = wrc;
		if (rc == 0 && ops[i]->rc == ZOK) {
			/* Compact: a node deleted meanwhile is left out. */
			zkl_participant tmp = p[i];
			p[i] = p[k];
			p[k] = tmp;
			p[k].data = ops[i]->value;
			ops[i]->value = NULL;
			p[k].data_len = ops[i]->value_len;
			p[k].sequence = queue[i].seq;
			p[k].czxid = ops[i]->stat.czxid;
			p[k].ctime = ops[i]->stat.ctime;
			p[k].holder = k < holders;
			k++;
		} else if (rc == 0 && ops[i]->rc != ZNONODE) {
			rc = zkl_fail_zk(ops[i]->rc, "cannot read", p[i].path);
		}
		zkl_op_put(c, ops[i]);
	}
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	free(ops);
	free(gets);
	free(queue);
	zkl_names_free(names, nnames);
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

/* A node bound to a session (q->gen) cannot be made: that session is gone. */
static int lost_session(const struct zkl_queue *q)
{
	return zkl_fail(ZKL_ELOST, "the session that %s was taken on has ended", q->path);
}

/* Waits for the connection after a transient failure; the caller's loop then retries. */
static int recover(zkl_client *c, struct zkl_waiter *w, int64_t deadline, bool try_once)
{
	if (try_once)
		return zkl_fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper was lost");
	int rc = zkl_wait_connected(c, w, deadline);
	if (rc == ZKL_ETIMEDOUT)
		return zkl_fail(ZKL_ETIMEDOUT, "timed out while disconnected from ZooKeeper");
	return rc;
}

int zkl_engine_create_fixed(const struct zkl_queue *q, const char *name, int timeout_ms,
                            struct zkl_node *node)
{
	zkl_client *c = q->c;
	const bool try_once = timeout_ms == 0;
	const int64_t deadline = zkl_deadline(timeout_ms);
	memset(node, 0, sizeof *node);
	char *target = zkl_path_join(q->path, name);
	if (!target)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	struct zkl_waiter w;
	int rc = 0;
	bool retried = false;
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, q->owner);
	const struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = target, .data = q->data,
	                               .len = q->data_len, .mode = ZOO_EPHEMERAL};
	const struct zkl_req exists = {.kind = ZKL_OP_EXISTS, .path = target};
	for (;;) {
		struct zkl_op *op;
		if (q->gen && c->gen != q->gen) {
			rc = lost_session(q);
			break;
		}
		if ((rc = zkl_send(c, &w, &create, 1, &op)) != 0)
			break;
		rc = wait_op(c, &w, op, deadline, try_once);
		if (rc != 0) {
			/* The node may appear after we give up: its session owns it, so the
			 * background task deletes it by name. */
			zkl_task_delete(c, target, op->s->gen);
			zkl_op_put(c, op);
			break;
		}
		int zrc = op->rc;
		uint64_t gen = op->s->gen;
		int64_t czxid = op->stat.czxid;
		zkl_op_put(c, op);
		if (q->gen && (gen != q->gen || zkl_now_ms() >= zkl_lost_at(c))) {
			/* Sent after the session changed, or answered once it is being given up
			 * for lost (as a turn is, acquire.c): whatever it made goes. */
			if (zrc == ZOK || zkl_zk_transient(zrc))
				zkl_task_delete(c, target, gen);
			rc = lost_session(q);
			break;
		}
		if (zrc == ZOK) {
			node->path = target;
			target = NULL;
			node->gen = gen;
			node->czxid = czxid;
			zkl_node_known(q, node);
			break;
		}
		if (zrc == ZNODEEXISTS && retried) {
			/* Our earlier attempt got through before the connection dropped. */
			if ((rc = zkl_send(c, &w, &exists, 1, &op)) != 0)
				break;
			rc = wait_op(c, &w, op, deadline, try_once);
			if (rc == 0 && op->rc == ZOK && op->stat.ephemeralOwner == c->sess->id) {
				node->path = target;
				target = NULL;
				node->gen = op->s->gen;
				node->czxid = op->stat.czxid;
				zkl_node_known(q, node);
			} else if (rc == 0) {
				rc = zkl_fail(ZKL_EZK, "%s exists and belongs to another session",
				              target);
			}
			zkl_op_put(c, op);
			break;
		}
		if (q->gen && zkl_zk_session_gone(zrc)) {
			rc = lost_session(q);
			break;
		}
		if (zkl_zk_transient(zrc) || zkl_zk_session_gone(zrc)) {
			retried = true;
			if ((rc = recover(c, &w, deadline, try_once)) != 0)
				break;
			continue;
		}
		rc = zkl_fail_zk(zrc, "cannot create", target);
		break;
	}
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	free(target);
	return rc;
}
