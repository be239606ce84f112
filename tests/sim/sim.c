/* The deterministic simulation (tests/sim/README.md).
 *
 * One thread, simulated time, everything drawn from one seed. Real zkl_clients (external
 * loop) with real recipes run on a model of ZooKeeper placed under the request layer's
 * table (src/client/shared/zk.h); the scheduler decides, step by step, which message arrives,
 * which completion or watch event is delivered, which client's loop runs and which
 * contender acts; faults (delays, lost answers, disconnects, partitions, pauses, crashes,
 * expiry, a peer's deletes, stray children) come from the same seed. After every step the
 * invariants are checked against the model's ground truth. A run that breaks one prints
 * the seed and the command that replays it. With --ensemble, ensemble.c puts three
 * servers (a leader and followers) under the same model; sim.h holds the world's types.
 *
 * Time: the server's clock is W.now. Each client's clock (what zkl__now_ms() returns while
 * the simulation runs code of that client) is W.now minus the time its clock stood still
 * (a suspended machine). A timed wait in the library (zkl__cond_wait_until: opening,
 * closing, a release that must be confirmed) runs the rest of the world, without that
 * client's loop, until something reaches that client or its deadline passes: what a real
 * thread blocked there would see.
 *
 * Each run is a child process (fork), so that a run that fails cannot leave anything
 * behind for the next and can be replayed alone. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

#include "clock.h"
#include "internal.h"
#include "multilock_internal.h"
#include "mutex_internal.h"

#include "sim.h"

struct world W;

/* ------------------------------------------------------------------------------------ */
/* Randomness: every draw of a run comes from W.rng (the seed). */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}


static const char *const op_names[] = { "create", "delete", "children", "get", "exists", "set",
                                        "sync", "check", "multi" };

static const char *const kind_names[] = { "mutex", "read", "write", "semaphore",
                                          "semaphore-mutex", "leader", "multi-lock" };

const char *kind_name(enum kind k)
{
	return kind_names[k];
}

static const char *const fault_names[] = { "lose-answer", "drop", "expire", "freeze", "suspend",
                                           "crash", "peer-delete", "stray", "cut-c>s",
                                           "cut-s>c", "lose-create+cut-s>c",
                                           "peer-write", "revoke", "count", "server-cut",
                                           "server-down" };


