/* zkl_multilock: several locks held as one, all or nothing (Curator's
 * InterProcessMultiLock).
 *
 * Members are locks of any kind (the views of <zklocks/lock.h>: mutexes, either half of
 * a read-write lock, semaphores, semaphore-mutexes), added before the first acquire. By
 * default they are taken in a canonical order (sorted by node path, a client's chroot
 * included, then write before read) so
 * that two multi-locks over the same locks, built in different orders, cannot deadlock;
 * ZKL_MULTILOCK_AS_ADDED keeps the order of addition. Members stay the caller's: free
 * them after the multi-lock.
 *
 * Its view, zkl_multilock_lock(), takes the shared verbs of <zklocks/lock.h>:
 *
 *     zkl_lock *all = zkl_multilock_lock(ml);
 *     zkl_lock_acquire_async(all, 5000, on_all_held, ctx);   (on_all_held runs once)
 *
 * Two kinds of hold, never both at once (the other acquire returns ZKL_EBUSY):
 * - Blocking (zkl_multilock_acquire(), or zkl_lock_acquire() on the view): the members
 *   held by the calling thread (a semaphore's lease by the handle); it nests, and only
 *   that thread releases.
 *   A multi-lock so used is used by one thread at a time.
 * - Asynchronous (zkl_lock_acquire_async() on the view): takes the members one after
 *   another with their own asynchronous acquires, each started from the previous one's
 *   callback, within one deadline for the whole. Every member must be on the same
 *   client (else ZKL_EINVAL at once): the members' callbacks and the multi-lock's
 *   callback all run on that client's event thread. On any failure (timeout, a member's
 *   error, a member lost meanwhile: ZKL_ELOST, or zkl_lock_cancel(): ZKL_ECANCELED) the
 *   members taken are released in reverse order before the callback runs once with the
 *   error; the member in flight withdraws its node: nothing is left on the server. A
 *   cancel reaches the member in flight through zkl_lock_cancel() on that member (so any
 *   other acquire waiting on that member's handle ends too). The hold is the handle's,
 *   not reentrant; any thread (or the callback) releases it, which releases every member.
 *
 * The other verbs of the view:
 * - zkl_lock_is_held(): whether the multi-lock is held and every member still is.
 * - zkl_lock_on_lost(): called once per hold, on the event thread of the member's client,
 *   when any member's hold is lost while the multi-lock is held (reason: the member's).
 *   A member's own lost callback stays its owner's.
 * - zkl_lock_token(), zkl_lock_node(), zkl_lock_participants(): ZKL_ENOTSUP. A
 *   multi-lock holds one node per member, each with its own fencing token and queue: ask
 *   the members. zkl_lock_path() is "" and zkl_lock_kind() "multilock".
 * - zkl_lock_set_data(): sets the node data of every member added so far.
 * A multi-lock's view cannot be a member of another multi-lock (ZKL_EINVAL). */
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

/* Frees the multi-lock (not its members). If it is held, it is released first. An
 * asynchronous acquire under way is canceled and waited for (its callback gets
 * ZKL_ECANCELED); on its client's event thread it is not waited for, and its callback
 * never runs. */
ZKL_API void zkl_multilock_free(zkl_multilock *ml);

/* Adds a member (borrowed: a view such as zkl_mutex_lock(m)). ZKL_EBUSY while the
 * multi-lock is held or being acquired; ZKL_EINVAL if the same lock is added twice, for
 * another handle on the node of a member (the same node path, its client's chroot
 * included, so that a chroot client's "/x" is a plain client's "<chroot>/x", on servers
 * that name a server in common: the acquire would wait for itself; the detail names the
 * node), for the write half of a read-write lock added after its read half in
 * ZKL_MULTILOCK_AS_ADDED order (an upgrade), or for the view of a multi-lock. The other
 * half of a member's read-write lock is accepted: the write half is taken first, and the
 * read half as a downgrade (see zkl_multilock_acquire()). */
ZKL_API int zkl_multilock_add(zkl_multilock *ml, zkl_lock *l);

/* The multi-lock's view for the shared verbs of <zklocks/lock.h> (see above). It lives
 * as long as the multi-lock. NULL for NULL. */
ZKL_API zkl_lock *zkl_multilock_lock(zkl_multilock *ml);

/* Acquires every member within one deadline of timeout_ms, blocking. On any failure the
 * members already taken are released in reverse order and the error is returned:
 * ZKL_EINVAL (no members), ZKL_ETIMEDOUT, or the member's error; ZKL_EDEADLK at once, with
 * nothing taken, on the event thread of a member's client (a callback); ZKL_EBUSY while
 * an asynchronous acquire is under way or holds it; ZKL_ECANCELED (zkl_lock_cancel() on
 * the view). It is the asynchronous acquire's path plus a wait, with the members taken
 * for the calling thread: only its holds nest and take the read half of a rwlock whose
 * write half is a member as a downgrade. Acquiring again while held nests like the
 * members do: mutexes re-enter (each release undoes one acquire), while a semaphore
 * member, whose lease is taken as the handle's, makes the second acquire fail at once
 * with ZKL_EBUSY. */
ZKL_API int zkl_multilock_acquire(zkl_multilock *ml, int timeout_ms);

/* Releases every member in reverse order (one level of a blocking hold of the calling
 * thread, else the asynchronous hold), and returns the first error while still releasing
 * the rest. ZKL_ENOTHELD if the multi-lock is not held; ZKL_ENOTOWNER (and nothing
 * changes) if called by a thread other than the one that acquired a blocking hold. The
 * same as zkl_lock_release() on the view. */
ZKL_API int zkl_multilock_release(zkl_multilock *ml);

/* Whether every member is held (and none lost). */
ZKL_API bool zkl_multilock_is_held(zkl_multilock *ml);

ZKL_END_DECLS

#endif
