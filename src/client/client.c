/* The client: its options, open and close, logging and statistics. What a client is made
 * of lives beside this file, one concern each (ARCHITECTURE.md draws the whole):
 *
 *   loop.c      the inbox, calls, waiters, jobs and one turn of the loop (the only owner of
 *               engine and recipe state)
 *   session.c   sessions, their events, the public state and listeners, adopted handles
 *   request.c   requests and their answers, node watches
 *   tasks.c     background deletes
 *   revwatch.c  data watches: revocation requests, a semaphore's shared count
 *   holds.c     holds, reported lost once
 *   liveness.c  the loss rule, heartbeats, retired sessions
 *   job.c       the client's blocking calls: requests, conditions, the connection
 *   zk.c        the request layer's table over the C client
 *
 * core.h is what they share; internal.h is what the engine and the recipes see.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "reach.h" /* why no session comes up (reach.c) */

#include "core.h"
#include "servers.h"

int zkl__default_data(char *buf, size_t size)
{
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		strcpy(host, "unknown");
	host[sizeof host - 1] = 0;
	int n = snprintf(buf, size, "%s:%ld", host, (long)getpid());
	return n < 0 ? 0 : (n >= (int)size ? (int)size - 1 : n);
}


void zkl_client_options_init(zkl_client_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->servers = "127.0.0.1:2181";
	o->session_timeout_ms = 10000;
	o->connect_timeout_ms = 5000;
	o->log_level = ZKL_LOG_WARN;
	o->quiet_zk_log = true;
	o->confirm_release = false;
	o->loss_percent = 90;
	o->max_request = 1048575;
}

/* *dst = a copy of src (NULL stays NULL); true when out of memory. */
static bool copy_opt(const char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst;
}

/* Short enough that the whole message fits the error detail (ZKL_ERRBUF_SIZE). */
static const char secure_build_hint[] =
	"Debian's libzookeeper-mt has neither; see README, \"Secure connections\" "
	"(scripts/build-secure-client)";

/* A file option: set, readable, and (for the C client's certificate string) no comma. */
static int check_file_opt(const char *name, const char *path, bool comma_ok)
{
	if (!*path)
		return zkl__fail(ZKL_EINVAL, "%s is empty", name);
	if (!comma_ok && strchr(path, ','))
		return zkl__fail(ZKL_EINVAL, "%s \"%s\" contains a comma, which the C client's "
		                "certificate list cannot carry", name, path);
	if (access(path, R_OK) != 0)
		return zkl__fail(ZKL_EINVAL, "%s \"%s\": %s", name, path, strerror(errno));
	return 0;
}

