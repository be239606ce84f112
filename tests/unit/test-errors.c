/* Unit tests of error codes, texts and the per-thread detail (src/base/errors.c). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zookeeper/zookeeper.h>

#include <zklocks/client.h>
#include <zklocks/common.h>
#include <zklocks/errors.h>
#include <zklocks/version.h>

#include "errors_internal.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct code {
	int code;
	const char *name;
};

/* Every member of enum zkl_error. When a code is added to the enum, add it here too:
 * test_no_unlisted_codes fails until then. */
static const struct code zkl_codes[] = {
	{ ZKL_OK, "ZKL_OK" },
	{ ZKL_EINVAL, "ZKL_EINVAL" },
	{ ZKL_ETIMEDOUT, "ZKL_ETIMEDOUT" },
	{ ZKL_ELOST, "ZKL_ELOST" },
	{ ZKL_ENOTOWNER, "ZKL_ENOTOWNER" },
	{ ZKL_ENOTHELD, "ZKL_ENOTHELD" },
	{ ZKL_ECONNECT, "ZKL_ECONNECT" },
	{ ZKL_ENOMEM, "ZKL_ENOMEM" },
	{ ZKL_ECLOSED, "ZKL_ECLOSED" },
	{ ZKL_EAUTH, "ZKL_EAUTH" },
	{ ZKL_EACL, "ZKL_EACL" },
	{ ZKL_EDEADLK, "ZKL_EDEADLK" },
	{ ZKL_EZK, "ZKL_EZK" },
	{ ZKL_EBUSY, "ZKL_EBUSY" },
	{ ZKL_ECANCELED, "ZKL_ECANCELED" },
	{ ZKL_ECONNLOSS, "ZKL_ECONNLOSS" },
	{ ZKL_ENOTSUP, "ZKL_ENOTSUP" },
	{ ZKL_ECOUNT, "ZKL_ECOUNT" },
	{ ZKL_EDELETED, "ZKL_EDELETED" },
};

/* Every member of enum ZOO_ERRORS in zookeeper.h 3.8, except ZOK, which is ZKL_OK. */
static const struct code zk_codes[] = {
	{ ZSYSTEMERROR, "ZSYSTEMERROR" },
	{ ZRUNTIMEINCONSISTENCY, "ZRUNTIMEINCONSISTENCY" },
	{ ZDATAINCONSISTENCY, "ZDATAINCONSISTENCY" },
	{ ZCONNECTIONLOSS, "ZCONNECTIONLOSS" },
	{ ZMARSHALLINGERROR, "ZMARSHALLINGERROR" },
	{ ZUNIMPLEMENTED, "ZUNIMPLEMENTED" },
	{ ZOPERATIONTIMEOUT, "ZOPERATIONTIMEOUT" },
	{ ZBADARGUMENTS, "ZBADARGUMENTS" },
	{ ZINVALIDSTATE, "ZINVALIDSTATE" },
	{ ZNEWCONFIGNOQUORUM, "ZNEWCONFIGNOQUORUM" },
	{ ZRECONFIGINPROGRESS, "ZRECONFIGINPROGRESS" },
	{ ZSSLCONNECTIONERROR, "ZSSLCONNECTIONERROR" },
	{ ZAPIERROR, "ZAPIERROR" },
	{ ZNONODE, "ZNONODE" },
	{ ZNOAUTH, "ZNOAUTH" },
	{ ZBADVERSION, "ZBADVERSION" },
	{ ZNOCHILDRENFOREPHEMERALS, "ZNOCHILDRENFOREPHEMERALS" },
	{ ZNODEEXISTS, "ZNODEEXISTS" },
	{ ZNOTEMPTY, "ZNOTEMPTY" },
	{ ZSESSIONEXPIRED, "ZSESSIONEXPIRED" },
	{ ZINVALIDCALLBACK, "ZINVALIDCALLBACK" },
	{ ZINVALIDACL, "ZINVALIDACL" },
	{ ZAUTHFAILED, "ZAUTHFAILED" },
	{ ZCLOSING, "ZCLOSING" },
	{ ZNOTHING, "ZNOTHING" },
	{ ZSESSIONMOVED, "ZSESSIONMOVED" },
	{ ZNOTREADONLY, "ZNOTREADONLY" },
	{ ZEPHEMERALONLOCALSESSION, "ZEPHEMERALONLOCALSESSION" },
	{ ZNOWATCHER, "ZNOWATCHER" },
	{ ZRECONFIGDISABLED, "ZRECONFIGDISABLED" },
	{ ZSESSIONCLOSEDREQUIRESASLAUTH, "ZSESSIONCLOSEDREQUIRESASLAUTH" },
	{ ZTHROTTLEDOP, "ZTHROTTLEDOP" },
};

