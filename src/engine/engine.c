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
 * This file holds what it shares (the queue's nodes, the bounded delete of a node of
 * ours, the hold made at a grant) and the queue's listing and participants; release.c
 * holds a confirmed release, fixed.c the node of a fixed name (a downgrade's). Each
 * request a thread makes and waits for is a job the loop runs (src/client/loop.c, "Jobs"), and
 * the thread waits on the job alone, never for the loop's turn, and only the loop
 * sends.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_internal.h"
#include "predicates.h"

bool zkl__queue_alone(bool made_folder, const zkl_child *own)
{
	return made_folder && own->seq == 0;
}

pthread_mutex_t zkl__pub_mu = PTHREAD_MUTEX_INITIALIZER;

void zkl__pub_set(char **slot, const char *path)
{
	char *copy = path ? strdup(path) : NULL; /* without memory: no node to show */
	pthread_mutex_lock(&zkl__pub_mu);
	char *old = *slot;
	*slot = copy;
	pthread_mutex_unlock(&zkl__pub_mu);
	free(old);
}

/* Our node as published (on the loop): its path at q->pub, and the election told. */
static void node_publish(const struct zkl_queue *q, const struct zkl_node *node)
{
	if (q->pub)
		zkl__pub_set(q->pub, node->path);
	if (q->on_node)
		q->on_node(q->node_ctx);
}

/* Forgets our node (on the loop): its revocation watch goes too, and it is published
 * as gone. */
void zkl__node_forget(const struct zkl_queue *q, struct zkl_node *node)
{
	zkl__node_rev_drop(q->c, node);
	const bool had = node->path != NULL;
	free(node->path);
	node->path = NULL;
	if (had)
		node_publish(q, node);
}

/* Our node is known (on the loop): published, and its revocation watch armed if the
 * recipe asks for one. */
void zkl__node_known(const struct zkl_queue *q, struct zkl_node *node)
{
	node_publish(q, node);
	if (q->on_revoke && !node->rev)
		node->rev = zkl__revwatch_add(q->c, node->path, node->gen, q->revoke_decode,
		                             q->on_revoke, q->revoke_ctx);
}

/* Our node exists and holds (on the loop): the hold the recipe asked for, and the
 * observer told of the grant. */
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
		zkl__hold_add(c, h);
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

void zkl__names_free(char **names, int count)
{
	if (!names)
		return;
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

/* Parses and sorts a listing's names into a new array (on the loop), leaving out our own
 * nodes whose delete is on its way. The names stay the caller's. */
int zkl__take_queue(zkl_client *c, const char *path, char **names, int count,
                   zkl_child **queue, size_t *n)
{
	size_t plen = strlen(path);
	*queue = NULL;
	*n = 0;
	if (count == 0)
		return 0;
	zkl_child *q = malloc((size_t)count * sizeof *q);
	if (!q)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	/* Our own nodes on their way out, looked up once for the whole listing. */
	const char *leaving[16];
	size_t nleaving = zkl__tasks_pending(c, path, plen, leaving, 16);
	size_t k = 0;
	for (int i = 0; i < count; i++) {
		if (!zkl__child_parse(names[i], &q[k]))
			continue;
		bool gone = false;
		if (nleaving > 16) {
			gone = zkl__task_pending(c, path, plen, names[i]); /* too many to keep */
		} else {
			for (size_t j = 0; j < nleaving && !gone; j++)
				gone = strcmp(leaving[j], names[i]) == 0;
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
	zkl__node_rev_drop(c, node);
	if (!node->path || node->gen != c->gen)
		return false; /* none, or gone with its session */
	if (c->closing || !c->sess->connected || zkl__now_ms() >= zkl__giveup_at(c)) {
		zkl__task_delete(c, node->path, node->gen);
		return false;
	}
	int err = 0;
	const struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = node->path};
	wd->op = zkl__op_send(c, w, &del, &err);
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
	if (ops[0]->rc == ZOK) {
		zkl__op_take_names(ops[0], l->names, l->count);
		return zkl__take_queue(c, l->path, *l->names, *l->count, l->queue, l->n);
	}
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

/* ---- the queue's rules ------------------------------------------------------------ */

/* Given the queue in order and our place in it: do we hold, and if not, what do we wait
 * for (predicates.h)? The recipes choose one; pure functions, unit-tested without a
 * server. */

static bool first_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                        size_t *watch)
{
	(void)queue;
	(void)n;
	(void)arg;
	if (self == 0)
		return true;
	*watch = self - 1;
	return false;
}

static bool first_heir(const zkl_child *queue, size_t self, size_t watch)
{
	(void)watch;
	return self == 1 && !zkl__kind_may_downgrade(queue[0].kind);
}

const struct zkl_predicate zkl__pred_first = { first_holds, first_heir };

static bool read_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                       size_t *watch)
{
	(void)n;
	(void)arg;
	for (size_t i = self; i-- > 0;) {
		if (zkl__kind_is_writer(queue[i].kind)) {
			*watch = i;
			return false;
		}
	}
	return true;
}

static bool read_heir(const zkl_child *queue, size_t self, size_t watch)
{
	(void)self;
	for (size_t i = 0; i < watch; i++)
		if (zkl__kind_is_writer(queue[i].kind))
			return false;
	return true;
}

const struct zkl_predicate zkl__pred_read = { read_holds, read_heir };

static bool count_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                        size_t *watch)
{
	(void)queue;
	(void)self;
	const struct zkl_limit *l = arg;
	int max = *l->fixed > 0 ? *l->fixed : (*l->shared > 0 ? (int)*l->shared : 0);
	if (n <= (size_t)max)
		return true;
	*watch = ZKL_WATCH_CHILDREN;
	return false;
}

const struct zkl_predicate zkl__pred_count = { count_holds, NULL };
