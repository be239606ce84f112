/* What waiting costs the ensemble (liveness.c): a session that holds, or whose
 * acquisition is next in line, proves itself with a committed write every sixth of its
 * session timeout; a session that waits further back sends none, and no sync either
 * (nothing beyond the C client's pings). A turn that reaches such a session commits one
 * check of its node before it is told, so its loss deadline counts from a fresh write. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define N 5          /* one holder and four waiters, each its own session */
#define TIMEOUT 3000 /* a heartbeat every 500 ms */

static zkl_client_stats stats(zkl_client *c)
{
	zkl_client_stats s;
	CHECK_OK(zkl_client_get_stats(c, &s, sizeof s));
	return s;
}

/* Waits until c has sent at least want proof writes, at most 30 s (a heartbeat comes
 * every 500 ms). */
static void wait_proofs(zkl_client *c, uint64_t want)
{
	const int64_t until = zkl_monotonic_ms() + 30000;
	while (stats(c).proof_writes < want) {
		assert_true(zkl_monotonic_ms() < until);
		usleep(20000);
	}
}

struct fleet {
	const char *path;
	zkl_client *c[N];
	zkl_mutex *m[N];
	zkl_lock *l[N];
	struct h_acquire w[N];
	char node[N][ZKL_NODE_MAX];
};

/* c[0] holds; c[1..] queue behind it in order, each seen in the queue before the next. */
static void fleet_open(struct fleet *f, const char *test)
{
	f->path = h_path(test);
	for (int i = 0; i < N; i++) {
		f->c[i] = h_client(TIMEOUT);
		CHECK_OK(zkl_mutex_new(&f->m[i], f->c[i], f->path));
		f->l[i] = zkl_mutex_lock(f->m[i]);
		h_counter_init(&f->w[i].done);
		f->w[i].rc = 1;
	}
	CHECK_OK(zkl_lock_acquire(f->l[0], 10000));
	h_node_known(f->l[0], f->node[0], sizeof f->node[0]);
	for (int i = 1; i < N; i++) {
		CHECK_OK(zkl_lock_acquire_async(f->l[i], -1, h_acquired, &f->w[i]));
		h_node_known(f->l[i], f->node[i], sizeof f->node[i]);
		h_wait_children(f->path, i + 1);
	}
}

static void fleet_close(struct fleet *f)
{
	for (int i = 0; i < N; i++) {
		zkl_lock_cancel(f->l[i]);
		if (zkl_lock_is_held(f->l[i]))
			zkl_lock_release(f->l[i]);
		zkl_mutex_free(f->m[i]);
		zkl_client_close(f->c[i]);
		h_counter_destroy(&f->w[i].done);
	}
}

/* ---- the holder and the next in line prove themselves; the waiters behind send
 * nothing ---- */

static void test_far_waiters_send_nothing(void **state)
{
	(void)state;
	struct fleet f;
	fleet_open(&f, "far-quiet");
	/* Every waiter has listed and armed its watch once the holder has sent two more
	 * heartbeats (a second: the queue settled long before). */
	wait_proofs(f.c[0], stats(f.c[0]).proof_writes + 2);
	zkl_client_stats before[N];
	for (int i = 0; i < N; i++)
		before[i] = stats(f.c[i]);
	/* Six more of the holder's heartbeats: three seconds, a whole session timeout. */
	wait_proofs(f.c[0], before[0].proof_writes + 6);
	wait_proofs(f.c[1], before[1].proof_writes + 3);
	for (int i = 2; i < N; i++) {
		const zkl_client_stats now = stats(f.c[i]);
		assert_int_equal(now.proof_writes, before[i].proof_writes);
		assert_int_equal(now.heartbeat_syncs, before[i].heartbeat_syncs);
		assert_int_equal(now.listings, before[i].listings);
		assert_int_equal(zkl_client_state(f.c[i]), ZKL_STATE_CONNECTED);
	}
	/* The line moves up one by one: each grant after a release, in order. */
	for (int i = 0; i < N; i++) {
		if (i > 0) {
			assert_true(h_counter_wait(&f.w[i].done, 1, 30000));
			CHECK_OK(f.w[i].rc);
		}
		assert_true(zkl_lock_is_held(f.l[i]));
		for (int j = i + 1; j < N; j++)
			assert_int_equal(h_counter_get(&f.w[j].done), 0);
		CHECK_OK(zkl_lock_release(f.l[i]));
	}
	fleet_close(&f);
}

/* ---- a turn that reaches a waiter far back is told only after a fresh committed
 * write ---- */

static void test_far_turn_proves_first(void **state)
{
	(void)state;
	struct fleet f;
	fleet_open(&f, "far-turn");
	/* Past a third of the session timeout since the last waiter queued: its create no
	 * longer makes a grant stand. */
	wait_proofs(f.c[0], stats(f.c[0]).proof_writes + 3);
	const zkl_client_stats before = stats(f.c[2]);
	/* An operator clears the holder and the next in line in one transaction: the
	 * waiter third in line holds next, with no heartbeat of its own since it queued. */
	h_delete_both(f.node[0], f.node[1]);
	assert_true(h_counter_wait(&f.w[2].done, 1, 30000));
	CHECK_OK(f.w[2].rc);
	assert_true(zkl_lock_is_held(f.l[2]));
	const zkl_client_stats after = stats(f.c[2]);
	/* Its turn's check, and nothing else, before the grant. */
	assert_int_equal(after.proof_writes, before.proof_writes + 1);
	zkl_deadlines d;
	CHECK_OK(zkl_client_deadlines(f.c[2], &d));
	/* The loss deadline counts from that check: most of the 90 % is still ahead. */
	assert_true(d.loss_ms - zkl_monotonic_ms() > TIMEOUT / 2);
	CHECK_OK(zkl_lock_release(f.l[2]));
	fleet_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_far_waiters_send_nothing),
		cmocka_unit_test(test_far_turn_proves_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