void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void trace(const char *fmt, ...)
{
	if (!W.o.trace)
		return;
	va_list ap;
	va_start(ap, fmt);
	printf("[%7" PRId64 "] ", W.now);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static void print_schedule(FILE *f);
static bool quiet_child; /* stdout goes nowhere: the violation's line goes to stderr */

void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void violation(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	FILE *out = quiet_child ? stderr : stdout;
	fprintf(out, "VIOLATION at t=%" PRId64 " ms, step %" PRIu64 ": ", W.now, W.steps);
	vfprintf(out, fmt, ap);
	fprintf(out, "\n");
	va_end(ap);
	print_schedule(stdout);
	fflush(stdout);
	_exit(1);
}

uint64_t rnd(uint64_t n)
{
	return n ? rng_next(&W.rng) % n : 0;
}

int64_t between(int64_t lo, int64_t hi)
{
	return lo + (int64_t)rnd((uint64_t)(hi - lo + 1));
}

/* The library's node names carry random uuids: draw them from a stream of their own,
 * started afresh by each run (a worker runs many), so that a replay prints the same
 * trace. */
static uint64_t uuid_rng;

ssize_t getrandom(void *buf, size_t n, unsigned int flags)
{
	(void)flags;
	for (size_t i = 0; i < n; i++)
		((unsigned char *)buf)[i] = (unsigned char)rng_next(&uuid_rng);
	return (ssize_t)n;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		abort();
	return d;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		abort();
	return p;
}

/* ------------------------------------------------------------------------------------ */
/* Clocks */

int64_t clock_of(int k)
{
	struct client *cl = &W.cl[k];
	if (cl->life == L_SUSPENDED)
		return cl->susp_from - cl->lag;
	return W.now - cl->lag;
}

/* ------------------------------------------------------------------------------------ */
/* The tree */

static void next_zxid(void)
{
	if (!W.in_multi)
		W.zxid++;
}

static struct node *find(const char *path)
{
	for (struct node *n = W.nodes; n; n = n->next)
		if (strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

static bool is_child(const char *parent, const char *path)
{
	size_t pl = strcmp(parent, "/") == 0 ? 0 : strlen(parent);
	return strncmp(path, parent, pl) == 0 && path[pl] == '/' && path[pl + 1] &&
	       !strchr(path + pl + 1, '/');
}

static struct node *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == path)
		return find("/");
	char buf[1024];
	size_t n = (size_t)(slash - path);
	if (n >= sizeof buf)
		return NULL;
	memcpy(buf, path, n);
	buf[n] = 0;
	return find(buf);
}

static int count_children(const char *path)
{
	int k = 0;
	for (struct node *n = W.nodes; n; n = n->next)
		k += is_child(path, n->path);
	return k;
}

static void deliver_later(struct sess *s, struct msg *m);

/* Fires the watches of kind on path. Those of `self` are appended to *own (they reach it
 * before the answer of the request that fired them). */
static void fire(const char *path, enum wkind kind, int type, struct sess *self, struct msg **own)
{
	for (struct watch **pp = &W.watches; *pp;) {
		struct watch *w = *pp;
		if (w->kind != kind || strcmp(w->path, path) != 0) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		struct msg *m = xcalloc(1, sizeof *m);
		m->kind = M_WATCH;
		m->wid = w->id;
		m->type = type;
		m->state = ZOO_CONNECTED_STATE;
		m->path = w->path;
		if (w->s == self && own) {
			m->next = *own;
			*own = m;
		} else {
			deliver_later(w->s, m);
		}
		free(w);
	}
}

static int tree_create(const char *path, const char *data, int len, int mode, int64_t owner,
                       char **created, struct Stat *st, struct sess *self, struct msg **own)
{
	if (path[0] != '/' || strcmp(path, "/") == 0)
		return ZBADARGUMENTS;
	struct node *p = parent_of(path);
	if (!p)
		return ZNONODE;
	if (p->st.ephemeralOwner)
		return ZNOCHILDRENFOREPHEMERALS;
	char name[1100];
	if (mode & ZOO_SEQUENCE)
		snprintf(name, sizeof name, "%s%010" PRId32, path, p->st.cversion);
	else
		snprintf(name, sizeof name, "%s", path);
	if (find(name))
		return ZNODEEXISTS;
	struct node *n = xcalloc(1, sizeof *n);
	n->path = xstrdup(name);
	if (data && len > 0) {
		n->data = malloc((size_t)len);
		memcpy(n->data, data, (size_t)len);
		n->len = len;
	}
	n->container = mode == ZOO_CONTAINER;
	next_zxid();
	n->st.czxid = n->st.mzxid = n->st.pzxid = W.zxid;
	n->st.ctime = n->st.mtime = W.now;
	n->st.ephemeralOwner = (mode & ZOO_EPHEMERAL) ? owner : 0;
	n->st.dataLength = n->len;
	n->next = W.nodes;
	W.nodes = n;
	p->st.cversion = (int32_t)((uint32_t)p->st.cversion + 1);
	p->st.pzxid = W.zxid;
	if (created)
		*created = xstrdup(name);
	if (st)
		*st = n->st;
	fire(name, W_DATA, ZOO_CREATED_EVENT, self, own);
	fire(p->path, W_CHILD, ZOO_CHILD_EVENT, self, own);
	return ZOK;
}

static int tree_delete(const char *path, int version, struct sess *self, struct msg **own)
{
	struct node *n = find(path);
	if (!n)
		return ZNONODE;
	if (strcmp(path, "/") == 0)
		return ZBADARGUMENTS;
	if (version >= 0 && version != n->st.version)
		return ZBADVERSION;
	if (count_children(path) > 0)
		return ZNOTEMPTY;
	struct node *p = parent_of(path);
	for (struct node **pp = &W.nodes; *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	}
	next_zxid();
	if (p) {
		p->st.cversion = (int32_t)((uint32_t)p->st.cversion + 1);
		p->st.pzxid = W.zxid;
	}
	fire(path, W_DATA, ZOO_DELETED_EVENT, self, own);
	fire(path, W_CHILD, ZOO_DELETED_EVENT, self, own);
	if (p)
		fire(p->path, W_CHILD, ZOO_CHILD_EVENT, self, own);
	free(n->path);
	free(n->data);
	free(n);
	return ZOK;
}

static int tree_set(const char *path, const char *data, int len, int version, struct Stat *st,
                    struct sess *self, struct msg **own)
{
	struct node *n = find(path);
	if (!n)
		return ZNONODE;
	if (version >= 0 && version != n->st.version)
		return ZBADVERSION;
	free(n->data);
	n->data = NULL;
	n->len = 0;
	if (data && len > 0) {
		n->data = malloc((size_t)len);
		memcpy(n->data, data, (size_t)len);
		n->len = len;
	}
	next_zxid();
	n->st.mzxid = W.zxid;
	n->st.mtime = W.now;
	n->st.version++;
	n->st.dataLength = n->len;
	if (st)
		*st = n->st;
	fire(path, W_DATA, ZOO_CHANGED_EVENT, self, own);
	return ZOK;
}

static int tree_check(const char *path, int version)
{
	struct node *n = find(path);
	if (!n)
		return ZNONODE;
	if (version >= 0 && version != n->st.version)
		return ZBADVERSION;
	return ZOK;
}

static int sub_apply(struct sub *o, int64_t owner, struct sess *self, struct msg **own)
{
	switch (o->type) {
	case ZOO_CREATE_OP:
		return tree_create(o->path, o->data, o->len, o->mode, owner, &o->created, &o->st, self,
		                   own);
	case ZOO_DELETE_OP:
		return tree_delete(o->path, o->version, self, own);
	case ZOO_SETDATA_OP:
		return tree_set(o->path, o->data, o->len, o->version, &o->st, self, own);
	case ZOO_CHECK_OP:
		return tree_check(o->path, o->version);
	}
	return ZUNIMPLEMENTED;
}

static void nodes_free(struct node *list)
{
	while (list) {
		struct node *n = list;
		list = n->next;
		free(n->path);
		free(n->data);
		free(n);
	}
}

static struct node *nodes_copy(const struct node *list)
{
	struct node *head = NULL, **tail = &head;
	for (const struct node *n = list; n; n = n->next) {
		struct node *c = xcalloc(1, sizeof *c);
		*c = (struct node){ .path = xstrdup(n->path), .len = n->len, .st = n->st,
		                    .container = n->container };
		if (n->data) {
			c->data = malloc((size_t)n->len + 1);
			memcpy(c->data, n->data, (size_t)n->len);
		}
		*tail = c;
		tail = &c->next;
	}
	return head;
}

/* --guarded: a multi that commits a write of /guarded is a hold's guarded write, whose
 * data names the hold's node. The invariant, checked here against the tree itself and
 * not through the multi's own check: the node exists as the write commits, and it is the
 * writing session's. */
/* Records never go backward: on a path held by one holder at a time, a guarded write
 * commits only for a hold whose token is at least that of the last one committed there
 * (a holder that lost its lock, woken late, never writes over its successor's). Read
 * holds and a semaphore's leases are held several at once (a count fault may raise a
 * limit of one): not checked. */
static void guarded_order(const char *node, int64_t token)
{
	for (int p = 0; p < W.npaths; p++) {
		struct path_info *pi = &W.paths[p];
		size_t k = strlen(pi->path);
		if (strncmp(node, pi->path, k) != 0 || node[k] != '/')
			continue;
		if (strstr(node, "__READ__") || pi->kind == K_SEM)
			return;
		if (token < pi->guarded)
			violation("a guarded write for %s (token %" PRId64 ") committed after one of a "
			          "later holder of %s (token %" PRId64 "): the record went backward",
			          node, token, pi->path, pi->guarded);
		pi->guarded = token;
		return;
	}
}

static void guarded_commit(const struct msg *m, const struct sess *s)
{
	for (int i = 0; i < m->nsubs; i++) {
		const struct sub *o = &m->subs[i];
		if (o->type != ZOO_SETDATA_OP || strcmp(o->path, "/guarded") != 0)
			continue;
		char node[ZKL_NODE_MAX];
		snprintf(node, sizeof node, "%.*s", o->len > 0 ? o->len : 0, o->data ? o->data : "");
		const struct node *n = find(node);
		if (!n)
			violation("a guarded write of session %" PRIx64 " committed while its hold's "
			          "node %s was gone", (uint64_t)s->id, node);
		if (n->st.ephemeralOwner != s->id)
			violation("a guarded write of session %" PRIx64 " committed for node %s, which "
			          "is session %" PRIx64 "'s", (uint64_t)s->id, node,
			          (uint64_t)n->st.ephemeralOwner);
		guarded_order(node, n->st.czxid);
		W.gw_applied++;
		trace("server: guarded write for %s committed", node);
	}
}

/* A multi: its ops run in order on a copy of the tree, watches aside; if one fails the
 * tree is left as it was and the results say which (those before it ZOK, those after
 * ZRUNTIMEINCONSISTENCY, as the server answers); else they run again on the tree itself,
 * under one zxid, firing watches. */
static int tree_multi(struct msg *m, struct sess *s, struct msg **own)
{
	struct node *real = W.nodes;
	struct watch *watches = W.watches;
	const int64_t zxid = W.zxid;
	W.nodes = nodes_copy(real);
	W.watches = NULL;
	W.zxid++;
	W.in_multi = true;
	int failed = -1, rc = ZOK;
	for (int i = 0; i < m->nsubs && failed < 0; i++) {
		if ((rc = sub_apply(&m->subs[i], s->id, NULL, NULL)) != ZOK)
			failed = i;
	}
	nodes_free(W.nodes);
	W.nodes = real;
	W.watches = watches;
	W.zxid = zxid;
	if (failed >= 0) {
		W.in_multi = false;
		for (int i = 0; i < m->nsubs; i++) {
			struct sub *o = &m->subs[i];
			free(o->created);
			o->created = NULL;
			o->err = i < failed ? ZOK : i == failed ? rc : ZRUNTIMEINCONSISTENCY;
		}
		return rc;
	}
	W.zxid++;
	if (W.o.guarded)
		guarded_commit(m, s);
	for (int i = 0; i < m->nsubs; i++) {
		struct sub *o = &m->subs[i];
		free(o->created);
		o->created = NULL;
		if ((o->err = sub_apply(o, s->id, s, own)) != ZOK)
			violation("model: a multi's op %d on %s failed (%d) after it passed on a copy",
			          i, o->path, o->err);
	}
	W.in_multi = false;
	return ZOK;
}

static uint64_t add_watch(struct sess *s, const char *path, enum wkind kind, watcher_fn fn,
                          void *ctx)
{
	struct watch *w = xcalloc(1, sizeof *w);
	w->id = ++W.next_wid;
	w->path = xstrdup(path);
	w->s = s;
	w->kind = kind;
	w->fn = fn;
	w->ctx = ctx;
	w->next = W.watches;
	W.watches = w;
	return w->id;
}

/* The server removes every empty container that ever had a child. */
static void reap(void)
{
	for (bool again = true; again;) {
		again = false;
		for (struct node *n = W.nodes; n; n = n->next) {
			if (n->container && n->st.cversion != 0 && count_children(n->path) == 0) {
				char *path = xstrdup(n->path);
				trace("server reaps container %s", path);
				tree_delete(path, -1, NULL, NULL);
				free(path);
				again = true;
				break;
			}
		}
	}
}

/* ------------------------------------------------------------------------------------ */
/* Sessions and the network */

static void msg_free(struct msg *m)
{
	for (int i = 0; i < m->nsubs; i++) {
		free(m->subs[i].path);
		free(m->subs[i].data);
		free(m->subs[i].created);
	}
	free(m->subs);
	free(m->path);
	free(m->data);
	free(m->created);
	if (m->names) {
		for (int i = 0; i < m->count; i++)
			free(m->names[i]);
		free(m->names);
	}
	free(m);
}

int64_t delay(void)
{
	/* Mostly short; now and then a long one (a slow server, a retransmission). */
	if (rnd(100) == 0)
		return between(W.delay_max, W.delay_max * 8 + 50);
	return between(0, W.delay_max);
}

/* Queues m for s's client, behind what is queued already (per-session FIFO). */
void push_in(struct sess *s, struct msg *m, int64_t at)
{
	if (at < s->in_last)
		at = s->in_last;
	s->in_last = at;
	m->at = at;
	m->next = NULL;
	if (s->in_tail)
		s->in_tail->next = m;
	else
		s->in = m;
	s->in_tail = m;
}

static void deliver_later(struct sess *s, struct msg *m)
{
	if (s->closed) {
		msg_free(m);
		return;
	}
	if (s->conn != C_UP || (W.o.ensemble && ens_holds_events(s))) {
		/* Not connected: the watch is re-set on reconnection, and fires then. With an
		 * ensemble, a server cut off from the leader sees no commits: the event comes
		 * once it sees them again, or once the client is on another server. */
		m->next = s->held;
		s->held = m;
		return;
	}
	push_in(s, m, W.now + delay());
}

/* A session event for s's client (and, when delivered, for each watch the C client
 * knows of, as it does). */
static void session_event(struct sess *s, int state, int64_t at, bool local)
{
	struct msg *m = xcalloc(1, sizeof *m);
	m->kind = M_SESSION;
	m->type = ZOO_SESSION_EVENT;
	m->state = state;
	m->local = local;
	push_in(s, m, at);
}

static void cwatches_free(struct sess *s)
{
	while (s->cw) {
		struct cwatch *w = s->cw;
		s->cw = w->next;
		free(w->path);
		free(w);
	}
}

/* The server ends session s (expired, or closed by its client): its ephemeral nodes go,
 * which fires other sessions' watches, and its own watches are dropped. */
static void server_end(struct sess *s, const char *why)
{
	if (!s->alive)
		return;
	s->alive = false;
	trace("server: session %" PRIx64 " %s", (uint64_t)s->id, why);
	if (W.cl[s->cl].life == L_SUSPENDED)
		W.cl[s->cl].stopped_expiry = true;
	for (struct watch **pp = &W.watches; *pp;) {
		struct watch *w = *pp;
		if (w->s == s) {
			*pp = w->next;
			free(w->path);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	for (;;) {
		struct node *n = W.nodes;
		while (n && n->st.ephemeralOwner != s->id)
			n = n->next;
		if (!n)
			break;
		char *path = xstrdup(n->path);
		tree_delete(path, -1, NULL, NULL);
		free(path);
	}
}

void check_expiry_told(struct sess *s);

/* The connection of s drops (as the client's library sees it): every request without an
 * answer fails with connection loss, whether the server applied it or not, and the
 * library reports CONNECTING. */
void disconnect(struct sess *s, const char *why)
{
	if (s->conn != C_UP && s->conn != C_CONNECTING)
		return;
	trace("client %d: session %" PRIx64 " disconnected (%s)", s->cl, (uint64_t)s->id, why);
	bool was_up = s->conn == C_UP;
	s->conn = C_DOWN;
	s->retry_at = W.now + between(20, 400);
	/* What was on its way, both ways, fails now (locally, in order). */
	struct msg *answers = NULL, **tail = &answers;
	for (struct msg *m = s->out; m;) {
		struct msg *next = m->next;
		m->kind = M_ANSWER;
		m->rc = ZCONNECTIONLOSS;
		*tail = m;
		tail = &m->next;
		m = next;
	}
	*tail = NULL;
	s->out = s->out_tail = NULL;
	/* Answers on their way are lost: the library hears connection loss. Watch events on
	 * their way are lost too; the C client re-sets its watches when it reconnects to
	 * the same session, and the server fires them again then. */
	struct msg *in = s->in;
	s->in = s->in_tail = NULL;
	s->in_last = W.now;
	bool arrived = true;
	while (in) {
		struct msg *m = in;
		in = m->next;
		/* What reached the client's machine already is read before the end of the
		 * connection is noticed (in order: stop at the first that has not). */
		arrived = arrived && (m->local || (m->at <= W.now && W.cl[s->cl].sc_up));
		if (arrived) {
			m->local = true;
			push_in(s, m, W.now);
			continue;
		}
		if (m->kind == M_WATCH && !m->local) {
			m->next = s->held; /* held is newest first */
			s->held = m;
			continue;
		}
		if (m->kind == M_ANSWER)
			m->rc = ZCONNECTIONLOSS; /* applied, perhaps, but the answer is lost */
		m->local = true;
		push_in(s, m, W.now);
	}

	while (answers) {
		struct msg *m = answers;
		answers = m->next;
		m->local = true;
		push_in(s, m, W.now);
	}
	if (was_up)
		session_event(s, ZOO_CONNECTING_STATE, W.now, true);
}

/* A connection attempt of s: succeeds if both directions work. */
static void connect_attempt(struct sess *s)
{
	struct client *cl = &W.cl[s->cl];
	if (!cl->cs_up || !cl->sc_up) {
		s->retry_at = W.now + between(100, 1000);
		return;
	}
	int srv = -1;
	if (W.o.ensemble && (srv = ens_pick(s)) < 0) {
		/* No server it knows can take the session now (down, electing, cut off). */
		s->retry_at = W.now + between(100, 1000);
		return;
	}
	s->kill_conn = false;
	if (s->known && !s->alive) {
		trace("client %d: session %" PRIx64 " reconnects: expired", s->cl, (uint64_t)s->id);
		s->conn = C_EXPIRING;
		session_event(s, ZOO_EXPIRED_SESSION_STATE, W.now + delay(), false);
		/* Watches of the handle hear it too, then they are gone. */
		for (struct msg *h = s->held; h;) {
			struct msg *n = h->next;
			msg_free(h);
			h = n;
		}
		s->held = NULL;
		return;
	}
	if (!s->known) {
		s->known = true;
		s->alive = true;
	}
	s->last_heard = W.now;
	s->conn = C_UP;
	s->last_recv = W.now;
	s->next_ping = W.now + s->timeout / 3;
	if (W.o.ensemble)
		ens_connected(s, srv);
	trace("client %d: session %" PRIx64 " connected", s->cl, (uint64_t)s->id);
	int64_t at = W.now + delay();
	session_event(s, ZOO_CONNECTED_STATE, at, false);
	/* Watches re-set on reconnection fire now for what changed meanwhile. */
	release_held(s, at);
}

/* The watch events held for s while it could not hear them fire now, oldest first. */
void release_held(struct sess *s, int64_t at)
{
	struct msg *rev = NULL;
	while (s->held) {
		struct msg *m = s->held;
		s->held = m->next;
		m->next = rev;
		rev = m;
	}
	while (rev) {
		struct msg *m = rev;
		rev = m->next;
		push_in(s, m, at);
	}
}

/* The server applies the request at the head of s's queue. */
static void apply(struct sess *s)
{
	struct msg *m = s->out;
	s->out = m->next;
	if (!s->out)
		s->out_tail = NULL;
	if (W.o.ensemble)
		ens_touch(s);
	else
		s->last_heard = W.now;
	struct msg *own = NULL;
	int rc = ZOK;
	/* With an ensemble, a server cut off from the leader does not know the session
	 * ended, and answers its reads (ens_ready() lets nothing else through). */
	if (!s->alive && (!W.o.ensemble || ens_knows_expired(s))) {
		rc = ZSESSIONEXPIRED;
	} else {
		switch (m->op) {
		case OP_CREATE:
			rc = tree_create(m->path, m->data, m->len, m->mode, s->id, &m->created, &m->st, s,
			                 &own);
			break;
		case OP_DELETE:
			rc = tree_delete(m->path, m->version, s, &own);
			break;
		case OP_SET:
			rc = tree_set(m->path, m->data, m->len, m->version, &m->st, s, &own);
			break;
		case OP_EXISTS:
		case OP_GET: {
			struct node *n = find(m->path);
			/* An exists leaves its watch either way: on a missing node it fires when
			 * the node is made (the data watches hear creations). */
			if (m->op == OP_EXISTS && m->wfn)
				m->wid = add_watch(s, m->path, W_DATA, m->wfn, m->wctx);
			if (!n) {
				rc = ZNONODE;
				break;
			}
			m->st = n->st;
			m->st.numChildren = count_children(m->path);
			if (m->op == OP_GET) {
				free(m->data);
				m->data = NULL;
				m->len = -1;
				if (n->data) {
					m->data = malloc((size_t)n->len + 1);
					memcpy(m->data, n->data, (size_t)n->len);
					m->len = n->len;
				}
				if (m->wfn)
					m->wid = add_watch(s, m->path, W_DATA, m->wfn, m->wctx);
			}
			break;
		}
		case OP_CHILDREN: {
			if (!find(m->path)) {
				rc = ZNONODE;
				break;
			}
			int k = count_children(m->path);
			m->names = xcalloc((size_t)k + 1, sizeof *m->names);
			for (struct node *n = W.nodes; n; n = n->next)
				if (is_child(m->path, n->path))
					m->names[m->count++] = xstrdup(strrchr(n->path, '/') + 1);
			/* The server's order is no order. */
			for (int i = m->count - 1; i > 0; i--) {
				int j = (int)rnd((uint64_t)i + 1);
				char *t = m->names[i];
				m->names[i] = m->names[j];
				m->names[j] = t;
			}
			if (m->wfn)
				m->wid = add_watch(s, m->path, W_CHILD, m->wfn, m->wctx);
			break;
		}
		case OP_SYNC:
			break;
		case OP_CHECK:
			if (!find(m->path))
				rc = ZNONODE;
			break;
		case OP_MULTI:
			rc = tree_multi(m, s, &own);
			m->answered = true;
			break;
		}
	}
	trace("server: %" PRIx64 " %s %s -> %d", (uint64_t)s->id, op_names[m->op], m->path, rc);
	m->kind = M_ANSWER;
	m->rc = rc;
	int64_t at = W.now + delay();
	if (W.o.ensemble)
		at += ens_extra_delay(m);
	while (own) {
		struct msg *e = own;
		own = e->next;
		push_in(s, e, at);
	}
	push_in(s, m, at);
	if (s->lose_next || (s->lose_create && m->op == OP_CREATE)) {
		s->lose_next = s->lose_create = false;
		disconnect(s, "fault: answer lost");
	}
}

static int multi_first_error(const struct msg *m)
{
	for (int i = 0; i < m->nsubs; i++)
		if (m->subs[i].err != ZOK)
			return m->subs[i].err;
	return ZOK;
}

/* A multi's results, as the C client fills them from the server's answer. */
static void multi_results(struct msg *m)
{
	bool ok = true;
	for (int i = 0; i < m->nsubs; i++)
		ok = ok && m->subs[i].err == ZOK;
	for (int i = 0; i < m->nsubs; i++) {
		const struct sub *o = &m->subs[i];
		zoo_op_result_t *r = &m->results[i];
		r->err = o->err;
		if (o->type == ZOO_CREATE_OP) {
			if (r->value && ok && o->created) {
				size_t n = strlen(o->created) + 1;
				if (r->valuelen >= 0 && n > (size_t)r->valuelen)
					n = (size_t)r->valuelen;
				if (n > 0) {
					memcpy(r->value, o->created, n - 1);
					r->value[n - 1] = 0;
				}
			} else {
				r->value = NULL;
			}
		} else if (o->type == ZOO_SETDATA_OP) {
			/* Of a failed multi, the ops that passed leave their stat unwritten. */
			if (o->err != ZOK)
				r->stat = NULL;
			else if (r->stat && ok)
				*r->stat = o->st;
		}
	}
}

/* Calls a message's completion or watcher (no lock of ours held). */
static void deliver(struct sess *s, struct msg *m)
{
	int saved = W.cur;
	W.cur = s->cl;
	W.cl[s->cl].delivered++;
	if (!m->local)
		s->last_recv = W.now;
	if (m->kind == M_SESSION) {
		trace("client %d: session event state %d", s->cl, m->state);
		if (m->state == ZOO_EXPIRED_SESSION_STATE)
			s->conn = C_DEAD;
		s->lib_connected = m->state == ZOO_CONNECTED_STATE;
		s->fn((zhandle_t *)s, ZOO_SESSION_EVENT, m->state, "", s->ctx);
		/* Every watch of the handle hears it too; after an expiry they are gone. The
		 * list may change under the calls: take it first. */
		struct cwatch *list = s->cw;
		if (m->state == ZOO_EXPIRED_SESSION_STATE)
			s->cw = NULL;
		for (struct cwatch *w = list; w; w = w->next)
			w->fn((zhandle_t *)s, ZOO_SESSION_EVENT, m->state, w->path, w->ctx);
		if (m->state == ZOO_EXPIRED_SESSION_STATE) {
			while (list) {
				struct cwatch *w = list;
				list = w->next;
				free(w->path);
				free(w);
			}
		}
		W.cur = saved;
		return;
	}
	if (m->kind == M_WATCH) {
		struct cwatch **pp = &s->cw;
		while (*pp && (*pp)->id != m->wid)
			pp = &(*pp)->next;
		struct cwatch *w = *pp;
		trace("client %d: watch event type %d %s%s", s->cl, m->type, m->path,
		      w ? "" : " (no watcher: dropped)");
		if (w) {
			*pp = w->next;
			w->fn((zhandle_t *)s, m->type, m->state, m->path, w->ctx);
			free(w->path);
			free(w);
		}
		W.cur = saved;
		return;
	}
	int rc = m->rc;
	trace("client %d: answer %s %s -> %d", s->cl, op_names[m->op], m->path, rc);
	if ((rc == ZOK || (rc == ZNONODE && m->op == OP_EXISTS)) && m->wid) {
		struct cwatch *w = xcalloc(1, sizeof *w);
		w->id = m->wid;
		w->path = xstrdup(m->path);
		w->fn = m->wfn;
		w->ctx = m->wctx;
		w->next = s->cw;
		s->cw = w;
	}
	struct String_vector sv = { m->count, m->names };
	switch (m->op) {
	case OP_CREATE:
		((string_stat_completion_t)m->done)(rc, rc == ZOK ? m->created : NULL,
		                                     rc == ZOK ? &m->st : NULL, m->arg);
		break;
	case OP_DELETE:
	case OP_CHECK:
		((void_completion_t)m->done)(rc, m->arg);
		break;
	case OP_MULTI:
		/* Only the server's answer fills the results: after a connection loss the
		 * multi may have been applied, or not, and the caller cannot tell. */
		if (m->answered && (rc == ZOK || rc == multi_first_error(m)))
			multi_results(m);
		((void_completion_t)m->done)(rc, m->arg);
		break;
	case OP_CHILDREN:
		((strings_completion_t)m->done)(rc, rc == ZOK ? &sv : NULL, m->arg);
		break;
	case OP_GET:
		((data_completion_t)m->done)(rc, rc == ZOK ? m->data : NULL, rc == ZOK ? m->len : -1,
		                             rc == ZOK ? &m->st : NULL, m->arg);
		break;
	case OP_EXISTS:
	case OP_SET:
		((stat_completion_t)m->done)(rc, rc == ZOK ? &m->st : NULL, m->arg);
		break;
	case OP_SYNC:
		((string_completion_t)m->done)(rc, rc == ZOK ? m->path : NULL, m->arg);
		break;
	}
	W.cur = saved;
}

/* ------------------------------------------------------------------------------------ */
/* The request layer's table */

static zhandle_t *op_open(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
                          void *ctx, bool quiet, struct zkl_zk_creds *creds)
{
	(void)servers;
	(void)quiet;
	(void)creds;
	int k = (int)((struct client *)self - W.cl);
	struct sess *s = xcalloc(1, sizeof *s);
	s->cl = k;
	s->id = ++W.next_sid;
	s->timeout = timeout_ms;
	s->fn = watcher;
	s->ctx = ctx;
	s->conn = C_CONNECTING;
	s->retry_at = W.now + between(1, 50);
	s->next = W.sessions;
	W.sessions = s;
	W.cl[k].sess = s;
	W.cl[k].stopped_expiry = false;
	s->lag0 = W.cl[k].lag;
	trace("client %d: opens session %" PRIx64, k, (uint64_t)s->id);
	return (zhandle_t *)s;
}

static void op_close(zhandle_t *zh)
{
	struct sess *s = (struct sess *)zh;
	struct client *cl = &W.cl[s->cl];
	trace("client %d: closes session %" PRIx64, s->cl, (uint64_t)s->id);
	/* The close request reaches the server if the way there is open. */
	if (s->conn == C_UP && cl->cs_up && cl->life == L_RUN)
		server_end(s, "closed by its client");
	s->closed = true;
	s->conn = C_DEAD;
	/* Requests without an answer are completed now with ZCLOSING; events are dropped. */
	struct msg *list[2] = { s->out, s->in };
	s->out = s->out_tail = s->in = s->in_tail = NULL;
	for (int i = 0; i < 2; i++) {
		for (struct msg *m = list[i]; m;) {
			struct msg *next = m->next;
			if (m->kind == M_REQUEST || m->kind == M_ANSWER) {
				m->kind = M_ANSWER;
				m->rc = ZCLOSING;
				m->local = true;
				deliver(s, m);
			}
			msg_free(m);
			m = next;
		}
	}
	while (s->held) {
		struct msg *m = s->held;
		s->held = m->next;
		msg_free(m);
	}
	cwatches_free(s);
}

/* A handle closed (zookeeper_close) is freed memory in the C client: nothing may use it
 * again, neither the library nor, for an adopted one, the library after the application
 * closed it. */
static struct sess *open_handle(zhandle_t *zh, const char *what)
{
	struct sess *s = (struct sess *)zh;
	if (s->closed)
		violation("client %d: the library used session %" PRIx64 "'s handle (%s) after it "
		          "was closed", s->cl, (uint64_t)s->id, what);
	return s;
}

static int64_t op_session_id(zhandle_t *zh)
{
	return open_handle(zh, "session id")->id;
}

static int op_timeout(zhandle_t *zh)
{
	return open_handle(zh, "timeout")->timeout;
}

static int submit_msg(struct sess *s, struct msg *m, enum op op, const char *path,
                      const char *data, int len, int mode, int version, watcher_fn wfn,
                      void *wctx, void (*done)(void), const void *arg);

static int submit(zhandle_t *zh, enum op op, const char *path, const char *data, int len,
                  int mode, int version, watcher_fn wfn, void *wctx, void (*done)(void),
                  const void *arg)
{
	struct sess *s = open_handle(zh, op_names[op]);
	if (s->conn == C_DEAD || s->conn == C_EXPIRING)
		return ZINVALIDSTATE;
	return submit_msg(s, xcalloc(1, sizeof(struct msg)), op, path, data, len, mode, version,
	                  wfn, wctx, done, arg);
}

/* Sends m, a new message (a multi's with its ops already in it). */
static int submit_msg(struct sess *s, struct msg *m, enum op op, const char *path,
                      const char *data, int len, int mode, int version, watcher_fn wfn,
                      void *wctx, void (*done)(void), const void *arg)
{
	m->kind = M_REQUEST;
	m->op = op;
	m->path = xstrdup(path);
	m->len = -1;
	if (data && len >= 0) {
		m->data = malloc((size_t)len + 1);
		memcpy(m->data, data, (size_t)len);
		m->len = len;
	}
	m->mode = mode;
	m->version = version;
	m->wfn = wfn;
	m->wctx = wctx;
	m->done = done;
	m->arg = arg;
	if (s->conn != C_UP) {
		/* The C client fails requests at once while it is not connected. */
		m->kind = M_ANSWER;
		m->rc = ZCONNECTIONLOSS;
		m->local = true;
		push_in(s, m, W.now);
		return ZOK;
	}
	int64_t at = W.now + delay();
	if (at < s->out_last)
		at = s->out_last;
	s->out_last = at;
	m->at = at;
	if (s->out_tail)
		s->out_tail->next = m;
	else
		s->out = m;
	s->out_tail = m;
	trace("client %d: sends %s %s", s->cl, op_names[op], path);
	if (W.o.ensemble)
		ens_sent(s, (int)op);
	return ZOK;
}

static int op_create(zhandle_t *zh, const char *path, const char *data, int len,
                     const struct ACL_vector *acl, int mode, string_stat_completion_t done,
                     const void *arg)
{
	(void)acl;
	return submit(zh, OP_CREATE, path, data, data ? len : -1, mode, -1, NULL, NULL,
	              (void (*)(void))done, arg);
}

static int op_remove(zhandle_t *zh, const char *path, int version, void_completion_t done,
                     const void *arg)
{
	return submit(zh, OP_DELETE, path, NULL, -1, 0, version, NULL, NULL, (void (*)(void))done,
	              arg);
}

static int op_children(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                       strings_completion_t done, const void *arg)
{
	return submit(zh, OP_CHILDREN, path, NULL, -1, 0, -1, watcher, wctx, (void (*)(void))done,
	              arg);
}

static int op_get(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                  data_completion_t done, const void *arg)
{
	return submit(zh, OP_GET, path, NULL, -1, 0, -1, watcher, wctx, (void (*)(void))done, arg);
}

static int op_exists(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                     stat_completion_t done, const void *arg)
{
	return submit(zh, OP_EXISTS, path, NULL, -1, 0, -1, watcher, wctx, (void (*)(void))done,
	              arg);
}

static int op_set(zhandle_t *zh, const char *path, const char *data, int len, int version,
                  stat_completion_t done, const void *arg)
{
	return submit(zh, OP_SET, path, data, len, 0, version, NULL, NULL, (void (*)(void))done,
	              arg);
}

static int op_sync(zhandle_t *zh, const char *path, string_completion_t done, const void *arg)
{
	return submit(zh, OP_SYNC, path, NULL, -1, 0, -1, NULL, NULL, (void (*)(void))done, arg);
}

static int op_check(zhandle_t *zh, const char *path, void_completion_t done, const void *arg)
{
	return submit(zh, OP_CHECK, path, NULL, -1, 0, -1, NULL, NULL, (void (*)(void))done, arg);
}

/* A multi's ops, copied into m; where each result goes is set in results, as the C
 * client does when it sends them. false if one is of no kind a multi takes. */
static bool subs_copy(struct msg *m, int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
	for (int i = 0; i < count; i++)
		if (ops[i].type != ZOO_CREATE_OP && ops[i].type != ZOO_DELETE_OP &&
		    ops[i].type != ZOO_SETDATA_OP && ops[i].type != ZOO_CHECK_OP)
			return false;
	m->subs = xcalloc((size_t)count + 1, sizeof *m->subs);
	m->nsubs = count;
	m->results = results;
	for (int i = 0; i < count; i++) {
		const zoo_op_t *op = &ops[i];
		struct sub *o = &m->subs[i];
		const char *path = NULL;
		const char *data = NULL;
		int len = -1;
		o->type = op->type;
		o->version = -1;
		results[i].value = NULL;
		results[i].valuelen = 0;
		results[i].stat = NULL;
		switch (op->type) {
		case ZOO_CREATE_OP:
			path = op->create_op.path;
			data = op->create_op.data;
			len = data ? op->create_op.datalen : -1;
			o->mode = op->create_op.flags;
			results[i].value = op->create_op.buf;
			results[i].valuelen = op->create_op.buflen;
			break;
		case ZOO_DELETE_OP:
			path = op->delete_op.path;
			o->version = op->delete_op.version;
			break;
		case ZOO_SETDATA_OP:
			path = op->set_op.path;
			data = op->set_op.data;
			len = data ? op->set_op.datalen : -1;
			o->version = op->set_op.version;
			results[i].stat = op->set_op.stat;
			break;
		default:
			path = op->check_op.path;
			o->version = op->check_op.version;
			break;
		}
		o->path = xstrdup(path);
		o->len = len;
		if (data && len >= 0) {
			o->data = malloc((size_t)len + 1);
			memcpy(o->data, data, (size_t)len);
		}
	}
	return true;
}

static int op_multi(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                    void_completion_t done, const void *arg)
{
	struct sess *s = open_handle(zh, "multi");
	if (s->conn == C_DEAD || s->conn == C_EXPIRING)
		return ZINVALIDSTATE;
	if (count < 0 || (count > 0 && (!ops || !results)))
		return ZBADARGUMENTS;
	struct msg *m = xcalloc(1, sizeof *m);
	if (!subs_copy(m, count, ops, results)) {
		free(m);
		return ZBADARGUMENTS;
	}
	return submit_msg(s, m, OP_MULTI, count > 0 ? m->subs[0].path : "/", NULL, -1, 0, -1,
	                  NULL, NULL, (void (*)(void))done, arg);
}

/* --multi-table: the model's multi answers the table that the server and the in-memory
 * ZooKeeper answer (tests/unit/multi-cases.h). */
#define fail_msg(...) violation(__VA_ARGS__)
#include "../unit/multi-cases.h"
#undef fail_msg

static void table_create(void *ctx, const char *path)
{
	(void)ctx;
	int rc = tree_create(path, "v0", 2, 0, 0, NULL, NULL, NULL, NULL);
	if (rc != ZOK)
		violation("create %s: %s", path, zerror(rc));
}

static int table_exists(void *ctx, const char *path, int *version)
{
	(void)ctx;
	struct node *n = find(path);
	if (n)
		*version = n->st.version;
	return n != NULL;
}

static int table_multi(void *ctx, int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
	struct sess *s = ctx;
	struct msg m = { .kind = M_REQUEST, .op = OP_MULTI };
	if (!subs_copy(&m, count, ops, results))
		return ZBADARGUMENTS;
	int rc = tree_multi(&m, s, NULL);
	m.answered = true;
	multi_results(&m);
	for (int i = 0; i < m.nsubs; i++) {
		free(m.subs[i].path);
		free(m.subs[i].data);
		free(m.subs[i].created);
	}
	free(m.subs);
	return rc;
}

static int multi_table(void)
{
	memset(&W, 0, sizeof W);
	struct node *root = xcalloc(1, sizeof *root);
	root->path = xstrdup("/");
	W.nodes = root;
	struct sess s = { .id = 0x77, .alive = true };
	const struct multi_driver d = { table_create, table_exists, table_multi, &s };
	run_multi_cases(&d, "/m");
	nodes_free(W.nodes);
	W.nodes = NULL;
	printf("the model's multi answers every case of the table as the server does\n");
	return 0;
}

/* The entries for a handle the application lends (--adopt). */
static watcher_fn op_set_watcher(zhandle_t *zh, watcher_fn fn)
{
	struct sess *s = open_handle(zh, "set watcher");
	watcher_fn old = s->fn;
	s->fn = fn;
	return old;
}

static bool op_connected(zhandle_t *zh)
{
	return open_handle(zh, "state")->conn == C_UP;
}

/* Takes the watches of (path, fn, ctx) off the handle and off the server at once: none
 * of them is called again. */
static int op_remove_watch(zhandle_t *zh, const char *path, int type, watcher_fn fn, void *ctx)
{
	(void)type;
	struct sess *s = open_handle(zh, "remove watch");
	for (struct cwatch **pp = &s->cw; *pp;) {
		struct cwatch *w = *pp;
		if (w->fn == fn && w->ctx == ctx && strcmp(w->path, path) == 0) {
			*pp = w->next;
			free(w->path);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	for (struct watch **pp = &W.watches; *pp;) {
		struct watch *w = *pp;
		if (w->s == s && w->fn == fn && w->ctx == ctx && strcmp(w->path, path) == 0) {
			*pp = w->next;
			free(w->path);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	return ZOK;
}

static const struct zkl_zk_ops sim_ops = {
	.open = op_open,
	.close = op_close,
	.session_id = op_session_id,
	.timeout = op_timeout,
	.create = op_create,
	.remove = op_remove,
	.children = op_children,
	.get = op_get,
	.exists = op_exists,
	.set = op_set,
	.sync = op_sync,
	.check = op_check,
	.multi = op_multi,
	.set_watcher = op_set_watcher,
	.connected = op_connected,
	.remove_watch = op_remove_watch,
};

/* ------------------------------------------------------------------------------------ */
/* Ground truth and invariants */

struct sess *sess_by_id(int64_t id)
{
	for (struct sess *s = W.sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

bool alive(int64_t id)
{
	struct sess *s = sess_by_id(id);
	return s && s->alive;
}

/* Whether the clock of s's client stood still (suspend) during s's life: its loss rule
 * then runs late by that much, and nothing can tell it. */
bool clock_stood_still(const struct sess *s)
{
	return s && (W.cl[s->cl].lag != s->lag0 || W.cl[s->cl].life == L_SUSPENDED);
}

static bool exclusive(enum kind k)
{
	return k == K_MUTEX || k == K_WRITE || k == K_SEMMUTEX || k == K_LEADER || k == K_MULTI;
}

/* The server is about to expire s: a holder on it must have been told already (its own
 * clock gave the session up before the server's clock could end it). */
void check_expiry_told(struct sess *s)
{
	if (W.tearing_down)
		return;
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (!t->believes || t->voided || t->sess != s->id)
			continue;
		struct client *cl = &W.cl[t->cl];
		if (cl->life == L_CRASHED || clock_stood_still(s)) {
			/* Its clock stood still (now, or earlier in the session's life: frozen now
			 * or not, its loss rule runs late by that much), or it is gone: nothing
			 * can tell it. */
			W.exempt++;
			t->voided = true;
		} else if (cl->life == L_FROZEN) {
			cl->owed = true; /* it must learn first thing when it runs again */
		} else {
			violation("contender %d (client %d, %s %s) still believes it holds as the server "
			          "expires its session %" PRIx64 ": it was never told \"lost\"", j, t->cl,
			          kind_names[t->kind], W.paths[t->path].path, (uint64_t)s->id);
		}
	}
}

/* How long the deletion of a holder's node may take to reach the holder whose client
 * nothing else disturbs: the exists that watches the node, sent at the grant, and its
 * answer (ZNONODE), each as slow as a delivery can be, or the watch's event; then a turn
 * of its loop. */
static int64_t deleted_bound(void)
{
	return 2 * (8 * W.delay_max + 50) + 50;
}

/* A holder whose node a peer deleted must be told "lost" in time (README.md,
 * "Invariants"), unless a fault touched its client from a session timeout before the
 * delete on, or its session ended (then the expiry checks apply). */
static void check_deleted_told(void)
{
	for (int j = 0; j < W.nct; j++) {
		const struct contender *t = &W.ct[j];
		if (!t->deleted_at || !t->believes || W.now - t->deleted_at <= deleted_bound())
			continue;
		const struct client *cl = &W.cl[t->cl];
		if (cl->life != L_RUN || cl->faulted_until + cl->timeout >= t->deleted_at ||
		    !alive(t->sess))
			continue;
		/* With an ensemble, a server out of step with the leader holds the event back
		 * (ensemble.c): the servers' faults touch every client. */
		if (W.o.ensemble && ens_disturbed() + cl->timeout >= t->deleted_at)
			continue;
		violation("contender %d (client %d) still believes it holds %s, %" PRId64 " ms "
		          "after a peer deleted its node %s: it was never told \"lost\"", j, t->cl,
		          W.paths[t->path].path, W.now - t->deleted_at, t->node);
	}
}

static void check_all(void)
{
	if (W.tearing_down)
		return;
	check_deleted_told();
	if (W.o.ensemble)
		ens_check();
	for (int p = 0; p < W.npaths; p++) {
		int excl = 0, shared = 0, first = -1;
		int64_t oldest = INT64_MAX, faulted = INT64_MIN;
		for (int j = 0; j < W.nct; j++) {
			struct contender *t = &W.ct[j];
			if (t->path != p || !t->believes || t->voided || !alive(t->sess))
				continue;
			/* A downgrade's read hold, while its owner still holds the write lock: one
			 * owner holding both (--owners). */
			bool same_owner = t->owner && t->shadow_of >= 0 &&
			                  W.ct[t->shadow_of].believes && !W.ct[t->shadow_of].voided;
			/* A holder on a live session has its node, owned by that session. */
			struct node *n = find(t->node);
			if (!n || n->st.ephemeralOwner != t->sess)
				violation("contender %d holds %s, but its node %s is %s", j,
				          W.paths[p].path, t->node, n ? "owned by another session" :
				          "not on the server");
			if (exclusive(t->kind))
				excl++;
			else if (!same_owner)
				shared++;
			if (first < 0)
				first = j;
			if (t->granted_at < oldest)
				oldest = t->granted_at;
			if (W.cl[t->cl].faulted_until > faulted)
				faulted = W.cl[t->cl].faulted_until;
		}
		const struct path_info *pi = &W.paths[p];
		if (pi->kind == K_SEM && pi->shared) {
			/* Leases granted under a higher count stay when it drops, and a taker's view of
			 * the count may be a round trip old: the limit is the highest value in effect
			 * since the oldest holder's grant, less that; unknown where a fault touched a
			 * holder's client meanwhile. */
			int64_t from = oldest - (4 * W.delay_max + 2000 + W.cl[0].timeout);
			int limit = 0;
			for (int i = 0; i < pi->nvals; i++)
				if (i + 1 == pi->nvals || pi->vals[i + 1].at > from)
					limit = pi->vals[i].v > limit ? pi->vals[i].v : limit;
			if (shared > limit && faulted + W.cl[0].timeout < from)
				violation("%d leases of %s held at once (its shared count was at most %d "
				          "since the oldest of them was granted)", shared, pi->path, limit);
		} else if (pi->kind == K_SEM) {
			if (shared > pi->max)
				violation("%d leases of %s held at once (limit %d)", shared, pi->path, pi->max);
		} else if (excl > 1 || (excl == 1 && shared > 0)) {
			violation("%s: %d exclusive and %d shared holders at once on live sessions "
			          "(contender %d among them)", pi->path, excl, shared, first);
		}
	}
}

/* ------------------------------------------------------------------------------------ */
/* Contenders */

static bool peer_deleted(const char *node);

static int64_t ms_to_start(void)
{
	return W.now + between(0, 1500);
}

/* Releases every level owner t holds of h's mutex (h: t, or its downgrade's read half),
 * the last level's result returned. Each level but the last leaves the node in place. */
static int owner_release(struct contender *t, int j, struct contender *h)
{
	int rc = 0;
	h->believes = false;
	h->releasing = true;
	for (; h->levels > 0; h->levels--) {
		rc = zkl__mutex_release_as(h->om, t->owner);
		if (h->levels == 1)
			break;
		if (rc != 0 && rc != ZKL_ELOST)
			violation("contender %d: release of one of %d levels returned %s", j, h->levels,
			          zkl_strerror(rc));
		if (rc == 0 && !h->voided && alive(h->sess) && !find(h->node) &&
		    !peer_deleted(h->node))
			violation("contender %d: its node %s went with one of its %d levels", j,
			          h->node, h->levels);
	}
	h->levels = 0;
	h->releasing = false;
	if (h != t) {
		/* The read half of a downgrade: its checks are the writer's. */
		if (rc == ZKL_ELOST && !h->told_lost && !W.tearing_down)
			violation("contender %d: release of its read half said lost, and the lost "
			          "callback never ran for it", j);
		h->st = CT_DONE;
		rc = rc == ZKL_ELOST ? 0 : rc;
	}
	return rc;
}

static void contender_release(struct contender *t, int j, const char *where)
{
	t->believes = false;
	if (t->kind == K_MULTI)
		W.ct[t->shadow].believes = false;
	int saved = W.cur;
	W.cur = t->cl;
	t->releasing = true;
	int rc;
	if (t->downgraded) {
		rc = owner_release(t, j, &W.ct[t->shadow]);
		t->downgraded = false;
	} else if (t->owner) {
		rc = owner_release(t, j, t);
	} else if (t->mowner) {
		/* The levels its owner re-entered first: each leaves every node in place. */
		for (; t->levels > 1; t->levels--) {
			rc = zkl__multilock_release_as(t->ml, t->mowner);
			if (rc != 0 && rc != ZKL_ELOST)
				violation("contender %d: release of one of %d levels of its multi-lock "
				          "returned %s", j, t->levels, zkl_strerror(rc));
		}
		t->levels = 0;
		rc = zkl__multilock_release_as(t->ml, t->mowner);
		if (rc == 0 && zkl__multilock_held_as(t->ml, t->mowner))
			violation("contender %d: its owner still holds the multi-lock after its "
			          "release", j);
	} else {
		rc = zkl_lock_release(t->l);
	}
	t->releasing = false;
	W.cur = saved;
	trace("contender %d: release (%s) -> %s", j, where, rc ? zkl_strerror(rc) : "0");
	if (rc != 0 && rc != ZKL_ELOST)
		violation("contender %d: release returned %s", j, zkl_strerror(rc));
	/* One way to learn of a loss: a release that says so comes after the callback. */
	if (rc == ZKL_ELOST && !t->told_lost && !W.tearing_down)
		violation("contender %d: release said the hold was lost, and the lost callback "
		          "never ran for it", j);
	t->st = CT_IDLE;
	t->cycles--;
	t->next_at = ms_to_start();
}

/* A node's sequence number (its last ten digits), and the length of its folder's path;
 * -1 if it has none. */
static int64_t node_seq(const char *node, size_t *folder)
{
	const char *slash = strrchr(node, '/');
	size_t n = strlen(node);
	if (!slash || n < 10)
		return -1;
	int64_t seq = 0;
	for (size_t i = n - 10; i < n; i++) {
		if (node[i] < '0' || node[i] > '9')
			return -1;
		seq = seq * 10 + (node[i] - '0');
	}
	*folder = (size_t)(slash - node);
	return seq;
}

/* Whether contender t's acquire is clean so far, for the FIFO check: under way, neither
 * cancelled nor past its deadline, its client neither crashed nor moved to another
 * session since the acquire started, that session alive on the server. */
static bool fifo_clean(const struct contender *t)
{
	return exclusive(t->kind) && t->st == CT_ACQUIRING && t->pending && !t->canceled &&
	       W.cl[t->cl].life != L_CRASHED && clock_of(t->cl) < t->deadline &&
	       W.cl[t->cl].sess && W.cl[t->cl].sess->id == t->acq_sess && alive(t->acq_sess) &&
	       W.cl[t->cl].losses == t->acq_losses;
}

static void on_state(zkl_client *c, zkl_state st, void *data)
{
	(void)c;
	if (st == ZKL_STATE_LOST)
		((struct client *)data)->losses++;
}

/* Notes the first node (its place in the line) of each clean acquire of client k that has
 * none yet, as the library reports it (zkl_lock_node()) and the server has it, owned by
 * the acquire's session. Called after each step that ran code of client k. */
static void fifo_note(int k)
{
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t->cl != k || t->first[0] || !t->l || !fifo_clean(t))
			continue;
		char node[ZKL_NODE_MAX];
		int saved = W.cur;
		W.cur = k;
		int n = zkl_lock_node(t->l, node, sizeof node);
		W.cur = saved;
		if (n < 0)
			continue;
		const struct node *nd = find(node);
		if (nd && nd->st.ephemeralOwner == t->acq_sess)
			memcpy(t->first, node, (size_t)n + 1);
	}
}

static bool peer_deleted(const char *node)
{
	for (int i = 0; i < W.npeer_deleted; i++)
		if (strcmp(W.peer_deleted[i], node) == 0)
			return true;
	return false;
}

/* FIFO (README.md, "Invariants"): g, exclusive, is told it holds its node. No other
 * exclusive contender of its path whose acquire is clean (fifo_clean()) may have taken
 * its place in the line (its first node on its session, in the same folder) before g's
 * node: that node was there before g's, so if it is still there every listing g made saw
 * it in front; and if it is gone while its session lives, without a peer's delete, the
 * contender lost its place for nothing. */
static void check_fifo(const struct contender *g, int gj)
{
	size_t gf;
	int64_t gseq = node_seq(g->node, &gf);
	if (gseq < 0)
		violation("contender %d: its node %s has no sequence number", gj, g->node);
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t == g || t->path != g->path || !t->first[0] || !fifo_clean(t))
			continue;
		size_t tf;
		int64_t tseq = node_seq(t->first, &tf);
		if (tseq < 0 || tf != gf || strncmp(t->first, g->node, gf) != 0 ||
		    peer_deleted(t->first))
			continue;
		W.fifo_pairs++;
		if (tseq >= gseq)
			continue;
		const struct node *nd = find(t->first);
		violation("FIFO: contender %d (client %d) is told it holds %s with node %s, while "
		          "contender %d (client %d), whose acquire is neither cancelled nor timed "
		          "out and whose session did not change, took its place before it with "
		          "node %s, %s", gj, g->cl, W.paths[g->path].path, g->node, j, t->cl,
		          t->first, nd ? "which still waits" : "which is gone (its session lives, "
		          "and no peer deleted it)");
	}
}

/* Contender t (index j) is told it holds, through view (its lock, or a multi-lock's
 * member): what the server has is checked, and the hold noted for the checks. */
static void hold_record(struct contender *t, int j, zkl_lock *view, zkl_mutex *mm,
                        uint64_t mowner)
{
	struct path_info *pi = &W.paths[t->path];
	t->believes = true;
	t->told_lost = false;
	t->voided = false;
	t->deleted_at = 0;
	t->tell_by = 0;
	t->granted_at = W.now;
	int n;
	if (t->owner) {
		/* An owner's hold: its own, as its thread would ask (zkl_lock_node() answers for
		 * the calling thread). */
		t->levels = zkl__mutex_held_as(t->om, t->owner, t->node, sizeof t->node, &t->token);
		n = t->levels > 0 && t->node[0] ? (int)strlen(t->node) : ZKL_ENOTHELD;
		if (t->levels > 0 && n < 0) {
			/* Granted, and lost in the same turn of the loop (a downgrade whose write
			 * lock's session was given up as its answer came): its lost callback is on
			 * its way, and the hold counts no more. */
			t->voided = true;
			t->sess = 0;
			return;
		}
	} else if (mowner) {
		/* A member of a multi-lock its owner holds: the owner's hold, as its thread
		 * would ask. */
		int levels = zkl__mutex_held_as(mm, mowner, t->node, sizeof t->node, &t->token);
		n = levels > 0 && t->node[0] ? (int)strlen(t->node) : ZKL_ENOTHELD;
	} else {
		t->token = zkl_lock_token(view);
		n = zkl_lock_node(view, t->node, sizeof t->node);
	}
	if (n < 0)
		violation("contender %d: held, but zkl_lock_node() says %s", j, zkl_strerror(n));
	struct node *nd = find(t->node);
	/* A read hold its owner took while holding the write half: a downgrade. */
	const bool downgrade = t->owner && t->shadow_of >= 0 && W.ct[t->shadow_of].believes;
	bool peer = false;
	for (int i = 0; i < W.npeer_deleted; i++)
		peer |= strcmp(W.peer_deleted[i], t->node) == 0;
	if ((!nd || !alive(nd->st.ephemeralOwner)) &&
	    (W.cl[t->cl].stopped_expiry ||
	     clock_stood_still(nd ? sess_by_id(nd->st.ephemeralOwner) : W.cl[t->cl].sess))) {
		/* Its clock stood still past the session's expiry: inherent, not checked. */
		W.exempt++;
		t->voided = true;
		t->sess = nd ? nd->st.ephemeralOwner : 0;
	} else if (!nd) {
		if (!peer)
			violation("contender %d: told it holds %s with node %s, which is not on the "
			          "server", j, pi->path, t->node);
		t->voided = true;
		t->sess = 0;
	} else {
		t->sess = nd->st.ephemeralOwner;
		if (!alive(t->sess))
			violation("contender %d: told it holds %s on session %" PRIx64 ", which the "
			          "server has ended", j, pi->path, (uint64_t)t->sess);
		if (!downgrade && t->token != nd->st.czxid)
			violation("contender %d: token %" PRId64 " is not its node's czxid %" PRId64, j,
			          t->token, (int64_t)nd->st.czxid);
		if (downgrade && t->token != W.ct[t->shadow_of].token)
			violation("contender %d: a downgrade's token %" PRId64 " is not its write "
			          "hold's %" PRId64, j, t->token, W.ct[t->shadow_of].token);
	}
	/* Fencing tokens grow from one holder to the next. A downgrade's read hold carries
	 * its write hold's token (checked above): its read node is made after the writers
	 * queued behind the writer, and its own czxid would be above theirs. */
	if (!t->voided) {
		if (exclusive(t->kind) && t->token <= pi->max_token)
			violation("contender %d: exclusive hold of %s with token %" PRId64 ", not above "
			          "the %" PRId64 " granted before", j, pi->path, t->token, pi->max_token);
		if (!exclusive(t->kind) && !downgrade && pi->kind != K_SEM && t->token <= pi->max_excl)
			violation("contender %d: read hold of %s with token %" PRId64 ", not above the "
			          "writer's %" PRId64 " granted before", j, pi->path, t->token,
			          pi->max_excl);
		if (t->token > pi->max_token)
			pi->max_token = t->token;
		if (exclusive(t->kind) && t->token > pi->max_excl)
			pi->max_excl = t->token;
	}
	if (!t->voided && exclusive(t->kind))
		check_fifo(t, j);
	if (W.o.ensemble)
		ens_granted(t, j);
}

static void on_acquired(zkl_lock *l, int rc, void *data)
{
	struct contender *t = data;
	int j = (int)(t - W.ct);
	(void)l;
	if (W.tearing_down) {
		t->pending = false;
		return;
	}
	if (!t->pending)
		violation("contender %d: acquire callback without an acquire under way (rc %d)", j, rc);
	t->pending = false;
	t->calls++;
	trace("contender %d: acquired -> %s", j, rc ? zkl_strerror(rc) : "held");
	if (rc != 0) {
		if (rc != ZKL_ETIMEDOUT && rc != ZKL_ECANCELED && rc != ZKL_ELOST)
			violation("contender %d: acquire ended with %s (%s)", j, zkl_strerror(rc),
			          zkl_last_error());
		t->st = CT_IDLE;
		t->cycles--;
		t->next_at = ms_to_start();
		return;
	}
	W.holds++;
	t->revoke_at = 0;
	t->revoke_told = false;
	t->revoke_gone = false;
	if (t->kind == K_MULTI) {
		struct contender *sh = &W.ct[t->shadow];
		/* All or nothing: told it holds, its owner holds every member. */
		if (t->mowner && !zkl__multilock_held_as(t->ml, t->mowner))
			violation("contender %d: told its owner holds the multi-lock, which it does "
			          "not hold whole", j);
		t->levels = t->mowner ? 1 : 0;
		hold_record(t, j, zkl_mutex_lock(t->m), t->m, t->mowner);
		hold_record(sh, t->shadow, zkl_mutex_lock(sh->m), sh->m, t->mowner);
	} else {
		hold_record(t, j, t->l, NULL, 0);
	}
	t->st = CT_HOLDING;
	t->wrote = false;
	uint64_t r = rnd(20);
	if (r == 0 && W.depth == 0 && W.cl[t->cl].sess && W.cl[t->cl].sess->lib_connected) {
		check_all();
		contender_release(t, j, "in its callback");
		return;
	}
	int to = W.cl[t->cl].timeout;
	t->next_at = W.now + (r == 1 ? between(to, 2 * to) : between(0, 2500));
	if (t->revocable && r > 1)
		t->next_at = W.now + between(0, 4 * to); /* time for a revocation request */
	if (t->scripted)
		t->next_at = W.now + t->hold_for;
}

/* How long a revocation request may take to reach a holder whose client nothing else
 * disturbs: the write's watch event, the read of the node's data, each way. */
static int64_t revoke_bound(const struct contender *t)
{
	return 4 * W.delay_max + 2000 + W.cl[t->cl].timeout / 3;
}

/* A revocation request for a hold of t that is still held when t lets go by itself must
 * have reached it, unless something disturbed its client meanwhile. */
static void check_revoke_told(const struct contender *t, int j)
{
	const struct client *cl = &W.cl[t->cl];
	if (!t->revoke_at || t->revoke_told || t->revoke_gone || !t->believes || t->voided ||
	    !alive(t->sess) ||
	    cl->faulted_until + cl->timeout >= t->revoke_at ||
	    W.now - t->revoke_at <= revoke_bound(t))
		return;
	/* With an ensemble, a server out of step with the leader holds the request's event
	 * back, as a peer's delete (check_deleted_told). */
	if (W.o.ensemble && ens_disturbed() + cl->timeout >= t->revoke_at)
		return;
	violation("contender %d (client %d) still holds %s with node %s, %" PRId64 " ms after a "
	          "revocation request for it, and was never told", j, t->cl,
	          W.paths[t->path].path, t->node, W.now - t->revoke_at);
}

/* The revocation callback of a revocable mutex: only for a hold asked to go; then the
 * contender lets go. */
static void on_revoke(zkl_mutex *m, void *data)
{
	struct contender *t = data;
	int j = (int)(t - W.ct);
	(void)m;
	trace("contender %d: told to let go (revoke)", j);
	if (W.tearing_down)
		return;
	if (t->st != CT_HOLDING || !t->revoke_at || t->revoke_told)
		violation("contender %d: revoke callback %s", j,
		          t->st != CT_HOLDING ? "without a hold" :
		          t->revoke_told ? "twice for one request" : "without a request for its hold");
	t->revoke_told = true;
	if (t->believes && W.depth == 0)
		contender_release(t, j, "revoked");
}

static void on_lost(zkl_lock *l, int reason, void *data)
{
	struct contender *t = data;
	int j = (int)(t - W.ct);
	(void)l;
	trace("contender %d: told lost (%d)", j, reason);
	if (W.tearing_down)
		return;
	if (t->st != CT_HOLDING || t->told_lost || (!t->believes && !t->releasing))
		violation("contender %d: lost callback %s", j,
		          t->st != CT_HOLDING ? "without a hold" :
		          t->told_lost ? "twice for one hold" : "after its release");
	t->losts++;
	t->told_lost = true;
	t->believes = false;
	if (t->kind == K_MULTI)
		W.ct[t->shadow].believes = false;
}

/* The next call of the application on client c comes from a thread other than the one
 * that runs c's loop. This one thread runs every client's loop, and the library, which
 * learns the loop's thread from zkl_client_process(), refuses on it every call that
 * waits for the server (ZKL_EDEADLK): such a call stands for one from another thread of
 * the application, whose waits the clock hook turns into steps of the world. The next
 * zkl_client_process() makes this thread the loop's again. */
static void off_loop(zkl_client *c)
{
	atomic_store(&c->loop_tid, 0);
}

static int contender_make(struct contender *t)
{
	zkl_client *c = W.cl[t->cl].c;
	const char *path = W.paths[t->path].path;
	int rc = 0;
	switch (t->kind) {
	case K_MUTEX:
		if ((rc = zkl_mutex_new(&t->m, c, path)) == 0)
			t->l = zkl_mutex_lock(t->m);
		if (rc == 0 && t->revocable)
			rc = zkl_mutex_make_revocable(t->m, on_revoke, t);
		break;
	case K_READ:
	case K_WRITE:
		if ((rc = zkl_rwlock_new(&t->rw, c, path)) == 0)
			t->l = zkl_mutex_lock(t->kind == K_READ ? zkl_rwlock_read(t->rw) :
			                                          zkl_rwlock_write(t->rw));
		if (rc == 0 && t->owner && t->kind == K_WRITE) {
			/* Its downgrade's read half is its shadow's. */
			struct contender *sh = &W.ct[t->shadow];
			sh->om = zkl_rwlock_read(t->rw);
			sh->l = zkl_mutex_lock(sh->om);
			rc = zkl_lock_on_lost(sh->l, on_lost, sh);
		}
		break;
	case K_SEM:
		if (W.paths[t->path].shared) {
			off_loop(c);
			rc = zkl_semaphore_new_shared(&t->sem, c, path, W.paths[t->path].count_path,
			                              W.paths[t->path].max);
		} else {
			rc = zkl_semaphore_new(&t->sem, c, path, W.paths[t->path].max);
		}
		if (rc == 0)
			t->l = zkl_semaphore_lock(t->sem);
		break;
	case K_SEMMUTEX:
		if ((rc = zkl_semaphore_mutex_new(&t->sm, c, path)) == 0)
			t->l = zkl_semaphore_mutex_lock(t->sm);
		break;
	case K_LEADER:
		if ((rc = zkl_leader_new(&t->ld, c, path, NULL)) == 0)
			t->l = zkl_leader_lock(t->ld);
		break;
	case K_MULTI: {
		struct contender *sh = &W.ct[t->shadow];
		if ((rc = zkl_mutex_new(&t->m, c, path)) != 0 ||
		    (rc = zkl_mutex_new(&sh->m, c, W.paths[sh->path].path)) != 0 ||
		    (rc = zkl_multilock_new(&t->ml, ZKL_MULTILOCK_CANONICAL)) != 0 ||
		    (rc = zkl_multilock_add(t->ml, zkl_mutex_lock(t->m))) != 0 ||
		    (rc = zkl_multilock_add(t->ml, zkl_mutex_lock(sh->m))) != 0)
			break;
		t->l = zkl_multilock_lock(t->ml);
		break;
	}
	}
	if (rc == 0 && t->owner)
		t->om = t->m ? t->m : zkl_rwlock_write(t->rw);
	if (rc == 0)
		rc = zkl_lock_on_lost(t->l, on_lost, t);
	return rc;
}

/* Whether contender_make()'s rc is a violation. A semaphore on a shared count reads or
 * makes the count's node as it is made, a blocking round trip that the connection may
 * lose: it tries again when it would start its next acquire. */
static bool make_failed(struct contender *t, int j, int rc)
{
	if (rc == 0)
		return false;
	if (t->kind == K_SEM && W.paths[t->path].shared &&
	    (rc == ZKL_ECONNLOSS || rc == ZKL_ELOST || rc == ZKL_ETIMEDOUT)) {
		trace("contender %d: cannot make its semaphore now: %s", j, zkl_strerror(rc));
		t->sem = NULL;
		t->l = NULL;
		return false;
	}
	return true;
}

static void contender_free(struct contender *t)
{
	int saved = W.cur;
	W.cur = t->cl;
	zkl_multilock_free(t->ml); /* before its members */
	if (t->kind == K_MULTI) {
		zkl_mutex_free(W.ct[t->shadow].m);
		W.ct[t->shadow].m = NULL;
	}
	zkl_mutex_free(t->m);
	zkl_rwlock_free(t->rw);
	zkl_semaphore_free(t->sem);
	zkl_semaphore_mutex_free(t->sm);
	zkl_leader_free(t->ld);
	if (t->owner && t->kind == K_WRITE) {
		W.ct[t->shadow].l = NULL;
		W.ct[t->shadow].om = NULL;
	}
	W.cur = saved;
	t->om = NULL;
	t->ml = NULL;
	t->m = NULL;
	t->rw = NULL;
	t->sem = NULL;
	t->sm = NULL;
	t->ld = NULL;
	t->l = NULL;
}

/* The end of an owner's acquire. */
static void owner_acquired(void *arg, int rc)
{
	struct contender *t = arg;
	on_acquired(t->l, rc, t);
}

/* The end of a writer's downgrade (its read half's acquire, the write lock held): held,
 * the read half is its shadow's hold, and the write lock goes at once. */
static void owner_downgraded(void *arg, int rc)
{
	struct contender *t = arg;
	int j = (int)(t - W.ct);
	struct contender *sh = &W.ct[t->shadow];
	if (W.tearing_down || !t->downgrading)
		return;
	t->downgrading = false;
	sh->pending = false;
	trace("contender %d: downgrade -> %s", j, rc ? zkl_strerror(rc) : "held");
	t->next_at = W.now + between(0, 1500);
	if (rc != 0) {
		/* ZKL_ECONNLOSS: the write node could not be confirmed after the read node was
		 * made (zkl__engine_create_fixed()). */
		if (rc != ZKL_ETIMEDOUT && rc != ZKL_ECANCELED && rc != ZKL_ELOST &&
		    rc != ZKL_ECONNLOSS)
			violation("contender %d: downgrade ended with %s (%s)", j, zkl_strerror(rc),
			          zkl_last_error());
		return;
	}
	W.holds++;
	sh->st = CT_HOLDING;
	hold_record(sh, t->shadow, sh->l, NULL, 0);
	/* The write lock goes; the read lock stays, and no writer may come in between. */
	int saved = W.cur;
	W.cur = t->cl;
	t->believes = false;
	t->releasing = true;
	int wrc = owner_release(t, j, t);
	t->releasing = false;
	W.cur = saved;
	trace("contender %d: write half released after the downgrade -> %s", j,
	      wrc ? zkl_strerror(wrc) : "0");
	if (wrc != 0 && wrc != ZKL_ELOST)
		violation("contender %d: release of the write half returned %s", j,
		          zkl_strerror(wrc));
	t->downgraded = true;
	t->next_at = W.now + between(0, 2500);
}

/* A multi-lock's owner that holds: now and then it re-enters (every member's count goes
 * up, at once, with no new node). Returns false if it lets go now instead. */
static bool multi_owner_act(struct contender *t, int j)
{
	if (!t->believes || t->levels >= 3 || rnd(2))
		return false;
	const char *p1 = W.paths[t->path].path, *p2 = W.paths[W.ct[t->shadow].path].path;
	int before = count_children(p1) + count_children(p2);
	int rc = zkl__multilock_start_as(t->ml, t->mowner, -1, owner_acquired, t);
	trace("contender %d: re-enter its multi-lock -> %d", j, rc);
	if (rc == ZKL_ELOST)
		return false; /* a member lost, and told on the loop's next turn */
	if (rc != 1)
		violation("contender %d: re-entry of the multi-lock it holds returned %d (%s)", j,
		          rc, rc < 0 ? zkl_last_error() : "an acquire started");
	if (!zkl__multilock_held_as(t->ml, t->mowner) ||
	    count_children(p1) + count_children(p2) != before)
		violation("contender %d: re-entry of its multi-lock left it not held whole, or "
		          "changed the nodes (%d children, had %d)", j,
		          count_children(p1) + count_children(p2), before);
	t->levels++;
	t->next_at = W.now + between(0, 1500);
	return true;
}

/* An owner that holds: now and then it re-enters (the count goes up, no new node), or a
 * writer downgrades. Returns false if it lets go now instead. */
static bool owner_act(struct contender *t, int j)
{
	if (t->downgraded || t->downgrading || !t->believes || rnd(2))
		return false;
	if (t->kind == K_WRITE && rnd(2)) {
		struct contender *sh = &W.ct[t->shadow];
		int to = W.cl[t->cl].timeout;
		uint64_t r = rnd(4);
		int timeout = r == 0 ? 0 : r == 1 ? -1 : (int)between(50, 3 * to);
		sh->pending = true;
		t->downgrading = true;
		int rc = zkl__mutex_start_as(sh->om, t->owner, timeout, owner_downgraded, t);
		trace("contender %d: downgrade, timeout %d -> %s", j, timeout,
		      rc == 0 ? "started" : zkl_strerror(rc));
		if (rc != 0) {
			t->downgrading = false;
			sh->pending = false;
			if (rc != ZKL_ECLOSED)
				violation("contender %d: downgrade refused: %s (%s)", j,
				          rc == 1 ? "re-entered" : zkl_strerror(rc), zkl_last_error());
			return false;
		}
		t->next_at = INT64_MAX;
		return true;
	}
	/* Re-entry: no round trip, no new node. */
	int before = count_children(W.paths[t->path].path);
	int rc = zkl__mutex_start_as(t->om, t->owner, -1, owner_acquired, t);
	trace("contender %d: re-enter -> %d", j, rc);
	if (rc == ZKL_ELOST && (t->told_lost || !t->believes))
		return false;
	if (rc == ZKL_ELOST)
		return false; /* lost, and told on the loop's next turn */
	if (rc != 1)
		violation("contender %d: re-entry of the lock it holds returned %d (%s)", j, rc,
		          rc < 0 ? zkl_last_error() : "an acquire started");
	char node[ZKL_NODE_MAX];
	int64_t token;
	int levels = zkl__mutex_held_as(t->om, t->owner, node, sizeof node, &token);
	if (levels != t->levels + 1 || strcmp(node, t->node) != 0 || token != t->token ||
	    count_children(W.paths[t->path].path) != before)
		violation("contender %d: re-entry made %d levels (had %d), node %s (had %s), %d "
		          "children (had %d)", j, levels, t->levels, node, t->node,
		          count_children(W.paths[t->path].path), before);
	t->levels = levels;
	t->next_at = W.now + between(0, 1500);
	return true;
}

/* --guarded: the end of a hold's guarded write. Whatever it answers, the invariant was
 * checked at its commit (guarded_commit()); here only that the answer is one of those a
 * guarded write may give. */
static void on_guarded(zkl_lock *l, int rc, const zkl_txn_result *results, size_t n,
                       void *data)
{
	(void)l;
	(void)results;
	(void)n;
	int j = (int)((struct contender *)data - W.ct);
	trace("contender %d: guarded write -> %s", j, rc ? zkl_strerror(rc) : "applied");
	if (rc != 0 && rc != ZKL_ELOST && rc != ZKL_ENOTHELD && rc != ZKL_ECONNLOSS &&
	    rc != ZKL_ECLOSED)
		violation("contender %d: guarded write answered %s (%s)", j, zkl_strerror(rc),
		          zkl_last_error());
}

static void contender_act(int j)
{
	struct contender *t = &W.ct[j];
	int saved = W.cur;
	W.cur = t->cl;
	if (t->st == CT_IDLE && t->cycles > 0 && !t->l) {
		/* Its semaphore could not be made yet (make_failed()): again, for a cycle. */
		int rc = contender_make(t);
		if (make_failed(t, j, rc))
			violation("contender %d: cannot make its lock: %s", j, zkl_strerror(rc));
		if (!t->l) {
			t->cycles--;
			t->next_at = ms_to_start();
			W.cur = saved;
			return;
		}
	}
	if (t->st == CT_IDLE) {
		if (t->cycles <= 0) {
			t->st = CT_DONE;
			t->next_at = INT64_MAX;
			trace("contender %d: done", j);
		} else {
			int to = W.cl[t->cl].timeout;
			uint64_t r = rnd(10);
			int timeout = r == 0 ? 0 : r == 1 ? -1 : (int)between(50, 3 * to);
			if (t->scripted)
				timeout = -1;
			t->pending = true;
			t->canceled = false;
			t->deadline = timeout < 0 ? INT64_MAX : clock_of(t->cl) + timeout;
			t->acq_sess = W.cl[t->cl].sess ? W.cl[t->cl].sess->id : 0;
			t->acq_losses = W.cl[t->cl].losses;
			t->first[0] = 0;
			int rc = t->owner ? zkl__mutex_start_as(t->om, t->owner, timeout, owner_acquired, t)
			       : t->mowner ? zkl__multilock_start_as(t->ml, t->mowner, timeout,
			                                             owner_acquired, t)
			                   : zkl_lock_acquire_async(t->l, timeout, on_acquired, t);
			if (rc == 1)
				violation("contender %d: its owner re-entered a lock it does not hold", j);
			trace("contender %d: acquire %s %s, timeout %d -> %s", j, kind_names[t->kind],
			      W.paths[t->path].path, timeout, rc ? zkl_strerror(rc) : "started");
			if (rc != 0) {
				t->pending = false;
				if (rc != ZKL_ECLOSED)
					violation("contender %d: acquire_async refused: %s (%s)", j,
					          zkl_strerror(rc), zkl_last_error());
				t->cycles--;
				t->next_at = ms_to_start();
			} else if (t->pending) {
				t->st = CT_ACQUIRING;
				t->next_at = rnd(6) == 0 ? W.now + between(0, 2000) : INT64_MAX;
				if (t->scripted)
					t->next_at = INT64_MAX;
			}
		}
	} else if (t->st == CT_ACQUIRING) {
		trace("contender %d: cancel", j);
		t->next_at = INT64_MAX;
		t->canceled = true;
		zkl_lock_cancel(t->l);
	} else if (t->st == CT_HOLDING && W.o.guarded && !t->wrote && t->kind != K_MULTI &&
	           t->shadow_of < 0) {
		/* When it would let go: a guarded write naming its node first, and the release
		 * a moment later. */
		t->wrote = true;
		const zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = "/guarded", .data = t->node,
		                       .len = strlen(t->node), .version = -1};
		int rc = zkl_lock_txn_async(t->l, &op, 1, on_guarded, t);
		trace("contender %d: guarded write for %s -> %s", j, t->node,
		      rc ? zkl_strerror(rc) : "started");
		if (rc == 0)
			W.gw_sent++;
		else if (rc != ZKL_ELOST && rc != ZKL_ENOTHELD && rc != ZKL_ECLOSED)
			violation("contender %d: guarded write refused: %s (%s)", j, zkl_strerror(rc),
			          zkl_last_error());
		t->next_at = W.now + between(0, 1000);
	} else if (t->st == CT_HOLDING) {
		check_revoke_told(t, j);
		if (!(t->owner && owner_act(t, j)) && !(t->mowner && multi_owner_act(t, j)))
			contender_release(t, j, "after holding");
	}
	W.cur = saved;
}

/* ------------------------------------------------------------------------------------ */
/* Faults */

static void fault_start(int i)
{
	struct fault *f = &W.f[i];
	f->done = true;
	if (!(W.o.fault_mask & (1u << i)))
		return;
	if (f->kind == F_SRV_CUT || f->kind == F_SRV_DOWN) {
		ens_fault(f);
		return;
	}
	if (W.o.ensemble && !ens_commits() &&
	    (f->kind == F_PEERDEL || f->kind == F_PEERWRITE || f->kind == F_STRAY ||
	     f->kind == F_REVOKE || f->kind == F_COUNT)) {
		/* A peer's write needs a leader with a quorum: none now. */
		trace("FAULT %d: %s skipped: no leader commits now", i, fault_names[f->kind]);
		return;
	}
	struct client *cl = &W.cl[f->cl];
	if (cl->life == L_CRASHED || !cl->sess)
		return;
	if (W.now + f->dur > cl->faulted_until)
		cl->faulted_until = W.now + f->dur;
	if (cl->blocked && (f->kind == F_FREEZE || f->kind == F_SUSPEND || f->kind == F_CRASH)) {
		/* One thread waits in the library (nested steps): it cannot stop meanwhile. */
		trace("FAULT %d: %s client %d skipped: a thread of it waits", i,
		      fault_names[f->kind], f->cl);
		return;
	}
	struct sess *s = cl->sess;
	trace("FAULT %d: %s client %d for %" PRId64 " ms", i, fault_names[f->kind], f->cl, f->dur);
	switch (f->kind) {
	case F_LOSE:
		s->lose_next = true;
		break;
	case F_LOSE_CUT:
		s->lose_create = true;
		cl->sc_up = false;
		if (W.now + f->dur > cl->part_until)
			cl->part_until = W.now + f->dur;
		break;
	case F_DROP:
		if (s->conn == C_UP)
			disconnect(s, "fault: connection dropped");
		break;
	case F_EXPIRE:
	case F_CUT_CS:
	case F_CUT_SC:
		if (f->kind != F_CUT_SC)
			cl->cs_up = false;
		if (f->kind != F_CUT_CS)
			cl->sc_up = false;
		if (W.now + f->dur > cl->part_until)
			cl->part_until = W.now + f->dur;
		break;
	case F_FREEZE:
	case F_SUSPEND:
		if (cl->life != L_RUN)
			break;
		cl->life = f->kind == F_FREEZE ? L_FROZEN : L_SUSPENDED;
		cl->susp_from = W.now;
		cl->life_until = W.now + f->dur;
		break;
	case F_CRASH:
		cl->life = L_CRASHED;
		for (int j = 0; j < W.nct; j++)
			if (W.ct[j].cl == f->cl && W.ct[j].believes && !W.ct[j].voided)
				W.exempt++;
		break;
	case F_COUNT: {
		int cand[MAXP], n = 0;
		for (int p = 0; p < W.npaths; p++)
			if (W.paths[p].shared && W.paths[p].nvals < 16 && find(W.paths[p].count_path))
				cand[n++] = p;
		if (n == 0)
			break;
		struct path_info *pi = &W.paths[cand[f->pick % (uint64_t)n]];
		int v = 1 + (int)((f->pick >> 8) % 3);
		unsigned char b[4] = { 0, 0, 0, (unsigned char)v };
		trace("peer sets the count %s to %d", pi->count_path, v);
		tree_set(pi->count_path, (const char *)b, 4, -1, NULL, NULL, NULL);
		pi->vals[pi->nvals].at = W.now;
		pi->vals[pi->nvals++].v = v;
		break;
	}
	case F_REVOKE: {
		/* A holder of a revocable mutex, asked once per hold. */
		int cand[MAXK], n = 0;
		for (int j = 0; j < W.nct; j++) {
			struct contender *t = &W.ct[j];
			if (t->revocable && t->st == CT_HOLDING && t->believes && !t->voided &&
			    !t->revoke_at && alive(t->sess))
				cand[n++] = j;
		}
		if (n == 0)
			break;
		struct contender *t = &W.ct[cand[f->pick % (uint64_t)n]];
		trace("peer asks the holder of %s to let go (revoke)", t->node);
		t->revoke_at = W.now;
		t->revoke_told = false;
		t->revoke_gone = false;
		tree_set(t->node, "__REVOKE__", 10, -1, NULL, NULL, NULL);
		break;
	}
	case F_PEERDEL:
	case F_PEERWRITE:
	case F_STRAY: {
		/* Pick among the nodes under /locks: ephemeral ones for a delete or a write,
		 * folders for a stray child. */
		struct node *cand[64];
		int n = 0;
		for (struct node *nd = W.nodes; nd && n < 64; nd = nd->next) {
			if (strncmp(nd->path, "/locks/", 7) != 0)
				continue;
			if ((f->kind != F_STRAY) != (nd->st.ephemeralOwner != 0))
				continue;
			/* A semaphore's gate node deleted under its holder leaves a lease behind that
			 * no one deletes (README.md, "Findings"): only with --semaphore-peer-deletes. */
			bool sem = false;
			for (int p = 0; p < W.npaths; p++) {
				size_t pl = strlen(W.paths[p].path);
				if (strncmp(nd->path, W.paths[p].path, pl) == 0 && nd->path[pl] == '/' &&
				    (W.paths[p].kind == K_SEM || W.paths[p].kind == K_SEMMUTEX))
					sem = true;
			}
			if (f->kind == F_PEERDEL && sem && !W.o.sem_peerdel)
				continue;
			cand[n++] = nd;
		}
		if (n == 0)
			break;
		struct node *nd = cand[f->pick % (uint64_t)n];
		char path[ZKL_NODE_MAX];
		snprintf(path, sizeof path, "%s", nd->path);
		if (f->kind == F_PEERDEL) {
			trace("peer deletes %s", path);
			if (W.npeer_deleted < 16)
				snprintf(W.peer_deleted[W.npeer_deleted++], ZKL_NODE_MAX, "%s", path);
			for (int j = 0; j < W.nct; j++) {
				if (W.ct[j].believes && strcmp(W.ct[j].node, path) == 0) {
					W.ct[j].voided = true;
					W.ct[j].deleted_at = W.now;
				}
			}
			tree_delete(path, -1, NULL, NULL);
		} else if (f->kind == F_PEERWRITE) {
			trace("peer writes over the data of %s", path);
			tree_set(path, "peer", 4, -1, NULL, NULL, NULL);
			/* A revocation request written there may be gone before its holder reads it:
			 * it may still be told (it read it first), and is no longer owed. */
			for (int j = 0; j < W.nct; j++)
				if (W.ct[j].revoke_at && strcmp(W.ct[j].node, path) == 0)
					W.ct[j].revoke_gone = true;
		} else {
			char stray[ZKL_NODE_MAX + 32];
			snprintf(stray, sizeof stray, "%s/stray-%d", path, i);
			trace("peer creates %s", stray);
			tree_create(stray, "x", 1, 0, 0, NULL, NULL, NULL, NULL);
		}
		break;
	}
	case F_SRV_CUT:
	case F_SRV_DOWN:
	case F_NKINDS:
		break;
	}
}

/* ------------------------------------------------------------------------------------ */
/* The application of an adopted client (--adopt) */

/* The application's global watcher, chained behind the library's: once its session has
 * expired, it opens the next one and hands it over a moment later (handover()). */
static void app_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)path;
	struct client *cl = ctx;
	if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE &&
	    (struct sess *)zh == cl->sess && !cl->handover_at)
		cl->handover_at = W.now + between(0, 500);
}

