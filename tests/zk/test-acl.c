/* Creator-only ACLs with digest credentials (run through tests/with-zk): other
 * credentials, or none, can neither delete our lock nodes nor join our locks, and can
 * still list them when the ACL lets anyone read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

static void no_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* A raw handle with the given digest credentials (NULL: none), connected. */
static zhandle_t *raw_open(const char *digest)
{
	zoo_set_debug_level(0);
	zhandle_t *zh = zookeeper_init(h_servers(), no_watcher, 10000, NULL, NULL, 0);
	for (int i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		usleep(10000);
	if (zoo_state(zh) != ZOO_CONNECTED_STATE)
		fail_msg("raw handle cannot connect to %s", h_servers());
	if (digest) {
		int rc = zoo_add_auth(zh, "digest", digest, (int)strlen(digest), NULL, NULL);
		if (rc != ZOK)
			fail_msg("add_auth: %s", zerror(rc));
		/* Requests are served in order: an answered request means the auth is in. */
		struct Stat st;
		rc = zoo_exists(zh, "/", 0, &st);
		if (rc != ZOK)
			fail_msg("exists /: %s", zerror(rc));
	}
	return zh;
}

/* Opens a client with these credentials and ACL; the open must succeed. */
static zkl_client *client(const char *digest, zkl_acl acl)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.confirm_release = true;
	o.digest_auth = digest;
	o.acl = acl;
	zkl_client *c = NULL;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0)
		fail_msg("zkl_client_open(%s): %s: %s", digest ? digest : "no auth", zkl_errname(rc),
		         zkl_last_error());
	return c;
}

/* The folder above every test path is made open beforehand: a client with a creator-only
 * ACL would otherwise create it as its own, and lock out every other test. */
static void open_parent(void)
{
	zhandle_t *zh = raw_open(NULL);
	int rc = zoo_create(zh, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK && rc != ZNODEEXISTS)
		fail_msg("create /t: %s", zerror(rc));
	zookeeper_close(zh);
}

/* The one child of path, as a full path in buf, listed with the given credentials. */
static void only_child(const char *digest, const char *path, char *buf, size_t size)
{
	zhandle_t *zh = raw_open(digest);
	struct String_vector sv = {0};
	int rc = zoo_get_children(zh, path, 0, &sv);
	if (rc != ZOK)
		fail_msg("get_children %s: %s", path, zerror(rc));
	if (sv.count != 1)
		fail_msg("%s has %d children, not 1", path, sv.count);
	snprintf(buf, size, "%s/%s", path, sv.data[0]);
	deallocate_String_vector(&sv);
	zookeeper_close(zh);
}

/* ---- an ACL needs credentials ---- */

static void test_acl_without_auth(void **state)
{
	(void)state;
	zkl_acl acls[] = { ZKL_ACL_CREATOR_ALL, ZKL_ACL_CREATOR_ALL_READ };
	for (size_t i = 0; i < 2; i++) {
		zkl_client_options o;
		zkl_client_options_init(&o);
		o.servers = h_servers();
		o.acl = acls[i];
		zkl_client *c = NULL;
		CHECK_RC(ZKL_EAUTH, zkl_client_open(&c, &o));
		assert_null(c);
		assert_true(strlen(zkl_last_error()) > 0);
	}
}

/* ---- creator-all, anyone may read ---- */

