/* zkl_mutex on a real ZooKeeper server (run through tests/with-zk). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- mutual exclusion: 8 threads on 8 clients, 500 cycles in all ---- */

struct excl {
	const char *path;
	int cycles;
	int inside;        /* atomically changed inside the critical section */
	int max_inside;
	int total;
	int errors;
};

static void *excl_thread(void *arg)
{
	struct excl *e = arg;
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	if (zkl_mutex_new(&m, c, e->path) != 0)
		__atomic_add_fetch(&e->errors, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < e->cycles; i++) {
		if (zkl_mutex_acquire(m, 30000) != 0) {
			__atomic_add_fetch(&e->errors, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		int now = __atomic_add_fetch(&e->inside, 1, __ATOMIC_SEQ_CST);
		if (now > e->max_inside)
			e->max_inside = now;
		/* A read-modify-write that two holders at once would corrupt. */
		int t = e->total;
		sched_yield();
		e->total = t + 1;
		__atomic_sub_fetch(&e->inside, 1, __ATOMIC_SEQ_CST);
		if (zkl_mutex_release(m) != 0)
			__atomic_add_fetch(&e->errors, 1, __ATOMIC_SEQ_CST);
	}
	zkl_mutex_free(m);
	zkl_client_close(c);
	return NULL;
}

static void test_mutual_exclusion(void **state)
{
	(void)state;
	struct excl e = { .path = h_path("excl"), .cycles = 500 / 8 + 1 };
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, excl_thread, &e);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(e.errors, 0);
	assert_int_equal(e.max_inside, 1);
	assert_int_equal(e.total, 8 * e.cycles);
	assert_int_equal(h_children(e.path) <= 0, 1);
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
	if (zkl_mutex_acquire(m, 30000) == 0) {
		pthread_mutex_lock(w->mu);
		w->order[(*w->next)++] = w->id;
		pthread_mutex_unlock(w->mu);
		zkl_mutex_release(m);
	}
	zkl_mutex_free(m);
	return NULL;
}

static void wait_queue_len(const char *path, int n)
{
	/* The queue's length is the event: poll the server until it is reached. */
	for (int i = 0; i < 2000; i++) {
		if (h_children(path) == n)
			return;
		usleep(5000);
	}
	fail_msg("queue at %s never reached %d", path, n);
}

static void test_fifo(void **state)
{
	(void)state;
	const char *path = h_path("fifo");
	zkl_client *hc = h_client(0);
	zkl_mutex *holder;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	CHECK_OK(zkl_mutex_acquire(holder, -1));
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
		wait_queue_len(path, i + 2);
	}
	CHECK_OK(zkl_mutex_release(holder));
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
	zkl_mutex *m;
	int rc_try;
	int rc_wait;
	h_latch *tried;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	o->rc_try = zkl_mutex_acquire(o->m, 200);
	h_latch_set(o->tried);
	o->rc_wait = zkl_mutex_acquire(o->m, 20000);
	if (o->rc_wait == 0)
		zkl_mutex_release(o->m);
	return NULL;
}

static void test_reentrant(void **state)
{
	(void)state;
	const char *path = h_path("reentrant");
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_mutex_acquire(m, -1));
	int64_t token = zkl_mutex_token(m);
	assert_true(token > 0);
	CHECK_OK(zkl_mutex_acquire(m, 0));
	CHECK_OK(zkl_mutex_acquire(m, 1000));
	assert_int_equal(zkl_mutex_token(m), token);
	assert_int_equal(h_children(path), 1); /* re-entry made no node */

	struct other o = { .m = m, .tried = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, other_thread, &o);
	assert_true(h_latch_wait(o.tried, 20000));
	CHECK_RC(ZKL_ETIMEDOUT, o.rc_try);
	assert_false(zkl_mutex_is_held(m) == false);
	CHECK_OK(zkl_mutex_release(m));
	CHECK_OK(zkl_mutex_release(m));
	assert_true(zkl_mutex_is_held(m));
	CHECK_OK(zkl_mutex_release(m));
	assert_false(zkl_mutex_is_held(m));
	pthread_join(th, NULL);
	CHECK_OK(o.rc_wait);
	CHECK_RC(ZKL_ENOTOWNER, zkl_mutex_release(m));
	h_latch_free(o.tried);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- timeout and try-once leave nothing behind ---- */

