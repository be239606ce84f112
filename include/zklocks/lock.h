/* zkl_lock: the verbs every kind of lock shares, written once.
 *
 * Each kind gives a view of itself: zkl_mutex_lock() (a mutex, or either half of a
 * read-write lock), zkl_semaphore_lock() (one lease of a semaphore per acquire),
 * zkl_semaphore_mutex_lock(), zkl_leader_lock() (one leadership of an election per
 * acquire: leader.h) and zkl_selector_lock() (a selector's leadership, which it takes
 * through zkl_selector_start(): its acquire and release fail with ZKL_ENOTSUP);
 * zkl_multilock_lock() gives them to several locks held as one (multilock.h says how
 * it answers). The view lives as long as its handle and is freed
 * with it; it is never freed by itself. What is specific to a kind stays with the kind:
 * making a mutex revocable, its naming, several leases at once, the semaphore's limit.
 *
 *     zkl_mutex *m;
 *     zkl_mutex_new(&m, c, "/locks/nightly-backup");
 *     zkl_lock *l = zkl_mutex_lock(m);
 *     if (zkl_lock_acquire(l, 5000) == 0) {
 *             int64_t token = zkl_lock_token(l);
 *             ... work, fenced by token ...
 *             zkl_lock_release(l);
 *     }
 *
 * How the kinds differ under the same verbs:
 * - mutex, write half: reentrant per thread (each acquire by the holding thread counts
 *   one level, each release undoes one); a thread holding the write half may take the
 *   read half (a downgrade); the reverse, an upgrade, is ZKL_EDEADLK.
 * - read half: shared with other readers, reentrant per thread.
 * - semaphore, semaphore-mutex: not reentrant; each acquire takes one more lease (a
 *   second acquire of a semaphore-mutex by its holder therefore waits, and times out),
 *   and each release gives back the lease taken last. Several leases in one call, all
 *   or none: zkl_semaphore_acquire().
 *
 * All functions are thread-safe. Callbacks run on the client's event thread with no
 * zklocks lock held; a blocking call made there fails at once with ZKL_EDEADLK. */
#ifndef ZKLOCKS_LOCK_H
#define ZKLOCKS_LOCK_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

typedef struct zkl_lock zkl_lock;

/* Acquires l, waiting at most timeout_ms (ZKL_WAIT_FOREVER, or 0 to try once). Returns 0
 * when held; ZKL_ETIMEDOUT (the queued node has been withdrawn), ZKL_ECANCELED
 * (zkl_lock_cancel()), ZKL_ELOST (re-entry into a hold that was lost: release it first),
 * ZKL_EDEADLK (an upgrade from the read half to the write half; or called on a thread
 * that runs the client's loop, a callback or the application's loop thread, where the
 * acquisition could never run), ZKL_EINVAL, ZKL_EACL,
 * ZKL_ECLOSED, ZKL_ENOMEM, ZKL_EZK. */
ZKL_API int zkl_lock_acquire(zkl_lock *l, int timeout_ms);

/* Called once when an asynchronous acquire ends, on the client's event thread, with no
 * zklocks lock held: rc is 0 (l is held, by the handle rather than by a thread) or what
 * zkl_lock_acquire() would have returned, with zkl_last_error() set. It may release l,
 * start another acquire, or free l's handle. */
typedef void (*zkl_lock_acquired_fn)(zkl_lock *l, int rc, void *data);

/* Starts an acquire that waits at most timeout_ms and returns at once: 0, and then fn
 * runs exactly once; or ZKL_EINVAL (bad timeout, NULL fn), ZKL_EBUSY (an asynchronous
 * acquire of l is under way or holds it: one at a time per handle), ZKL_ECLOSED,
 * ZKL_ENOMEM, and fn never runs. The queue is the one blocking acquires join, in the same
 * order. zkl_lock_cancel() ends it with ZKL_ECANCELED, leaving nothing on the server;
 * freeing the handle cancels it too and waits for fn, unless called on a thread that
 * runs the client's loop (a callback, or the application's loop thread): there the free
 * returns at once, the acquire withdraws by itself, and fn never runs. The hold it takes
 * is the handle's, not reentrant, and never a downgrade: any thread (or fn itself)
 * releases it with zkl_lock_release(), once. */
