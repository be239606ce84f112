/* The request layer's client side: every request the loop sends (struct zkl_op), its
 * completion handed to the loop, what its answer proves of the session, and node watches.
 *
 * Requests go out through the request layer's table (zk.h), never to the C client
 * directly: zk.c fills it with the C client's calls, and the unit suite puts an in-memory
 * ZooKeeper in their place, with the same threading contract. A completion runs on the C
 * client's completion thread: it copies what the answer carries into the op and posts the
 * op to the loop's inbox (loop.c), nothing more. At the end: what one request may carry
 * (the servers' jute.maxbuffer), measured before a create or a set is sent.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static bool watch_unregister_locked(struct zkl_watch *wt);
static void watch_register(zkl_client *c, struct zkl_op *op, struct zkl_watch *wt,
                           const char *path);
static struct zkl_waiter *op_answer_apply(zkl_client *c, struct zkl_msg *m);

void zkl__watch_free(struct zkl_watch *wt)
{
	free(wt->path);
	free(wt);
}

static struct zkl_op *op_begin(zkl_client *c, struct zkl_waiter *w, enum zkl_op_kind kind,
                               int *err)
{
	struct zkl_op *op = calloc(1, sizeof *op);
	if (!op) {
		*err = zkl__fail(ZKL_ENOMEM, "out of memory");
		return NULL;
	}
	op->kind = kind;
	op->msg.kind = MSG_OP;
	op->msg.apply = op_answer_apply;
	op->refs = 2;
	op->w = w;
	op->sent_at = zkl__now_ms();
	if (c->closing) {
		free(op);
		*err = zkl__fail(ZKL_ECLOSED, "the client is closing");
		return NULL;
	}
	op->s = c->sess;
	op->s->inflight++;
	op->s->ops++;
	op->idle = zkl__live_mode(c) != ZKL_LIVE_PROVE;
	return op;
}

/* Whether op's answer proves the session alive when op was sent (zkl__lost_at): a write
 * that succeeded. A quorum committed it, so the leader that saw it was the ensemble's. A
 * leader cut off from the others goes on answering syncs and reads, and its clients'
 * pings, until syncLimit passes; the others may elect a new leader meanwhile (they too
 * wait syncLimit for the old one), which gives the session a fresh timeout from its own
 * start and then expires it. A holder that took the old leader's answers for proof would
 * hold on past that expiry. Any other answer only says that some server heard the
 * session (last_heard_sent): enough for a session that holds nothing. */
static bool op_proves(const struct zkl_op *op, int rc)
{
	if (rc != ZOK)
		return false;
	return op->kind == ZKL_OP_CREATE || op->kind == ZKL_OP_DELETE || op->kind == ZKL_OP_SET ||
	       op->kind == ZKL_OP_CHECK || op->kind == ZKL_OP_MULTI;
}

/* Frees op (mu held), and its session if that is closed and op was its last request. */
static void op_free(struct zkl_op *op)
{
	struct zkl_session *s = op->s;
	if (--s->ops == 0 && s->gone)
		free(s);
	free(op->value);
	if (op->names) {
		for (int i = 0; i < op->count; i++)
			free(op->names[i]);
		free(op->names);
	}
	free(op->cleanup_parent);
	free(op->listed);
	free(op->leaving);
	for (int i = 0; op->made && i < op->nmops; i++)
		free(op->made[i]);
	free(op->made);
	free(op->results);
	free(op->stats);
	free(op);
}

/* The end of op with rc (mu held), its answer on the loop or its refusal before it was
 * sent: records, and drops the completion's reference. Returns op's waiter, to wake. */
