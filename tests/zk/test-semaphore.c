/* zkl_semaphore on a real ZooKeeper server (run through tests/with-zk), after Curator's
 * TestInterProcessSemaphore. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* ---- helpers ---- */

/* Children of path, counting an absent path as none. */
static int nkids(const char *path)
{
	int n = h_children(path);
	return n < 0 ? 0 : n;
}

/* The lease nodes under a semaphore's path, and the takers queued on its mutex. */
static int nleases(const char *path)
{
	return nkids(h_sub(path, "leases"));
}

static int nlocks(const char *path)
{
	return nkids(h_sub(path, "locks"));
}

/* Waits until a semaphore's path has n lease nodes and locks queued takers: after an
 * acquire that timed out, a create still out at its deadline is deleted once answered. */
static void wait_nodes(const char *path, int leases, int locks)
{
	h_wait_children(h_sub(path, "leases"), leases);
	h_wait_children(h_sub(path, "locks"), locks);
}

/* Two clients a and b, each with its own handle on one semaphore of max leases: where
 * most tests start. */
struct two {
	const char *path;
	zkl_client *a, *b;
	zkl_semaphore *sa, *sb;
};

static void two_open(struct two *t, const char *test, int max)
{
	t->path = h_path(test);
	t->a = h_client(0);
	t->b = h_client(0);
	CHECK_OK(zkl_semaphore_new(&t->sa, t->a, t->path, max));
	CHECK_OK(zkl_semaphore_new(&t->sb, t->b, t->path, max));
}

static void two_close(struct two *t)
{
	zkl_semaphore_free(t->sa);
	zkl_semaphore_free(t->sb);
	zkl_client_close(t->a);
	zkl_client_close(t->b);
}

/* n clients, each with its own handle on the semaphore at path. */
static void many_open(int n, zkl_client **cs, zkl_semaphore **ss, const char *path, int max)
{
	for (int i = 0; i < n; i++) {
		cs[i] = h_client(0);
		CHECK_OK(zkl_semaphore_new(&ss[i], cs[i], path, max));
	}
}

static void many_close(int n, zkl_client **cs, zkl_semaphore **ss)
{
	for (int i = 0; i < n; i++) {
		zkl_semaphore_free(ss[i]);
		zkl_client_close(cs[i]);
	}
}

/* A thread that takes one lease of s, reporting when the acquire returns. */
struct taker {
	zkl_semaphore *s;
	int rc;
	zkl_lease *lease;
	h_latch *done;
	pthread_t th;
};

static void *taker_thread(void *arg)
{
	struct taker *t = arg;
	t->rc = zkl_semaphore_acquire(t->s, 1, 30000, &t->lease);
	h_latch_set(t->done);
	return NULL;
}

static void taker_start(struct taker *t, zkl_semaphore *s)
{
	*t = (struct taker){ .s = s, .done = h_latch_new() };
	pthread_create(&t->th, NULL, taker_thread, t);
}

/* Waits (20 s at most) for the acquire to return, then for the thread. */
static void taker_join(struct taker *t)
{
	assert_true(h_latch_wait(t->done, 20000));
	pthread_join(t->th, NULL);
	h_latch_free(t->done);
	t->done = NULL;
}

/* ---- max 1: the second timed acquire fails and leaves nothing ---- */

static void test_simple(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-simple", 1);
	const char *path = t.path;
	assert_int_equal(zkl_semaphore_max(t.sa), 1);
	zkl_lease *la = NULL, *lb = NULL;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	assert_non_null(la);
	assert_true(zkl_lease_is_held(la));
	assert_true(zkl_lease_token(la) > 0);
	assert_non_null(strstr(zkl_lease_path(la), "/leases/_c_"));
	assert_non_null(strstr(zkl_lease_path(la), "-lease-"));
	assert_int_equal(strncmp(zkl_lease_path(la), path, strlen(path)), 0);
	assert_true(h_exists(zkl_lease_path(la)));
	assert_int_equal(nleases(path), 1);
	assert_int_equal(nlocks(path), 0);

	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 1, 300, &lb));
	assert_null(lb);
	wait_nodes(path, 1, 0);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 1, 0, &lb));
	assert_null(lb);
	assert_int_equal(nleases(path), 1);
	assert_int_equal(nlocks(path), 0);

	int64_t t1 = zkl_lease_token(la);
	CHECK_OK(zkl_lease_release(la));
	assert_false(zkl_lease_is_held(la));
	assert_int_equal(zkl_lease_token(la), ZKL_ENOTHELD);
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la)); /* twice */
	CHECK_OK(zkl_semaphore_acquire(t.sb, 1, 5000, &lb));
	assert_true(zkl_lease_token(lb) > t1);
	CHECK_OK(zkl_lease_release(lb));
	assert_int_equal(nleases(path), 0);
	zkl_lease_free(la);
	zkl_lease_free(lb);
	zkl_lease_free(NULL);
	two_close(&t);
}