static void
test_every_code_has_text(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(zkl_codes); i++) {
		const struct code *c = &zkl_codes[i];
		const char *s = zkl_strerror(c->code);

		assert_non_null(s);
		if (s[0] == '\0' || strcmp(s, "unknown error") == 0)
			fail_msg("%s (%d) has no text: \"%s\"", c->name, c->code, s);
		assert_string_equal(zkl_errname(c->code), c->name);
		assert_int_equal(strncmp(zkl_errname(c->code), "ZKL_", 4), 0);
		/* Our codes stay clear of ZooKeeper's, except 0 which both call success. */
		if (c->code != ZKL_OK)
			assert_true(c->code <= -1000);
		/* Each text is told apart from every other. */
		for (size_t j = 0; j < i; j++) {
			if (strcmp(s, zkl_strerror(zkl_codes[j].code)) == 0)
				fail_msg("%s and %s share the text \"%s\"", c->name, zkl_codes[j].name, s);
		}
	}
}

static void
test_no_unlisted_codes(void **state)
{
	(void)state;
	/* A code with a name but missing from zkl_codes[] was added without a test. */
	for (int code = -1000; code > -1200; code--) {
		int listed = 0;

		for (size_t i = 0; i < ARRAY_LEN(zkl_codes); i++)
			listed |= (zkl_codes[i].code == code);
		if (listed)
			continue;
		if (strncmp(zkl_errname(code), "ZKL_", 4) == 0)
			fail_msg("%d (%s) is not in zkl_codes[]", code, zkl_errname(code));
		assert_string_equal(zkl_strerror(code), "unknown error");
	}
}

static void
test_zk_codes(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(zk_codes); i++) {
		const struct code *c = &zk_codes[i];

		assert_string_equal(zkl_strerror(c->code), zerror(c->code));
		assert_string_equal(zkl_errname(c->code), c->name);
	}
	/* Every code in ZooKeeper's range falls through to zerror(), named or not. */
	for (int code = -1; code > -1000; code--)
		assert_string_equal(zkl_strerror(code), zerror(code));
	assert_string_equal(zkl_strerror(ZNONODE), "no node");
	assert_string_equal(zkl_errname(ZNONODE), "ZNONODE");
}

static void
test_unknown_codes(void **state)
{
	static const int unknown[] = { 1, 42, 12345, -1000, -1019, -5000, INT32_MIN, INT32_MAX };

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(unknown); i++) {
		assert_string_equal(zkl_strerror(unknown[i]), "unknown error");
		assert_string_equal(zkl_errname(unknown[i]), "UNKNOWN");
	}
	/* A code in ZooKeeper's range that zookeeper.h does not name. */
	assert_string_equal(zkl_errname(-10), "UNKNOWN");
	assert_string_equal(zkl_strerror(-10), "unknown error");
	assert_string_equal(zkl_strerror(0), "success");
}

static void
test_fail_and_clear(void **state)
{
	(void)state;
	zkl__clear_error();
	assert_string_equal(zkl_last_error(), "");
	assert_int_equal(zkl__fail(ZKL_EBUSY, "mutex %s is %s", "/a", "held"), ZKL_EBUSY);
	assert_string_equal(zkl_last_error(), "mutex /a is held");
	/* A later failure replaces the detail. */
	assert_int_equal(zkl__fail(ZKL_EINVAL, "timeout %d is negative", -5), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(), "timeout -5 is negative");
	zkl__clear_error();
	assert_string_equal(zkl_last_error(), "");
}

