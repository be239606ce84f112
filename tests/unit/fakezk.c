/* An in-memory ZooKeeper under the request layer (fakezk.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakezk.h"
#include "internal.h"

struct node {
	struct node *next;
	char *path;
	char *data;
	int len;
	struct Stat st;
	bool container;
};

enum watch_kind { W_DATA, W_CHILD };

struct watch {
	struct watch *next;
	struct session *s;
	char *path;
	enum watch_kind kind;
	watcher_fn fn;
	void *ctx;
};

/* Something for a session's delivery thread to do: a request to apply and answer, or
 * an event to deliver. */
enum item_kind { I_REQUEST, I_WATCH, I_SESSION, I_RECONNECT };

struct item {
	struct item *next;
	enum item_kind kind;
	/* I_REQUEST */
	enum fz_op op;
	char *path;
	char *data;
	int len;
	int mode;
	int version;
	watcher_fn wfn;
	void *wctx;
	void (*done)(void);
	const void *arg;
	bool hooked;            /* the hook has seen it */
	/* FZ_MULTI: its ops (copied), and where their results go */
	struct sub *subs;
	int nsubs;
	zoo_op_result_t *results;
	/* I_WATCH, I_SESSION */
	watcher_fn fn;
	void *ctx;
	int type;
	int state;
};

/* One op of a multi, copied from the caller's zoo_op_t. */
struct sub {
	int type;               /* ZOO_CREATE_OP ... ZOO_CHECK_OP */
	char *path;
	char *data;
	int len;
	int mode;
	int version;
	/* filled when it is applied */
	int err;
	char *created;
	struct Stat st;
};

enum sstate { S_CONNECTED, S_DISCONNECTED, S_EXPIRED, S_CLOSED };

struct session {
	struct session *next;
	struct fz *z;
	int64_t id;
	int timeout;
	watcher_fn fn;
	void *ctx;
	enum sstate state;
	bool paused;
	unsigned resumes;        /* fz_pause(.., false) calls: one made while a hook ran
	                          * that paused cancels that pause */
	bool stop;
	bool dropping;           /* a connection loss is being delivered */
	struct item *head, *tail;
	struct item *swallowed;  /* FZ_SWALLOW: left unanswered */
	pthread_t thread;
	pthread_cond_t cv;
};

struct fz {
	pthread_mutex_t mu;
	pthread_cond_t changed;
	uint64_t changes;
	struct node *nodes;
	struct watch *watches;
	struct session *sessions;
	int64_t zxid;
	bool in_multi;          /* the ops of a multi share one zxid, as the server's do */
	int64_t next_id;
	fz_hook_fn hook;
	void *hook_arg;
	/* The first request sent by a thread that does not run its client's loop (only the
	 * loop sends: zk.h), and how many there were. */
	char stray[300];
	unsigned strays;
};

/* ------------------------------------------------------------------------------------ */
/* The tree (mu held) */

static void changed(struct fz *z)
{
	z->changes++;
	pthread_cond_broadcast(&z->changed);
}

static void next_zxid(struct fz *z)
{
	if (!z->in_multi)
		z->zxid++;
}

static struct node *find(struct fz *z, const char *path)
{
	for (struct node *n = z->nodes; n; n = n->next)
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

static struct node *parent_of(struct fz *z, const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == path)
		return find(z, "/");
	char buf[1024];
	size_t n = (size_t)(slash - path);
	if (n >= sizeof buf)
		return NULL;
	memcpy(buf, path, n);
	buf[n] = 0;
	return find(z, buf);
}

static int count_children(struct fz *z, const char *path)
{
	int k = 0;
	for (struct node *n = z->nodes; n; n = n->next)
		k += is_child(path, n->path);
	return k;
}

static void enqueue(struct session *s, struct item *it)
{
	it->next = NULL;
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	pthread_cond_signal(&s->cv);
}

/* The requests swallowed go back in line, to fail as the session's state says (mu). */
static void unswallow(struct session *s)
{
	while (s->swallowed) {
		struct item *it = s->swallowed;
		s->swallowed = it->next;
		enqueue(s, it);
	}
}

/* Fires the watches of kind on path with event type. Those of `self` go to *own, to be
 * delivered before its answer; the others are queued. */
static void fire(struct fz *z, const char *path, enum watch_kind kind, int type,
                 struct session *self, struct item **own)
{
	for (struct watch **pp = &z->watches; *pp;) {
		struct watch *w = *pp;
		if (w->kind != kind || strcmp(w->path, path) != 0) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		struct item *it = calloc(1, sizeof *it);
		if (!it)
			abort();
		it->kind = I_WATCH;
		it->fn = w->fn;
		it->ctx = w->ctx;
		it->type = type;
		it->state = ZOO_CONNECTED_STATE;
		it->path = w->path;
		if (w->s == self && own) {
			it->next = *own;
			*own = it;
		} else {
			enqueue(w->s, it);
		}
		free(w);
	}
}

