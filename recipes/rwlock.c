/* zkl_rwlock: Curator's InterProcessReadWriteLock layout. Its two halves are mutexes
 * (mutex.c) with their own markers and predicates; a thread that holds the write half
 * may take the read half (a downgrade), never the other way round. */
#include <stdlib.h>
#include <string.h>

#include <zklocks/rwlock.h>

#include "mutex_internal.h"

struct zkl_rwlock {
	zkl_mutex read;
	zkl_mutex write;
};

int zkl_rwlock_new(zkl_rwlock **out, zkl_client *c, const char *path)
{
	if (out)
		*out = NULL;
	int rc = zkl__check_new(out, c, path);
	if (rc != 0)
		return rc;
	zkl_rwlock *rw = calloc(1, sizeof *rw);
	if (!rw)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	rc = zkl__mutex_init(&rw->read, c, path, ZKL_KIND_READ);
	if (rc == 0 && (rc = zkl__mutex_init(&rw->write, c, path, ZKL_KIND_WRITE)) != 0) {
		zkl__lock_dispose(&rw->read.lock);
		zkl__mutex_fini(&rw->read);
	}
	if (rc != 0) {
		free(rw);
		return rc;
	}
	rw->read.other = &rw->write;
	rw->write.other = &rw->read;
	zkl__mutex_share_mu(&rw->write, &rw->read);
	zkl__client_handle_add(c);
	*out = rw;
	return 0;
}

static void rwlock_free_later(void *rw)
{
	zkl_rwlock_free(rw);
}

void zkl_rwlock_free(zkl_rwlock *rw)
{
	if (!rw)
		return;
	if (zkl__lock_defer_free(&rw->read.lock, rwlock_free_later, rw) ||
	    zkl__lock_defer_free(&rw->write.lock, rwlock_free_later, rw))
		return;
	zkl_client *c = rw->read.lock.c;
	/* Read first: a downgraded thread holds both, and its read node sorts after. */
	zkl__mutex_dispose(&rw->read);
	zkl__mutex_dispose(&rw->write);
	zkl__mutex_fini(&rw->read);
	zkl__mutex_fini(&rw->write);
	free(rw);
	zkl__client_handle_done(c, false);
}

int zkl_rwlock_set_naming(zkl_rwlock *rw, zkl_naming naming)
{
	ZKL_CHECK_HANDLE(rw, "rwlock");
	int rc = zkl_mutex_set_naming(&rw->read, naming);
	return rc ? rc : zkl_mutex_set_naming(&rw->write, naming);
}

zkl_mutex *zkl_rwlock_read(zkl_rwlock *rw)
{
	return rw ? &rw->read : NULL;
}

zkl_mutex *zkl_rwlock_write(zkl_rwlock *rw)
{
	return rw ? &rw->write : NULL;
}