/* The tls_* and sasl_* options: what this build can do, and whether they fit together. */
static int check_secure_options(const zkl_client_options *o, bool tls, bool sasl)
{
	unsigned have = zkl__zk_features();
	if (tls && !(have & ZKL_FEATURE_TLS))
		return zkl__fail(ZKL_ENOTSUP, "TLS was asked for (tls_ca), but this zklocks is "
		                "built on a ZooKeeper C client without TLS (no "
		                "zookeeper_init_ssl): %s", secure_build_hint);
	if (sasl && !(have & ZKL_FEATURE_SASL))
		return zkl__fail(ZKL_ENOTSUP, "SASL was asked for (sasl_mechanism), but this "
		                "zklocks is built on a ZooKeeper C client without SASL (no "
		                "zookeeper_init_sasl): %s", secure_build_hint);
	if (tls && sasl)
		return zkl__fail(ZKL_EINVAL, "TLS and SASL together: the ZooKeeper C client opens "
		                "a session with one or the other (digest_auth goes with either)");
	if (tls) {
		if (!o->tls_ca)
			return zkl__fail(ZKL_EINVAL, "tls_cert, tls_key or tls_key_password without "
			                "tls_ca (the CA file that signs the servers' certificates)");
		if (!o->tls_cert != !o->tls_key)
			return zkl__fail(ZKL_EINVAL, "tls_cert and tls_key go together (%s given alone)",
			                o->tls_cert ? "tls_cert" : "tls_key");
		if (o->tls_key_password && !o->tls_key)
			return zkl__fail(ZKL_EINVAL, "tls_key_password without tls_key");
		int rc = check_file_opt("tls_ca", o->tls_ca, false);
		if (rc == 0 && o->tls_cert)
			rc = check_file_opt("tls_cert", o->tls_cert, false);
		if (rc == 0 && o->tls_key)
			rc = check_file_opt("tls_key", o->tls_key, false);
		if (rc != 0)
			return rc;
		if (o->tls_key_password && strchr(o->tls_key_password, ','))
			return zkl__fail(ZKL_EINVAL, "tls_key_password contains a comma, which the C "
			                "client's certificate list cannot carry");
	}
	if (sasl) {
		if (!o->sasl_mechanism || !*o->sasl_mechanism)
			return zkl__fail(ZKL_EINVAL, "sasl_* options without sasl_mechanism "
			                "(\"DIGEST-MD5\", \"GSSAPI\")");
		if (strcasecmp(o->sasl_mechanism, "DIGEST-MD5") == 0) {
			if (!o->sasl_user || !*o->sasl_user)
				return zkl__fail(ZKL_EINVAL, "SASL DIGEST-MD5 needs sasl_user");
			if (!o->sasl_password && !o->sasl_password_file && !o->sasl_password_fn)
				return zkl__fail(ZKL_EINVAL, "SASL DIGEST-MD5 needs a password: "
				                "sasl_password, sasl_password_file or sasl_password_fn");
		}
		if (o->sasl_password_file && !o->sasl_password) {
			int rc = check_file_opt("sasl_password_file", o->sasl_password_file, true);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

unsigned zkl_features(void)
{
	return zkl__zk_features();
}

static void client_free(zkl_client *c)
{
	while (c->events) {
		struct zkl_event *e = c->events;
		c->events = e->next;
		free(e);
	}
	while (c->holds)
		zkl__hold_unlink(c, c->holds); /* of handles not freed first, against the contract */
	while (c->tasks)
		zkl__task_drop(c, c->tasks);
	while (c->tasks_out)
		zkl__task_drop(c, c->tasks_out);
	free(c->task_folders);
	free(c->listeners);
	free(c->servers);
	zkl__zk_creds_release(&c->creds);
	free((char *)c->creds.digest);
	free((char *)c->creds.tls);
	free((char *)c->creds.sasl_mechanism);
	free((char *)c->creds.sasl_user);
	free((char *)c->creds.sasl_service);
	free((char *)c->creds.sasl_host);
	if (c->creds.sasl_password) {
		explicit_bzero((char *)c->creds.sasl_password, strlen(c->creds.sasl_password));
		free((char *)c->creds.sasl_password);
	}
	free((char *)c->creds.sasl_password_file);
	pthread_cond_destroy(&c->ev_cv);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->inbox_cv);
	pthread_mutex_destroy(&c->inbox_mu);
	zkl__observer_free(c);
	if (c->efd >= 0)
		close(c->efd);
	free(c);
}

int zkl_client_open(zkl_client **out, const zkl_client_options *o)
{
	return zkl__client_open_on(out, o, &zkl__zk_client, NULL);
}

static int client_open(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self, zhandle_t *adopt);

int zkl__client_open_on(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self)
{
	return client_open(out, o, zk, zk_self, NULL);
}

int zkl_client_adopt(zkl_client **out, zhandle_t *zh, const zkl_client_options *o)
{
	return zkl__client_adopt_on(out, zh, o, &zkl__zk_client, NULL);
}

int zkl__client_adopt_on(zkl_client **out, zhandle_t *zh, const zkl_client_options *o,
                        const struct zkl_zk_ops *zk, void *zk_self)
{
	zkl__clear_error();
	if (out)
		*out = NULL;
	if (!zh)
		return zkl__fail(ZKL_EINVAL, "the ZooKeeper handle is NULL");
	return client_open(out, o, zk, zk_self, zh);
}

static int client_open(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self, zhandle_t *adopt)
{
	zkl__clear_error();
	zkl_client_options defaults;
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!o) {
		zkl_client_options_init(&defaults);
		o = &defaults;
	}
	/* An adopted handle has its servers, timeout and credentials already. */
	const char *servers = adopt ? "the application's handle" : o->servers;
	if (adopt)
		goto servers_checked;
	if (!o->servers || !*o->servers)
		return zkl__fail(ZKL_EINVAL, "servers is empty (expected \"host:port[,...][/chroot]\")");
	if (strspn(o->servers, " \t") == strlen(o->servers) || strchr(o->servers, ' '))
		return zkl__fail(ZKL_EINVAL, "servers \"%s\" contains spaces", o->servers);
	const char *chroot = strchr(o->servers, '/');
	if (chroot && zkl__path_check(chroot, "chroot") != 0 && strcmp(chroot, "/") != 0)
		return ZKL_EINVAL;
	if (o->session_timeout_ms < ZKL_SESSION_TIMEOUT_MIN ||
	    o->session_timeout_ms > ZKL_SESSION_TIMEOUT_MAX)
		return zkl__fail(ZKL_EINVAL, "session timeout %d ms is out of range (%d..%d ms; the "
		                "server then settles it within 2..20 times its tickTime)",
		                o->session_timeout_ms, ZKL_SESSION_TIMEOUT_MIN,
		                ZKL_SESSION_TIMEOUT_MAX);
servers_checked:
	if (o->connect_timeout_ms < 0)
		return zkl__fail(ZKL_EINVAL, "connect timeout %d ms is negative", o->connect_timeout_ms);
	if (o->max_request < 1024)
		return zkl__fail(ZKL_EINVAL, "max_request %d is below 1024 bytes (the servers' "
		                "jute.maxbuffer; ZooKeeper's default is 1048575)", o->max_request);
	if (o->loss_percent < 50 || o->loss_percent > 100)
		return zkl__fail(ZKL_EINVAL, "loss_percent %d is out of range (50..100 %% of the "
		                "session timeout)", o->loss_percent);
	if (o->digest_auth && !strchr(o->digest_auth, ':'))
		return zkl__fail(ZKL_EINVAL, "digest credentials must look like \"user:password\"");
	if (o->acl != ZKL_ACL_OPEN && o->acl != ZKL_ACL_CREATOR_ALL &&
	    o->acl != ZKL_ACL_CREATOR_ALL_READ)
		return zkl__fail(ZKL_EINVAL, "acl %d is not a zkl_acl value", (int)o->acl);
	if (zkl__folders_check(o) != 0)
		return ZKL_EINVAL;
	bool tls = o->tls_ca || o->tls_cert || o->tls_key || o->tls_key_password;
	bool sasl = o->sasl_mechanism || o->sasl_user || o->sasl_password ||
	            o->sasl_password_file || o->sasl_password_fn || o->sasl_service || o->sasl_host;
	if (adopt && (tls || sasl))
		return zkl__fail(ZKL_EINVAL, "an adopted handle has its transport and credentials "
		                "already: the tls_* and sasl_* options do not apply to it");
	int rc = check_secure_options(o, tls, sasl);
	if (rc != 0)
		return rc;
	if (o->acl != ZKL_ACL_OPEN && !o->digest_auth && !o->sasl_mechanism && !o->tls_cert &&
	    !adopt)
		return zkl__fail(ZKL_EAUTH, "a creator-only ACL needs an identity: digest "
		                "credentials (digest_auth \"user:password\"), SASL "
		                "(sasl_mechanism) or a TLS client certificate (tls_cert)");

	/* The C client's form of the servers (checked, IPv6 brackets taken off). */
	char *zk_servers = NULL;
	if (adopt)
		zk_servers = strdup(servers);
	else if ((rc = zkl__servers_parse(servers, &zk_servers)) != 0)
		return rc;
	zkl_client *c = calloc(1, sizeof *c);
	if (!c) {
		free(zk_servers);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	c->servers = zk_servers;
	c->zk = zk;
	c->zk_self = zk_self;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->inbox_mu, NULL);
	zkl__cond_init(&c->inbox_cv);
	zkl__cond_init(&c->cv);
	zkl__cond_init(&c->ev_cv);
	zkl__observer_init(c);
	c->efd = -1;
	c->external = o->external_loop;
	atomic_init(&c->due_pub, INT64_MAX);
	atomic_init(&c->loop_tid, 0);
	if (c->external && (c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		int e = errno;
		client_free(c);
		return zkl__fail(ZKL_ENOMEM, "cannot make the loop's descriptor: %s", strerror(e));
	}
	bool nomem = false;
	if (!adopt) {
		nomem |= copy_opt(&c->creds.digest, o->digest_auth);
		nomem |= copy_opt(&c->creds.sasl_mechanism, o->sasl_mechanism);
		nomem |= copy_opt(&c->creds.sasl_user, o->sasl_user);
		nomem |= copy_opt(&c->creds.sasl_password, o->sasl_password);
		nomem |= copy_opt(&c->creds.sasl_password_file, o->sasl_password_file);
		if (o->sasl_mechanism) {
			nomem |= copy_opt(&c->creds.sasl_service,
			                  o->sasl_service ? o->sasl_service : "zookeeper");
			nomem |= copy_opt(&c->creds.sasl_host,
			                  o->sasl_host ? o->sasl_host : "zk-sasl-md5");
		}
		c->creds.sasl_password_fn = o->sasl_password_fn;
		c->creds.sasl_password_data = o->sasl_password_data;
		if (o->tls_ca) {
			/* The C client's certificate string: "ca[,cert,key[,password]]". */
			char *t = NULL;
			if (asprintf(&t, "%s%s%s%s%s%s%s", o->tls_ca, o->tls_cert ? "," : "",
			             o->tls_cert ? o->tls_cert : "", o->tls_key ? "," : "",
			             o->tls_key ? o->tls_key : "", o->tls_key_password ? "," : "",
			             o->tls_key_password ? o->tls_key_password : "") < 0)
				t = NULL;
			c->creds.tls = t;
			nomem |= !t;
		}
	}
	c->session_timeout_req = o->session_timeout_ms;
	atomic_init(&c->timeout_pub, zkl__session_timeout_ms(c));
	c->connect_timeout = o->connect_timeout_ms;
	c->logger = (struct zkl_logger){.fn = o->log, .data = o->log_data,
	                                .level = o->log_level ? o->log_level : ZKL_LOG_WARN};
	c->quiet_zk_log = o->quiet_zk_log;
	c->confirm_release = o->confirm_release;
	c->loss_percent = o->loss_percent;
	c->lock_folders = o->lock_folders;
	c->max_request = o->max_request;
	c->state = ZKL_STATE_CONNECTING;
	atomic_init(&c->state_pub, ZKL_STATE_CONNECTING);
	if (o->acl == ZKL_ACL_OPEN) {
		c->acl = &ZOO_OPEN_ACL_UNSAFE;
	} else if (o->acl == ZKL_ACL_CREATOR_ALL) {
		c->acl = &ZOO_CREATOR_ALL_ACL;
	} else {
		c->acl_entries[0].perms = ZOO_PERM_ALL;
		c->acl_entries[0].id = ZOO_AUTH_IDS;
		c->acl_entries[1].perms = ZOO_PERM_READ;
		c->acl_entries[1].id = ZOO_ANYONE_ID_UNSAFE;
		c->acl_custom.count = 2;
		c->acl_custom.data = c->acl_entries;
		c->acl = &c->acl_custom;
	}
	if (!c->servers || nomem) {
		client_free(c);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	if (adopt) {
		c->adopted = true;
		c->sess = calloc(1, sizeof *c->sess);
		if (!c->sess) {
			client_free(c);
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		}
		c->sess->c = c;
		c->sess->gen = 1;
		c->sess->zh = adopt;
		if ((rc = zkl__adopt_handle(c, adopt)) != 0) {
			free(c->sess);
			client_free(c);
			return rc;
		}
		/* Connected before our watcher was in front: say so ourselves. */
		if (c->zk->connected(adopt)) {
			pthread_mutex_lock(&c->mu);
			if (!c->sess->connected)
				zkl__session_event_locked(c, c->sess, ZOO_CONNECTED_STATE,
				                     c->zk->session_id(adopt), c->zk->timeout(adopt),
				                     malloc(sizeof(struct zkl_event)));
			pthread_mutex_unlock(&c->mu);
		}
	} else {
		c->sess = zkl__session_new(c, 1);
	}
	if (!c->sess) {
		int e = errno;
		int unresolved = e != EINVAL && e != ENOTSUP && !adopt ?
		                 zkl__servers_unresolved(c->servers) : 0;
		client_free(c);
		if (unresolved)
			return unresolved;
		if (e == EINVAL)
			return zkl__fail(ZKL_EINVAL, "servers \"%s\" cannot be parsed (expected "
			                "\"host:port[,...][/chroot]\")", o->servers);
		if (e == ENOTSUP)
			return zkl__fail(ZKL_ENOTSUP, "the ZooKeeper C client cannot open a %s "
			                "session", tls ? "TLS" : "SASL");
		return zkl__fail(ZKL_ECONNECT, "cannot start a ZooKeeper client for %s: %s",
		                o->servers, strerror(e));
	}
	c->gen = 1;
	if (!c->adopted && !c->external)
		atomic_store(&c->sess_pub, c->sess);
	if (!c->external && pthread_create(&c->ev_thread, NULL, zkl__event_main, c) != 0) {
		zkl__session_free(c, c->sess);
		client_free(c);
		return zkl__fail(ZKL_ENOMEM, "cannot start the event thread");
	}
	c->ev_running = !c->external;

	int64_t deadline = zkl__deadline(c->connect_timeout);
	pthread_mutex_lock(&c->mu);
	/* A SASL refusal shows only in the handle's state: look at it now and then. */
	bool poll_auth = c->creds.sasl_mechanism && c->zk->auth_failed;
	/* Why no session comes up, if none does: looked at with connects of our own. */
	bool reach = !adopt && zk == &zkl__zk_client, refused = false;
	struct zkl_reach r;
	zkl__reach_init(&r);
	while (c->state == ZKL_STATE_CONNECTING && !c->auth_failed) {
		if (poll_auth && c->zk->auth_failed(c->sess->zh)) {
			c->auth_failed = true;
			break;
		}
		if (reach && zkl__now_ms() >= r.next_ms) {
			pthread_mutex_unlock(&c->mu);
			refused = zkl__reach_step(&r, o->servers);
			pthread_mutex_lock(&c->mu);
			if (refused || c->state != ZKL_STATE_CONNECTING)
				break;
		}
		int64_t wake = deadline;
		if (poll_auth && zkl__now_ms() + 20 < wake)
			wake = zkl__now_ms() + 20;
		if (reach && r.next_ms < wake)
			wake = r.next_ms;
		if (!c->external) {
			zkl__cond_wait_until(&c->cv, &c->mu, wake);
			if (zkl__now_ms() >= deadline)
				break;
			continue;
		}
		/* No loop thread: run the loop here until the session is up (no callback of
		 * the application can be registered yet). */
		const uint64_t k = zkl__kicks(c);
		zkl__running_loop = c;
		int64_t next = zkl__loop_once(c);
		zkl__running_loop = NULL;
		if (c->state != ZKL_STATE_CONNECTING || c->auth_failed)
			break;
		zkl__io_wait_since(c, k, next < wake ? next : wake);
		if (zkl__now_ms() >= deadline)
			break;
	}
	bool ok = c->state != ZKL_STATE_CONNECTING && !c->auth_failed;
	bool auth = c->auth_failed;
	pthread_mutex_unlock(&c->mu);
	if (!ok) {
		zkl_client_close(c);
		if (auth && o->sasl_mechanism)
			return zkl__fail(ZKL_EAUTH, "ZooKeeper at %s refused the SASL %s "
			                "authentication of \"%s\" (wrong user or password?)", servers,
			                o->sasl_mechanism, o->sasl_user ? o->sasl_user : "");
		if (auth)
			return zkl__fail(ZKL_EAUTH, "ZooKeeper at %s refused the credentials", servers);
		if (o->tls_ca)
			return zkl__fail(ZKL_ECONNECT, "no TLS session with ZooKeeper at %s within "
			                "%d ms: is it the server's secureClientPort, is its "
			                "certificate signed by a CA of tls_ca %s, and does it want "
			                "a client certificate (%s)?", servers, o->connect_timeout_ms,
			                o->tls_ca, o->tls_cert ? "it was sent: does it trust its CA"
			                : "none was given: tls_cert, tls_key");
		if (refused)
			return zkl__fail(ZKL_ECONNECT, "connection refused at %s: nothing listens "
			                "there (is the ZooKeeper server running, on that port?)",
			                servers);
		if (r.accepted)
			return zkl__fail(ZKL_ECONNECT, "no answer from ZooKeeper at %s within %d ms: "
			                "the port accepts connections but says nothing (a port that "
			                "takes only TLS stays silent to a plaintext client: set "
			                "tls_ca)", servers, o->connect_timeout_ms);
		return zkl__fail(ZKL_ECONNECT, "no ZooKeeper server answered at %s within %d ms",
		                servers, o->connect_timeout_ms);
	}
	*out = c;
	return 0;
}

/* Whether a request is out on the current session, or on a retired one still connected
 * (mu held). */
static bool requests_out(zkl_client *c)
{
	if (c->sess->inflight > 0 || atomic_load(&c->pins) > 0)
		return true;
	for (const struct zkl_session *s = c->retired; s; s = s->next)
		if (s->inflight > 0 && s->connected)
			return true;
	return false;
}

void zkl_client_close(zkl_client *c)
{
	if (!c || zkl__client_close_refused(c))
		return;
	/* No release sends its delete by itself any more (zkl__task_delete_sent): those
	 * under way are waited for below, as requests out. */
	atomic_store(&c->sess_pub, NULL);
	/* From now on every completion wakes the loop: close waits for them. */
	atomic_store(&c->hurry, true);
	zkl__loop_wake(c);
	pthread_mutex_lock(&c->mu);
	if (c->adopted) {
		/* The session goes on without us: our nodes' background deletes must be done
		 * first, or a lock node would stay as long as the application's session. */
		int64_t until = zkl__now_ms() + zkl__session_timeout_ms(c);
		while (c->ntasks > 0 && !c->sess->expired && zkl__now_ms() < until)
			if (!zkl__loop_step(c))
				zkl__io_wait(c, zkl__now_ms() + 100);
		if (c->ntasks > 0)
			zkl__log(c, ZKL_LOG_ERROR, "closing with background deletes not done on the "
			        "application's session: their nodes stay until it ends");
	}
	/* Let the requests already sent complete, so their memory is not lost with the
	 * handle (the C client frees nothing of a request still out when it is closed from
	 * another thread); bounded, since a dead connection fails them within the session
	 * timeout. That holds for retired sessions still connected too: one given up a
	 * moment ago has a heartbeat out. */
	int64_t deadline = zkl__now_ms() + 3000;
	if (c->external) {
		/* No loop thread applies the answers: this one does, as it waits. The kicks are
		 * read before the look, since a release's delete is unpinned without mu. */
		for (uint64_t k = zkl__kicks(c); requests_out(c); k = zkl__kicks(c))
			if (zkl__io_wait_since(c, k, deadline))
				break;
	} else {
		while (requests_out(c) && !zkl__cond_wait_until(&c->ev_cv, &c->mu, deadline))
			;
	}
	c->closing = true;
	atomic_store(&c->state_pub, ZKL_STATE_CLOSED);
	zkl__wake_all(c);
	zkl__loop_wake(c);
	if (c->external) {
		/* The application's loop: wait until no zkl_client_process() runs, then end
		 * what is under way here, as the event thread would. */
		while (c->processing)
			pthread_cond_wait(&c->ev_cv, &c->mu);
		zkl_client *outer = zkl__running_loop;
		zkl__running_loop = c;
		pthread_mutex_lock(&c->inbox_mu);
		c->loop_ended = true;
		pthread_mutex_unlock(&c->inbox_mu);
		zkl__loop_waiters_run(c);
		zkl__running_loop = outer;
	}
	pthread_mutex_unlock(&c->mu);
	if (c->ev_running)
		pthread_join(c->ev_thread, NULL);
	c->ev_running = false;
	pthread_mutex_lock(&c->mu);
	zkl__inbox_drain(c); /* releases handed over after the loop's last turn */
	zkl__retired_reap(c, true);
	struct zkl_session *s = c->sess;
	c->sess = NULL;
	pthread_mutex_unlock(&c->mu);
	zkl__session_free(c, s);
	client_free(c);
}


int zkl_client_get_stats(const zkl_client *c, zkl_client_stats *out, size_t size)
{
	zkl__clear_error();
	if (!c || !out)
		return zkl__fail(ZKL_EINVAL, "%s is NULL", c ? "out" : "client");
	if (size < sizeof out->acquisitions)
		return zkl__fail(ZKL_EINVAL, "size %zu is too small for zkl_client_stats", size);
	zkl_client_stats s = {
		.acquisitions = atomic_load_explicit(&c->n_acquisitions, memory_order_relaxed),
		.granted = atomic_load_explicit(&c->n_granted, memory_order_relaxed),
		.wakes = atomic_load_explicit(&c->n_wakes, memory_order_relaxed),
		.listings = atomic_load_explicit(&c->n_listings, memory_order_relaxed),
		.wait_sum_ms = atomic_load_explicit(&c->wait_sum, memory_order_relaxed),
		.hold_sum_ms = atomic_load_explicit(&c->hold_sum, memory_order_relaxed),
		.proof_writes = atomic_load_explicit(&c->n_proof_writes, memory_order_relaxed),
		.heartbeat_syncs = atomic_load_explicit(&c->n_heartbeat_syncs, memory_order_relaxed),
	};
	for (int i = 0; i < ZKL_STATS_BUCKETS; i++) {
		s.wait_hist[i] = atomic_load_explicit(&c->wait_hist[i], memory_order_relaxed);
		s.hold_hist[i] = atomic_load_explicit(&c->hold_hist[i], memory_order_relaxed);
	}
	memcpy(out, &s, size < sizeof s ? size : sizeof s);
	return 0;
}

zkl_state zkl_client_state(const zkl_client *c)
{
	if (!c)
		return ZKL_STATE_CLOSED;
	return (zkl_state)atomic_load(&((zkl_client *)c)->state_pub);
}

const char *zkl_state_name(zkl_state s)
{
	switch (s) {
	case ZKL_STATE_CONNECTING: return "connecting";
	case ZKL_STATE_CONNECTED: return "connected";
	case ZKL_STATE_SUSPENDED: return "suspended";
	case ZKL_STATE_RECONNECTED: return "reconnected";
	case ZKL_STATE_LOST: return "lost";
	case ZKL_STATE_CLOSED: return "closed";
	}
	return "unknown";
}


int64_t zkl_monotonic_ms(void)
{
	return zkl__now_ms();
}

