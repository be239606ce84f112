/* The request layer's one door to ZooKeeper: a table of operations.
 *
 * The client (src/client) reaches ZooKeeper only through this table; zk.c fills it with
 * the C client's asynchronous calls, and the unit suite puts an in-memory ZooKeeper in
 * its place (tests/unit/fakezk.c), so the engine and the recipes run without a server.
 *
 * Only the client's loop makes requests (create ... sync): its own thread, or with
 * external_loop the thread that holds the client's mutex; an application thread that
 * waits for an answer hands the loop a job that sends them (job.c, on loop.c's jobs). The one exception is
 * a release's delete, which the releasing thread sends (zkl__task_delete_now).
 *
 * The contract is the C client's: every call returns ZOK once the request is queued,
 * and then its completion runs exactly once; any other return means it was not sent
 * and no completion will run. Completions and watch events of one handle run in order
 * on one thread, never on the caller's, and never inside a call of this table. A watch
 * (watcher != NULL) is left only by a request that succeeds (and by an exists answered
 * ZNONODE); it fires once, for a node
 * event, and is called, without ending, for each session event until then. */
#ifndef ZKL_ZK_H
#define ZKL_ZK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

/* A session's credentials and transport, owned by the client and alive until it has
 * closed its last handle (SASL callbacks refer to it). */
struct zkl_zk_creds {
	const char *digest;        /* "user:password" added to the session, or NULL */
	/* TLS: the C client's certificate string "ca[,cert,key[,password]]", or NULL */
	const char *tls;
	/* SASL (NULL mechanism: none): the mechanism list, user, service and host names, and
	 * where the password comes from: password, else password_file's first line, else
	 * password_fn. */
	const char *sasl_mechanism;
	const char *sasl_user;
	const char *sasl_service;
	const char *sasl_host;
	const char *sasl_password;
	const char *sasl_password_file;
	int (*sasl_password_fn)(char *buf, size_t size, void *data);
	void *sasl_password_data;
	/* Filled by the C client's open (zk.c), freed by zkl__zk_creds_release(). */
	void *state;
};

/* What the C client this library was built against can do: bits of ZKL_FEATURE_*
 * (include/zklocks/client.h). */
unsigned zkl__zk_features(void);

/* Frees what the C client's open kept in creds (SASL contexts), once no handle opened
 * with them is left. */
void zkl__zk_creds_release(struct zkl_zk_creds *creds);

struct zkl_zk_ops {
	/* Starts a session: the handle, or NULL with errno set (EINVAL: servers cannot be
	 * parsed; ENOTSUP: creds ask for TLS or SASL that this C client lacks). watcher gets
	 * the session's events with ctx. quiet: the C client's own log is discarded. */
	zhandle_t *(*open)(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
	                   void *ctx, bool quiet, struct zkl_zk_creds *creds);
	/* Ends the session and frees the handle. Completions still queued run first or
	 * never; once it returns, nothing of the handle runs again. */
	void (*close)(zhandle_t *zh);
	/* The session's id and negotiated timeout, once connected. */
	int64_t (*session_id)(zhandle_t *zh);
	int (*timeout)(zhandle_t *zh);

	int (*create)(zhandle_t *zh, const char *path, const char *data, int len,
	              const struct ACL_vector *acl, int mode, string_stat_completion_t done,
	              const void *arg);
	/* A create of a TTL mode (ZOO_PERSISTENT_WITH_TTL...) with its time to live, in ms;
	 * NULL where there is none (the in-memory ZooKeeper, the simulator). */
	int (*create_ttl)(zhandle_t *zh, const char *path, const char *data, int len,
	                  const struct ACL_vector *acl, int mode, int64_t ttl,
	                  string_stat_completion_t done, const void *arg);
	int (*remove)(zhandle_t *zh, const char *path, int version, void_completion_t done,
	              const void *arg);
	int (*children)(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
	                strings_completion_t done, const void *arg);
	int (*get)(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
	           data_completion_t done, const void *arg);
	/* With a watcher, the C client keeps the watch whether the node exists (ZOK: it
	 * fires when the node changes or goes) or not (ZNONODE: it fires when it is made). */
	int (*exists)(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
	              stat_completion_t done, const void *arg);
	int (*set)(zhandle_t *zh, const char *path, const char *data, int len, int version,
	           stat_completion_t done, const void *arg);
	/* Answered only once the ensemble's leader has seen it. */
	int (*sync)(zhandle_t *zh, const char *path, string_completion_t done, const void *arg);
	/* A write that changes nothing: a multi of one check of path's version, which any
	 * version passes. Answered (ZOK) only once a quorum has committed it: a leader cut
	 * off from the others still answers syncs and reads until syncLimit passes, while
	 * the others may already have a new leader, but it commits nothing. */
	int (*check)(zhandle_t *zh, const char *path, void_completion_t done, const void *arg);
	/* count operations (zoo_create_op_init ... zoo_check_op_init) committed as one write,
	 * all or none, in order: a later op sees what an earlier one did. ops is read during
	 * the call; results (count of them), and the buffers a create's buf and a set's stat
	 * point to, must live until the completion. Once the server answered, each result
	 * has its err: all ZOK when the multi committed; else ZOK for the ops before the
	 * first that failed, that op's own error, ZRUNTIMEINCONSISTENCY for those after, and
	 * nothing was applied. A committed create's result names the node made in its buf
	 * (value, cut to buflen), a committed set's the node's new stat; of a failed multi a
	 * create's value is NULL, a failed set's stat NULL, and a passed set's stat is not to
	 * be read. The completion's rc is ZOK or the failing op's error; any other rc
	 * (ZCONNECTIONLOSS, ZSESSIONEXPIRED, ZCLOSING...) is the request's own, and then no
	 * result's err is set (after a connection loss it may have been applied, or not).
	 * tests/unit/multi-cases.h holds the server, fakezk and the simulator to this. */
	int (*multi)(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
	             void_completion_t done, const void *arg);

	/* For a handle the application made (zkl_client_adopt); NULL where there is none.
	 * set_watcher puts fn in the handle's global watcher's place and returns the one it
	 * replaces; connected says whether the handle is connected now; remove_watch takes a
	 * watch (path, its watcher and context) off the handle, and returns once it is gone:
	 * it is never called again. */
	watcher_fn (*set_watcher)(zhandle_t *zh, watcher_fn fn);
	bool (*connected)(zhandle_t *zh);
	int (*remove_watch)(zhandle_t *zh, const char *path, int type, watcher_fn fn, void *ctx);

	/* Whether the handle was refused its credentials for good; NULL where there is none.
	 * The C client reports a SASL refusal by the handle's state alone, with no session
	 * event, so the client asks this while it waits for a first connection. */
	bool (*auth_failed)(zhandle_t *zh);
};

/* The C client (libzookeeper_mt). */
extern const struct zkl_zk_ops zkl__zk_client;

#endif
