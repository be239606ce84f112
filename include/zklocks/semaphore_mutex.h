/* zkl_semaphore_mutex: a mutex that is not reentrant, Curator's
 * InterProcessSemaphoreMutex: a zkl_semaphore of one lease at the same path (the layout
 * "<path>/locks/" and "<path>/leases/"), so it excludes Curator's and kazoo's users of the
 * same path and semaphore.
 *
 * Its verbs are those of every lock, on the view zkl_semaphore_mutex_lock() gives (see
 * <zklocks/lock.h>). Not reentrant: an acquire while the handle holds the lease waits
 * behind it (and times out). A lease lost with its session is replaced when the handle
 * acquires again. All functions are thread-safe. */
#ifndef ZKLOCKS_SEMAPHORE_MUTEX_H
#define ZKLOCKS_SEMAPHORE_MUTEX_H

#include <zklocks/common.h>
#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

typedef struct zkl_semaphore_mutex zkl_semaphore_mutex;

/* Makes a semaphore-mutex for the absolute path on client c (nothing is sent yet). On
 * success *out is the caller's, freed with zkl_semaphore_mutex_free(); on failure *out is
 * NULL and the return is ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_semaphore_mutex_new(zkl_semaphore_mutex **out, zkl_client *c, const char *path);

/* Frees m and its view, releasing its lease if held and canceling an asynchronous
 * acquire under way. NULL is a no-op. */
ZKL_API void zkl_semaphore_mutex_free(zkl_semaphore_mutex *m);

/* The view of m that the shared verbs take; it lives as long as m. NULL for NULL. */
ZKL_API zkl_lock *zkl_semaphore_mutex_lock(zkl_semaphore_mutex *m);

ZKL_END_DECLS

#endif
