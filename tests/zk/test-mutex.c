/* zkl_mutex on a real ZooKeeper server (run through tests/with-zk). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- mutual exclusion: 8 threads on 8 clients, 500 cycles in all ---- */

static void test_mutual_exclusion(void **state)
{
	(void)state;
	h_excl e = { .path = h_path("excl"), .cycles = 500 / 8 + 1 };
	h_threads(8, h_excl_thread, &e);
	assert_int_equal(e.errors, 0);
	assert_int_equal(e.max_inside, 1);
	assert_int_equal(e.total, 8 * e.cycles);
	assert_int_equal(h_children(e.path) <= 0, 1);
}

/* ---- first acquires on new paths, all at once ---- */

/* A handle's first acquire creates the folder ahead of its node and skips the list when
 * it made the folder and its node took number 0. Several new handles on one new path at
 * once race for that: exactly one may skip, and the others must queue behind it. */
#define FRESH_THREADS 6
#define FRESH_ROUNDS 30

struct fresh {
	h_excl e;
	pthread_barrier_t start;
	char paths[FRESH_ROUNDS][200];
};

static void *fresh_thread(void *arg)
{
	struct fresh *f = arg;
	zkl_client *c = h_client(0);
	for (int r = 0; r < FRESH_ROUNDS; r++) {
		zkl_mutex *m;
		if (zkl_mutex_new(&m, c, f->paths[r]) != 0) {
			__atomic_add_fetch(&f->e.errors, 1, __ATOMIC_SEQ_CST);
			pthread_barrier_wait(&f->start);
			continue;
		}
		pthread_barrier_wait(&f->start);
		zkl_lock *l = zkl_mutex_lock(m);
		if (zkl_lock_acquire(l, 30000) == 0) {
			h_excl_section(&f->e);
			if (zkl_lock_release(l) != 0)
				__atomic_add_fetch(&f->e.errors, 1, __ATOMIC_SEQ_CST);
		} else {
			__atomic_add_fetch(&f->e.errors, 1, __ATOMIC_SEQ_CST);
		}
		zkl_mutex_free(m);
	}
	zkl_client_close(c);
	return NULL;
}

static void test_fresh_paths(void **state)
{
	(void)state;
	static struct fresh f;
	memset(&f, 0, sizeof f);
	for (int r = 0; r < FRESH_ROUNDS; r++)
		snprintf(f.paths[r], sizeof f.paths[r], "%s",
		         h_sub(h_path("fresh"), r % 2 ? "a/b" : "a"));
	pthread_barrier_init(&f.start, NULL, FRESH_THREADS);
	h_threads(FRESH_THREADS, fresh_thread, &f);
	pthread_barrier_destroy(&f.start);
	assert_int_equal(f.e.errors, 0);
	assert_int_equal(f.e.max_inside, 1);
	assert_int_equal(f.e.total, FRESH_THREADS * FRESH_ROUNDS);
	for (int r = 0; r < FRESH_ROUNDS; r++)
		assert_true(h_children(f.paths[r]) <= 0);
}

/* ---- FIFO: waiters are served in the order they queued ---- */

struct fifo_waiter {
	zkl_client *c;
	const char *path;
	int id;
	int *order;
	int *next;
	pthread_mutex_t *mu;
};

static void *fifo_thread(void *arg)
{
	struct fifo_waiter *w = arg;
	zkl_mutex *m;
	zkl_mutex_new(&m, w->c, w->path);
	zkl_lock *l = zkl_mutex_lock(m);
	if (zkl_lock_acquire(l, 30000) == 0) {
		pthread_mutex_lock(w->mu);
		w->order[(*w->next)++] = w->id;
		pthread_mutex_unlock(w->mu);
		zkl_lock_release(l);
	}
	zkl_mutex_free(m);
	return NULL;
}