/* ---- max 3: the fourth fails, then succeeds once a lease is released ---- */

static void test_simple3(void **state)
{
	(void)state;
	const char *path = h_path("sem-simple3");
	zkl_client *cs[4];
	zkl_semaphore *ss[4];
	zkl_lease *ls[4] = {0};
	many_open(4, cs, ss, path, 3);
	for (int i = 0; i < 3; i++)
		CHECK_OK(zkl_semaphore_acquire(ss[i], 1, 5000, &ls[i]));
	assert_int_equal(nleases(path), 3);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(ss[3], 1, 300, &ls[3]));
	assert_null(ls[3]);
	wait_nodes(path, 3, 0);
	CHECK_OK(zkl_lease_release(ls[1]));
	CHECK_OK(zkl_semaphore_acquire(ss[3], 1, 5000, &ls[3]));
	assert_int_equal(nleases(path), 3);
	for (int i = 0; i < 4; i++) {
		if (i != 1)
			CHECK_OK(zkl_lease_release(ls[i]));
		zkl_lease_free(ls[i]);
	}
	many_close(4, cs, ss);
}

/* ---- a pool of holders that release when the test says so ---- */

struct pool {
	int inside, max_inside; /* atomic */
	int errors;             /* atomic */
	h_counter holding;      /* threads that hold right now */
	h_counter done;         /* threads that have finished */
	h_counter grants;       /* releases allowed so far, handed out by the test */
	int taken;              /* grants used, under grants.mu */
};

struct pool_arg {
	struct pool *p;
	zkl_semaphore *s;
};

static void pool_init(struct pool *p)
{
	memset(p, 0, sizeof *p);
	h_counter_init(&p->holding);
	h_counter_init(&p->done);
	h_counter_init(&p->grants);
}

static void pool_take_grant(struct pool *p)
{
	pthread_mutex_lock(&p->grants.mu);
	while (p->taken >= p->grants.n)
		pthread_cond_wait(&p->grants.cv, &p->grants.mu);
	p->taken++;
	pthread_mutex_unlock(&p->grants.mu);
}

static void *pool_thread(void *arg)
{
	struct pool_arg *a = arg;
	struct pool *p = a->p;
	zkl_lease *l;
	if (zkl_semaphore_acquire(a->s, 1, 30000, &l) != 0) {
		__atomic_add_fetch(&p->errors, 1, __ATOMIC_SEQ_CST);
		h_counter_add(&p->done, 1);
		return NULL;
	}
	h_note_max(&p->max_inside, __atomic_add_fetch(&p->inside, 1, __ATOMIC_SEQ_CST));
	h_counter_add(&p->holding, 1);
	pool_take_grant(p);
	__atomic_sub_fetch(&p->inside, 1, __ATOMIC_SEQ_CST);
	h_counter_add(&p->holding, -1);
	if (zkl_lease_release(l) != 0)
		__atomic_add_fetch(&p->errors, 1, __ATOMIC_SEQ_CST);
	zkl_lease_free(l);
	h_counter_add(&p->done, 1);
	return NULL;
}

/* ---- release one at a time: 10 clients under max 5, peak exactly 5 ---- */