ZKL_API int zkl_lock_acquire_async(zkl_lock *l, int timeout_ms, zkl_lock_acquired_fn fn,
                                   void *data);

/* Releases one level of the calling thread's hold (if it has none: the hold of an
 * asynchronous acquire; for a semaphore, the lease taken last); the last level deletes
 * the node (see confirm_release in zkl_client_options for when it waits; on a thread that
 * runs the client's loop it never waits: the delete goes on in the background until the
 * node or its session is gone). Returns 0;
 * ZKL_ENOTOWNER (a mutex or a half, that neither the calling thread nor an asynchronous
 * acquire holds) or ZKL_ENOTHELD (a semaphore without a lease): nothing changes;
 * ZKL_ELOST if the hold had been lost meanwhile (it ends all the same; the lost
 * callback has then been called for it, before release returns); ZKL_EACL or
 * ZKL_EZK if ZooKeeper refused the delete for good (the node then stays until its
 * session ends). */
ZKL_API int zkl_lock_release(zkl_lock *l);

/* Wakes every thread waiting to acquire l and ends its asynchronous acquire if one is
 * under way: they withdraw their nodes and end with ZKL_ECANCELED. Does not affect a
 * hold. Safe from any thread (not from a signal handler). NULL is a no-op. */
ZKL_API void zkl_lock_cancel(zkl_lock *l);

/* Whether l is held and not lost: for a mutex or a half, by the calling thread or an
 * asynchronous acquire; for a semaphore, by any lease the view took (leases taken with
 * zkl_semaphore_acquire() are lease handles of their own, not the view's). */
ZKL_API bool zkl_lock_is_held(zkl_lock *l);

/* The fencing token of the current hold (the czxid of its node: it only grows from one
 * holder to the next; a read hold taken by a downgrade carries its write hold's), or
 * ZKL_ENOTHELD if there is none or it was lost. For a mutex or a
 * half it answers for the handle: the calling thread's hold (or the asynchronous one),
 * else that of another thread of the handle; for a semaphore, the lease taken last. */
ZKL_API int64_t zkl_lock_token(zkl_lock *l);

/* Copies the full path of our own node into buf, with a terminating NUL: the node l holds
 * (for a mutex or a half: the calling thread's, else the asynchronous acquire's; for a
 * semaphore: the lease taken last); or, while nothing is held, the node an acquire under
 * way has queued (the asynchronous one, else the calling thread's, else another thread's
 * of the handle; for a semaphore, its lease node, made once it has passed the gate).
 * Returns its length, ZKL_ENOTHELD if there is no such node or the hold was lost (its
 * node is gone with its session), or ZKL_EINVAL (buf NULL, or too small: ZKL_NODE_MAX
 * bytes are always enough). */
ZKL_API int zkl_lock_node(zkl_lock *l, char *buf, size_t size);

/* The longest node path zkl_lock_node() writes, NUL included. */
#define ZKL_NODE_MAX (ZKL_PATH_MAX + 128)

/* Called once when a hold of l is lost (its session expired, or could no longer be
 * proven alive in time, or its node was deleted by someone else: the holder keeps a
 * watch on its node, and hears of the deletion as soon as the next in line does), on the
 * client's event thread, with no zklocks lock held. reason says which: ZKL_ELOST, the
 * session is gone or could not be proven alive (while it lives, it keeps every other
 * contender out until the server expires it); ZKL_EDELETED, the server said the node is
 * gone while the hold lasted (deleted by someone else, or with its session closed from
 * elsewhere, which deletes its nodes before the client hears that the session ended:
 * such a close may be told either way): nothing keeps the next contender out, and it
 * may hold already. A leader's
 * view: its latch's reason, ZKL_ENOTHELD for a deleted node. It may call zkl_lock_release()
 * (which returns ZKL_ELOST), and it may free l's handle (or a multi-lock that the loss
 * reaches): that free is put off until the report of the loss has ended, and the handle
 * must not be used after it. It is called exactly once for every lost hold, also when
 * zkl_lock_release() is the first to find the loss: the release then has it called (on
 * the loop's thread it calls fn itself; from another thread it waits for the loop to
 * call it) and returns ZKL_ELOST after it. A hold counts from the moment it is granted:
 * fn may run while the blocking acquire that took it is still returning. */
