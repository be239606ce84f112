/* zkl_mutex: a fair, reentrant mutex shared between processes and machines.
 *
 * Each acquiring thread queues an ephemeral-sequential node "_c_<uuid>-lock-<seq>" under
 * the lock path (the same names as Curator's InterProcessMutex, so the two exclude each
 * other) and holds the lock once its node is first in sequence order. A thread that
 * holds the lock may acquire it again; it is released after as many releases. Other
 * threads using the same handle queue like any other contender.
 *
 * All functions are thread-safe. */
#ifndef ZKLOCKS_MUTEX_H
#define ZKLOCKS_MUTEX_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

typedef struct zkl_mutex zkl_mutex;

/* Called once when a held lock is lost (its session expired or could no longer be
 * proven alive), on the client's event thread, with no zklocks lock held. reason is
 * ZKL_ELOST. It may call zkl_mutex_release() (which then returns ZKL_ELOST) but not
 * zkl_mutex_free(m). If zkl_mutex_release() itself is the first to find the loss (the
 * session ended while the release was under way), its ZKL_ELOST is the report and the
 * callback is not called. */
typedef void (*zkl_mutex_lost_fn)(zkl_mutex *m, int reason, void *data);

/* Makes a mutex for the absolute path on client c (nothing is sent to ZooKeeper yet).
 * path is copied. On success *out is the caller's, freed with zkl_mutex_free(); on
 * failure *out is NULL and the return is ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_mutex_new(zkl_mutex **out, zkl_client *c, const char *path);

/* Frees m. If the calling thread holds it, it is released first. NULL is a no-op.
 * No other thread may be using m. */
ZKL_API void zkl_mutex_free(zkl_mutex *m);

/* Acquires the lock, waiting at most timeout_ms (ZKL_WAIT_FOREVER or 0 to try once).
 * Returns 0 when held; ZKL_ETIMEDOUT (the queued node has been withdrawn), ZKL_ECANCELED,
 * ZKL_EINVAL, ZKL_ELOST (re-entry into a lock that was lost), ZKL_EDEADLK (the write half
 * of a rwlock while holding only its read half; or called on the client's event thread,
 * from a callback, where the acquisition could never run), ZKL_EACL, ZKL_ECLOSED,
 * ZKL_ENOMEM, ZKL_EZK. */
ZKL_API int zkl_mutex_acquire(zkl_mutex *m, int timeout_ms);

/* Called once when an asynchronous acquire ends, on the client's event thread, with no
 * zklocks lock held: rc is 0 (m is held, by the handle rather than a thread) or what
 * zkl_mutex_acquire() would have returned, with zkl_last_error() set. It may release m,
 * start another acquire, or free m; a blocking acquire on the same client fails there
 * with ZKL_EDEADLK. */
typedef void (*zkl_mutex_acquired_fn)(zkl_mutex *m, int rc, void *data);

/* Starts an acquire that waits at most timeout_ms (ZKL_WAIT_FOREVER or 0 to try once)
 * and returns at once: 0, then fn runs exactly once; or ZKL_EINVAL (bad timeout, NULL
 * fn), ZKL_EBUSY (an asynchronous acquire of m is under way or holds it: one at a time
 * per handle), ZKL_ECLOSED, ZKL_ENOMEM, and fn never runs. The queue is the one blocking
 * acquires join, in the same order. zkl_mutex_cancel() ends it with ZKL_ECANCELED and
 * nothing of it left on the server; zkl_mutex_free() cancels it too, and waits for fn
 * unless called on the event thread (fn then never runs). The hold it takes is the
 * handle's, not reentrant, and never a downgrade: any thread (or fn itself) releases it
 * with zkl_mutex_release(), once; zkl_mutex_is_held() and zkl_mutex_token() see it. */
ZKL_API int zkl_mutex_acquire_async(zkl_mutex *m, int timeout_ms, zkl_mutex_acquired_fn fn,
                                    void *data);

/* Releases one level of the calling thread's hold (if it has none: the hold of an
 * asynchronous acquire); the last level deletes the node (see confirm_release in
 * zkl_client_options for when it waits). Returns 0; ZKL_ENOTOWNER if neither the
 * calling thread nor an asynchronous acquire holds m (nothing changes); ZKL_ELOST if the lock had been
 * lost meanwhile (the hold is ended all the same); ZKL_EACL or ZKL_EZK if ZooKeeper
 * refused the delete for good (the node then stays until its session ends). */
ZKL_API int zkl_mutex_release(zkl_mutex *m);

/* Whether the calling thread (or an asynchronous acquire) holds m and it has not been
 * lost. (Holding is per thread; zkl_mutex_token() below answers for the handle,
 * whichever of its threads holds.) */
ZKL_API bool zkl_mutex_is_held(zkl_mutex *m);

/* The fencing token of the current hold (the czxid of its node: it only grows from one
 * holder to the next), or ZKL_ENOTHELD if no thread of this handle holds it. */
ZKL_API int64_t zkl_mutex_token(zkl_mutex *m);

/* Wakes every thread of this handle waiting in zkl_mutex_acquire(), and ends its
 * asynchronous acquire if one is under way; they withdraw their nodes and end with
 * ZKL_ECANCELED. Safe from any thread (not from a signal handler). Does not affect a
 * hold. */
ZKL_API void zkl_mutex_cancel(zkl_mutex *m);

/* Sets the data stored in the nodes this handle creates from now on (copied; len bytes,
 * at most 1 MiB). The default is "<hostname>:<pid>", so that an operator can see who
 * holds a lock. data may be NULL with len 0 for empty nodes. */
ZKL_API int zkl_mutex_set_data(zkl_mutex *m, const void *data, size_t len);

/* Chooses the names of the nodes this handle creates from now on (see zkl_naming):
 * ZKL_NAMING_KAZOO joins a path that kazoo's Lock / WriteLock (or, for a read half,
 * ReadLock) use. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_mutex_set_naming(zkl_mutex *m, zkl_naming naming);

/* Sets the lost callback (NULL to clear). */
ZKL_API int zkl_mutex_on_lost(zkl_mutex *m, zkl_mutex_lost_fn fn, void *data);

/* Lists the contenders queued on the lock path, in queue order (holder first), with the
 * data of each. On success *out is the caller's: free with zkl_participants_free(*out,
 * *count). An absent lock path gives an empty list. */
ZKL_API int zkl_mutex_participants(zkl_mutex *m, zkl_participant **out, size_t *count);

/* Revocation (Curator's cooperative protocol). Called on the client's event thread, with
 * no zklocks lock held, when someone asks for the lock with zkl_revoke() on this handle's
 * node (held or queued). It may call zkl_mutex_release(m) from there, which then acts as if
 * called by the thread that holds the revoked node. Called once per request. */
typedef void (*zkl_revoke_fn)(zkl_mutex *m, void *data);

/* Makes the handle revocable (fn non-NULL) or not (NULL): its nodes, created from then on,
 * carry empty data and watch for a revocation request. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_mutex_make_revocable(zkl_mutex *m, zkl_revoke_fn fn, void *data);

/* Asks the owner of node_path (a full node path, as listed by *_participants()) to
 * release it, by writing "__REVOKE__" into the node. Returns 0, or ZKL_ENOTHELD if the
 * node does not exist. Whether the owner listens is up to it. */
ZKL_API int zkl_revoke(zkl_client *c, const char *node_path);

/* The lock path (borrowed, valid until zkl_mutex_free()). */
ZKL_API const char *zkl_mutex_path(const zkl_mutex *m);

ZKL_END_DECLS

#endif
