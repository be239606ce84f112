/* Inspection: who is queued at a lock path, and which locks are in use under a prefix,
 * for every layout zklocks knows, whoever made the nodes (zklocks, Curator, kazoo).
 *
 *     zkl_inspection *in;
 *     if (zkl_inspect(c, "/locks/nightly-backup", 5000, &in) == 0) {
 *             for (size_t i = 0; i < zkl_inspection_nodes(in); i++) {
 *                     const zkl_node_info *n = zkl_inspection_node(in, i);
 *                     printf("%s %s %s token %lld\n", n->path, zkl_role_name(n->role),
 *                            zkl_layout_name(n->layout), (long long)n->token);
 *             }
 *             zkl_inspection_free(in);
 *     }
 *
 * What is read. At the path: its own queue of sequential nodes, whatever their markers
 * ("lock-", "__READ__", "__WRIT__", "latch-", kazoo's "__lock__" and "__rlock__"; a
 * "lease-" node there is taken for a lease); and, when the path has a "leases" child
 * (or records a lease count and has a "locks" child), a semaphore in Curator's
 * InterProcessSemaphoreV2 layout: its leases under "leases/" and its takers under
 * "locks/" (the gate). Children whose names do not parse are not contenders and are left
 * out (kazoo's Semaphore, whose leases are plain names without a number under the path,
 * is not recognised: see docs/INTEROP.md). Every node's data and creation stat are read;
 * a node deleted meanwhile is left out. The reads are pipelined: two round trips for one
 * path, whatever its size.
 *
 * Roles, by the rules the recipes follow (DESIGN.md):
 * - The path's own queue, in sequence order (kazoo's and Curator's nodes in one queue):
 *   a writer ("lock-", "__WRIT__", "__lock__") holds when it is first; a reader
 *   ("__READ__", "__rlock__") holds when no writer is ahead of it, or when the only one
 *   ahead is the holding writer whose number it shares (a zklocks downgrade). The first
 *   "latch-" node is the leader. The others wait. (A Curator read lock taken by the
 *   thread that holds the write lock, which Curator grants in the process, shows as
 *   waiting: nothing in ZooKeeper says it is held.)
 * - A semaphore: the first taker under "locks/" holds the gate (ZKL_ROLE_GATE), the
 *   others wait for it. Leases hold (ZKL_ROLE_LEASE), except one: only the gate holder
 *   makes leases, and it keeps the gate while its lease waits for the count to fall, so
 *   the newest lease waits when the gate holder's session made it after its gate node,
 *   and the leases outnumber the limit (when one is known: the count recorded in the
 *   path's data). Without a recorded count (Curator records none) a lease that has just
 *   been granted shows as waiting until its taker lets the gate go, a moment later.
 * A semaphore-mutex is a semaphore of one lease (as Curator's InterProcessSemaphoreMutex
 * is), and shows as one. A Curator LeaderSelector is a mutex, and shows as one.
 *
 * Ownership. The functions fill *out with an inspection that belongs to the caller, who
 * frees it with zkl_inspection_free(). Everything reached through it (the structs, their
 * strings) is owned by it, read-only, and valid until it is freed. The structs are
 * allocated by the library, which may add fields at their end in later versions: use
 * them through the pointers the accessors return, never copy them into arrays of your own.
 *
 * Threads. Every function is thread-safe, and an inspection may be read by several
 * threads at once. The reads go through the client's own session (no second one is
 * opened); zkl_inspect() and zkl_inspect_prefix() block the calling thread for their
 * round trips. They may be called from any thread but one that runs the client's loop
 * (a callback, or with external_loop the application's loop thread), where they fail at
 * once with ZKL_EDEADLK: nothing on the loop's thread waits for the server. */
#ifndef ZKLOCKS_INSPECT_H
#define ZKLOCKS_INSPECT_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

/* What a node does in its lock. */
typedef enum zkl_role {
	ZKL_ROLE_HOLDER = 1, /* holds the lock: a mutex, a write lock, one of the readers */
	ZKL_ROLE_WAITING,    /* queued behind a holder (a lease: waits for the count to fall) */
	ZKL_ROLE_LEASE,      /* a semaphore lease that is held */
	ZKL_ROLE_GATE,       /* first among a semaphore's takers: it is taking a lease */
	ZKL_ROLE_LEADER,     /* first in a leader latch's election */
} zkl_role;