static zhandle_t *app_open(int k)
{
	return op_open(&W.cl[k], "sim:2181", W.cl[k].timeout, app_watcher, &W.cl[k], true, NULL);
}

/* The application closes a handle of its own; the library must have let go of it. */
static void app_close(struct sess *s)
{
	if (s && !s->closed)
		op_close((zhandle_t *)s);
}

static void handover(int k)
{
	struct client *cl = &W.cl[k];
	cl->handover_at = 0;
	struct sess *old = cl->sess;
	int saved = W.cur;
	W.cur = k;
	zhandle_t *zh = app_open(k);
	int rc = zkl_client_handover(cl->c, zh);
	W.cur = saved;
	trace("client %d: the application hands session %" PRIx64 " over: %s", k,
	      (uint64_t)((struct sess *)zh)->id, zkl_strerror(rc));
	if (rc == ZKL_EBUSY) {
		/* Its watcher heard the expiry before the client's loop got to it: the
		 * application tries again a moment later, with the handle it opened. */
		op_close(zh);
		cl->sess = old;
		cl->handover_at = W.now + between(1, 300);
		return;
	}
	if (rc != 0)
		violation("client %d: zkl_client_handover() after an expiry returned %s (%s)", k,
		          zkl_strerror(rc), zkl_last_error());
	/* The handle before is closed now, this one a moment later: "after the handover". */
	app_close(cl->to_close);
	cl->to_close = old;
	cl->close_at = W.now + between(0, 1000);
}

