/* The application's loop (external_loop) while its server is paused (SIGSTOP): nothing
 * the library does on the loop's thread waits for the server. Every call allowed there
 * returns at once, the application's own timer keeps firing, and once the server is back
 * what was released is gone from it. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "harness.h"

/* A call on the loop's thread returns within BOUND_MS (a release that waited for the
 * server took seconds); the application's timer ticks every TICK_MS and is never late by
 * more than GAP_MS. */
enum { BOUND_MS = 250, TICK_MS = 20, GAP_MS = 300 };

/* An application: a client without a loop thread, an epoll set with its descriptor and a
 * timer of the application's own. */
struct app {
	zkl_client *c;
	int ep, tfd;
	int64_t last_tick, max_gap;
	int ticks;
	bool suspended;
};

static void on_state(zkl_client *c, zkl_state st, void *data)
{
	(void)c;
	struct app *a = data;
	if (st == ZKL_STATE_SUSPENDED)
		a->suspended = true;
}

static void epoll_add(int ep, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
}

static void app_open(struct app *a, int session_timeout_ms, bool confirm_release)
{
	memset(a, 0, sizeof *a);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = session_timeout_ms;
	o.confirm_release = confirm_release;
	o.external_loop = true;
	CHECK_OK(zkl_client_open(&a->c, &o));
	CHECK_OK(zkl_client_add_listener(a->c, on_state, a));
	a->ep = epoll_create1(EPOLL_CLOEXEC);
	assert_true(a->ep >= 0);
	epoll_add(a->ep, zkl_client_loop_fd(a->c));
	a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	assert_true(a->tfd >= 0);
	struct itimerspec its = {.it_interval = {0, TICK_MS * 1000000L},
	                         .it_value = {0, TICK_MS * 1000000L}};
	assert_int_equal(timerfd_settime(a->tfd, 0, &its, NULL), 0);
	epoll_add(a->ep, a->tfd);
}

static void app_close(struct app *a)
{
	CHECK_OK(zkl_client_remove_listener(a->c, on_state, a));
	close(a->tfd);
	close(a->ep);
	zkl_client_close(a->c);
}

/* One turn of the application's loop: waits for the client's descriptor, its timeout or
 * the timer, notes the timer's ticks, and runs what is due. */
static void app_turn(struct app *a)
{
	int t = zkl_client_loop_timeout(a->c);
	if (t < 0 || t > TICK_MS)
		t = TICK_MS;
	struct epoll_event ev[2];
	int n = epoll_wait(a->ep, ev, 2, t);
	assert_true(n >= 0);
	for (int i = 0; i < n; i++) {
		if (ev[i].data.fd != a->tfd)
			continue;
		uint64_t k;
		assert_int_equal(read(a->tfd, &k, sizeof k), (ssize_t)sizeof k);
		int64_t now = zkl_monotonic_ms();
		if (a->last_tick && now - a->last_tick > a->max_gap)
			a->max_gap = now - a->last_tick;
		a->last_tick = now;
		a->ticks++;
	}
	CHECK_OK(zkl_client_process(a->c));
}

/* Starts measuring the timer's gaps afresh. */
static void app_measure(struct app *a)
{
	a->last_tick = zkl_monotonic_ms();
	a->max_gap = 0;
	a->ticks = 0;
}

static void app_run_for(struct app *a, int ms)
{
	int64_t end = zkl_monotonic_ms() + ms;
	while (zkl_monotonic_ms() < end)
		app_turn(a);
}

/* Runs the loop until *count reaches want; fails the test after ms. */
static void app_run_count(struct app *a, const int *count, int want, int ms)
{
	int64_t end = zkl_monotonic_ms() + ms;
	while (*count < want) {
		assert_true(zkl_monotonic_ms() < end);
		app_turn(a);
	}
}

/* Runs the loop until each of the n paths has want[i] children (looked at on the server
 * every 100 ms: the count is the event); fails the test after ms. */
