/* zkl_semaphore: N leases shared between processes, with the layout of Curator's
 * InterProcessSemaphoreV2: "<path>/locks/" queues the takers fairly, "<path>/leases/"
 * holds one "_c_<uuid>-lease-<seq>" node per lease.
 *
 * The limit is fixed per handle, or read from a shared count node, a persistent node
 * holding a 4-byte big-endian integer (the format of Curator's SharedCount), which
 * operators may change at run time: waiters wake when it rises. A fixed limit is
 * recorded in the data of the path's node (in decimal, as kazoo's Semaphore records it;
 * Curator's leaves it empty); every user of the path must agree on it, and an acquire of
 * a handle asking for another limit fails with ZKL_ECOUNT, naming both, and takes
 * nothing (one round trip per handle, on its first acquire; an asynchronous acquire
 * reads it on the client's loop and reports the refusal through its callback, never by
 * blocking or failing the start).
 *
 * Who decides the count: the operator, with zkl_semaphore_set_count() (or `zklock count
 * PATH N`), once; the record then stays while the semaphore is idle, and a handle that
 * asks for another count is refused whichever arrives first. Without it the first acquire
 * that finds the record empty writes its own count, which holds only while the semaphore
 * is in use: the server reaps an idle semaphore's folder, record and all, and the next
 * handle to arrive, right or wrong, records its count anew.
 *
 * The view zkl_semaphore_lock() gives takes one lease per acquire with the shared verbs
 * of <zklocks/lock.h> (and its node data, lost callback, participants and cancel are the
 * semaphore's); zkl_semaphore_acquire() takes several at once, as lease handles. All
 * functions are thread-safe. */
#ifndef ZKLOCKS_SEMAPHORE_H
#define ZKLOCKS_SEMAPHORE_H

#include <zklocks/common.h>
#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

typedef struct zkl_semaphore zkl_semaphore;
typedef struct zkl_lease zkl_lease;

/* A semaphore at path with a fixed limit of max_leases (>= 1). On success *out is the
 * caller's, freed with zkl_semaphore_free(). */
ZKL_API int zkl_semaphore_new(zkl_semaphore **out, zkl_client *c, const char *path,
                              int max_leases);

/* A semaphore whose limit is the shared count at count_path; the node is created with
 * initial_count (>= 1) if it does not exist. */
ZKL_API int zkl_semaphore_new_shared(zkl_semaphore **out, zkl_client *c, const char *path,
                                     const char *count_path, int initial_count);

/* Frees the semaphore and its view. Leases still held are released first and their
 * handles freed; the caller must not use them afterwards. An asynchronous acquire under
 * way is canceled. NULL is a no-op. */
ZKL_API void zkl_semaphore_free(zkl_semaphore *s);

/* The view of s that the shared verbs take: each zkl_lock_acquire() takes one lease,
 * each zkl_lock_release() gives back the lease it took last. It lives as long as s. Its
 * lost callback is called once for every lease of s lost with its session (those of
 * zkl_semaphore_acquire() too), its node data goes into every lease node, and
 * zkl_lock_cancel() also ends the waits of zkl_semaphore_acquire(). NULL for NULL. */
ZKL_API zkl_lock *zkl_semaphore_lock(zkl_semaphore *s);

/* Takes n leases (1 <= n <= the limit), waiting at most timeout_ms for all of them
 * together. On success out[0..n-1] are lease handles, the caller's, each freed with
 * zkl_lease_free(). On failure no lease is held and out is untouched. Returns 0,
 * ZKL_ETIMEDOUT, ZKL_ECANCELED, ZKL_EINVAL (n < 1, or n above a fixed limit, or above the
 * leases that one listing of the leases folder names within the servers' jute.maxbuffer:
 * 17,476 with the default of 1 MiB; a bad timeout; node data that with the lease's path
 * would not fit in one request), ZKL_ECOUNT (the path records another limit than the
 * handle's fixed one), ZKL_ELOST (a lease taken first was lost with its session while
 * the others were taken). */
ZKL_API int zkl_semaphore_acquire(zkl_semaphore *s, int n, int timeout_ms, zkl_lease **out);

