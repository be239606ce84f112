/* Inspection: every participant at a lock path, and the locks in use under a prefix.
 *
 * Design notes
 *
 * Reads. Everything goes through the client's request layer on its current session, in
 * rounds of pipelined requests (at most WINDOW in flight): for each lock path, first its
 * own data and the children of the path, of "<path>/leases" and of "<path>/locks" (one
 * round trip, whether or not the path is a semaphore: asking costs less than a second
 * round trip); then the data and stat of every node found. A walk lists one level of
 * the tree per round; the listing that finds a lock serves as its own, so the first
 * round asks only for a semaphore's parts. A request answered with a lost connection or
 * an expired session is sent again once the client is connected (to a new session if
 * need be), unless the caller may not wait: a try-once call. Each round is a job
 * (zkl__requests): on a thread that runs the client's loop, ZKL_EDEADLK.
 *
 * Roles. The rules are the recipes' own (names.c says which markers are writers, the
 * predicates when a node holds), applied to the snapshot, after the nodes that vanished
 * between the list and the reads are taken out. The one rule the queue alone cannot
 * give is the semaphore's waiting lease: its number says nothing about the limit, which
 * lives in the takers. What does say it: only the gate holder makes leases, and it keeps
 * the gate until its lease holds, so a lease made by the gate holder's session after its
 * gate node is the one that waits, if the leases outnumber the recorded limit.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/inspect.h>
#include <zklocks/record.h>

#include "common.h"
#include "inspect_internal.h"

#define WINDOW 256

struct zkl_inspection {
	zkl_lock_info *locks;
	size_t nlocks;
	zkl_node_info *nodes;
	size_t nnodes;
	size_t skipped;
};

/* ---- requests, in pipelined rounds ---- */

#define RQ_PENDING 1 /* no final answer yet (ZooKeeper's codes are 0 or negative) */

struct rq {
	enum zkl_op_kind kind; /* ZKL_OP_GET or ZKL_OP_CHILDREN */
	char *path;            /* owned */
	int zrc;               /* the answer, or RQ_PENDING */
	struct zkl_op *op;     /* its results when zrc is ZOK, until rq_free() */
};

/* One call: its client, deadline, and whether it may wait for a lost connection. */
struct call {
	zkl_client *c;
	int64_t deadline;
	bool patient;
	int timeout_ms;
};

static int call_init(struct call *x, zkl_client *c, int timeout_ms)
{
	x->c = c;
	x->timeout_ms = timeout_ms;
	bool closing;
	const int session_ms = zkl__session_timeout_any(c, &closing);
	if (closing)
		return zkl__fail(ZKL_ECLOSED, "the client is closing");
	/* Trying once still waits for the answers: the C client gives one within the
	 * session timeout. */
	x->deadline = timeout_ms == 0 ? zkl__now_ms() + session_ms : zkl__deadline(timeout_ms);
	x->patient = timeout_ms != 0;
	return 0;
}

static void rq_free(zkl_client *c, struct rq *r, size_t n)
{
	if (!r)
		return;
	for (size_t i = 0; i < n; i++) {
		if (r[i].op)
			zkl__op_release(c, r[i].op);
		free(r[i].path);
	}
	free(r);
}

static int timed_out(const struct call *x, const char *path)
{
	if (!path)
		return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper did not come back "
		                "within %d ms", x->timeout_ms);
	if (x->timeout_ms == 0)
		return zkl__fail(ZKL_ETIMEDOUT, "no answer from ZooKeeper for %s within the "
		                "session timeout", path);
	return zkl__fail(ZKL_ETIMEDOUT, "no answer from ZooKeeper for %s within %d ms", path,
	                x->timeout_ms);
}

/* Sends every request not answered yet and waits until each has its final answer in zrc
 * (ZOK with its op, or a refusal such as ZNONODE). Returns 0, or a ZKL_E* code with the
 * detail set: the deadline passed, the client closed, or the connection was lost and x
 * may not wait for it. */
