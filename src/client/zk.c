/* The request layer over the ZooKeeper C client: the only code in the library that
 * calls it (zk.h). */
#include <string.h>

#include "zk.h"

static void log_discard(const char *message)
{
	(void)message;
}

static zhandle_t *zk_open(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
                          void *ctx, bool quiet, const char *digest)
{
	(void)self;
	const int flags = ZOO_NO_LOG_CLIENTENV;
	zhandle_t *zh = quiet ? zookeeper_init2(servers, watcher, timeout_ms, NULL, ctx, flags,
	                                        log_discard)
	                      : zookeeper_init(servers, watcher, timeout_ms, NULL, ctx, flags);
	if (!zh)
		return NULL;
	/* The C client re-resolves host names on nearly every pass of its I/O loop unless
	 * told otherwise; that halves lock throughput under contention. */
	zoo_set_servers_resolution_delay(zh, -1);
	if (digest)
		zoo_add_auth(zh, "digest", digest, (int)strlen(digest), NULL, NULL);
	return zh;
}

static void zk_close(zhandle_t *zh)
{
	zookeeper_close(zh);
}

static int64_t zk_session_id(zhandle_t *zh)
{
	return zoo_client_id(zh)->client_id;
}

static int zk_timeout(zhandle_t *zh)
{
	return zoo_recv_timeout(zh);
}

static int zk_create(zhandle_t *zh, const char *path, const char *data, int len,
                     const struct ACL_vector *acl, int mode, string_stat_completion_t done,
                     const void *arg)
{
	return zoo_acreate2(zh, path, data, data ? len : -1, acl, mode, done, arg);
}

static int zk_remove(zhandle_t *zh, const char *path, int version, void_completion_t done,
                     const void *arg)
{
	return zoo_adelete(zh, path, version, done, arg);
}

static int zk_children(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                       strings_completion_t done, const void *arg)
{
	if (watcher)
		return zoo_awget_children(zh, path, watcher, wctx, done, arg);
	return zoo_aget_children(zh, path, 0, done, arg);
}

static int zk_get(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                  data_completion_t done, const void *arg)
{
	if (watcher)
		return zoo_awget(zh, path, watcher, wctx, done, arg);
	return zoo_aget(zh, path, 0, done, arg);
}

static int zk_exists(zhandle_t *zh, const char *path, stat_completion_t done, const void *arg)
{
	return zoo_aexists(zh, path, 0, done, arg);
}

static int zk_set(zhandle_t *zh, const char *path, const char *data, int len, int version,
                  stat_completion_t done, const void *arg)
{
	return zoo_aset(zh, path, data, len, version, done, arg);
}

static int zk_sync(zhandle_t *zh, const char *path, string_completion_t done, const void *arg)
{
	return zoo_async(zh, path, done, arg);
}

static watcher_fn zk_set_watcher(zhandle_t *zh, watcher_fn fn)
{
	return zoo_set_watcher(zh, fn);
}

static bool zk_connected(zhandle_t *zh)
{
	return zoo_state(zh) == ZOO_CONNECTED_STATE;
}

static int zk_remove_watch(zhandle_t *zh, const char *path, int type, watcher_fn fn,
                           void *ctx)
{
	/* local: taken off even without a connection to the server. */
	return zoo_remove_watches(zh, path, (ZooWatcherType)type, fn, ctx, 1);
}

const struct zkl_zk_ops zkl_zk_client = {
	.open = zk_open,
	.close = zk_close,
	.session_id = zk_session_id,
	.timeout = zk_timeout,
	.create = zk_create,
	.remove = zk_remove,
	.children = zk_children,
	.get = zk_get,
	.exists = zk_exists,
	.set = zk_set,
	.sync = zk_sync,
	.set_watcher = zk_set_watcher,
	.connected = zk_connected,
	.remove_watch = zk_remove_watch,
};
