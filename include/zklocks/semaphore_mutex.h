/* zkl_semaphore_mutex: a fair, non-reentrant mutex shared between processes, with the
 * layout of Curator's InterProcessSemaphoreMutex (a semaphore of one lease):
 * "<path>/locks/" queues the takers, "<path>/leases/" holds the lease node.
 *
 * Not reentrant: a second acquire while the handle holds the lock waits (or times out),
 * whichever thread calls it. Any thread may release it. All functions are thread-safe. */
#ifndef ZKLOCKS_SEMAPHORE_MUTEX_H
#define ZKLOCKS_SEMAPHORE_MUTEX_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

typedef struct zkl_semaphore_mutex zkl_semaphore_mutex;

/* Called once when a held lock is lost, as zkl_mutex_lost_fn. */
typedef void (*zkl_semaphore_mutex_lost_fn)(zkl_semaphore_mutex *m, int reason, void *data);

/* As zkl_mutex_new(). */
ZKL_API int zkl_semaphore_mutex_new(zkl_semaphore_mutex **out, zkl_client *c, const char *path);

/* Frees m, releasing it first if held. NULL is a no-op. No other thread may use m. */
ZKL_API void zkl_semaphore_mutex_free(zkl_semaphore_mutex *m);

/* As zkl_mutex_acquire(), but never reentrant. */
ZKL_API int zkl_semaphore_mutex_acquire(zkl_semaphore_mutex *m, int timeout_ms);

/* Releases the lock, from any thread. Returns 0, ZKL_ENOTHELD if it is not held, or
 * ZKL_ELOST if it had been lost meanwhile (the hold ends all the same). */
ZKL_API int zkl_semaphore_mutex_release(zkl_semaphore_mutex *m);

/* Whether this handle holds the lock (from any thread) and it has not been lost. */
ZKL_API bool zkl_semaphore_mutex_is_held(zkl_semaphore_mutex *m);

/* The fencing token of the current hold (czxid of the lease node), or ZKL_ENOTHELD. */
ZKL_API int64_t zkl_semaphore_mutex_token(zkl_semaphore_mutex *m);

/* As zkl_mutex_cancel(). */
ZKL_API void zkl_semaphore_mutex_cancel(zkl_semaphore_mutex *m);

/* As zkl_mutex_set_data(), for the lease node. */
ZKL_API int zkl_semaphore_mutex_set_data(zkl_semaphore_mutex *m, const void *data, size_t len);

/* As zkl_mutex_on_lost(). */
ZKL_API int zkl_semaphore_mutex_on_lost(zkl_semaphore_mutex *m, zkl_semaphore_mutex_lost_fn fn,
                                        void *data);

/* Lists the lease holders ("<path>/leases/" children), oldest first. As
 * zkl_mutex_participants(). */
ZKL_API int zkl_semaphore_mutex_participants(zkl_semaphore_mutex *m, zkl_participant **out,
                                             size_t *count);

/* The lock path (borrowed, valid until zkl_semaphore_mutex_free()). */
ZKL_API const char *zkl_semaphore_mutex_path(const zkl_semaphore_mutex *m);

ZKL_END_DECLS

#endif