static void test_timeout_and_try_once(void **state)
{
	(void)state;
	const char *path = h_path("timeout");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_acquire(ma, -1));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 300));
	assert_int_equal(h_children(path), 1);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 0));
	assert_int_equal(h_children(path), 1);
	assert_false(zkl_mutex_is_held(mb));
	assert_int_equal(zkl_mutex_token(mb), ZKL_ENOTHELD);
	CHECK_OK(zkl_mutex_release(ma));
	CHECK_OK(zkl_mutex_acquire(mb, 0));
	assert_true(zkl_mutex_is_held(mb));
	CHECK_OK(zkl_mutex_release(mb));
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	/* Trying once on a path whose folder does not exist yet creates it and succeeds. */
	char fresh[300];
	snprintf(fresh, sizeof fresh, "%s/fresh/deeper", h_path("tryonce"));
	CHECK_OK(zkl_mutex_new(&ma, a, fresh));
	CHECK_OK(zkl_mutex_acquire(ma, 0));
	CHECK_OK(zkl_mutex_release(ma));
	zkl_mutex_free(ma);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- release by a thread that does not hold it ---- */

static void *release_other(void *arg)
{
	return (void *)(intptr_t)zkl_mutex_release(arg);
}

static void test_release_not_owner(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	const char *path = h_path("notowner");
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_RC(ZKL_ENOTOWNER, zkl_mutex_release(m));
	CHECK_OK(zkl_mutex_acquire(m, -1));
	pthread_t th;
	void *ret;
	pthread_create(&th, NULL, release_other, m);
	pthread_join(th, &ret);
	CHECK_RC(ZKL_ENOTOWNER, (int)(intptr_t)ret);
	assert_true(zkl_mutex_is_held(m));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_mutex_release(m));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- stray children neither crash, block nor reorder ---- */

static void test_stray_children(void **state)
{
	(void)state;
	const char *path = h_path("stray");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_acquire(ma, -1));
	CHECK_OK(zkl_mutex_release(ma));
	/* The folder exists now (a container); put junk in it. */
	char p[512];
	const char *junk[] = {"stray", "lock-", "lock-12", "x-lock-00000000ab", "readme.txt",
	                      "lock-99999999999"};
	for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
		snprintf(p, sizeof p, "%s/%s", path, junk[i]);
		h_create(p, "junk");
	}
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 200));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_mutex_participants(ma, &ps, &n));
	assert_int_equal(n, 1);
	assert_true(ps[0].holder);
	assert_int_equal(ps[0].czxid, zkl_mutex_token(ma));
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_mutex_release(ma));
	CHECK_OK(zkl_mutex_acquire(mb, 5000));
	CHECK_OK(zkl_mutex_release(mb));
	assert_int_equal(h_children(path), 6);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- the container parent goes once empty ---- */

