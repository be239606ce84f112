/* Faults of the ensemble itself (run through tests/with-ensemble): the leader killed under
 * contention, a rolling restart, the whole ensemble down for a while, and fencing tokens
 * across all of these. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

/* ---- contention: clients looping over acquire / critical section / release ---- */

enum { MAX_TOKENS = 100000 };

struct contend {
	const char *path;
	int session_ms;
	int min_cycles;     /* per thread, before it looks at stop */
	int stop;           /* atomic: end once min_cycles are done */
	int inside;         /* atomic: holders inside right now */
	int max_inside;
	int total;          /* a read-modify-write that two holders at once would corrupt */
	int errors;         /* atomic */
	h_counter cycles;   /* cycles done, all threads */
	h_counter finished; /* threads done with their cycles */
	h_latch *may_close; /* set once the test has looked at the tree */
	pthread_mutex_t mu;
	int64_t *tokens;    /* mu: in order of holding */
	int ntokens;
	int64_t first_token, last_token; /* set by contend_finish */
	char first_error[512];
};

static void contend_error(struct contend *k, const char *what, int rc)
{
	pthread_mutex_lock(&k->mu);
	if (!k->first_error[0])
		snprintf(k->first_error, sizeof k->first_error, "%s: %s: %s", what,
		         zkl_errname(rc), zkl_last_error());
	pthread_mutex_unlock(&k->mu);
	__atomic_add_fetch(&k->errors, 1, __ATOMIC_SEQ_CST);
}

static void *contend_thread(void *arg)
{
	struct contend *k = arg;
	/* Not f_client(): a failure here must not fail the test from another thread. */
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = k->session_ms;
	o.connect_timeout_ms = 20000;
	zkl_client *c = NULL;
	zkl_mutex *m = NULL;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0 || (rc = zkl_mutex_new(&m, c, k->path)) != 0) {
		contend_error(k, c ? "new" : "open", rc);
		h_counter_add(&k->finished, 1);
		h_latch_wait(k->may_close, 120000);
		zkl_client_close(c);
		return NULL;
	}
	zkl_lock *l = zkl_mutex_lock(m);
	for (int i = 0; i < k->min_cycles || !__atomic_load_n(&k->stop, __ATOMIC_SEQ_CST); i++) {
		if ((rc = zkl_lock_acquire(l, 30000)) != 0) {
			contend_error(k, "acquire", rc);
			continue;
		}
		int now = __atomic_add_fetch(&k->inside, 1, __ATOMIC_SEQ_CST);
		if (now > __atomic_load_n(&k->max_inside, __ATOMIC_SEQ_CST))
			__atomic_store_n(&k->max_inside, now, __ATOMIC_SEQ_CST);
		int64_t token = zkl_lock_token(l);
		pthread_mutex_lock(&k->mu);
		if (k->ntokens < MAX_TOKENS)
			k->tokens[k->ntokens++] = token;
		pthread_mutex_unlock(&k->mu);
		int t = k->total;
		sched_yield();
		k->total = t + 1;
		__atomic_sub_fetch(&k->inside, 1, __ATOMIC_SEQ_CST);
		if ((rc = zkl_lock_release(l)) != 0)
			contend_error(k, "release", rc);
		h_counter_add(&k->cycles, 1);
	}
	h_counter_add(&k->finished, 1);
	h_latch_wait(k->may_close, 120000);
	zkl_mutex_free(m);
	zkl_client_close(c);
	return NULL;
}

static void contend_start(struct contend *k, pthread_t *th, int n)
{
	h_counter_init(&k->cycles);
	h_counter_init(&k->finished);
	pthread_mutex_init(&k->mu, NULL);
	k->may_close = h_latch_new();
	k->tokens = calloc(MAX_TOKENS, sizeof *k->tokens);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, contend_thread, k);
}

/* Waits until the cycle count reaches want, failing the test after ms. */
static void contend_wait_cycles(struct contend *k, int want, int ms, const char *when)
{
	if (!h_counter_wait(&k->cycles, want, ms))
		fail_msg("contention stalled %s: %d cycles, wanted %d within %d ms (%d errors, "
		         "first: %s)", when, h_counter_get(&k->cycles), want, ms,
		         __atomic_load_n(&k->errors, __ATOMIC_SEQ_CST), k->first_error);
}

