/* The ZooKeeper side: the client every mode uses, and a plain ZooKeeper handle for
 * what the library has no API for (`list` walks folders; --once-per keeps its record). */
#include "zklock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the ZooKeeper side ---- */

static void log_to_stderr(zkl_log_level level, const char *message, void *data)
{
	(void)level;
	(void)data;
	msg("%s", message);
}

void on_state(zkl_client *c, zkl_state state, void *data)
{
	(void)c;
	(void)data;
	msg("ZooKeeper connection %s", zkl_state_name(state));
}

/* Opens the client. Returns 0 or an exit code after reporting. */
int open_client(const struct opts *o, zkl_client **out)
{
	zkl_client_options co;
	zkl_client_options_init(&co);
	co.servers = o->servers;
	if (o->session_timeout_ms > 0)
		co.session_timeout_ms = o->session_timeout_ms;
	if (o->loss_percent > 0)
		co.loss_percent = o->loss_percent;
	if (o->connect_timeout_ms > 0)
		co.connect_timeout_ms = o->connect_timeout_ms;
	co.digest_auth = o->auth;
	co.log = log_to_stderr;
	co.log_level = o->verbose >= 2 ? ZKL_LOG_DEBUG : ZKL_LOG_WARN;

	int rc = zkl_client_open(out, &co);
	if (rc == 0) {
		if (o->verbose)
			msg("connected to %s (session 0x%llx, timeout %d ms)", o->servers,
			    (unsigned long long)zkl_client_session_id(*out),
			    zkl_client_session_timeout(*out));
		return 0;
	}
	*out = NULL;
	const char *detail = zkl_last_error();
	if (rc == ZKL_ECONNECT) {
		msg("cannot connect to ZooKeeper at %s: %s", o->servers,
		    *detail ? detail : zkl_strerror(rc));
		return EXIT_UNAVAILABLE;
	}
	if (rc == ZKL_EINVAL)
		return usage_error("invalid server list \"%s\": %s", o->servers,
		                   *detail ? detail : zkl_strerror(rc));
	msg("cannot open a ZooKeeper session with %s: %s%s%s", o->servers, zkl_strerror(rc),
	    *detail ? ": " : "", detail);
	return rc == ZKL_EAUTH ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
}

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct raw *r = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&r->mu);
	r->state = state;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void raw_log_discard(const char *message)
{
	(void)message;
}

/* Opens r and waits until it is connected. Returns 0 or an exit code after reporting. */
int raw_open(const struct opts *o, struct raw *r)
{
	memset(r, 0, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	int timeout = o->session_timeout_ms > 0 ? o->session_timeout_ms : 10000;
	r->zh = zookeeper_init2(o->servers, raw_watcher, timeout, NULL, r, ZOO_NO_LOG_CLIENTENV,
	                        raw_log_discard);
	if (!r->zh) {
		msg("cannot start a ZooKeeper client for %s: %s", o->servers, strerror(errno));
		return EXIT_SOFTWARE;
	}
	zoo_set_servers_resolution_delay(r->zh, -1);
	if (o->auth)
		zoo_add_auth(r->zh, "digest", o->auth, (int)strlen(o->auth), NULL, NULL);
	struct timespec deadline = after_ms(o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000);
	pthread_mutex_lock(&r->mu);
	while (r->state != ZOO_CONNECTED_STATE && r->state != ZOO_AUTH_FAILED_STATE &&
	       pthread_cond_timedwait(&r->cv, &r->mu, &deadline) != ETIMEDOUT)
		;
	bool ok = r->state == ZOO_CONNECTED_STATE;
	pthread_mutex_unlock(&r->mu);
	if (!ok) {
		zookeeper_close(r->zh);
		r->zh = NULL;
		msg("cannot connect to ZooKeeper at %s", o->servers);
		return EXIT_UNAVAILABLE;
	}
	return 0;
}

void raw_close(struct raw *r)
{
	if (r->zh)
		zookeeper_close(r->zh);
	r->zh = NULL;
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
}