static int rq_run(struct call *x, struct rq *r, size_t n)
{
	zkl_client *c = x->c;
	int rc = 0;
	for (;;) {
		int again = 0;          /* a lost answer to send again */
		uint64_t gone_gen = 0;  /* a session that answered "expired" */
		for (size_t from = 0; from < n && rc == 0; from += WINDOW) {
			size_t to = from + WINDOW < n ? from + WINDOW : n;
			/* The window's requests still unanswered, run together. */
			struct zkl_req reqs[WINDOW];
			struct zkl_op *ops[WINDOW];
			size_t at[WINDOW];
			size_t k = 0;
			for (size_t i = from; i < to; i++) {
				if (r[i].zrc == RQ_PENDING) {
					at[k] = i;
					reqs[k++] = (struct zkl_req){.kind = r[i].kind, .path = r[i].path,
						.mark_leaving = r[i].kind == ZKL_OP_CHILDREN};
				}
			}
			rc = zkl__requests(c, reqs, k, x->deadline, ops);
			if (rc == ZKL_ETIMEDOUT)
				rc = timed_out(x, reqs[0].path);
			/* The answers are final once zkl__requests() returned: only the loop
			 * wrote them, before it told us. */
			for (size_t i = 0; i < k && rc == 0; i++) {
				struct zkl_op *op = ops[i];
				/* Lost, or expired (a client opens a new session by itself): worth
				 * asking again. A session moved elsewhere is not. */
				bool expired = zkl__zk_class(op->rc) == ZKL_ZK_EXPIRED;
				if (zkl__zk_transient(op->rc) || expired) {
					if (!x->patient)
						rc = zkl__fail_zk(op->rc, "cannot read", r[at[i]].path);
					else if (expired)
						gone_gen = op->s->gen;
					again = again ? again : op->rc;
				} else {
					r[at[i]].zrc = op->rc;
					if (op->rc == ZOK) {
						r[at[i]].op = op;
						ops[i] = NULL;
					}
				}
			}
			zkl__ops_release(c, ops, k);
		}
		if (rc != 0 || !again)
			break;
		/* Wait for the connection (a new session, after an expiry), then ask again. The
		 * loss may be answered before the client hears that the connection is down:
		 * then give it a moment rather than asking again at once. */
		rc = zkl__await_connection(c, gone_gen, gone_gen ? 0 : zkl__now_ms() + 100,
		                          x->deadline);
		if (rc == ZKL_ETIMEDOUT)
			rc = timed_out(x, NULL);
	}
	return rc;
}

/* Fills r with a request; false if out of memory. */
static bool rq_set(struct rq *r, enum zkl_op_kind kind, const char *parent,
                   const char *leaf)
{
	r->kind = kind;
	r->zrc = RQ_PENDING;
	r->op = NULL;
	r->path = leaf ? zkl__path_join(parent, leaf) : strdup(parent);
	return r->path != NULL;
}

/* ---- one lock: its nodes, found, read and classified ---- */

enum part { PART_QUEUE, PART_LEASES, PART_GATE };

struct item {
	zkl_child ch;      /* parsed name; ch.name points to name */
	char *name;
	enum part part;
	struct zkl_op *op; /* its data and stat, once read (ZOK) */
	zkl_role role;
	bool holds;
	zkl_layout layout;
};

struct job {
	char *path;
	bool tolerant;     /* a folder of a walk: one that may not be read is skipped */
	bool listed;       /* the walk has listed it: its children are kids */
	char **kids;
	bool *kids_leaving; /* which of kids are our nodes on their way out (op->leaving) */
	int nkids;
	bool skipped;
	bool exists;
	bool semaphore;    /* read as a semaphore: its leases and gate are its own */
	bool merged;       /* a semaphore's gate, found by a walk as a folder of its own */
	int limit;
	struct item *items;
	size_t nitems;
	size_t r1[4];      /* its requests of the first round (SIZE_MAX: not sent) */
	size_t first_rq;   /* its first request of the second round */
};

/* Takes the parsable children names[0..count) of a folder into j's items (part), but our
 * nodes whose delete is on its way (leaving[i]: the loop marked the listing's answer),
 * and sorts them. The names taken are set to NULL in names. Returns 0 or ZKL_ENOMEM. */
static int take_children(struct job *j, char **names, const bool *leaving, int count,
                         enum part part)
{
	if (count <= 0)
		return 0;
	struct item *grown = realloc(j->items, (j->nitems + (size_t)count) * sizeof *grown);
	if (!grown)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	j->items = grown;
	size_t start = j->nitems;
	for (int i = 0; i < count; i++) {
		struct item *it = &j->items[j->nitems];
		memset(it, 0, sizeof *it);
		if (!names[i] || (leaving && leaving[i]) || !zkl__child_parse(names[i], &it->ch))
			continue;
		it->name = names[i]; /* taken */
		names[i] = NULL;
		it->ch.name = it->name;
		it->part = part;
		j->nitems++;
	}
	/* zkl__children_sort moves the parsed children; keep each name with its item. */
	size_t n = j->nitems - start;
	zkl_child *sorted = malloc((n ? n : 1) * sizeof *sorted);
	struct item *copy = malloc((n ? n : 1) * sizeof *copy);
	if (!sorted || !copy) {
		free(sorted);
		free(copy);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < n; k++) {
		sorted[k] = j->items[start + k].ch;
		sorted[k].index = k;
		copy[k] = j->items[start + k];
	}
	zkl__children_sort(sorted, n);
	for (size_t k = 0; k < n; k++)
		j->items[start + k] = copy[sorted[k].index];
	free(sorted);
	free(copy);
	return 0;
}

