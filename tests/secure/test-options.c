/* The secure options without a server: what a build without TLS or SASL answers (never a
 * plaintext session), and, where the build has them, the checks made before connecting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void base(zkl_client_options *o)
{
	zkl_client_options_init(o);
	o->servers = "127.0.0.1:1"; /* nothing listens: every case here fails before */
	o->connect_timeout_ms = 60000;
}

/* Opening fails with want at once (no connection attempt), and the detail says needle. */
static void refused(const zkl_client_options *o, int want, const char *needle)
{
	zkl_client *c = NULL;
	int64_t t0 = zkl_monotonic_ms();
	int rc = zkl_client_open(&c, o);
	if (rc != want) {
		zkl_client_close(c);
		fail_msg("expected %s, got %s: %s", zkl_errname(want), zkl_errname(rc),
		         zkl_last_error());
	}
	assert_null(c);
	assert_true(zkl_monotonic_ms() - t0 < 1000);
	if (!strstr(zkl_last_error(), needle))
		fail_msg("the error does not say \"%s\": %s", needle, zkl_last_error());
}

static char file[64];

static int setup(void **state)
{
	(void)state;
	snprintf(file, sizeof file, "/tmp/zkl-options-%ld.pem", (long)getpid());
	FILE *f = fopen(file, "w");
	if (!f)
		return -1;
	fputs("not a certificate\n", f);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(file);
	return 0;
}

static void test_strerror(void **state)
{
	(void)state;
	assert_string_equal(zkl_errname(ZKL_ENOTSUP), "ZKL_ENOTSUP");
	assert_string_equal(zkl_strerror(ZKL_ENOTSUP), "not supported by this build or this kind of handle");
}

static void test_tls(void **state)
{
	(void)state;
	zkl_client_options o;
	base(&o);
	o.tls_ca = file;
	if (!(zkl_features() & ZKL_FEATURE_TLS)) {
		refused(&o, ZKL_ENOTSUP, "scripts/build-secure-client");
		refused(&o, ZKL_ENOTSUP, "zookeeper_init_ssl");
		/* Whole, not cut short to fit the detail's room. */
		refused(&o, ZKL_ENOTSUP, "\"Secure connections\" (scripts/build-secure-client)");
		return;
	}
	o.tls_cert = file;
	refused(&o, ZKL_EINVAL, "tls_cert and tls_key go together");
	o.tls_cert = NULL;
	o.tls_key_password = "x";
	refused(&o, ZKL_EINVAL, "tls_key_password without tls_key");
	base(&o);
	o.tls_key = file;
	o.tls_cert = file;
	refused(&o, ZKL_EINVAL, "without tls_ca");
	base(&o);
	o.tls_ca = "/nonexistent/ca.pem";
	refused(&o, ZKL_EINVAL, "tls_ca \"/nonexistent/ca.pem\": No such file");
	o.tls_ca = "/tmp/a,b.pem";
	refused(&o, ZKL_EINVAL, "comma");
	o.tls_ca = file;
	o.sasl_mechanism = "DIGEST-MD5";
	o.sasl_user = "bob";
	o.sasl_password = "x";
	refused(&o, ZKL_EINVAL, "TLS and SASL together");
}

static void test_sasl(void **state)
{
	(void)state;
	zkl_client_options o;
	base(&o);
	o.sasl_mechanism = "DIGEST-MD5";
	o.sasl_user = "bob";
	o.sasl_password = "x";
	if (!(zkl_features() & ZKL_FEATURE_SASL)) {
		refused(&o, ZKL_ENOTSUP, "scripts/build-secure-client");
		refused(&o, ZKL_ENOTSUP, "zookeeper_init_sasl");
		refused(&o, ZKL_ENOTSUP, "\"Secure connections\" (scripts/build-secure-client)");
		return;
	}
	o.sasl_user = NULL;
	refused(&o, ZKL_EINVAL, "needs sasl_user");
	o.sasl_user = "bob";
	o.sasl_password = NULL;
	refused(&o, ZKL_EINVAL, "needs a password");
	o.sasl_password_file = "/nonexistent/password";
	refused(&o, ZKL_EINVAL, "sasl_password_file \"/nonexistent/password\"");
	base(&o);
	o.sasl_user = "bob";
	refused(&o, ZKL_EINVAL, "without sasl_mechanism");
}

/* A creator-only ACL with no identity at all. */
static void test_acl_needs_identity(void **state)
{
	(void)state;
	zkl_client_options o;
	base(&o);
	o.acl = ZKL_ACL_CREATOR_ALL;
	refused(&o, ZKL_EAUTH, "tls_cert");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_sasl),
		cmocka_unit_test(test_acl_needs_identity),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
