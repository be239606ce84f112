/* Curator, kazoo and zklocks on one lock path: what a mixed path means.
 *
 * Curator and kazoo do not see each other: kazoo only counts nodes with its own names,
 * and Curator sorts a name without "lock-" by the whole name, which puts kazoo's nodes
 * after its own, so it never waits for them. Each of them sees zklocks' nodes only when
 * they carry its names. zklocks sees every node, whatever named it, and orders them by the
 * server's sequence number: it waits for both. These tests pin that down (docs/INTEROP.md).
 * Run through tests/with-zk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "peer.h"

static peer *C; /* Curator */
static peer *Z; /* kazoo */

#define SOON 15000
#define TRY 400

static void test_curator_and_kazoo_both_hold(void **state)
{
	(void)state;
	const char *path = h_path("m-both");
	peer_do(C, "a", "acquired", SOON, "acquire mutex %s -1", path);
	/* kazoo does not see Curator's holder... */
	peer_do(Z, "a", "acquired", SOON, "acquire lock %s %d", path, SOON);
	/* ...and Curator does not see kazoo's, even one queued before its own node. */
	peer_do(C, "a", "released", SOON, "release");
	peer_do(C, "b", "acquired", SOON, "acquire mutex %s %d", path, SOON);

	/* zklocks, whichever names it uses, sees both and waits for both. */
	zh *zc = zh_new(ZH_MUTEX, path, ZKL_NAMING_CURATOR, 0, NULL);
	zh *zk = zh_new(ZH_MUTEX, path, ZKL_NAMING_KAZOO, 0, NULL);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(zc, TRY));
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(zk, TRY));
	/* One queue in sequence order: kazoo's node, then Curator's. zklocks marks only the
	 * first as holder, although Curator believes it holds too. */
	zkl_participant *list;
	size_t n;
	CHECK_OK(zh_participants(zc, &list, &n));
	assert_int_equal(n, 2);
	assert_true(list[0].holder);
	assert_string_equal(list[0].data, peer_data(Z));
	assert_non_null(strstr(list[0].path, "__lock__"));
	assert_false(list[1].holder);
	assert_string_equal(list[1].data, peer_data(C));
	assert_non_null(strstr(list[1].path, "-lock-"));
	assert_true(list[0].sequence < list[1].sequence);
	zkl_participants_free(list, n);

	zh_start_acquire(zc, 30000);
	h_wait_children(path, 3);
	peer_do(Z, "a", "released", SOON, "release");
	assert_int_equal(zh_wait(zc, 300), ZH_PENDING); /* Curator's holder is still there */
	peer_do(C, "b", "released", SOON, "release");
	CHECK_OK(zh_wait(zc, SOON));
	CHECK_OK(zh_release(zc));
	zh_free(zc);
	zh_free(zk);
}

/* A zklocks holder keeps out the library whose names it uses, not the other one. */
static void test_zklocks_naming_decides_who_sees_it(void **state)
{
	(void)state;
	const char *path = h_path("m-naming");
	zh *zc = zh_new(ZH_MUTEX, path, ZKL_NAMING_CURATOR, 0, NULL);
	CHECK_OK(zh_acquire(zc, -1));
	peer_do(C, "a", "timeout", SOON, "acquire mutex %s %d", path, TRY);
	peer_do(Z, "a", "acquired", SOON, "acquire lock %s %d", path, SOON);
	peer_do(Z, "a", "released", SOON, "release");
	CHECK_OK(zh_release(zc));

	zh *zk = zh_new(ZH_MUTEX, path, ZKL_NAMING_KAZOO, 0, NULL);
	CHECK_OK(zh_acquire(zk, -1));
	peer_do(Z, "a", "timeout", SOON, "acquire lock %s %d", path, TRY);
	peer_do(C, "a", "acquired", SOON, "acquire mutex %s %d", path, SOON);
	peer_do(C, "a", "released", SOON, "release");
	CHECK_OK(zh_release(zk));
	zh_free(zc);
	zh_free(zk);
}

static int setup(void **state)
{
	h_setup(state);
	C = peer_start(PEER_CURATOR, 10000);
	Z = peer_start(PEER_KAZOO, 10000);
	return 0;
}

static int teardown(void **state)
{
	peer_stop(C);
	peer_stop(Z);
	C = Z = NULL;
	return h_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_curator_and_kazoo_both_hold),
		cmocka_unit_test(test_zklocks_naming_decides_who_sees_it),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