static void job_clear(zkl_client *c, struct job *j)
{
	for (int i = 0; i < j->nkids; i++)
		free(j->kids[i]);
	free(j->kids);
	free(j->kids_leaving);
	for (size_t i = 0; i < j->nitems; i++) {
		if (j->items[i].op)
			zkl__op_release(c, j->items[i].op);
		free(j->items[i].name);
	}
	free(j->items);
	free(j->path);
	memset(j, 0, sizeof *j);
}

/* Fails for an answer that is neither data nor "not there". */
static int answer_check(struct job *j, struct rq *r, const char *what)
{
	if (r->zrc == ZOK || r->zrc == ZNONODE)
		return 0;
	if (r->zrc == ZNOAUTH && j->tolerant) {
		j->skipped = true;
		return 0;
	}
	return zkl__fail_zk(r->zrc, what, r->path);
}

static zkl_layout layout_of(const struct item *it)
{
	if (it->part != PART_QUEUE)
		return ZKL_LAYOUT_SEMAPHORE;
	switch (it->ch.kind) {
	case ZKL_KIND_READ: return ZKL_LAYOUT_READ;
	case ZKL_KIND_WRITE: return ZKL_LAYOUT_WRITE;
	case ZKL_KIND_LEASE: return ZKL_LAYOUT_SEMAPHORE;
	case ZKL_KIND_LATCH: return ZKL_LAYOUT_LATCH;
	case ZKL_KIND_KLOCK: return ZKL_LAYOUT_KAZOO_LOCK;
	case ZKL_KIND_KRLOCK: return ZKL_LAYOUT_KAZOO_READ;
	default: return ZKL_LAYOUT_MUTEX;
	}
}

static void set_role(struct item *it, zkl_role role)
{
	it->role = role;
	it->holds = role == ZKL_ROLE_HOLDER || role == ZKL_ROLE_LEASE || role == ZKL_ROLE_LEADER;
}

/* The path's own queue, in order (nodes that vanished are out). */
static void classify_queue(struct item *q, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		enum zkl_kind k = q[i].ch.kind;
		if (k == ZKL_KIND_LEASE) {
			set_role(&q[i], ZKL_ROLE_LEASE);
		} else if (zkl__kind_is_writer(k)) {
			set_role(&q[i], i > 0 ? ZKL_ROLE_WAITING
			                      : k == ZKL_KIND_LATCH ? ZKL_ROLE_LEADER : ZKL_ROLE_HOLDER);
		} else {
			/* A reader holds with no writer ahead, or behind the one writer that
			 * holds and left it at its own number when it downgraded. */
			bool holds = true;
			for (size_t w = 0; w < i && holds; w++) {
				if (!zkl__kind_is_writer(q[w].ch.kind))
					continue;
				holds = w == 0 && zkl__kind_may_downgrade(q[0].ch.kind) &&
				        q[0].ch.seq == q[i].ch.seq;
			}
			set_role(&q[i], holds ? ZKL_ROLE_HOLDER : ZKL_ROLE_WAITING);
		}
	}
}

/* A semaphore's leases and its gate, each in order (nodes that vanished are out). */
static void classify_semaphore(struct item *leases, size_t nl, struct item *gate, size_t ng,
                               int limit)
{
	for (size_t i = 0; i < ng; i++)
		set_role(&gate[i], i == 0 ? ZKL_ROLE_GATE : ZKL_ROLE_WAITING);
	for (size_t i = 0; i < nl; i++)
		set_role(&leases[i], ZKL_ROLE_LEASE);
	if (nl == 0 || ng == 0)
		return;
	const struct Stat *l = &leases[nl - 1].op->stat, *g = &gate[0].op->stat;
	if (g->ephemeralOwner != 0 && g->ephemeralOwner == l->ephemeralOwner &&
	    g->czxid < l->czxid && (limit <= 0 || nl > (size_t)limit))
		set_role(&leases[nl - 1], ZKL_ROLE_WAITING);
}

