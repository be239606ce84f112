/* zkl_mutex: fair, reentrant per thread, Curator's InterProcessMutex layout; and the two
 * halves of zkl_rwlock, which are mutexes with another marker and predicate.
 *
 * Each thread that acquires queues its own node, so threads sharing a handle queue like
 * any other contender. The handle keeps a list of the acquisitions it holds, one per
 * thread; normally there is at most one, but a hold lost with an expired session stays
 * on the list until its thread releases it, while another thread may already hold the
 * lock again on the new session. Handle state is guarded by the client's mutex.
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
	zkl_mutex *m;
	char *path;
	struct zkl_queue q;
	struct zkl_data data;
	bool folder_seen;
	struct zkl_acq *l;
	zkl_mutex_acquired_fn fn;
	void *fn_data;
	bool orphaned;                 /* c->mu: the handle is gone; end quietly */
};

bool zkl_mutex_is_read_half(const zkl_mutex *m)
{
	return m && m->kind == ZKL_KIND_READ;
}

/* While a revocation callback runs, releasing its handle on the event thread releases the
 * revoked acquisition, whichever thread took it. */
static _Thread_local const zkl_mutex *revoking;
static _Thread_local pthread_t revoking_owner;

/* The handle whose acquire callback the event thread is running, and whether that
 * callback freed it (then nothing may touch it afterwards). Callbacks do not nest. */
static _Thread_local struct {
	zkl_mutex *m;
	bool freed;
} in_callback;

static void mutex_revoked(void *ctx, const char *node)
{
	zkl_mutex *m = ctx;
	pthread_mutex_lock(&m->c->mu);
	zkl_revoke_fn fn = m->revoke_fn;
	void *data = m->revoke_data;
	bool found = false;
	for (struct zkl_acq *l = m->leases; l; l = l->next) {
		if (l->node.path && strcmp(l->node.path, node) == 0) {
			revoking_owner = l->owner;
			found = true;
		}
	}
	pthread_mutex_unlock(&m->c->mu);
	zkl_log(m->c, ZKL_LOG_INFO, "revocation of %s requested", node);
	if (!fn)
		return;
	const zkl_mutex *outer = revoking;
	revoking = found ? m : NULL;
	fn(m, data);
	revoking = outer;
}

static void mutex_lost(struct zkl_hold *h, void *ctx)
{
	(void)h;
	zkl_mutex *m = ctx;
	pthread_mutex_lock(&m->c->mu);
	zkl_mutex_lost_fn fn = m->lost_fn;
	void *data = m->lost_data;
	pthread_mutex_unlock(&m->c->mu);
	zkl_log(m->c, ZKL_LOG_WARN, "lock %s lost with its session", m->path);
	if (fn)
		fn(m, ZKL_ELOST, data);
}

/* The calling thread's acquisition (c->mu held). */
static struct zkl_acq **find_own(zkl_mutex *m)
{
	pthread_t self = revoking == m ? revoking_owner : pthread_self();
	for (struct zkl_acq **pp = &m->leases; *pp; pp = &(*pp)->next)
		if (!(*pp)->async && pthread_equal((*pp)->owner, self))
			return pp;
	return NULL;
}

/* The handle's asynchronous acquisition (c->mu held). */
static struct zkl_acq **find_async(zkl_mutex *m)
{
	for (struct zkl_acq **pp = &m->leases; *pp; pp = &(*pp)->next)
		if ((*pp)->async)
			return pp;
	return NULL;
}

int zkl_mutex_new(zkl_mutex **out, zkl_client *c, const char *path)
{
	if (out)
		*out = NULL;
	int rc = zkl_check_new(out, c, path);
	if (rc != 0)
		return rc;
	zkl_mutex *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path)) || zkl_data_init(&m->data) != 0) {
		if (m)
			free(m->path);
		free(m);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	m->c = c;
	m->kind = ZKL_KIND_LOCK;
	*out = m;
	return 0;
}


void zkl_mutex_free(zkl_mutex *m)
{
	if (!m || m->other)
		return; /* a rwlock half goes with its rwlock */
	zkl_mutex_dispose(m);
	free(m);
}

