/* zkl_lock_keep: a held lock handed to a node that no session owns, which the server
 * deletes after a time to live: a maintenance hold that outlives the process that took
 * it (zklock hold).
 *
 *     zkl_lock *l = zkl_mutex_lock(m);
 *     if (zkl_lock_acquire(l, ZKL_WAIT_FOREVER) == 0)
 *             rc = zkl_lock_keep(l, 2 * 3600 * 1000, "migration", 9, node, sizeof node);
 *
 * The new node takes the place of l's own in the queue: the same folder, the same layout
 * and sequence number, a fresh uuid, so that every contender (zklocks', Curator's,
 * kazoo's, whichever its naming serves) waits for it as for any holder. It is a TTL node
 * (ZooKeeper 3.5.3 and later, with extendedTypesEnabled=true on every server): the server
 * deletes it once ttl_ms have passed since it was written and nothing was written to it
 * since, within its container manager's check interval (znode.container.checkIntervalMs,
 * one minute by default). Deleting it ends the hold early (zkl_record_delete() takes it,
 * a node without children). */
#ifndef ZKLOCKS_KEEP_H
#define ZKLOCKS_KEEP_H

#include <zklocks/common.h>
#include <zklocks/lock.h>
#include <zklocks/record.h>

ZKL_BEGIN_DECLS

/* The longest time to live ZooKeeper takes: 2^40 - 1 ms, about 34 years. */
#define ZKL_KEEP_TTL_MAX INT64_C(1099511627775)

/* Hands l's hold, which must be held by the calling thread, to a new node with len bytes
 * of data (NULL with len 0 for none) that the server deletes ttl_ms (1 to
 * ZKL_KEEP_TTL_MAX) after it was made, then releases l: l is free for another acquire,
 * the lock stays held. Only an exclusive lock's hold can be kept (a mutex, the write
 * half of a read-write lock, in either naming). If node is not NULL, the new node's full
 * path is copied into it (size bytes, cut with a NUL). Returns 0; ZKL_ENOTSUP (the
 * server has no TTL nodes: extendedTypesEnabled is not set; or l's kind has no node of
 * its own to hand over: a semaphore, a read lock, a multi-lock); ZKL_ENOTHELD (l is not
 * held here); ZKL_ELOST (its node is gone); ZKL_EINVAL (l NULL, ttl_ms out of range,
 * data NULL with a length, len above ZKL_RECORD_MAX); ZKL_EACL; ZKL_ECONNLOSS (the
 * connection was lost and the node may or may not have been made; l is still held);
 * ZKL_EDEADLK (on a thread that runs the client's loop); ZKL_ECLOSED; ZKL_ENOMEM;
 * ZKL_EZK. On failure l is still held. Thread-safe; blocks the calling thread for two
 * round trips. */
ZKL_API int zkl_lock_keep(zkl_lock *l, int64_t ttl_ms, const void *data, size_t len,
                          char *node, size_t size);

ZKL_END_DECLS

#endif
