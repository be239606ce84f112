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
 * All waiting happens on the calling thread with the client mutex held around state
 * checks; requests are sent without it.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

bool zkl_queue_alone(bool made_folder, const zkl_child *own)
{
	return made_folder && own->seq == 0;
}

/* Forgets our node (mu held): its revocation watch goes too. */
static void node_forget(zkl_client *c, struct zkl_node *node)
{
	zkl_revwatch_remove(c, node->rev);
	node->rev = NULL;
	free(node->path);
	node->path = NULL;
}

/* Our node is known (mu held): arm its revocation watch if the recipe asks for one. */
static void node_known(const struct zkl_queue *q, struct zkl_node *node)
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
static int take_queue(zkl_client *c, const char *path, struct zkl_op *op, zkl_child **queue,
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
	size_t k = 0;
	for (int i = 0; i < *count; i++) {
		if (zkl_child_parse((*names)[i], &q[k]) &&
		    !(c->tasks && zkl_task_pending(c, path, plen, (*names)[i]))) {
			q[k].index = (size_t)i;
			k++;
		}
	}
	zkl_children_sort(q, k);
	*queue = q;
	*n = k;
	return 0;
}

static const char *basename_of(const char *path)
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

int zkl_engine_ensure_path(zkl_client *c, struct zkl_waiter *w, const char *path,
                           int64_t deadline)
{
	/* Walk down from the first missing ancestor: try the path, and on NONODE its
	 * parent, and so on up, then create back down. */
	size_t len = strlen(path);
	char *buf = strdup(path);
	if (!buf)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	size_t depth = len; /* create buf[0..depth) */
	int rc = 0;
	for (;;) {
		buf[depth] = 0;
		int err = 0;
		pthread_mutex_unlock(&c->mu);
		struct zkl_op *op = zkl_op_create(c, w, buf, NULL, 0, ZOO_CONTAINER, &err);
		pthread_mutex_lock(&c->mu);
		if (!op) {
			rc = err;
			break;
		}
		rc = zkl_op_wait(c, w, op, deadline);
		int zrc = op->rc;
		zkl_op_put(c, op);
		if (rc != 0) {
			zkl_fail(rc, "gave up creating %s", buf);
			break;
		}
		if (zrc == ZOK || zrc == ZNODEEXISTS) {
			if (depth == len)
				break;
			buf[depth] = '/';
			depth += strcspn(buf + depth + 1, "/") + 1;
			continue;
		}
		if (zrc == ZNONODE) {
			size_t p = zkl_path_parent_len(buf);
			if (p == 0) {
				rc = zkl_fail(ZKL_EZK, "cannot create %s: the root of the client's "
				              "chroot does not exist", path);
				break;
			}
			depth = p;
			continue;
		}
		if (zkl_zk_transient(zrc) || zkl_zk_session_gone(zrc)) {
			rc = ZKL_ECONNLOSS; /* the caller waits for the connection and retries */
			break;
		}
		rc = zkl_fail_zk(zrc, "cannot create", buf);
		break;
	}
	free(buf);
	return rc;
}

/* Looks for our node by uuid after a create whose outcome is unknown (mu held). Adopts
 * it into *node when its ephemeral owner is our current session. Returns 0 (found or
 * not), or a ZKL_E* code. */