void zkl_mutex_dispose(zkl_mutex *m)
{
	/* An asynchronous acquire under way ends with ZKL_ECANCELED: wait until its callback
	 * has run. On the event thread, which runs callbacks, that cannot be waited for: the
	 * acquire is orphaned (it ends without calling anyone), and if this is the handle's
	 * own callback, it is told that the handle is gone. */
	zkl_client_cancel_owner(m->c, m);
	pthread_mutex_lock(&m->c->mu);
	if (zkl_on_event_thread(m->c)) {
		if (m->pending)
			m->pending->orphaned = true;
		if (in_callback.m == m)
			in_callback.freed = true;
	} else {
		while (m->pending || m->calling)
			pthread_cond_wait(&m->c->cv, &m->c->mu);
	}
	m->pending = NULL;
	pthread_mutex_unlock(&m->c->mu);
	/* The calling thread's hold, however deep, ends here. */
	pthread_mutex_lock(&m->c->mu);
	struct zkl_acq **pp = find_own(m);
	if (pp)
		(*pp)->count = 1;
	pthread_mutex_unlock(&m->c->mu);
	if (pp)
		zkl_mutex_release(m);
	/* Holds of other threads: the contract says none, but never leave a node or a
	 * registration behind. */
	pthread_mutex_lock(&m->c->mu);
	while (m->leases) {
		struct zkl_acq *l = m->leases;
		m->leases = l->next;
		zkl_hold_remove(m->c, &l->hold);
		pthread_mutex_unlock(&m->c->mu);
		zkl_engine_release(m->c, &l->node);
		free(l);
		pthread_mutex_lock(&m->c->mu);
	}
	zkl_data_free(&m->data);
	pthread_mutex_unlock(&m->c->mu);
	free(m->path);
}

