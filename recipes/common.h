/* What the recipes share: their holds, node data, argument checks. */
#ifndef ZKL_RECIPE_H
#define ZKL_RECIPE_H

#include <stdlib.h>

#include <zklocks/lock.h>

#include "engine.h"

/* Who an acquisition is for, as data: reentrancy and the write->read downgrade are
 * decided from it, never from the thread that happens to run the decision. A blocking
 * call's owner is its thread's (zkl__owner_self()); the simulator drives contenders that
 * act as threads with owners of its own (zkl__mutex_start_as). 0 is no owner: the
 * handle's asynchronous acquire. */
typedef uint64_t zkl__owner;
#define ZKL_OWNER_NONE ((zkl__owner)0)

/* The calling thread's owner: one number per thread for the life of the process, never
 * ZKL_OWNER_NONE. Inline: every acquire and release asks it; a thread's first ask takes
 * the next number (zkl__owner_next). */
extern _Thread_local zkl__owner zkl__owner_mine;
zkl__owner zkl__owner_next(void);
static inline zkl__owner zkl__owner_self(void)
{
	if (zkl__owner_mine == ZKL_OWNER_NONE)
		zkl__owner_mine = zkl__owner_next();
	return zkl__owner_mine;
}

/* One acquisition held by a handle: a node, its owner, how many times (reentrant
 * recipes), and its registration for lost reports. */
struct zkl_acq {
	struct zkl_acq *next;
	zkl__owner owner;
	bool async;                /* taken by an asynchronous acquire: the handle's, not an
	                            * owner's (owner is ZKL_OWNER_NONE) */
	int count;
	struct zkl_node node;      /* its hold: node.hold, made at the grant */
	/* How the holder before it left, once read (zkl_lock_previous()). */
	bool prev_known;
	zkl_previous prev;
	char prev_node[96];
	char prev_end[ZKL_END_MAX]; /* how it said it ended ("" if it did not) */
	/* While it is under way, its node as the engine published it (zkl_queue.pub): a
	 * copy, guarded by zkl__pub_mu (the handle's zkl_lock.pub). */
	char *node_pub;
};

/* Node data of a handle: "<host>:<pid>" until set. */
struct zkl_data {
	char *bytes;
	int len;
};

int zkl__data_init(struct zkl_data *d);
/* Replaces d with a copy of (data, len), checking the size; d's owner guards it. */
int zkl__data_set(struct zkl_data *d, const void *data, size_t len);
static inline void zkl__data_free(struct zkl_data *d)
{
	free(d->bytes);
	d->bytes = NULL;
	d->len = 0;
}

/* The checks every *_new() makes (clears the thread's error first): an output pointer,
 * a client, and a valid lock path. Returns 0 or ZKL_EINVAL with the reason. */
int zkl__check_new(const void *out, const zkl_client *c, const char *path);

/* Curator's revocation protocol: the data a revoker writes into a holder's node
 * (revoke.c), and the decoder of a revocation watch, which finds a request in it. */
#define ZKL_REVOKE_DATA "__REVOKE__"
enum zkl__data_read zkl__revoke_decode(const char *data, int len, int32_t *value);

/* A shared count (Curator's SharedCount): a 4-byte big-endian integer. The decoder of a
 * semaphore's count watch (shared_count.c). */
enum zkl__data_read zkl__count_decode(const char *data, int len, int32_t *value);

/* Checks a timeout argument: -1, 0 or positive (inline: every acquire starts with it). */
static inline int zkl__check_timeout(int timeout_ms)
{
	if (timeout_ms < -1)
		return zkl__fail(ZKL_EINVAL, "timeout %d ms is negative (use -1 to wait forever, 0 "
		                "to try once)", timeout_ms);
	return 0;
}

/* The lease count a semaphore path records in its data (kazoo's layout), as both the
 * semaphore and the inspection read it: decimal digits only (no sign, no space, no
 * other byte), 1..2147483647; else 0 (no count recorded). */
int zkl__count_parse(const char *data, int len);

/* Checks a handle argument. */
#define ZKL_CHECK_HANDLE(h, name)                                                        \
	do {                                                                             \
		zkl__clear_error();                                                       \
		if (!(h))                                                                \
			return zkl__fail(ZKL_EINVAL, "%s handle is NULL", name);           \
	} while (0)

/* Sets the data of the persistent node at path, creating it and its missing parents
 * (persistent) if needed; what names it in errors ("record", "shared count"). Returns 0
 * or a ZKL_E* code with the reason set. */
int zkl__node_put(zkl_client *c, const char *path, const void *data, int len, const char *what);
/* Makes the missing folders above path (containers; persistent on a server without
 * them), and leaves them: a guarded write of a record creates the record itself
 * (txn.c). Returns 0 or a ZKL_E* code with its detail. */
int zkl__record_folders(zkl_client *c, const char *path);

/* Reads the node at path (record.c): 0 with *op (released by the caller with
 * zkl__op_release()), ZKL_ENOTHELD if it does not exist ("<what> <path> does not
 * exist"), or another ZKL_E* code. */
int zkl__node_get(zkl_client *c, const char *path, const char *what, struct zkl_op **op);

/* Names the kind of a semaphore's view ("semaphore-mutex"); kind is static. */
struct zkl_semaphore;
void zkl__semaphore_set_kind(struct zkl_semaphore *s, const char *kind);

#endif
