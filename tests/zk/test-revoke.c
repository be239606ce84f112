/* Revocation (zkl_mutex_make_revocable, zkl_revoke) on a real ZooKeeper server (run
 * through tests/with-zk), after Curator's TestInterProcessMutex.testRevoking. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Waits until the counter is at least want, at most ms. Returns 1 if it got there. */
static int counter_wait(struct counter *k, int want, int ms)
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
	while (k->n < want && rc == 0)
		rc = pthread_cond_timedwait(&k->cv, &k->mu, &ts);
	int ok = k->n >= want;
	pthread_mutex_unlock(&k->mu);
	return ok;
}

static void wait_queue_len(const char *path, int n)
{
	/* The queue's length is the event: poll the server until it is reached. */
	for (int i = 0; i < 2000; i++) {
		if (h_children(path) == n)
			return;
		usleep(5000);
	}
	fail_msg("queue at %s never reached %d (it has %d)", path, n, h_children(path));
}

/* The full path of the i-th contender in m's queue, copied into buf. */
static void node_at(zkl_mutex *m, size_t i, char *buf, size_t size, int *data_len)
{
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_mutex_participants(m, &ps, &n));
	if (i >= n)
		fail_msg("queue has %zu contenders, wanted #%zu", n, i);
	snprintf(buf, size, "%s", ps[i].path);
	if (data_len)
		*data_len = ps[i].data_len;
	zkl_participants_free(ps, n);
}

/* What a revoke callback did. */
struct revoked {
	struct counter calls;
	int release_rc;       /* of the release it made, if it makes one */
	zkl_mutex *expect;    /* the handle it should be called with */
	int wrong;
	enum { DO_RELEASE, DO_NOTHING, DO_CANCEL } action;
};

static void revoked_init(struct revoked *r, zkl_mutex *m, int action)
{
	memset(r, 0, sizeof *r);
	counter_init(&r->calls);
	r->release_rc = 1;
	r->expect = m;
	r->action = action;
}

static void on_revoke(zkl_mutex *m, void *data)
{
	struct revoked *r = data;
	if (m != r->expect)
		__atomic_add_fetch(&r->wrong, 1, __ATOMIC_SEQ_CST);
	if (r->action == DO_RELEASE)
		r->release_rc = zkl_mutex_release(m);
	else if (r->action == DO_CANCEL)
		zkl_mutex_cancel(m);
	counter_add(&r->calls, 1);
}

/* A thread that acquires, reports, holds until told, then releases. */
struct acq {
	zkl_mutex *m;
	int rc;
	int release_rc;
	h_latch *done;
	h_latch *release;
};

static void *acquire_thread(void *arg)
{
	struct acq *a = arg;
	a->rc = zkl_mutex_acquire(a->m, 30000);
	h_latch_set(a->done);
	if (a->rc == 0) {
		if (a->release)
			h_latch_wait(a->release, 60000);
		a->release_rc = zkl_mutex_release(a->m);
	}
	return NULL;
}

/* ---- a revocable holder releases when asked; the revoker gets the lock ---- */