/* ------------------------------------------------------------------------------------ */
/* The scheduler */

static bool can_run(int k)
{
	return W.cl[k].c && W.cl[k].life == L_RUN && !W.cl[k].blocked;
}

int sim_loopfd_readable(int fd); /* loopfd.c */

/* When client k's loop wants zkl_client_process(): at once if its descriptor is
 * readable (the application polls it, as the contract says), else after its timeout. */
static int loop_timeout(int k)
{
	int saved = W.cur;
	W.cur = k;
	int t = sim_loopfd_readable(zkl_client_loop_fd(W.cl[k].c)) ? 0
	        : zkl_client_loop_timeout(W.cl[k].c);
	W.cur = saved;
	return t;
}

static void process(int k)
{
	int saved = W.cur;
	W.cur = k;
	trace("client %d: process", k);
	int rc = zkl_client_process(W.cl[k].c);
	/* The thread that waits in the library is another than the loop's: it stays so. */
	if (W.cl[k].blocked_off_loop)
		off_loop(W.cl[k].c);
	W.cur = saved;
	if (rc != 0)
		violation("client %d: zkl_client_process() returned %s", k, zkl_strerror(rc));
}

static void resume(int k)
{
	struct client *cl = &W.cl[k];
	if (W.o.ensemble)
		ens_resume(k);
	if (cl->life == L_SUSPENDED)
		cl->lag += W.now - cl->susp_from;
	cl->life = L_RUN;
	trace("client %d: runs again", k);
	if (!cl->owed)
		return;
	/* A hold expired while it was stopped: its loop, first to run, tells the holder. */
	cl->owed = false;
	if (cl->c && !cl->blocked)
		process(k);
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t->cl == k && t->believes && !t->voided && !alive(t->sess))
			violation("contender %d: its session expired while client %d was stopped, and "
			          "its first loop turn after did not say \"lost\"", j, k);
	}
}

