/* Error codes, their texts and the per-thread error detail.
 *
 * Design notes
 *
 * A zklocks call returns a small negative code; the words that explain it (which path,
 * which argument, what ZooKeeper said) go to a buffer that belongs to the calling
 * thread. Handles are shared between threads, so a per-handle string (hiredis'
 * errstr) would be overwritten by another thread's failure before the first thread
 * could read it; a thread-local buffer behaves like errno instead.
 *
 * zkl_strerror() and zkl_errname() switch over enum zkl_error with no default label,
 * so that -Wswitch names any code added to the enum without a text. Codes that are not
 * ours but lie in ZooKeeper's range are handed to the C client's zerror(), because a
 * ZooKeeper code may be passed through unchanged.
 *
 * This file also holds the few public functions that have no better home yet:
 * zkl_participants_free() and zkl_version(). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include <zklocks/client.h>
#include <zklocks/common.h>
#include <zklocks/errors.h>
#include <zklocks/version.h>

#include "errors_internal.h"

/* The detail of the last failure on this thread. 256 bytes is enough for a reason and
 * a shortened path; longer texts are cut and end in "...". */
#define ZKL_ERRBUF_SIZE 256
_Thread_local char zkl__errbuf[ZKL_ERRBUF_SIZE];

/* ZooKeeper's codes run from ZOK (0) down to about -130; ours start at -1001. Anything
 * strictly between the two ranges is ZooKeeper's to name. */
static int
is_zk_range(int err)
{
	return err < 0 && err > -1000;
}

const char *
zkl_strerror(int err)
{
	switch ((enum zkl_error)err) {
	case ZKL_OK:
		return "success";
	case ZKL_EINVAL:
		return "invalid argument";
	case ZKL_ETIMEDOUT:
		return "timed out before the lock was acquired";
	case ZKL_ELOST:
		return "the session that held the lock is gone";
	case ZKL_ENOTOWNER:
		return "the calling thread does not hold the lock";
	case ZKL_ENOTHELD:
		return "the lock is not held";
	case ZKL_ECONNECT:
		return "could not connect to a ZooKeeper server";
	case ZKL_ENOMEM:
		return "out of memory";
	case ZKL_ECLOSED:
		return "the client is closing or closed";
	case ZKL_EAUTH:
		return "authentication failed";
	case ZKL_EACL:
		return "access denied by ZooKeeper (ACL)";
	case ZKL_EDEADLK:
		return "the request would deadlock";
	case ZKL_EZK:
		return "unexpected ZooKeeper error";
	case ZKL_EBUSY:
		return "the handle is in use";
	case ZKL_ECANCELED:
		return "the wait was cancelled";
	case ZKL_ECONNLOSS:
		return "the connection to ZooKeeper was lost";
	case ZKL_ENOTSUP:
		return "not supported by this build or this kind of handle";
	case ZKL_ECOUNT:
		return "the semaphore's count differs from the one its path records";
	case ZKL_EDELETED:
		return "the lock's node was deleted while it was held";
	}
	/* zerror() itself answers "unknown error" for a code it does not know. */
	if (is_zk_range(err))
		return zerror(err);
	return "unknown error";
}

/* The names of ZooKeeper's own codes, as spelled in enum ZOO_ERRORS of zookeeper.h
 * 3.8. This switch has a default: a newer zookeeper.h may add codes, and the build must
 * not break on them. */
static const char *
zk_errname(int err)
{
	switch (err) {
	case ZOK: return "ZOK";
	case ZSYSTEMERROR: return "ZSYSTEMERROR";
	case ZRUNTIMEINCONSISTENCY: return "ZRUNTIMEINCONSISTENCY";
	case ZDATAINCONSISTENCY: return "ZDATAINCONSISTENCY";
	case ZCONNECTIONLOSS: return "ZCONNECTIONLOSS";
	case ZMARSHALLINGERROR: return "ZMARSHALLINGERROR";
	case ZUNIMPLEMENTED: return "ZUNIMPLEMENTED";
	case ZOPERATIONTIMEOUT: return "ZOPERATIONTIMEOUT";
	case ZBADARGUMENTS: return "ZBADARGUMENTS";
	case ZINVALIDSTATE: return "ZINVALIDSTATE";
	case ZNEWCONFIGNOQUORUM: return "ZNEWCONFIGNOQUORUM";
	case ZRECONFIGINPROGRESS: return "ZRECONFIGINPROGRESS";
	case ZSSLCONNECTIONERROR: return "ZSSLCONNECTIONERROR";
	case ZAPIERROR: return "ZAPIERROR";
	case ZNONODE: return "ZNONODE";
	case ZNOAUTH: return "ZNOAUTH";
	case ZBADVERSION: return "ZBADVERSION";
	case ZNOCHILDRENFOREPHEMERALS: return "ZNOCHILDRENFOREPHEMERALS";
	case ZNODEEXISTS: return "ZNODEEXISTS";
	case ZNOTEMPTY: return "ZNOTEMPTY";
	case ZSESSIONEXPIRED: return "ZSESSIONEXPIRED";
	case ZINVALIDCALLBACK: return "ZINVALIDCALLBACK";
	case ZINVALIDACL: return "ZINVALIDACL";
	case ZAUTHFAILED: return "ZAUTHFAILED";
	case ZCLOSING: return "ZCLOSING";
	case ZNOTHING: return "ZNOTHING";
	case ZSESSIONMOVED: return "ZSESSIONMOVED";
	case ZNOTREADONLY: return "ZNOTREADONLY";
	case ZEPHEMERALONLOCALSESSION: return "ZEPHEMERALONLOCALSESSION";
	case ZNOWATCHER: return "ZNOWATCHER";
	case ZRECONFIGDISABLED: return "ZRECONFIGDISABLED";
	case ZSESSIONCLOSEDREQUIRESASLAUTH: return "ZSESSIONCLOSEDREQUIRESASLAUTH";
	case ZTHROTTLEDOP: return "ZTHROTTLEDOP";
	default: return "UNKNOWN";
	}
}