/* Stops the threads, checks exclusion, tokens and the tree, and cleans up. */
static void contend_finish(struct contend *k, pthread_t *th, int n)
{
	__atomic_store_n(&k->stop, 1, __ATOMIC_SEQ_CST);
	if (!h_counter_wait(&k->finished, n, 120000))
		fail_msg("only %d of %d clients finished their cycles", h_counter_get(&k->finished), n);
	/* Every client still has its session: any node left now is leaked, not merely
	 * waiting for its session to end. Deletes of releases may still be on their way. */
	int left_ok = f_wait_children(NULL, k->path, 0, 15000);
	int left = f_children(NULL, k->path, NULL);
	h_latch_set(k->may_close);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (k->errors)
		fail_msg("%d calls failed; first: %s", k->errors, k->first_error);
	assert_int_equal(k->max_inside, 1);
	assert_int_equal(k->total, h_counter_get(&k->cycles));
	assert_int_equal(k->ntokens, k->total);
	for (int i = 1; i < k->ntokens; i++)
		if (k->tokens[i] <= k->tokens[i - 1])
			fail_msg("token %d (0x%llx) does not grow from the one before (0x%llx)", i,
			         (unsigned long long)k->tokens[i], (unsigned long long)k->tokens[i - 1]);
	if (!left_ok)
		fail_msg("%d nodes left under %s after every client finished", left, k->path);
	k->first_token = k->tokens[0];
	k->last_token = k->tokens[k->ntokens - 1];
	h_counter_destroy(&k->cycles);
	h_counter_destroy(&k->finished);
	pthread_mutex_destroy(&k->mu);
	h_latch_free(k->may_close);
	free(k->tokens);
}

/* ---- the leader is killed while 8 clients contend ---- */

static void test_leader_killed(void **state)
{
	(void)state;
	enum { N = 8 };
	struct contend k = { .path = h_path("leader-killed"), .session_ms = 8000, .min_cycles = 5 };
	pthread_t th[N];
	int leader = f_leader();
	contend_start(&k, th, N);
	contend_wait_cycles(&k, 40, 60000, "before the kill");
	int64_t t0 = f_now();
	f_ctl("kill", leader);
	int at_kill = h_counter_get(&k.cycles);
	/* Contention goes on with a new leader. */
	contend_wait_cycles(&k, at_kill + 160, 60000, "after the leader was killed");
	int new_leader = f_leader();
	assert_int_not_equal(new_leader, leader);
	print_message("leader %d killed at %d cycles; 160 more in %lld ms; new leader %d\n",
	              leader, at_kill, (long long)(f_now() - t0), new_leader);
	contend_finish(&k, th, N);
	/* Holders after the kill carry the new leader's epoch. */
	assert_true(F_EPOCH(k.last_token) > F_EPOCH(k.first_token));
}

/* ---- a rolling restart of all three nodes while 4 clients contend ---- */

static void test_rolling_restart(void **state)
{
	(void)state;
	enum { N = 4 };
	struct contend k = { .path = h_path("rolling"), .session_ms = 8000, .min_cycles = 5 };
	pthread_t th[N];
	contend_start(&k, th, N);
	contend_wait_cycles(&k, 20, 60000, "before the restarts");
	for (int n = 1; n <= 3; n++) {
		f_ctl("stop-one", n);
		contend_wait_cycles(&k, h_counter_get(&k.cycles) + 10, 60000, "with a node down");
		f_ctl("start-one", n);
		contend_wait_cycles(&k, h_counter_get(&k.cycles) + 10, 60000, "after a restart");
	}
	contend_finish(&k, th, N);
	/* The leader was restarted too: tokens carry a later epoch now. */
	assert_true(F_EPOCH(k.last_token) > F_EPOCH(k.first_token));
}

/* ---- fencing tokens only grow, across leader kills and restarts ---- */

struct tokens {
	zkl_mutex *m[2];
	int64_t last;
	int count;
};

/* One hold by client i: its token must exceed every earlier one; with new_epoch, the
 * zxid epoch too (a new leader has been elected since the last hold). */
static void take(struct tokens *t, int i, bool new_epoch, const char *when)
{
	zkl_lock *l = zkl_mutex_lock(t->m[i]);
	CHECK_OK(zkl_lock_acquire(l, 30000));
	int64_t tok = zkl_lock_token(l);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	assert_int_equal(n, 1);
	assert_true(ps[0].holder);
	assert_int_equal(ps[0].czxid, tok);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lock_release(l));
	if (tok <= t->last)
		fail_msg("%s: token 0x%llx does not grow from 0x%llx", when,
		         (unsigned long long)tok, (unsigned long long)t->last);
	if (new_epoch && F_EPOCH(tok) <= F_EPOCH(t->last))
		fail_msg("%s: token 0x%llx has the epoch of 0x%llx after a leader change", when,
		         (unsigned long long)tok, (unsigned long long)t->last);
	t->last = tok;
	t->count++;
}

