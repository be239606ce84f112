/* zkl_mutex: fair, reentrant per thread, Curator's InterProcessMutex layout; and the two
 * halves of zkl_rwlock, which are mutexes with another marker and predicate.
 *
 * Each owner that acquires queues its own node, so threads sharing a handle queue like
 * any other contender. An owner is data the acquisition carries (common.h): a blocking
 * call's is its thread's, and the simulator gives its own (zkl__mutex_start_as), so
 * re-entry and the downgrade are decided from the owner's holds, never from which thread
 * runs the decision. The handle keeps a list of the acquisitions it holds, one per
 * owner; normally there is at most one, but a hold lost with an expired session stays
 * on the list until its thread releases it, while another thread may already hold the
 * lock again on the new session. Handle state is guarded by the handle's own mutex
 * (mutex_internal.h), so that the verbs of one handle neither wait for the client's loop
 * nor hold up another handle's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/mutex.h>
#include <zklocks/rwlock.h>

#include "mutex_internal.h"
#include "predicates.h"

/* An asynchronous acquire under way: what the engine reads until it ends, owned here
 * so that the handle may be freed meanwhile (the acquisition is then orphaned). */
struct mutex_async {
	struct zkl_lock_async a;
	zkl_mutex *m;
	char *path;
	struct zkl_queue q;
	struct zkl_data data;
	bool folder_seen;
	struct zkl_acq *l;
};

/* An acquire of an owner under way: what the engine reads until it ends. A blocking
 * acquire keeps it on its stack; one started by zkl__mutex_start_as owns it, and its own
 * copy of the path, so that the handle may be freed meanwhile (the acquire is then
 * orphaned). */
struct mutex_owned {
	zkl_mutex *m;
	struct zkl_acq *l;             /* on m->waiting until it ends */
	struct zkl_queue q;
	struct zkl_data data;
	bool folder_seen;              /* the engine writes this one; the handle's is ours */
	bool downgrade;
	int64_t writer_seq;            /* downgrade: the write node's number */
	char name[ZKL_PROTECT_PREFIX_LEN + 40]; /* downgrade: the read node's name */
	char *path;                    /* started: the path, owned */
	char *writer;                  /* downgrade: the write node's path, owned */
	void (*done)(void *arg, int rc);
	void *arg;
	bool orphaned;                 /* started: m is gone (set on the loop, read there) */
	struct mutex_owned *next;      /* started: in m->started */
};

#define MUTEX(l) ((zkl_mutex *)(void *)(l))

/* While a revocation callback runs, releasing its handle on the event thread releases the
 * revoked acquisition, whichever thread took it. */
static _Thread_local const zkl_mutex *revoking;
static _Thread_local zkl__owner revoking_owner;

static void mutex_revoked(void *ctx, const char *node)
{
	zkl_mutex *m = ctx;
	pthread_mutex_lock(m->lock.mu);
	zkl_revoke_fn fn = m->revoke_fn;
	void *data = m->revoke_data;
	bool found = false;
	for (struct zkl_acq *l = m->leases; l; l = l->next) {
		if (l->node.path && strcmp(l->node.path, node) == 0) {
			revoking_owner = l->owner;
			found = true;
		}
	}
	pthread_mutex_unlock(m->lock.mu);
	zkl__log(m->lock.c, ZKL_LOG_INFO, "revocation of %s requested", node);
	if (!fn)
		return;
	const zkl_mutex *outer = revoking;
	revoking = found ? m : NULL;
	fn(m, data);
	revoking = outer;
}

static void mutex_lost(struct zkl_hold *h, void *ctx)
{
	zkl_mutex *m = ctx;
	const int why = zkl__loss_reason(h);
	zkl__log(m->lock.c, ZKL_LOG_WARN, "lock %s lost %s", m->lock.path,
	         why == ZKL_EDELETED ? "with its node, deleted" : "with its session");
	zkl__lock_report_lost(&m->lock, why);
}

/* Owner's acquisition (the handle's mutex held). */
static struct zkl_acq **find_owner(zkl_mutex *m, zkl__owner owner)
{
	for (struct zkl_acq **pp = &m->leases; *pp; pp = &(*pp)->next)
		if (!(*pp)->async && (*pp)->owner == owner)
			return pp;
	return NULL;
}

/* The owner the calling thread acts as on m: its own, or in a revocation callback of m
 * the revoked hold's. */