int zkl_mutex_acquire(zkl_mutex *m, int timeout_ms)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	zkl_client *c = m->c;

	pthread_mutex_lock(&c->mu);
	struct zkl_acq **pp = find_own(m);
	if (pp) {
		/* Re-entry costs no round trip. */
		struct zkl_acq *l = *pp;
		if (l->hold.lost) {
			pthread_mutex_unlock(&c->mu);
			return zkl_fail(ZKL_ELOST, "lock %s was lost; release it before acquiring "
			                "again", m->path);
		}
		l->count++;
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	/* The other half of a rwlock, held by this thread: downgrade or upgrade. */
	struct zkl_acq **op = m->other ? find_own(m->other) : NULL;
	bool downgrade = op && m->kind == ZKL_KIND_READ && !(*op)->hold.lost;
	int64_t writer_seq = downgrade ? (*op)->node.seq : 0;
	if (op && m->kind == ZKL_KIND_WRITE) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_EDEADLK, "the calling thread holds the read lock of %s: "
		                "upgrading to the write lock can never succeed", m->path);
	}
	/* Nodes of revocable handles carry no data, as Curator's do. */
	struct zkl_data data = {0};
	if (m->revoke_fn)
		rc = zkl_data_set(&data, NULL, 0);
	else
		rc = zkl_data_set(&data, m->data.bytes, (size_t)m->data.len);
	bool revocable = m->revoke_fn != NULL;
	enum zkl_kind kind = m->kind;
	if (m->naming == ZKL_NAMING_KAZOO)
		kind = m->kind == ZKL_KIND_READ ? ZKL_KIND_KRLOCK : ZKL_KIND_KLOCK;
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		return rc;

	struct zkl_acq *l = calloc(1, sizeof *l);
	if (!l) {
		zkl_data_free(&data);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	struct zkl_queue q = {
		.c = c,
		.path = m->path,
		.kind = kind,
		.data = data.bytes,
		.data_len = data.len,
		.pred = m->kind == ZKL_KIND_READ ? &zkl_pred_read : &zkl_pred_first,
		.owner = m,
		.on_revoke = revocable ? mutex_revoked : NULL,
		.revoke_ctx = m,
		.folder_seen = &m->folder_seen,
	};
	if (downgrade) {
		/* Curator's downgrade: a non-sequential read node that sorts at the writer's
		 * place, so writers queued behind the writer stay behind the reader. */
		char uuid[ZKL_UUID_LEN + 1], name[ZKL_PROTECT_PREFIX_LEN + 40];
		zkl_uuid(uuid);
		int k = zkl_node_prefix(name, sizeof name, uuid, kind);
		snprintf(name + k, sizeof name - (size_t)k, "%010d", (int)writer_seq);
		rc = zkl_engine_create_fixed(&q, name, timeout_ms, &l->node);
		l->node.seq = writer_seq;
	} else {
		rc = zkl_engine_acquire(&q, timeout_ms, &l->node);
	}
	zkl_data_free(&data);
	if (rc != 0) {
		free(l);
		return rc;
	}
	l->owner = pthread_self();
	l->count = 1;
	l->hold.on_lost = mutex_lost;
	l->hold.ctx = m;
	pthread_mutex_lock(&c->mu);
	l->next = m->leases;
	m->leases = l;
	zkl_hold_add(c, &l->hold, l->node.gen);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* The end of an asynchronous acquire (event thread, no lock held). */
static void mutex_async_done(void *arg, int rc)
{
	struct mutex_async *pa = arg;
	zkl_mutex *m = pa->m;
	zkl_client *c = pa->q.c;
	struct zkl_acq *l = pa->l;
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	pthread_mutex_lock(&c->mu);
	const bool orphaned = pa->orphaned;
	if (!orphaned) {
		m->pending = NULL;
		m->calling = true;
		m->folder_seen |= pa->folder_seen;
		if (rc == 0) {
			l->async = true;
			l->owner = pthread_self();
			l->count = 1;
			l->hold.on_lost = mutex_lost;
			l->hold.ctx = m;
			l->next = m->leases;
			m->leases = l;
			zkl_hold_add(c, &l->hold, l->node.gen);
			if (m->revoke_fn)
				l->node.rev = zkl_revwatch_add(c, l->node.path, l->node.gen, mutex_revoked,
				                               m);
			l = NULL;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (l && rc == 0)
		zkl_engine_release(c, &l->node); /* won for a handle that is gone */
	free(l);
	zkl_data_free(&pa->data);
	free(pa->path);
	zkl_mutex_acquired_fn fn = pa->fn;
	void *data = pa->fn_data;
	free(pa);
	if (orphaned)
		return;
	if (rc != 0)
		zkl_fail(rc, "%s", saved);
	in_callback.m = m;
	in_callback.freed = false;
	fn(m, rc, data);
	in_callback.m = NULL;
	if (in_callback.freed)
		return;
	pthread_mutex_lock(&c->mu);
	m->calling = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

int zkl_mutex_acquire_async(zkl_mutex *m, int timeout_ms, zkl_mutex_acquired_fn fn,
                            void *data)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	if (!fn)
		return zkl_fail(ZKL_EINVAL, "callback is NULL");
	zkl_client *c = m->c;
	struct mutex_async *pa = calloc(1, sizeof *pa);
	if (!pa || !(pa->l = calloc(1, sizeof *pa->l)) || !(pa->path = strdup(m->path))) {
		if (pa)
			free(pa->l);
		free(pa);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&c->mu);
	if (m->pending || find_async(m)) {
		pthread_mutex_unlock(&c->mu);
		free(pa->path);
		free(pa->l);
		free(pa);
		return zkl_fail(ZKL_EBUSY, "an asynchronous acquire of %s is under way or holds "
		                "it: release it first", m->path);
	}
	/* Nodes of revocable handles carry no data, as Curator's do. */
	if (m->revoke_fn)
		rc = zkl_data_set(&pa->data, NULL, 0);
	else
		rc = zkl_data_set(&pa->data, m->data.bytes, (size_t)m->data.len);
	enum zkl_kind kind = m->kind;
	if (m->naming == ZKL_NAMING_KAZOO)
		kind = m->kind == ZKL_KIND_READ ? ZKL_KIND_KRLOCK : ZKL_KIND_KLOCK;
	pa->m = m;
	pa->fn = fn;
	pa->fn_data = data;
	pa->folder_seen = m->folder_seen;
	pa->q = (struct zkl_queue){
		.c = c,
		.path = pa->path,
		.kind = kind,
		.data = pa->data.bytes,
		.data_len = pa->data.len,
		.pred = m->kind == ZKL_KIND_READ ? &zkl_pred_read : &zkl_pred_first,
		.owner = m,
		.folder_seen = &pa->folder_seen,
	};
	if (rc == 0)
		m->pending = pa;
	pthread_mutex_unlock(&c->mu);
	if (rc == 0)
		rc = zkl_engine_start(&pa->q, timeout_ms, &pa->l->node, mutex_async_done, pa);
	if (rc != 0) {
		pthread_mutex_lock(&c->mu);
		if (m->pending == pa)
			m->pending = NULL;
		pthread_mutex_unlock(&c->mu);
		zkl_data_free(&pa->data);
		free(pa->path);
		free(pa->l);
		free(pa);
	}
	return rc;
}

int zkl_mutex_release(zkl_mutex *m)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	zkl_client *c = m->c;
	pthread_mutex_lock(&c->mu);
	struct zkl_acq **pp = find_own(m);
	if (!pp)
		pp = find_async(m); /* the handle's: any thread may release it */
	if (!pp) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ENOTOWNER, "the calling thread does not hold %s", m->path);
	}
	struct zkl_acq *l = *pp;
	if (--l->count > 0) {
		bool lost = l->hold.lost;
		pthread_mutex_unlock(&c->mu);
		return lost ? zkl_fail(ZKL_ELOST, "lock %s was lost", m->path) : 0;
	}
	/* Forget the hold before deleting the node, so that the next holder on this handle
	 * never sees it. */
	*pp = l->next;
	zkl_hold_remove(c, &l->hold);
	bool lost = l->hold.lost;
	pthread_mutex_unlock(&c->mu);
	int rc = zkl_engine_release(c, &l->node);
	free(l);
	if (lost || rc == ZKL_ELOST)
		return zkl_fail(ZKL_ELOST, "lock %s was lost before it was released", m->path);
	return rc;
}