static void test_release_one_at_a_time(void **state)
{
	(void)state;
	enum { N = 10, MAX = 5 };
	const char *path = h_path("sem-one");
	/* static: the threads must not point into a frame that a failed assertion left */
	static struct pool p;
	static struct pool_arg args[N];
	static pthread_t th[N];
	zkl_client *cs[N];
	zkl_semaphore *ss[N];
	pool_init(&p);
	many_open(N, cs, ss, path, MAX);
	for (int i = 0; i < N; i++) {
		args[i] = (struct pool_arg){ &p, ss[i] };
		pthread_create(&th[i], NULL, pool_thread, &args[i]);
	}
	assert_true(h_counter_wait_eq(&p.holding, MAX, 20000));
	/* The other five queue on the takers' mutex. */
	h_wait_children(h_sub(path, "locks"), N - MAX);
	assert_int_equal(h_counter_get(&p.holding), MAX);
	for (int i = 0; i < N; i++) {
		h_counter_add(&p.grants, 1);
		assert_true(h_counter_wait_eq(&p.done, i + 1, 20000));
		int expect = N - (i + 1) < MAX ? N - (i + 1) : MAX;
		assert_true(h_counter_wait_eq(&p.holding, expect, 20000));
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(p.errors, 0);
	assert_int_equal(p.max_inside, MAX);
	assert_int_equal(nleases(path), 0);
	assert_int_equal(nlocks(path), 0);
	many_close(N, cs, ss);
}

/* ---- release in chunks: 100 threads on 10 clients under max 11 ---- */

static void test_release_in_chunks(void **state)
{
	(void)state;
	enum { NC = 10, PER = 10, N = NC * PER, MAX = 11 };
	const char *path = h_path("sem-chunks");
	static struct pool p;
	static struct pool_arg args[N];
	static pthread_t th[N];
	zkl_client *cs[NC];
	zkl_semaphore *ss[NC];
	pool_init(&p);
	/* One handle per client, shared by its ten threads. */
	many_open(NC, cs, ss, path, MAX);
	for (int i = 0; i < N; i++) {
		args[i] = (struct pool_arg){ &p, ss[i % NC] };
		pthread_create(&th[i], NULL, pool_thread, &args[i]);
	}
	unsigned seed = 42;
	int released = 0, rounds = 0;
	while (released < N) {
		int left = N - released;
		int expect = left < MAX ? left : MAX;
		if (!h_counter_wait_eq(&p.holding, expect, 20000))
			fail_msg("%d holders after %d releases, expected %d",
			         h_counter_get(&p.holding), released, expect);
		int chunk = 1 + (int)(rand_r(&seed) % 5);
		if (chunk > expect)
			chunk = expect;
		h_counter_add(&p.grants, chunk);
		released += chunk;
		if (!h_counter_wait_eq(&p.done, released, 20000))
			fail_msg("only %d of %d released", h_counter_get(&p.done), released);
		rounds++;
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(p.errors, 0);
	assert_int_equal(h_counter_get(&p.done), N);
	assert_true(p.max_inside <= MAX);
	assert_int_equal(p.max_inside, MAX); /* the test waited for a full house */
	assert_true(rounds > 1);
	assert_int_equal(nleases(path), 0);
	assert_int_equal(nlocks(path), 0);
	many_close(NC, cs, ss);
}

/* ---- acquire(n) returns n distinct leases, each released on its own ---- */

static void *release_lease_thread(void *arg)
{
	return (void *)(intptr_t)zkl_lease_release(arg);
}

static void test_acquire_many(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-many", 5);
	const char *path = t.path;
	zkl_lease *la[3] = {0}, *lb[5] = {0};
	CHECK_OK(zkl_semaphore_acquire(t.sa, 3, 5000, la));
	for (int i = 0; i < 3; i++) {
		assert_non_null(la[i]);
		assert_true(zkl_lease_is_held(la[i]));
		assert_true(h_exists(zkl_lease_path(la[i])));
		for (int j = 0; j < i; j++) {
			assert_true(la[i] != la[j]);
			assert_string_not_equal(zkl_lease_path(la[i]), zkl_lease_path(la[j]));
			assert_true(zkl_lease_token(la[i]) != zkl_lease_token(la[j]));
		}
	}
	assert_int_equal(nleases(path), 3);
	/* 3 more do not fit (2 left); the partial leases are given back. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 3, 300, lb));
	assert_null(lb[0]);
	wait_nodes(path, 3, 0);
	CHECK_OK(zkl_semaphore_acquire(t.sb, 2, 5000, lb));
	assert_int_equal(nleases(path), 5);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 1, 0, &lb[2]));

	/* One lease released here, one from another thread: each on its own. */
	CHECK_OK(zkl_lease_release(la[0]));
	assert_false(h_exists(zkl_lease_path(la[0])));
	assert_true(zkl_lease_is_held(la[1]));
	CHECK_OK(h_in_thread(release_lease_thread, la[1]));
	assert_false(zkl_lease_is_held(la[1]));
	assert_true(zkl_lease_is_held(la[2]));
	assert_int_equal(nleases(path), 3);
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la[1]));
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la[0]));
	CHECK_OK(zkl_semaphore_acquire(t.sb, 2, 5000, &lb[2]));
	assert_int_equal(nleases(path), 5);
	for (int i = 0; i < 3; i++)
		zkl_lease_free(la[i]); /* la[2] is released by free */
	for (int i = 0; i < 4; i++)
		CHECK_OK(zkl_lease_release(lb[i]));
	assert_int_equal(nleases(path), 0);
	for (int i = 0; i < 4; i++)
		zkl_lease_free(lb[i]);
	two_close(&t);
}

/* ---- bad arguments ---- */