static void test_revocable_holder(void **state)
{
	(void)state;
	const char *path = h_path("revoke");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	/* static: the callback and thread must not point into a frame a failure left */
	static struct revoked r;
	revoked_init(&r, ma, DO_RELEASE);
	CHECK_OK(zkl_mutex_make_revocable(ma, on_revoke, &r));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	char node[512];
	int data_len = -1;
	node_at(mb, 0, node, sizeof node, &data_len);
	assert_int_equal(data_len, 0); /* revocable nodes carry no data */

	static struct acq w;
	w = (struct acq){ .m = mb, .done = h_latch_new(), .release = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, acquire_thread, &w);
	wait_queue_len(path, 2);
	assert_int_equal(counter_get(&r.calls), 0);

	CHECK_OK(zkl_revoke(b, node));
	assert_true(counter_wait(&r.calls, 1, 20000));
	CHECK_OK(r.release_rc); /* released from the callback's thread */
	assert_true(h_latch_wait(w.done, 20000));
	CHECK_OK(w.rc);
	assert_int_equal(r.wrong, 0);
	assert_false(zkl_mutex_is_held(ma));
	assert_false(h_exists(node));
	h_latch_set(w.release);
	pthread_join(th, NULL);
	CHECK_OK(w.release_rc);
	assert_true(h_children(path) <= 0);
	/* Once per request. */
	assert_int_equal(counter_get(&r.calls), 1);
	/* The revoked handle takes the lock again. */
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	CHECK_OK(zkl_mutex_release(ma));
	assert_int_equal(counter_get(&r.calls), 1);
	h_latch_free(w.done);
	h_latch_free(w.release);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a holder that is not revocable ignores the request ---- */

static void test_not_revocable_ignores(void **state)
{
	(void)state;
	const char *path = h_path("revoke-ignored");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	char node[512];
	int data_len = -1;
	node_at(mb, 0, node, sizeof node, &data_len);
	assert_true(data_len > 0); /* the default "<host>:<pid>" */
	CHECK_OK(zkl_revoke(b, node));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 500));
	assert_true(zkl_mutex_is_held(ma));
	assert_true(h_exists(node));
	/* The request was written all the same. */
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_mutex_participants(mb, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, "__REVOKE__");
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_mutex_release(ma));
	CHECK_OK(zkl_mutex_acquire(mb, 5000));
	CHECK_OK(zkl_mutex_release(mb));
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- revocable nodes have empty data; turning revocation off ---- */

static void test_revocable_data_and_off(void **state)
{
	(void)state;
	const char *path = h_path("revoke-data");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	static struct revoked r;
	revoked_init(&r, ma, DO_RELEASE);
	CHECK_OK(zkl_mutex_set_data(ma, "payload", 7));
	CHECK_OK(zkl_mutex_make_revocable(ma, on_revoke, &r));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	char node[512];
	int data_len = -1;
	node_at(mb, 0, node, sizeof node, &data_len);
	assert_int_equal(data_len, 0);
	CHECK_OK(zkl_mutex_release(ma));
	assert_int_equal(counter_get(&r.calls), 0);

	/* Not revocable any more: a request is ignored. */
	CHECK_OK(zkl_mutex_make_revocable(ma, NULL, NULL));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	node_at(mb, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(b, node));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_mutex_acquire(mb, 500));
	assert_true(zkl_mutex_is_held(ma));
	assert_int_equal(counter_get(&r.calls), 0);
	CHECK_OK(zkl_mutex_release(ma));
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- revoking a node that does not exist ---- */

