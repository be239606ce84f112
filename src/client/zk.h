/* The request layer's one door to ZooKeeper: a table of operations.
 *
 * The client (client.c) reaches ZooKeeper only through this table; zk.c fills it with
 * the C client's asynchronous calls, and the unit suite puts an in-memory ZooKeeper in
 * its place (tests/unit/fakezk.c), so the engine and the recipes run without a server.
 *
 * The contract is the C client's: every call returns ZOK once the request is queued,
 * and then its completion runs exactly once; any other return means it was not sent
 * and no completion will run. Completions and watch events of one handle run in order
 * on one thread, never on the caller's, and never inside a call of this table. A watch
 * (watcher != NULL) is left only by a request that succeeds; it fires once, for a node
 * event, and is called, without ending, for each session event until then. */
#ifndef ZKL_ZK_H
#define ZKL_ZK_H

#include <stdbool.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

struct zkl_zk_ops {
	/* Starts a session: the handle, or NULL with errno set (EINVAL: servers cannot be
	 * parsed). watcher gets the session's events with ctx. quiet: the C client's own
	 * log is discarded. digest, if not NULL, is "user:password". */
	zhandle_t *(*open)(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
	                   void *ctx, bool quiet, const char *digest);
	/* Ends the session and frees the handle. Completions still queued run first or
	 * never; once it returns, nothing of the handle runs again. */
	void (*close)(zhandle_t *zh);
	/* The session's id and negotiated timeout, once connected. */
	int64_t (*session_id)(zhandle_t *zh);
	int (*timeout)(zhandle_t *zh);

	int (*create)(zhandle_t *zh, const char *path, const char *data, int len,
	              const struct ACL_vector *acl, int mode, string_stat_completion_t done,
	              const void *arg);
	int (*remove)(zhandle_t *zh, const char *path, int version, void_completion_t done,
	              const void *arg);
	int (*children)(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
	                strings_completion_t done, const void *arg);
	int (*get)(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
	           data_completion_t done, const void *arg);
	int (*exists)(zhandle_t *zh, const char *path, stat_completion_t done, const void *arg);
	int (*set)(zhandle_t *zh, const char *path, const char *data, int len, int version,
	           stat_completion_t done, const void *arg);
	/* Answered only once the ensemble's leader has seen it. */
	int (*sync)(zhandle_t *zh, const char *path, string_completion_t done, const void *arg);

	/* For a handle the application made (zkl_client_adopt); NULL where there is none.
	 * set_watcher puts fn in the handle's global watcher's place and returns the one it
	 * replaces; connected says whether the handle is connected now; remove_watch takes a
	 * watch (path, its watcher and context) off the handle, and returns once it is gone:
	 * it is never called again. */
	watcher_fn (*set_watcher)(zhandle_t *zh, watcher_fn fn);
	bool (*connected)(zhandle_t *zh);
	int (*remove_watch)(zhandle_t *zh, const char *path, int type, watcher_fn fn, void *ctx);
};

/* The C client (libzookeeper_mt). */
extern const struct zkl_zk_ops zkl_zk_client;

#endif