static void test_invalid(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_semaphore *s = NULL;
	const char *path = h_path("sem-invalid");
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, c, path, 0));
	assert_null(s);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, c, path, -3));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, c, "relative", 1));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, NULL, path, 1));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(NULL, c, path, 1));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, path, h_path("sem-count"), 0));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, path, "relative", 1));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, path, NULL, 1));
	CHECK_OK(zkl_semaphore_new(&s, c, path, 2));
	zkl_lease *l[4] = {0};
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, 0, 1000, l));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, -1, 1000, l));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, 3, 1000, l));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, 1, -2, l));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(s, 1, 1000, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_acquire(NULL, 1, 1000, l));
	assert_null(l[0]);
	assert_true(h_children(path) <= 0); /* nothing was sent */
	CHECK_OK(zkl_semaphore_acquire(s, 2, 5000, l));
	CHECK_OK(zkl_lease_release(l[0]));
	CHECK_OK(zkl_lease_release(l[1]));
	zkl_lease_free(l[0]);
	zkl_lease_free(l[1]);
	zkl_semaphore_free(s);
	zkl_semaphore_free(NULL);
	zkl_client_close(c);
}

/* ---- a waiting lease deleted from outside is retried; nothing is left behind ---- */

static void test_no_orphaned_nodes(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-orphan", 1);
	const char *path = t.path;
	const char *leases = h_sub(path, "leases");
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	const char *mine = strrchr(zkl_lease_path(la), '/') + 1;

	static struct taker w;
	taker_start(&w, t.sb);
	/* The waiter holds the takers' mutex and has made its lease node. */
	h_wait_children(leases, 2);
	char victim[512];
	h_child_except(leases, mine, victim, sizeof victim);
	h_delete(victim);
	assert_int_equal(h_latch_count(w.done), 0);

	CHECK_OK(zkl_lease_release(la));
	taker_join(&w);
	CHECK_OK(w.rc);
	assert_true(zkl_lease_is_held(w.lease));
	assert_string_not_equal(zkl_lease_path(w.lease), victim);
	assert_int_equal(nkids(leases), 1);
	CHECK_OK(zkl_lease_release(w.lease));
	assert_int_equal(nkids(leases), 0);
	assert_int_equal(nlocks(path), 0);
	/* No lease is left: a new one can be taken. */
	zkl_lease *again;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &again));
	CHECK_OK(zkl_lease_release(again));
	zkl_lease_free(again);
	zkl_lease_free(w.lease);
	zkl_lease_free(la);
	two_close(&t);
}

/* ---- a cancelled waiter leaves nothing ---- */

static void test_cancel(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-cancel", 1);
	const char *path = t.path;
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	/* Two waiters on one handle: one with its lease made, one queued behind it. */
	static struct taker w[2];
	for (int i = 0; i < 2; i++)
		taker_start(&w[i], t.sb);
	h_wait_children(h_sub(path, "leases"), 2);
	h_wait_children(h_sub(path, "locks"), 2);
	zkl_lock_cancel(zkl_semaphore_lock(t.sb));
	for (int i = 0; i < 2; i++) {
		taker_join(&w[i]);
		CHECK_RC(ZKL_ECANCELED, w[i].rc);
		assert_null(w[i].lease);
	}
	assert_int_equal(nleases(path), 1);
	assert_int_equal(nlocks(path), 0);
	assert_true(zkl_lease_is_held(la));
	CHECK_OK(zkl_lease_release(la));
	/* The handle still works after a cancel. */
	zkl_lease *lb;
	CHECK_OK(zkl_semaphore_acquire(t.sb, 1, 5000, &lb));
	CHECK_OK(zkl_lease_release(lb));
	zkl_lease_free(lb);
	zkl_lease_free(la);
	two_close(&t);
}

/* ---- raising the shared count wakes a waiter ---- */