typedef void (*zkl_lock_lost_fn)(zkl_lock *l, int reason, void *data);

/* Sets the lost callback (NULL to clear). Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_lock_on_lost(zkl_lock *l, zkl_lock_lost_fn fn, void *data);

/* The most node data zkl_lock_set_data() takes: 1 MiB (ZooKeeper's default
 * jute.maxbuffer) less 1 KiB for the rest of the request. */
#define ZKL_LOCK_DATA_MAX 1047552

/* Sets the data stored in the nodes l creates from now on (copied; len bytes, at most
 * ZKL_LOCK_DATA_MAX, 1,047,552). The default is "<hostname>:<pid>", so that an operator
 * can see who holds a lock. data may be NULL with len 0 for empty nodes. Returns 0,
 * ZKL_EINVAL, ZKL_ENOMEM. */
ZKL_API int zkl_lock_set_data(zkl_lock *l, const void *data, size_t len);

/* Lists the contenders found at l's path, in queue order, with the data of each; holder
 * is set for those that hold now. For a semaphore these are its leases, oldest first: all
 * hold but the one the taker at the gate is waiting with (the newest, made by the gate
 * holder's session after its gate node, when the leases outnumber the limit the path
 * records, else the handle's); <zklocks/inspect.h> shows every layout, gate included.
 * On success *out is the caller's: free it with zkl_participants_free(*out, *count). An
 * absent path gives an empty list. It waits for ZooKeeper's answers: on a thread that
 * runs the client's loop (in a callback, or the application's loop thread) it fails at
 * once with ZKL_EDEADLK. */
ZKL_API int zkl_lock_participants(zkl_lock *l, zkl_participant **out, size_t *count);

/* The lock path (borrowed, valid as long as the handle). NULL for NULL. */
ZKL_API const char *zkl_lock_path(const zkl_lock *l);

/* What kind of lock l is: "mutex", "read", "write", "semaphore", "semaphore-mutex",
 * "leader", "selector" or "multilock" (static). NULL for NULL. */
ZKL_API const char *zkl_lock_kind(const zkl_lock *l);

/* How the holder before this one left its lock (zkl_lock_previous()). */
typedef enum {
	ZKL_PREVIOUS_NONE = 0,     /* no holder before this one is known to the lock */
	ZKL_PREVIOUS_RELEASED = 1, /* it released the lock, leaving a note in the same
	                            * transaction as the delete of its node */
	ZKL_PREVIOUS_VANISHED = 2, /* its node went without a note: its session ended (a
	                            * crash, an expiry), or a library that leaves no note
	                            * (Curator, kazoo) or a zklocks handle not tracking
	                            * released it. Not proof that it died. */
} zkl_previous;

/* Makes l keep track of how its holders leave (true), from its next acquire on: each
 * acquire that takes the lock (not a re-entry) reads the note "<path>.previous", a
 * persistent node beside the lock, and writes its own ("held <node>") there; each
 * release writes "released <node>" in the same transaction as the delete of its node.
 * The note node stays after the lock is free (a lock folder is reaped by the server
 * once empty, and a note in it would go between runs); zkl_record_delete() removes it.
 * Only for locks with one holder at a time: a mutex, the write half of a read-write lock
 * (else ZKL_EINVAL). Only blocking acquires (zkl_lock_acquire()) read and write the
 * note: an asynchronous acquire of a tracking handle fails with ZKL_ENOTSUP. An acquire
 * that takes the lock but cannot read or write the note gives it back and fails with
 * the reason. Returns 0, ZKL_EINVAL. */