/* Drops the items whose node was gone when read, then gives every item its role. */
static void job_classify(zkl_client *c, struct job *j)
{
	size_t k = 0;
	for (size_t i = 0; i < j->nitems; i++) {
		if (j->items[i].op) {
			j->items[k++] = j->items[i];
		} else {
			free(j->items[i].name);
		}
	}
	(void)c;
	j->nitems = k;
	if (k == 0)
		return; /* nothing queued (and items may be NULL: no offsets from it) */
	size_t nq = 0, nl = 0, ng = 0;
	for (size_t i = 0; i < j->nitems; i++) {
		nq += j->items[i].part == PART_QUEUE;
		nl += j->items[i].part == PART_LEASES;
		ng += j->items[i].part == PART_GATE;
	}
	/* Items are in part order: the queue, the leases, the gate. */
	classify_queue(j->items, nq);
	classify_semaphore(j->items + nq, nl, j->items + nq + nl, ng, j->limit);
	for (size_t i = 0; i < j->nitems; i++)
		j->items[i].layout = layout_of(&j->items[i]);
}

/* Runs both rounds for every job. Returns 0 or a ZKL_E* code. */
static int jobs_run(struct call *x, struct job *jobs, size_t njobs)
{
	zkl_client *c = x->c;
	int rc = 0;
	/* Round one: the path's data, and the children of the path, its leases and its
	 * gate; for a folder the walk has listed, only what its children say it may need. */
	size_t n1 = 0;
	for (size_t i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		bool parts = !j->listed;
		for (int k = 0; k < j->nkids && !parts; k++)
			parts = strcmp(j->kids[k], "leases") == 0 || strcmp(j->kids[k], "locks") == 0;
		for (int k = 0; k < 4; k++)
			j->r1[k] = SIZE_MAX;
		if (parts) {
			j->r1[0] = n1++;
			if (!j->listed)
				j->r1[1] = n1++;
			j->r1[2] = n1++;
			j->r1[3] = n1++;
		}
	}
	struct rq *r = n1 ? calloc(n1, sizeof *r) : NULL;
	if (n1 && !r)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	static const char *const leaf[4] = {NULL, NULL, "leases", "locks"};
	for (size_t i = 0; i < njobs && rc == 0; i++) {
		for (int k = 0; k < 4 && rc == 0; k++) {
			size_t at = jobs[i].r1[k];
			if (at != SIZE_MAX &&
			    !rq_set(&r[at], k == 0 ? ZKL_OP_GET : ZKL_OP_CHILDREN, jobs[i].path, leaf[k]))
				rc = zkl__fail(ZKL_ENOMEM, "out of memory");
		}
	}
	if (rc == 0)
		rc = rq_run(x, r, n1);
	/* A request not sent stands for "nothing there" (a listed folder exists). */
	struct rq none = {.zrc = ZNONODE};
	for (size_t i = 0; i < njobs && rc == 0; i++) {
		struct job *j = &jobs[i];
		struct rq *a[4];
		for (int k = 0; k < 4; k++)
			a[k] = j->r1[k] != SIZE_MAX ? &r[j->r1[k]] : &none;
		struct rq *get = a[0], *kids = a[1], *leases = a[2], *locks = a[3];
		if ((rc = answer_check(j, get, "cannot read")) != 0 ||
		    (rc = answer_check(j, kids, "cannot list")) != 0 ||
		    (rc = answer_check(j, leases, "cannot list")) != 0 ||
		    (rc = answer_check(j, locks, "cannot list")) != 0)
			break;
		if (j->skipped)
			continue;
		j->exists = j->listed || get->zrc == ZOK;
		if (get->zrc == ZOK)
			j->limit = zkl__count_parse(get->op->value, get->op->value_len);
		bool semaphore = leases->zrc == ZOK || (j->limit > 0 && locks->zrc == ZOK);
		j->semaphore = semaphore;
		if (j->listed)
			rc = take_children(j, j->kids, j->kids_leaving, j->nkids, PART_QUEUE);
		else if (kids->zrc == ZOK)
			rc = take_children(j, kids->op->names, kids->op->leaving, kids->op->count,
			                   PART_QUEUE);
		if (rc != 0)
			break;
		if (semaphore && leases->zrc == ZOK &&
		    (rc = take_children(j, leases->op->names, leases->op->leaving,
		                        leases->op->count, PART_LEASES)) != 0)
			break;
		if (semaphore && locks->zrc == ZOK &&
		    (rc = take_children(j, locks->op->names, locks->op->leaving, locks->op->count,
		                        PART_GATE)) != 0)
			break;
	}
	rq_free(c, r, n1);
	if (rc != 0)
		return rc;

	/* Round two: every node's data and stat. */
	size_t n2 = 0;
	for (size_t i = 0; i < njobs; i++) {
		jobs[i].first_rq = n2;
		n2 += jobs[i].nitems;
	}
	r = n2 ? calloc(n2, sizeof *r) : NULL;
	if (n2 && !r)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	for (size_t i = 0; i < njobs && rc == 0; i++) {
		struct job *j = &jobs[i];
		for (size_t k = 0; k < j->nitems && rc == 0; k++) {
			struct item *it = &j->items[k];
			const char *folder = it->part == PART_LEASES ? "leases"
			                     : it->part == PART_GATE ? "locks" : NULL;
			char *parent = folder ? zkl__path_join(j->path, folder) : NULL;
			if ((folder && !parent) ||
			    !rq_set(&r[j->first_rq + k], ZKL_OP_GET, parent ? parent : j->path, it->name))
				rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			free(parent);
		}
	}
	if (rc == 0)
		rc = rq_run(x, r, n2);
	for (size_t i = 0; i < njobs && rc == 0; i++) {
		struct job *j = &jobs[i];
		for (size_t k = 0; k < j->nitems; k++) {
			struct rq *g = &r[j->first_rq + k];
			if (g->zrc == ZOK) {
				j->items[k].op = g->op;
				g->op = NULL;
			} else if (g->zrc != ZNONODE) {
				rc = zkl__fail_zk(g->zrc, "cannot read", g->path);
				break;
			}
		}
		if (rc == 0)
			job_classify(c, j);
	}
	rq_free(c, r, n2);
	return rc;
}