/* Which recipe's layout a node belongs to, from its name and place. */
typedef enum zkl_layout {
	ZKL_LAYOUT_MUTEX = 1,  /* "lock-" at the path: a mutex (Curator's, a LeaderSelector) */
	ZKL_LAYOUT_READ,       /* "__READ__": the read half of a read-write lock */
	ZKL_LAYOUT_WRITE,      /* "__WRIT__": its write half */
	ZKL_LAYOUT_SEMAPHORE,  /* "leases/" and "locks/": a semaphore, a semaphore-mutex */
	ZKL_LAYOUT_LATCH,      /* "latch-": a leader latch */
	ZKL_LAYOUT_KAZOO_LOCK, /* "__lock__": kazoo's Lock and WriteLock */
	ZKL_LAYOUT_KAZOO_READ, /* "__rlock__": kazoo's ReadLock */
} zkl_layout;

/* One node found, in its queue's order. */
typedef struct zkl_node_info {
	const char *lock_path; /* the lock it belongs to: the path inspected (for a
	                        * semaphore's leases and gate too), or a lock found under a
	                        * prefix */
	const char *path;      /* the node's full path */
	const char *name;      /* the node's name: the last part of path */
	zkl_layout layout;
	zkl_role role;
	bool holds;            /* role is ZKL_ROLE_HOLDER, ZKL_ROLE_LEASE or ZKL_ROLE_LEADER */
	size_t position;       /* place in its own queue (the path's, the leases, the
	                        * gate's), 0 first */
	const char *data;      /* the node's data with a NUL appended; never NULL */
	size_t data_len;       /* bytes of data, without the NUL */
	int64_t sequence;      /* the number the server appended to the name */
	int64_t token;         /* the zxid that created the node (czxid): the fencing token
	                        * of a holder, greater for every later holder */
	int64_t ctime;         /* when it was created: ms since the epoch, server's clock */
	int64_t session;       /* the session that owns it (ephemeral owner); 0 if none */
} zkl_node_info;

/* One lock path and its nodes. */
typedef struct zkl_lock_info {
	const char *path;      /* the lock path */
	bool exists;           /* whether its node exists (a lock nobody uses may be gone:
	                        * its folder is a container, which the server removes) */
	unsigned layouts;      /* (1u << layout) for each layout among its nodes */
	int limit;             /* a semaphore's lease count recorded in the path's data (in
	                        * decimal, as zklocks and kazoo record it), else 0 */
	size_t first;          /* its nodes: zkl_inspection_node(in, first + k), k < count, */
	size_t count;          /* the path's queue first, then the leases, then the gate */
	size_t holders;        /* how many of them hold (holds is true) */
	size_t waiting;        /* how many do not: waiting, and a semaphore's gate holder */
} zkl_lock_info;

typedef struct zkl_inspection zkl_inspection;

/* Reads everything queued at path, waiting at most timeout_ms for the answers
 * (ZKL_WAIT_FOREVER; 0 sends the reads once and waits for their answers, up to the
 * session timeout, without waiting for a lost connection to come back). On success *out
 * holds exactly one lock, path, with its nodes in queue order (none if nobody is queued).
 * A path that does not exist is not an error: a lock nobody uses may have been removed
 * by the server (its folder is a container), so the lock's exists is false, with no
 * nodes. Returns 0, or with *out set to NULL: ZKL_EINVAL (c or out NULL, path NULL,
 * relative, ending in '/', with an empty, "." or ".." part, longer than ZKL_PATH_MAX, or
 * under /zookeeper; timeout_ms below -1), ZKL_EACL (the path or its folders may not be
 * read), ZKL_ETIMEDOUT (no answer in time), ZKL_ECONNLOSS (the connection was lost and
 * timeout_ms was 0), ZKL_ELOST (the session expired and the call may not wait for a
 * new one), ZKL_EDEADLK (called on a thread that runs the client's loop),
 * ZKL_ECLOSED, ZKL_ENOMEM, ZKL_EZK. The detail is in zkl_last_error(). */
ZKL_API int zkl_inspect(zkl_client *c, const char *path, int timeout_ms,
                        zkl_inspection **out);