static void test_revoke_missing(void **state)
{
	(void)state;
	const char *path = h_path("revoke-missing");
	zkl_client *a = h_client(0);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	char node[600];
	snprintf(node, sizeof node, "%s/_c_00000000-0000-4000-8000-000000000000-lock-0000000001",
	         path);
	CHECK_RC(ZKL_ENOTHELD, zkl_revoke(a, node));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	node_at(ma, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_mutex_release(ma));
	CHECK_RC(ZKL_ENOTHELD, zkl_revoke(a, node)); /* released: gone */
	assert_false(h_exists(node));                 /* and not created by the attempt */
	CHECK_RC(ZKL_EINVAL, zkl_revoke(a, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_revoke(NULL, node));
	zkl_mutex_free(ma);
	zkl_client_close(a);
}

/* ---- every request calls the callback once ---- */

static void test_once_per_request(void **state)
{
	(void)state;
	const char *path = h_path("revoke-twice");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	static struct revoked r;
	revoked_init(&r, ma, DO_NOTHING);
	CHECK_OK(zkl_mutex_make_revocable(ma, on_revoke, &r));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	char node[512];
	node_at(ma, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(b, node));
	assert_true(counter_wait(&r.calls, 1, 20000));
	assert_true(zkl_mutex_is_held(ma)); /* the callback kept it */
	CHECK_OK(zkl_revoke(b, node));
	assert_true(counter_wait(&r.calls, 2, 20000));
	assert_true(zkl_mutex_is_held(ma));
	CHECK_OK(zkl_mutex_release(ma));
	assert_false(h_exists(node));
	assert_int_equal(counter_get(&r.calls), 2);
	assert_int_equal(r.wrong, 0);
	zkl_mutex_free(ma);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a queued waiter is told too (here it gives up) ---- */

static void test_revoke_waiter(void **state)
{
	(void)state;
	const char *path = h_path("revoke-waiter");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	static struct revoked r;
	revoked_init(&r, mb, DO_CANCEL);
	CHECK_OK(zkl_mutex_make_revocable(mb, on_revoke, &r));
	CHECK_OK(zkl_mutex_acquire(ma, 5000));
	static struct acq w;
	w = (struct acq){ .m = mb, .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, acquire_thread, &w);
	wait_queue_len(path, 2);
	char node[512];
	node_at(ma, 1, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(a, node));
	assert_true(counter_wait(&r.calls, 1, 20000));
	assert_true(h_latch_wait(w.done, 20000));
	pthread_join(th, NULL);
	CHECK_RC(ZKL_ECANCELED, w.rc);
	assert_int_equal(h_children(path), 1);
	assert_true(zkl_mutex_is_held(ma));
	CHECK_OK(zkl_mutex_release(ma));
	assert_int_equal(counter_get(&r.calls), 1);
	h_latch_free(w.done);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- the write half of a read-write lock is revocable too ---- */

static void test_rwlock_write_revocable(void **state)
{
	(void)state;
	const char *path = h_path("revoke-rw");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_rwlock *ra, *rb;
	CHECK_OK(zkl_rwlock_new(&ra, a, path));
	CHECK_OK(zkl_rwlock_new(&rb, b, path));
	zkl_mutex *wa = zkl_rwlock_write(ra);
	static struct revoked r;
	revoked_init(&r, wa, DO_RELEASE);
	CHECK_OK(zkl_mutex_make_revocable(wa, on_revoke, &r));
	CHECK_OK(zkl_mutex_acquire(wa, 5000));
	char node[512];
	int data_len = -1;
	node_at(zkl_rwlock_read(rb), 0, node, sizeof node, &data_len);
	assert_non_null(strstr(node, "__WRIT__"));
	assert_int_equal(data_len, 0);

	static struct acq rd;
	rd = (struct acq){ .m = zkl_rwlock_read(rb), .done = h_latch_new(),
	                   .release = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, acquire_thread, &rd);
	wait_queue_len(path, 2);
	CHECK_OK(zkl_revoke(b, node));
	assert_true(counter_wait(&r.calls, 1, 20000));
	CHECK_OK(r.release_rc); /* released from the callback's thread */
	assert_true(h_latch_wait(rd.done, 20000));
	CHECK_OK(rd.rc);
	assert_int_equal(r.wrong, 0);
	assert_false(zkl_mutex_is_held(wa));
	assert_false(h_exists(node));
	h_latch_set(rd.release);
	pthread_join(th, NULL);
	CHECK_OK(rd.release_rc);
	assert_int_equal(counter_get(&r.calls), 1);
	h_latch_free(rd.done);
	h_latch_free(rd.release);
	zkl_rwlock_free(ra);
	zkl_rwlock_free(rb);
	zkl_client_close(a);
	zkl_client_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_revoke_missing),
		cmocka_unit_test(test_revocable_holder),
		cmocka_unit_test(test_not_revocable_ignores),
		cmocka_unit_test(test_revocable_data_and_off),
		cmocka_unit_test(test_once_per_request),
		cmocka_unit_test(test_revoke_waiter),
		cmocka_unit_test(test_rwlock_write_revocable),
	};
	return H_RUN(tests);
}