static zkl__owner caller(const zkl_mutex *m)
{
	return revoking == m ? revoking_owner : zkl__owner_self();
}

/* The calling thread's acquisition (the handle's mutex held). */
static struct zkl_acq **find_own(zkl_mutex *m)
{
	return find_owner(m, caller(m));
}

/* The handle's asynchronous acquisition (the handle's mutex held). */
static struct zkl_acq **find_async(zkl_mutex *m)
{
	for (struct zkl_acq **pp = &m->leases; *pp; pp = &(*pp)->next)
		if ((*pp)->async)
			return pp;
	return NULL;
}

static const struct zkl_lock_ops mutex_ops;

static const char *kind_name(enum zkl_kind kind)
{
	return kind == ZKL_KIND_READ ? "read" : kind == ZKL_KIND_WRITE ? "write" : "mutex";
}

int zkl__mutex_init(zkl_mutex *m, zkl_client *c, const char *path, enum zkl_kind kind)
{
	memset(m, 0, sizeof *m);
	m->kind = kind;
	int rc = zkl__lock_init(&m->lock, &mutex_ops, kind_name(kind), c, path);
	if (rc != 0)
		return rc;
	pthread_mutex_init(&m->own_mu, NULL);
	pthread_cond_init(&m->own_cv, NULL);
	m->lock.mu = &m->own_mu;
	m->lock.cv = &m->own_cv;
	m->lock.pub = &zkl__pub_mu; /* the nodes the engine publishes */
	return 0;
}

void zkl__mutex_share_mu(zkl_mutex *b, zkl_mutex *a)
{
	b->lock.mu = a->lock.mu;
	b->lock.cv = a->lock.cv;
}

int zkl_mutex_new(zkl_mutex **out, zkl_client *c, const char *path)
{
	if (out)
		*out = NULL;
	int rc = zkl__check_new(out, c, path);
	if (rc != 0)
		return rc;
	zkl_mutex *m = malloc(sizeof *m);
	if (!m)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	if ((rc = zkl__mutex_init(m, c, path, ZKL_KIND_LOCK)) != 0) {
		free(m);
		return rc;
	}
	zkl__client_handle_add(c);
	*out = m;
	return 0;
}

zkl_lock *zkl_mutex_lock(zkl_mutex *m)
{
	return m ? &m->lock : NULL;
}

static void mutex_free_later(void *m)
{
	zkl_mutex_free(m);
}

void zkl_mutex_free(zkl_mutex *m)
{
	if (!m || m->other)
		return; /* a rwlock half goes with its rwlock */
	if (zkl__lock_defer_free(&m->lock, mutex_free_later, m))
		return;
	zkl_client *c = m->lock.c;
	zkl__mutex_dispose(m);
	free(m);
	zkl__client_handle_done(c, false);
}

static int mutex_release(zkl_lock *lk);

void zkl__mutex_dispose(zkl_mutex *m)
{
	zkl_client *c = m->lock.c;
	pthread_mutex_t *mu = m->lock.mu;
	/* An asynchronous acquire under way ends with ZKL_ECANCELED. */
	zkl__client_cancel_owner(c, m);
	zkl__lock_async_drain(&m->lock);
	/* So do those started for an owner (zkl__mutex_start_as): on a thread that runs the
	 * loop, nothing may wait, and they end quietly; elsewhere their ends are awaited. */
	const bool on_loop = zkl__is_loop_thread(c);
	pthread_mutex_lock(mu);
	while (m->started) {
		if (on_loop) {
			struct mutex_owned *o = m->started;
			m->started = o->next;
			o->orphaned = true;
			for (struct zkl_acq **pp = &m->waiting; *pp; pp = &(*pp)->next) {
				if (*pp == o->l) {
					*pp = o->l->next;
					break;
				}
			}
		} else {
			pthread_cond_wait(m->lock.cv, mu);
		}
	}
	/* The calling thread's hold, however deep, ends here. */
	struct zkl_acq **pp = find_own(m);
	if (pp)
		(*pp)->count = 1;
	pthread_mutex_unlock(mu);
	if (pp)
		mutex_release(&m->lock);
	/* Holds of other threads: the contract says none, but never leave a node or a
	 * registration behind. */
	pthread_mutex_lock(mu);
	while (m->leases) {
		struct zkl_acq *l = m->leases;
		m->leases = l->next;
		pthread_mutex_unlock(mu);
		zkl__engine_release(c, &l->node);
		free(l);
		pthread_mutex_lock(mu);
	}
	pthread_mutex_unlock(mu);
	zkl__lock_dispose(&m->lock);
	if (m->kind == ZKL_KIND_LOCK)
		zkl__mutex_fini(m); /* a rwlock's halves share one: rwlock.c, after both */
}

