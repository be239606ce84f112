/* Client processes SIGKILLed while they hold or wait (run through tests/with-ensemble).
 * A killed process cannot say goodbye: its nodes stay until the ensemble expires its
 * session, and nobody may get in before that. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

enum { T = 4000 };

/* ---- the holder process is killed: the waiter gets in after the session timeout ---- */

static void test_holder_killed(void **state)
{
	(void)state;
	const char *path = h_path("holder-killed");
	f_child ch;
	f_child_spawn(&ch, h_servers(), path, T);
	char line[256];
	f_child_line(&ch, line, sizeof line, 30000);
	long long child_token = 0;
	int child_timeout = 0;
	if (sscanf(line, "held %lld %d", &child_token, &child_timeout) != 2)
		fail_msg("the child said: %s", line);
	assert_int_equal(child_timeout, T);

	zkl_client *c = f_client(NULL, T, true);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	f_waiter w = {0};
	f_waiter_start(&w, m, 60000);
	assert_true(f_wait_children(NULL, path, 2, 10000));

	/* The child talks to the ensemble every 20 ms until this moment, so the ensemble
	 * cannot expire its session before a whole timeout from now. */
	int64_t killed = f_child_kill(&ch);
	assert_true(ch.last_ok > 0);
	assert_true(h_latch_wait(w.done, T + 20000));
	CHECK_OK(w.rc);
	int64_t after = w.returned - killed;
	int64_t after_heard = w.returned - ch.last_ok;
	print_message("waiter in %lld ms after the holder process was killed, %lld ms after "
	              "its last answered request was sent (session %d ms)\n", (long long)after,
	              (long long)after_heard, T);
	/* The server heard from the child no earlier than when that request was sent, and
	 * cannot expire the session less than a timeout after. */
	assert_true(after_heard >= T);
	/* The child was talking until the kill (a request every 20 ms; the margin is for a
	 * busy machine), so from the kill too it took about the session timeout... */
	assert_true(after >= T - 500);
	/* ...and not much more: a tick of rounding, a ping interval, some scheduling. */
	assert_true(after <= T + 5000);
	assert_true(w.token > child_token);
	assert_int_equal(f_children(NULL, path, NULL), 1);
	f_waiter_join(&w);
	CHECK_OK(w.release_rc);
	assert_true(f_wait_children(NULL, path, 0, 10000));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- a waiting process is killed: the queue moves past its node once it expires ---- */

static void test_waiter_killed(void **state)
{
	(void)state;
	const char *path = h_path("waiter-killed");
	zkl_client *hc = f_client(NULL, T, true), *wc = f_client(NULL, T, true);
	zkl_mutex *holder, *wm;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	CHECK_OK(zkl_mutex_new(&wm, wc, path));
	zkl_lock *hl = zkl_mutex_lock(holder);
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	int64_t token = zkl_lock_token(hl);

	/* Queue: holder, the child, then our waiter (which watches the child's node). */
	f_child ch;
	f_child_spawn(&ch, h_servers(), path, T);
	assert_true(f_wait_children(NULL, path, 2, 30000));
	f_waiter w = {0};
	f_waiter_start(&w, wm, 60000);
	assert_true(f_wait_children(NULL, path, 3, 10000));

	int64_t killed = f_child_kill(&ch);
	CHECK_OK(zkl_lock_release(hl));
	assert_true(h_latch_wait(w.done, T + 20000));
	CHECK_OK(w.rc);
	int64_t after = w.returned - killed;
	print_message("waiter in %lld ms after the waiting process was killed\n", (long long)after);
	/* The dead waiter's node stood in line until its session expired: its client had
	 * been heard from within a third of the timeout before the kill (heartbeats), so
	 * that is at least 2/3 of the timeout after; half of it leaves room for a busy
	 * machine and still shows that nobody skipped the dead node. */
	assert_true(after >= T / 2);
	assert_true(after <= T + 5000);
	assert_true(w.token > token);
	assert_int_equal(f_children(NULL, path, NULL), 1);
	f_waiter_join(&w);
	CHECK_OK(w.release_rc);
	assert_true(f_wait_children(NULL, path, 0, 10000));
	zkl_mutex_free(holder);
	zkl_mutex_free(wm);
	zkl_client_close(hc);
	zkl_client_close(wc);
}

int main(int argc, char **argv)
{
	f_child_main(argc, argv);
	const struct CMUnitTest tests[] = {
		FAULT_TEST(test_holder_killed),
		FAULT_TEST(test_waiter_killed),
	};
	return H_RUN(tests);
}