/* Whatever is due at W.now and needs no choice: the server's expiries, the C client's
 * pings, silence detection and reconnects, faults beginning and ending, the reaper. */
static void ticks(void)
{
	for (int i = 0; i < W.nf; i++)
		if (!W.f[i].done && W.f[i].at <= W.now)
			fault_start(i);
	if (W.o.ensemble)
		ens_tick();
	/* The server's expiries first: a client that stops being frozen or suspended in the
	 * same millisecond was still stopped when the server expired its session, and has
	 * had no time to run its loss rule (it is owed that first thing). */
	for (struct sess *s = W.sessions; s; s = s->next) {
		if (W.o.ensemble ? s->alive && ens_expires(s) :
		    s->alive && W.now - s->last_heard >= s->timeout) {
			if (W.o.ensemble)
				ens_check_expiry(s);
			else
				check_expiry_told(s);
			server_end(s, "expired");
			s->kill_conn = true;
		}
	}
	for (int k = 0; k < W.ncl; k++) {
		struct client *cl = &W.cl[k];
		if ((cl->life == L_FROZEN || cl->life == L_SUSPENDED) && W.now >= cl->life_until)
			resume(k);
		if (cl->part_until && W.now >= cl->part_until) {
			cl->part_until = 0;
			cl->cs_up = cl->sc_up = true;
			trace("client %d: partition healed", k);
		}
	}
	for (struct sess *s = W.sessions; s; s = s->next) {
		if (s->closed)
			continue;
		struct client *cl = &W.cl[s->cl];
		if (cl->life != L_RUN)
			continue; /* its threads do not run */
		if ((s->conn == C_CONNECTING || s->conn == C_DOWN) && W.now >= s->retry_at)
			connect_attempt(s);
		if (s->conn != C_UP)
			continue;
		if (s->kill_conn && cl->sc_up && (!W.o.ensemble || ens_knows_expired(s))) {
			disconnect(s, "the server ended the session");
			continue;
		}
		if (W.now >= s->next_ping) {
			s->next_ping = W.now + s->timeout / 3;
			if (W.o.ensemble) {
				if (cl->cs_up && ens_answers_ping(s)) {
					ens_touch(s);
					if (cl->sc_up)
						s->last_recv = W.now;
				}
			} else if (cl->cs_up && s->alive) {
				s->last_heard = W.now;
				if (cl->sc_up)
					s->last_recv = W.now;
			}
		}
		if (W.now - s->last_recv > s->timeout * 2 / 3)
			disconnect(s, "nothing heard for 2/3 of the session timeout");
	}
	if (W.now >= W.next_reap) {
		reap();
		W.next_reap = W.now + between(200, 3000);
	}
}

