/* zkl_multilock: several locks held as one, all or nothing (Curator's
 * InterProcessMultiLock).
 *
 * Members are locks of any kind (the views of <zklocks/lock.h>: mutexes, either half of
 * a read-write lock, semaphores, semaphore-mutexes), added before the first acquire. By default they are taken in a canonical order (sorted
 * by path, then write before read) so that two multi-locks over the same locks, built in
 * different orders, cannot deadlock; ZKL_MULTILOCK_AS_ADDED keeps the order of addition.
 * Members stay the caller's: free them after the multi-lock.
 *
 * A multi-lock is used by one thread at a time (its mutex members are reentrant per
 * thread, and the thread that acquired must release). */
#ifndef ZKLOCKS_MULTILOCK_H
#define ZKLOCKS_MULTILOCK_H

#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

typedef struct zkl_multilock zkl_multilock;

enum zkl_multilock_order {
	ZKL_MULTILOCK_CANONICAL = 0, /* sorted by path (default) */
	ZKL_MULTILOCK_AS_ADDED = 1,  /* the order of the add calls */
};

/* Makes an empty multi-lock. On success *out is the caller's, freed with
 * zkl_multilock_free(). */
ZKL_API int zkl_multilock_new(zkl_multilock **out, enum zkl_multilock_order order);

/* Frees the multi-lock (not its members). If it is held, it is released first. */
ZKL_API void zkl_multilock_free(zkl_multilock *ml);

/* Adds a member (borrowed: a view such as zkl_mutex_lock(m)). ZKL_EBUSY while the
 * multi-lock is held; ZKL_EINVAL if the same lock is added twice. */
ZKL_API int zkl_multilock_add(zkl_multilock *ml, zkl_lock *l);

/* Acquires every member within one deadline of timeout_ms. On any failure the members
 * already taken are released in reverse order and the error is returned: ZKL_EINVAL (no
 * members), ZKL_ETIMEDOUT, or the member's error. Acquiring again while held nests like
 * the members do: mutexes re-enter (each release undoes one acquire), while a
 * semaphore-mutex member, not being reentrant, makes the second acquire time out. */
ZKL_API int zkl_multilock_acquire(zkl_multilock *ml, int timeout_ms);

/* Releases every member in reverse order, and returns the first error while still
 * releasing the rest. ZKL_ENOTHELD if the multi-lock is not held; ZKL_ENOTOWNER (and
 * nothing changes) if called by a thread other than the one that acquired it. */
ZKL_API int zkl_multilock_release(zkl_multilock *ml);

/* Whether every member is held (and none lost). */
ZKL_API bool zkl_multilock_is_held(zkl_multilock *ml);

ZKL_END_DECLS

#endif
