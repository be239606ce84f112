/* zkl_semaphore on a real ZooKeeper server (run through tests/with-zk), after Curator's
 * TestInterProcessSemaphore. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

/* ---- helpers ---- */

struct counter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n;
};

static void counter_init(struct counter *k)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, &a);
	pthread_condattr_destroy(&a);
	k->n = 0;
}

static void counter_add(struct counter *k, int d)
{
	pthread_mutex_lock(&k->mu);
	k->n += d;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

static int counter_get(struct counter *k)
{
	pthread_mutex_lock(&k->mu);
	int n = k->n;
	pthread_mutex_unlock(&k->mu);
	return n;
}

/* Waits until the counter equals want, at most ms. Returns 1 if it got there. */
static int counter_wait_eq(struct counter *k, int want, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&k->mu);
	int rc = 0;
	while (k->n != want && rc == 0)
		rc = pthread_cond_timedwait(&k->cv, &k->mu, &ts);
	int ok = k->n == want;
	pthread_mutex_unlock(&k->mu);
	return ok;
}

static char *sub(const char *path, const char *leaf)
{
	static char bufs[16][300];
	static int n;
	char *b = bufs[n++ % 16];
	snprintf(b, sizeof bufs[0], "%s/%s", path, leaf);
	return b;
}

/* Children of path, counting an absent path as none. */
static int nkids(const char *path)
{
	int n = h_children(path);
	return n < 0 ? 0 : n;
}

static void wait_children(const char *path, int n)
{
	/* The number of nodes is the event: poll the server until it is reached. */
	for (int i = 0; i < 2000; i++) {
		if (nkids(path) == n)
			return;
		usleep(5000);
	}
	fail_msg("%s never reached %d children (it has %d)", path, n, nkids(path));
}

static void note_max(int *max, int now)
{
	int old = __atomic_load_n(max, __ATOMIC_SEQ_CST);
	while (now > old && !__atomic_compare_exchange_n(max, &old, now, false, __ATOMIC_SEQ_CST,
	                                                 __ATOMIC_SEQ_CST))
		;
}

/* A raw ZooKeeper handle of this file's own, to change the tree behind the library. */
static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static zhandle_t *raw_open(void)
{
	zhandle_t *zh = zookeeper_init(h_servers(), raw_watcher, 10000, NULL, NULL, 0);
	assert_non_null(zh);
	for (int i = 0; i < 500 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		usleep(10000);
	if (zoo_state(zh) != ZOO_CONNECTED_STATE)
		fail_msg("raw handle cannot connect");
	return zh;
}

/* One acquire of n leases in a thread, reporting when it returns. */
struct taker {
	zkl_semaphore *s;
	int n;
	int timeout_ms;
	int rc;
	zkl_lease *leases[8];
	h_latch *done;
};

static void *taker_thread(void *arg)
{
	struct taker *t = arg;
	t->rc = zkl_semaphore_acquire(t->s, t->n, t->timeout_ms ? t->timeout_ms : 30000,
	                              t->leases);
	h_latch_set(t->done);
	return NULL;
}

/* ---- max 1: the second timed acquire fails and leaves nothing ---- */

static void test_simple(void **state)
{
	(void)state;
	const char *path = h_path("sem-simple");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	assert_int_equal(zkl_semaphore_max(sa), 1);
	zkl_lease *la = NULL, *lb = NULL;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &la));
	assert_non_null(la);
	assert_true(zkl_lease_is_held(la));
	assert_true(zkl_lease_token(la) > 0);
	assert_non_null(strstr(zkl_lease_path(la), "/leases/_c_"));
	assert_non_null(strstr(zkl_lease_path(la), "-lease-"));
	assert_int_equal(strncmp(zkl_lease_path(la), path, strlen(path)), 0);
	assert_true(h_exists(zkl_lease_path(la)));
	assert_int_equal(nkids(sub(path, "leases")), 1);
	assert_int_equal(nkids(sub(path, "locks")), 0);

	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, 300, &lb));
	assert_null(lb);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, 0, &lb));
	assert_null(lb);
	assert_int_equal(nkids(sub(path, "leases")), 1);
	assert_int_equal(nkids(sub(path, "locks")), 0);

	int64_t t1 = zkl_lease_token(la);
	CHECK_OK(zkl_lease_release(la));
	assert_false(zkl_lease_is_held(la));
	assert_int_equal(zkl_lease_token(la), ZKL_ENOTHELD);
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la)); /* twice */
	CHECK_OK(zkl_semaphore_acquire(sb, 1, 5000, &lb));
	assert_true(zkl_lease_token(lb) > t1);
	CHECK_OK(zkl_lease_release(lb));
	assert_int_equal(nkids(sub(path, "leases")), 0);
	zkl_lease_free(la);
	zkl_lease_free(lb);
	zkl_lease_free(NULL);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- max 3: the fourth fails, then succeeds once a lease is released ---- */