struct action {
	int kind;
	void *p;
	int i;
};

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* One step: what is due now, then one action chosen among those enabled; or, if none is,
 * time moves to the next moment something is due. Returns false if nothing ever will. */
static bool step(void)
{
	if (++W.steps > 4000000)
		violation("more than 4 million steps: something spins");
	ticks();
	enum { A_ARRIVE, A_DELIVER, A_PROCESS, A_ACT, A_HANDOVER, A_APPCLOSE };
	struct action act[64];
	int n = 0;
	int64_t next = INT64_MAX;
	for (struct sess *s = W.sessions; s; s = s->next) {
		if (s->closed)
			continue;
		struct client *cl = &W.cl[s->cl];
		if (s->out) {
			if (!cl->cs_up || (W.o.ensemble && !ens_ready(s, s->out)))
				; /* with an ensemble: its server waits for the leader (ens_tick()) */
			else if (s->out->at <= W.now && n < 64)
				act[n++] = (struct action){ A_ARRIVE, s, 0 };
			else
				next = min64(next, s->out->at);
		}
		if (s->in && cl->life == L_RUN) {
			if (!cl->sc_up && !s->in->local)
				;
			else if (s->in->at <= W.now && n < 64)
				act[n++] = (struct action){ A_DELIVER, s, 0 };
			else
				next = min64(next, s->in->at);
		}
		if (s->alive && !W.o.ensemble)
			next = min64(next, s->last_heard + s->timeout);
		if (s->alive && W.o.ensemble && ens_expiry_at(s) > W.now)
			next = min64(next, ens_expiry_at(s));
		if (cl->life == L_RUN) {
			if (s->conn == C_CONNECTING || s->conn == C_DOWN)
				next = min64(next, s->retry_at);
			if (s->conn == C_UP) {
				next = min64(next, s->next_ping);
				next = min64(next, s->last_recv + s->timeout * 2 / 3 + 1);
			}
		}
	}
	for (int k = 0; k < W.ncl; k++) {
		struct client *cl = &W.cl[k];
		if (cl->life == L_FROZEN || cl->life == L_SUSPENDED)
			next = min64(next, cl->life_until);
		if (cl->part_until)
			next = min64(next, cl->part_until);
		if (cl->blocked && cl->life == L_RUN)
			next = min64(next, cl->wait_until);
		if (cl->blocked && cl->blocked_off_loop && cl->life == L_RUN && cl->c) {
			/* Only the loop runs for it: its waiting thread is another. */
			int t = loop_timeout(k);
			if (t == 0 && n < 64)
				act[n++] = (struct action){ A_PROCESS, NULL, k };
			else if (t > 0)
				next = min64(next, W.now + t);
			continue;
		}
		if (!can_run(k))
			continue;
		if (cl->handover_at && W.depth == 0) {
			if (cl->handover_at <= W.now && n < 64)
				act[n++] = (struct action){ A_HANDOVER, NULL, k };
			else
				next = min64(next, cl->handover_at);
		}
		if (cl->to_close && W.depth == 0) {
			if (cl->close_at <= W.now && n < 64)
				act[n++] = (struct action){ A_APPCLOSE, NULL, k };
			else
				next = min64(next, cl->close_at);
		}
		int t = loop_timeout(k);
		if (t == 0 && n < 64)
			act[n++] = (struct action){ A_PROCESS, NULL, k };
		else if (t > 0)
			next = min64(next, W.now + t);
	}
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		/* The application's own calls may wait in the library (a semaphore's first
		 * start reads its count; a release while disconnected waits for its delete):
		 * one thread at a time may wait, so they wait while another one does. */
		if ((!t->l && t->st != CT_IDLE) || t->st == CT_DONE || !can_run(t->cl) || W.depth > 0)
			continue;
		if (t->next_at <= W.now && n < 64)
			act[n++] = (struct action){ A_ACT, NULL, j };
		else
			next = min64(next, t->next_at);
	}
	for (int i = 0; i < W.nf; i++)
		if (!W.f[i].done)
			next = min64(next, W.f[i].at);
	next = min64(next, W.next_reap);
	if (W.o.ensemble)
		next = min64(next, ens_next());
	if (n == 0) {
		if (next == INT64_MAX)
			return false;
		if (next > W.now)
			W.now = next;
		return true;
	}
	int c = (int)rnd((uint64_t)n);
	switch (act[c].kind) {
	case A_ARRIVE:
		apply(act[c].p);
		break;
	case A_DELIVER: {
		struct sess *s = act[c].p;
		struct msg *m = s->in;
		s->in = m->next;
		if (!s->in)
			s->in_tail = NULL;
		deliver(s, m);
		msg_free(m);
		fifo_note(s->cl);
		break;
	}
	case A_PROCESS:
		process(act[c].i);
		fifo_note(act[c].i);
		break;
	case A_ACT:
		contender_act(act[c].i);
		fifo_note(W.ct[act[c].i].cl);
		break;
	case A_HANDOVER:
		handover(act[c].i);
		break;
	case A_APPCLOSE:
		trace("client %d: the application closes its expired handle", act[c].i);
		app_close(W.cl[act[c].i].to_close);
		W.cl[act[c].i].to_close = NULL;
		break;
	}
	check_all();
	return true;
}

/* The library waits (zkl__cond_wait_until) on a thread of client W.cur: the rest of the
 * world runs until something reaches that client or its deadline passes. */
static int64_t hook_now(void *arg)
{
	(void)arg;
	return W.cur >= 0 ? clock_of(W.cur) : W.now;
}

static bool hook_wait(void *arg, pthread_mutex_t *mu, int64_t deadline)
{
	(void)arg;
	int k = W.cur;
	if (k < 0) {
		fprintf(stderr, "sim: a timed wait outside any client\n");
		abort();
	}
	struct client *cl = &W.cl[k];
	if (++W.depth > 40)
		violation("timed waits nest more than 40 deep");
	/* A wait of a thread other than the loop's (off_loop) leaves the loop to run: the
	 * waiting thread may be waiting for it. mu is the client's here, held: its mutex,
	 * or its inbox's, which a blocking caller driving its own job waits on
	 * (zkl__io_wait_since) while the application's loop runs the rest, an election's
	 * stage among them. */
	const bool was_off = cl->blocked_off_loop;
	cl->blocked_off_loop = cl->c && (mu == &cl->c->mu || mu == &cl->c->inbox_mu) &&
	                        atomic_load(&cl->c->loop_tid) == 0;
	pthread_mutex_unlock(mu);
	if (deadline == INT64_MAX)
		trace("client %d: a thread waits in the library, no deadline", k);
	else
		trace("client %d: a thread waits in the library, %" PRId64 " ms", k,
		      deadline - clock_of(k));
	bool was = cl->blocked;
	int64_t was_until = cl->wait_until;
	cl->blocked = true;
	cl->wait_until = deadline == INT64_MAX ? INT64_MAX : deadline + cl->lag;
	uint64_t mark = cl->delivered;
	/* The loop's kick (a job it ended, a waiter it woke) wakes a waiting thread too. */
	const uint64_t kicks = cl->c ? cl->c->kicks : 0;
	bool timed = false;
	for (;;) {
		if (cl->life == L_RUN) {
			if (clock_of(k) >= deadline) {
				timed = true;
				break;
			}
			if (cl->delivered != mark || (cl->c && cl->c->kicks != kicks))
				break;
		}
		if (!step())
			violation("client %d waits in the library (deadline %s) and nothing can ever "
			          "wake it", k, deadline == INT64_MAX ? "none" : "set");
	}
	cl->blocked = was;
	cl->blocked_off_loop = was_off;
	cl->wait_until = was_until;
	W.cur = k;
	W.depth--;
	pthread_mutex_lock(mu);
	return timed;
}

static const struct zkl__clock_hook sim_clock = { hook_now, hook_wait, NULL };

/* ------------------------------------------------------------------------------------ */
/* A run */

