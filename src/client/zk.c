/* The request layer over the ZooKeeper C client: the only code in the library that
 * calls it (zk.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/client.h>

#include "sigpipe.h"
#include "zk.h"

#ifdef ZKL_HAVE_ZK_SASL
#include <sasl/sasl.h>
#endif

static void log_discard(const char *message)
{
	(void)message;
}

unsigned zkl__zk_features(void)
{
	unsigned f = 0;
#ifdef ZKL_HAVE_ZK_TLS
	f |= ZKL_FEATURE_TLS;
#endif
#ifdef ZKL_HAVE_ZK_SASL
	f |= ZKL_FEATURE_SASL;
#endif
	return f;
}

#ifdef ZKL_HAVE_ZK_SASL
/* One per handle opened with SASL: the callbacks Cyrus SASL asks for the user and the
 * password. The C client keeps a pointer to cbs for the handle's life, and Cyrus SASL
 * keeps the secret it was given for the connection's, so both live until the client
 * releases its credentials (after it has closed every handle). */
struct sasl_ctx {
	struct sasl_ctx *next;
	const struct zkl_zk_creds *creds;
	sasl_secret_t *secret;
	sasl_callback_t cbs[5];
};

/* Cyrus SASL's callback table takes every kind of callback as int (*)(void); the cast
 * through void (*)(void) says the change of type is meant. */
#define SASL_FN(f) ((int (*)(void))(void (*)(void))(f))

static int sasl_user_cb(void *context, int id, const char **result, unsigned *len)
{
	const struct sasl_ctx *x = context;
	if (!result || (id != SASL_CB_USER && id != SASL_CB_AUTHNAME))
		return SASL_BADPARAM;
	*result = x->creds->sasl_user ? x->creds->sasl_user : "";
	if (len)
		*len = (unsigned)strlen(*result);
	return SASL_OK;
}

static int sasl_realm_cb(void *context, int id, const char **availrealms, const char **result)
{
	(void)context;
	if (!result || id != SASL_CB_GETREALM)
		return SASL_BADPARAM;
	/* The server's own realm (ZooKeeper's DIGEST-MD5 offers one). */
	*result = availrealms && *availrealms ? *availrealms : "";
	return SASL_OK;
}

/* Reads the password into buf (NUL-terminated); returns its length or -1. */
static int sasl_read_password(const struct zkl_zk_creds *cr, char *buf, size_t size)
{
	if (cr->sasl_password) {
		size_t n = strlen(cr->sasl_password);
		if (n >= size)
			return -1;
		memcpy(buf, cr->sasl_password, n + 1);
		return (int)n;
	}
	if (cr->sasl_password_file) {
		FILE *f = fopen(cr->sasl_password_file, "re");
		if (!f)
			return -1;
		char *line = fgets(buf, (int)size, f);
		fclose(f);
		if (!line)
			return -1;
		buf[strcspn(buf, "\r\n")] = '\0';
		return (int)strlen(buf);
	}
	if (cr->sasl_password_fn) {
		int n = cr->sasl_password_fn(buf, size, cr->sasl_password_data);
		if (n < 0 || (size_t)n >= size)
			return -1;
		buf[n] = '\0';
		return n;
	}
	return -1;
}

static int sasl_pass_cb(sasl_conn_t *conn, void *context, int id, sasl_secret_t **psecret)
{
	struct sasl_ctx *x = context;
	if (!conn || !psecret || id != SASL_CB_PASS)
		return SASL_BADPARAM;
	char buf[1024];
	int n = sasl_read_password(x->creds, buf, sizeof buf);
	if (n < 0)
		return SASL_FAIL;
	/* One connection authenticates at a time on a handle: the previous secret's
	 * connection is gone once the next one asks. */
	sasl_secret_t *sec = realloc(x->secret, sizeof *sec + (size_t)n);
	if (!sec) {
		memset(buf, 0, sizeof buf);
		return SASL_NOMEM;
	}
	sec->len = (unsigned long)n;
	memcpy(sec->data, buf, (size_t)n + 1);
	memset(buf, 0, sizeof buf);
	x->secret = sec;
	*psecret = sec;
	return SASL_OK;
}

static pthread_once_t sasl_once = PTHREAD_ONCE_INIT;
static int sasl_init_rc = SASL_FAIL;

static void sasl_init(void)
{
	/* Once per process, as Cyrus SASL asks; the C client does not do it. */
	sasl_init_rc = sasl_client_init(NULL);
}
#endif

void zkl__zk_creds_release(struct zkl_zk_creds *creds)
{
#ifdef ZKL_HAVE_ZK_SASL
	struct sasl_ctx *x = creds->state;
	while (x) {
		struct sasl_ctx *next = x->next;
		if (x->secret) {
			memset(x->secret->data, 0, x->secret->len);
			free(x->secret);
		}
		free(x);
		x = next;
	}
#endif
	creds->state = NULL;
}