static void test_fifo(void **state)
{
	(void)state;
	const char *path = h_path("fifo");
	zkl_client *hc = h_client(0);
	zkl_mutex *holder;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	zkl_lock *hl = zkl_mutex_lock(holder);
	CHECK_OK(zkl_lock_acquire(hl, -1));
	enum { N = 5 };
	zkl_client *cs[N];
	struct fifo_waiter ws[N];
	pthread_t th[N];
	int order[N] = {0}, next = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	for (int i = 0; i < N; i++) {
		cs[i] = h_client(0);
		ws[i] = (struct fifo_waiter){cs[i], path, i + 1, order, &next, &mu};
		pthread_create(&th[i], NULL, fifo_thread, &ws[i]);
		h_wait_children(path, i + 2);
	}
	CHECK_OK(zkl_lock_release(hl));
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(next, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(order[i], i + 1);
	zkl_mutex_free(holder);
	for (int i = 0; i < N; i++)
		zkl_client_close(cs[i]);
	zkl_client_close(hc);
}

/* ---- reentrancy ---- */

struct other {
	zkl_lock *l;
	int rc_try;
	int rc_wait;
	h_latch *tried;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	o->rc_try = zkl_lock_acquire(o->l, 200);
	h_latch_set(o->tried);
	o->rc_wait = zkl_lock_acquire(o->l, 20000);
	if (o->rc_wait == 0)
		zkl_lock_release(o->l);
	return NULL;
}

static void test_reentrant(void **state)
{
	(void)state;
	const char *path = h_path("reentrant");
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, -1));
	int64_t token = zkl_lock_token(l);
	assert_true(token > 0);
	CHECK_OK(zkl_lock_acquire(l, 0));
	CHECK_OK(zkl_lock_acquire(l, 1000));
	assert_int_equal(zkl_lock_token(l), token);
	assert_int_equal(h_children(path), 1); /* re-entry made no node */

	struct other o = { .l = l, .tried = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, other_thread, &o);
	assert_true(h_latch_wait(o.tried, 20000));
	CHECK_RC(ZKL_ETIMEDOUT, o.rc_try);
	assert_false(zkl_lock_is_held(l) == false);
	CHECK_OK(zkl_lock_release(l));
	CHECK_OK(zkl_lock_release(l));
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
	assert_false(zkl_lock_is_held(l));
	pthread_join(th, NULL);
	CHECK_OK(o.rc_wait);
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(l));
	h_latch_free(o.tried);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- timeout and try-once leave nothing behind ---- */

static void test_timeout_and_try_once(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "timeout");
	CHECK_OK(zkl_lock_acquire(t.la, -1));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 300));
	h_wait_children(t.path, 1); /* a create out at the deadline is deleted once answered */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 0));
	assert_int_equal(h_children(t.path), 1);
	assert_false(zkl_lock_is_held(t.lb));
	assert_int_equal(zkl_lock_token(t.lb), ZKL_ENOTHELD);
	CHECK_OK(zkl_lock_release(t.la));
	CHECK_OK(zkl_lock_acquire(t.lb, 0));
	assert_true(zkl_lock_is_held(t.lb));
	CHECK_OK(zkl_lock_release(t.lb));
	/* Trying once on a path whose folder does not exist yet creates it and succeeds. */
	zkl_mutex *fresh;
	CHECK_OK(zkl_mutex_new(&fresh, t.a, h_sub(h_path("tryonce"), "fresh/deeper")));
	zkl_lock *fl = zkl_mutex_lock(fresh);
	CHECK_OK(zkl_lock_acquire(fl, 0));
	CHECK_OK(zkl_lock_release(fl));
	zkl_mutex_free(fresh);
	h_pair_close(&t);
}

/* ---- release by a thread that does not hold it ---- */

static void *release_other(void *arg)
{
	return (void *)(intptr_t)zkl_lock_release(arg);
}

static void test_release_not_owner(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	const char *path = h_path("notowner");
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(l));
	CHECK_OK(zkl_lock_acquire(l, -1));
	CHECK_RC(ZKL_ENOTOWNER, h_in_thread(release_other, l));
	assert_true(zkl_lock_is_held(l));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- stray children neither crash, block nor reorder ---- */

static void test_stray_children(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "stray");
	/* Holding the lock makes the folder (a container, which the server removes once
	 * empty) and keeps it; put junk in it meanwhile. */
	CHECK_OK(zkl_lock_acquire(t.la, -1));
	const char *junk[] = {"stray", "lock-", "lock-12", "x-lock-00000000ab", "readme.txt",
	                      "lock-99999999999"};
	for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
		h_create(h_sub(t.path, junk[i]), "junk");
	CHECK_OK(zkl_lock_release(t.la));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 200));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.la, &ps, &n));
	assert_int_equal(n, 1);
	assert_true(ps[0].holder);
	assert_int_equal(ps[0].czxid, zkl_lock_token(t.la));
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lock_release(t.la));
	CHECK_OK(zkl_lock_acquire(t.lb, 5000));
	CHECK_OK(zkl_lock_release(t.lb));
	assert_int_equal(h_children(t.path), 6);
	h_pair_close(&t);
}

