/* zkl_semaphore_mutex on a real ZooKeeper server (run through tests/with-zk). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_layout_and_not_reentrant(void **state)
{
	(void)state;
	const char *path = h_path("semmutex");
	zkl_client *c = h_client(0);
	zkl_semaphore_mutex *m;
	CHECK_OK(zkl_semaphore_mutex_new(&m, c, path));
	zkl_lock *l = zkl_semaphore_mutex_lock(m);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(l));
	CHECK_OK(zkl_lock_acquire(l, -1));
	assert_true(zkl_lock_is_held(l));
	assert_true(zkl_lock_token(l) > 0);
	/* Curator's layout: one lease, and the takers' queue empty again. */
	assert_int_equal(h_children(h_sub(path, "leases")), 1);
	assert_true(h_children(h_sub(path, "locks")) <= 0);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	assert_int_equal(n, 1);
	assert_non_null(strstr(ps[0].path, "/leases/_c_"));
	assert_non_null(strstr(ps[0].path, "-lease-"));
	assert_int_equal(ps[0].czxid, zkl_lock_token(l));
	zkl_participants_free(ps, n);

	/* Not reentrant: the same thread waits, and gives up at its deadline. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 300));
	/* A create still out at the deadline is deleted once it is answered. */
	h_wait_children(h_sub(path, "leases"), 1);
	h_wait_children(h_sub(path, "locks"), 0);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 0));
	assert_int_equal(h_children(h_sub(path, "leases")), 1);
	assert_true(h_children(h_sub(path, "locks")) <= 0);
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
	assert_false(zkl_lock_is_held(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(l));
	assert_int_equal(zkl_lock_token(l), ZKL_ENOTHELD);
	zkl_semaphore_mutex_free(m);
	zkl_client_close(c);
}

static void *release_thread(void *arg)
{
	return (void *)(intptr_t)zkl_lock_release(arg);
}

static void test_release_from_other_thread(void **state)
{
	(void)state;
	const char *path = h_path("semmutex-thread");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore_mutex *ma, *mb;
	CHECK_OK(zkl_semaphore_mutex_new(&ma, a, path));
	CHECK_OK(zkl_semaphore_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_semaphore_mutex_lock(ma), *lb = zkl_semaphore_mutex_lock(mb);
	CHECK_OK(zkl_lock_acquire(la, -1));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(lb, 200));
	h_wait_children(h_sub(path, "leases"), 1); /* a create still out is deleted later */
	CHECK_OK(h_in_thread(release_thread, la));
	CHECK_OK(zkl_lock_acquire(lb, 5000));
	CHECK_OK(zkl_lock_release(lb));
	zkl_semaphore_mutex_free(ma);
	zkl_semaphore_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void test_mutual_exclusion(void **state)
{
	(void)state;
	h_excl e = { .path = h_path("semmutex-excl"), .semaphore_mutex = true, .cycles = 25 };
	h_threads(4, h_excl_thread, &e);
	assert_int_equal(e.errors, 0);
	assert_int_equal(e.max_inside, 1);
	assert_int_equal(e.total, 100);
	assert_true(h_children(h_sub(e.path, "leases")) <= 0);
	assert_true(h_children(h_sub(e.path, "locks")) <= 0);
}

static void on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	if (reason == ZKL_ELOST || reason == ZKL_EDELETED)
		h_latch_set(data);
}

static void test_session_expiry(void **state)
{
	(void)state;
	const char *path = h_path("semmutex-expiry");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore_mutex *ma, *mb;
	CHECK_OK(zkl_semaphore_mutex_new(&ma, a, path));
	CHECK_OK(zkl_semaphore_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_semaphore_mutex_lock(ma), *lb = zkl_semaphore_mutex_lock(mb);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(la, on_lost, lost));
	CHECK_OK(zkl_lock_acquire(la, -1));
	h_expire(a);
	assert_true(h_latch_wait(lost, 20000));
	assert_false(zkl_lock_is_held(la));
	CHECK_OK(zkl_lock_acquire(lb, 10000));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(la));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(la));
	CHECK_OK(zkl_lock_release(lb));
	assert_int_equal(h_latch_count(lost), 1);
	h_latch_free(lost);
	zkl_semaphore_mutex_free(ma);
	zkl_semaphore_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void test_invalid(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_semaphore_mutex *m = NULL;
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_mutex_new(&m, c, "relative"));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_mutex_new(&m, c, "/a//b"));
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_release(NULL));
	CHECK_OK(zkl_semaphore_mutex_new(&m, c, "/a/b"));
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(zkl_semaphore_mutex_lock(m), -7));
	zkl_semaphore_mutex_free(m);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_layout_and_not_reentrant),
		cmocka_unit_test(test_release_from_other_thread),
		cmocka_unit_test(test_mutual_exclusion),
		cmocka_unit_test(test_session_expiry),
	};
	return H_RUN(tests);
}