static zhandle_t *open_handle(const char *servers, int timeout_ms, watcher_fn watcher,
                              void *ctx, bool quiet, struct zkl_zk_creds *creds)
{
	const int flags = ZOO_NO_LOG_CLIENTENV;
	zhandle_t *zh = NULL;
	if (creds->tls && creds->sasl_mechanism) {
		errno = EINVAL;
		return NULL;
	}
	if (creds->tls) {
#ifdef ZKL_HAVE_ZK_TLS
		zh = zookeeper_init_ssl(servers, creds->tls, watcher, timeout_ms, NULL, ctx, flags);
		/* zookeeper_init_ssl() takes no log callback: the first lines of the handle's
		 * log may still reach stderr. */
		if (zh && quiet)
			zoo_set_log_callback(zh, log_discard);
#else
		errno = ENOTSUP;
		return NULL;
#endif
	} else if (creds->sasl_mechanism) {
#ifdef ZKL_HAVE_ZK_SASL
		pthread_once(&sasl_once, sasl_init);
		if (sasl_init_rc != SASL_OK) {
			errno = ENOTSUP;
			return NULL;
		}
		struct sasl_ctx *x = calloc(1, sizeof *x);
		if (!x) {
			errno = ENOMEM;
			return NULL;
		}
		x->creds = creds;
		x->cbs[0] = (sasl_callback_t){ SASL_CB_USER, SASL_FN(sasl_user_cb), x };
		x->cbs[1] = (sasl_callback_t){ SASL_CB_AUTHNAME, SASL_FN(sasl_user_cb), x };
		x->cbs[2] = (sasl_callback_t){ SASL_CB_GETREALM, SASL_FN(sasl_realm_cb), x };
		x->cbs[3] = (sasl_callback_t){ SASL_CB_PASS, SASL_FN(sasl_pass_cb), x };
		x->cbs[4] = (sasl_callback_t){ SASL_CB_LIST_END, NULL, NULL };
		zoo_sasl_params_t params = {
			.service = creds->sasl_service,
			.host = creds->sasl_host,
			.mechlist = creds->sasl_mechanism,
			.callbacks = x->cbs,
		};
		zh = zookeeper_init_sasl(servers, watcher, timeout_ms, NULL, ctx, flags,
		                         quiet ? log_discard : NULL, &params);
		if (!zh) {
			int e = errno;
			free(x);
			errno = e;
			return NULL;
		}
		x->next = creds->state;
		creds->state = x;
#else
		errno = ENOTSUP;
		return NULL;
#endif
	} else {
		zh = quiet ? zookeeper_init2(servers, watcher, timeout_ms, NULL, ctx, flags,
		                             log_discard)
		           : zookeeper_init(servers, watcher, timeout_ms, NULL, ctx, flags);
	}
	if (!zh)
		return NULL;
	/* The C client re-resolves host names on nearly every pass of its I/O loop unless
	 * told otherwise; that halves lock throughput under contention. */
	zoo_set_servers_resolution_delay(zh, -1);
	if (creds->digest)
		zoo_add_auth(zh, "digest", creds->digest, (int)strlen(creds->digest), NULL, NULL);
	return zh;
}

/* The C client's threads start here, and inherit a mask that blocks SIGPIPE
 * (sigpipe.h). */
static zhandle_t *zk_open(void *self, const char *servers, int timeout_ms, watcher_fn watcher,
                          void *ctx, bool quiet, struct zkl_zk_creds *creds)
{
	(void)self;
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	zhandle_t *zh = open_handle(servers, timeout_ms, watcher, ctx, quiet, creds);
	zkl__sigpipe_restore(&g);
	return zh;
}

/* zookeeper_close() writes the close request, and reads its answer, on the calling
 * thread. */
static void zk_close(zhandle_t *zh)
{
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	zookeeper_close(zh);
	zkl__sigpipe_restore(&g);
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

static int zk_create_ttl(zhandle_t *zh, const char *path, const char *data, int len,
                         const struct ACL_vector *acl, int mode, int64_t ttl,
                         string_stat_completion_t done, const void *arg)
{
	return zoo_acreate2_ttl(zh, path, data, data ? len : -1, acl, mode, ttl, done, arg);
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

static int zk_exists(zhandle_t *zh, const char *path, watcher_fn watcher, void *wctx,
                     stat_completion_t done, const void *arg)
{
	if (watcher)
		return zoo_awexists(zh, path, watcher, wctx, done, arg);
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

/* The check's result lives until its completion; the C client writes it there. */
struct check_call {
	zoo_op_result_t result;
	void_completion_t done;
	const void *arg;
};

static void check_done(int rc, const void *data)
{
	struct check_call *k = (struct check_call *)data;
	void_completion_t done = k->done;
	const void *arg = k->arg;
	free(k);
	done(rc, arg);
}

static int zk_check(zhandle_t *zh, const char *path, void_completion_t done, const void *arg)
{
	struct check_call *k = calloc(1, sizeof *k);
	if (!k)
		return ZSYSTEMERROR;
	k->done = done;
	k->arg = arg;
	zoo_op_t op;
	zoo_check_op_init(&op, path, -1);
	int rc = zoo_amulti(zh, 1, &op, &k->result, check_done, k);
	if (rc != ZOK)
		free(k);
	return rc;
}

static int zk_multi(zhandle_t *zh, int count, const zoo_op_t *ops, zoo_op_result_t *results,
                    void_completion_t done, const void *arg)
{
	return zoo_amulti(zh, count, ops, results, done, arg);
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

static bool zk_auth_failed(zhandle_t *zh)
{
	return zoo_state(zh) == ZOO_AUTH_FAILED_STATE;
}

const struct zkl_zk_ops zkl__zk_client = {
	.open = zk_open,
	.close = zk_close,
	.session_id = zk_session_id,
	.timeout = zk_timeout,
	.create = zk_create,
	.create_ttl = zk_create_ttl,
	.remove = zk_remove,
	.children = zk_children,
	.get = zk_get,
	.exists = zk_exists,
	.set = zk_set,
	.sync = zk_sync,
	.check = zk_check,
	.multi = zk_multi,
	.set_watcher = zk_set_watcher,
	.connected = zk_connected,
	.remove_watch = zk_remove_watch,
	.auth_failed = zk_auth_failed,
};
