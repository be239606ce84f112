/* zkl_rwlock: a fair read-write lock shared between processes, with the layout of
 * Curator's InterProcessReadWriteLock: read nodes "_c_<uuid>-__READ__<seq>" and write
 * nodes "_c_<uuid>-__WRIT__<seq>" queue together under the lock path.
 *
 * The two halves are zkl_mutex handles: zkl_mutex_lock() gives each one's view for the
 * shared verbs of <zklocks/lock.h>, and revocation works on them as on any mutex:
 *
 *   zkl_rwlock *rw;  zkl_rwlock_new(&rw, c, "/locks/table");
 *   zkl_lock *rd = zkl_mutex_lock(zkl_rwlock_read(rw));
 *   zkl_lock_acquire(rd, 5000);  ...  zkl_lock_release(rd);
 *
 * - A writer holds when it is first in the queue; a reader holds when no writer is ahead
 *   of it, so readers overlap and a waiting writer keeps later readers out (no writer
 *   starvation). Both halves are reentrant per thread.
 * - Downgrade: a thread that holds the write half may acquire the read half, then
 *   release the write half and keep reading; writers that were waiting stay blocked.
 * - Upgrade (write while holding only the read half) can never succeed: it fails at once
 *   with ZKL_EDEADLK.
 * All functions are thread-safe. */
#ifndef ZKLOCKS_RWLOCK_H
#define ZKLOCKS_RWLOCK_H

#include <zklocks/mutex.h>

ZKL_BEGIN_DECLS

typedef struct zkl_rwlock zkl_rwlock;

/* Makes a read-write lock for the absolute path (nothing is sent yet). On success *out is
 * the caller's, freed with zkl_rwlock_free(). */
ZKL_API int zkl_rwlock_new(zkl_rwlock **out, zkl_client *c, const char *path);

/* Frees the lock and both halves (the calling thread's holds are released first). The
 * halves must not be used afterwards. NULL is a no-op. */
ZKL_API void zkl_rwlock_free(zkl_rwlock *rw);

/* Sets the naming of both halves (zkl_mutex_set_naming()). */
ZKL_API int zkl_rwlock_set_naming(zkl_rwlock *rw, zkl_naming naming);

/* The two halves. Borrowed: valid until zkl_rwlock_free(); never zkl_mutex_free() them. */
ZKL_API zkl_mutex *zkl_rwlock_read(zkl_rwlock *rw);
ZKL_API zkl_mutex *zkl_rwlock_write(zkl_rwlock *rw);

ZKL_END_DECLS

#endif