static int tree_create(struct fz *z, const char *path, const char *data, int len, int mode,
                       int64_t owner, char **created, struct Stat *st, struct session *self,
                       struct item **own)
{
	if (path[0] != '/' || strcmp(path, "/") == 0)
		return ZBADARGUMENTS;
	struct node *p = parent_of(z, path);
	if (!p)
		return ZNONODE;
	if (p->st.ephemeralOwner)
		return ZNOCHILDRENFOREPHEMERALS;
	char name[1100];
	if (mode & ZOO_SEQUENCE)
		snprintf(name, sizeof name, "%s%010" PRId32, path, p->st.cversion);
	else
		snprintf(name, sizeof name, "%s", path);
	if (find(z, name))
		return ZNODEEXISTS;
	struct node *n = calloc(1, sizeof *n);
	if (!n || !(n->path = strdup(name)))
		abort();
	if (data && len >= 0) {
		n->data = malloc((size_t)len + 1);
		memcpy(n->data, data, (size_t)len);
		n->len = len;
	}
	n->container = mode == ZOO_CONTAINER;
	next_zxid(z);
	n->st.czxid = n->st.mzxid = n->st.pzxid = z->zxid;
	n->st.ctime = n->st.mtime = z->zxid * 1000;
	n->st.ephemeralOwner = (mode & ZOO_EPHEMERAL) ? owner : 0;
	n->st.dataLength = n->len;
	n->next = z->nodes;
	z->nodes = n;
	/* The child version counts on as the server's int does, wrapping. */
	p->st.cversion = (int32_t)((uint32_t)p->st.cversion + 1);
	p->st.pzxid = z->zxid;
	if (created)
		*created = strdup(name);
	if (st)
		*st = n->st;
	fire(z, name, W_DATA, ZOO_CREATED_EVENT, self, own);
	fire(z, p->path, W_CHILD, ZOO_CHILD_EVENT, self, own);
	changed(z);
	return ZOK;
}

static int tree_delete(struct fz *z, const char *path, int version, struct session *self,
                       struct item **own)
{
	struct node *n = find(z, path);
	if (!n)
		return ZNONODE;
	if (version >= 0 && version != n->st.version)
		return ZBADVERSION;
	if (count_children(z, path) > 0)
		return ZNOTEMPTY;
	struct node *p = parent_of(z, path);
	for (struct node **pp = &z->nodes; *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	}
	next_zxid(z);
	if (p) {
		p->st.cversion = (int32_t)((uint32_t)p->st.cversion + 1);
		p->st.pzxid = z->zxid;
	}
	fire(z, path, W_DATA, ZOO_DELETED_EVENT, self, own);
	fire(z, path, W_CHILD, ZOO_DELETED_EVENT, self, own);
	if (p)
		fire(z, p->path, W_CHILD, ZOO_CHILD_EVENT, self, own);
	free(n->path);
	free(n->data);
	free(n);
	changed(z);
	return ZOK;
}

static int tree_set(struct fz *z, const char *path, const char *data, int len, int version,
                    struct Stat *st, struct session *self, struct item **own)
{
	struct node *n = find(z, path);
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
	next_zxid(z);
	n->st.mzxid = z->zxid;
	n->st.mtime = z->zxid * 1000;
	n->st.version++;
	n->st.dataLength = n->len;
	if (st)
		*st = n->st;
	fire(z, path, W_DATA, ZOO_CHANGED_EVENT, self, own);
	changed(z);
	return ZOK;
}

static int tree_check(struct fz *z, const char *path, int version)
{
	struct node *n = find(z, path);
	if (!n)
		return ZNONODE;
	if (version >= 0 && version != n->st.version)
		return ZBADVERSION;
	return ZOK;
}

static int sub_apply(struct fz *z, struct sub *o, int64_t owner, struct session *self,
                     struct item **own)
{
	switch (o->type) {
	case ZOO_CREATE_OP:
		return tree_create(z, o->path, o->data, o->len, o->mode, owner, &o->created, &o->st,
		                   self, own);
	case ZOO_DELETE_OP:
		return tree_delete(z, o->path, o->version, self, own);
	case ZOO_SETDATA_OP:
		return tree_set(z, o->path, o->data, o->len, o->version, &o->st, self, own);
	case ZOO_CHECK_OP:
		return tree_check(z, o->path, o->version);
	}
	return ZUNIMPLEMENTED;
}

