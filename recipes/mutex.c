/* zkl_mutex: fair, reentrant per thread, Curator's InterProcessMutex layout.
 *
 * Each thread that acquires queues its own node, so threads sharing a handle queue like
 * any other contender. The handle keeps a list of the acquisitions it holds, one per
 * thread; normally there is at most one, but a hold lost with an expired session stays
 * on the list until its thread releases it, while another thread may already hold the
 * lock again on the new session. Handle state is guarded by the client's mutex.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/mutex.h>

#include "recipe.h"

struct zkl_mutex {
	zkl_client *c;
	char *path;
	struct zkl_data data;          /* c->mu */
	struct zkl_lease *leases;      /* c->mu: acquisitions held, one per thread */
	zkl_mutex_lost_fn lost_fn;     /* c->mu */
	void *lost_data;
};

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
static struct zkl_lease **find_own(zkl_mutex *m)
{
	pthread_t self = pthread_self();
	for (struct zkl_lease **pp = &m->leases; *pp; pp = &(*pp)->next)
		if (pthread_equal((*pp)->owner, self))
			return pp;
	return NULL;
}

int zkl_mutex_new(zkl_mutex **out, zkl_client *c, const char *path)
{
	zkl_clear_error();
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl_path_check(path, "lock path");
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
	*out = m;
	return 0;
}

void zkl_mutex_free(zkl_mutex *m)
{
	if (!m)
		return;
	/* The calling thread's hold, however deep, ends here. */
	pthread_mutex_lock(&m->c->mu);
	struct zkl_lease **pp = find_own(m);
	if (pp)
		(*pp)->count = 1;
	pthread_mutex_unlock(&m->c->mu);
	if (pp)
		zkl_mutex_release(m);
	/* Holds of other threads: the contract says none, but never leave a node or a
	 * registration behind. */
	pthread_mutex_lock(&m->c->mu);
	while (m->leases) {
		struct zkl_lease *l = m->leases;
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
	free(m);
}

int zkl_mutex_acquire(zkl_mutex *m, int timeout_ms)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	zkl_client *c = m->c;

	pthread_mutex_lock(&c->mu);
	struct zkl_lease **pp = find_own(m);
	if (pp) {
		/* Re-entry costs no round trip. */
		struct zkl_lease *l = *pp;
		if (l->hold.lost) {
			pthread_mutex_unlock(&c->mu);
			return zkl_fail(ZKL_ELOST, "lock %s was lost; release it before acquiring "
			                "again", m->path);
		}
		l->count++;
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	struct zkl_data data = {0};
	rc = zkl_data_set(&data, m->data.bytes, (size_t)m->data.len);
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		return rc;

	struct zkl_lease *l = calloc(1, sizeof *l);
	if (!l) {
		zkl_data_free(&data);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	struct zkl_queue q = {
		.c = c,
		.path = m->path,
		.kind = ZKL_KIND_LOCK,
		.data = data.bytes,
		.data_len = data.len,
		.pred = zkl_pred_first,
		.owner = m,
	};
	rc = zkl_engine_acquire(&q, timeout_ms, &l->node);
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

int zkl_mutex_release(zkl_mutex *m)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	zkl_client *c = m->c;
	pthread_mutex_lock(&c->mu);
	struct zkl_lease **pp = find_own(m);
	if (!pp) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ENOTOWNER, "the calling thread does not hold %s", m->path);
	}
	struct zkl_lease *l = *pp;
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
	struct zkl_lease **pp = find_own(m);
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
	for (struct zkl_lease *l = m->leases; l; l = l->next)
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

int zkl_mutex_participants(zkl_mutex *m, zkl_participant **out, size_t *count)
{
	ZKL_CHECK_HANDLE(m, "mutex");
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl_engine_participants(m->c, m->path, 1, out, count);
}

const char *zkl_mutex_path(const zkl_mutex *m)
{
	return m ? m->path : NULL;
}