static void test_creator_all_read(void **state)
{
	(void)state;
	open_parent();
	const char *path = h_path("acl-read");
	zkl_client *alice = client("alice:secret", ZKL_ACL_CREATOR_ALL_READ);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, alice, path));
	zkl_lock *la = zkl_mutex_lock(ma);
	CHECK_OK(zkl_lock_set_data(la, "alice", 5));
	CHECK_OK(zkl_lock_acquire(la, 10000));
	char node[512];
	only_child(NULL, path, node, sizeof node);

	/* The node's ACL: everything for alice's digest, reading for anyone. */
	zhandle_t *anon = raw_open(NULL);
	struct ACL_vector acl = {0};
	struct Stat st;
	CHECK_RC(ZOK, zoo_get_acl(anon, node, &acl, &st));
	assert_int_equal(acl.count, 2);
	int all = -1, read = -1;
	for (int i = 0; i < acl.count; i++) {
		if (strcmp(acl.data[i].id.scheme, "digest") == 0 &&
		    strncmp(acl.data[i].id.id, "alice:", 6) == 0)
			all = acl.data[i].perms;
		if (strcmp(acl.data[i].id.scheme, "world") == 0 &&
		    strcmp(acl.data[i].id.id, "anyone") == 0)
			read = acl.data[i].perms;
	}
	deallocate_ACL_vector(&acl);
	assert_int_equal(all, ZOO_PERM_ALL);
	assert_int_equal(read, ZOO_PERM_READ);

	/* Nobody else can delete alice's node: neither without credentials... */
	CHECK_RC(ZNOAUTH, zoo_delete(anon, node, -1));
	/* ...nor with other ones. */
	zhandle_t *bob_raw = raw_open("bob:x");
	CHECK_RC(ZNOAUTH, zoo_delete(bob_raw, node, -1));
	zookeeper_close(bob_raw);

	/* Nor join the lock: the acquire fails with ZKL_EACL and leaves nothing behind. */
	const char *others[] = { NULL, "bob:x", "alice:wrong" };
	for (size_t i = 0; i < 3; i++) {
		zkl_client *c = others[i] ? client(others[i], ZKL_ACL_CREATOR_ALL_READ)
		                          : client(NULL, ZKL_ACL_OPEN);
		zkl_mutex *m;
		CHECK_OK(zkl_mutex_new(&m, c, path));
		zkl_lock *l = zkl_mutex_lock(m);
		CHECK_RC(ZKL_EACL, zkl_lock_acquire(l, 2000));
		CHECK_RC(ZKL_EACL, zkl_lock_acquire(l, 0));
		assert_false(zkl_lock_is_held(l));
		assert_int_equal(h_children(path), 1);
		/* Listing works: anyone may read. */
		zkl_participant *ps;
		size_t n;
		CHECK_OK(zkl_lock_participants(l, &ps, &n));
		assert_int_equal(n, 1);
		assert_true(ps[0].holder);
		assert_string_equal(ps[0].data, "alice");
		assert_int_equal(ps[0].czxid, zkl_lock_token(la));
		zkl_participants_free(ps, n);
		zkl_mutex_free(m);
		zkl_client_close(c);
	}
	assert_true(h_exists(node));

	/* The same credentials in another session may join. */
	zkl_client *alice2 = client("alice:secret", ZKL_ACL_CREATOR_ALL_READ);
	zkl_mutex *ma2;
	CHECK_OK(zkl_mutex_new(&ma2, alice2, path));
	zkl_lock *la2 = zkl_mutex_lock(ma2);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(la2, 300));
	h_wait_children(path, 1); /* a create still out at the deadline goes once answered */
	CHECK_OK(zkl_lock_release(la));
	assert_false(h_exists(node));
	CHECK_OK(zkl_lock_acquire(la2, 5000));
	CHECK_OK(zkl_lock_release(la2));
	assert_int_equal(h_children(path) <= 0, 1);
	zookeeper_close(anon);
	zkl_mutex_free(ma);
	zkl_mutex_free(ma2);
	zkl_client_close(alice);
	zkl_client_close(alice2);
}

/* ---- creator-all: others cannot even read ---- */

static void test_creator_all(void **state)
{
	(void)state;
	open_parent();
	const char *path = h_path("acl-all");
	zkl_client *alice = client("alice:secret", ZKL_ACL_CREATOR_ALL);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, alice, path));
	zkl_lock *la = zkl_mutex_lock(ma);
	CHECK_OK(zkl_lock_acquire(la, 10000));
	char node[512];
	only_child("alice:secret", path, node, sizeof node);
	zhandle_t *anon = raw_open(NULL);
	CHECK_RC(ZNOAUTH, zoo_delete(anon, node, -1));
	char buf[64];
	int len = sizeof buf;
	CHECK_RC(ZNOAUTH, zoo_get(anon, node, 0, buf, &len, NULL));
	zookeeper_close(anon);

	zkl_client *bob = client("bob:x", ZKL_ACL_CREATOR_ALL);
	zkl_mutex *mb;
	CHECK_OK(zkl_mutex_new(&mb, bob, path));
	zkl_lock *lb = zkl_mutex_lock(mb);
	CHECK_RC(ZKL_EACL, zkl_lock_acquire(lb, 2000));
	zkl_participant *ps;
	size_t n;
	CHECK_RC(ZKL_EACL, zkl_lock_participants(lb, &ps, &n));
	/* Alice's own listing works, and shows that bob left nothing. */
	CHECK_OK(zkl_lock_participants(la, &ps, &n));
	assert_int_equal(n, 1);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lock_release(la));
	assert_false(h_exists(node));
	zkl_mutex_free(mb);
	zkl_mutex_free(ma);
	zkl_client_close(bob);
	zkl_client_close(alice);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_acl_without_auth),
		cmocka_unit_test(test_creator_all_read),
		cmocka_unit_test(test_creator_all),
	};
	return H_RUN(tests);
}
