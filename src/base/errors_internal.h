/* Internal error helpers: set the thread's error detail and return the code. */
#ifndef ZKL_ERRORS_INTERNAL_H
#define ZKL_ERRORS_INTERNAL_H

#include <stdbool.h>

#include <zklocks/errors.h>

/* Records a printf-style detail for zkl_last_error() and returns err. */
int zkl__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The thread's error detail, zkl_last_error()'s text (errors.c). */
extern _Thread_local char zkl__errbuf[];

/* Clears the thread's error detail (inline: every public call starts with it). */
static inline void zkl__clear_error(void)
{
	zkl__errbuf[0] = '\0';
}

/* Maps a ZooKeeper return code of a failed request to a ZKL_E* code, recording the
 * detail "<what>: <zerror>". */
int zkl__fail_zk(int zrc, const char *what, const char *path);

/* What a ZooKeeper return code says about the request and the session: one table
 * (errors.c) for every place that must tell them apart. */
enum zkl__zk_class {
	ZKL_ZK_ANSWER,   /* the server answered (ZOK, ZNONODE, ZNODEEXISTS, ZNOAUTH...) */
	ZKL_ZK_UNKNOWN,  /* connection loss or timeout: the request may have been applied */
	ZKL_ZK_EXPIRED,  /* the session is gone (expired; or the handle knows it is) */
	ZKL_ZK_MOVED,    /* the server answered that the session moved to another
	                  * connection: this one cannot use it any more */
	ZKL_ZK_CLOSING,  /* the handle is closing: never sent, or never answered */
	ZKL_ZK_LOCAL,    /* refused by the C client itself (ZSYSTEMERROR...) */
};
enum zkl__zk_class zkl__zk_class_of(int zrc);
/* Every answer is classified, and most are ZOK (0): that one without the table. */
static inline enum zkl__zk_class zkl__zk_class(int zrc)
{
	return zrc == 0 ? ZKL_ZK_ANSWER : zkl__zk_class_of(zrc);
}

/* Whether the server answered: the session was alive when the request was sent. */
static inline bool zkl__zk_answered(int zrc)
{
	enum zkl__zk_class k = zkl__zk_class(zrc);
	return k == ZKL_ZK_ANSWER || k == ZKL_ZK_MOVED;
}

/* Whether the outcome is unknown and the request is worth sending again once the
 * connection is back (it may have been applied: a create must be looked for). */
static inline bool zkl__zk_transient(int zrc)
{
	return zkl__zk_class(zrc) == ZKL_ZK_UNKNOWN;
}

/* Whether this session can no longer be used for the request. */
static inline bool zkl__zk_session_gone(int zrc)
{
	enum zkl__zk_class k = zkl__zk_class(zrc);
	return k == ZKL_ZK_EXPIRED || k == ZKL_ZK_MOVED;
}

#endif