static void app_run_children(struct app *a, const char **paths, const int *want, int n,
                             int ms)
{
	int64_t end = zkl_monotonic_ms() + ms;
	for (;;) {
		int i = 0;
		for (; i < n; i++) {
			int k = h_children(paths[i]);
			if (!(k == want[i] || (want[i] == 0 && k < 0)))
				break;
		}
		if (i == n)
			return;
		if (zkl_monotonic_ms() >= end)
			fail_msg("%s has %d children, not %d", paths[i], h_children(paths[i]),
			         want[i]);
		int64_t next = zkl_monotonic_ms() + 100;
		while (zkl_monotonic_ms() < next)
			app_turn(a);
	}
}

/* The loop keeps running: the timer ticked, never late by more than GAP_MS. */
static void app_check_ticks(struct app *a, int ms)
{
	print_message("timer: %d ticks in %d ms, the longest gap %lld ms\n", a->ticks, ms,
	              (long long)a->max_gap);
	assert_true(a->max_gap <= GAP_MS);
	assert_true(a->ticks >= ms / TICK_MS / 4);
}

static int64_t quick_t0;
static void quick_end(const char *what)
{
	int64_t dt = zkl_monotonic_ms() - quick_t0;
	print_message("%s: %lld ms\n", what, (long long)dt);
	if (dt > BOUND_MS)
		fail_msg("%s took %lld ms on the loop's thread with the server paused", what,
		         (long long)dt);
}
/* Runs stmt, a call on the loop's thread, and fails the test if it took over BOUND_MS. */
#define QUICK(what, stmt)                                                                \
	do {                                                                             \
		quick_t0 = zkl_monotonic_ms();                                           \
		stmt;                                                                    \
		quick_end(what);                                                         \
	} while (0)

/* What the callbacks of one handle said. */
struct said {
	int calls, rc;
	int lost;
};

static void acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct said *s = data;
	s->calls++;
	s->rc = rc;
}

static void lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct said *s = data;
	s->lost++;
}

static int gained_count;
static void gained(zkl_leader *l, void *data)
{
	(void)l;
	(void)data;
	gained_count++;
}

static int teardown_resume(void **state)
{
	(void)state;
	if (h_server_driven())
		h_server("resume"); /* a test that failed while the server was paused */
	return 0;
}

static void skip_unless_driven(void)
{
	if (!h_server_driven()) {
		fprintf(stderr, "skip: ZKL_TEST_ZK_SCRIPT / ZKL_TEST_ZK_DIR not set\n");
		skip();
	}
}

enum { MUTEX, WRITE, READ, LEASE, SEMMUTEX, MULTI, LEADER, HELD_KINDS };

/* Every kind held, a waiter canceled, handles freed held and waiting, a leader closed,
 * reads refused: each on the loop's thread with the server paused, with confirm_release
 * set (a confirmed release waits for the server's answer anywhere but on the loop). */