/* ---- the container parent goes once empty ---- */

static void test_container_removed(void **state)
{
	(void)state;
	const char *path = h_sub(h_path("container"), "deep/lock");
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, -1));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_lock_release(l));
	/* The server reaps empty containers every 100 ms in the test configuration. */
	assert_true(h_wait_deleted(path, 20000));
	assert_false(h_exists(path));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- participants and data ---- */

static void test_participants(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "participants");
	CHECK_OK(zkl_lock_set_data(t.lb, "worker-b", 8));
	CHECK_OK(zkl_lock_acquire(t.la, -1));
	zkl_participant *ps;
	size_t n;
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 0));
	CHECK_OK(zkl_lock_participants(t.lb, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, h_default_data());
	assert_non_null(strstr(ps[0].path, "/_c_"));
	assert_non_null(strstr(ps[0].path, "-lock-"));
	zkl_participants_free(ps, n);

	/* A queued waiter shows up second, with its data. */
	struct other o = { .l = t.lb, .tried = h_latch_new() };
	(void)o;
	CHECK_OK(zkl_lock_release(t.la));
	CHECK_OK(zkl_lock_acquire(t.lb, 5000)); /* the folder may have been reaped */
	CHECK_OK(zkl_lock_participants(t.la, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, "worker-b");
	assert_int_equal(ps[0].data_len, 8);
	assert_true(ps[0].holder);
	zkl_participants_free(ps, n);
	h_latch_free(o.tried);
	/* Tokens grow from holder to holder. */
	int64_t t1 = zkl_lock_token(t.lb);
	CHECK_OK(zkl_lock_release(t.lb));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	assert_true(zkl_lock_token(t.la) > t1);
	CHECK_OK(zkl_lock_release(t.la));
	h_pair_close(&t);
}

/* ---- an expired holder is told, and the waiter gets the lock ---- */

static void test_session_expiry(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "expiry");
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(t.la, h_on_lost, lost));
	CHECK_OK(zkl_lock_acquire(t.la, -1));
	int64_t old_token = zkl_lock_token(t.la);
	h_acq w;
	h_acq_start(&w, t.lb, true);
	h_wait_children(t.path, 2);

	h_expire(t.a);
	assert_true(h_latch_wait(lost, 20000));
	assert_true(h_latch_wait(w.done, 20000));
	CHECK_OK(w.rc);
	assert_true(w.held);
	assert_true(zkl_lock_token(t.lb) > old_token);
	assert_false(zkl_lock_is_held(t.la));
	assert_int_equal(zkl_lock_token(t.la), ZKL_ENOTHELD);
	CHECK_RC(ZKL_ELOST, zkl_lock_release(t.la));
	assert_int_equal(h_latch_count(lost), 1);
	/* The old client works again on its new session. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.la, 0));
	h_acq_join(&w);
	CHECK_OK(w.release_rc);
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	CHECK_OK(zkl_lock_release(t.la));
	h_latch_free(lost);
	h_pair_close(&t);
}

/* ---- cancel withdraws a waiter ---- */

static void test_cancel(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "cancel");
	CHECK_OK(zkl_lock_acquire(t.la, -1));
	h_acq w;
	h_acq_start(&w, t.lb, false);
	h_wait_children(t.path, 2);
	zkl_lock_cancel(t.lb);
	assert_true(h_latch_wait(w.done, 20000));
	h_acq_join(&w);
	CHECK_RC(ZKL_ECANCELED, w.rc);
	assert_int_equal(h_children(t.path), 1);
	CHECK_OK(zkl_lock_release(t.la));
	h_pair_close(&t);
}

/* ---- bad arguments ---- */