const char *
zkl_errname(int err)
{
	switch ((enum zkl_error)err) {
	case ZKL_OK: return "ZKL_OK";
	case ZKL_EINVAL: return "ZKL_EINVAL";
	case ZKL_ETIMEDOUT: return "ZKL_ETIMEDOUT";
	case ZKL_ELOST: return "ZKL_ELOST";
	case ZKL_ENOTOWNER: return "ZKL_ENOTOWNER";
	case ZKL_ENOTHELD: return "ZKL_ENOTHELD";
	case ZKL_ECONNECT: return "ZKL_ECONNECT";
	case ZKL_ENOMEM: return "ZKL_ENOMEM";
	case ZKL_ECLOSED: return "ZKL_ECLOSED";
	case ZKL_EAUTH: return "ZKL_EAUTH";
	case ZKL_EACL: return "ZKL_EACL";
	case ZKL_EDEADLK: return "ZKL_EDEADLK";
	case ZKL_EZK: return "ZKL_EZK";
	case ZKL_EBUSY: return "ZKL_EBUSY";
	case ZKL_ECANCELED: return "ZKL_ECANCELED";
	case ZKL_ECONNLOSS: return "ZKL_ECONNLOSS";
	case ZKL_ENOTSUP: return "ZKL_ENOTSUP";
	case ZKL_ECOUNT: return "ZKL_ECOUNT";
	case ZKL_EDELETED: return "ZKL_EDELETED";
	}
	return zk_errname(err);
}

const char *
zkl_last_error(void)
{
	return zkl__errbuf;
}

/* Formats into the thread's buffer, through a copy: an argument may be the buffer itself
 * (a message that quotes zkl_last_error()). errno is kept, because callers often fail
 * right after a system call and may still want to look at it. */
static void
set_error(const char *fmt, va_list ap)
{
	int saved = errno;
	char text[sizeof(zkl__errbuf)];
	int n = vsnprintf(text, sizeof(text), fmt, ap);

	if (n < 0) {
		text[0] = '\0';
	} else if ((size_t)n >= sizeof(text)) {
		/* Say that the text was cut rather than end it in the middle of a word. */
		memcpy(text + sizeof(text) - 4, "...", 4);
	}
	memcpy(zkl__errbuf, text, sizeof(zkl__errbuf));
	errno = saved;
}

int
zkl__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_error(fmt, ap);
	va_end(ap);
	return err;
}

/* The one table of ZooKeeper codes: what each says of the request and the session, and
 * the ZKL_E* code it becomes when it fails a call. Only the codes a caller can act on
 * get their own ZKL_E* code; the rest are "ZooKeeper failed" with the detail in
 * zkl_last_error(). */
static const struct zk_code {
	int zrc;
	enum zkl__zk_class cls;
	int err;
} zk_codes[] = {
	{ ZNOAUTH, ZKL_ZK_ANSWER, ZKL_EACL },
	{ ZINVALIDACL, ZKL_ZK_ANSWER, ZKL_EACL },
	{ ZAUTHFAILED, ZKL_ZK_ANSWER, ZKL_EAUTH },
	{ ZBADARGUMENTS, ZKL_ZK_ANSWER, ZKL_EINVAL },
	{ ZCONNECTIONLOSS, ZKL_ZK_UNKNOWN, ZKL_ECONNLOSS },
	{ ZOPERATIONTIMEOUT, ZKL_ZK_UNKNOWN, ZKL_ECONNLOSS },
	{ ZSESSIONEXPIRED, ZKL_ZK_EXPIRED, ZKL_ELOST },
	/* What the C client answers once its handle has seen the session expire. */
	{ ZINVALIDSTATE, ZKL_ZK_EXPIRED, ZKL_ELOST },
	{ ZSESSIONMOVED, ZKL_ZK_MOVED, ZKL_EZK },
	{ ZCLOSING, ZKL_ZK_CLOSING, ZKL_ECLOSED },
	{ ZSYSTEMERROR, ZKL_ZK_LOCAL, ZKL_EZK },
};

/* The row of zrc: any code not listed is an answer that fails with ZKL_EZK. */
static struct zk_code
zk_code(int zrc)
{
	for (size_t i = 0; i < sizeof zk_codes / sizeof zk_codes[0]; i++)
		if (zk_codes[i].zrc == zrc)
			return zk_codes[i];
	return (struct zk_code){ zrc, ZKL_ZK_ANSWER, ZKL_EZK };
}

enum zkl__zk_class
zkl__zk_class_of(int zrc)
{
	return zk_code(zrc).cls;
}

int
zkl__fail_zk(int zrc, const char *what, const char *path)
{
	const char *w = what ? what : "request";

	if (path)
		return zkl__fail(zk_code(zrc).err, "%s %s: %s", w, path, zerror(zrc));
	return zkl__fail(zk_code(zrc).err, "%s: %s", w, zerror(zrc));
}

void
zkl_participants_free(zkl_participant *list, size_t count)
{
	if (!list)
		return;
	for (size_t i = 0; i < count; i++) {
		free(list[i].path);
		free(list[i].data);
	}
	free(list);
}

const char *
zkl_version(void)
{
	return ZKL_VERSION_STRING;
}