static void subs_free(struct sub *subs, int n)
{
	for (int i = 0; i < n; i++) {
		free(subs[i].path);
		free(subs[i].data);
		free(subs[i].created);
	}
	free(subs);
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
		struct node *c = calloc(1, sizeof *c);
		if (!c || !(c->path = strdup(n->path)))
			abort();
		*c = (struct node){ .path = c->path, .len = n->len, .st = n->st,
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

/* A multi (mu held): its ops run in order on a copy of the tree, watches aside; if one
 * fails, the tree is left as it was and the results say which (the ones before it ZOK,
 * the ones after ZRUNTIMEINCONSISTENCY, as the server answers); else they run again on
 * the tree itself, under one zxid, firing watches. */
static int tree_multi(struct fz *z, struct item *it, int64_t owner, struct session *self,
                      struct item **own)
{
	struct node *real = z->nodes;
	struct watch *watches = z->watches;
	const int64_t zxid = z->zxid;
	z->nodes = nodes_copy(real);
	z->watches = NULL;
	z->zxid++;
	z->in_multi = true;
	int failed = -1, rc = ZOK;
	for (int i = 0; i < it->nsubs && failed < 0; i++) {
		if ((rc = sub_apply(z, &it->subs[i], owner, NULL, NULL)) != ZOK)
			failed = i;
	}
	nodes_free(z->nodes);
	z->nodes = real;
	z->watches = watches;
	z->zxid = zxid;
	if (failed >= 0) {
		z->in_multi = false;
		for (int i = 0; i < it->nsubs; i++) {
			struct sub *o = &it->subs[i];
			free(o->created);
			o->created = NULL;
			o->err = i < failed ? ZOK : i == failed ? rc : ZRUNTIMEINCONSISTENCY;
		}
		return rc;
	}
	z->zxid++;
	for (int i = 0; i < it->nsubs; i++) {
		struct sub *o = &it->subs[i];
		free(o->created);
		o->created = NULL;
		o->err = sub_apply(z, o, owner, self, own);
		if (o->err != ZOK)
			abort(); /* it passed on the copy */
	}
	z->in_multi = false;
	return ZOK;
}

static void add_watch(struct fz *z, struct session *s, const char *path, enum watch_kind kind,
                      watcher_fn fn, void *ctx)
{
	struct watch *w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(path)))
		abort();
	w->s = s;
	w->kind = kind;
	w->fn = fn;
	w->ctx = ctx;
	w->next = z->watches;
	z->watches = w;
	changed(z);
}

/* A session ends (mu held): its ephemeral nodes go, firing others' watches, and its
 * own watches are dropped. */
static void end_session(struct fz *z, int64_t id, struct session *s)
{
	for (struct watch **pp = &z->watches; *pp;) {
		struct watch *w = *pp;
		if (s && w->s == s) {
			*pp = w->next;
			free(w->path);
			free(w);
		} else {
			pp = &w->next;
		}
	}
	for (;;) {
		struct node *n = z->nodes;
		while (n && n->st.ephemeralOwner != id)
			n = n->next;
		if (!n)
			break;
		char *path = strdup(n->path);
		tree_delete(z, path, -1, NULL, NULL);
		free(path);
	}
}

/* ------------------------------------------------------------------------------------ */
/* Sessions */

static void session_event(struct session *s, int state, bool to_watches)
{
	struct item *it = calloc(1, sizeof *it);
	if (!it)
		abort();
	it->kind = I_SESSION;
	it->fn = s->fn;
	it->ctx = s->ctx;
	it->type = ZOO_SESSION_EVENT;
	it->state = state;
	enqueue(s, it);
	if (!to_watches)
		return;
	/* The C client tells every watch of the handle too. */
	for (struct watch *w = s->z->watches; w; w = w->next) {
		if (w->s != s)
			continue;
		struct item *e = calloc(1, sizeof *e);
		if (!e || !(e->path = strdup(w->path)))
			abort();
		e->kind = I_WATCH;
		e->fn = w->fn;
		e->ctx = w->ctx;
		e->type = ZOO_SESSION_EVENT;
		e->state = state;
		enqueue(s, e);
	}
}