static void test_shared_count_increase(void **state)
{
	(void)state;
	const char *path = h_path("sem-shared");
	const char *count = h_path("sem-shared-count");
	zkl_client *a = h_client(0), *b = h_client(0), *x = h_client(0);
	zkl_semaphore *sa, *sb, *sx;
	CHECK_OK(zkl_semaphore_new_shared(&sa, a, path, count, 1));
	CHECK_OK(zkl_semaphore_new_shared(&sb, b, path, count, 1));
	assert_true(h_exists(count));
	assert_int_equal(zkl_semaphore_max(sa), 1);
	int32_t v = 0;
	CHECK_OK(zkl_shared_count_get(x, count, &v));
	assert_int_equal(v, 1);

	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &la));
	static struct taker w;
	taker_start(&w, sb);
	h_wait_children(h_sub(path, "leases"), 2);
	assert_int_equal(h_latch_count(w.done), 0);

	CHECK_OK(zkl_shared_count_set(x, count, 2));
	taker_join(&w);
	CHECK_OK(w.rc);
	assert_true(zkl_lease_is_held(la));
	assert_true(zkl_lease_is_held(w.lease));
	assert_int_equal(nleases(path), 2);
	assert_int_equal(zkl_semaphore_max(sa), 2);
	CHECK_OK(zkl_shared_count_get(a, count, &v));
	assert_int_equal(v, 2);
	/* Curator's SharedCount format: a 4-byte big-endian int. */
	char buf[16];
	assert_int_equal(h_get(count, buf, sizeof buf), 4);
	assert_memory_equal(buf, "\0\0\0\2", 4);
	/* An existing count is not reset by a new handle's initial value. */
	CHECK_OK(zkl_semaphore_new_shared(&sx, x, path, count, 7));
	assert_int_equal(zkl_semaphore_max(sx), 2);
	zkl_lease *lx = NULL;
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sx, 1, 300, &lx));

	CHECK_OK(zkl_lease_release(la));
	CHECK_OK(zkl_lease_release(w.lease));
	zkl_lease_free(la);
	zkl_lease_free(w.lease);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_semaphore_free(sx);
	zkl_client_close(a);
	zkl_client_close(b);
	zkl_client_close(x);
}

/* ---- freeing the semaphore and closing the client frees its leases ---- */

static void test_client_close(void **state)
{
	(void)state;
	const char *path = h_path("sem-close");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 3));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 3));
	zkl_lease *la[3], *lb[3] = {0};
	CHECK_OK(zkl_semaphore_acquire(sa, 3, 5000, la));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, 0, lb));
	/* The leases are neither released nor freed: the semaphore does both. */
	zkl_semaphore_free(sa);
	zkl_client_close(a);
	CHECK_OK(zkl_semaphore_acquire(sb, 3, 5000, lb));
	assert_int_equal(nleases(path), 3);
	zkl_semaphore_free(sb); /* releases and frees lb too */
	assert_int_equal(nleases(path), 0);
	zkl_client_close(b);
}

/* ---- leases are reported lost with their session ---- */

struct lost {
	h_counter n;
	int bad;
	zkl_lock *view; /* of the semaphore whose leases are lost */
	zkl_lease *l[2];
};

/* Called once per lease lost; the lease is one of ours, and no longer held. */
static void on_lost(zkl_lock *l, int reason, void *data)
{
	struct lost *lo = data;
	if (l != lo->view || (reason != ZKL_ELOST && reason != ZKL_EDELETED) ||
	    (zkl_lease_is_held(lo->l[0]) && zkl_lease_is_held(lo->l[1])))
		__atomic_add_fetch(&lo->bad, 1, __ATOMIC_SEQ_CST);
	h_counter_add(&lo->n, 1);
}

static void test_lost_on_expiry(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-lost", 2);
	static struct lost lo;
	memset(&lo, 0, sizeof lo);
	h_counter_init(&lo.n);
	lo.view = zkl_semaphore_lock(t.sa);
	CHECK_OK(zkl_lock_on_lost(lo.view, on_lost, &lo));
	CHECK_OK(zkl_semaphore_acquire(t.sa, 2, 5000, lo.l));
	zkl_lease *lb[2] = {0};
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 1, 0, lb));

	h_expire(t.a);
	assert_true(h_counter_wait_eq(&lo.n, 2, 20000));
	assert_int_equal(lo.bad, 0);
	for (int i = 0; i < 2; i++) {
		assert_false(zkl_lease_is_held(lo.l[i]));
		assert_int_equal(zkl_lease_token(lo.l[i]), ZKL_ENOTHELD);
	}
	CHECK_OK(zkl_semaphore_acquire(t.sb, 2, 5000, lb));
	CHECK_RC(ZKL_ELOST, zkl_lease_release(lo.l[0]));
	CHECK_RC(ZKL_ELOST, zkl_lease_release(lo.l[1]));
	CHECK_OK(zkl_lease_release(lb[0]));
	CHECK_OK(zkl_lease_release(lb[1]));
	/* The old client takes leases again on its new session. */
	zkl_lease *again;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &again));
	CHECK_OK(zkl_lease_release(again));
	zkl_lease_free(again);
	assert_int_equal(h_counter_get(&lo.n), 2);
	for (int i = 0; i < 2; i++) {
		zkl_lease_free(lo.l[i]);
		zkl_lease_free(lb[i]);
	}
	two_close(&t);
}

/* ---- participants lists the holders ---- */