/* ---- the result ---- */

void zkl_inspection_free(zkl_inspection *in)
{
	if (!in)
		return;
	for (size_t i = 0; i < in->nnodes; i++) {
		free((char *)in->nodes[i].path);
		free((char *)in->nodes[i].data);
	}
	for (size_t i = 0; i < in->nlocks; i++)
		free((char *)in->locks[i].path);
	free(in->nodes);
	free(in->locks);
	free(in);
}

/* Builds the result from jobs; keep_empty keeps the locks without nodes. */
static int build(zkl_client *c, struct job *jobs, size_t njobs, bool keep_empty,
                 zkl_inspection **out)
{
	(void)c;
	zkl_inspection *in = calloc(1, sizeof *in);
	size_t nnodes = 0;
	for (size_t i = 0; i < njobs; i++)
		nnodes += jobs[i].nitems;
	if (!in || (njobs && !(in->locks = calloc(njobs, sizeof *in->locks))) ||
	    (nnodes && !(in->nodes = calloc(nnodes, sizeof *in->nodes)))) {
		zkl_inspection_free(in);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		if (j->skipped) {
			in->skipped++;
			continue;
		}
		if (j->merged || (j->nitems == 0 && !keep_empty))
			continue;
		zkl_lock_info *L = &in->locks[in->nlocks];
		L->path = strdup(j->path);
		if (!L->path)
			goto nomem;
		in->nlocks++;
		L->exists = j->exists;
		L->limit = j->limit;
		L->first = in->nnodes;
		for (size_t k = 0; k < j->nitems; k++) {
			struct item *it = &j->items[k];
			struct zkl_op *op = it->op;
			zkl_node_info *n = &in->nodes[in->nnodes];
			const char *folder = it->part == PART_LEASES ? "leases"
			                     : it->part == PART_GATE ? "locks" : NULL;
			char *parent = folder ? zkl__path_join(j->path, folder) : NULL;
			char *path = (!folder || parent) ? zkl__path_join(parent ? parent : j->path,
			                                                 it->name) : NULL;
			free(parent);
			char *data = malloc((size_t)op->value_len + 1);
			if (!path || !data) {
				free(path);
				free(data);
				goto nomem;
			}
			memcpy(data, op->value ? op->value : "", (size_t)op->value_len);
			data[op->value_len] = 0;
			in->nnodes++;
			n->lock_path = L->path;
			n->path = path;
			n->name = strrchr(path, '/') + 1;
			n->layout = it->layout;
			n->role = it->role;
			n->holds = it->holds;
			n->data = data;
			n->data_len = (size_t)op->value_len;
			n->sequence = it->ch.seq;
			n->token = op->stat.czxid;
			n->ctime = op->stat.ctime;
			n->session = op->stat.ephemeralOwner;
			L->layouts |= 1u << it->layout;
			if (it->holds)
				L->holders++;
			else
				L->waiting++;
			L->count++;
		}
	}
	/* Positions: the place of each node in its own queue (the path's, the leases, the
	 * gate), which is where its folder changes. */
	for (size_t i = 0; i < in->nnodes; i++) {
		zkl_node_info *n = &in->nodes[i];
		const zkl_node_info *prev = i > 0 ? &in->nodes[i - 1] : NULL;
		bool same = prev && prev->lock_path == n->lock_path &&
		            n->name - n->path == prev->name - prev->path &&
		            strncmp(n->path, prev->path, (size_t)(n->name - n->path)) == 0;
		n->position = same ? prev->position + 1 : 0;
	}
	*out = in;
	return 0;
nomem:
	zkl_inspection_free(in);
	return zkl__fail(ZKL_ENOMEM, "out of memory");
}