static struct session *session_find(struct fz *z, int64_t id)
{
	for (struct session *s = z->sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static void item_free(struct item *it)
{
	subs_free(it->subs, it->nsubs);
	free(it->path);
	free(it->data);
	free(it);
}

/* What a request's answer carries, besides its code. */
struct answer {
	const char *created;
	const struct Stat *st;
	const struct String_vector *names;
	const char *value;
	int len;
};

/* A multi's results, as the C client fills them from the server's answer. */
static void multi_results(struct item *it)
{
	bool ok = true;
	for (int i = 0; i < it->nsubs; i++)
		ok = ok && it->subs[i].err == ZOK;
	for (int i = 0; i < it->nsubs; i++) {
		const struct sub *o = &it->subs[i];
		zoo_op_result_t *r = &it->results[i];
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

/* Calls the request's completion (no lock held). */
static void answer(struct item *it, int rc, const struct answer *a)
{
	static const struct answer none = { .len = -1 };
	const bool from_server = a != NULL; /* else the request failed on its own */
	if (rc != ZOK)
		a = &none;
	switch (it->op) {
	case FZ_CREATE:
		((string_stat_completion_t)it->done)(rc, a->created, a->st, it->arg);
		break;
	case FZ_DELETE:
	case FZ_CHECK:
		((void_completion_t)it->done)(rc, it->arg);
		break;
	case FZ_MULTI:
		/* The server answered: every op has its result. */
		if (from_server)
			multi_results(it);
		((void_completion_t)it->done)(rc, it->arg);
		break;
	case FZ_CHILDREN:
		((strings_completion_t)it->done)(rc, a->names, it->arg);
		break;
	case FZ_GET:
		((data_completion_t)it->done)(rc, a->value, a->len, a->st, it->arg);
		break;
	case FZ_EXISTS:
	case FZ_SET:
		((stat_completion_t)it->done)(rc, a->st, it->arg);
		break;
	case FZ_SYNC:
		((string_completion_t)it->done)(rc, rc == ZOK ? it->path : NULL, it->arg);
		break;
	}
}

static void answer_error(struct item *it, int rc)
{
	answer(it, rc, NULL);
}

static void deliver(struct session *s, struct item *list)
{
	while (list) {
		struct item *e = list;
		list = e->next;
		e->fn((zhandle_t *)s, e->type, e->state, e->path, e->ctx);
		item_free(e);
	}
}

/* Applies a request and answers it (delivery thread; no lock held on entry). */
static void apply(struct session *s, struct item *it, enum fz_action action, int hook_rc)
{
	struct fz *z = s->z;
	struct item *own = NULL;
	int rc = ZOK;
	char *created = NULL;
	struct Stat st;
	memset(&st, 0, sizeof st);
	char **names = NULL;
	int count = 0;
	char *value = NULL;
	int vlen = -1;

	pthread_mutex_lock(&z->mu);
	if (action == FZ_REFUSE) {
		rc = hook_rc;
	} else {
		switch (it->op) {
		case FZ_CREATE:
			rc = tree_create(z, it->path, it->data, it->len, it->mode, s->id, &created, &st,
			                 s, &own);
			break;
		case FZ_DELETE:
			rc = tree_delete(z, it->path, it->version, s, &own);
			break;
		case FZ_SET:
			rc = tree_set(z, it->path, it->data, it->len, it->version, &st, s, &own);
			break;
		case FZ_EXISTS:
		case FZ_GET: {
			struct node *n = find(z, it->path);
			/* An exists leaves its watch either way: on a missing node it fires when
			 * the node is made (the data watches hear creations). */
			if (it->op == FZ_EXISTS && it->wfn)
				add_watch(z, s, it->path, W_DATA, it->wfn, it->wctx);
			if (!n) {
				rc = ZNONODE;
				break;
			}
			st = n->st;
			st.numChildren = count_children(z, it->path);
			if (it->op == FZ_GET) {
				vlen = n->data ? n->len : -1;
				value = n->data ? malloc((size_t)n->len + 1) : NULL;
				if (value)
					memcpy(value, n->data, (size_t)n->len);
				if (it->wfn)
					add_watch(z, s, it->path, W_DATA, it->wfn, it->wctx);
			}
			break;
		}
		case FZ_CHILDREN: {
			if (!find(z, it->path)) {
				rc = ZNONODE;
				break;
			}
			int k = count_children(z, it->path);
			names = calloc((size_t)k + 1, sizeof *names);
			/* The server's order is no order: hand them out newest first. */
			for (struct node *n = z->nodes; n; n = n->next)
				if (is_child(it->path, n->path))
					names[count++] = strrchr(n->path, '/') + 1;
			if (it->wfn)
				add_watch(z, s, it->path, W_CHILD, it->wfn, it->wctx);
			break;
		}
		case FZ_SYNC:
			break;
		case FZ_CHECK:
			if (!find(z, it->path))
				rc = ZNONODE;
			break;
		case FZ_MULTI:
			rc = tree_multi(z, it, s->id, s, &own);
			break;
		}
	}
	bool lose = action == FZ_LOSE;
	struct item *failed = NULL;
	if (lose) {
		/* The connection drops before the answer: what is still queued fails too. */
		failed = s->head;
		s->head = s->tail = NULL;
		s->state = S_DISCONNECTED;
		session_event(s, ZOO_CONNECTING_STATE, true);
		struct item *r = calloc(1, sizeof *r);
		if (!r)
			abort();
		r->kind = I_RECONNECT;
		enqueue(s, r);
	}
	struct String_vector sv = { count, names };
	/* Copies survive the unlock: the names point into nodes another thread may free. */
	for (int i = 0; i < count; i++)
		names[i] = strdup(names[i]);
	changed(z);
	pthread_mutex_unlock(&z->mu);

	if (getenv("FZ_LOG"))
		fprintf(stderr, "[fz %llx] op %d %s -> %d%s\n", (unsigned long long)s->id, (int)it->op,
		        it->path, rc, lose ? " (answer lost)" : "");
	deliver(s, own);
	if (lose) {
		answer_error(it, ZCONNECTIONLOSS);
	} else {
		const struct answer a = { created, &st, &sv, value, vlen };
		/* A refused request failed on its own: a multi's results are not filled. */
		answer(it, rc, action == FZ_REFUSE && rc != ZOK ? NULL : &a);
	}
	while (failed) {
		struct item *f = failed;
		failed = f->next;
		if (f->kind == I_REQUEST)
			answer_error(f, ZCONNECTIONLOSS);
		else if (f->kind == I_WATCH || f->kind == I_SESSION)
			f->fn((zhandle_t *)s, f->type, f->state, f->path, f->ctx);
		item_free(f);
	}
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
	free(created);
	free(value);
}

static void *delivery_main(void *arg)
{
	struct session *s = arg;
	struct fz *z = s->z;
	pthread_mutex_lock(&z->mu);
	for (;;) {
		while (!s->stop && (!s->head || s->paused))
			pthread_cond_wait(&s->cv, &z->mu);
		if (!s->head && s->stop)
			break;
		if (!s->head || (s->paused && !s->stop))
			continue;
		struct item *it = s->head;
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		if (it->kind == I_RECONNECT) {
			if (getenv("FZ_LOG"))
				fprintf(stderr, "[fz %llx] reconnected\n", (unsigned long long)s->id);
			if (s->state == S_DISCONNECTED) {
				s->state = S_CONNECTED;
				session_event(s, ZOO_CONNECTED_STATE, true);
			}
			item_free(it);
			changed(z);
			continue;
		}
		if (it->kind != I_REQUEST) {
			pthread_mutex_unlock(&z->mu);
			it->fn((zhandle_t *)s, it->type, it->state, it->path, it->ctx);
			pthread_mutex_lock(&z->mu);
			item_free(it);
			changed(z);
			continue;
		}
		int gone = 0;
		if (s->state == S_EXPIRED)
			gone = ZSESSIONEXPIRED;
		else if (s->state == S_CLOSED)
			gone = ZCLOSING;
		else if (s->state == S_DISCONNECTED)
			gone = ZCONNECTIONLOSS;
		fz_hook_fn hook = z->hook;
		void *hook_arg = z->hook_arg;
		const unsigned resumes = s->resumes;
		pthread_mutex_unlock(&z->mu);
		if (gone) {
			if (getenv("FZ_LOG"))
				fprintf(stderr, "[fz %llx] op %d %s -> %d (not connected)\n",
				        (unsigned long long)s->id, (int)it->op, it->path, gone);
			answer_error(it, gone);
		} else {
			enum fz_action action = FZ_APPLY;
			int rc = ZOK;
			if (hook && !it->hooked) {
				struct fz_request r = { s->id, it->op, it->path, it->wfn != NULL, it->mode };
				action = hook(hook_arg, &r, &rc);
				it->hooked = true;
			}
			if (action == FZ_PAUSE) {
				if (getenv("FZ_LOG"))
					fprintf(stderr, "[fz %llx] op %d %s held back (the session "
					        "paused)\n", (unsigned long long)s->id, (int)it->op,
					        it->path);
				pthread_mutex_lock(&z->mu);
				it->next = s->head;
				s->head = it;
				if (!s->tail)
					s->tail = it;
				/* A test that saw the hook's effect may have resumed the session
				 * already, before this pause took hold: then it does not. */
				s->paused = s->resumes == resumes;
				changed(z);
				continue;
			}
			if (action == FZ_SWALLOW) {
				pthread_mutex_lock(&z->mu);
				it->next = s->swallowed;
				s->swallowed = it;
				changed(z);
				continue;
			}
			apply(s, it, action, rc);
		}
		item_free(it);
		pthread_mutex_lock(&z->mu);
		changed(z);
	}
	pthread_mutex_unlock(&z->mu);
	return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* The request layer's table */

static zhandle_t *op_open(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
                          void *ctx, bool quiet, struct zkl_zk_creds *creds)
{
	(void)servers;
	(void)quiet;
	(void)creds;
	struct fz *z = self;
	struct session *s = calloc(1, sizeof *s);
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->z = z;
	s->timeout = timeout_ms;
	s->fn = watcher;
	s->ctx = ctx;
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_lock(&z->mu);
	s->id = ++z->next_id;
	s->state = S_CONNECTED;
	s->next = z->sessions;
	z->sessions = s;
	session_event(s, ZOO_CONNECTED_STATE, false);
	pthread_mutex_unlock(&z->mu);
	if (pthread_create(&s->thread, NULL, delivery_main, s) != 0)
		abort();
	return (zhandle_t *)s;
}

static void op_close(zhandle_t *zh)
{
	struct session *s = (struct session *)zh;
	struct fz *z = s->z;
	pthread_mutex_lock(&z->mu);
	if (s->state != S_EXPIRED)
		end_session(z, s->id, s);
	s->state = S_CLOSED;
	unswallow(s);
	s->stop = true;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&z->mu);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&z->mu);
	for (struct session **pp = &z->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	/* Watches it armed while closing go with it. */
	end_session(z, s->id, s);
	changed(z);
	pthread_mutex_unlock(&z->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static int64_t op_session_id(zhandle_t *zh)
{
	return ((struct session *)zh)->id;
}

static int op_timeout(zhandle_t *zh)
{
	return ((struct session *)zh)->timeout;
}

static int submit_multi(zhandle_t *zh, enum fz_op op, const char *path, const char *data,
                        int len, int mode, int version, watcher_fn wfn, void *wctx,
                        void (*done)(void), const void *arg, struct sub *subs, int nsubs,
                        zoo_op_result_t *results);

static int submit(zhandle_t *zh, enum fz_op op, const char *path, const char *data, int len,
                  int mode, int version, watcher_fn wfn, void *wctx, void (*done)(void),
                  const void *arg)
{
	return submit_multi(zh, op, path, data, len, mode, version, wfn, wctx, done, arg, NULL, 0,
	                    NULL);
}

/* submit(), with a multi's ops (taken over) and results. */
static int submit_multi(zhandle_t *zh, enum fz_op op, const char *path, const char *data,
                        int len, int mode, int version, watcher_fn wfn, void *wctx,
                        void (*done)(void), const void *arg, struct sub *subs, int nsubs,
                        zoo_op_result_t *results)
{
	struct session *s = (struct session *)zh;
	struct fz *z = s->z;
	/* Sessions are opened by zkl__client_open_on(), whose watcher context is the
	 * client's session record. */
	zkl_client *owner = ((struct zkl_session *)s->ctx)->c;
	/* A release's delete is sent by the releasing thread (zkl__task_delete_now); with
	 * confirm_release the release waits for the answer and the loop sends it. */
	const bool release = op == FZ_DELETE && !owner->confirm_release;
	const bool stray = !owner->external && !zkl__on_event_thread(owner) && !release;
	struct item *it = calloc(1, sizeof *it);
	if (!it || !(it->path = strdup(path)))
		abort();
	it->kind = I_REQUEST;
	it->op = op;
	if (data && len >= 0) {
		it->data = malloc((size_t)len + 1);
		memcpy(it->data, data, (size_t)len);
		it->len = len;
	} else {
		it->len = -1;
	}
	it->mode = mode;
	it->version = version;
	it->wfn = wfn;
	it->wctx = wctx;
	it->done = done;
	it->arg = arg;
	it->subs = subs;
	it->nsubs = nsubs;
	it->results = results;
	pthread_mutex_lock(&z->mu);
	if (stray && z->strays++ == 0)
		snprintf(z->stray, sizeof z->stray, "request %d on %s", (int)op, path);
	if (s->state == S_EXPIRED || s->state == S_CLOSED) {
		pthread_mutex_unlock(&z->mu);
		item_free(it);
		return ZINVALIDSTATE;
	}
	enqueue(s, it);
	changed(z);
	pthread_mutex_unlock(&z->mu);
	return ZOK;
}

static int op_create(zhandle_t *zh, const char *path, const char *data, int len,
                     const struct ACL_vector *acl, int mode, string_stat_completion_t done,
                     const void *arg)
{
	(void)acl;
	return submit(zh, FZ_CREATE, path, data, data ? len : -1, mode, -1, NULL, NULL,
	              (void (*)(void))done, arg);
}

static int op_remove(zhandle_t *zh, const char *path, int version, void_completion_t done,
                     const void *arg)
{
	return submit(zh, FZ_DELETE, path, NULL, -1, 0, version, NULL, NULL,
	              (void (*)(void))done, arg);
}

static int op_children(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                       strings_completion_t done, const void *arg)
{
	return submit(zh, FZ_CHILDREN, path, NULL, -1, 0, -1, watcher, wctx,
	              (void (*)(void))done, arg);
}

static int op_get(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                  data_completion_t done, const void *arg)
{
	return submit(zh, FZ_GET, path, NULL, -1, 0, -1, watcher, wctx, (void (*)(void))done, arg);
}

static int op_exists(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                     stat_completion_t done, const void *arg)
{
	return submit(zh, FZ_EXISTS, path, NULL, -1, 0, -1, watcher, wctx, (void (*)(void))done,
	              arg);
}

static int op_set(zhandle_t *zh, const char *path, const char *data, int len, int version,
                  stat_completion_t done, const void *arg)
{
	return submit(zh, FZ_SET, path, data, len, 0, version, NULL, NULL, (void (*)(void))done,
	              arg);
}

static int op_sync(zhandle_t *zh, const char *path, string_completion_t done, const void *arg)
{
	return submit(zh, FZ_SYNC, path, NULL, -1, 0, -1, NULL, NULL, (void (*)(void))done, arg);
}

static int op_check(zhandle_t *zh, const char *path, void_completion_t done, const void *arg)
{
	return submit(zh, FZ_CHECK, path, NULL, -1, 0, -1, NULL, NULL, (void (*)(void))done, arg);
}

/* A multi's ops, copied; where each result goes is set in results, as the C client does
 * when it sends them. NULL if one is of no kind a multi takes. */
static struct sub *subs_copy(int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
	struct sub *subs = calloc((size_t)count + 1, sizeof *subs);
	if (!subs)
		abort();
	for (int i = 0; i < count; i++) {
		const zoo_op_t *op = &ops[i];
		struct sub *o = &subs[i];
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
		case ZOO_CHECK_OP:
			path = op->check_op.path;
			o->version = op->check_op.version;
			break;
		default:
			subs_free(subs, i);
			return NULL;
		}
		if (!path || !(o->path = strdup(path)))
			abort();
		o->len = len;
		if (data && len >= 0) {
			o->data = malloc((size_t)len + 1);
			memcpy(o->data, data, (size_t)len);
		}
	}
	return subs;
}

static int op_multi(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                    void_completion_t done, const void *arg)
{
	if (count < 0 || (count > 0 && (!ops || !results)))
		return ZBADARGUMENTS;
	struct sub *subs = subs_copy(count, ops, results);
	if (!subs)
		return ZBADARGUMENTS;
	return submit_multi(zh, FZ_MULTI, count > 0 ? subs[0].path : "/", NULL, -1, 0, -1, NULL,
	                    NULL, (void (*)(void))done, arg, subs, count, results);
}

static const struct zkl_zk_ops fz_ops = {
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
};

/* ------------------------------------------------------------------------------------ */
/* The test's side */

struct fz *fz_new(void)
{
	struct fz *z = calloc(1, sizeof *z);
	if (!z)
		abort();
	pthread_mutex_init(&z->mu, NULL);
	pthread_cond_init(&z->changed, NULL);
	z->next_id = 0x1000;
	struct node *root = calloc(1, sizeof *root);
	if (!root || !(root->path = strdup("/")))
		abort();
	z->nodes = root;
	return z;
}

void fz_free(struct fz *z)
{
	if (!z)
		return;
	if (z->sessions) {
		fprintf(stderr, "fakezk: freed with a session still open\n");
		abort();
	}
	if (z->strays) {
		fprintf(stderr, "fakezk: %u requests were sent by a thread that does not run "
		        "the client's loop, the first: %s\n", z->strays, z->stray);
		abort();
	}
	while (z->watches) {
		struct watch *w = z->watches;
		z->watches = w->next;
		free(w->path);
		free(w);
	}
	while (z->nodes) {
		struct node *n = z->nodes;
		z->nodes = n->next;
		free(n->path);
		free(n->data);
		free(n);
	}
	pthread_cond_destroy(&z->changed);
	pthread_mutex_destroy(&z->mu);
	free(z);
}

int fz_multi(struct fz *z, int64_t owner, int count, const zoo_op_t *ops,
             zoo_op_result_t *results)
{
	if (count < 0 || (count > 0 && (!ops || !results)))
		return ZBADARGUMENTS;
	struct item it = { .op = FZ_MULTI, .nsubs = count, .results = results };
	if (!(it.subs = subs_copy(count, ops, results)))
		return ZBADARGUMENTS;
	pthread_mutex_lock(&z->mu);
	int rc = tree_multi(z, &it, owner, NULL, NULL);
	changed(z);
	pthread_mutex_unlock(&z->mu);
	multi_results(&it);
	subs_free(it.subs, it.nsubs);
	return rc;
}

void fz_set_hook(struct fz *z, fz_hook_fn fn, void *arg)
{
	pthread_mutex_lock(&z->mu);
	z->hook = fn;
	z->hook_arg = arg;
	pthread_mutex_unlock(&z->mu);
}

static void log_stderr(zkl_log_level level, const char *msg, void *data)
{
	(void)data;
	fprintf(stderr, "[zkl %d] %s\n", (int)level, msg);
}

int fz_client_open(struct fz *z, zkl_client **out, const zkl_client_options *o)
{
	zkl_client_options d;
	if (!o) {
		zkl_client_options_init(&d);
		d.session_timeout_ms = 20000;
		o = &d;
	}
	zkl_client_options copy = *o;
	copy.servers = "fake:2181";
	if (getenv("FZ_LOG")) {
		copy.log = log_stderr;
		copy.log_level = ZKL_LOG_DEBUG;
	}
	return zkl__client_open_on(out, &copy, &fz_ops, z);
}

int64_t fz_peer(struct fz *z)
{
	pthread_mutex_lock(&z->mu);
	int64_t id = ++z->next_id;
	pthread_mutex_unlock(&z->mu);
	return id;
}

int fz_create(struct fz *z, const char *path, const char *data, int mode, int64_t owner,
              char *created, size_t size)
{
	char *name = NULL;
	pthread_mutex_lock(&z->mu);
	int rc = tree_create(z, path, data, data ? (int)strlen(data) : -1, mode, owner, &name,
	                     NULL, NULL, NULL);
	pthread_mutex_unlock(&z->mu);
	if (created && size)
		snprintf(created, size, "%s", name ? name : "");
	free(name);
	return rc;
}

int fz_delete(struct fz *z, const char *path)
{
	pthread_mutex_lock(&z->mu);
	int rc = tree_delete(z, path, -1, NULL, NULL);
	pthread_mutex_unlock(&z->mu);
	return rc;
}

int fz_set(struct fz *z, const char *path, const char *data)
{
	pthread_mutex_lock(&z->mu);
	int rc = tree_set(z, path, data, (int)strlen(data), -1, NULL, NULL, NULL);
	pthread_mutex_unlock(&z->mu);
	return rc;
}

int fz_put(struct fz *z, const char *path, const void *data, int len, int64_t ctime)
{
	pthread_mutex_lock(&z->mu);
	int rc = tree_set(z, path, data, len, -1, NULL, NULL, NULL);
	struct node *n = rc == ZOK ? find(z, path) : NULL;
	if (n)
		n->st.ctime = ctime;
	pthread_mutex_unlock(&z->mu);
	return rc;
}

bool fz_stat(struct fz *z, const char *path, struct Stat *st)
{
	pthread_mutex_lock(&z->mu);
	struct node *n = find(z, path);
	if (n && st) {
		*st = n->st;
		st->numChildren = count_children(z, path);
	}
	pthread_mutex_unlock(&z->mu);
	return n != NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int fz_children(struct fz *z, const char *path, char *buf, size_t size)
{
	pthread_mutex_lock(&z->mu);
	if (!find(z, path)) {
		pthread_mutex_unlock(&z->mu);
		if (size)
			buf[0] = 0;
		return -1;
	}
	int k = count_children(z, path), i = 0;
	const char **names = calloc((size_t)k + 1, sizeof *names);
	for (struct node *n = z->nodes; n; n = n->next)
		if (is_child(path, n->path))
			names[i++] = strrchr(n->path, '/') + 1;
	qsort(names, (size_t)k, sizeof *names, cmp_str);
	size_t off = 0;
	if (size)
		buf[0] = 0;
	for (i = 0; i < k && off < size; i++)
		off += (size_t)snprintf(buf + off, size - off, "%s\n", names[i]);
	pthread_mutex_unlock(&z->mu);
	free(names);
	return k;
}

int fz_set_cversion(struct fz *z, const char *path, int32_t cversion)
{
	pthread_mutex_lock(&z->mu);
	struct node *n = find(z, path);
	if (n)
		n->st.cversion = cversion;
	pthread_mutex_unlock(&z->mu);
	return n ? ZOK : ZNONODE;
}

void fz_reap(struct fz *z)
{
	pthread_mutex_lock(&z->mu);
	for (bool again = true; again;) {
		again = false;
		for (struct node *n = z->nodes; n; n = n->next) {
			if (n->container && n->st.cversion != 0 && count_children(z, n->path) == 0) {
				char *path = strdup(n->path);
				tree_delete(z, path, -1, NULL, NULL);
				free(path);
				again = true;
				break;
			}
		}
	}
	pthread_mutex_unlock(&z->mu);
}

void fz_expire(struct fz *z, int64_t id)
{
	pthread_mutex_lock(&z->mu);
	struct session *s = session_find(z, id);
	if (s && (s->state == S_EXPIRED || s->state == S_CLOSED)) {
		pthread_mutex_unlock(&z->mu);
		return;
	}
	if (s) {
		/* Every watch hears of it, then they are gone. */
		session_event(s, ZOO_EXPIRED_SESSION_STATE, true);
		s->state = S_EXPIRED;
		unswallow(s);
	}
	end_session(z, id, s);
	changed(z);
	pthread_mutex_unlock(&z->mu);
}

void fz_pause(struct fz *z, int64_t id, bool paused)
{
	pthread_mutex_lock(&z->mu);
	struct session *s = session_find(z, id);
	if (s) {
		s->paused = paused;
		if (!paused)
			s->resumes++;
		pthread_cond_signal(&s->cv);
	}
	changed(z);
	pthread_mutex_unlock(&z->mu);
}

void fz_drop(struct fz *z, int64_t id)
{
	pthread_mutex_lock(&z->mu);
	struct session *s = session_find(z, id);
	if (s && s->state == S_CONNECTED) {
		/* What is queued fails: mark it by moving the queue behind a disconnect. */
		s->state = S_DISCONNECTED;
		struct item *queued = s->head;
		s->head = s->tail = NULL;
		session_event(s, ZOO_CONNECTING_STATE, true);
		while (queued) {
			struct item *it = queued;
			queued = it->next;
			enqueue(s, it); /* answered ZCONNECTIONLOSS: the session is disconnected */
		}
		unswallow(s);
		struct item *r = calloc(1, sizeof *r);
		if (!r)
			abort();
		r->kind = I_RECONNECT;
		enqueue(s, r);
	}
	changed(z);
	pthread_mutex_unlock(&z->mu);
}

int fz_ephemerals(struct fz *z, int64_t id)
{
	int k = 0;
	pthread_mutex_lock(&z->mu);
	for (struct node *n = z->nodes; n; n = n->next)
		k += n->st.ephemeralOwner == id;
	pthread_mutex_unlock(&z->mu);
	return k;
}

int fz_watchers(struct fz *z, const char *path)
{
	int k = 0;
	pthread_mutex_lock(&z->mu);
	const struct node *n = find(z, path);
	int64_t owner = n ? n->st.ephemeralOwner : 0;
	for (struct watch *w = z->watches; w; w = w->next)
		k += strcmp(w->path, path) == 0 && (!owner || w->s->id != owner);
	pthread_mutex_unlock(&z->mu);
	return k;
}

int fz_watches(struct fz *z, const char *path)
{
	int k = 0;
	pthread_mutex_lock(&z->mu);
	for (struct watch *w = z->watches; w; w = w->next)
		k += strcmp(w->path, path) == 0;
	pthread_mutex_unlock(&z->mu);
	return k;
}

int fz_queued(struct fz *z, int64_t id, int op)
{
	int k = 0;
	pthread_mutex_lock(&z->mu);
	struct session *s = session_find(z, id);
	for (struct item *it = s ? s->head : NULL; it; it = it->next)
		k += it->kind == I_REQUEST && (op < 0 || (int)it->op == op);
	pthread_mutex_unlock(&z->mu);
	return k;
}

void fz_poke(struct fz *z)
{
	pthread_mutex_lock(&z->mu);
	changed(z);
	pthread_mutex_unlock(&z->mu);
}

void fz_wait(struct fz *z, bool (*pred)(void *arg), void *arg, const char *what)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	pthread_mutex_lock(&z->mu);
	for (;;) {
		uint64_t seen = z->changes;
		pthread_mutex_unlock(&z->mu);
		if (pred(arg))
			return;
		pthread_mutex_lock(&z->mu);
		if (z->changes != seen)
			continue;
		if (pthread_cond_timedwait(&z->changed, &z->mu, &until) == ETIMEDOUT) {
			pthread_mutex_unlock(&z->mu);
			fprintf(stderr, "fakezk: waited 30 s for %s\n", what);
			abort();
		}
	}
}