static int find_own(const struct zkl_queue *q, struct zkl_waiter *w, struct zkl_node *node,
                    int64_t deadline, bool try_once)
{
	zkl_client *c = q->c;
	int err = 0;
	pthread_mutex_unlock(&c->mu);
	struct zkl_op *op = zkl_op_children(c, w, q->path, NULL, &err);
	pthread_mutex_lock(&c->mu);
	if (!op)
		return err;
	int rc = wait_op(c, w, op, deadline, try_once);
	if (rc != 0) {
		zkl_op_put(c, op);
		return rc;
	}
	char *found = NULL;
	if (op->rc == ZOK) {
		for (int i = 0; i < op->count && !found; i++)
			if (zkl_name_has_uuid(op->names[i], node->uuid))
				found = zkl_path_join(q->path, op->names[i]);
	} else if (op->rc != ZNONODE) {
		rc = zkl_zk_transient(op->rc) || zkl_zk_session_gone(op->rc) ? ZKL_ECONNLOSS
		                                                : zkl_fail_zk(op->rc, "cannot list", q->path);
	}
	uint64_t gen = op->s->gen;
	zkl_op_put(c, op);
	if (!found)
		return rc;
	pthread_mutex_unlock(&c->mu);
	op = zkl_op_exists(c, w, found, &err);
	pthread_mutex_lock(&c->mu);
	if (!op) {
		free(found);
		return err;
	}
	rc = wait_op(c, w, op, deadline, try_once);
	if (rc == 0 && op->rc == ZOK && gen == c->gen && op->s->gen == gen &&
	    op->stat.ephemeralOwner == c->sess->id) {
		node->path = found;
		node->gen = gen;
		node->czxid = op->stat.czxid;
		found = NULL;
	} else if (rc == 0 && zkl_zk_transient(op->rc)) {
		rc = ZKL_ECONNLOSS;
	}
	zkl_op_put(c, op);
	free(found);
	return rc;
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
		int err = 0;
		pthread_mutex_unlock(&c->mu);
		struct zkl_op *op = zkl_op_delete(c, w, node->path, &err);
		pthread_mutex_lock(&c->mu);
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
	if (!c->confirm_release && node->path && node->gen == c->gen && c->sess->connected) {
		zkl_revwatch_remove(c, node->rev);
		node->rev = NULL;
		zkl_task_delete_now(c, node->path, node->gen);
		zkl_node_clear(node);
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	zkl_waiter_enter(c, &w, NULL);
	int rc = delete_node(c, &w, node, true);
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* Whether a grant on node's session may stand (mu held): the session is current and
 * short of its loss deadline. A watch event proves nothing about the server hearing us
 * (a client cut off one way still hears it), so a waiter that learns its turn has come
 * after the deadline must not hold: the event thread is about to give the session up. */
static bool session_sure(zkl_client *c, const struct zkl_node *node)
{
	return node->gen == c->gen && zkl_now_ms() < zkl_lost_at(c);
}

/* Our turn has come (mu held). Returns 0 if we hold: the session may still stand. Past
 * its loss deadline, waits until the session is replaced, w is cancelled or the deadline
 * passes, and returns 1 (the caller's loop queues again on the new session) or an
 * error. */
static int take_turn(zkl_client *c, struct zkl_waiter *w, const struct zkl_node *node,
                     int64_t deadline)
{
	if (session_sure(c, node))
		return 0;
	zkl_log(c, ZKL_LOG_INFO, "turn for %s came past the session's loss deadline; "
	        "queueing again on a new session", node->path);
	while (node->gen == c->gen && !w->canceled && !c->closing) {
		if (zkl_waiter_wait(c, w, deadline))
			return zkl_fail(ZKL_ETIMEDOUT, "timed out while the session was given up");
	}
	return 1;
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

/* A cancel came while our create was out (mu held). A cancelled acquire returns with
 * nothing of its own left in the queue, so it waits for the create's answer, which the
 * C client gives within the session timeout, unless cancelled again. Returns true if
 * the answer came: *node then holds the node it made, if any, for the withdrawal to
 * delete. False leaves the cleanup to the create's completion. */
static bool settle_create(zkl_client *c, struct zkl_waiter *w, const char *parent,
                          struct zkl_op *create, struct zkl_node *node)
{
	w->canceled = false;
	int64_t until = zkl_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 10000);
	if (zkl_op_wait(c, w, create, until) != 0)
		return false;
	if (create->rc == ZOK && create->value) {
		node->path = create->value;
		create->value = NULL;
		node->gen = create->s->gen;
		return true;
	}
	/* Not made, or not known to be: the completion has run, so carry the search by
	 * uuid to the background, as a create given up on would. */
	if (zkl_zk_transient(create->rc))
		zkl_task_find_delete(c, parent, node->uuid, create->s->gen);
	return true;
}

int zkl_engine_acquire(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node)
{
	zkl_client *c = q->c;
	const bool try_once = timeout_ms == 0;
	const int64_t deadline = zkl_deadline(timeout_ms);
	struct zkl_waiter w;
	struct zkl_op *list = NULL;
	bool unknown = false;      /* a create of ours may exist: look for it by uuid */
	uint64_t unknown_gen = 0;
	int rc = 0;

	memset(node, 0, sizeof *node);
	zkl_uuid(node->uuid);
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, q->owner);

	for (;;) {
		zkl_child *queue = NULL;
		size_t n = 0;
		char **names = NULL;
		int count = 0;
		const unsigned epoch = q->epoch ? *q->epoch : 0;

		if (c->closing) {
			rc = zkl_fail(ZKL_ECLOSED, "the client is closing");
			break;
		}
		if (w.canceled) {
			rc = zkl_fail(ZKL_ECANCELED, "acquire of %s was cancelled", q->path);
			break;
		}
		if (node->path && node->gen != c->gen) {
			/* Our session expired while we queued: the node went with it. Queue
			 * again on the new session. */
			zkl_log(c, ZKL_LOG_INFO, "session changed while waiting for %s; queueing again",
			        q->path);
			node_forget(c, node);
			zkl_uuid(node->uuid);
		}
		if (!node->path && unknown) {
			unknown = false;
			if (unknown_gen == c->gen) {
				rc = find_own(q, &w, node, deadline, try_once);
				if (rc == ZKL_ECONNLOSS) {
					unknown = true;
					if ((rc = recover(c, &w, deadline, try_once)) != 0)
						break;
					continue;
				}
				if (rc != 0)
					break;
			}
			if (node->path)
				node_known(q, node);
			else
				zkl_uuid(node->uuid);
		}
		if (!node->path) {
			/* Create our node, and list the queue in the same round trip. */
			char *target = NULL;
			char prefix[ZKL_PROTECT_PREFIX_LEN + 32];
			zkl_node_prefix(prefix, sizeof prefix, node->uuid, q->kind);
			target = zkl_path_join(q->path, prefix);
			if (!target) {
				rc = zkl_fail(ZKL_ENOMEM, "out of memory");
				break;
			}
			int err = 0;
			/* While the client keeps finding new folders, a handle that has not seen
			 * its folder yet bets that it is new too: it creates the folder (as a
			 * container) ahead of its node, in the same round trip, and leaves the
			 * list out, which a new folder does not need (see below). Otherwise it
			 * bets that the folder exists: node and list. */
			const bool make_folder = q->folder_seen && !*q->folder_seen && c->folders_new;
			pthread_mutex_unlock(&c->mu);
			/* Nobody waits for the folder's answer alone (it comes before the node's):
			 * it wakes no one. */
			struct zkl_op *folder = make_folder ? zkl_op_create(c, NULL, q->path, NULL, 0,
			                                                    ZOO_CONTAINER, &err)
			                                    : NULL;
			struct zkl_op *create = zkl_op_create(c, &w, target, q->data, q->data_len,
			                                      ZOO_EPHEMERAL_SEQUENTIAL, &err);
			if (create && !make_folder)
				list = zkl_op_children(c, &w, q->path, NULL, &err);
			pthread_mutex_lock(&c->mu);
			free(target);
			if (!create || (!make_folder && !list)) {
				zkl_op_put(c, folder);
				if (create) {
					create->cleanup_parent = strdup(q->path);
					memcpy(create->uuid, node->uuid, sizeof node->uuid);
					zkl_op_put(c, create);
				}
				rc = err;
				break;
			}
			rc = wait_op(c, &w, create, deadline, try_once);
			if (rc == ZKL_ECANCELED && settle_create(c, &w, q->path, create, node)) {
				/* Cancelled with the create out: it was answered since, and the
				 * withdrawal below deletes what it made before we return. */
				zkl_op_put(c, folder);
				zkl_op_put(c, create);
				rc = zkl_fail(ZKL_ECANCELED, "acquire of %s was cancelled", q->path);
				break;
			}
			if (rc != 0) {
				/* Give up with the create still out: its completion cleans up. */
				zkl_op_put(c, folder);
				create->cleanup_parent = strdup(q->path);
				memcpy(create->uuid, node->uuid, sizeof node->uuid);
				zkl_op_put(c, create);
				if (rc == ZKL_ETIMEDOUT)
					zkl_fail(rc, "timed out waiting for %s", q->path);
				else
					zkl_fail(rc, "acquire of %s was cancelled", q->path);
				break;
			}
			int zrc = create->rc;
			/* The session answers in order: the folder's answer came first. */
			const bool made = folder && folder->done && folder->rc == ZOK;
			if (folder && folder->done && (folder->rc == ZOK || folder->rc == ZNODEEXISTS))
				c->folders_new = made;
			zkl_op_put(c, folder);
			if (zrc == ZOK) {
				node->path = create->value;
				create->value = NULL;
				node->gen = create->s->gen;
				node->czxid = create->stat.czxid;
				node_known(q, node);
			}
			uint64_t cgen = create->s->gen;
			zkl_op_put(c, create);
			zkl_child me;
			if (zrc == ZOK && zkl_child_parse(basename_of(node->path), &me) &&
			    zkl_queue_alone(made, &me)) {
				/* No node was ever made in the folder before ours: no list needed. */
				size_t watch = 0;
				node->seq = 0;
				*q->folder_seen = true;
				if (q->pred->holds(&me, 1, 0, q->pred_arg, &watch) && session_sure(c, node)) {
					rc = 0;
					break;
				}
			}
			if (zrc != ZOK) {
				zkl_op_put(c, list);
				list = NULL;
				if (zrc == ZNONODE) {
					/* The folder was missing: the next first acquire bets on a new one.
					 * Making the folder is part of trying once, not waiting. */
					c->folders_new = true;
					int64_t d = deadline;
					if (try_once)
						d = zkl_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 10000);
					rc = zkl_engine_ensure_path(c, &w, q->path, d);
					if (rc == ZKL_ECONNLOSS)
						rc = recover(c, &w, deadline, try_once);
					if (rc != 0)
						break;
					continue;
				}
				if (zkl_zk_transient(zrc) || zkl_zk_session_gone(zrc)) {
					unknown = zkl_zk_transient(zrc);
					unknown_gen = cgen;
					if ((rc = recover(c, &w, deadline, try_once)) != 0)
						break;
					continue;
				}
				rc = zkl_fail_zk(zrc, "cannot create a node under", q->path);
				break;
			}
		}

		/* List the queue, unless the pipelined list is on its way. */
		if (!list) {
			int err = 0;
			pthread_mutex_unlock(&c->mu);
			list = zkl_op_children(c, &w, q->path, NULL, &err);
			pthread_mutex_lock(&c->mu);
			if (!list) {
				rc = err;
				break;
			}
		}
		rc = wait_op(c, &w, list, deadline, try_once);
		if (rc != 0) {
			zkl_op_put(c, list);
			list = NULL;
			break;
		}
		int lrc = list->rc;
		if (lrc == ZOK && q->folder_seen)
			*q->folder_seen = true;
		if (lrc == ZOK)
			rc = take_queue(c, q->path, list, &queue, &n, &names, &count);
		zkl_op_put(c, list);
		list = NULL;
		if (rc != 0)
			break;
		if (lrc != ZOK) {
			if (lrc == ZNONODE) {
				/* The folder is gone, and our node with it. */
				node_forget(c, node);
				zkl_uuid(node->uuid);
				continue;
			}
			if (zkl_zk_transient(lrc) || zkl_zk_session_gone(lrc)) {
				if ((rc = recover(c, &w, deadline, try_once)) != 0)
					break;
				continue;
			}
			rc = zkl_fail_zk(lrc, "cannot list", q->path);
			break;
		}

		const char *own = basename_of(node->path);
		size_t self = n;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(queue[i].name, own) == 0) {
				self = i;
				break;
			}
		}
		if (self == n) {
			/* Our node is not there: deleted from outside. Queue again. */
			zkl_log(c, ZKL_LOG_WARN, "node %s vanished while queued; queueing again",
			        node->path);
			node_forget(c, node);
			zkl_uuid(node->uuid);
			free(queue);
			zkl_names_free(names, count);
			continue;
		}
		node->seq = queue[self].seq;
		size_t watch = 0;
		bool held = q->pred->holds(queue, n, self, q->pred_arg, &watch);
		if (held) {
			free(queue);
			zkl_names_free(names, count);
			if ((rc = take_turn(c, &w, node, deadline)) <= 0)
				break;
			rc = 0;
			continue;
		}
		bool folder = watch == ZKL_WATCH_CHILDREN;
		/* When the watched node goes, do we hold without listing again? */
		const bool heir = !folder && watch < self && q->pred->heir &&
		                  q->pred->heir(queue, self, watch);
		char *target = folder ? strdup(q->path) : zkl_path_join(q->path, queue[watch].name);
		free(queue);
		zkl_names_free(names, count);
		if (try_once) {
			free(target);
			rc = zkl_fail(ZKL_ETIMEDOUT, "%s is held", q->path);
			break;
		}
		if (!target) {
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
			break;
		}

		/* Watch the one node before us, and sleep until it changes. */
		struct zkl_watch *wt = zkl_watch_new(c, &w);
		if (!wt) {
			free(target);
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		int err = 0;
		pthread_mutex_unlock(&c->mu);
		struct zkl_op *get = folder ? zkl_op_children(c, &w, target, wt, &err)
		                            : zkl_op_get(c, &w, target, wt, &err);
		pthread_mutex_lock(&c->mu);
		free(target);
		if (!get) {
			zkl_watch_put(c, wt);
			rc = err;
			break;
		}
		rc = zkl_op_wait(c, &w, get, deadline);
		int grc = get->done ? get->rc : ZOK;
		uint64_t ggen = get->s->gen;
		/* A folder watch is armed by a fresh listing. If the queue changed between
		 * our first listing and this one, that change will fire no watch: look again
		 * at once. (Folder predicates depend on the number of nodes only.) */
		bool changed = false;
		if (folder && rc == 0 && grc == ZOK) {
			size_t parsed = 0;
			zkl_child tmp;
			for (int i = 0; i < get->count; i++)
				parsed += zkl_child_parse(get->names[i], &tmp);
			changed = parsed != n;
		}
		zkl_op_put(c, get);
		if (rc == 0 && grc == ZOK && !changed) {
			while (!wt->fired && !w.canceled && !c->closing && c->gen == ggen &&
			       (!q->epoch || *q->epoch == epoch)) {
				if (zkl_waiter_wait(c, &w, deadline)) {
					if (!wt->fired && (!q->epoch || *q->epoch == epoch))
						rc = ZKL_ETIMEDOUT;
					break;
				}
			}
		}
		const bool gone = rc == 0 && (grc == ZNONODE ||
		                              (wt->fired && wt->event == ZOO_DELETED_EVENT));
		zkl_watch_put(c, wt);
		if (rc == ZKL_ETIMEDOUT) {
			zkl_fail(rc, "timed out waiting for %s", q->path);
			break;
		}
		if (rc != 0) {
			zkl_fail(rc, "acquire of %s was cancelled", q->path);
			break;
		}
		if (heir && gone && !w.canceled && !c->closing && ggen == node->gen &&
		    c->gen == node->gen) {
			/* The one node ahead is gone, and nothing can take its place. */
			if ((rc = take_turn(c, &w, node, deadline)) <= 0)
				break;
			rc = 0;
			continue;
		}
		if (zkl_zk_transient(grc) || zkl_zk_session_gone(grc)) {
			if ((rc = recover(c, &w, deadline, try_once)) != 0)
				break;
		} else if (grc != ZOK && grc != ZNONODE) {
			rc = zkl_fail_zk(grc, "cannot watch a node under", q->path);
			break;
		}
	}

	if (list)
		zkl_op_put(c, list);
	if (rc != 0) {
		/* Withdraw: nothing of ours may stay in the queue. */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		if (node->path)
			delete_node(c, &w, node, false);
		else if (unknown && unknown_gen == c->gen)
			zkl_task_find_delete(c, q->path, node->uuid, unknown_gen);
		node_forget(c, node);
		zkl_node_clear(node);
		zkl_fail(rc, "%s", saved);
	}
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int zkl_engine_list(zkl_client *c, const char *path, zkl_child **queue, size_t *n,
                    char ***names, int *count)
{
	struct zkl_waiter w;
	int err = 0;
	*queue = NULL;
	*n = 0;
	*names = NULL;
	*count = 0;
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, NULL);
	pthread_mutex_unlock(&c->mu);
	struct zkl_op *op = zkl_op_children(c, &w, path, NULL, &err);
	pthread_mutex_lock(&c->mu);
	int rc = err;
	if (op) {
		rc = zkl_op_wait(c, &w, op, INT64_MAX);
		if (rc == 0) {
			if (op->rc == ZOK)
				rc = take_queue(c, path, op, queue, n, names, count);
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
	if (n && (!p || !ops)) {
		free(p);
		free(ops);
		free(queue);
		zkl_names_free(names, nnames);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	struct zkl_waiter w;
	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, NULL);
	pthread_mutex_unlock(&c->mu);
	/* Read every node's data in one round trip. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		p[i].path = zkl_path_join(path, queue[i].name);
		if (!p[i].path) {
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		ops[i] = zkl_op_get(c, &w, p[i].path, NULL, &rc);
	}
	pthread_mutex_lock(&c->mu);
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
	for (;;) {
		int err = 0;
		pthread_mutex_unlock(&c->mu);
		struct zkl_op *op = zkl_op_create(c, &w, target, q->data, q->data_len,
		                                  ZOO_EPHEMERAL, &err);
		pthread_mutex_lock(&c->mu);
		if (!op) {
			rc = err;
			break;
		}
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
		if (zrc == ZOK) {
			node->path = target;
			target = NULL;
			node->gen = gen;
			node->czxid = czxid;
			node_known(q, node);
			break;
		}
		if (zrc == ZNODEEXISTS && retried) {
			/* Our earlier attempt got through before the connection dropped. */
			pthread_mutex_unlock(&c->mu);
			op = zkl_op_exists(c, &w, target, &err);
			pthread_mutex_lock(&c->mu);
			if (!op) {
				rc = err;
				break;
			}
			rc = wait_op(c, &w, op, deadline, try_once);
			if (rc == 0 && op->rc == ZOK && op->stat.ephemeralOwner == c->sess->id) {
				node->path = target;
				target = NULL;
				node->gen = op->s->gen;
				node->czxid = op->stat.czxid;
				node_known(q, node);
			} else if (rc == 0) {
				rc = zkl_fail(ZKL_EZK, "%s exists and belongs to another session",
				              target);
			}
			zkl_op_put(c, op);
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