static struct zkl_waiter *op_finish(zkl_client *c, struct zkl_op *op, int rc)
{
	struct zkl_session *s = op->s;
	if (op->listed && rc == ZOK && op->count > 0) {
		const size_t len = strlen(op->listed);
		if (!(op->leaving = calloc((size_t)op->count, sizeof *op->leaving)))
			rc = ZSYSTEMERROR; /* as a listing copied without memory */
		for (int i = 0; op->leaving && i < op->count; i++)
			op->leaving[i] = op->names[i] &&
			                 zkl__task_pending(c, op->listed, len, op->names[i]);
	}
	enum zkl__zk_class k = zkl__zk_class(rc);
	/* A retired session's handle closed with this request still out (zkl__retired_reap()):
	 * the session is gone for it, not the client, which goes on with a new one. */
	if (k == ZKL_ZK_CLOSING && s != c->sess && !c->closing) {
		rc = ZSESSIONEXPIRED;
		k = ZKL_ZK_EXPIRED;
	}
	op->rc = rc;
	op->done = true;
	/* The handle has seen its session expire (ZINVALIDSTATE is the C client refusing
	 * every request after that): nothing sent on it can succeed. Its expiry event may
	 * still be on its way to the loop; until it comes, nobody may take the session for
	 * connected, or a machine that waits for the connection would send again at once,
	 * be refused at once, and never let the loop get to that event. */
	if (s == c->sess && k == ZKL_ZK_EXPIRED)
		s->connected = false;
	/* The server answered: the session was alive when op was sent (zkl__zk_answered). */
	const bool heard = k == ZKL_ZK_ANSWER || k == ZKL_ZK_MOVED;
	if (op->kind == ZKL_OP_CHECK && rc != ZOK && heard && !s->check_refused) {
		s->check_refused = true;
		zkl__log(c, ZKL_LOG_ERROR, "the heartbeat, a check of the version of /, was refused: "
		        "%s; without it nothing proves the session while locks are held or "
		        "awaited (the client needs read access to /)", zerror(rc));
	}
	const bool proof = op_proves(op, rc);
	if (s == c->sess && proof && op->sent_at > s->last_proof_sent)
		s->last_proof_sent = op->sent_at;
	if (s == c->sess && heard && op->sent_at > s->last_heard_sent)
		s->last_heard_sent = op->sent_at;
	if (s == c->sess && s->given_up && (op->idle ? heard : proof) &&
	    op->sent_at > s->given_up_at) {
		/* An adopted session given up for lost is alive after all: it counts again. */
		s->given_up = false;
		zkl__session_event_locked(c, s, ZOO_CONNECTED_STATE, c->zk->session_id(s->zh),
		                     c->zk->timeout(s->zh), malloc(sizeof(struct zkl_event)));
	}
	/* The C client registers a watch only when the request succeeded, or for an exists
	 * of a node that is not there (it then waits for the node to be made). */
	if (op->watch && rc != ZOK && !(op->kind == ZKL_OP_EXISTS && rc == ZNONODE))
		watch_unregister_locked(op->watch);
	op->watch = NULL;
	struct zkl_waiter *w = op->w;
	if (op->kind == ZKL_OP_CREATE && op->cleanup_parent && !op->w) {
		/* The waiter gave up while the create was out. If it was applied, or may
		 * have been, the node must go. */
		if (rc == ZOK && op->value)
			zkl__task_delete(c, op->value, s->gen);
		else if (k == ZKL_ZK_UNKNOWN)
			zkl__task_find_delete(c, op->cleanup_parent, op->uuid, s->gen);
	}
	if (--s->inflight == 0)
		zkl__loop_wake(c);
	if (--op->refs == 0)
		op_free(op);
	return w;
}

static void op_refused(zkl_client *c, struct zkl_op *op, int rc)
{
	struct zkl_waiter *w = op_finish(c, op, rc);
	if (w)
		zkl__waiter_wake(c, w);
}

static struct zkl_waiter *op_answer_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_op *op = (struct zkl_op *)((char *)m - offsetof(struct zkl_op, msg));
	return op_finish(c, op, op->zrc);
}

/* A completion: what it carries is in op already, for the loop (completion thread). */
static void op_answered(struct zkl_op *op, int rc)
{
	op->zrc = rc;
	if (op->lazy_unless_ok && rc != ZOK)
		atomic_store(&op->lazy, false);
	zkl__inbox_put(op->s->c, &op->msg, atomic_load(&op->lazy));
}

static void string_stat_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char *copy = (rc == ZOK && value) ? strdup(value) : NULL;
	if (rc == ZOK && stat)
		op->stat = *stat;
	op->value = copy;
	if (rc == ZOK && value && !copy)
		rc = ZSYSTEMERROR;
	op_answered(op, rc);
}

static void void_done(int rc, const void *data)
{
	op_answered((struct zkl_op *)data, rc);
}