static void test_calls_on_the_loop(void **state)
{
	(void)state;
	skip_unless_driven();
	struct app a;
	app_open(&a, 8000, true);
	zkl_client *other = h_client(8000); /* outlives the pause, as the app's does */
	const char *paths[] = {
		strdup(h_path("paused-mutex")),   strdup(h_path("paused-rw")),
		strdup(h_path("paused-rw-read")),
		strdup(h_path("paused-sem")),     strdup(h_path("paused-semmutex")),
		strdup(h_path("paused-multi-a")), strdup(h_path("paused-multi-b")),
		strdup(h_path("paused-leader")),  strdup(h_path("paused-latch")),
		strdup(h_path("paused-freeheld")), strdup(h_path("paused-wait")),
		strdup(h_path("paused-freewait")),
	};
	enum { P_MUTEX, P_RW, P_RW2, P_SEM, P_SEMMUTEX, P_MA, P_MB, P_LEADER, P_LATCH, P_FREEHELD,
	       P_WAIT, P_FREEWAIT, NPATHS };

	zkl_mutex *m, *ma, *mb, *freeheld, *waiter, *freewait, *theirs, *theirs2;
	zkl_rwlock *rw, *rw2;
	zkl_semaphore *sem;
	zkl_semaphore_mutex *sm;
	zkl_multilock *ml;
	zkl_leader *ld, *latch;
	CHECK_OK(zkl_mutex_new(&m, a.c, paths[P_MUTEX]));
	CHECK_OK(zkl_rwlock_new(&rw, a.c, paths[P_RW]));
	CHECK_OK(zkl_rwlock_new(&rw2, a.c, paths[P_RW2]));
	CHECK_OK(zkl_semaphore_new(&sem, a.c, paths[P_SEM], 2));
	CHECK_OK(zkl_semaphore_mutex_new(&sm, a.c, paths[P_SEMMUTEX]));
	CHECK_OK(zkl_mutex_new(&ma, a.c, paths[P_MA]));
	CHECK_OK(zkl_mutex_new(&mb, a.c, paths[P_MB]));
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(ma)));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(mb)));
	CHECK_OK(zkl_leader_new(&ld, a.c, paths[P_LEADER], NULL));
	zkl_leader_options lo;
	zkl_leader_options_init(&lo);
	lo.on_gained = gained;
	CHECK_OK(zkl_leader_new(&latch, a.c, paths[P_LATCH], &lo));
	CHECK_OK(zkl_mutex_new(&freeheld, a.c, paths[P_FREEHELD]));
	CHECK_OK(zkl_mutex_new(&waiter, a.c, paths[P_WAIT]));
	CHECK_OK(zkl_mutex_new(&freewait, a.c, paths[P_FREEWAIT]));
	CHECK_OK(zkl_mutex_new(&theirs, other, paths[P_WAIT]));
	CHECK_OK(zkl_mutex_new(&theirs2, other, paths[P_FREEWAIT]));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(theirs), 10000));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(theirs2), 10000));

	zkl_lock *held[HELD_KINDS] = {
		zkl_mutex_lock(m), zkl_mutex_lock(zkl_rwlock_write(rw)),
		zkl_mutex_lock(zkl_rwlock_read(rw2)), zkl_semaphore_lock(sem),
		zkl_semaphore_mutex_lock(sm), zkl_multilock_lock(ml), zkl_leader_lock(ld),
	};
	const char *names[HELD_KINDS] = {"mutex", "write lock", "read lock", "semaphore lease",
	                                 "semaphore-mutex", "multi-lock", "leader"};
	struct said said[HELD_KINDS + 3] = {{0}};
	for (int k = 0; k < HELD_KINDS; k++) {
		CHECK_OK(zkl_lock_on_lost(held[k], lost, &said[k]));
		CHECK_OK(zkl_lock_acquire_async(held[k], 10000, acquired, &said[k]));
	}
	for (int k = 0; k < HELD_KINDS; k++) {
		app_run_count(&a, &said[k].calls, 1, 20000);
		CHECK_OK(said[k].rc);
	}
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(freeheld), 10000, acquired,
	                                &said[HELD_KINDS]));
	app_run_count(&a, &said[HELD_KINDS].calls, 1, 20000);
	CHECK_OK(said[HELD_KINDS].rc);
	CHECK_OK(zkl_leader_start(latch));
	app_run_count(&a, &gained_count, 1, 20000);
	/* Two acquires wait behind the other client's holds. */
	struct said *waiting = &said[HELD_KINDS + 1], *freed = &said[HELD_KINDS + 2];
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(waiter), -1, acquired, waiting));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(freewait), -1, acquired, freed));
	const char *both[] = {paths[P_WAIT], paths[P_FREEWAIT]};
	const int two[] = {2, 2};
	app_run_children(&a, both, two, 2, 20000);

	h_server("pause");
	app_measure(&a);
	app_run_for(&a, 200);
	for (int k = HELD_KINDS; k-- > 0;)
		QUICK(names[k], CHECK_OK(zkl_lock_release(held[k])));
	QUICK("free of a held mutex", zkl_mutex_free(freeheld));
	QUICK("leader close", CHECK_OK(zkl_leader_close(latch)));
	QUICK("leader free", zkl_leader_free(latch));
	QUICK("cancel of a waiting acquire", zkl_lock_cancel(zkl_mutex_lock(waiter)));
	QUICK("free of a waiting mutex", zkl_mutex_free(freewait));
	zkl_participant *parts = NULL;
	size_t nparts = 0;
	QUICK("participants", CHECK_RC(ZKL_EDEADLK, zkl_lock_participants(held[MUTEX], &parts,
	                                                                   &nparts)));
	char *data = NULL;
	size_t len = 0;
	QUICK("record get", CHECK_RC(ZKL_EDEADLK, zkl_record_get(a.c, paths[P_MUTEX], &data,
	                                                         &len, NULL)));
	QUICK("record set", CHECK_RC(ZKL_EDEADLK, zkl_record_set(a.c, paths[P_MUTEX], "x", 1)));
	QUICK("a blocking acquire", CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(held[MUTEX], 1000)));
	QUICK("an asynchronous acquire", CHECK_OK(zkl_lock_acquire_async(held[MUTEX], -1,
	                                                                 acquired, &said[MUTEX])));
	for (int k = 0; k < HELD_KINDS; k++)
		assert_false(zkl_lock_is_held(held[k]));
	/* The loop goes on while the server is away. */
	app_run_for(&a, 1000);
	app_check_ticks(&a, 1200);

	h_server("resume");
	/* The canceled acquire is told once its node is withdrawn; the freed one never is. */
	app_run_count(&a, &waiting->calls, 1, 20000);
	CHECK_RC(ZKL_ECANCELED, waiting->rc);
	/* What was released goes from the server; the acquire made during the pause gets the
	 * mutex; nothing was lost. */
	app_run_count(&a, &said[MUTEX].calls, 2, 20000);
	CHECK_OK(said[MUTEX].rc);
	CHECK_OK(zkl_lock_release(held[MUTEX]));
	const int want[NPATHS] = {[P_WAIT] = 1, [P_FREEWAIT] = 1};
	app_run_children(&a, paths, want, NPATHS, 20000);
	for (int k = 0; k < HELD_KINDS; k++)
		assert_int_equal(said[k].lost, 0);
	assert_int_equal(freed->calls, 0);

	zkl_multilock_free(ml);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_mutex_free(m);
	zkl_rwlock_free(rw);
	zkl_rwlock_free(rw2);
	zkl_semaphore_free(sem);
	zkl_semaphore_mutex_free(sm);
	zkl_leader_free(ld);
	zkl_mutex_free(waiter);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(theirs)));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(theirs2)));
	zkl_mutex_free(theirs);
	zkl_mutex_free(theirs2);
	zkl_client_close(other);
	app_close(&a);
	for (int i = 0; i < NPATHS; i++)
		free((char *)paths[i]);
}