ZKL_API int zkl_lock_track_previous(zkl_lock *l, bool on);

/* How the holder before the calling thread's hold of l left (*how), and the name of its
 * node (node, size bytes; "" for ZKL_PREVIOUS_NONE): ZKL_PREVIOUS_RELEASED when the
 * note names the node this acquire last waited behind, or, if it waited behind none,
 * when the note says the last holder released; ZKL_PREVIOUS_VANISHED when the node it
 * waited behind left no note, or the note still says "held" by another node;
 * ZKL_PREVIOUS_NONE when it waited behind no node and there is no note. A holder of a
 * library that leaves no note, gone before this acquire queued, is not seen. Returns 0;
 * ZKL_ENOTHELD (not held by the calling thread), ZKL_EINVAL (l, how or node NULL,
 * size 0, or l does not track: zkl_lock_track_previous()). A node name too long for
 * node is cut short. No round trip: the answer was read at the acquire. */
ZKL_API int zkl_lock_previous(zkl_lock *l, zkl_previous *how, char *node, size_t size);

/* How a holder ended, as its release's note says it: the longest, its NUL included. */
#define ZKL_END_MAX 48

/* Says how the calling thread's tracking hold of l ended (end: at most ZKL_END_MAX - 1
 * bytes of printable ASCII, such as "exited 0"; NULL or "": nothing), for the note its
 * release writes: "released <node>" and, on a second line, end. The next holder reads
 * it with zkl_lock_previous_end(). The last call before the release counts. A reader
 * of an older zklocks takes a note with an end for no release note (vanished, or none).
 * Returns 0; ZKL_EINVAL (l NULL, end too long or not printable, or l does not track:
 * zkl_lock_track_previous()), ZKL_ENOTHELD (not held by the calling thread, or lost).
 * No round trip. */
ZKL_API int zkl_lock_set_end(zkl_lock *l, const char *end);

/* How the holder before the calling thread's hold of l said it ended (zkl_lock_set_end())
 * into end (size bytes, cut short if longer): "" when it said nothing; "lost" when it
 * did not release but said it lost its lock (zkl_lock_tell_lost(); zkl_lock_previous()
 * says ZKL_PREVIOUS_VANISHED); "" after another holder that did not release. Returns as
 * zkl_lock_previous(). No round trip. */
ZKL_API int zkl_lock_previous_end(zkl_lock *l, char *end, size_t size);

/* After the calling thread's tracking hold of l was lost (its node went without its
 * release: an expired session, a node deleted from outside) and before it is released:
 * writes "lost <node>" to the note if the note still says that this hold holds the lock
 * (a versioned set), so that a later holder learns that its holder lost it (end "lost",
 * zkl_lock_previous_end()) rather than only that it vanished. A holder that took the
 * lock meanwhile has written its own note, which is left alone (*told false). Waits at
 * most timeout_ms (ZKL_WAIT_FOREVER: no limit). Returns 0 (*told, if not NULL: whether
 * it was written); ZKL_EINVAL (l NULL, l does not track, timeout_ms below -1),
 * ZKL_ENOTHELD (no such hold), ZKL_EBUSY (the hold is not lost: release it), ZKL_EDEADLK
 * (on a thread that runs the client's loop), ZKL_ETIMEDOUT, ZKL_ECONNLOSS, ZKL_ECLOSED,
 * ZKL_EACL, ZKL_ENOMEM, ZKL_EZK. */
ZKL_API int zkl_lock_tell_lost(zkl_lock *l, int timeout_ms, bool *told);

/* "none", "released", "vanished"; NULL for a value out of range. */
ZKL_API const char *zkl_previous_name(zkl_previous how);
/* ---- Writes that only a holder can make ----
 *
 * A guarded transaction commits the caller's ZooKeeper operations together with a check
 * that this hold's own node still exists, in one ZooKeeper multi: the server applies all
 * of them or none, so a holder whose lock is gone (its session expired while it was
 * paused, its node deleted) cannot land a write after the next holder started, whatever
 * its own clock says. It guards writes to ZooKeeper only; for anything else hand the
 * fencing token (zkl_lock_token()) to the resource. GUIDE.md, "Writes that only a holder
 * can make". */

