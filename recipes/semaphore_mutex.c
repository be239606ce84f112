/* zkl_semaphore_mutex: a zkl_semaphore of one lease, as Curator's
 * InterProcessSemaphoreMutex is an InterProcessSemaphoreV2 of one lease; so the two share
 * a path.
 *
 * Not reentrant: a second acquire while the handle holds its lease queues behind it like
 * any other taker. The handle remembers its current lease; a lease lost with its session
 * is replaced when the handle acquires again.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/semaphore.h>
#include <zklocks/semaphore_mutex.h>

#include "common.h"

struct zkl_semaphore_mutex {
	zkl_client *c;
	zkl_semaphore *sem;
	char *path;
	zkl_lease *lease;                     /* c->mu: the current lease, or NULL */
	zkl_semaphore_mutex_lost_fn lost_fn;  /* c->mu */
	void *lost_data;
};

static void lease_lost(zkl_semaphore *s, zkl_lease *l, int reason, void *data)
{
	(void)s;
	(void)l;
	zkl_semaphore_mutex *m = data;
	pthread_mutex_lock(&m->c->mu);
	zkl_semaphore_mutex_lost_fn fn = m->lost_fn;
	void *fdata = m->lost_data;
	pthread_mutex_unlock(&m->c->mu);
	if (fn)
		fn(m, reason, fdata);
}

int zkl_semaphore_mutex_new(zkl_semaphore_mutex **out, zkl_client *c, const char *path)
{
	zkl_clear_error();
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	zkl_semaphore_mutex *m = calloc(1, sizeof *m);
	if (!m)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl_semaphore_new(&m->sem, c, path, 1);
	if (rc != 0) {
		free(m);
		return rc;
	}
	m->c = c;
	if (!(m->path = strdup(path))) {
		zkl_semaphore_free(m->sem);
		free(m);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	zkl_semaphore_on_lost(m->sem, lease_lost, m);
	*out = m;
	return 0;
}

void zkl_semaphore_mutex_free(zkl_semaphore_mutex *m)
{
	if (!m)
		return;
	zkl_semaphore_free(m->sem); /* releases and frees the lease */
	free(m->path);
	free(m);
}

int zkl_semaphore_mutex_acquire(zkl_semaphore_mutex *m, int timeout_ms)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	zkl_lease *l;
	int rc = zkl_semaphore_acquire(m->sem, 1, timeout_ms, &l);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&m->c->mu);
	zkl_lease *old = m->lease;
	m->lease = l;
	pthread_mutex_unlock(&m->c->mu);
	/* Only a lease lost with its session can still be here: the new one replaces it. */
	zkl_lease_free(old);
	return 0;
}

int zkl_semaphore_mutex_release(zkl_semaphore_mutex *m)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	pthread_mutex_lock(&m->c->mu);
	zkl_lease *l = m->lease;
	m->lease = NULL;
	pthread_mutex_unlock(&m->c->mu);
	if (!l)
		return zkl_fail(ZKL_ENOTHELD, "%s is not held by this handle", m->path);
	int rc = zkl_lease_release(l);
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	zkl_lease_free(l);
	return rc ? zkl_fail(rc, "%s", saved) : 0;
}

bool zkl_semaphore_mutex_is_held(zkl_semaphore_mutex *m)
{
	if (!m)
		return false;
	pthread_mutex_lock(&m->c->mu);
	zkl_lease *l = m->lease;
	pthread_mutex_unlock(&m->c->mu);
	return l && zkl_lease_is_held(l);
}

int64_t zkl_semaphore_mutex_token(zkl_semaphore_mutex *m)
{
	if (!m)
		return ZKL_EINVAL;
	pthread_mutex_lock(&m->c->mu);
	zkl_lease *l = m->lease;
	pthread_mutex_unlock(&m->c->mu);
	return l ? zkl_lease_token(l) : ZKL_ENOTHELD;
}

void zkl_semaphore_mutex_cancel(zkl_semaphore_mutex *m)
{
	if (m)
		zkl_semaphore_cancel(m->sem);
}

int zkl_semaphore_mutex_set_data(zkl_semaphore_mutex *m, const void *data, size_t len)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	return zkl_semaphore_set_data(m->sem, data, len);
}

int zkl_semaphore_mutex_on_lost(zkl_semaphore_mutex *m, zkl_semaphore_mutex_lost_fn fn,
                                void *data)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	pthread_mutex_lock(&m->c->mu);
	m->lost_fn = fn;
	m->lost_data = data;
	pthread_mutex_unlock(&m->c->mu);
	return 0;
}

int zkl_semaphore_mutex_participants(zkl_semaphore_mutex *m, zkl_participant **out,
                                     size_t *count)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	return zkl_semaphore_participants(m->sem, out, count);
}

const char *zkl_semaphore_mutex_path(const zkl_semaphore_mutex *m)
{
	return m ? m->path : NULL;
}
