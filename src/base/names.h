/* Node names of every recipe and library zklocks shares a path with, and the queue
 * order. Pure functions, no I/O. */
#ifndef ZKL_NAMES_H
#define ZKL_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a child's name says it is, from the marker before its sequence number. */
enum zkl_kind {
	ZKL_KIND_LOCK = 0,   /* Curator mutex / LeaderSelector: "lock-" */
	ZKL_KIND_READ,       /* Curator read lock: "__READ__" */
	ZKL_KIND_WRITE,      /* Curator write lock: "__WRIT__" */
	ZKL_KIND_LEASE,      /* Curator semaphore lease: "lease-" */
	ZKL_KIND_LATCH,      /* Curator leader latch: "latch-" */
	ZKL_KIND_KLOCK,      /* kazoo Lock and WriteLock: "__lock__" */
	ZKL_KIND_KRLOCK,     /* kazoo ReadLock: "__rlock__" */
	ZKL_KIND_COUNT
};

/* The marker text of a kind ("lock-", "__READ__", ...). */
const char *zkl__kind_marker(enum zkl_kind k);

/* Whether a kind excludes readers (everything but the two read kinds). */
bool zkl__kind_is_writer(enum zkl_kind k);

/* Whether a holder of this kind may leave a node at its own place in the queue: a write
 * lock that downgrades creates a read node with its own number before it goes. */
bool zkl__kind_may_downgrade(enum zkl_kind k);

/* Length of a uuid in text form, without NUL. */
#define ZKL_UUID_LEN 36
/* Curator's protection prefix: "_c_" + uuid + "-". */
#define ZKL_PROTECT_PREFIX_LEN (3 + ZKL_UUID_LEN + 1)

/* One child of a lock path, parsed. `name` points into storage owned by the caller of
 * zkl__child_parse() (not copied). */
typedef struct zkl_child {
	const char *name;
	enum zkl_kind kind;
	int64_t seq;      /* the sequence number, as ZooKeeper printed it (signed 32-bit) */
	size_t index;     /* position in the list as given, for callers that keep a parallel array */
} zkl_child;

/* Parses a child name: <anything><marker><seq>, where seq is ZooKeeper's "%010d" of a
 * signed 32-bit number (10 digits, or '-' and 9 or 10 digits). Returns true and fills
 * *out when it parses; false for a stray name, which a queue ignores. */
bool zkl__child_parse(const char *name, zkl_child *out);

/* Sorts children into queue order: by sequence number, as the unsigned 32-bit counter the
 * server increments, so the wrap from 2147483647 to -2147483648 keeps its order; a set
 * that spans the 2^32 wrap (-1 to 0) is rotated so the oldest comes first. Ties (a
 * downgrade read node shares its writer's number) put writers first, then compare names. */
void zkl__children_sort(zkl_child *children, size_t n);

/* Fills buf (at least 37 bytes) with a fresh random version-4 uuid, lower case. */
void zkl__uuid(char buf[ZKL_UUID_LEN + 1]);

/* Builds the name prefix of a node we create: "_c_<uuid>-<marker>" for Curator naming.
 * Returns the length written (without NUL), or -1 if it does not fit. */
int zkl__node_prefix(char *buf, size_t size, const char *uuid, enum zkl_kind kind);
/* The path our node is created at: dir, a slash, then the prefix above. Returns a new
 * string, or NULL (errno ENOMEM, or EINVAL if kind or uuid is not valid). */
char *zkl__node_path(const char *dir, const char *uuid, enum zkl_kind kind);
/* The length of that path for any uuid, without making it: -1 if kind is not valid. */
long zkl__node_path_len(const char *dir, enum zkl_kind kind);

/* Whether child name `name` was created with our uuid (begins "_c_<uuid>-"). */
bool zkl__name_has_uuid(const char *name, const char *uuid);

#endif