/* What an operation of a transaction does. */
typedef enum zkl_txn_kind {
	ZKL_TXN_CREATE = 1, /* makes a node at path with data (flags: ZKL_TXN_EPHEMERAL...) */
	ZKL_TXN_SET,        /* writes path's data, if its version is version (-1: any) */
	ZKL_TXN_DELETE,     /* deletes the node at path (no children), at version (-1: any) */
	ZKL_TXN_CHECK,      /* changes nothing: path must exist, at version (-1: any) */
} zkl_txn_kind;

/* The kind of node a create makes: persistent (0), or these, or'ed. An ephemeral node is
 * the session's: it goes when the client's session ends. */
#define ZKL_TXN_EPHEMERAL 1u
#define ZKL_TXN_SEQUENTIAL 2u /* a sequence number is added to path (result's path) */

/* The most operations a transaction takes (the check of the hold's node not counted). */
#define ZKL_TXN_MAX 64

/* One operation. Fields a kind does not use are ignored. */
typedef struct zkl_txn_op {
	zkl_txn_kind kind;
	const char *path;   /* absolute */
	const void *data;   /* CREATE, SET: len bytes (NULL with len 0: none) */
	size_t len;         /* at most ZKL_RECORD_MAX (<zklocks/record.h>), 1,047,552 */
	int version;        /* SET, DELETE, CHECK: the version the node must have, -1: any */
	unsigned flags;     /* CREATE: ZKL_TXN_EPHEMERAL, ZKL_TXN_SEQUENTIAL */
} zkl_txn_op;

/* What became of one operation. */
typedef struct zkl_txn_result {
	/* 0: applied. Else not applied: the code of the operation that failed for it, and
	 * ZKL_ECANCELED for every other (none is applied when one fails); the transaction's
	 * own code for all of them when it failed as a whole (ZKL_ELOST, ZKL_ECONNLOSS...). */
	int rc;
	/* ZooKeeper's own code for it (zkl_errname() names it): ZOK, ZNONODE, ZNODEEXISTS,
	 * ZBADVERSION, ZNOTEMPTY, ZNOAUTH..., ZRUNTIMEINCONSISTENCY for one that was not
	 * applied because another failed; the request's (ZCONNECTIONLOSS...) when the
	 * server did not answer it; 0 when it was never sent. */
	int zk_rc;
	int32_t version;    /* SET, applied: the node's data version after it */
	char path[ZKL_NODE_MAX]; /* CREATE, applied: the node made; else "" */
} zkl_txn_result;

/* Commits ops[0..n) all or none, together with a check that the hold l has now (as
 * zkl_lock_is_held() sees it: for a mutex or a half, the calling thread's or the
 * asynchronous acquire's; for a semaphore, the lease taken last) still has its node, on
 * the client's session (its own or an adopted one). results, if not NULL, gets n results
 * (none when ops is NULL or n is 0 or above ZKL_TXN_MAX: nothing is written then).
 * Returns 0 when every operation was applied. Else nothing was applied, and it returns:
 * ZKL_ELOST: the hold's node is gone, or its session (the hold is then lost and reported
 * as any loss is: the lost callback, the observer's event, zkl_lock_is_held() false);
 * ZKL_ENOTHELD: l is not held here (a leader's view whose loss is known already answers
 * so, since its leadership is then none), or its release came first (a release racing the
 * transaction from another thread either comes after it, and the transaction is applied,
 * or before, and it is refused so); for an operation of ops that failed, its code (the
 * result's rc; zk_rc says which ZooKeeper answer, zkl_last_error() names the operation,
 * its index and its path): ZKL_EZK (a node there or not there, a version that differs, a
 * delete of a node with children...), ZKL_EACL, ZKL_EINVAL; ZKL_ECONNLOSS: the
 * connection went before the answer, and the session lives on: it may or may not have
 * been applied (read back what it wrote before writing again); when the session, and
 * the hold with it, is lost after such a connection loss, ZKL_ELOST (the results' zk_rc
 * say ZCONNECTIONLOSS): if it was applied, it was while the hold's node existed;
 * ZKL_EINVAL: bad arguments (l, ops or a path NULL or not valid, n 0 or above
 * ZKL_TXN_MAX, an unknown kind or flag, data NULL with a length, a version below -1, more
 * bytes than a server reads in one request); ZKL_ENOTSUP: a multi-lock's view (each
 * member has its own node: guard with a member); ZKL_EDEADLK on a thread that runs the
 * client's loop; ZKL_ECLOSED; ZKL_ENOMEM. */