static void strings_done(int rc, const struct String_vector *strings, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char **names = NULL;
	int count = 0;
	if (rc == ZOK && strings && strings->count > 0) {
		names = calloc((size_t)strings->count, sizeof *names);
		if (names) {
			for (count = 0; count < strings->count; count++) {
				names[count] = strdup(strings->data[count]);
				if (!names[count])
					break;
			}
		}
		if (!names || count < strings->count)
			rc = ZSYSTEMERROR;
	}
	op->names = names;
	op->count = count;
	op_answered(op, rc);
}

static void data_done(int rc, const char *value, int len, const struct Stat *stat,
                      const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char *copy = NULL;
	if (rc == ZOK) {
		int n = len > 0 ? len : 0;
		copy = malloc((size_t)n + 1);
		if (copy) {
			if (n)
				memcpy(copy, value, (size_t)n);
			copy[n] = 0;
		} else {
			rc = ZSYSTEMERROR;
		}
		len = n;
	}
	if (rc == ZOK && stat)
		op->stat = *stat;
	op->value = copy;
	op->value_len = copy ? len : 0;
	op_answered(op, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	if (rc == ZOK && stat)
		op->stat = *stat;
	op_answered(op, rc);
}

struct zkl_op *zkl__op_create_followed(zkl_client *c, struct zkl_waiter *w, const char *path,
                                      const void *data, int len, int mode, bool followed,
                                      int *err)
{
	if ((*err = zkl__request_fits(c, ZKL_OP_CREATE, path, strlen(path), data ? len : -1)))
		return NULL;
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CREATE, err);
	if (!op)
		return NULL;
	atomic_store(&op->lazy, followed);
	int rc = c->zk->create(op->s->zh, path, data, len, c->acl, mode, string_stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl__op_create(zkl_client *c, struct zkl_waiter *w, const char *path,
                             const void *data, int len, int mode, int *err)
{
	return zkl__op_create_followed(c, w, path, data, len, mode, false, err);
}

struct zkl_op *zkl__op_create_ttl(zkl_client *c, struct zkl_waiter *w, const char *path,
                                 const void *data, int len, int mode, int64_t ttl, int *err)
{
	if (!c->zk->create_ttl) {
		*err = zkl__fail(ZKL_ENOTSUP, "this ZooKeeper client makes no TTL nodes");
		return NULL;
	}
	if ((*err = zkl__request_fits(c, ZKL_OP_CREATE, path, strlen(path), data ? len : -1)))
		return NULL;
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CREATE, err);
	if (!op)
		return NULL;
	int rc = c->zk->create_ttl(op->s->zh, path, data, len, c->acl, mode, ttl,
	                           string_stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

void zkl__op_hasten(zkl_client *c, struct zkl_op *op)
{
	atomic_store(&op->lazy, false);
	/* An answer queued lazily before this is in the inbox once we have passed its
	 * mutex, and the loop that called us looks there before it sleeps; one queued
	 * after reads the flag false (zkl__inbox_put) and wakes the loop. */
	pthread_mutex_lock(&c->inbox_mu);
	pthread_mutex_unlock(&c->inbox_mu);
}

struct zkl_op *zkl__op_delete(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	return zkl__op_delete_at(c, w, path, -1, err);
}

struct zkl_op *zkl__op_delete_at(zkl_client *c, struct zkl_waiter *w, const char *path,
                                int version, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_DELETE, err);
	if (!op)
		return NULL;
	int rc = c->zk->remove(op->s->zh, path, version, void_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl__op_children(zkl_client *c, struct zkl_waiter *w, const char *path,
                               struct zkl_watch *wt, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CHILDREN, err);
	if (!op)
		return NULL;
	if (wt)
		watch_register(c, op, wt, path);
	int rc = c->zk->children(op->s->zh, path, wt ? zkl__node_watcher : NULL, wt, strings_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

/* Drops the C client's reference to a watch it will not call again (mu held). Returns
 * true if the watch was freed. */
static bool watch_unregister_locked(struct zkl_watch *wt)
{
	if (!wt->registered)
		return false;
	struct zkl_session *s = wt->s;
	if (wt->prev)
		wt->prev->next = wt->next;
	else
		s->watches = wt->next;
	if (wt->next)
		wt->next->prev = wt->prev;
	wt->registered = false;
	wt->next = wt->prev = NULL;
	if (--wt->refs == 0) {
		zkl__watch_free(wt);
		return true;
	}
	return false;
}

/* Registers a watch for op before the request goes out: the watcher may run before the
 * completion does. */
static void watch_register(zkl_client *c, struct zkl_op *op, struct zkl_watch *wt,
                           const char *path)
{
	char *copy = c->adopted ? strdup(path) : NULL;
	free(wt->path);
	wt->path = copy;
	wt->s = op->s;
	wt->refs++;
	wt->registered = true;
	wt->prev = NULL;
	wt->next = op->s->watches;
	if (op->s->watches)
		op->s->watches->prev = wt;
	op->s->watches = wt;
	op->watch = wt;
}

/* A node watch's event, on the loop (the C client's reference keeps wt until then): the
 * watch fired; its waiter is the loop's to wake. */
static struct zkl_waiter *node_watch_ev_apply(zkl_client *c, struct zkl_msg *m)
{
	(void)c;
	struct zkl_watch *wt = (struct zkl_watch *)((char *)m - offsetof(struct zkl_watch, ev));
	struct zkl_waiter *w = wt->w;
	wt->fired = true;
	wt->event = wt->ev_type;
	watch_unregister_locked(wt);
	return w;
}

/* A node watch's event (completion thread). A session event reaches every watcher the
 * handle has, and the session's own watcher wakes every waiter for it: only the node's
 * event, one per watch set, is posted, in the watch. */
void zkl__node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	struct zkl_watch *wt = ctx;
	if (type == ZOO_SESSION_EVENT)
		return;
	wt->ev_type = type;
	zkl__inbox_put(wt->s->c, &wt->ev, false);
}

struct zkl_watch *zkl__watch_new(zkl_client *c, struct zkl_waiter *w)
{
	(void)c;
	struct zkl_watch *wt = calloc(1, sizeof *wt);
	if (!wt)
		return NULL;
	wt->refs = 1;
	wt->w = w;
	wt->ev.kind = MSG_WATCH;
	wt->ev.apply = node_watch_ev_apply;
	return wt;
}

void zkl__watch_settle_quiet(zkl_client *c, struct zkl_watch *wt)
{
	if (!wt->quiet_if)
		return;
	pthread_mutex_lock(&c->inbox_mu);
	wt->quiet = atomic_load(wt->quiet_if);
	wt->quiet_if = NULL;
	pthread_mutex_unlock(&c->inbox_mu);
}

void zkl__watch_put(zkl_client *c, struct zkl_watch *wt)
{
	(void)c;
	wt->w = NULL;
	if (--wt->refs == 0)
		zkl__watch_free(wt);
}

struct zkl_op *zkl__op_get(zkl_client *c, struct zkl_waiter *w, const char *path,
                          struct zkl_watch *wt, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_GET, err);
	if (!op)
		return NULL;
	if (wt)
		watch_register(c, op, wt, path);
	int rc = c->zk->get(op->s->zh, path, wt ? zkl__node_watcher : NULL, wt, data_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

static struct zkl_op *op_exists(zkl_client *c, struct zkl_waiter *w, const char *path,
                                struct zkl_watch *wt, bool quiet, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_EXISTS, err);
	if (!op)
		return NULL;
	if (quiet) {
		op->lazy_unless_ok = true;
		atomic_store(&op->lazy, true);
	}
	if (wt)
		watch_register(c, op, wt, path);
	int rc = c->zk->exists(op->s->zh, path, wt ? zkl__node_watcher : NULL, wt, stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl__op_exists(zkl_client *c, struct zkl_waiter *w, const char *path,
                             struct zkl_watch *wt, int *err)
{
	return op_exists(c, w, path, wt, false, err);
}

struct zkl_op *zkl__op_exists_quiet(zkl_client *c, struct zkl_waiter *w, const char *path,
                                   struct zkl_watch *wt, int *err)
{
	return op_exists(c, w, path, wt, true, err);
}

struct zkl_op *zkl__op_set(zkl_client *c, struct zkl_waiter *w, const char *path,
                          const void *data, int len, int version, int *err)
{
	if ((*err = zkl__request_fits(c, ZKL_OP_SET, path, strlen(path), data ? len : -1)))
		return NULL;
	struct zkl_op *op = op_begin(c, w, ZKL_OP_SET, err);
	if (!op)
		return NULL;
	int rc = c->zk->set(op->s->zh, path, data, len, version, stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

static void string_done(int rc, const char *value, const void *data)
{
	(void)value;
	void_done(rc, data);
}

struct zkl_op *zkl__op_sync(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_SYNC, err);
	if (!op)
		return NULL;
	int rc = c->zk->sync(op->s->zh, path, string_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl__op_check(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CHECK, err);
	if (!op)
		return NULL;
	int rc = c->zk->check(op->s->zh, path, void_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl__op_multi(zkl_client *c, struct zkl_waiter *w, const struct zkl_mop *mops,
                            int n, int *err)
{
	/* The whole multi is one request: the servers read it only if it fits. */
	int64_t size = 8;
	for (int i = 0; i < n; i++) {
		const struct zkl_mop *m = &mops[i];
		size += 12; /* the operation's header */
		if (m->type == ZOO_CREATE_OP || m->type == ZOO_SETDATA_OP)
			size += zkl__request_size(c, m->type == ZOO_CREATE_OP ? ZKL_OP_CREATE
			                                                      : ZKL_OP_SET,
			                          strlen(m->path), m->data ? m->len : -1);
		else
			size += 8 + (int64_t)strlen(m->path);
	}
	if (size > c->max_request) {
		*err = zkl__fail(ZKL_EINVAL, "a transaction of %lld bytes, more than the %d a server "
		                 "reads in one request (its jute.maxbuffer; the client's "
		                 "max_request option), refused before sending", (long long)size,
		                 c->max_request);
		return NULL;
	}
	zoo_op_t *zops = calloc((size_t)n + 1, sizeof *zops);
	zoo_op_result_t *results = calloc((size_t)n + 1, sizeof *results);
	char **made = calloc((size_t)n + 1, sizeof *made);
	struct Stat *stats = calloc((size_t)n + 1, sizeof *stats);
	bool ok = zops && results && made && stats;
	for (int i = 0; ok && i < n; i++) {
		const struct zkl_mop *m = &mops[i];
		const int len = m->data ? m->len : -1;
		switch (m->type) {
		case ZOO_CREATE_OP: {
			/* The name made: the path, and a sequence number of 10 digits. */
			const size_t size = strlen(m->path) + 16;
			if (!(made[i] = malloc(size))) {
				ok = false;
				break;
			}
			made[i][0] = '\0';
			zoo_create_op_init(&zops[i], m->path, m->data, len, c->acl, m->mode, made[i],
			                   (int)size);
			break;
		}
		case ZOO_SETDATA_OP:
			zoo_set_op_init(&zops[i], m->path, m->data, len, m->version, &stats[i]);
			break;
		case ZOO_DELETE_OP:
			zoo_delete_op_init(&zops[i], m->path, m->version);
			break;
		default:
			zoo_check_op_init(&zops[i], m->path, m->version);
			break;
		}
	}
	struct zkl_op *op = ok ? op_begin(c, w, ZKL_OP_MULTI, err) : NULL;
	if (!op) {
		if (!ok)
			*err = zkl__fail(ZKL_ENOMEM, "out of memory");
		for (int i = 0; made && i < n; i++)
			free(made[i]);
		free(made);
		free(results);
		free(stats);
		free(zops);
		return NULL;
	}
	op->nmops = n;
	op->results = results;
	op->made = made;
	op->stats = stats;
	/* The C client reads zops during the call; the results, names and stats stay with
	 * op until its completion has run. */
	int rc = c->zk->multi(op->s->zh, n, zops, results, void_done, op);
	free(zops);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

void zkl__op_put(zkl_client *c, struct zkl_op *op)
{
	(void)c;
	if (!op)
		return;
	op->w = NULL;
	if (--op->refs == 0)
		op_free(op);
}

struct zkl_op *zkl__op_send(zkl_client *c, struct zkl_waiter *w, const struct zkl_req *r,
                           int *err)
{
	switch (r->kind) {
	case ZKL_OP_CREATE:
		if (r->ttl > 0)
			return zkl__op_create_ttl(c, w, r->path, r->data, r->len, r->mode, r->ttl,
			                          err);
		return zkl__op_create(c, w, r->path, r->data, r->len, r->mode, err);
	case ZKL_OP_DELETE:
		return zkl__op_delete_at(c, w, r->path, r->check_version ? r->version : -1, err);
	case ZKL_OP_CHILDREN: {
		char *listed = r->mark_leaving ? strdup(r->path) : NULL;
		if (r->mark_leaving && !listed) {
			*err = zkl__fail(ZKL_ENOMEM, "out of memory");
			return NULL;
		}
		struct zkl_op *op = zkl__op_children(c, w, r->path, r->watch, err);
		if (op)
			op->listed = listed; /* before its answer: the loop applies it, under mu */
		else
			free(listed);
		return op;
	}
	case ZKL_OP_GET:
		return zkl__op_get(c, w, r->path, r->watch, err);
	case ZKL_OP_EXISTS:
		return zkl__op_exists(c, w, r->path, r->watch, err);
	case ZKL_OP_SET:
		return zkl__op_set(c, w, r->path, r->data, r->len, r->version, err);
	case ZKL_OP_SYNC:
		return zkl__op_sync(c, w, r->path, err);
	case ZKL_OP_CHECK:
		return zkl__op_check(c, w, r->path, err);
	case ZKL_OP_MULTI:
		return zkl__op_multi(c, w, r->mops, r->nmops, err);
	}
	*err = zkl__fail(ZKL_EINVAL, "unknown request");
	return NULL;
}

int zkl__ops_send(zkl_client *c, struct zkl_waiter *w, const struct zkl_req *reqs,
                 struct zkl_op **ops, int n, int *err)
{
	int sent = 0;
	for (; sent < n; sent++) {
		const struct zkl_req *r = &reqs[sent];
		struct zkl_waiter *to = r->unbound ? NULL : w;
		const bool followed = sent < n - 1;
		ops[sent] = r->kind == ZKL_OP_CREATE && r->ttl == 0
		                    ? zkl__op_create_followed(c, to, r->path, r->data, r->len,
		                                             r->mode, followed, err)
		                    : zkl__op_send(c, to, r, err);
		if (!ops[sent])
			break;
	}
	for (int k = sent + 1; k < n; k++)
		ops[k] = NULL;
	/* What was not followed after all wakes the loop itself. */
	if (sent > 0 && sent < n)
		zkl__op_hasten(c, ops[sent - 1]);
	return sent;
}

void zkl__op_release(zkl_client *c, struct zkl_op *op)
{
	pthread_mutex_lock(&c->mu);
	zkl__op_put(c, op);
	pthread_mutex_unlock(&c->mu);
}


/* ---- What one request may carry: the servers' jute.maxbuffer ----------------------
 *
 * A ZooKeeper server reads a request only if its length (what follows the 4-byte length
 * field) is at most its jute.maxbuffer (1,048,575 bytes unless configured otherwise);
 * anything longer makes it close the connection. The C client then reconnects and sends
 * the same request again, and again: every hold of the client is suspended each time, and
 * the call never ends. So a create or a set is measured before it is sent, as the server
 * will read it, and refused here with a message that names the limit. */

/* A string or a buffer: a 4-byte length, then its bytes. */
static int64_t field(int64_t len)
{
	return 4 + (len > 0 ? len : 0);
}

int64_t zkl__request_size(const zkl_client *c, enum zkl_op_kind kind, size_t path_len,
                         int data_len)
{
	/* The request header (xid, type), the path and the data. */
	int64_t n = 8 + field((int64_t)path_len) + field(data_len);
	if (kind == ZKL_OP_SET)
		return n + 4; /* the version */
	/* A create: the ACL (a count, then each entry's permissions, scheme and id), and the
	 * flags. */
	n += 4;
	const struct ACL_vector *acl = c->acl;
	for (int32_t i = 0; acl && i < acl->count; i++) {
		const struct Id *id = &acl->data[i].id;
		n += 4 + field(id->scheme ? (int64_t)strlen(id->scheme) : 0) +
		     field(id->id ? (int64_t)strlen(id->id) : 0);
	}
	return n + 4;
}

int zkl__request_fits(const zkl_client *c, enum zkl_op_kind kind, const char *name,
                     size_t path_len, int data_len)
{
	const int64_t n = zkl__request_size(c, kind, path_len, data_len);
	if (n <= c->max_request)
		return 0;
	return zkl__fail(ZKL_EINVAL, "a request of %lld bytes, more than the %d a server reads "
	                "in one request (its jute.maxbuffer; the client's max_request option), "
	                "refused before sending: %s %d bytes of data with a path of %zu bytes "
	                "under %.60s%s", (long long)n, c->max_request,
	                kind == ZKL_OP_SET ? "writing" : "creating", data_len > 0 ? data_len : 0,
	                path_len, name, strlen(name) > 60 ? "..." : "");
}
