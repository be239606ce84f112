/* zkl_mutex: a fair, reentrant mutex shared between processes and machines.
 *
 * Each acquiring thread queues an ephemeral-sequential node "_c_<uuid>-lock-<seq>" under
 * the lock path (the same names as Curator's InterProcessMutex, so the two exclude each
 * other) and holds the lock once its node is first in sequence order. A thread that
 * holds the lock may acquire it again; it is released after as many releases. Other
 * threads using the same handle queue like any other contender.
 *
 * The verbs (acquire, acquire_async, release, cancel, token, ...) are those of every
 * lock, on the view zkl_mutex_lock() gives (see <zklocks/lock.h>). All functions are
 * thread-safe. */
#ifndef ZKLOCKS_MUTEX_H
#define ZKLOCKS_MUTEX_H

#include <zklocks/common.h>
#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

typedef struct zkl_mutex zkl_mutex;

/* Makes a mutex for the absolute path on client c (nothing is sent to ZooKeeper yet).
 * path is copied. On success *out is the caller's, freed with zkl_mutex_free(); on
 * failure *out is NULL and the return is ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_mutex_new(zkl_mutex **out, zkl_client *c, const char *path);

/* Frees m and its view. If the calling thread holds it, it is released first; an
 * asynchronous acquire under way is canceled (see zkl_lock_acquire_async()). The hold of
 * a completed asynchronous acquire belongs to the handle, not to a thread: freeing m
 * (from any thread) releases it as zkl_lock_release() would, so there is no need to
 * release it first; its lost callback does not run. NULL is a no-op. No other thread
 * may be using m. */
ZKL_API void zkl_mutex_free(zkl_mutex *m);

/* The view of m (or of a half of a read-write lock) that the shared verbs take; it lives
 * as long as m. NULL for NULL. */
ZKL_API zkl_lock *zkl_mutex_lock(zkl_mutex *m);

/* Chooses the names of the nodes this handle creates from now on (see zkl_naming):
 * ZKL_NAMING_KAZOO joins a path that kazoo's Lock / WriteLock (or, for a read half,
 * ReadLock) use. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_mutex_set_naming(zkl_mutex *m, zkl_naming naming);

/* Revocation (Curator's cooperative protocol). Called on the client's event thread, with
 * no zklocks lock held, when someone asks for the lock with zkl_revoke() on this handle's
 * node (held or queued). It may call zkl_lock_release(zkl_mutex_lock(m)) from there,
 * which then acts as if called by the thread that holds the revoked node. Called once
 * each time the client reads the node and finds a request in it: at most once per
 * request (requests that come before the client has read the node again are told as
 * one), and at least once after every request while the node exists. */
typedef void (*zkl_revoke_fn)(zkl_mutex *m, void *data);

/* Makes the handle revocable (fn non-NULL) or not (NULL): its nodes, created from then on,
 * carry empty data and watch for a revocation request. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_mutex_make_revocable(zkl_mutex *m, zkl_revoke_fn fn, void *data);

/* Asks the owner of node_path (a full node path, as listed by zkl_lock_participants()) to
 * release it, by writing "__REVOKE__" into the node. Only a lock node (ephemeral, named
 * as a lock's queue names its nodes) is written. Returns 0, ZKL_ENOTHELD if the node
 * does not exist, ZKL_EINVAL if it is no lock node (a record, a shared count, a folder:
 * left as it is), or ZKL_EDEADLK on the client's event thread (in a callback: the
 * answer would have to come through it). Whether the owner listens is up to it. */
ZKL_API int zkl_revoke(zkl_client *c, const char *node_path);

ZKL_END_DECLS

#endif