ZKL_API int zkl_lock_txn(zkl_lock *l, const zkl_txn_op *ops, size_t n,
                         zkl_txn_result *results);

/* Called once when an asynchronous transaction ends, on the client's event thread with
 * no zklocks lock held: rc as zkl_lock_txn() returns it (zkl_last_error() set), and the
 * n results, valid during the call. */
typedef void (*zkl_txn_fn)(zkl_lock *l, int rc, const zkl_txn_result *results, size_t n,
                           void *data);

/* The same, returning at once: 0, and then fn runs exactly once; or an error of the
 * arguments or of the hold (as zkl_lock_txn() answers before it sends anything), and fn
 * never runs. ops and their data are copied. The hold must stay held until fn runs, or
 * fn is told ZKL_ENOTHELD or ZKL_ELOST. l's handle may be freed before fn runs (fn then
 * gets l and must not use it). */
ZKL_API int zkl_lock_txn_async(zkl_lock *l, const zkl_txn_op *ops, size_t n, zkl_txn_fn fn,
                               void *data);

/* A transaction of one operation: writes len bytes of data to the node at path, which
 * must exist (any version). Returns as zkl_lock_txn(). */
ZKL_API int zkl_lock_guarded_set(zkl_lock *l, const char *path, const void *data, size_t len);

/* A transaction of one operation: makes a persistent node at path with len bytes of
 * data (its parent must exist). Returns as zkl_lock_txn(): ZKL_EZK with zk_rc ZNODEEXISTS
 * if it is there already. */
ZKL_API int zkl_lock_guarded_create(zkl_lock *l, const char *path, const void *data,
                                    size_t len);

/* Releases l (the calling thread's hold, or the asynchronous one) with ops[0..n) in one
 * transaction with the delete of its node (and, if l tracks its holders, the note that
 * it released: zkl_lock_track_previous()): the operations are applied only if the node
 * is still there, and the lock is never seen free before they are. A job that records
 * its run and frees its lock in one step, so that no reader finds the lock free and the
 * record old. For a mutex and the halves of a read-write lock (else ZKL_ENOTSUP). The
 * hold ends whatever the answer, as zkl_lock_release() ends it. Returns 0 (applied and
 * released); ZKL_ELOST (the node or its session is gone: nothing applied; the loss is
 * reported as any is); an operation's failure, as zkl_lock_txn() reports it (nothing
 * applied; the node is then deleted alone); ZKL_ECONNLOSS (the connection went with the
 * transaction out: it may or may not have been applied; the lock is released either
 * way); ZKL_EBUSY (held more than once by re-entry: release the inner levels first;
 * nothing is done); ZKL_EINVAL for an operation on the hold's own node, which the release
 * deletes itself (nothing is done: the lock is still held); ZKL_ENOTHELD, ZKL_EINVAL,
 * ZKL_EDEADLK (on a thread that runs the client's loop), ZKL_ECLOSED, ZKL_ENOMEM as
 * zkl_lock_txn(). */
ZKL_API int zkl_lock_release_txn(zkl_lock *l, const zkl_txn_op *ops, size_t n,
                                 zkl_txn_result *results);

ZKL_END_DECLS

#endif