void zkl__mutex_fini(zkl_mutex *m)
{
	pthread_mutex_destroy(&m->own_mu);
	pthread_cond_destroy(&m->own_cv);
}

/* Node data and kind of a new acquisition (the handle's mutex held). Nodes of revocable
 * handles carry no data, as Curator's do. */
static int node_data(zkl_mutex *m, struct zkl_data *data, enum zkl_kind *kind)
{
	int rc = m->revoke_fn ? zkl__data_set(data, NULL, 0) : zkl__lock_data_copy(&m->lock, data);
	*kind = m->kind;
	if (m->naming == ZKL_NAMING_KAZOO)
		*kind = m->kind == ZKL_KIND_READ ? ZKL_KIND_KRLOCK : ZKL_KIND_KLOCK;
	return rc;
}

/* A granted acquisition becomes one of the handle's holds (the handle's mutex held); the
 * engine made its hold at the grant. */
static void install(zkl_mutex *m, struct zkl_acq *l)
{
	l->count = 1;
	l->next = m->leases;
	m->leases = l;
}

/* An acquisition under way stops being published (the handle's mutex held; the loop is
 * done with it: the engine writes l->node_pub no more). */
static void unpublish(struct zkl_acq *l)
{
	free(l->node_pub);
	l->node_pub = NULL;
}

/* The queue of an acquire of m (the handle's mutex held), an owner's and the handle's
 * asynchronous one alike: a node of kind with data at path, the engine writing
 * *folder_seen and publishing the node at l->node_pub (zkl_lock_node(), while l is
 * under way). The hold made at the grant is
 * reported lost through mutex_lost(); a revocable handle's node is watched for
 * revocation from the moment it is known, queued or held. */
static struct zkl_queue mutex_queue(zkl_mutex *m, const char *path, enum zkl_kind kind,
                                    const struct zkl_data *data,
                                    bool *folder_seen, struct zkl_acq *l)
{
	return (struct zkl_queue){
		.c = m->lock.c,
		.path = path,
		.kind = kind,
		.data = data->bytes,
		.data_len = data->len,
		.pred = m->kind == ZKL_KIND_READ ? &zkl__pred_read : &zkl__pred_first,
		.owner = m,
		.name = m->lock.kind,
		.on_revoke = m->revoke_fn ? mutex_revoked : NULL,
		.revoke_ctx = m,
		.revoke_decode = zkl__revoke_decode,
		.folder_seen = folder_seen,
		.on_lost = mutex_lost,
		.lost_ctx = m,
		.pub = &l->node_pub,
	};
}

/* Decides owner's acquire of m from owner's holds (the handle's mutex held): 1 if owner
 * holds m already (its count goes up), ZKL_E* if it may not acquire, else 0 with o
 * filled, its acquisition on m->waiting. */