bool zkl_mutex_is_held(zkl_mutex *m)
{
	if (!m)
		return false;
	pthread_mutex_lock(&m->c->mu);
	struct zkl_acq **pp = find_own(m);
	if (!pp)
		pp = find_async(m);
	bool held = pp && !(*pp)->hold.lost;
	pthread_mutex_unlock(&m->c->mu);
	return held;
}

int64_t zkl_mutex_token(zkl_mutex *m)
{
	if (!m)
		return ZKL_EINVAL;
	int64_t token = ZKL_ENOTHELD;
	pthread_mutex_lock(&m->c->mu);
	for (struct zkl_acq *l = m->leases; l; l = l->next)
		if (!l->hold.lost)
			token = l->node.czxid;
	pthread_mutex_unlock(&m->c->mu);
	return token;
}

void zkl_mutex_cancel(zkl_mutex *m)
{
	if (m)
		zkl_client_cancel_owner(m->c, m);
}

int zkl_mutex_set_data(zkl_mutex *m, const void *data, size_t len)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	pthread_mutex_lock(&m->c->mu);
	int rc = zkl_data_set(&m->data, data, len);
	pthread_mutex_unlock(&m->c->mu);
	return rc;
}

int zkl_mutex_on_lost(zkl_mutex *m, zkl_mutex_lost_fn fn, void *data)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	pthread_mutex_lock(&m->c->mu);
	m->lost_fn = fn;
	m->lost_data = data;
	pthread_mutex_unlock(&m->c->mu);
	return 0;
}

int zkl_mutex_set_naming(zkl_mutex *m, zkl_naming naming)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	if (naming != ZKL_NAMING_CURATOR && naming != ZKL_NAMING_KAZOO)
		return zkl_fail(ZKL_EINVAL, "naming %d is neither ZKL_NAMING_CURATOR nor "
		                "ZKL_NAMING_KAZOO", (int)naming);
	pthread_mutex_lock(&m->c->mu);
	m->naming = naming;
	pthread_mutex_unlock(&m->c->mu);
	return 0;
}

int zkl_mutex_make_revocable(zkl_mutex *m, zkl_revoke_fn fn, void *data)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	pthread_mutex_lock(&m->c->mu);
	m->revoke_fn = fn;
	m->revoke_data = data;
	pthread_mutex_unlock(&m->c->mu);
	return 0;
}

int zkl_mutex_participants(zkl_mutex *m, zkl_participant **out, size_t *count)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl_engine_participants(m->c, m->path,
	                               m->kind == ZKL_KIND_LOCK ? 1 : ZKL_HOLDERS_READERS, out,
	                               count);
}

const char *zkl_mutex_path(const zkl_mutex *m)
{
	return m ? m->path : NULL;
}