static void test_participants(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-participants", 3);
	zkl_lock *va = zkl_semaphore_lock(t.sa), *vb = zkl_semaphore_lock(t.sb);
	zkl_participant *ps;
	size_t n = 99;
	CHECK_OK(zkl_lock_participants(va, &ps, &n));
	assert_int_equal(n, 0);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lock_set_data(vb, "worker-b", 8));
	zkl_lease *la[2], *lb;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 2, 5000, la));
	CHECK_OK(zkl_semaphore_acquire(t.sb, 1, 5000, &lb));
	CHECK_OK(zkl_lock_participants(va, &ps, &n));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		assert_true(ps[i].holder);
		assert_non_null(strstr(ps[i].path, "/leases/_c_"));
		assert_non_null(strstr(ps[i].path, "-lease-"));
		if (i > 0)
			assert_true(ps[i].sequence > ps[i - 1].sequence);
	}
	/* Oldest first, each with its own data and token. */
	assert_true((strcmp(ps[0].path, zkl_lease_path(la[0])) == 0 &&
	             strcmp(ps[1].path, zkl_lease_path(la[1])) == 0) ||
	            (strcmp(ps[0].path, zkl_lease_path(la[1])) == 0 &&
	             strcmp(ps[1].path, zkl_lease_path(la[0])) == 0));
	int64_t ta0 = zkl_lease_token(la[0]), ta1 = zkl_lease_token(la[1]);
	int64_t tb = zkl_lease_token(lb);
	assert_true((ps[0].czxid == ta0 && ps[1].czxid == ta1) ||
	            (ps[0].czxid == ta1 && ps[1].czxid == ta0));
	assert_int_equal(ps[2].czxid, tb);
	assert_string_equal(ps[2].path, zkl_lease_path(lb));
	assert_string_equal(ps[2].data, "worker-b");
	assert_int_equal(ps[2].data_len, 8);
	assert_string_equal(ps[0].data, h_default_data());
	zkl_participants_free(ps, n);
	/* A fourth lease waits at the gate: its node is under leases/, but it does not hold
	 * until one of the three goes. */
	struct taker w;
	taker_start(&w, t.sb);
	h_wait_children(h_sub(t.path, "leases"), 4);
	CHECK_OK(zkl_lock_participants(va, &ps, &n));
	assert_int_equal(n, 4);
	for (size_t i = 0; i < 3; i++)
		assert_true(ps[i].holder);
	assert_false(ps[3].holder);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lease_release(la[1]));
	taker_join(&w);
	CHECK_OK(w.rc);
	CHECK_OK(zkl_lock_participants(vb, &ps, &n));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_true(ps[i].holder);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lease_release(w.lease));
	zkl_lease_free(w.lease);
	zkl_lease_free(la[0]);
	zkl_lease_free(la[1]);
	zkl_lease_free(lb);
	two_close(&t);
}

/* ---- participants tell the waiting lease by the tree, not by the handle's limit ---- */

/* A handle whose limit is not the path's (it has not acquired, so nothing refused it)
 * still sees the lease at the gate as waiting: the gate holder made it. */
static void test_participants_gate(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-participants-gate", 1);
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	struct taker w;
	taker_start(&w, t.sb);
	h_wait_children(h_sub(t.path, "leases"), 2); /* b's lease, at the gate */
	assert_int_equal(nlocks(t.path), 1);
	zkl_client *x = h_client(0);
	zkl_semaphore *s5;
	CHECK_OK(zkl_semaphore_new(&s5, x, t.path, 5));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_semaphore_lock(s5), &ps, &n));
	assert_int_equal(n, 2);
	assert_string_equal(ps[0].path, zkl_lease_path(la));
	assert_true(ps[0].holder);
	assert_false(ps[1].holder);
	zkl_participants_free(ps, n);
	/* The same through the handles that agree. */
	CHECK_OK(zkl_lock_participants(zkl_semaphore_lock(t.sb), &ps, &n));
	assert_int_equal(n, 2);
	assert_true(ps[0].holder);
	assert_false(ps[1].holder);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lease_release(la));
	taker_join(&w);
	CHECK_OK(w.rc);
	CHECK_OK(zkl_lock_participants(zkl_semaphore_lock(s5), &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].path, zkl_lease_path(w.lease));
	assert_true(ps[0].holder);
	zkl_participants_free(ps, n);
	zkl_lease_free(w.lease);
	zkl_lease_free(la);
	zkl_semaphore_free(s5);
	zkl_client_close(x);
	two_close(&t);
}

/* A shared count lowered under the leases it granted: they all still hold (a semaphore
 * takes nothing back), and only a new taker's lease waits. */