static void test_simple3(void **state)
{
	(void)state;
	const char *path = h_path("sem-simple3");
	zkl_client *cs[4];
	zkl_semaphore *ss[4];
	zkl_lease *ls[4] = {0};
	for (int i = 0; i < 4; i++) {
		cs[i] = h_client(0);
		CHECK_OK(zkl_semaphore_new(&ss[i], cs[i], path, 3));
	}
	for (int i = 0; i < 3; i++)
		CHECK_OK(zkl_semaphore_acquire(ss[i], 1, 5000, &ls[i]));
	assert_int_equal(nkids(sub(path, "leases")), 3);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(ss[3], 1, 300, &ls[3]));
	assert_null(ls[3]);
	assert_int_equal(nkids(sub(path, "leases")), 3);
	CHECK_OK(zkl_lease_release(ls[1]));
	CHECK_OK(zkl_semaphore_acquire(ss[3], 1, 5000, &ls[3]));
	assert_int_equal(nkids(sub(path, "leases")), 3);
	for (int i = 0; i < 4; i++) {
		if (i != 1)
			CHECK_OK(zkl_lease_release(ls[i]));
		zkl_lease_free(ls[i]);
		zkl_semaphore_free(ss[i]);
		zkl_client_close(cs[i]);
	}
}

/* ---- a pool of holders that release when the test says so ---- */

struct pool {
	int inside, max_inside;   /* atomic */
	int errors;               /* atomic */
	struct counter holding;   /* threads that hold right now */
	struct counter done;      /* threads that have finished */
	struct counter grants;    /* releases allowed so far, handed out by the test */
	int taken;                /* grants used, under grants.mu */
};

struct pool_arg {
	struct pool *p;
	zkl_semaphore *s;
};

