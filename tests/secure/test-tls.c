/* TLS against a real TLS-only ZooKeeper (run through tests/secure/with-secure-zk tls or
 * tls-want): locks over TLS, the certificate checks both ways, a plaintext client refused
 * with an error naming TLS, ACLs on a certificate's identity, and expiry over TLS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "internal.h"

static char certs_buf[4096];

/* "$ZKL_TEST_CERTS/name" (static storage: eight buffers used in turn). */
static const char *cert(const char *name)
{
	static char bufs[8][512];
	static int n;
	const char *dir = getenv("ZKL_TEST_CERTS");
	if (!dir)
		fail_msg("ZKL_TEST_CERTS is not set: run through tests/secure/with-secure-zk");
	char *b = bufs[n++ % 8];
	snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
	return b;
}

static void tls_options(zkl_client_options *o, const char *ca, const char *who)
{
	zkl_client_options_init(o);
	o->servers = h_servers();
	o->session_timeout_ms = 4000;
	o->connect_timeout_ms = 3000;
	o->confirm_release = true;
	o->tls_ca = ca ? cert(ca) : NULL;
	if (who) {
		snprintf(certs_buf, sizeof certs_buf, "%s.pem", who);
		o->tls_cert = strdup(cert(certs_buf));
		snprintf(certs_buf, sizeof certs_buf, "%s.key", who);
		o->tls_key = strdup(cert(certs_buf));
	}
}

static void options_free(zkl_client_options *o)
{
	free((char *)o->tls_cert);
	free((char *)o->tls_key);
}

/* A client over TLS with the CA and the named client certificate (NULL: none). */
static zkl_client *tls_client(const char *who, zkl_acl acl)
{
	zkl_client_options o;
	tls_options(&o, "ca.pem", who);
	o.acl = acl;
	/* A first handshake under valgrind takes seconds (OpenSSL loads the CA stores). */
	o.connect_timeout_ms = 20000;
	zkl_client *c = NULL;
	int rc = zkl_client_open(&c, &o);
	options_free(&o);
	if (rc != 0)
		fail_msg("zkl_client_open over TLS (%s): %s: %s", who ? who : "no certificate",
		         zkl_errname(rc), zkl_last_error());
	return c;
}

/* Opening with these options fails with want within the connect timeout (and a little),
 * and the error detail contains every word of needles. */
static void open_fails(zkl_client_options *o, int want, const char *needle1,
                       const char *needle2)
{
	zkl_client *c = NULL;
	int64_t t0 = zkl_monotonic_ms();
	int rc = zkl_client_open(&c, o);
	int64_t took = zkl_monotonic_ms() - t0;
	if (rc != want) {
		zkl_client_close(c);
		fail_msg("expected %s, got %s: %s", zkl_errname(want), zkl_errname(rc),
		         zkl_last_error());
	}
	assert_null(c);
	if (took > o->connect_timeout_ms + 2000)
		fail_msg("took %lld ms, the connect timeout is %d ms", (long long)took,
		         o->connect_timeout_ms);
	const char *msg = zkl_last_error();
	if (needle1 && !strstr(msg, needle1))
		fail_msg("the error does not say \"%s\": %s", needle1, msg);
	if (needle2 && !strstr(msg, needle2))
		fail_msg("the error does not say \"%s\": %s", needle2, msg);
}

static void test_features(void **state)
{
	(void)state;
	assert_true(zkl_features() & ZKL_FEATURE_TLS);
}

/* Two clients with certificates contend for one mutex over TLS. */
static void test_contend(void **state)
{
	(void)state;
	const char *path = h_path("tls-contend");
	zkl_client *a = tls_client("client", ZKL_ACL_OPEN);
	zkl_client *b = tls_client("other", ZKL_ACL_OPEN);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_mutex_lock(ma), *lb = zkl_mutex_lock(mb);

	CHECK_OK(zkl_lock_acquire(la, 5000));
	assert_true(zkl_lock_token(la) > 0);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(lb, 0));
	h_acq w;
	h_acq_start(&w, lb, true);
	assert_int_equal(h_latch_wait(w.done, 300), 0); /* still waiting behind a */
	CHECK_OK(zkl_lock_release(la));
	assert_int_equal(h_latch_wait(w.done, 10000), 1);
	CHECK_OK(w.rc);
	assert_true(w.held);
	h_acq_join(&w);
	CHECK_OK(w.release_rc);
	/* a takes it again once b has let go. */
	CHECK_OK(zkl_lock_acquire(la, 5000));
	CHECK_OK(zkl_lock_release(la));

	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* A guarded write over TLS: the multi with the check of the hold's node goes through
 * the same secure session, and is refused once the hold is released. */
static void test_guarded(void **state)
{
	(void)state;
	const char *path = h_path("tls-guarded");
	const char *rec = h_sub(h_path("tls-guarded-rec"), "r");
	zkl_client *a = tls_client("client", ZKL_ACL_OPEN);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, 5000));
	CHECK_OK(zkl_record_set_guarded(l, rec, "tls", 3));
	char *data = NULL;
	size_t len = 0;
	CHECK_OK(zkl_record_get(a, rec, &data, &len, NULL));
	assert_int_equal(len, 3);
	assert_string_equal(data, "tls");
	free(data);
	CHECK_OK(zkl_lock_release(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_record_set_guarded(l, rec, "late", 4));
	CHECK_OK(zkl_record_delete(a, rec));
	zkl_mutex_free(m);
	zkl_client_close(a);
}

/* The server requires a client certificate: without one the handshake is refused. */
static void test_missing_client_cert(void **state)
{
	(void)state;
	zkl_client_options o;
	tls_options(&o, "ca.pem", NULL);
	open_fails(&o, ZKL_ECONNECT, "TLS", "tls_cert");
}