static void test_container_removed(void **state)
{
	(void)state;
	char path[256];
	snprintf(path, sizeof path, "%s/deep/lock", h_path("container"));
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_mutex_acquire(m, -1));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_mutex_release(m));
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
	const char *path = h_path("participants");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_set_data(mb, "worker-b", 8));
	CHECK_OK(zkl_mutex_acquire(ma, -1));
	zkl_participant *ps;
	size_t n;
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 0));
	CHECK_OK(zkl_mutex_participants(mb, &ps, &n));
	assert_int_equal(n, 1);
	char host[256], want[300];
	gethostname(host, sizeof host);
	snprintf(want, sizeof want, "%s:%ld", host, (long)getpid());
	assert_string_equal(ps[0].data, want);
	assert_non_null(strstr(ps[0].path, "/_c_"));
	assert_non_null(strstr(ps[0].path, "-lock-"));
	zkl_participants_free(ps, n);

	/* A queued waiter shows up second, with its data. */
	struct other o = { .m = mb, .tried = h_latch_new() };
	(void)o;
	CHECK_OK(zkl_mutex_release(ma));
	CHECK_OK(zkl_mutex_acquire(mb, 1000));
	CHECK_OK(zkl_mutex_participants(ma, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, "worker-b");
	assert_int_equal(ps[0].data_len, 8);
	assert_true(ps[0].holder);
	zkl_participants_free(ps, n);
	h_latch_free(o.tried);
	/* Tokens grow from holder to holder. */
	int64_t t1 = zkl_mutex_token(mb);
	CHECK_OK(zkl_mutex_release(mb));
	CHECK_OK(zkl_mutex_acquire(ma, 1000));
	assert_true(zkl_mutex_token(ma) > t1);
	CHECK_OK(zkl_mutex_release(ma));
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- an expired holder is told, and the waiter gets the lock ---- */

static void on_lost(zkl_mutex *m, int reason, void *data)
{
	(void)m;
	if (reason == ZKL_ELOST)
		h_latch_set(data);
}

struct acq {
	zkl_mutex *m;
	int rc;
	bool held;
	h_latch *done;
	h_latch *release;  /* if set: hold until it is set, then release */
	int release_rc;
};

static void *acquire_thread(void *arg)
{
	struct acq *a = arg;
	a->rc = zkl_mutex_acquire(a->m, 30000);
	a->held = zkl_mutex_is_held(a->m);
	h_latch_set(a->done);
	if (a->rc == 0 && a->release) {
		h_latch_wait(a->release, 60000);
		a->release_rc = zkl_mutex_release(a->m);
	}
	return NULL;
}

static void test_session_expiry(void **state)
{
	(void)state;
	const char *path = h_path("expiry");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_mutex_on_lost(ma, on_lost, lost));
	CHECK_OK(zkl_mutex_acquire(ma, -1));
	int64_t old_token = zkl_mutex_token(ma);
	struct acq w = { .m = mb, .done = h_latch_new(), .release = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, acquire_thread, &w);
	wait_queue_len(path, 2);

	h_expire(a);
	assert_true(h_latch_wait(lost, 20000));
	assert_true(h_latch_wait(w.done, 20000));
	CHECK_OK(w.rc);
	assert_true(w.held);
	assert_true(zkl_mutex_token(mb) > old_token);
	assert_false(zkl_mutex_is_held(ma));
	assert_int_equal(zkl_mutex_token(ma), ZKL_ENOTHELD);
	CHECK_RC(ZKL_ELOST, zkl_mutex_release(ma));
	assert_int_equal(h_latch_count(lost), 1);
	/* The old client works again on its new session. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(ma, 0));
	h_latch_set(w.release);
	pthread_join(th, NULL);
	CHECK_OK(w.release_rc);
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	CHECK_OK(zkl_mutex_release(ma));
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	h_latch_free(lost);
	h_latch_free(w.done);
	h_latch_free(w.release);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- cancel withdraws a waiter ---- */

static void test_cancel(void **state)
{
	(void)state;
	const char *path = h_path("cancel");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_acquire(ma, -1));
	struct acq w = { .m = mb, .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, acquire_thread, &w);
	wait_queue_len(path, 2);
	zkl_mutex_cancel(mb);
	assert_true(h_latch_wait(w.done, 20000));
	pthread_join(th, NULL);
	CHECK_RC(ZKL_ECANCELED, w.rc);
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_mutex_release(ma));
	h_latch_free(w.done);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
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
	CHECK_RC(ZKL_EINVAL, zkl_mutex_acquire(NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_mutex_release(NULL));
	CHECK_OK(zkl_mutex_new(&m, c, h_path("invalid")));
	CHECK_RC(ZKL_EINVAL, zkl_mutex_acquire(m, -2));
	assert_non_null(strstr(zkl_last_error(), "-2"));
	CHECK_RC(ZKL_EINVAL, zkl_mutex_set_data(m, NULL, 5));
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
	zkl_state seen[16];
	int n;
	h_latch *reconnected;
};

static void on_state(zkl_client *c, zkl_state s, void *data)
{
	(void)c;
	struct states *st = data;
	pthread_mutex_lock(&st->mu);
	if (st->n < 16)
		st->seen[st->n++] = s;
	pthread_mutex_unlock(&st->mu);
	/* Expiring a session from outside can first bounce the connection (suspended,
	 * reconnected to the same session): wait for the reconnect that follows the loss. */
	bool after_lost = false;
	pthread_mutex_lock(&st->mu);
	for (int i = 0; i < st->n; i++)
		if (st->seen[i] == ZKL_STATE_LOST)
			after_lost = true;
	pthread_mutex_unlock(&st->mu);
	if (s == ZKL_STATE_RECONNECTED && after_lost)
		h_latch_set(st->reconnected);
}

static void test_state_listener(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	struct states st = { .mu = PTHREAD_MUTEX_INITIALIZER, .reconnected = h_latch_new() };
	assert_int_equal(zkl_client_state(c), ZKL_STATE_CONNECTED);
	int64_t sid = zkl_client_session_id(c);
	assert_true(sid != 0);
	assert_true(zkl_client_session_timeout(c) > 0);
	CHECK_OK(zkl_client_add_listener(c, on_state, &st));
	CHECK_RC(ZKL_EINVAL, zkl_client_add_listener(c, on_state, &st));
	h_expire(c);
	assert_true(h_latch_wait(st.reconnected, 20000));
	pthread_mutex_lock(&st.mu);
	int saw_lost = 0;
	for (int i = 0; i < st.n; i++)
		if (st.seen[i] == ZKL_STATE_LOST)
			saw_lost = 1;
	assert_true(saw_lost);
	assert_int_equal(st.seen[st.n - 1], ZKL_STATE_RECONNECTED);
	pthread_mutex_unlock(&st.mu);
	assert_true(zkl_client_session_id(c) != sid);
	CHECK_OK(zkl_client_remove_listener(c, on_state, &st));
	CHECK_RC(ZKL_EINVAL, zkl_client_remove_listener(c, on_state, &st));
	h_latch_free(st.reconnected);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
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