static void pool_init(struct pool *p)
{
	memset(p, 0, sizeof *p);
	counter_init(&p->holding);
	counter_init(&p->done);
	counter_init(&p->grants);
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
		counter_add(&p->done, 1);
		return NULL;
	}
	note_max(&p->max_inside, __atomic_add_fetch(&p->inside, 1, __ATOMIC_SEQ_CST));
	counter_add(&p->holding, 1);
	pool_take_grant(p);
	__atomic_sub_fetch(&p->inside, 1, __ATOMIC_SEQ_CST);
	counter_add(&p->holding, -1);
	if (zkl_lease_release(l) != 0)
		__atomic_add_fetch(&p->errors, 1, __ATOMIC_SEQ_CST);
	zkl_lease_free(l);
	counter_add(&p->done, 1);
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
	for (int i = 0; i < N; i++) {
		cs[i] = h_client(0);
		CHECK_OK(zkl_semaphore_new(&ss[i], cs[i], path, MAX));
		args[i] = (struct pool_arg){ &p, ss[i] };
	}
	for (int i = 0; i < N; i++)
		pthread_create(&th[i], NULL, pool_thread, &args[i]);
	assert_true(counter_wait_eq(&p.holding, MAX, 20000));
	/* The other five queue on the takers' mutex. */
	wait_children(sub(path, "locks"), N - MAX);
	assert_int_equal(counter_get(&p.holding), MAX);
	for (int i = 0; i < N; i++) {
		counter_add(&p.grants, 1);
		assert_true(counter_wait_eq(&p.done, i + 1, 20000));
		int expect = N - (i + 1) < MAX ? N - (i + 1) : MAX;
		assert_true(counter_wait_eq(&p.holding, expect, 20000));
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(p.errors, 0);
	assert_int_equal(p.max_inside, MAX);
	assert_int_equal(nkids(sub(path, "leases")), 0);
	assert_int_equal(nkids(sub(path, "locks")), 0);
	for (int i = 0; i < N; i++) {
		zkl_semaphore_free(ss[i]);
		zkl_client_close(cs[i]);
	}
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
	for (int i = 0; i < NC; i++) {
		cs[i] = h_client(0);
		/* One handle per client, shared by its ten threads. */
		CHECK_OK(zkl_semaphore_new(&ss[i], cs[i], path, MAX));
	}
	for (int i = 0; i < N; i++) {
		args[i] = (struct pool_arg){ &p, ss[i % NC] };
		pthread_create(&th[i], NULL, pool_thread, &args[i]);
	}
	unsigned seed = 42;
	int released = 0, rounds = 0;
	while (released < N) {
		int left = N - released;
		int expect = left < MAX ? left : MAX;
		if (!counter_wait_eq(&p.holding, expect, 20000))
			fail_msg("%d holders after %d releases, expected %d", counter_get(&p.holding),
			         released, expect);
		int chunk = 1 + (int)(rand_r(&seed) % 5);
		if (chunk > expect)
			chunk = expect;
		counter_add(&p.grants, chunk);
		released += chunk;
		if (!counter_wait_eq(&p.done, released, 20000))
			fail_msg("only %d of %d released", counter_get(&p.done), released);
		rounds++;
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(p.errors, 0);
	assert_int_equal(counter_get(&p.done), N);
	assert_true(p.max_inside <= MAX);
	assert_int_equal(p.max_inside, MAX); /* the test waited for a full house */
	assert_true(rounds > 1);
	assert_int_equal(nkids(sub(path, "leases")), 0);
	assert_int_equal(nkids(sub(path, "locks")), 0);
	for (int i = 0; i < NC; i++) {
		zkl_semaphore_free(ss[i]);
		zkl_client_close(cs[i]);
	}
}

/* ---- acquire(n) returns n distinct leases, each released on its own ---- */

static void *release_lease_thread(void *arg)
{
	return (void *)(intptr_t)zkl_lease_release(arg);
}

static void test_acquire_many(void **state)
{
	(void)state;
	const char *path = h_path("sem-many");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 5));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 5));
	zkl_lease *la[3] = {0}, *lb[5] = {0};
	CHECK_OK(zkl_semaphore_acquire(sa, 3, 5000, la));
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
	assert_int_equal(nkids(sub(path, "leases")), 3);
	/* 3 more do not fit (2 left); the partial leases are given back. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 3, 300, lb));
	assert_null(lb[0]);
	assert_int_equal(nkids(sub(path, "leases")), 3);
	CHECK_OK(zkl_semaphore_acquire(sb, 2, 5000, lb));
	assert_int_equal(nkids(sub(path, "leases")), 5);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, 0, &lb[2]));

	/* One lease released here, one from another thread: each on its own. */
	CHECK_OK(zkl_lease_release(la[0]));
	assert_false(h_exists(zkl_lease_path(la[0])));
	assert_true(zkl_lease_is_held(la[1]));
	pthread_t th;
	void *ret;
	pthread_create(&th, NULL, release_lease_thread, la[1]);
	pthread_join(th, &ret);
	CHECK_OK((int)(intptr_t)ret);
	assert_false(zkl_lease_is_held(la[1]));
	assert_true(zkl_lease_is_held(la[2]));
	assert_int_equal(nkids(sub(path, "leases")), 3);
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la[1]));
	CHECK_RC(ZKL_ENOTHELD, zkl_lease_release(la[0]));
	CHECK_OK(zkl_semaphore_acquire(sb, 2, 5000, &lb[2]));
	assert_int_equal(nkids(sub(path, "leases")), 5);
	for (int i = 0; i < 3; i++)
		zkl_lease_free(la[i]); /* la[2] is released by free */
	for (int i = 0; i < 4; i++)
		CHECK_OK(zkl_lease_release(lb[i]));
	assert_int_equal(nkids(sub(path, "leases")), 0);
	for (int i = 0; i < 4; i++)
		zkl_lease_free(lb[i]);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
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
	const char *path = h_path("sem-orphan");
	const char *leases = sub(path, "leases");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &la));
	const char *mine = strrchr(zkl_lease_path(la), '/') + 1;

	static struct taker w;
	w = (struct taker){ .s = sb, .n = 1, .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, taker_thread, &w);
	/* The waiter holds the takers' mutex and has made its lease node. */
	wait_children(leases, 2);
	zhandle_t *zh = raw_open();
	struct String_vector sv = {0};
	assert_int_equal(zoo_get_children(zh, leases, 0, &sv), ZOK);
	char victim[512] = "";
	for (int i = 0; i < sv.count; i++)
		if (strcmp(sv.data[i], mine) != 0)
			snprintf(victim, sizeof victim, "%s/%s", leases, sv.data[i]);
	deallocate_String_vector(&sv);
	assert_true(victim[0] != 0);
	assert_int_equal(zoo_delete(zh, victim, -1), ZOK);
	assert_int_equal(h_latch_count(w.done), 0);

	CHECK_OK(zkl_lease_release(la));
	assert_true(h_latch_wait(w.done, 20000));
	pthread_join(th, NULL);
	CHECK_OK(w.rc);
	assert_true(zkl_lease_is_held(w.leases[0]));
	assert_string_not_equal(zkl_lease_path(w.leases[0]), victim);
	assert_int_equal(nkids(leases), 1);
	CHECK_OK(zkl_lease_release(w.leases[0]));
	assert_int_equal(nkids(leases), 0);
	assert_int_equal(nkids(sub(path, "locks")), 0);
	/* No lease is left: a new one can be taken. */
	zkl_lease *again;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &again));
	CHECK_OK(zkl_lease_release(again));
	zkl_lease_free(again);
	zkl_lease_free(w.leases[0]);
	zkl_lease_free(la);
	h_latch_free(w.done);
	zookeeper_close(zh);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a cancelled waiter leaves nothing ---- */