static int check_args(zkl_client *c, int timeout_ms, zkl_inspection **out)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	return zkl__check_timeout(timeout_ms);
}

int zkl_inspect(zkl_client *c, const char *path, int timeout_ms, zkl_inspection **out)
{
	int rc = check_args(c, timeout_ms, out);
	if (rc == 0)
		rc = zkl__path_check(path, "path");
	if (rc != 0)
		return rc;
	struct call x;
	if ((rc = call_init(&x, c, timeout_ms)) != 0)
		return rc;
	struct job j = {.path = strdup(path)};
	if (!j.path)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	rc = jobs_run(&x, &j, 1);
	if (rc == 0)
		rc = build(c, &j, 1, true, out);
	job_clear(c, &j);
	return rc;
}

/* ---- the walk ---- */

struct strs {
	char **v;
	size_t n, cap;
};

static bool strs_add(struct strs *s, char *p)
{
	if (!p)
		return false;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		char **v = realloc(s->v, cap * sizeof *v);
		if (!v) {
			free(p);
			return false;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = p;
	return true;
}

static void strs_free(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

struct jobs {
	struct job *v;
	size_t n, cap;
};

/* Adds the lock folder dir, with its children (taken from op). */
static int jobs_add(struct jobs *js, const char *dir, struct zkl_op *op)
{
	if (js->n == js->cap) {
		size_t cap = js->cap ? js->cap * 2 : 16;
		struct job *v = realloc(js->v, cap * sizeof *v);
		if (!v)
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		js->v = v;
		js->cap = cap;
	}
	struct job *j = &js->v[js->n];
	memset(j, 0, sizeof *j);
	if (!(j->path = strdup(dir)))
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	j->tolerant = true;
	j->listed = true;
	j->kids = op->names;
	j->kids_leaving = op->leaving;
	j->nkids = op->count;
	op->names = NULL;
	op->leaving = NULL;
	op->count = 0;
	js->n++;
	return 0;
}

static int job_cmp(const void *a, const void *b)
{
	return strcmp(((const struct job *)a)->path, ((const struct job *)b)->path);
}

/* Whether name ends in suffix (and is more than it). */
static bool ends_in(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return n > k && strcmp(name + n - k, suffix) == 0;
}

/* Lists the tree under prefix, level by level, and collects the folders that are locks,
 * with their children, and (if suffix is not NULL) into found the paths of the nodes
 * whose names end in suffix. Returns 0 or a ZKL_E* code. */
static int walk(struct call *x, const char *prefix, struct jobs *locks, size_t *skipped,
                const char *suffix, struct strs *found)
{
	struct strs level = {0};
	int rc = strs_add(&level, strdup(prefix)) ? 0 : zkl__fail(ZKL_ENOMEM, "out of memory");
	while (rc == 0 && level.n > 0) {
		struct rq *r = calloc(level.n, sizeof *r);
		if (!r) {
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		for (size_t i = 0; i < level.n; i++) {
			r[i].kind = ZKL_OP_CHILDREN;
			r[i].zrc = RQ_PENDING;
			r[i].path = level.v[i]; /* taken: rq_free() frees it */
			level.v[i] = NULL;
		}
		size_t n = level.n;
		level.n = 0;
		rc = rq_run(x, r, n);
		for (size_t i = 0; i < n && rc == 0; i++) {
			const char *dir = r[i].path;
			if (r[i].zrc == ZNONODE)
				continue;
			if (r[i].zrc == ZNOAUTH && strcmp(dir, prefix) != 0) {
				(*skipped)++;
				continue;
			}
			if (r[i].zrc != ZOK) {
				rc = zkl__fail_zk(r[i].zrc, "cannot list", dir);
				break;
			}
			struct zkl_op *op = r[i].op;
			/* A semaphore has its leases, or (for a moment, or with none taken yet)
			 * only its gate: a folder with a "locks" child may be one, and its data
			 * says (jobs_run reads it by the rule zkl_inspect() follows). Its gate is
			 * walked too, as the folder it is if the path is no semaphore. */
			bool nodes = false, semaphore = false, gate = false;
			for (int k = 0; k < op->count; k++) {
				zkl_child ch;
				nodes |= zkl__child_parse(op->names[k], &ch);
				semaphore |= strcmp(op->names[k], "leases") == 0;
				gate |= strcmp(op->names[k], "locks") == 0;
			}
			for (int k = 0; k < op->count && rc == 0; k++) {
				const char *name = op->names[k];
				zkl_child ch;
				if (zkl__child_parse(name, &ch))
					continue; /* a contender, not a folder */
				if (semaphore && (strcmp(name, "leases") == 0 || strcmp(name, "locks") == 0))
					continue; /* the semaphore's parts */
				if (strcmp(dir, "/") == 0 && strcmp(name, "zookeeper") == 0)
					continue;
				if (suffix && ends_in(name, suffix) &&
				    !strs_add(found, zkl__path_join(dir, name))) {
					rc = zkl__fail(ZKL_ENOMEM, "out of memory");
					break;
				}
				if (!strs_add(&level, zkl__path_join(dir, name)))
					rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			}
			if (rc == 0 && (nodes || semaphore || gate))
				rc = jobs_add(locks, dir, op);
		}
		rq_free(x->c, r, n);
	}
	strs_free(&level);
	return rc;
}

/* Marks the gate of each semaphore among jobs (sorted by path) that the walk took for a
 * folder of its own: it is the semaphore's, and shown with it. Returns 0 or ZKL_ENOMEM. */
static int gates_merge(struct job *jobs, size_t njobs)
{
	for (size_t i = 0; i < njobs; i++) {
		if (!jobs[i].semaphore)
			continue;
		struct job key = {.path = zkl__path_join(jobs[i].path, "locks")};
		if (!key.path)
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		struct job *gate = bsearch(&key, jobs, njobs, sizeof *jobs, job_cmp);
		free(key.path);
		if (gate)
			gate->merged = true;
	}
	return 0;
}

/* A prefix to walk: "/", or a valid path. */
static int prefix_check(const char *prefix)
{
	return prefix && strcmp(prefix, "/") == 0 ? 0 : zkl__path_check(prefix, "prefix");
}

int zkl_inspect_prefix(zkl_client *c, const char *prefix, int timeout_ms,
                       zkl_inspection **out)
{
	int rc = check_args(c, timeout_ms, out);
	if (rc == 0)
		rc = prefix_check(prefix);
	if (rc != 0)
		return rc;
	struct call x;
	if ((rc = call_init(&x, c, timeout_ms)) != 0)
		return rc;
	struct jobs locks = {0};
	size_t skipped = 0;
	rc = walk(&x, prefix, &locks, &skipped, NULL, NULL);
	if (rc == 0 && locks.n > 0) {
		qsort(locks.v, locks.n, sizeof *locks.v, job_cmp);
		rc = jobs_run(&x, locks.v, locks.n);
	}
	if (rc == 0)
		rc = gates_merge(locks.v, locks.n);
	if (rc == 0 && (rc = build(c, locks.v, locks.n, false, out)) == 0)
		(*out)->skipped += skipped;
	for (size_t i = 0; i < locks.n; i++)
		job_clear(c, &locks.v[i]);
	free(locks.v);
	return rc;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int zkl_record_find(zkl_client *c, const char *prefix, const char *suffix, int timeout_ms,
                    char ***paths, size_t *count)
{
	zkl__clear_error();
	if (paths)
		*paths = NULL;
	if (count)
		*count = 0;
	if (!c || !paths || !count || !suffix || !*suffix || strchr(suffix, '/'))
		return zkl__fail(ZKL_EINVAL, "%s", !c ? "client is NULL"
		                 : !paths || !count ? "paths or count is NULL"
		                 : "suffix is NULL, empty or has a '/'");
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	if (zkl__is_loop_thread(c))
		return zkl__fail(ZKL_EDEADLK, "records are found on a thread that runs the "
		                "client's loop, which never waits for the server");
	if ((rc = prefix_check(prefix)) != 0)
		return rc;
	struct call x;
	if ((rc = call_init(&x, c, timeout_ms)) != 0)
		return rc;
	struct jobs locks = {0};
	struct strs found = {0};
	size_t skipped = 0;
	rc = walk(&x, prefix, &locks, &skipped, suffix, &found);
	for (size_t i = 0; i < locks.n; i++)
		job_clear(c, &locks.v[i]);
	free(locks.v);
	if (rc == 0) {
		/* One allocation: the pointers, then the strings. */
		size_t size = (found.n + 1) * sizeof(char *);
		for (size_t i = 0; i < found.n; i++)
			size += strlen(found.v[i]) + 1;
		char **v = malloc(size);
		if (!v) {
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
		} else {
			if (found.n > 1) /* found.v is NULL when nothing was found */
				qsort(found.v, found.n, sizeof *found.v, str_cmp);
			char *at = (char *)(v + found.n + 1);
			for (size_t i = 0; i < found.n; i++) {
				size_t n = strlen(found.v[i]) + 1;
				memcpy(at, found.v[i], n);
				v[i] = at;
				at += n;
			}
			v[found.n] = NULL;
			*paths = v;
			*count = found.n;
		}
	}
	strs_free(&found);
	return rc;
}

/* ---- accessors ---- */

size_t zkl_inspection_locks(const zkl_inspection *in)
{
	return in ? in->nlocks : 0;
}

const zkl_lock_info *zkl_inspection_lock(const zkl_inspection *in, size_t i)
{
	return in && i < in->nlocks ? &in->locks[i] : NULL;
}

size_t zkl_inspection_nodes(const zkl_inspection *in)
{
	return in ? in->nnodes : 0;
}

const zkl_node_info *zkl_inspection_node(const zkl_inspection *in, size_t i)
{
	return in && i < in->nnodes ? &in->nodes[i] : NULL;
}

size_t zkl_inspection_skipped(const zkl_inspection *in)
{
	return in ? in->skipped : 0;
}

const char *zkl_role_name(zkl_role role)
{
	switch (role) {
	case ZKL_ROLE_HOLDER: return "holder";
	case ZKL_ROLE_WAITING: return "waiting";
	case ZKL_ROLE_LEASE: return "lease";
	case ZKL_ROLE_GATE: return "gate";
	case ZKL_ROLE_LEADER: return "leader";
	}
	return "unknown";
}

const char *zkl_layout_name(zkl_layout layout)
{
	switch (layout) {
	case ZKL_LAYOUT_MUTEX: return "mutex";
	case ZKL_LAYOUT_READ: return "read";
	case ZKL_LAYOUT_WRITE: return "write";
	case ZKL_LAYOUT_SEMAPHORE: return "semaphore";
	case ZKL_LAYOUT_LATCH: return "latch";
	case ZKL_LAYOUT_KAZOO_LOCK: return "kazoo-lock";
	case ZKL_LAYOUT_KAZOO_READ: return "kazoo-read";
	}
	return "unknown";
}

/* ---- a semaphore's participants ---- */

int zkl__inspect_leases(zkl_client *c, const char *path, int limit, zkl_participant **out,
                       size_t *count)
{
	*out = NULL;
	*count = 0;
	struct call x;
	int rc = call_init(&x, c, ZKL_WAIT_FOREVER);
	if (rc != 0)
		return rc;
	struct job j = {.path = strdup(path)};
	if (!j.path)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	rc = jobs_run(&x, &j, 1);
	if (rc == 0 && j.limit <= 0 && limit > 0) {
		/* Nothing recorded (a shared count, or Curator's): the handle's limit. */
		j.limit = limit;
		job_classify(c, &j);
	}
	size_t n = 0;
	for (size_t i = 0; rc == 0 && i < j.nitems; i++)
		n += j.items[i].part == PART_LEASES;
	zkl_participant *p = n ? calloc(n, sizeof *p) : NULL;
	if (rc == 0 && n && !p)
		rc = zkl__fail(ZKL_ENOMEM, "out of memory");
	size_t k = 0;
	for (size_t i = 0; rc == 0 && i < j.nitems; i++) {
		struct item *it = &j.items[i];
		if (it->part != PART_LEASES)
			continue;
		struct zkl_op *op = it->op;
		char *leases = zkl__path_join(path, "leases");
		p[k].path = leases ? zkl__path_join(leases, it->name) : NULL;
		free(leases);
		p[k].data = malloc((size_t)op->value_len + 1);
		k++;
		if (!p[k - 1].path || !p[k - 1].data) {
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		memcpy(p[k - 1].data, op->value ? op->value : "", (size_t)op->value_len);
		p[k - 1].data[op->value_len] = 0;
		p[k - 1].data_len = op->value_len;
		p[k - 1].sequence = it->ch.seq;
		p[k - 1].czxid = op->stat.czxid;
		p[k - 1].ctime = op->stat.ctime;
		p[k - 1].holder = it->holds;
	}
	job_clear(c, &j);
	if (rc != 0) {
		zkl_participants_free(p, k);
		return rc;
	}
	*out = p;
	*count = n;
	return 0;
}