/* The connection is known down (SUSPENDED): a release on the loop's thread returns at
 * once (it used to wait for the connection, up to the loss deadline), and its node goes
 * once the server is back. */
static void test_release_while_suspended(void **state)
{
	(void)state;
	skip_unless_driven();
	struct app a;
	app_open(&a, 6000, false);
	const char *path = h_path("paused-suspended");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a.c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	struct said s = {0};
	CHECK_OK(zkl_lock_on_lost(l, lost, &s));
	CHECK_OK(zkl_lock_acquire_async(l, 10000, acquired, &s));
	app_run_count(&a, &s.calls, 1, 20000);
	CHECK_OK(s.rc);

	h_server("pause");
	int64_t end = zkl_monotonic_ms() + 8000;
	while (!a.suspended) {
		assert_true(zkl_monotonic_ms() < end);
		app_turn(&a);
	}
	app_measure(&a);
	int rc = 0;
	QUICK("release while suspended", rc = zkl_lock_release(l));
	/* Lost only if the machine was too slow to release before the loss deadline: then the
	 * lost callback said so too, once. */
	if (rc != 0) {
		CHECK_RC(ZKL_ELOST, rc);
		assert_int_equal(s.lost, 1);
	}
	app_run_for(&a, 500);
	app_check_ticks(&a, 500);

	h_server("resume");
	/* The node goes: deleted, or with its session. */
	const int none[] = {0};
	app_run_children(&a, &path, none, 1, 30000);
	assert_true(s.lost <= 1);
	zkl_mutex_free(m);
	app_close(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_calls_on_the_loop, teardown_resume),
		cmocka_unit_test_teardown(test_release_while_suspended, teardown_resume),
	};
	return H_RUN(tests);
}