static void scenario(void)
{
	if (W.o.scenario) {
		ens_scenario();
		return;
	}
	W.ncl = (int)between(2, 4);
	int timeout = (int)between(2, 8) * 1000;
	W.delay_max = between(1, 120);
	W.fault_end = between(15000, 40000);
	W.npaths = W.o.multi ? (int)between(2, 3) : (int)between(1, 2);
	for (int p = 0; p < W.npaths; p++) {
		struct path_info *pi = &W.paths[p];
		snprintf(pi->path, sizeof pi->path, "/locks/p%d", p);
		static const enum kind kinds[] = { K_MUTEX, K_WRITE, K_SEM, K_SEMMUTEX };
		pi->kind = kinds[rnd(4)];
		if (W.o.multi)
			pi->kind = K_MUTEX; /* a multi-lock's members are mutexes */
		if (W.o.owners)
			pi->kind = pi->kind == K_SEM || pi->kind == K_SEMMUTEX ? K_WRITE : pi->kind;
		if (W.o.leaders && pi->kind == K_MUTEX)
			pi->kind = K_LEADER; /* the same draws: the rest of the schedule is alike */
		pi->max = pi->kind == K_SEM ? (int)between(1, 3) : 1;
		pi->shared = pi->kind == K_SEM && rnd(2);
		if (pi->shared) {
			snprintf(pi->count_path, sizeof pi->count_path, "/counts/p%d", p);
			pi->nvals = 1;
			pi->vals[0].at = 0;
			pi->vals[0].v = pi->max;
		}
	}
	W.nct = (int)between(2, 6);
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		t->cl = (int)rnd((uint64_t)W.ncl);
		t->path = (int)rnd((uint64_t)W.npaths);
		t->kind = W.paths[t->path].kind;
		if (t->kind == K_WRITE && rnd(2))
			t->kind = K_READ;
		t->cycles = t->cycles0 = (int)between(1, 4);
		t->st = CT_IDLE;
		t->next_at = between(0, 2000);
		t->shadow_of = -1;
		t->revocable = t->kind == K_MUTEX && rnd(2);
		if (W.o.multi && rnd(2)) {
			/* A multi-lock of this path and another: its second member goes after the
			 * contenders drawn (their mask bits stay theirs). */
			t->kind = K_MULTI;
			t->revocable = false;
			t->shadow = -1 - (int)rnd((uint64_t)W.npaths - 1); /* placed below */
			/* Half of them as a thread's blocking acquire is: an owner's run. */
			if (rnd(2))
				t->mowner = (UINT64_C(1) << 41) + (uint64_t)j;
		}
		if (W.o.owners && t->kind != K_READ && rnd(4)) {
			/* An owner, as a thread's blocking calls are: not revocable (a revocation
			 * callback releases for the thread that holds), re-entering, downgrading. */
			t->owner = (UINT64_C(1) << 40) + (uint64_t)j;
			t->revocable = false;
			t->shadow = -1;
		}
		if (!(W.o.cont_mask & (1u << j))) {
			t->st = CT_DONE;
			t->cycles = 0;
		}
	}
	for (int j = 0, drawn = W.nct; W.o.owners && j < drawn; j++) {
		struct contender *t = &W.ct[j];
		if (!t->owner || t->kind != K_WRITE)
			continue;
		/* A writer's downgrade: its read half's hold, a contender of its own. */
		struct contender *sh = &W.ct[W.nct];
		*sh = (struct contender){ .cl = t->cl, .kind = K_READ, .shadow_of = j,
		                          .path = t->path, .owner = t->owner, .st = CT_DONE,
		                          .next_at = INT64_MAX };
		t->shadow = W.nct++;
	}
	for (int j = 0, drawn = W.nct; j < drawn; j++) {
		struct contender *t = &W.ct[j];
		if (t->kind != K_MULTI)
			continue;
		int other = -1 - t->shadow;
		struct contender *sh = &W.ct[W.nct];
		*sh = (struct contender){ .cl = t->cl, .kind = K_MUTEX, .shadow_of = j,
		                          .path = other >= t->path ? other + 1 : other,
		                          .st = CT_DONE, .next_at = INT64_MAX };
		t->shadow = W.nct++;
	}
	for (int k = 0; k < W.ncl; k++) {
		W.cl[k].timeout = timeout;
		W.cl[k].cs_up = W.cl[k].sc_up = true;
		/* With an ensemble, a third of the clients know one server only (the others
		 * all three): such a client cannot move when its server fails it. */
		if (W.o.ensemble)
			W.cl[k].srv_mask = rnd(3) == 0 ? 1u << rnd(3) : 7u;
	}
	/* Faults, more valuable kinds more often; with an ensemble, the servers' too. */
	static const int weight1[F_NKINDS] = { 4, 4, 2, 2, 1, 1, 2, 1, 2, 2, 2, 0, 2, 2 };
	static const int weight3[F_NKINDS] = { 4, 4, 2, 2, 1, 1, 2, 1, 2, 2, 2, 0, 2, 2, 6, 3 };
	const int *weight = W.o.ensemble ? weight3 : weight1;
	int total = 0;
	for (int i = 0; i < F_NKINDS; i++)
		total += weight[i];
	W.nf = (int)between(0, 12);
	for (int i = 0; i < W.nf; i++) {
		struct fault *f = &W.f[i];
		int r = (int)rnd((uint64_t)total), kind = 0;
		while (r >= weight[kind])
			r -= weight[kind++];
		f->kind = (enum fkind)kind;
		f->cl = (int)rnd((uint64_t)W.ncl);
		f->at = between(300, W.fault_end);
		f->pick = rng_next(&W.rng);
		/* Half of the stray faults are peer writes, from a bit of the draw they make
		 * anyway: the schedules without a stray fault are drawn as before there was
		 * this kind. */
		if (f->kind == F_STRAY && (f->pick >> 63))
			f->kind = F_PEERWRITE;
		switch (f->kind) {
		case F_EXPIRE:
			f->dur = between(timeout * 11 / 10, timeout * 2);
			break;
		case F_FREEZE:
		case F_SUSPEND:
		case F_CUT_CS:
		case F_CUT_SC:
			f->dur = between(50, timeout * 2);
			break;
		case F_LOSE_CUT:
			f->dur = between(timeout * 95 / 100, timeout * 3 / 2);
			break;
		case F_SRV_CUT:
			f->dur = between(200, timeout * 3);
			break;
		case F_SRV_DOWN:
			f->dur = between(200, timeout * 2);
			break;
		default:
			f->dur = 0;
		}
	}
	/* In time order, so the printed schedule reads as it happens. */
	for (int i = 1; i < W.nf; i++)
		for (int j = i; j > 0 && W.f[j].at < W.f[j - 1].at; j--) {
			struct fault x = W.f[j];
			W.f[j] = W.f[j - 1];
			W.f[j - 1] = x;
		}
	W.next_reap = between(200, 3000);
	if (W.o.ensemble)
		ens_init();
}

static void print_schedule(FILE *f)
{
	fprintf(f, "schedule of seed %" PRIu64 ": %d clients, session timeout %d ms, delays up to "
	        "%" PRId64 " ms, faults until %" PRId64 " ms\n", W.o.seed, W.ncl, W.cl[0].timeout,
	        W.delay_max, W.fault_end);
	for (int p = 0; p < W.npaths; p++)
		fprintf(f, "  path %s: %s%s\n", W.paths[p].path,
		        W.paths[p].kind == K_WRITE ? "rwlock" : kind_names[W.paths[p].kind],
		        W.paths[p].kind == K_SEM ? (W.paths[p].max == 1 ? " (1 lease)" :
		        W.paths[p].max == 2 ? " (2 leases)" : " (3 leases)") : "");
	for (int j = 0; j < W.nct; j++)
		if (W.o.cont_mask & (1u << j) && W.ct[j].shadow_of < 0)
			fprintf(f, "  contender %d: client %d, %s on %s%s%s, %d cycles\n", j,
			        W.ct[j].cl, kind_names[W.ct[j].kind], W.paths[W.ct[j].path].path,
			        W.ct[j].kind == K_MULTI ? " and " : "",
			        W.ct[j].kind == K_MULTI ? W.paths[W.ct[W.ct[j].shadow].path].path : "",
			        W.ct[j].cycles0);
	for (int i = 0; i < W.nf; i++)
		if (W.o.fault_mask & (1u << i))
		{
			char who[32];
			if ((W.f[i].kind == F_SRV_CUT || W.f[i].kind == F_SRV_DOWN) &&
			    (W.f[i].pick >> 8) & 1)
				snprintf(who, sizeof who, "the leader");
			else if (W.f[i].kind == F_SRV_CUT || W.f[i].kind == F_SRV_DOWN)
				snprintf(who, sizeof who, "server %d", (int)(W.f[i].pick % 3));
			else
				snprintf(who, sizeof who, "client %d", W.f[i].cl);
			fprintf(f, "  fault %d: at %" PRId64 " ms, %s, %s, %" PRId64 " ms\n", i,
			        W.f[i].at, fault_names[W.f[i].kind], who, W.f[i].dur);
		}
	if (W.o.ensemble)
		ens_print(f);
	fprintf(f, "replay: tests/sim/run --seed %" PRIu64 " --faults 0x%x --contenders 0x%x%s%s%s%s%s%s%s%s%s "
	        "--trace\n", W.o.seed, W.o.fault_mask & ((1u << W.nf) - 1),
	        W.o.cont_mask & ((1u << W.nct) - 1),
	        W.o.ensemble ? " --ensemble" : "",
	        W.o.scenario ? " --scenario " : "", W.o.scenario ? ens_scenario_name(W.o.scenario) : "",
	        W.o.leaders ? " --leaders" : W.o.multi ? " --multi" : "",
	        W.o.adopt ? " --adopt" : "", W.o.owners ? " --owners" : "",
	        W.o.guarded ? " --guarded" : "",
	        W.o.sem_peerdel ? " --semaphore-peer-deletes" : "",
	        W.o.known_sem ? " --known-semaphore-stall" : "");
}

static void run_until(int64_t until, bool (*done)(void))
{
	while (W.now < until && !(done && done()))
		if (!step())
			break;
}

static bool all_done(void)
{
	for (int j = 0; j < W.nct; j++)
		if (W.ct[j].st != CT_DONE && W.cl[W.ct[j].cl].life != L_CRASHED)
			return false;
	return true;
}

static void describe_stuck(void)
{
	static const char *const st[] = { "idle", "acquiring", "holding", "done" };
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t->st == CT_DONE || W.cl[t->cl].life == L_CRASHED)
			continue;
		printf("  contender %d (client %d, %s %s): %s, %d cycles left, next at %" PRId64 "\n",
		       j, t->cl, kind_names[t->kind], W.paths[t->path].path, st[t->st], t->cycles,
		       t->next_at);
	}
	for (struct node *n = W.nodes; n; n = n->next)
		if (strncmp(n->path, "/locks/", 7) == 0)
			printf("  node %s owner %" PRIx64 " (%s)\n", n->path,
			       (uint64_t)n->st.ephemeralOwner,
			       n->st.ephemeralOwner ? (alive(n->st.ephemeralOwner) ? "live" : "dead") : "-");
}

/* The stall of RELIABILITY.md's finding 3: every contender still under way is a
 * semaphore's, and one of their paths has more lease nodes than its limit. */
static bool known_semaphore_stall(void)
{
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t->st == CT_DONE || W.cl[t->cl].life == L_CRASHED)
			continue;
		if (t->kind != K_SEM && t->kind != K_SEMMUTEX)
			return false;
		char leases[96];
		snprintf(leases, sizeof leases, "%s/leases", W.paths[t->path].path);
		if (count_children(leases) <= W.paths[t->path].max)
			return false;
	}
	return true;
}

struct stats {
	uint64_t steps;
	uint64_t holds;
	uint64_t exempt;
	uint64_t known_stalls;
	uint64_t simulated_ms;
	uint64_t fifo_pairs;
	uint64_t elections, ens_checked, ens_early;
	uint64_t gw_sent, gw_applied;
};

/* --every-mode: the seed picks one mode, each in turn, so that one soak covers them all;
 * a failure's replay names the mode picked. */
static void every_mode(struct options *o)
{
	o->leaders = o->multi = o->adopt = o->owners = o->guarded = o->ensemble = false;
	switch (o->seed % 7) {
	case 1: o->leaders = true; break;
	case 2: o->multi = true; break;
	case 3: o->adopt = true; break;
	case 4: o->owners = true; break;
	case 5: o->guarded = true; break;
	case 6: o->ensemble = true; break;
	default: break; /* the plain mode */
	}
	o->every = false;
}

static int run(const struct options *given, struct stats *out)
{
	struct options picked = *given;
	if (picked.every)
		every_mode(&picked);
	const struct options *o = &picked;
	memset(&W, 0, sizeof W);
	W.o = *o;
	uuid_rng = 42;
	W.rng = o->seed * 0x2545f4914f6cdd1dULL + 1;
	W.cur = -1;
	W.next_sid = 0x100000;
	struct node *root = xcalloc(1, sizeof *root);
	root->path = xstrdup("/");
	W.nodes = root;
	tree_create("/locks", NULL, 0, 0, 0, NULL, NULL, NULL, NULL);
	if (o->guarded)
		tree_create("/guarded", NULL, 0, 0, 0, NULL, NULL, NULL, NULL);
	scenario();
	if (o->trace)
		print_schedule(stdout);
	zkl__clock_hook = &sim_clock;

	for (int k = 0; k < W.ncl; k++) {
		zkl_client_options opt;
		zkl_client_options_init(&opt);
		opt.servers = "sim:2181";
		opt.session_timeout_ms = W.cl[k].timeout;
		opt.connect_timeout_ms = 60000;
		opt.external_loop = true;
		W.cur = k;
		int rc = W.o.adopt ? zkl__client_adopt_on(&W.cl[k].c, app_open(k), &opt, &sim_ops,
		                                         &W.cl[k])
		                   : zkl__client_open_on(&W.cl[k].c, &opt, &sim_ops, &W.cl[k]);
		W.cur = -1;
		if (rc != 0)
			violation("client %d: open failed: %s (%s)", k, zkl_strerror(rc), zkl_last_error());
		W.cur = k;
		rc = zkl_client_add_listener(W.cl[k].c, on_state, &W.cl[k]);
		W.cur = -1;
		if (rc != 0)
			violation("client %d: cannot add a state listener: %s", k, zkl_strerror(rc));
		for (int j = 0; j < W.nct; j++) {
			if (W.ct[j].cl != k || !(o->cont_mask & (1u << j)) || W.ct[j].shadow_of >= 0)
				continue;
			W.cur = k;
			rc = contender_make(&W.ct[j]);
			W.cur = -1;
			if (make_failed(&W.ct[j], j, rc))
				violation("contender %d: cannot make its lock: %s", j, zkl_strerror(rc));
		}
	}

	/* Faults, then until every contender is done: the liveness bound. */
	run_until(W.fault_end, NULL);
	int64_t bound = W.fault_end + 4 * W.cl[0].timeout;
	/* With an ensemble, from the moment the servers are whole again: nothing commits
	 * while a majority is cut off or down, and a leader is elected after. */
	if (W.o.ensemble && ens_settled() > W.fault_end)
		bound += ens_settled() - W.fault_end;
	for (int j = 0; j < W.nct; j++)
		bound += (int64_t)W.ct[j].cycles * (2500 + 2 * W.cl[0].timeout + 3 * W.cl[0].timeout) *
		         (W.ct[j].kind == K_MULTI ? 2 : 1);
	run_until(bound, all_done);
	bool known = false;
	if (!all_done()) {
		known = W.o.known_sem && known_semaphore_stall();
		if (!known) {
			printf("liveness: contenders not done by %" PRId64 " ms:\n", bound);
			describe_stuck();
			violation("an acquisition or a hold did not end within the liveness bound");
		}
		W.known_stalls++;
		if (W.o.trace)
			describe_stuck();
		trace("known: a semaphore stalled with more leases than its limit (--known-"
		      "semaphore-stall); the rest of the checks are skipped");
	}
	/* Quiet: background deletes end, old sessions close or expire. Then no node of ours
	 * may be left on a live session. */
	if (!known)
		run_until((W.o.ensemble && ens_settled() > W.now ? ens_settled() : W.now) +
		          2 * W.cl[0].timeout + 6000, NULL);
	for (struct node *n = W.nodes; n && !known; n = n->next) {
		if (strncmp(n->path, "/locks/", 7) == 0 && n->st.ephemeralOwner &&
		    alive(n->st.ephemeralOwner)) {
			describe_stuck();
			violation("node %s of session %" PRIx64 " is left with every contender done",
			          n->path, (uint64_t)n->st.ephemeralOwner);
		}
	}
	out->steps = W.steps;
	out->holds = (uint64_t)W.holds;
	out->exempt = (uint64_t)W.exempt;
	out->known_stalls = (uint64_t)W.known_stalls;
	out->simulated_ms = (uint64_t)W.now;
	out->fifo_pairs = W.fifo_pairs;
	out->elections = W.elections;
	out->ens_checked = W.ens_checked;
	out->ens_early = W.ens_early;
	out->gw_sent = W.gw_sent;
	out->gw_applied = W.gw_applied;

	/* Teardown: the dead come back so that everything can be freed. */
	W.tearing_down = true;
	for (int k = 0; k < W.ncl; k++) {
		W.cl[k].life = L_RUN;
		W.cl[k].cs_up = W.cl[k].sc_up = true;
		W.cl[k].part_until = 0;
		process(k);
	}
	for (int j = 0; j < W.nct; j++) {
		W.ct[j].st = CT_DONE;
		if (W.ct[j].l) {
			W.cur = W.ct[j].cl;
			zkl_lock_cancel(W.ct[j].l);
			W.cur = -1;
			contender_free(&W.ct[j]);
		}
	}
	for (int k = 0; k < W.ncl; k++) {
		W.cur = k;
		zkl_client_close(W.cl[k].c);
		W.cl[k].c = NULL;
		if (W.o.adopt) {
			app_close(W.cl[k].to_close);
			app_close(W.cl[k].sess);
		}
		W.cur = -1;
	}
	zkl__clock_hook = NULL;
	while (W.sessions) {
		struct sess *s = W.sessions;
		W.sessions = s->next;
		struct msg *lists[3] = { s->out, s->in, s->held };
		for (int i = 0; i < 3; i++)
			for (struct msg *m = lists[i]; m;) {
				struct msg *nx = m->next;
				msg_free(m);
				m = nx;
			}
		cwatches_free(s);
		free(s);
	}
	while (W.watches) {
		struct watch *w = W.watches;
		W.watches = w->next;
		free(w->path);
		free(w);
	}
	while (W.nodes) {
		struct node *n = W.nodes;
		W.nodes = n->next;
		free(n->path);
		free(n->data);
		free(n);
	}
	return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Workers and children; CI, soak, replay and shrinking
 *
 * The CI and soak modes run schedules in worker processes (--jobs of them), each running
 * schedule after schedule: a worker claims the next seed from memory shared with the
 * parent, says which seed it runs, and adds each run's counts. A worker that dies (a
 * violation ends it with exit status 1; a signal; SIGALRM for a run that takes a minute)
 * loses only the run under way: the parent knows its seed, runs that seed again alone in a
 * child of its own (a replay must fail alone, as the printed command does), and starts a
 * new worker. A worker leaves after WORKER_RUNS schedules, so that whatever a run leaves
 * behind (memory) stays bounded. Nothing a run draws depends on the runs before it in the
 * same process: W and the uuid stream start afresh. */