static void test_invalid(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_mutex *m = NULL;
	const char *bad[] = {"", "locks/x", "/locks/", "/locks//x", "/locks/./x", "/locks/../x", "/"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		CHECK_RC(ZKL_EINVAL, zkl_mutex_new(&m, c, bad[i]));
		assert_true(strlen(zkl_last_error()) > 0);
		assert_null(m);
	}
	CHECK_RC(ZKL_EINVAL, zkl_mutex_new(&m, c, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_mutex_new(&m, NULL, "/x"));
	CHECK_RC(ZKL_EINVAL, zkl_mutex_new(NULL, c, "/x"));
	char longp[2000];
	memset(longp, 'a', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = 0;
	CHECK_RC(ZKL_EINVAL, zkl_mutex_new(&m, c, longp));
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_release(NULL));
	CHECK_OK(zkl_mutex_new(&m, c, h_path("invalid")));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(l, -2));
	assert_non_null(strstr(zkl_last_error(), "-2"));
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_data(l, NULL, 5));
	zkl_mutex_free(m);
	zkl_mutex_free(NULL);

	zkl_client_options o;
	zkl_client_options_init(&o);
	zkl_client *x = NULL;
	o.servers = "";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&x, &o));
	o.servers = h_servers();
	o.session_timeout_ms = 0;
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&x, &o));
	o.session_timeout_ms = 4000;
	o.servers = "127.0.0.1:1";
	o.connect_timeout_ms = 300;
	CHECK_RC(ZKL_ECONNECT, zkl_client_open(&x, &o));
	assert_non_null(strstr(zkl_last_error(), "127.0.0.1:1"));
	assert_null(x);
	zkl_client_close(c);
}

/* ---- state listener: connected, suspended... lost, reconnected on expiry ---- */

struct states {
	pthread_mutex_t mu;
	zkl_state seen[32];
	int n;
	int64_t old_session;
	h_latch *reconnected;
};

static void on_state(zkl_client *c, zkl_state s, void *data)
{
	struct states *st = data;
	pthread_mutex_lock(&st->mu);
	if (st->n < 32)
		st->seen[st->n++] = s;
	pthread_mutex_unlock(&st->mu);
	/* Expiring a session from outside can first bounce the connection (suspended,
	 * reconnected to the same session, even declared lost if that takes long): wait for
	 * the reconnect to a new session. Listeners may call into the client. */
	int64_t id = zkl_client_session_id(c); /* 0 if the connection bounced again already */
	if (s == ZKL_STATE_RECONNECTED && id != 0 && id != st->old_session)
		h_latch_set(st->reconnected);
}

static void test_state_listener(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	struct states st = { .mu = PTHREAD_MUTEX_INITIALIZER, .reconnected = h_latch_new() };
	assert_int_equal(zkl_client_state(c), ZKL_STATE_CONNECTED);
	st.old_session = zkl_client_session_id(c);
	assert_true(st.old_session != 0);
	assert_true(zkl_client_session_timeout(c) > 0);
	CHECK_OK(zkl_client_add_listener(c, on_state, &st));
	CHECK_RC(ZKL_EINVAL, zkl_client_add_listener(c, on_state, &st));
	h_expire(c);
	assert_true(h_latch_wait(st.reconnected, 20000));
	/* The loss was reported before the reconnect to the new session. */
	pthread_mutex_lock(&st.mu);
	int last_lost = -1, last_reconnected = -1;
	for (int i = 0; i < st.n; i++) {
		if (st.seen[i] == ZKL_STATE_LOST)
			last_lost = i;
		if (st.seen[i] == ZKL_STATE_RECONNECTED)
			last_reconnected = i;
		assert_true(st.seen[i] != ZKL_STATE_CONNECTED && st.seen[i] != ZKL_STATE_CLOSED);
	}
	pthread_mutex_unlock(&st.mu);
	assert_true(last_lost >= 0);
	assert_true(last_reconnected > last_lost);
	assert_int_equal(zkl_client_state(c), ZKL_STATE_RECONNECTED);
	CHECK_OK(zkl_client_remove_listener(c, on_state, &st));
	CHECK_RC(ZKL_EINVAL, zkl_client_remove_listener(c, on_state, &st));
	h_latch_free(st.reconnected);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_fresh_paths),
		cmocka_unit_test(test_reentrant),
		cmocka_unit_test(test_timeout_and_try_once),
		cmocka_unit_test(test_release_not_owner),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_stray_children),
		cmocka_unit_test(test_container_removed),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_mutual_exclusion),
		cmocka_unit_test(test_session_expiry),
		cmocka_unit_test(test_state_listener),
	};
	return H_RUN(tests);
}
