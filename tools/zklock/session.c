/* The ZooKeeper side: the client every mode and subcommand uses (one session), and the
 * library's inspection of what is queued, for status, list, revoke and -v. */
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

bool parse_lock_folders(const char *s, zkl_lock_folders *out)
{
	static const char *const names[] = {"auto", "container", "persistent"};
	static const zkl_lock_folders kinds[] = {ZKL_FOLDERS_AUTO, ZKL_FOLDERS_CONTAINER,
	                                         ZKL_FOLDERS_PERSISTENT};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = kinds[i];
			return true;
		}
	}
	return false;
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
	co.tls_ca = o->tls_ca;
	co.tls_cert = o->tls_cert;
	co.tls_key = o->tls_key;
	co.sasl_mechanism = o->sasl_mechanism;
	co.sasl_user = o->sasl_user;
	co.sasl_password_file = o->sasl_password_file;
	co.lock_folders = o->lock_folders;
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
		return usage_error("invalid options for %s: %s", o->servers,
		                   *detail ? detail : zkl_strerror(rc));
	if (rc == ZKL_ENOTSUP && (o->tls_ca || o->tls_cert || o->tls_key || o->sasl_mechanism)) {
		/* What the user of a package (which has no scripts/) can do. */
		const bool tls = !o->sasl_mechanism || o->tls_ca;
		msg("%s: this zklock cannot connect with %s: it is built on a ZooKeeper C client "
		    "without it (as Debian's libzookeeper-mt is). With this build, connect %s. Or "
		    "build zklocks from its source on a client with TLS and SASL "
		    "(scripts/build-secure-client, meson -Dsecure_client=PREFIX; its README, "
		    "\"Secure connections\").", tls ? "--tls-ca" : "--sasl-mechanism",
		    tls ? "TLS" : "SASL",
		    tls ? "to the servers' plain client port without the --tls-* options, or "
		          "through a TLS tunnel on this host (stunnel, for example) to their "
		          "secure port"
		        : "without --sasl-*: with auth = user:password in the config file "
		          "(digest authentication), if the servers accept it");
		return EXIT_SOFTWARE;
	}
	msg("cannot open a ZooKeeper session with %s: %s%s%s", o->servers, zkl_strerror(rc),
	    *detail ? ": " : "", detail);
	return rc == ZKL_EAUTH ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
}

/* As long as the session may go unheard before its locks are given up for lost. */
static int inspect_timeout(zkl_client *c)
{
	int t = zkl_client_session_timeout(c);
	return t > 1000 ? t : 1000;
}

int inspect_path(zkl_client *c, const char *path, zkl_inspection **in)
{
	return zkl_inspect(c, path, inspect_timeout(c), in);
}

int open_inspected(const struct opts *o, zkl_client **c, zkl_inspection **in)
{
	*c = NULL;
	int status = open_client(o, c);
	if (status != 0)
		return status;
	int rc = inspect_path(*c, o->path, in);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(*c);
		*c = NULL;
	}
	return status;
}

int inspect_prefix(zkl_client *c, const char *prefix, zkl_inspection **in)
{
	/* A level of the tree costs a round trip: a deep one may take a few. */
	return zkl_inspect_prefix(c, prefix, 4 * inspect_timeout(c), in);
}

int find_records(zkl_client *c, const char *prefix, char ***paths, size_t *n)
{
	return zkl_record_find(c, prefix, ".last-run", 4 * inspect_timeout(c), paths, n);
}