/* Walks the tree under prefix ("/" for all of it, but never /zookeeper) and inspects
 * every lock in use there, as zkl_inspect() does: a folder with nodes that parse, or
 * with a "leases" child (a semaphore, whose "leases" and "locks" are its parts and not
 * locks of their own). Each level of the tree costs one round trip (the listing that
 * finds a lock is its listing), the locks' nodes one more (a semaphore two).
 * On success *out holds the locks that have nodes, sorted by path; none if the prefix
 * does not exist. Folders under prefix that may not be read (ACL) are skipped and
 * counted (zkl_inspection_skipped()). timeout_ms bounds the whole walk. Returns 0, or
 * with *out set to NULL the codes of zkl_inspect() (prefix may be "/"; ZKL_EACL only if
 * prefix itself may not be read). */
ZKL_API int zkl_inspect_prefix(zkl_client *c, const char *prefix, int timeout_ms,
                               zkl_inspection **out);

/* How many locks in, and the i-th (sorted by path), or NULL if i is out of range or in
 * is NULL. 0 for NULL. */
ZKL_API size_t zkl_inspection_locks(const zkl_inspection *in);
ZKL_API const zkl_lock_info *zkl_inspection_lock(const zkl_inspection *in, size_t i);

/* How many nodes in (of all its locks), and the i-th: each lock's nodes are together, in
 * queue order. NULL if i is out of range or in is NULL; 0 for NULL. */
ZKL_API size_t zkl_inspection_nodes(const zkl_inspection *in);
ZKL_API const zkl_node_info *zkl_inspection_node(const zkl_inspection *in, size_t i);

/* How many folders zkl_inspect_prefix() could not read and skipped (ACL); 0 for
 * zkl_inspect() and for NULL. */
ZKL_API size_t zkl_inspection_skipped(const zkl_inspection *in);

/* Called by zkl_prune() for each folder it deleted (or, dry_run, would delete), on the
 * calling thread, deepest first; path is valid during the call. */
typedef void (*zkl_prune_fn)(const char *path, void *data);

/* Deletes the empty lock folders at and under prefix ("/" for the whole tree, but never
 * /zookeeper nor "/" itself): every node with no data that no session owns and that has
 * no child, deepest first, so that a folder whose folders all went goes too. Folders
 * made persistent (lock_folders, or a server without containers) stay when empty; this
 * removes them. A node with data (a record, a shared count, a semaphore's recorded
 * limit) or an ephemeral node is never deleted.
 * It never takes a lock from anyone, nor fails an acquire: each folder is deleted with
 * the version it was seen at, and ZooKeeper refuses to delete a node that has a child,
 * so a contender's node made first keeps the folder; one made after the delete finds
 * its folder missing, and its acquire makes it again. Other clients' folders may be
 * pruned while they are idle (Curator's and kazoo's make theirs again too).
 * dry_run: nothing is deleted; fn is called for each folder that would be (those with
 * no child, and those whose every child would go). timeout_ms bounds the whole walk
 * (ZKL_WAIT_FOREVER; 0: the session timeout); a lost connection is waited for
 * meanwhile. Folders that may not be read or deleted (ACL) are left as they are.
 * Returns how many folders were deleted (would be), or ZKL_EINVAL (c NULL, prefix
 * invalid as zkl_inspect()'s path, timeout_ms below -1), ZKL_ETIMEDOUT, ZKL_EDEADLK
 * (on the client's own event thread), ZKL_ECLOSED, ZKL_ENOMEM, ZKL_EZK; folders deleted
 * before the error stay deleted. Thread-safe; blocks the calling thread. */
ZKL_API int zkl_prune(zkl_client *c, const char *prefix, bool dry_run, int timeout_ms,
                      zkl_prune_fn fn, void *data);

/* Frees an inspection and everything reached through it. NULL is a no-op. */
ZKL_API void zkl_inspection_free(zkl_inspection *in);

/* A role's name: "holder", "waiting", "lease", "gate", "leader"; a layout's: "mutex",
 * "read", "write", "semaphore", "latch", "kazoo-lock", "kazoo-read". Static strings;
 * "unknown" for a value outside the enum. */
ZKL_API const char *zkl_role_name(zkl_role role);
ZKL_API const char *zkl_layout_name(zkl_layout layout);

ZKL_END_DECLS

#endif