static int owned_prepare(zkl_mutex *m, zkl__owner owner, struct mutex_owned *o)
{
	zkl_lock *lk = &m->lock;
	struct zkl_acq **pp = find_owner(m, owner);
	if (pp) {
		/* Re-entry costs no round trip. */
		struct zkl_acq *l = *pp;
		if (zkl__node_lost(&l->node))
			return zkl__fail(ZKL_ELOST, "lock %s was lost; release it before acquiring "
			                "again", lk->path);
		l->count++;
		return 1;
	}
	/* The other half of a rwlock, held by this owner: downgrade or upgrade. */
	struct zkl_acq **op = m->other ? find_owner(m->other, owner) : NULL;
	if (op && m->kind == ZKL_KIND_WRITE)
		return zkl__fail(ZKL_EDEADLK, "%s holds the read lock of %s: upgrading to the "
		                "write lock can never succeed", owner == zkl__owner_self() ?
		                "the calling thread" : "its owner", lk->path);
	o->m = m;
	o->downgrade = op && m->kind == ZKL_KIND_READ && !zkl__node_lost(&(*op)->node);
	o->writer_seq = o->downgrade ? (*op)->node.seq : 0;
	if (o->downgrade && !(o->writer = strdup((*op)->node.path)))
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	uint64_t writer_gen = o->downgrade ? (*op)->node.gen : 0;
	enum zkl_kind kind;
	int rc = node_data(m, &o->data, &kind);
	o->l = rc == 0 ? calloc(1, sizeof *o->l) : NULL;
	if (!o->l) {
		if (rc == 0)
			zkl__data_free(&o->data);
		free(o->writer);
		o->writer = NULL;
		return rc != 0 ? rc : zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	o->folder_seen = m->folder_seen;
	o->l->owner = owner;
	o->q = mutex_queue(m, o->path ? o->path : lk->path, kind, &o->data,
	                   &o->folder_seen, o->l);
	if (o->downgrade) {
		/* Curator's downgrade: a non-sequential read node that sorts at the writer's
		 * place, so writers queued behind the writer stay behind the reader. It holds
		 * because the write lock does: only on the write lock's session, which another
		 * writer may already hold once that session is gone. */
		o->q.gen = writer_gen;
		char uuid[ZKL_UUID_LEN + 1];
		zkl__uuid(uuid);
		int k = zkl__node_prefix(o->name, sizeof o->name, uuid, kind);
		snprintf(o->name + k, sizeof o->name - (size_t)k, "%010d", (int)o->writer_seq);
	}
	o->l->next = m->waiting;
	m->waiting = o->l;
	return 0;
}

/* Starts the engine's part of o (no lock held); done NULL: waits for it. */
static int owned_run(struct mutex_owned *o, int timeout_ms, void (*done)(void *, int))
{
	if (o->downgrade)
		return done ? zkl__engine_create_fixed_start(&o->q, o->name, o->writer,
		                                             timeout_ms, &o->l->node, done, o)
		            : zkl__engine_create_fixed(&o->q, o->name, o->writer, timeout_ms,
		                                       &o->l->node);
	return done ? zkl__engine_start(&o->q, timeout_ms, &o->l->node, done, o)
	            : zkl__engine_acquire(&o->q, timeout_ms, &o->l->node);
}

/* o's acquire has ended with rc (the handle's mutex held): its acquisition leaves
 * m->waiting and becomes a hold of its owner, or is freed. */
static void owned_end(zkl_mutex *m, struct mutex_owned *o, int rc)
{
	m->folder_seen |= o->folder_seen;
	for (struct zkl_acq **pp = &m->waiting; *pp; pp = &(*pp)->next) {
		if (*pp == o->l) {
			*pp = o->l->next;
			break;
		}
	}
	unpublish(o->l);
	if (rc == 0) {
		if (o->downgrade)
			o->l->node.seq = o->writer_seq;
		install(m, o->l);
	} else {
		free(o->l);
	}
	o->l = NULL;
}

static int acquire_as(zkl_mutex *m, zkl__owner owner, int timeout_ms)
{
	zkl_lock *lk = &m->lock;
	struct mutex_owned o = {0};
	pthread_mutex_lock(lk->mu);
	int rc = owned_prepare(m, owner, &o);
	pthread_mutex_unlock(lk->mu);
	if (rc != 0)
		return rc > 0 ? 0 : rc;
	rc = owned_run(&o, timeout_ms, NULL);
	zkl__data_free(&o.data);
	free(o.writer);
	pthread_mutex_lock(lk->mu);
	owned_end(m, &o, rc);
	pthread_mutex_unlock(lk->mu);
	return rc;
}

static int mutex_acquire(zkl_lock *lk, int timeout_ms)
{
	zkl_mutex *m = MUTEX(lk);
	return acquire_as(m, caller(m), timeout_ms);
}

/* The end of an acquire started by zkl__mutex_start_as (on the loop, no lock held). */
static void owned_done(void *arg, int rc)
{
	struct mutex_owned *o = arg;
	zkl_mutex *m = o->m;
	/* Orphaned: the handle went on this thread (zkl__mutex_dispose), its mutex too. */
	bool orphaned = o->orphaned;
	if (!orphaned) {
		pthread_mutex_lock(m->lock.mu);
		owned_end(m, o, rc);
		for (struct mutex_owned **pp = &m->started; *pp; pp = &(*pp)->next) {
			if (*pp == o) {
				*pp = o->next;
				break;
			}
		}
		pthread_cond_broadcast(m->lock.cv);
		pthread_mutex_unlock(m->lock.mu);
	} else {
		if (rc == 0)
			zkl__engine_release_later(o->q.c, &o->l->node); /* won for a handle gone */
		unpublish(o->l);
		free(o->l);
	}
	zkl__data_free(&o->data);
	free(o->writer);
	free(o->path);
	void (*done)(void *, int) = o->done;
	void *done_arg = o->arg;
	free(o);
	if (!orphaned)
		done(done_arg, rc);
}

int zkl__mutex_start_as(zkl_mutex *m, zkl__owner owner, int timeout_ms,
                       void (*done)(void *arg, int rc), void *arg)
{
	zkl_lock *lk = &m->lock;
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	struct mutex_owned *o = calloc(1, sizeof *o);
	if (!o || !(o->path = strdup(lk->path))) {
		free(o);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	o->done = done;
	o->arg = arg;
	pthread_mutex_lock(lk->mu);
	rc = owned_prepare(m, owner, o);
	if (rc == 0) {
		o->next = m->started;
		m->started = o;
	}
	pthread_mutex_unlock(lk->mu);
	if (rc == 0 && (rc = owned_run(o, timeout_ms, owned_done)) != 0) {
		pthread_mutex_lock(lk->mu);
		owned_end(m, o, rc);
		for (struct mutex_owned **pp = &m->started; *pp; pp = &(*pp)->next) {
			if (*pp == o) {
				*pp = o->next;
				break;
			}
		}
		pthread_mutex_unlock(lk->mu);
		zkl__data_free(&o->data);
		free(o->writer);
	}
	if (rc != 0) {
		free(o->path);
		free(o);
	}
	return rc;
}

/* The end of an asynchronous acquire (event thread, no lock held).
 *
 * The handle lives on while its acquire is pending (zkl__lock_async_drain() waits for it
 * on any other thread, and this is the loop's): the hold is installed first, with the
 * handle's mutex, and only then does the acquire end, so that no second asynchronous
 * acquire can be claimed in between. */
static void mutex_async_done(void *arg, int rc)
{
	struct mutex_async *pa = arg;
	zkl_mutex *m = pa->m;
	zkl_client *c = pa->q.c;
	struct zkl_acq *l = pa->l;
	char saved[256] = ""; /* the failure's detail, for the callback */
	if (rc != 0)
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
	/* An orphaned acquire's handle is gone, its mutex with it; a live one's stays until
	 * the acquire has ended (zkl__lock_async_drain() waits for that). */
	bool call = false;
	if (!atomic_load(&pa->a.orphaned)) {
		pthread_mutex_lock(m->lock.mu);
		unpublish(l);
		m->folder_seen |= pa->folder_seen;
		if (rc == 0) {
			l->async = true;
			l->owner = ZKL_OWNER_NONE;
			install(m, l);
			l = NULL;
		}
		call = zkl__lock_async_ending(&pa->a);
		pthread_mutex_unlock(m->lock.mu);
	}
	if (l && rc == 0)
		zkl__engine_release_later(c, &l->node); /* won for a handle that is gone */
	if (l)
		unpublish(l);
	free(l);
	zkl__data_free(&pa->data);
	free(pa->path);
	zkl_lock_acquired_fn fn = pa->a.fn;
	void *data = pa->a.fn_data;
	free(pa);
	if (call)
		zkl__lock_async_call(&m->lock, fn, data, rc, saved);
}

static int mutex_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	zkl_mutex *m = MUTEX(lk);
	struct mutex_async *pa = calloc(1, sizeof *pa);
	if (!pa || !(pa->l = calloc(1, sizeof *pa->l)) || !(pa->path = strdup(lk->path))) {
		if (pa)
			free(pa->l);
		free(pa);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(lk->mu);
	enum zkl_kind kind;
	int rc = zkl__lock_async_claim(lk, &pa->a, fn, data);
	pa->folder_seen = m->folder_seen;
	if (rc == 0 && (rc = node_data(m, &pa->data, &kind)) != 0)
		zkl__lock_async_unclaim(lk, &pa->a);
	if (rc == 0) {
		pa->m = m;
		pa->q = mutex_queue(m, pa->path, kind, &pa->data, &pa->folder_seen, pa->l);
	}
	pthread_mutex_unlock(lk->mu);
	if (rc == 0)
		rc = zkl__lock_async_start(lk, &pa->a, &pa->q, timeout_ms, &pa->l->node,
		                          mutex_async_done, pa);
	if (rc != 0) {
		zkl__data_free(&pa->data);
		free(pa->path);
		free(pa->l);
		free(pa);
	}
	return rc;
}

/* Releases one level of owner's hold, else, with any, of the handle's asynchronous
 * one. With a transaction (mops[0..n), n > 0), only a hold's last level, with the
 * operations in one transaction with its delete (*answer: its answer). */
static int release_as(zkl_mutex *m, zkl__owner owner, bool any, const struct zkl_mop *mops,
                      int n, struct zkl_op **answer)
{
	zkl_lock *lk = &m->lock;
	zkl_client *c = lk->c;
	pthread_mutex_lock(lk->mu);
	struct zkl_acq **pp = find_owner(m, owner);
	if (!pp && any)
		pp = find_async(m); /* the handle's: any thread may release it */
	if (!pp) {
		pthread_mutex_unlock(lk->mu);
		return zkl__fail(n > 0 ? ZKL_ENOTHELD : ZKL_ENOTOWNER, "%s does not hold %s",
		                 owner == zkl__owner_self() ? "the calling thread" : "its owner",
		                 lk->path);
	}
	struct zkl_acq *l = *pp;
	if (n > 0 && l->count > 1) {
		pthread_mutex_unlock(lk->mu);
		return zkl__fail(ZKL_EBUSY, "%s is held %d times over: release the inner levels "
		                 "first", lk->path, l->count);
	}
	if (--l->count > 0) {
		bool lost = zkl__node_lost(&l->node);
		pthread_mutex_unlock(lk->mu);
		return lost ? zkl__fail(ZKL_ELOST, "lock %s was lost", lk->path) : 0;
	}
	/* Forget the hold before deleting the node, so that the next holder on this handle
	 * never sees it; then take it off the client's list (which waits for its lost
	 * callback, should one run right now: that takes the handle's mutex). */
	*pp = l->next;
	pthread_mutex_unlock(lk->mu);
	int rc = zkl__engine_release_txn(c, &l->node, mops, n, answer);
	free(l);
	if (rc == ZKL_ELOST && n == 0)
		return zkl__fail(ZKL_ELOST, "lock %s was lost before it was released", lk->path);
	return rc;
}

static int mutex_release_txn(zkl_lock *lk, const struct zkl_mop *mops, int n,
                             struct zkl_op **answer)
{
	zkl_mutex *m = MUTEX(lk);
	return release_as(m, caller(m), true, mops, n, answer);
}

static int mutex_release(zkl_lock *lk)
{
	zkl_mutex *m = MUTEX(lk);
	return release_as(m, caller(m), true, NULL, 0, NULL);
}

int zkl__mutex_release_as(zkl_mutex *m, zkl__owner owner)
{
	zkl__clear_error();
	return release_as(m, owner, false, NULL, 0, NULL);
}

int zkl__mutex_held_as(zkl_mutex *m, zkl__owner owner, char *buf, size_t len,
                      int64_t *token)
{
	pthread_mutex_lock(m->lock.mu);
	struct zkl_acq **pp = find_owner(m, owner);
	int count = pp ? (*pp)->count : 0;
	if (pp && !zkl__node_lost(&(*pp)->node)) {
		snprintf(buf, len, "%s", (*pp)->node.path);
		*token = (*pp)->node.czxid;
	} else if (len) {
		buf[0] = '\0';
	}
	pthread_mutex_unlock(m->lock.mu);
	return count;
}

/* The hold the verbs see (the handle's mutex held): the calling thread's, else the
 * asynchronous one. */
static struct zkl_acq *current(zkl_mutex *m)
{
	struct zkl_acq **pp = find_own(m);
	if (!pp)
		pp = find_async(m);
	return pp ? *pp : NULL;
}

static bool mutex_is_held(zkl_lock *lk)
{
	pthread_mutex_lock(lk->mu);
	struct zkl_acq *l = current(MUTEX(lk));
	bool held = l && !zkl__node_lost(&l->node);
	pthread_mutex_unlock(lk->mu);
	return held;
}

/* The calling thread's (or the asynchronous) hold, else that of any thread of the
 * handle: the token answers for the handle. */
static int64_t mutex_token(zkl_lock *lk)
{
	int64_t token = ZKL_ENOTHELD;
	pthread_mutex_lock(lk->mu);
	struct zkl_acq *own = current(MUTEX(lk));
	if (own && !zkl__node_lost(&own->node))
		token = own->node.czxid;
	for (struct zkl_acq *l = MUTEX(lk)->leases; l && token < 0; l = l->next)
		if (!zkl__node_lost(&l->node))
			token = l->node.czxid;
	pthread_mutex_unlock(lk->mu);
	return token;
}

/* The hold's node; else the node an acquire under way has queued, as the engine
 * published it: the asynchronous one, the calling thread's, another thread's (the
 * handle's mutex and zkl__pub_mu held). */
static const char *mutex_node(zkl_lock *lk)
{
	zkl_mutex *m = MUTEX(lk);
	struct zkl_acq *l = current(m);
	if (l)
		return zkl__node_lost(&l->node) ? NULL : l->node.path;
	if (lk->pending) {
		const struct mutex_async *pa = (const struct mutex_async *)(void *)lk->pending;
		if (pa->l->node_pub)
			return pa->l->node_pub;
	}
	const char *other = NULL;
	const zkl__owner self = caller(m);
	for (l = m->waiting; l; l = l->next) {
		if (l->node_pub && l->owner == self)
			return l->node_pub;
		if (l->node_pub && !other)
			other = l->node_pub;
	}
	return other;
}

static struct zkl_acq *mutex_own(zkl_lock *lk)
{
	struct zkl_acq **pp = find_own(MUTEX(lk));
	return pp ? *pp : NULL;
}

static int mutex_hold_node(zkl_lock *lk, char *buf, size_t size)
{
	const struct zkl_acq *l = current(MUTEX(lk));
	if (!l || !l->node.path || strlen(l->node.path) >= size)
		return 0;
	strcpy(buf, l->node.path);
	return zkl__node_lost(&l->node) ? -1 : 1;
}

static bool mutex_holds_async(zkl_lock *lk)
{
	return find_async(MUTEX(lk)) != NULL;
}

static void mutex_cancel(zkl_lock *lk)
{
	zkl__client_cancel_owner(lk->c, MUTEX(lk));
}

static int mutex_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	return zkl__engine_participants(lk->c, lk->path,
	                               MUTEX(lk)->kind == ZKL_KIND_LOCK ? 1 : ZKL_HOLDERS_READERS,
	                               out, count);
}

static int mutex_start_as(zkl_lock *lk, zkl__owner owner, int timeout_ms,
                          void (*done)(void *arg, int rc), void *arg)
{
	return zkl__mutex_start_as(MUTEX(lk), owner, timeout_ms, done, arg);
}

static int mutex_release_as(zkl_lock *lk, zkl__owner owner)
{
	return zkl__mutex_release_as(MUTEX(lk), owner);
}

static bool mutex_held_as(zkl_lock *lk, zkl__owner owner)
{
	pthread_mutex_lock(lk->mu);
	struct zkl_acq **pp = find_owner(MUTEX(lk), owner);
	bool held = pp && !zkl__node_lost(&(*pp)->node);
	pthread_mutex_unlock(lk->mu);
	return held;
}

static const struct zkl_lock_ops mutex_ops = {
	.acquire = mutex_acquire,
	.start = mutex_start,
	.release = mutex_release,
	.cancel = mutex_cancel,
	.is_held = mutex_is_held,
	.token = mutex_token,
	.node = mutex_node,
	.hold_node = mutex_hold_node,
	.release_txn = mutex_release_txn,
	.holds_async = mutex_holds_async,
	.participants = mutex_participants,
	.own = mutex_own,
	.start_as = mutex_start_as,
	.release_as = mutex_release_as,
	.held_as = mutex_held_as,
};

int zkl_mutex_set_naming(zkl_mutex *m, zkl_naming naming)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	if (naming != ZKL_NAMING_CURATOR && naming != ZKL_NAMING_KAZOO)
		return zkl__fail(ZKL_EINVAL, "naming %d is neither ZKL_NAMING_CURATOR nor "
		                "ZKL_NAMING_KAZOO", (int)naming);
	pthread_mutex_lock(m->lock.mu);
	m->naming = naming;
	pthread_mutex_unlock(m->lock.mu);
	return 0;
}

int zkl_mutex_make_revocable(zkl_mutex *m, zkl_revoke_fn fn, void *data)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	pthread_mutex_lock(m->lock.mu);
	m->revoke_fn = fn;
	m->revoke_data = data;
	pthread_mutex_unlock(m->lock.mu);
	return 0;
}