/* A client certificate from a CA the server does not trust is refused. */
static void test_untrusted_client_cert(void **state)
{
	(void)state;
	zkl_client_options o;
	tls_options(&o, "ca.pem", "rogue");
	open_fails(&o, ZKL_ECONNECT, "TLS", "does it trust its CA");
	options_free(&o);
}

/* The server's certificate is not signed by the client's CA: the client refuses it. */
static void test_untrusted_server(void **state)
{
	(void)state;
	zkl_client_options o;
	tls_options(&o, "rogue-ca.pem", "client");
	open_fails(&o, ZKL_ECONNECT, "TLS", "signed by a CA of tls_ca");
	options_free(&o);
}

/* A plaintext client at the TLS port fails within its connect timeout, and says TLS. */
static void test_plaintext_client(void **state)
{
	(void)state;
	zkl_client_options o;
	tls_options(&o, NULL, NULL);
	o.connect_timeout_ms = 2000;
	open_fails(&o, ZKL_ECONNECT, "only TLS", "tls_ca");
}

/* An encrypted key with its password. */
static void test_key_password(void **state)
{
	(void)state;
	zkl_client_options o;
	tls_options(&o, "ca.pem", NULL);
	o.tls_cert = cert("client.pem");
	o.tls_key = cert("client-enc.key");
	o.tls_key_password = "keypass";
	o.connect_timeout_ms = 20000;
	zkl_client *c = NULL;
	CHECK_OK(zkl_client_open(&c, &o));
	assert_int_equal(zkl_client_state(c), ZKL_STATE_CONNECTED);
	zkl_client_close(c);
}

/* A creator-only ACL belongs to the certificate's identity (x509:CN=zkl-client): a client
 * with another certificate can neither join the lock nor delete its node. */
static void test_x509_acl(void **state)
{
	(void)state;
	const char *path = h_path("tls-acl");
	zkl_client *a = tls_client("client", ZKL_ACL_CREATOR_ALL_READ);
	zkl_client *b = tls_client("other", ZKL_ACL_OPEN);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_mutex_lock(ma), *lb = zkl_mutex_lock(mb);
	CHECK_OK(zkl_lock_acquire(la, 5000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(la, node, sizeof node) > 0);

	/* The folder is a's: b cannot put its node in it. */
	CHECK_RC(ZKL_EACL, zkl_lock_acquire(lb, 1000));

	/* Nor delete a's node through its own session. */
	struct ACL_vector acl;
	struct Stat st;
	assert_int_equal(zoo_get_acl(b->sess->zh, node, &acl, &st), ZOK);
	int x509 = 0;
	for (int i = 0; i < acl.count; i++)
		if (strcmp(acl.data[i].id.scheme, "x509") == 0 &&
		    strstr(acl.data[i].id.id, "CN=zkl-client"))
			x509++;
	deallocate_ACL_vector(&acl);
	assert_int_equal(x509, 1);
	assert_int_equal(zoo_delete(b->sess->zh, node, -1), ZNOAUTH);
	assert_true(zkl_lock_is_held(la));
	CHECK_OK(zkl_lock_release(la));

	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void no_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* Expiry over TLS: a second TLS handle takes the session over and closes it; the holder
 * hears its lock is lost, and the client opens a new TLS session by itself. */
static void test_expiry(void **state)
{
	(void)state;
	const char *path = h_path("tls-expiry");
	zkl_client *a = tls_client("client", ZKL_ACL_OPEN);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, 5000));
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, h_on_lost, lost));

	pthread_mutex_lock(&a->mu);
	clientid_t cid = *zoo_client_id(a->sess->zh);
	int timeout = zoo_recv_timeout(a->sess->zh);
	pthread_mutex_unlock(&a->mu);
	char certstr[2048];
	snprintf(certstr, sizeof certstr, "%s,%s,%s", cert("ca.pem"), cert("client.pem"),
	         cert("client.key"));
	zhandle_t *t = zookeeper_init_ssl(h_servers(), certstr, no_watcher, timeout, &cid, NULL,
	                                  0);
	assert_non_null(t);
	for (int i = 0; i < 500 && zoo_state(t) != ZOO_CONNECTED_STATE; i++)
		usleep(10000);
	assert_int_equal(zoo_state(t), ZOO_CONNECTED_STATE);
	assert_int_equal(zoo_client_id(t)->client_id, cid.client_id);
	zookeeper_close(t); /* ends the session on the server */

	assert_int_equal(h_latch_wait(lost, 15000), 1);
	assert_false(zkl_lock_is_held(l));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	/* The new session is over TLS too, and works. */
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_client_session_id(a) != cid.client_id);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(a);
	h_latch_free(lost);
}

/* tls-want: a server that asks for a certificate but does not require one lets a client
 * with only a CA file in, and the lock works. */
static void test_ca_only(void **state)
{
	(void)state;
	const char *path = h_path("tls-ca-only");
	zkl_client *c = tls_client(NULL, ZKL_ACL_OPEN);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

int main(void)
{
	const char *mode = getenv("ZKL_TEST_SECURE_MODE");
	if (mode && strcmp(mode, "tls-want") == 0) {
		const struct CMUnitTest want[] = {
			cmocka_unit_test(test_ca_only),
			cmocka_unit_test(test_untrusted_server),
		};
		return H_RUN(want);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_contend),
		cmocka_unit_test(test_guarded),
		cmocka_unit_test(test_missing_client_cert),
		cmocka_unit_test(test_untrusted_client_cert),
		cmocka_unit_test(test_untrusted_server),
		cmocka_unit_test(test_plaintext_client),
		cmocka_unit_test(test_key_password),
		cmocka_unit_test(test_x509_acl),
		cmocka_unit_test(test_expiry),
	};
	return H_RUN(tests);
}
