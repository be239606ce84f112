/* zkl_semaphore_mutex: a semaphore of one lease, in Curator's InterProcessSemaphoreV2
 * layout, so it excludes Curator's InterProcessSemaphoreMutex on the same path.
 *
 * A taker first holds the fair mutex "<path>/locks" (so takers queue in order and only
 * one watches the leases), creates its lease "<path>/leases/_c_<uuid>-lease-<seq>", waits
 * until the number of leases is within the limit, and then lets go of "<path>/locks".
 * The lease is the hold; the "locks" node never outlives the acquire call.
 *
 * Not reentrant: a second acquire on a handle that holds the lease queues behind it.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/semaphore_mutex.h>

#include "recipe.h"

struct zkl_semaphore_mutex {
	zkl_client *c;
	char *path;
	char *locks_path;   /* <path>/locks */
	char *leases_path;  /* <path>/leases */
	struct zkl_data data;                 /* c->mu */
	struct zkl_lease *leases;             /* c->mu: normally one */
	zkl_semaphore_mutex_lost_fn lost_fn;  /* c->mu */
	void *lost_data;
};

/* The lease predicate: we hold while the leases number at most the limit; otherwise wait
 * for any lease to go. */
static bool pred_leases(const zkl_child *queue, size_t n, size_t self, void *arg,
                        size_t *watch)
{
	(void)queue;
	(void)self;
	size_t max = *(const size_t *)arg;
	if (n <= max)
		return true;
	*watch = ZKL_WATCH_CHILDREN;
	return false;
}

static void semaphore_mutex_lost(struct zkl_hold *h, void *ctx)
{
	(void)h;
	zkl_semaphore_mutex *m = ctx;
	pthread_mutex_lock(&m->c->mu);
	zkl_semaphore_mutex_lost_fn fn = m->lost_fn;
	void *data = m->lost_data;
	pthread_mutex_unlock(&m->c->mu);
	zkl_log(m->c, ZKL_LOG_WARN, "lock %s lost with its session", m->path);
	if (fn)
		fn(m, ZKL_ELOST, data);
}

int zkl_semaphore_mutex_new(zkl_semaphore_mutex **out, zkl_client *c, const char *path)
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
	if (strlen(path) + sizeof "/leases" > ZKL_PATH_MAX)
		return zkl_fail(ZKL_EINVAL, "lock path \"%.40s...\" is too long for its "
		                "\"/leases\" folder", path);
	zkl_semaphore_mutex *m = calloc(1, sizeof *m);
	if (!m)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	m->c = c;
	m->path = strdup(path);
	m->locks_path = zkl_path_join(path, "locks");
	m->leases_path = zkl_path_join(path, "leases");
	if (!m->path || !m->locks_path || !m->leases_path || zkl_data_init(&m->data) != 0) {
		free(m->path);
		free(m->locks_path);
		free(m->leases_path);
		free(m);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	*out = m;
	return 0;
}

void zkl_semaphore_mutex_free(zkl_semaphore_mutex *m)
{
	if (!m)
		return;
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
	free(m->locks_path);
	free(m->leases_path);
	free(m);
}

static int remaining(int64_t deadline, int timeout_ms)
{
	if (timeout_ms < 0)
		return -1;
	int64_t left = deadline - zkl_now_ms();
	return left > 0 ? (int)left : 0;
}

int zkl_semaphore_mutex_acquire(zkl_semaphore_mutex *m, int timeout_ms)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	zkl_client *c = m->c;
	int64_t deadline = zkl_deadline(timeout_ms);

	pthread_mutex_lock(&c->mu);
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

	/* 1. The takers' queue. Its node carries the same data, so that an operator sees
	 *    who waits. */
	struct zkl_node gate;
	struct zkl_queue q = {
		.c = c,
		.path = m->locks_path,
		.kind = ZKL_KIND_LOCK,
		.data = data.bytes,
		.data_len = data.len,
		.pred = zkl_pred_first,
		.owner = m,
	};
	rc = zkl_engine_acquire(&q, timeout_ms, &gate);
	if (rc == 0) {
		/* 2. The lease, within the same deadline. */
		size_t max = 1;
		struct zkl_queue lq = {
			.c = c,
			.path = m->leases_path,
			.kind = ZKL_KIND_LEASE,
			.data = data.bytes,
			.data_len = data.len,
			.pred = pred_leases,
			.pred_arg = &max,
			.owner = m,
		};
		rc = zkl_engine_acquire(&lq, remaining(deadline, timeout_ms), &l->node);
		/* 3. Let the next taker in, whatever happened. */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		zkl_engine_release(c, &gate);
		if (rc != 0)
			zkl_fail(rc, "%s", saved);
	}
	zkl_data_free(&data);
	if (rc != 0) {
		free(l);
		return rc;
	}
	l->owner = pthread_self();
	l->count = 1;
	l->hold.on_lost = semaphore_mutex_lost;
	l->hold.ctx = m;
	pthread_mutex_lock(&c->mu);
	l->next = m->leases;
	m->leases = l;
	zkl_hold_add(c, &l->hold, l->node.gen);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int zkl_semaphore_mutex_release(zkl_semaphore_mutex *m)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	zkl_client *c = m->c;
	pthread_mutex_lock(&c->mu);
	/* Any thread may release. Prefer a live lease over one lost with its session. */
	struct zkl_lease **pick = NULL;
	for (struct zkl_lease **pp = &m->leases; *pp; pp = &(*pp)->next)
		if (!pick || !(*pp)->hold.lost)
			pick = pp;
	if (!pick) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ENOTHELD, "%s is not held by this handle", m->path);
	}
	struct zkl_lease *l = *pick;
	*pick = l->next;
	zkl_hold_remove(c, &l->hold);
	bool lost = l->hold.lost;
	pthread_mutex_unlock(&c->mu);
	int rc = zkl_engine_release(c, &l->node);
	free(l);
	if (lost || rc == ZKL_ELOST)
		return zkl_fail(ZKL_ELOST, "lock %s was lost before it was released", m->path);
	return rc;
}

bool zkl_semaphore_mutex_is_held(zkl_semaphore_mutex *m)
{
	if (!m)
		return false;
	bool held = false;
	pthread_mutex_lock(&m->c->mu);
	for (struct zkl_lease *l = m->leases; l; l = l->next)
		if (!l->hold.lost)
			held = true;
	pthread_mutex_unlock(&m->c->mu);
	return held;
}

int64_t zkl_semaphore_mutex_token(zkl_semaphore_mutex *m)
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

void zkl_semaphore_mutex_cancel(zkl_semaphore_mutex *m)
{
	if (m)
		zkl_client_cancel_owner(m->c, m);
}

int zkl_semaphore_mutex_set_data(zkl_semaphore_mutex *m, const void *data, size_t len)
{
	ZKL_CHECK_HANDLE(m, "semaphore mutex");
	pthread_mutex_lock(&m->c->mu);
	int rc = zkl_data_set(&m->data, data, len);
	pthread_mutex_unlock(&m->c->mu);
	return rc;
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
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl_engine_participants(m->c, m->leases_path, 1, out, count);
}

const char *zkl_semaphore_mutex_path(const zkl_semaphore_mutex *m)
{
	return m ? m->path : NULL;
}