static void
test_fail_keeps_errno(void **state)
{
	(void)state;
	errno = ENOSPC;
	zkl__fail(ZKL_EZK, "%s", "x");
	assert_int_equal(errno, ENOSPC);
	errno = EMFILE;
	zkl__fail_zk(ZNONODE, "get", "/a");
	assert_int_equal(errno, EMFILE);
}

/* A message may quote the one before it: zkl_last_error() is the thread's own buffer,
 * which the new message is written into. */
static void
test_fail_wraps_last_error(void **state)
{
	(void)state;
	zkl__fail(ZKL_EBUSY, "an acquire of %s is under way", "/locks/a");
	assert_int_equal(zkl__fail(ZKL_EBUSY, "member 1 of 2 (%s): %s", "/locks/a",
	                          zkl_last_error()), ZKL_EBUSY);
	assert_string_equal(zkl_last_error(),
	                    "member 1 of 2 (/locks/a): an acquire of /locks/a is under way");
}

static void
test_fail_truncates(void **state)
{
	char big[600];
	const char *msg;

	(void)state;
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	zkl__fail(ZKL_EINVAL, "start %s end", big);
	msg = zkl_last_error();
	assert_int_equal(strlen(msg), 255);
	assert_int_equal(strncmp(msg, "start qqq", 9), 0);
	assert_string_equal(msg + 252, "...");
}

struct zk_map {
	int zrc;
	int want;
};

static void
test_fail_zk(void **state)
{
	static const struct zk_map map[] = {
		{ ZNOAUTH, ZKL_EACL },
		{ ZINVALIDACL, ZKL_EACL },
		{ ZAUTHFAILED, ZKL_EAUTH },
		{ ZCONNECTIONLOSS, ZKL_ECONNLOSS },
		{ ZOPERATIONTIMEOUT, ZKL_ECONNLOSS },
		{ ZSESSIONEXPIRED, ZKL_ELOST },
		{ ZINVALIDSTATE, ZKL_ELOST },
		{ ZCLOSING, ZKL_ECLOSED },
		{ ZBADARGUMENTS, ZKL_EINVAL },
		{ ZNONODE, ZKL_EZK },
		{ ZNODEEXISTS, ZKL_EZK },
		{ ZNOTEMPTY, ZKL_EZK },
		{ ZBADVERSION, ZKL_EZK },
		{ ZSYSTEMERROR, ZKL_EZK },
		{ ZMARSHALLINGERROR, ZKL_EZK },
		{ ZSESSIONMOVED, ZKL_EZK },
		{ ZNOCHILDRENFOREPHEMERALS, ZKL_EZK },
		{ -10, ZKL_EZK },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(map); i++) {
		char want[256];
		int rc;

		zkl__clear_error();
		rc = zkl__fail_zk(map[i].zrc, "create", "/locks/x");
		if (rc != map[i].want)
			fail_msg("%s mapped to %s, want %s", zkl_errname(map[i].zrc), zkl_errname(rc),
			         zkl_errname(map[i].want));
		snprintf(want, sizeof(want), "create /locks/x: %s", zerror(map[i].zrc));
		assert_string_equal(zkl_last_error(), want);
	}
	assert_string_equal(zkl_last_error(), "create /locks/x: unknown error");
	assert_int_equal(zkl__fail_zk(ZNONODE, "delete", "/a/b"), ZKL_EZK);
	assert_string_equal(zkl_last_error(), "delete /a/b: no node");
	/* Without a path there is nothing to name. */
	assert_int_equal(zkl__fail_zk(ZCONNECTIONLOSS, "sync", NULL), ZKL_ECONNLOSS);
	assert_string_equal(zkl_last_error(), "sync: connection loss");
}

struct thread_check {
	char seen[256];
	char after[256];
};

static void *
other_thread(void *arg)
{
	struct thread_check *t = arg;

	/* A new thread starts with no detail, whatever the main thread recorded. */
	snprintf(t->seen, sizeof(t->seen), "%s", zkl_last_error());
	zkl__fail(ZKL_ETIMEDOUT, "set by the other thread");
	snprintf(t->after, sizeof(t->after), "%s", zkl_last_error());
	return NULL;
}

