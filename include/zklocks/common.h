/* Shared definitions of the zklocks public API: the export macro, C++ guards and the
 * types every recipe uses. Include <zklocks/zklocks.h> rather than this file. */
#ifndef ZKLOCKS_COMMON_H
#define ZKLOCKS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && __GNUC__ >= 4
#define ZKL_API __attribute__((visibility("default")))
#else
#define ZKL_API
#endif

#ifdef __cplusplus
#define ZKL_BEGIN_DECLS extern "C" {
#define ZKL_END_DECLS }
#else
#define ZKL_BEGIN_DECLS
#define ZKL_END_DECLS
#endif

ZKL_BEGIN_DECLS

/* Timeouts are in milliseconds: ZKL_WAIT_FOREVER (-1) waits without limit, 0 tries once
 * and never waits, a positive value bounds the whole call. Any other negative value is
 * ZKL_EINVAL. Trying once still takes ZooKeeper's answers (a round trip, a second one
 * to make a missing folder): it waits for them at most ZKL_TRY_ONCE_MS in all, then
 * fails with ZKL_ETIMEDOUT. A call that gives up (a timeout, a try that failed) may
 * take a little longer to withdraw what it queued: at most ZKL_WITHDRAW_MS past its
 * deadline, after which the client's background deletes it. */
#define ZKL_WAIT_FOREVER (-1)
#define ZKL_TRY_ONCE_MS 1000
#define ZKL_WITHDRAW_MS 100

/* The longest lock path accepted, in bytes (ZooKeeper's own limit leaves room for the
 * node name that a recipe appends). */
#define ZKL_PATH_MAX 1024

typedef struct zkl_client zkl_client;

/* How a handle names the nodes it creates. Queues always recognise every form, so the
 * order and the rules hold whatever mix is present; the naming decides which other
 * library sees our nodes: Curator (and zklocks) recognise "_c_<uuid>-lock-<seq>" and its
 * read/write forms, kazoo only its own "<uuid>__lock__<seq>" and "<uuid>__rlock__<seq>". */
typedef enum zkl_naming {
	ZKL_NAMING_CURATOR = 0, /* default */
	ZKL_NAMING_KAZOO = 1,
} zkl_naming;

/* One contender in a lock queue, as returned by the *_participants() functions. */
typedef struct zkl_participant {
	char *path;      /* full node path, e.g. "/locks/x/_c_<uuid>-lock-0000000004" */
	char *data;      /* node data with a NUL appended (data[data_len] == 0); never NULL */
	int data_len;    /* bytes of data, without the NUL */
	int64_t sequence;/* the server-assigned sequence number parsed from the name */
	int64_t czxid;   /* the zxid that created the node: a holder's fencing token */
	bool holder;     /* true for the node(s) that hold the lock right now */
	int64_t ctime;   /* when the node was created: ms since the epoch, server's clock */
} zkl_participant;

/* Frees an array returned by a *_participants() function. NULL is a no-op. */
ZKL_API void zkl_participants_free(zkl_participant *list, size_t count);

ZKL_END_DECLS

#endif
