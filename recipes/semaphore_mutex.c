/* zkl_semaphore_mutex: a zkl_semaphore of one lease, as Curator's
 * InterProcessSemaphoreMutex is an InterProcessSemaphoreV2 of one lease; so the two share
 * a path, and its view is the semaphore's.
 *
 * Not reentrant: a second acquire while the handle holds its lease queues behind it like
 * any other taker. A lease lost with its session is replaced when the handle acquires
 * again.
 */
#include <stdlib.h>

#include <zklocks/semaphore.h>
#include <zklocks/semaphore_mutex.h>

#include "lock_internal.h"

struct zkl_semaphore_mutex {
	zkl_semaphore *sem;
};

int zkl_semaphore_mutex_new(zkl_semaphore_mutex **out, zkl_client *c, const char *path)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	zkl_semaphore_mutex *m = calloc(1, sizeof *m);
	if (!m)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl_semaphore_new(&m->sem, c, path, 1);
	if (rc != 0) {
		free(m);
		return rc;
	}
	zkl__semaphore_set_kind(m->sem, "semaphore-mutex");
	*out = m;
	return 0;
}

static void semaphore_mutex_free_later(void *m)
{
	zkl_semaphore_mutex_free(m);
}

void zkl_semaphore_mutex_free(zkl_semaphore_mutex *m)
{
	if (!m || zkl__lock_defer_free(zkl_semaphore_lock(m->sem), semaphore_mutex_free_later, m))
		return;
	zkl_semaphore_free(m->sem); /* releases and frees the lease */
	free(m);
}

zkl_lock *zkl_semaphore_mutex_lock(zkl_semaphore_mutex *m)
{
	return m ? zkl_semaphore_lock(m->sem) : NULL;
}