static void test_participants_count_lowered(void **state)
{
	(void)state;
	const char *path = h_path("sem-lowered");
	const char *count = h_path("sem-lowered-count");
	zkl_client *a = h_client(0), *b = h_client(0), *x = h_client(0);
	zkl_semaphore *sa, *sb, *sx;
	CHECK_OK(zkl_semaphore_new_shared(&sa, a, path, count, 2));
	CHECK_OK(zkl_semaphore_new_shared(&sb, b, path, count, 2));
	zkl_lease *la, *lb;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &la));
	CHECK_OK(zkl_semaphore_acquire(sb, 1, 5000, &lb));
	CHECK_OK(zkl_shared_count_set(x, count, 1));
	/* A handle made now reads the new count. */
	CHECK_OK(zkl_semaphore_new_shared(&sx, x, path, count, 1));
	assert_int_equal(zkl_semaphore_max(sx), 1);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_semaphore_lock(sx), &ps, &n));
	assert_int_equal(n, 2);
	assert_true(ps[0].holder);
	assert_true(ps[1].holder);
	zkl_participants_free(ps, n);
	struct taker w;
	taker_start(&w, sx);
	h_wait_children(h_sub(path, "leases"), 3);
	CHECK_OK(zkl_lock_participants(zkl_semaphore_lock(sx), &ps, &n));
	assert_int_equal(n, 3);
	assert_true(ps[0].holder);
	assert_true(ps[1].holder);
	assert_false(ps[2].holder);
	zkl_participants_free(ps, n);
	/* Two go, and the count of one lets the third in. */
	CHECK_OK(zkl_lease_release(la));
	CHECK_OK(zkl_lease_release(lb));
	taker_join(&w);
	CHECK_OK(w.rc);
	zkl_lease_free(w.lease);
	zkl_lease_free(la);
	zkl_lease_free(lb);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_semaphore_free(sx);
	zkl_client_close(a);
	zkl_client_close(b);
	zkl_client_close(x);
}

/* ---- revocation: a lease holder is asked to give its lease back ---- */

/* What a lease revocation callback saw and did. */
struct sem_revoked {
	h_counter calls;
	zkl_semaphore *expect;
	zkl_lease *lease;   /* the last lease it was given (NULL: one being taken) */
	int wrong;          /* calls with another semaphore */
	bool release;       /* release the lease it is given, through its handle */
	bool cancel;        /* cancel the view's waits when given NULL */
	int release_rc;
};

static void sem_revoked_init(struct sem_revoked *r, zkl_semaphore *s)
{
	memset(r, 0, sizeof *r);
	h_counter_init(&r->calls);
	r->expect = s;
	r->release_rc = 1;
}

static void on_lease_revoke(zkl_semaphore *s, zkl_lease *lease, void *data)
{
	struct sem_revoked *r = data;
	if (s != r->expect)
		__atomic_add_fetch(&r->wrong, 1, __ATOMIC_SEQ_CST);
	r->lease = lease;
	if (lease && r->release)
		r->release_rc = zkl_lease_release(lease);
	if (!lease && r->cancel)
		zkl_lock_cancel(zkl_semaphore_lock(s));
	h_counter_add(&r->calls, 1);
}

/* The holder of the one lease is asked, releases it, and the waiter gets it. */
static void test_revocable_lease(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-revoke", 1);
	static struct sem_revoked r;
	sem_revoked_init(&r, t.sa);
	r.release = true;
	CHECK_OK(zkl_semaphore_make_revocable(t.sa, on_lease_revoke, &r));
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	char data[64];
	assert_int_equal(h_get(zkl_lease_path(la), data, sizeof data), 0); /* no data */

	static struct taker w;
	taker_start(&w, t.sb);
	h_wait_children(h_sub(t.path, "leases"), 2);
	assert_int_equal(h_counter_get(&r.calls), 0);
	CHECK_OK(zkl_revoke(t.b, zkl_lease_path(la)));
	assert_true(h_counter_wait(&r.calls, 1, 10000));
	assert_ptr_equal(r.lease, la);
	CHECK_OK(r.release_rc);
	assert_false(zkl_lease_is_held(la));
	taker_join(&w);
	CHECK_OK(w.rc);
	assert_true(zkl_lease_is_held(w.lease));
	assert_int_equal(h_counter_get(&r.calls), 1);
	assert_int_equal(r.wrong, 0);
	zkl_lease_free(w.lease);
	zkl_lease_free(la);

	/* Not revocable again: leases carry their data and a request changes nothing. */
	CHECK_OK(zkl_semaphore_make_revocable(t.sa, NULL, NULL));
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	assert_int_equal(h_get(zkl_lease_path(la), data, sizeof data),
	                 (int)strlen(h_default_data()));
	CHECK_OK(zkl_revoke(t.b, zkl_lease_path(la)));
	zkl_lease *lb;
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(t.sb, 1, 300, &lb));
	assert_true(zkl_lease_is_held(la));
	assert_int_equal(h_counter_get(&r.calls), 1);
	zkl_lease_free(la);
	two_close(&t);
}