/* Releases one lease, from any thread. Returns 0, ZKL_ENOTHELD if it was released
 * already, or ZKL_ELOST if its session was gone (the lease ends all the same). */
ZKL_API int zkl_lease_release(zkl_lease *lease);

/* Frees a lease handle, releasing it first if held. NULL is a no-op. */
ZKL_API void zkl_lease_free(zkl_lease *lease);

/* Whether the lease is held and not lost. */
ZKL_API bool zkl_lease_is_held(zkl_lease *lease);

/* The fencing token (czxid of the lease node), or ZKL_ENOTHELD after release. */
ZKL_API int64_t zkl_lease_token(zkl_lease *lease);

/* The lease node's path (borrowed, valid until zkl_lease_free()). */
ZKL_API const char *zkl_lease_path(const zkl_lease *lease);

/* Revocation (Curator's cooperative protocol, as zkl_mutex_make_revocable() has it, on
 * leases). Called on the client's event thread, with no zklocks lock held, at most
 * once per request (requests that come before the client has read the node again are
 * told as one, and every request is followed by a call while the node exists), when
 * someone writes "__REVOKE__" into one of s's lease nodes (zkl_revoke(),
 * `zklock revoke`). lease is the lease asked for, held by s (one the view took, or one of
 * zkl_semaphore_acquire()); or NULL while that node is still being taken (its taker has
 * passed the gate and waits for a lease to go): zkl_lock_cancel(zkl_semaphore_lock(s))
 * then withdraws it. fn may release the lease (zkl_lease_release(lease): a lease of the
 * view is then skipped by the view's next zkl_lock_release()), but not free s. */
typedef void (*zkl_lease_revoke_fn)(zkl_semaphore *s, zkl_lease *lease, void *data);

/* Makes s's leases revocable (fn non-NULL) or not (NULL): leases taken from then on carry
 * empty data (whatever zkl_lock_set_data() set), as a revocable mutex's nodes do, and
 * are watched for a revocation request from the moment their node exists. Returns 0 or
 * ZKL_EINVAL. */
ZKL_API int zkl_semaphore_make_revocable(zkl_semaphore *s, zkl_lease_revoke_fn fn,
                                         void *data);

/* The current limit: the fixed one, or the shared count as last read (one round trip).
 * Returns the limit (>= 0) or a ZKL_E* code (ZKL_EDEADLK for a shared limit asked on the
 * client's event thread, which would have to deliver the answer). */
ZKL_API int zkl_semaphore_max(zkl_semaphore *s);

/* Reads the shared count at path into *value. ZKL_EZK if the node's data is not 4 bytes.
 * This and zkl_shared_count_set() wait for ZooKeeper's answer: on the client's event
 * thread (in a callback) they fail at once with ZKL_EDEADLK. */
ZKL_API int zkl_shared_count_get(zkl_client *c, const char *path, int32_t *value);

/* Sets the shared count at path (creating the node if needed). */
ZKL_API int zkl_shared_count_set(zkl_client *c, const char *path, int32_t value);

/* The child that keeps a semaphore's count set by zkl_semaphore_set_count(). */
#define ZKL_SEMAPHORE_COUNT_NODE "count"

/* Sets the count of the semaphore of fixed limit at path, for good: it is recorded at the
 * path (replacing what was there) and kept while the semaphore is idle by a persistent
 * child, "<path>/count" (Curator's and kazoo's semaphores ignore it). From then on every
 * handle of the path must ask for count leases: another is refused with ZKL_ECOUNT, before
 * or after this one. Handles that agreed with the old count keep it until they are
 * freed. count 0 clears it: the child goes, and the record with the folder once the
 * semaphore is idle. Waits for ZooKeeper's answers (ZKL_EDEADLK on a thread that runs
 * the client's loop). Returns 0, ZKL_EINVAL (client NULL, bad path, count below 0),
 * ZKL_EACL, ZKL_ENOMEM, ZKL_EZK. */
ZKL_API int zkl_semaphore_set_count(zkl_client *c, const char *path, int count);

ZKL_END_DECLS

#endif