static void test_tokens_grow(void **state)
{
	(void)state;
	const char *path = h_path("tokens");
	zkl_client *a = f_client(NULL, 8000, true), *b = f_client(NULL, 8000, true);
	struct tokens t = {0};
	CHECK_OK(zkl_mutex_new(&t.m[0], a, path));
	CHECK_OK(zkl_mutex_new(&t.m[1], b, path));
	take(&t, 0, false, "first");
	take(&t, 1, false, "second");

	int l1 = f_leader();
	f_ctl("kill", l1);
	take(&t, 0, true, "after the leader was killed");
	take(&t, 1, false, "after the leader was killed, again");
	f_ctl("start-one", l1);
	take(&t, 0, false, "after the old leader came back");

	int f = f_follower(0);
	f_ctl("stop-one", f);
	take(&t, 1, false, "with a follower stopped");
	f_ctl("start-one", f);

	int l2 = f_leader();
	f_ctl("stop-one", l2);
	take(&t, 0, true, "after the leader was stopped");
	f_ctl("start-one", l2);

	/* The whole ensemble restarted on its data. */
	f_ctl("stop", 0);
	f_ctl("start", 0);
	take(&t, 1, true, "after the whole ensemble restarted");
	take(&t, 0, false, "after the whole ensemble restarted, again");
	assert_int_equal(t.count, 9);
	assert_true(f_wait_children(NULL, path, 0, 15000));
	zkl_mutex_free(t.m[0]);
	zkl_mutex_free(t.m[1]);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- the whole ensemble down for a while, then back ---- */

static void on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	if (reason == ZKL_ELOST)
		h_latch_set(data);
}

static void test_ensemble_down(void **state)
{
	(void)state;
	enum { T = 4000, SHORT = 4000, LONG = 90000 };
	const char *path = h_path("ensemble-down");
	zkl_client *ch = f_client(NULL, T, true);
	zkl_client *c1 = f_client(NULL, T, true), *c2 = f_client(NULL, T, true);
	zkl_mutex *holder, *m1, *m2;
	CHECK_OK(zkl_mutex_new(&holder, ch, path));
	CHECK_OK(zkl_mutex_new(&m1, c1, path));
	CHECK_OK(zkl_mutex_new(&m2, c2, path));
	zkl_lock *hl = zkl_mutex_lock(holder);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(hl, on_lost, lost));
	CHECK_OK(zkl_lock_acquire(hl, 0));
	int64_t holder_token = zkl_lock_token(hl);

	f_waiter w1 = {0}, w2 = {0};
	f_waiter_start(&w1, m1, SHORT);
	assert_true(f_wait_children(NULL, path, 2, 10000));
	f_waiter_start(&w2, m2, LONG);
	assert_true(f_wait_children(NULL, path, 3, 10000));
	char **names;
	assert_int_equal(f_children(NULL, path, &names), 3);
	char w1_node[512];
	snprintf(w1_node, sizeof w1_node, "%s/%s", path, names[1]);
	f_names_free(names, 3);

	/* Down: every node at once, the way a power cut would. */
	int64_t down = f_now();
	for (int n = 1; n <= 3; n++)
		f_ctl("kill", n);

	/* The short waiter times out at its deadline, during the outage. */
	assert_true(h_latch_wait(w1.done, SHORT + 10000));
	f_waiter_join(&w1);
	CHECK_RC(ZKL_ETIMEDOUT, w1.rc);
	assert_true(w1.returned - w1.started >= SHORT - 50);
	assert_false(w1.held);
	/* Nothing heard for a session timeout: the holder is told its lock is lost. */
	assert_true(h_latch_wait(lost, T + 5000));
	int64_t lost_after = f_now() - down;
	assert_false(zkl_lock_is_held(hl));
	assert_false(h_latch_count(w2.done));

	f_ctl("start", 0);
	int64_t up = f_now();
	print_message("down for %lld ms; holder told lost %lld ms after the kill\n",
	              (long long)(up - down), (long long)lost_after);
	/* The timed-out waiter's node goes once the ensemble is back. */
	int64_t until = f_now() + 20000;
	while (f_exists(NULL, w1_node) && f_now() < until)
		usleep(20000);
	assert_false(f_exists(NULL, w1_node));

	/* The old holder: its release says the lock was lost, and ends what is left of it. */
	CHECK_RC(ZKL_ELOST, zkl_lock_release(hl));
	assert_int_equal(h_latch_count(lost), 1);
	/* The patient waiter gets the lock. */
	assert_true(h_latch_wait(w2.done, 30000));
	CHECK_OK(w2.rc);
	assert_true(w2.held);
	assert_true(w2.token > holder_token);
	assert_int_equal(f_children(NULL, path, NULL), 1);
	f_waiter_join(&w2);
	CHECK_OK(w2.release_rc);
	assert_true(f_wait_children(NULL, path, 0, 15000));
	/* The old holder's client works again. */
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	CHECK_OK(zkl_lock_release(hl));
	h_latch_free(lost);
	zkl_mutex_free(holder);
	zkl_mutex_free(m1);
	zkl_mutex_free(m2);
	zkl_client_close(ch);
	zkl_client_close(c1);
	zkl_client_close(c2);
}

int main(int argc, char **argv)
{
	f_child_main(argc, argv);
	const struct CMUnitTest tests[] = {
		FAULT_TEST(test_leader_killed),
		FAULT_TEST(test_rolling_restart),
		FAULT_TEST(test_tokens_grow),
		FAULT_TEST(test_ensemble_down),
	};
	return H_RUN(tests);
}