/* Of several leases, the callback is given the one asked for; through the view, a lease
 * released by its handle is skipped by the view's next release. */
static void test_revoke_names_the_lease(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-revoke-which", 3);
	static struct sem_revoked r;
	sem_revoked_init(&r, t.sa);
	r.release = true;
	CHECK_OK(zkl_semaphore_make_revocable(t.sa, on_lease_revoke, &r));
	zkl_lease *ls[2];
	CHECK_OK(zkl_semaphore_acquire(t.sa, 2, 5000, ls));
	CHECK_OK(zkl_revoke(t.b, zkl_lease_path(ls[1])));
	assert_true(h_counter_wait(&r.calls, 1, 10000));
	assert_ptr_equal(r.lease, ls[1]);
	assert_true(zkl_lease_is_held(ls[0]));
	assert_false(zkl_lease_is_held(ls[1]));
	zkl_lease_free(ls[0]);
	zkl_lease_free(ls[1]);

	/* The view: two leases; the one taken last is revoked and released by its handle,
	 * and the view's next release gives back the first. */
	zkl_lock *v = zkl_semaphore_lock(t.sa);
	CHECK_OK(zkl_lock_acquire(v, 5000));
	char first[ZKL_NODE_MAX], last[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(v, first, sizeof first) > 0);
	CHECK_OK(zkl_lock_acquire(v, 5000));
	assert_true(zkl_lock_node(v, last, sizeof last) > 0);
	CHECK_OK(zkl_revoke(t.b, last));
	assert_true(h_counter_wait(&r.calls, 2, 10000));
	assert_non_null(r.lease);
	CHECK_OK(r.release_rc);
	assert_true(h_wait_deleted(last, 10000));
	assert_true(zkl_lock_is_held(v));
	CHECK_OK(zkl_lock_release(v));               /* the first lease */
	assert_int_equal(h_exists(first), 0);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(v));
	assert_int_equal(nleases(t.path), 0);
	assert_int_equal(r.wrong, 0);
	two_close(&t);
}

/* A lease node still waiting for its turn (past the gate): the callback gets NULL and
 * withdraws by cancelling. */
static void test_revoke_waiting_lease(void **state)
{
	(void)state;
	struct two t;
	two_open(&t, "sem-revoke-waiting", 1);
	static struct sem_revoked r;
	sem_revoked_init(&r, t.sb);
	r.cancel = true;
	r.lease = (zkl_lease *)&r; /* anything but NULL */
	CHECK_OK(zkl_semaphore_make_revocable(t.sb, on_lease_revoke, &r));
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(t.sa, 1, 5000, &la));
	static struct taker w;
	taker_start(&w, t.sb);
	const char *leases = h_sub(t.path, "leases");
	h_wait_children(leases, 2);
	char waiting[512];
	const char *name = strrchr(zkl_lease_path(la), '/') + 1;
	h_child_except(leases, name, waiting, sizeof waiting);
	CHECK_OK(zkl_revoke(t.a, waiting));
	assert_true(h_counter_wait(&r.calls, 1, 10000));
	assert_null(r.lease);
	taker_join(&w);
	CHECK_RC(ZKL_ECANCELED, w.rc);
	assert_int_equal(nleases(t.path), 1);
	assert_true(zkl_lease_is_held(la));
	zkl_lease_free(la);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_make_revocable(NULL, on_lease_revoke, &r));
	two_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_simple),
		cmocka_unit_test(test_simple3),
		cmocka_unit_test(test_acquire_many),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_participants_gate),
		cmocka_unit_test(test_participants_count_lowered),
		cmocka_unit_test(test_no_orphaned_nodes),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_shared_count_increase),
		cmocka_unit_test(test_client_close),
		cmocka_unit_test(test_release_one_at_a_time),
		cmocka_unit_test(test_release_in_chunks),
		cmocka_unit_test(test_lost_on_expiry),
		cmocka_unit_test(test_revocable_lease),
		cmocka_unit_test(test_revoke_names_the_lease),
		cmocka_unit_test(test_revoke_waiting_lease),
	};
	return H_RUN(tests);
}
