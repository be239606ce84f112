/* Timeouts are bounds: 0 tries once without waiting, and a positive value bounds the
 * whole call, for every kind, also while the server answers nothing (stopped with
 * SIGSTOP, every thread of it, with a 10 s session that outlives the stop). Each call is timed against its
 * bound plus a stated margin. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* What a call may take beyond its timeout: the loop's turn and the withdrawal handed to
 * the background. A try-once (0) waits for its one round trip at most ZKL_TRY_ONCE_MS. */
enum { MARGIN_MS = 150, TRY_ONCE_MS = 1000 };

/* Whether the server is stopped by this test: a failed check leaves the test at once,
 * and the teardown then lets the server go on for the tests after it. */
static bool frozen;

/* Returns once every thread of the server has stopped (scripts/zk-server pause): until
 * then a loaded machine may still see it answer a request sent after the SIGSTOP. */
static void freeze(void)
{
	if (!h_server_driven()) {
		fprintf(stderr, "skip: the test's server cannot be driven (run through tests/with-zk)\n");
		skip();
	}
	h_server("pause");
	frozen = true;
}

static void thaw(void)
{
	if (frozen)
		h_server("resume");
	frozen = false;
}

static int thaw_after(void **state)
{
	(void)state;
	thaw();
	return 0;
}

/* Runs acquire(l, timeout) and checks that it ended with rc within timeout + margin. */
static void bounded(const char *what, zkl_lock *l, int timeout, int rc)
{
	const int64_t t0 = zkl_monotonic_ms();
	const int got = zkl_lock_acquire(l, timeout);
	const int64_t took = zkl_monotonic_ms() - t0;
	const int bound = (timeout == 0 ? TRY_ONCE_MS : timeout) + MARGIN_MS;
	print_message("# %s acquire(%d): %s in %lld ms (bound %d ms)\n", what, timeout,
	              zkl_errname(got), (long long)took, bound);
	CHECK_RC(rc, got);
	assert_true(took <= bound);
}

/* The kinds, each on a client of its own with a 10 s session, and a multi-lock over two
 * mutexes, one of which its thread may hold already (hold_one: the multi-lock then
 * re-enters it and waits for the other; only the test of 500 ms does, as the stop for
 * the multi-lock and the semaphore's two leases would come near the session's loss with
 * two of ZKL_TRY_ONCE_MS). */
struct kinds {
	zkl_client *c[6];
	zkl_mutex *m;
	zkl_semaphore *s;
	zkl_semaphore_mutex *sm;
	zkl_leader *ld;
	zkl_mutex *m1, *m2;
	zkl_multilock *ml;
	/* Handles never used: their first acquire looks at the path first (a mutex's
	 * folder, a semaphore's recorded count). */
	zkl_mutex *fm;
	zkl_semaphore *fs;
	zkl_semaphore_mutex *fsm;
	bool holds_one;
};

static void kinds_open(struct kinds *k, bool hold_one)
{
	for (int i = 0; i < 6; i++)
		k->c[i] = h_client(10000);
	CHECK_OK(zkl_mutex_new(&k->m, k->c[0], h_path("bounds-mutex")));
	CHECK_OK(zkl_semaphore_new(&k->s, k->c[1], h_path("bounds-sem"), 2));
	CHECK_OK(zkl_semaphore_mutex_new(&k->sm, k->c[2], h_path("bounds-semmutex")));
	CHECK_OK(zkl_leader_new(&k->ld, k->c[3], h_path("bounds-leader"), NULL));
	CHECK_OK(zkl_mutex_new(&k->m1, k->c[4], h_path("bounds-multi-1")));
	CHECK_OK(zkl_mutex_new(&k->m2, k->c[4], h_path("bounds-multi-2")));
	CHECK_OK(zkl_multilock_new(&k->ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(k->ml, zkl_mutex_lock(k->m1)));
	CHECK_OK(zkl_multilock_add(k->ml, zkl_mutex_lock(k->m2)));
	/* Each kind once, so that its folders are known and its first round trips done. */
	zkl_lock *ls[] = { zkl_mutex_lock(k->m), zkl_semaphore_lock(k->s),
	                   zkl_semaphore_mutex_lock(k->sm), zkl_leader_lock(k->ld),
	                   zkl_multilock_lock(k->ml) };
	for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) {
		CHECK_OK(zkl_lock_acquire(ls[i], 10000));
		CHECK_OK(zkl_lock_release(ls[i]));
	}
	k->holds_one = hold_one;
	if (hold_one)
		CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(k->m1), 10000));
	CHECK_OK(zkl_mutex_new(&k->fm, k->c[0], h_path("bounds-fresh-mutex")));
	CHECK_OK(zkl_semaphore_new(&k->fs, k->c[1], h_path("bounds-fresh-sem"), 2));
	CHECK_OK(zkl_semaphore_mutex_new(&k->fsm, k->c[2], h_path("bounds-fresh-semmutex")));
}