static void test_cancel(void **state)
{
	(void)state;
	const char *path = h_path("sem-cancel");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	zkl_lease *la;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &la));
	/* Two waiters on one handle: one with its lease made, one queued behind it. */
	static struct taker w[2];
	pthread_t th[2];
	for (int i = 0; i < 2; i++) {
		w[i] = (struct taker){ .s = sb, .n = 1, .done = h_latch_new() };
		pthread_create(&th[i], NULL, taker_thread, &w[i]);
	}
	wait_children(sub(path, "leases"), 2);
	wait_children(sub(path, "locks"), 2);
	zkl_semaphore_cancel(sb);
	for (int i = 0; i < 2; i++) {
		assert_true(h_latch_wait(w[i].done, 20000));
		pthread_join(th[i], NULL);
		CHECK_RC(ZKL_ECANCELED, w[i].rc);
		assert_null(w[i].leases[0]);
		h_latch_free(w[i].done);
	}
	assert_int_equal(nkids(sub(path, "leases")), 1);
	assert_int_equal(nkids(sub(path, "locks")), 0);
	assert_true(zkl_lease_is_held(la));
	CHECK_OK(zkl_lease_release(la));
	/* The handle still works after a cancel. */
	zkl_lease *lb;
	CHECK_OK(zkl_semaphore_acquire(sb, 1, 5000, &lb));
	CHECK_OK(zkl_lease_release(lb));
	zkl_lease_free(lb);
	zkl_lease_free(la);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
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
	w = (struct taker){ .s = sb, .n = 1, .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, taker_thread, &w);
	wait_children(sub(path, "leases"), 2);
	assert_int_equal(h_latch_count(w.done), 0);

	CHECK_OK(zkl_shared_count_set(x, count, 2));
	assert_true(h_latch_wait(w.done, 20000));
	pthread_join(th, NULL);
	CHECK_OK(w.rc);
	assert_true(zkl_lease_is_held(la));
	assert_true(zkl_lease_is_held(w.leases[0]));
	assert_int_equal(nkids(sub(path, "leases")), 2);
	assert_int_equal(zkl_semaphore_max(sa), 2);
	CHECK_OK(zkl_shared_count_get(a, count, &v));
	assert_int_equal(v, 2);
	/* Curator's SharedCount format: a 4-byte big-endian int. */
	zhandle_t *zh = raw_open();
	char buf[16];
	int len = sizeof buf;
	assert_int_equal(zoo_get(zh, count, 0, buf, &len, NULL), ZOK);
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "\0\0\0\2", 4);
	zookeeper_close(zh);
	/* An existing count is not reset by a new handle's initial value. */
	CHECK_OK(zkl_semaphore_new_shared(&sx, x, path, count, 7));
	assert_int_equal(zkl_semaphore_max(sx), 2);
	zkl_lease *lx = NULL;
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sx, 1, 300, &lx));

	CHECK_OK(zkl_lease_release(la));
	CHECK_OK(zkl_lease_release(w.leases[0]));
	zkl_lease_free(la);
	zkl_lease_free(w.leases[0]);
	h_latch_free(w.done);
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
	assert_int_equal(nkids(sub(path, "leases")), 3);
	zkl_semaphore_free(sb); /* releases and frees lb too */
	assert_int_equal(nkids(sub(path, "leases")), 0);
	zkl_client_close(b);
}

