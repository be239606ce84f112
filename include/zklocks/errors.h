/* Error codes. Every zklocks function that can fail returns 0 on success or one of the
 * negative ZKL_E* codes below. The codes lie clear of ZooKeeper's own (-1 .. -124), so a
 * ZooKeeper code passed through unchanged is still told apart. */
#ifndef ZKLOCKS_ERRORS_H
#define ZKLOCKS_ERRORS_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

enum zkl_error {
	ZKL_OK = 0,
	ZKL_EINVAL = -1001,     /* an argument is invalid; zkl_last_error() names it */
	ZKL_ETIMEDOUT = -1002,  /* the deadline passed before the lock was acquired */
	ZKL_ELOST = -1003,      /* the session that held the lock is gone */
	ZKL_ENOTOWNER = -1004,  /* released by a thread that does not hold it */
	ZKL_ENOTHELD = -1005,   /* released while not held */
	ZKL_ECONNECT = -1006,   /* no ZooKeeper server answered in time */
	ZKL_ENOMEM = -1007,     /* out of memory */
	ZKL_ECLOSED = -1008,    /* the client is closing or closed */
	ZKL_EAUTH = -1009,      /* authentication failed */
	ZKL_EACL = -1010,       /* ZooKeeper refused access (ACL) */
	ZKL_EDEADLK = -1011,    /* the request can never succeed (would deadlock) */
	ZKL_EZK = -1012,        /* ZooKeeper failed unexpectedly; zkl_last_error() says how */
	ZKL_EBUSY = -1013,      /* the handle is in use (held or being acquired) */
	ZKL_ECANCELED = -1014,  /* the wait was cancelled by a *_cancel() call */
	ZKL_ECONNLOSS = -1015,  /* the connection was lost before ZooKeeper answered (calls
	                         * without a timeout: participants, revoke, shared counts) */
	ZKL_ENOTSUP = -1016,    /* this build cannot do it (TLS or SASL without a C client
	                         * that has them; zkl_features()), or this kind of handle
	                         * does not (acquire on a selector's view; a token, node
	                         * or participants of a multi-lock's view) */
	ZKL_ECOUNT = -1017,     /* a semaphore's count differs from the one its path records
	                         * (zkl_semaphore_set_count()) */
	ZKL_EDELETED = -1018,   /* a lost callback's reason: the lock's node was deleted
	                         * while held (by someone else, or with its session closed
	                         * from elsewhere); the next contender may hold already */
};

/* A static English description of err: a ZKL_E* code, 0, or a ZooKeeper error code
 * (ZNONODE etc.). Never NULL; an unknown code gives "unknown error". Thread-safe. */
ZKL_API const char *zkl_strerror(int err);

/* The symbolic name of err ("ZKL_ETIMEDOUT", "ZNONODE", ...). Never NULL. */
ZKL_API const char *zkl_errname(int err);

/* Details of the last error that a zklocks call returned on the calling thread, for
 * example "path \"locks/x\" is not absolute". Handles are shared between threads, so the
 * detail lives with the thread (like errno), not with the handle. Returns a borrowed
 * string, valid until the next zklocks call on this thread; "" if there is none. */
ZKL_API const char *zkl_last_error(void);

ZKL_END_DECLS

#endif