static void
test_per_thread(void **state)
{
	struct thread_check t;
	pthread_t th;

	(void)state;
	memset(&t, 'z', sizeof(t));
	zkl__fail(ZKL_EINVAL, "set by the main thread");
	assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_string_equal(t.seen, "");
	assert_string_equal(t.after, "set by the other thread");
	/* The other thread's failure did not touch this thread's detail. */
	assert_string_equal(zkl_last_error(), "set by the main thread");
}

static void
test_version(void **state)
{
	char want[32];

	(void)state;
	assert_string_equal(zkl_version(), ZKL_VERSION_STRING);
	snprintf(want, sizeof(want), "%d.%d.%d", ZKL_VERSION_MAJOR, ZKL_VERSION_MINOR,
	         ZKL_VERSION_PATCH);
	assert_string_equal(zkl_version(), want);
	assert_int_equal(ZKL_VERSION_HEX,
	                 (ZKL_VERSION_MAJOR << 16) | (ZKL_VERSION_MINOR << 8) | ZKL_VERSION_PATCH);
}

static void
test_participants_free(void **state)
{
	zkl_participant *p = calloc(3, sizeof(*p));

	(void)state;
	zkl_participants_free(NULL, 0);
	zkl_participants_free(NULL, 5);
	assert_non_null(p);
	for (int i = 0; i < 3; i++) {
		p[i].path = strdup("/locks/x/_c_u-lock-0000000001");
		p[i].data = strdup("host:1");
		assert_non_null(p[i].path);
		assert_non_null(p[i].data);
	}
	/* The leak checker of a sanitizer build verifies that everything is freed. */
	zkl_participants_free(p, 3);
}

/* What each ZooKeeper code says of the request and the session (the one table): the
 * loss rule counts only answers, the engine retries only unknown outcomes, and gives up a
 * session only when it cannot be used any more. */
static void
test_zk_classes(void **state)
{
	(void)state;
	const int answered[] = { ZOK, ZNONODE, ZNODEEXISTS, ZNOTEMPTY, ZBADVERSION, ZNOAUTH,
	                         ZINVALIDACL, ZBADARGUMENTS, ZSESSIONMOVED };
	for (size_t i = 0; i < sizeof answered / sizeof answered[0]; i++) {
		assert_true(zkl__zk_answered(answered[i]));
		assert_false(zkl__zk_transient(answered[i]));
	}
	const int unanswered[] = { ZCONNECTIONLOSS, ZOPERATIONTIMEOUT, ZSESSIONEXPIRED,
	                           ZINVALIDSTATE, ZCLOSING, ZSYSTEMERROR };
	for (size_t i = 0; i < sizeof unanswered / sizeof unanswered[0]; i++)
		assert_false(zkl__zk_answered(unanswered[i]));
	assert_true(zkl__zk_transient(ZCONNECTIONLOSS));
	assert_true(zkl__zk_transient(ZOPERATIONTIMEOUT));
	assert_false(zkl__zk_transient(ZCLOSING));
	assert_false(zkl__zk_transient(ZSESSIONEXPIRED));
	assert_true(zkl__zk_session_gone(ZSESSIONEXPIRED));
	assert_true(zkl__zk_session_gone(ZINVALIDSTATE));
	assert_true(zkl__zk_session_gone(ZSESSIONMOVED));
	assert_false(zkl__zk_session_gone(ZCONNECTIONLOSS));
	assert_false(zkl__zk_session_gone(ZNONODE));
	assert_int_equal(zkl__zk_class(ZCLOSING), ZKL_ZK_CLOSING);
	assert_int_equal(zkl__zk_class(ZSYSTEMERROR), ZKL_ZK_LOCAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_code_has_text),
		cmocka_unit_test(test_no_unlisted_codes),
		cmocka_unit_test(test_zk_codes),
		cmocka_unit_test(test_unknown_codes),
		cmocka_unit_test(test_fail_and_clear),
		cmocka_unit_test(test_fail_keeps_errno),
		cmocka_unit_test(test_fail_truncates),
		cmocka_unit_test(test_fail_wraps_last_error),
		cmocka_unit_test(test_fail_zk),
		cmocka_unit_test(test_zk_classes),
		cmocka_unit_test(test_per_thread),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_participants_free),
	};

	return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