static void kinds_close(struct kinds *k)
{
	if (k->holds_one)
		CHECK_OK(zkl_lock_release(zkl_mutex_lock(k->m1)));
	zkl_mutex_free(k->fm);
	zkl_semaphore_free(k->fs);
	zkl_semaphore_mutex_free(k->fsm);
	zkl_multilock_free(k->ml);
	zkl_mutex_free(k->m1);
	zkl_mutex_free(k->m2);
	zkl_leader_free(k->ld);
	zkl_semaphore_mutex_free(k->sm);
	zkl_semaphore_free(k->s);
	zkl_mutex_free(k->m);
	for (int i = 0; i < 6; i++)
		zkl_client_close(k->c[i]);
}

/* Stops the server for one call of l: it ends with rc within its bound. Then, the server
 * back, l is taken and given back (what the stopped call queued is gone or going): each
 * stop lasts one call, well within the session. */
static void one_frozen(const char *what, zkl_lock *l, int timeout)
{
	freeze();
	bounded(what, l, timeout, ZKL_ETIMEDOUT);
	thaw();
	CHECK_OK(zkl_lock_acquire(l, 20000));
	CHECK_OK(zkl_lock_release(l));
}

static void frozen_server(int timeout)
{
	struct kinds k;
	kinds_open(&k, timeout > 0);
	one_frozen("mutex", zkl_mutex_lock(k.m), timeout);
	one_frozen("semaphore", zkl_semaphore_lock(k.s), timeout);
	one_frozen("semaphore-mutex", zkl_semaphore_mutex_lock(k.sm), timeout);
	one_frozen("leader", zkl_leader_lock(k.ld), timeout);
	one_frozen("new mutex", zkl_mutex_lock(k.fm), timeout);
	one_frozen("new semaphore", zkl_semaphore_lock(k.fs), timeout);
	one_frozen("new semaphore-mutex", zkl_semaphore_mutex_lock(k.fsm), timeout);
	/* The multi-lock (its thread may hold one member: it re-enters it), and several
	 * leases at once. */
	freeze();
	bounded("multilock", zkl_multilock_lock(k.ml), timeout, ZKL_ETIMEDOUT);
	const int64_t t0 = zkl_monotonic_ms();
	zkl_lease *lease[2];
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(k.s, 2, timeout, lease));
	const int64_t took = zkl_monotonic_ms() - t0;
	print_message("# 2 leases acquire(%d): %lld ms\n", timeout, (long long)took);
	assert_true(took <= (timeout ? timeout : TRY_ONCE_MS) + MARGIN_MS);
	thaw();
	CHECK_OK(zkl_semaphore_acquire(k.s, 2, 20000, lease));
	CHECK_OK(zkl_lease_release(lease[0]));
	CHECK_OK(zkl_lease_release(lease[1]));
	zkl_lease_free(lease[0]);
	zkl_lease_free(lease[1]);
	kinds_close(&k);
}

static void test_frozen_try_once(void **state)
{
	(void)state;
	frozen_server(0);
}

static void test_frozen_500(void **state)
{
	(void)state;
	frozen_server(500);
}

/* Many leases with a deadline that passes: the call ends by its deadline, not one try
 * per lease after it. A count of leases no semaphore could hold is refused at once,
 * without memory for it. */
static void test_semaphore_many(void **state)
{
	(void)state;
	const char *path = h_path("bounds-many");
	zkl_client *c = h_client(0);
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, path, 5000));
	zkl_lease **out = calloc(3000, sizeof *out);
	assert_non_null(out);
	int64_t t0 = zkl_monotonic_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(s, 3000, 1, out));
	int64_t took = zkl_monotonic_ms() - t0;
	print_message("# 3000 leases with 1 ms: %lld ms\n", (long long)took);
	assert_true(took <= 1 + MARGIN_MS);
	h_wait_children(h_sub(path, "leases"), 0);
	zkl_semaphore_free(s);

	CHECK_OK(zkl_semaphore_new(&s, c, path, INT_MAX));
	t0 = zkl_monotonic_ms();
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, INT_MAX, 1000, out));
	assert_true(zkl_monotonic_ms() - t0 <= MARGIN_MS);
	assert_non_null(strstr(zkl_last_error(), "leases"));
	print_message("# %s\n", zkl_last_error());
	free(out);
	zkl_semaphore_free(s);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_frozen_try_once, thaw_after),
		cmocka_unit_test_teardown(test_frozen_500, thaw_after),
		cmocka_unit_test(test_semaphore_many),
	};
	return H_RUN(tests);
}