/* ---- leases are reported lost with their session ---- */

struct lost {
	struct counter n;
	int bad;
	zkl_semaphore *s;
	zkl_lease *l[2];
};

static void on_lost(zkl_semaphore *s, zkl_lease *lease, int reason, void *data)
{
	struct lost *lo = data;
	if (s != lo->s || reason != ZKL_ELOST || (lease != lo->l[0] && lease != lo->l[1]))
		__atomic_add_fetch(&lo->bad, 1, __ATOMIC_SEQ_CST);
	counter_add(&lo->n, 1);
}

static void test_lost_on_expiry(void **state)
{
	(void)state;
	const char *path = h_path("sem-lost");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 2));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 2));
	static struct lost lo;
	memset(&lo, 0, sizeof lo);
	counter_init(&lo.n);
	lo.s = sa;
	CHECK_OK(zkl_semaphore_on_lost(sa, on_lost, &lo));
	CHECK_OK(zkl_semaphore_acquire(sa, 2, 5000, lo.l));
	zkl_lease *lb[2] = {0};
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, 0, lb));

	h_expire(a);
	assert_true(counter_wait_eq(&lo.n, 2, 20000));
	assert_int_equal(lo.bad, 0);
	for (int i = 0; i < 2; i++) {
		assert_false(zkl_lease_is_held(lo.l[i]));
		assert_int_equal(zkl_lease_token(lo.l[i]), ZKL_ENOTHELD);
	}
	CHECK_OK(zkl_semaphore_acquire(sb, 2, 5000, lb));
	CHECK_RC(ZKL_ELOST, zkl_lease_release(lo.l[0]));
	CHECK_RC(ZKL_ELOST, zkl_lease_release(lo.l[1]));
	CHECK_OK(zkl_lease_release(lb[0]));
	CHECK_OK(zkl_lease_release(lb[1]));
	/* The old client takes leases again on its new session. */
	zkl_lease *again;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 5000, &again));
	CHECK_OK(zkl_lease_release(again));
	zkl_lease_free(again);
	assert_int_equal(counter_get(&lo.n), 2);
	for (int i = 0; i < 2; i++) {
		zkl_lease_free(lo.l[i]);
		zkl_lease_free(lb[i]);
	}
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- participants lists the holders ---- */

static void test_participants(void **state)
{
	(void)state;
	const char *path = h_path("sem-participants");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 3));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 3));
	zkl_participant *ps;
	size_t n = 99;
	CHECK_OK(zkl_semaphore_participants(sa, &ps, &n));
	assert_int_equal(n, 0);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_semaphore_set_data(sb, "worker-b", 8));
	zkl_lease *la[2], *lb;
	CHECK_OK(zkl_semaphore_acquire(sa, 2, 5000, la));
	CHECK_OK(zkl_semaphore_acquire(sb, 1, 5000, &lb));
	CHECK_OK(zkl_semaphore_participants(sa, &ps, &n));
	assert_int_equal(n, 3);
	char host[256], want[300];
	gethostname(host, sizeof host);
	snprintf(want, sizeof want, "%s:%ld", host, (long)getpid());
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
	assert_string_equal(ps[0].data, want);
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lease_release(la[1]));
	CHECK_OK(zkl_semaphore_participants(sb, &ps, &n));
	assert_int_equal(n, 2);
	zkl_participants_free(ps, n);
	zkl_lease_free(la[0]);
	zkl_lease_free(la[1]);
	zkl_lease_free(lb);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_simple),
		cmocka_unit_test(test_simple3),
		cmocka_unit_test(test_acquire_many),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_no_orphaned_nodes),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_shared_count_increase),
		cmocka_unit_test(test_client_close),
		cmocka_unit_test(test_release_one_at_a_time),
		cmocka_unit_test(test_release_in_chunks),
		cmocka_unit_test(test_lost_on_expiry),
	};
	return H_RUN(tests);
}