#define MAXJOBS 8
#define WORKER_RUNS 20000

struct slot {
	uint64_t seed;      /* the seed it runs */
	int running;        /* a run is under way */
	struct stats st;    /* counts of the runs it (and the workers before it) finished */
};

static struct shared {
	uint64_t next_seed; /* claimed with an atomic add */
	uint64_t end_seed;  /* the first seed not to run */
	double deadline;    /* --seconds: no seed is claimed after this (wall clock) */
	int stop;           /* the parent's word: claim no more */
	struct slot slot[MAXJOBS];
	struct stats one;   /* run_child()'s counts */
} *shared;
static bool keep_going_g;    /* --keep-going: a quiet child still says what broke */

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void stats_add(struct stats *to, const struct stats *st)
{
	to->steps += st->steps;
	to->holds += st->holds;
	to->exempt += st->exempt;
	to->known_stalls += st->known_stalls;
	to->simulated_ms += st->simulated_ms;
	to->fifo_pairs += st->fifo_pairs;
	to->elections += st->elections;
	to->ens_checked += st->ens_checked;
	to->ens_early += st->ens_early;
	to->gw_sent += st->gw_sent;
	to->gw_applied += st->gw_applied;
}

static void to_devnull(int fd)
{
	int nul = open("/dev/null", O_WRONLY);
	if (nul >= 0) {
		dup2(nul, fd);
		close(nul);
	}
}

/* Runs one schedule in a child: 0 if every invariant held, 1 if one broke. quiet: its
 * stdout goes nowhere (with --keep-going, the violation's line goes to stderr); silent:
 * its stderr too. */
static int run_child_as(const struct options *o, bool quiet, bool silent)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		if (quiet && !o->trace) {
			quiet_child = keep_going_g;
			to_devnull(1);
			if (silent)
				to_devnull(2);
		}
		/* A run takes milliseconds; one that takes a minute of the machine's time spins
		 * or sleeps where nothing can wake it (SIGALRM ends it, reported below). */
		alarm(60);
		struct stats st = { 0 };
		run(o, &st);
		stats_add(&shared->one, &st);
		fflush(stdout);
		exit(0);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status) && !silent)
		printf("seed %" PRIu64 ": the run died of signal %d%s\n", o->seed, WTERMSIG(status),
		       WTERMSIG(status) == SIGALRM ? " (it ran a minute: a hang or a spin)" : "");
	return 1;
}

static int run_child(const struct options *o, bool quiet)
{
	return run_child_as(o, quiet, false);
}

/* A worker: claims seeds and runs them until none is left, the time is up, the parent
 * says stop, or WORKER_RUNS are done. Its stdout goes nowhere; with --keep-going the
 * violation's line goes to stderr. */
static void worker(int w, const struct options *o)
{
	struct slot *sl = &shared->slot[w];
	quiet_child = keep_going_g;
	to_devnull(1);
	for (int runs = 0; runs < WORKER_RUNS; runs++) {
		if (__atomic_load_n(&shared->stop, __ATOMIC_SEQ_CST))
			break;
		if (shared->deadline > 0 && wall() >= shared->deadline)
			break;
		uint64_t seed = __atomic_fetch_add(&shared->next_seed, 1, __ATOMIC_SEQ_CST);
		if (seed >= shared->end_seed)
			break;
		struct options t = *o;
		t.seed = seed;
		t.trace = false;
		sl->seed = seed;
		__atomic_store_n(&sl->running, 1, __ATOMIC_SEQ_CST);
		alarm(60);
		struct stats st = { 0 };
		run(&t, &st);
		stats_add(&sl->st, &st);
		__atomic_store_n(&sl->running, 0, __ATOMIC_SEQ_CST);
	}
	fflush(stdout);
	_exit(0);
}

static pid_t worker_start(int w, const struct options *o)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0)
		worker(w, o);
	return pid;
}

/* Runs seeds from o->seed on `jobs` workers: count of them (ci), or for `seconds`.
 * Returns the failing seeds (up to max) in *fails, their number in *nfails, and the
 * number of schedules run. */
static uint64_t run_many(const struct options *o, int jobs, long ci, double seconds,
                         bool keep_going, uint64_t *fails, int max, int *nfails)
{
	shared->next_seed = o->seed;
	shared->end_seed = ci > 0 ? o->seed + (uint64_t)ci : UINT64_MAX;
	shared->deadline = seconds > 0 ? wall() + seconds : 0;
	shared->stop = 0;
	pid_t pids[MAXJOBS];
	int alive = 0;
	for (int w = 0; w < jobs; w++) {
		pids[w] = worker_start(w, o);
		alive++;
	}
	*nfails = 0;
	while (alive > 0) {
		int status;
		pid_t pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			perror("waitpid");
			exit(2);
		}
		int w = 0;
		while (w < jobs && pids[w] != pid)
			w++;
		if (w == jobs)
			continue;
		alive--;
		struct slot *sl = &shared->slot[w];
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !sl->running;
		if (!ok) {
			uint64_t seed = sl->seed;
			sl->running = 0;
			if (WIFSIGNALED(status))
				printf("seed %" PRIu64 ": the run died of signal %d%s\n", seed,
				       WTERMSIG(status), WTERMSIG(status) == SIGALRM ?
				       " (it ran a minute: a hang or a spin)" : "");
			if (keep_going)
				printf("seed %" PRIu64 " FAILED after %" PRIu64 " schedules\n", seed,
				       seed - o->seed + 1);
			if (*nfails < max)
				fails[(*nfails)++] = seed;
			if (!keep_going)
				__atomic_store_n(&shared->stop, 1, __ATOMIC_SEQ_CST);
		}
		/* A worker that left while seeds are left (its WORKER_RUNS done, or it died)
		 * has a successor. */
		bool left = !__atomic_load_n(&shared->stop, __ATOMIC_SEQ_CST) &&
		            __atomic_load_n(&shared->next_seed, __ATOMIC_SEQ_CST) < shared->end_seed &&
		            (shared->deadline == 0 || wall() < shared->deadline);
		if (left) {
			pids[w] = worker_start(w, o);
			alive++;
		} else {
			pids[w] = -1;
		}
	}
	uint64_t end = shared->next_seed < shared->end_seed ? shared->next_seed : shared->end_seed;
	return end - o->seed;
}

/* Drops faults, then contenders, one at a time, while the run still fails. */
static void shrink(struct options o)
{
	o.trace = false;
	bool changed = true;
	int runs = 0;
	while (changed && runs < 200) {
		changed = false;
		for (int i = 0; i < 32 && runs < 200; i++) {
			if (!(o.fault_mask & (1u << i)))
				continue;
			struct options t = o;
			t.fault_mask &= ~(1u << i);
			runs++;
			if (run_child(&t, true)) {
				o = t;
				changed = true;
			}
		}
		for (int i = 0; i < MAXK && runs < 200; i++) {
			if (!(o.cont_mask & (1u << i)))
				continue;
			struct options t = o;
			t.cont_mask &= ~(1u << i);
			runs++;
			if (run_child(&t, true)) {
				o = t;
				changed = true;
			}
		}
	}
	/* The schedule's size: its scenario, drawn as the run draws it. */
	memset(&W, 0, sizeof W);
	W.o = o;
	W.rng = o.seed * 0x2545f4914f6cdd1dULL + 1;
	scenario();
	int nf = 0, nct = 0;
	for (int i = 0; i < W.nf; i++)
		nf += (o.fault_mask >> i) & 1;
	for (int j = 0; j < W.nct; j++)
		nct += (o.cont_mask >> j) & 1;
	printf("shrunk (%d runs): %d fault%s, %d contender%s (faults 0x%x, contenders 0x%x); "
	       "its report:\n", runs, nf, nf == 1 ? "" : "s", nct, nct == 1 ? "" : "s",
	       o.fault_mask & ((1u << W.nf) - 1), o.cont_mask & ((1u << W.nct) - 1));
	memset(&W, 0, sizeof W);
	run_child(&o, false);
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: zkl-sim [--seed S] [--trace] [--faults MASK] [--contenders MASK]\n"
	        "       zkl-sim --ci N [--seed S]          N schedules from seed S (default 1)\n"
	        "       zkl-sim --seconds T [--seed S]     schedules from S for T seconds\n"
	        "options: --jobs J (J worker processes, 1 to %d; default 1)\n"
	        "         --no-shrink (report a failure as found)\n"
	        "         --keep-going (list every failing seed, and go on)\n"
	        "         --known-semaphore-stall (count RELIABILITY.md's finding 3, fixed, do not fail:\n"
	        "                                  for replays on code before its fix)\n"
	        "         --semaphore-peer-deletes (a peer deletes semaphore nodes too)\n"
	        "         --leaders (the mutex paths are leader elections, through the\n"
	        "           latch's lock view)\n"
	        "         --multi (mutex paths only; about half the contenders are multi-locks\n"
	        "           of two of them, taken asynchronously through the multi-lock's view,\n"
	        "           or by an owner as a blocking acquire takes them)\n"
	        "         --adopt (the clients' sessions are the application's: adopted, and\n"
	        "           handed over after an expiry)\n"
	        "         --owners (mutex and read-write paths; most contenders act as threads\n"
	        "           through owner ids: they re-enter, and writers downgrade)\n"
	        "         --guarded (each hold makes a guarded write naming its node, checked\n"
	        "           at its commit: the node exists and is the writer session's)\n"
	        "         --ensemble (three servers, a leader and followers: ensemble.c)\n"
	        "         --every-mode (the seed picks the mode, each in turn: plain, --leaders,\n"
	        "           --multi, --adopt, --owners, --guarded, --ensemble; for one soak of all)\n"
	        "         --scenario NAME (a scripted ensemble case: follower-cut, leader-cut,\n"
	        "           grant-idle, quiet-grant; the seed draws the rest)\n",
	        MAXJOBS);
	exit(2);
}

int main(int argc, char **argv)
{
	struct options o = { .seed = 1, .fault_mask = ~0u, .cont_mask = ~0u };
	long ci = 0;
	double seconds = 0;
	int jobs = 1;
	bool do_shrink = true, single = true, keep_going = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--seed") == 0 && v) {
			o.seed = strtoull(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--multi-table") == 0) {
			return multi_table();
		} else if (strcmp(a, "--trace") == 0) {
			o.trace = true;
		} else if (strcmp(a, "--faults") == 0 && v) {
			o.fault_mask = (uint32_t)strtoul(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--contenders") == 0 && v) {
			o.cont_mask = (uint32_t)strtoul(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--ci") == 0 && v) {
			ci = strtol(v, NULL, 0);
			single = false;
			i++;
		} else if (strcmp(a, "--seconds") == 0 && v) {
			seconds = strtod(v, NULL);
			single = false;
			i++;
		} else if (strcmp(a, "--jobs") == 0 && v) {
			jobs = atoi(v);
			if (jobs < 1 || jobs > MAXJOBS)
				usage();
			i++;
		} else if (strcmp(a, "--semaphore-peer-deletes") == 0) {
			o.sem_peerdel = true;
		} else if (strcmp(a, "--known-semaphore-stall") == 0) {
			o.known_sem = true;
		} else if (strcmp(a, "--leaders") == 0) {
			o.leaders = true;
		} else if (strcmp(a, "--multi") == 0) {
			o.multi = true;
		} else if (strcmp(a, "--adopt") == 0) {
			o.adopt = true;
		} else if (strcmp(a, "--owners") == 0) {
			o.owners = true;
		} else if (strcmp(a, "--guarded") == 0) {
			o.guarded = true;
		} else if (strcmp(a, "--ensemble") == 0) {
			o.ensemble = true;
		} else if (strcmp(a, "--every-mode") == 0) {
			o.every = true;
		} else if (strcmp(a, "--scenario") == 0 && v) {
			o.scenario = ens_scenario_named(v);
			if (o.scenario <= 0) {
				fprintf(stderr, "zkl-sim: no scenario named %s\n", v);
				return 2;
			}
			o.ensemble = true;
			i++;
		} else if (strcmp(a, "--keep-going") == 0) {
			keep_going = keep_going_g = true;
		} else if (strcmp(a, "--no-shrink") == 0) {
			do_shrink = false;
		} else {
			usage();
		}
	}
	if (o.every && (o.leaders || o.multi || o.adopt || o.owners || o.guarded || o.ensemble)) {
		fprintf(stderr, "zkl-sim: --every-mode picks the mode itself: give no other\n");
		return 2;
	}
	if ((o.leaders || o.multi) && o.owners) {
		fprintf(stderr, "zkl-sim: --owners goes with neither --leaders nor --multi (its "
		        "paths are mutexes and read-write locks)\n");
		return 2;
	}
	if (o.leaders && o.multi) {
		fprintf(stderr, "zkl-sim: --leaders and --multi do not go together (a multi-lock's "
		        "members are mutexes)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
	              0);
	if (shared == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	memset(shared, 0, sizeof *shared);
	if (single) {
		int rc = run_child(&o, false);
		printf("seed %" PRIu64 ": %s (%" PRIu64 " steps, %" PRIu64 " holds, %" PRIu64
		       " simulated ms)\n", o.seed, rc ? "FAILED" : "ok", shared->one.steps,
		       shared->one.holds, shared->one.simulated_ms);
		return rc;
	}
	double t0 = wall();
	uint64_t fails[256];
	int nfails = 0;
	uint64_t n = run_many(&o, jobs, ci, seconds, keep_going, fails, 256, &nfails);
	double dt = wall() - t0;
	/* Every failing seed must fail alone too: the command a failure prints runs it so. */
	for (int i = 0; keep_going && i < nfails; i++) {
		struct options t = o;
		t.seed = fails[i];
		t.trace = false;
		if (!run_child_as(&t, true, true))
			printf("seed %" PRIu64 " failed in a worker but passes alone: a run depends on "
			       "the runs before it in the process\n", t.seed);
	}
	if (!keep_going && nfails > 0) {
		/* The lowest failing seed (with several workers, others may have failed too). */
		uint64_t first = fails[0];
		for (int i = 1; i < nfails; i++)
			if (fails[i] < first)
				first = fails[i];
		struct options t = o;
		t.seed = first;
		t.trace = false;
		printf("seed %" PRIu64 " FAILED after %" PRIu64 " schedules\n", first,
		       first - o.seed + 1);
		if (!run_child(&t, false)) {
			printf("seed %" PRIu64 " failed in a worker but passes alone: a run depends on "
			       "the runs before it in the process\n", first);
			return 1;
		}
		if (do_shrink)
			shrink(t);
		return 1;
	}
	struct stats tot = { 0 };
	for (int w = 0; w < MAXJOBS; w++)
		stats_add(&tot, &shared->slot[w].st);
	if (o.ensemble || o.every)
		printf("ensemble: %" PRIu64 " elections; %" PRIu64 " holders' sessions expired by "
		       "the leader checked against their client's loss deadline, %" PRIu64 " of them "
		       "expired before it (within the documented bound)\n", tot.elections,
		       tot.ens_checked, tot.ens_early);
	if (o.guarded || o.every)
		printf("guarded writes: %" PRIu64 " started, %" PRIu64 " applied, each while its "
		       "hold's node existed and was its session's\n", tot.gw_sent, tot.gw_applied);
	printf("%" PRIu64 " schedules (seeds %" PRIu64 "..%" PRIu64 "), %" PRIu64 " steps, %" PRIu64
	       " holds, %.1f simulated hours, %" PRIu64 " holds unchecked (suspended or crashed), "
	       "%" PRIu64 " waiting contenders a grant was checked against (FIFO), %" PRIu64
	       " known semaphore stalls%s; %.1f s on %d worker%s (%.0f schedules/s), %d "
	       "violations\n", n,
	       o.seed, o.seed + n - 1, tot.steps, tot.holds, (double)tot.simulated_ms / 3.6e6,
	       tot.exempt, tot.fifo_pairs, tot.known_stalls, o.known_sem ? "" : " (not looked for)", dt, jobs,
	       jobs == 1 ? "" : "s", dt > 0 ? (double)n / dt : 0.0, nfails);
	return nfails ? 1 : 0;
}
