/* The shared verbs (zkl_lock) on a real ZooKeeper server: each kind's view, the node it
 * names, and asynchronous acquires of semaphores and semaphore-mutexes. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The one participant of path that holds, or fails the test. */
static void holder_of(zkl_lock *l, char *buf, size_t size)
{
	zkl_participant *p;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &p, &n));
	int holders = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i].holder) {
			snprintf(buf, size, "%s", p[i].path);
			holders++;
		}
	}
	zkl_participants_free(p, n);
	assert_int_equal(holders, 1);
}

static void test_kinds(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("kinds");
	zkl_mutex *m;
	zkl_rwlock *rw;
	zkl_semaphore *s;
	zkl_semaphore_mutex *sm;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	CHECK_OK(zkl_semaphore_new(&s, c, path, 3));
	CHECK_OK(zkl_semaphore_mutex_new(&sm, c, path));
	assert_string_equal(zkl_lock_kind(zkl_mutex_lock(m)), "mutex");
	assert_string_equal(zkl_lock_kind(zkl_mutex_lock(zkl_rwlock_read(rw))), "read");
	assert_string_equal(zkl_lock_kind(zkl_mutex_lock(zkl_rwlock_write(rw))), "write");
	assert_string_equal(zkl_lock_kind(zkl_semaphore_lock(s)), "semaphore");
	assert_string_equal(zkl_lock_kind(zkl_semaphore_mutex_lock(sm)), "semaphore-mutex");
	assert_string_equal(zkl_lock_path(zkl_semaphore_mutex_lock(sm)), path);
	assert_string_equal(zkl_lock_path(zkl_mutex_lock(zkl_rwlock_read(rw))), path);
	/* NULL everywhere: an error that names it, never a crash. */
	assert_null(zkl_mutex_lock(NULL));
	assert_null(zkl_semaphore_lock(NULL));
	assert_null(zkl_semaphore_mutex_lock(NULL));
	assert_null(zkl_lock_kind(NULL));
	assert_null(zkl_lock_path(NULL));
	assert_false(zkl_lock_is_held(NULL));
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(NULL, 0));
	assert_string_equal(zkl_last_error(), "lock is NULL");
	CHECK_RC(ZKL_EINVAL, zkl_lock_release(NULL));
	CHECK_RC(ZKL_EINVAL, zkl_lock_token(NULL));
	char buf[ZKL_NODE_MAX];
	CHECK_RC(ZKL_EINVAL, zkl_lock_node(NULL, buf, sizeof buf));
	CHECK_RC(ZKL_EINVAL, zkl_lock_node(zkl_mutex_lock(m), NULL, 10));
	zkl_lock_cancel(NULL);
	zkl_semaphore_mutex_free(sm);
	zkl_semaphore_free(s);
	zkl_rwlock_free(rw);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* zkl_lock_node names the node the lock holds: the holder the server lists, under the
 * right folder, and nothing once released. */
static void test_node_is_our_own(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("node");
	char want[ZKL_NODE_MAX], got[ZKL_NODE_MAX];
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(l, got, sizeof got));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	int n = zkl_lock_node(l, got, sizeof got);
	assert_int_equal(n, (int)strlen(got));
	holder_of(l, want, sizeof want);
	assert_string_equal(got, want);
	assert_int_equal(strncmp(got, path, strlen(path)), 0);
	CHECK_RC(ZKL_EINVAL, zkl_lock_node(l, got, (size_t)n)); /* no room for the NUL */
	CHECK_OK(zkl_lock_release(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(l, got, sizeof got));
	zkl_mutex_free(m);

	/* A semaphore's view: its lease node, under "<path>/leases". */
	const char *spath = h_path("node-sem");
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, spath, 1));
	l = zkl_semaphore_lock(s);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(l, got, sizeof got));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	assert_true(zkl_lock_node(l, got, sizeof got) > 0);
	holder_of(l, want, sizeof want);
	assert_string_equal(got, want);
	assert_int_equal(strncmp(got, h_sub(spath, "leases/"), strlen(spath) + 8), 0);
	CHECK_OK(zkl_lock_release(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(l, got, sizeof got));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(l));
	zkl_semaphore_free(s);
	zkl_client_close(c);
}

/* The one participant of path that waits, or fails the test. */
static void waiter_of(zkl_lock *l, const char *except, char *buf, size_t size)
{
	zkl_participant *p;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &p, &n));
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (!p[i].holder && (!except || strcmp(p[i].path, except) != 0)) {
			snprintf(buf, size, "%s", p[i].path);
			found++;
		}
	}
	zkl_participants_free(p, n);
	assert_int_equal(found, 1);
}

struct blocked {
	zkl_lock *l;
	int rc;
};

static void *acquire_blocking(void *arg)
{
	struct blocked *b = arg;
	b->rc = zkl_lock_acquire(b->l, 20000);
	return NULL;
}

static void ignore(zkl_lock *l, int rc, void *data)
{
	(void)l;
	*(int *)data = rc;
}

/* While an acquire waits, zkl_lock_node names the node it queued: the asynchronous one's,
 * a blocking one's from another thread, a semaphore's lease node past the gate. */
static void test_node_while_queued(void **state)
{
	(void)state;
	zkl_client *a = h_client(0), *b = h_client(0);
	const char *path = h_path("node-queued");
	zkl_mutex *ma, *mb, *mc;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	CHECK_OK(zkl_mutex_new(&mc, b, path));
	zkl_lock *la = zkl_mutex_lock(ma), *lb = zkl_mutex_lock(mb), *lc = zkl_mutex_lock(mc);
	CHECK_OK(zkl_lock_acquire(la, 5000));
	char got[ZKL_NODE_MAX], want[ZKL_NODE_MAX];
	int async_rc = 1;
	CHECK_OK(zkl_lock_acquire_async(lb, -1, ignore, &async_rc));
	h_wait_children(path, 2);
	waiter_of(la, NULL, want, sizeof want);
	h_node_known(lb, got, sizeof got);
	assert_string_equal(got, want);
	/* A blocking acquire on another thread: its node, seen from this one. */
	struct blocked bl = {lc, 1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, acquire_blocking, &bl), 0);
	h_wait_children(path, 3);
	char mine[ZKL_NODE_MAX];
	waiter_of(la, want, mine, sizeof mine);
	h_node_known(lc, got, sizeof got);
	assert_string_equal(got, mine);
	zkl_lock_cancel(lc);
	pthread_join(th, NULL);
	CHECK_RC(ZKL_ECANCELED, bl.rc);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(lc, got, sizeof got));
	zkl_lock_cancel(lb);
	h_wait_children(path, 1);
	zkl_mutex_free(mb); /* waits for the callback */
	CHECK_RC(ZKL_ECANCELED, async_rc);

	/* A semaphore: the lease node of the acquire waiting at the gate. */
	const char *spath = h_path("node-queued-sem");
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, spath, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, spath, 1));
	zkl_lock *va = zkl_semaphore_lock(sa), *vb = zkl_semaphore_lock(sb);
	CHECK_OK(zkl_lock_acquire(va, 5000));
	async_rc = 1;
	CHECK_OK(zkl_lock_acquire_async(vb, -1, ignore, &async_rc));
	h_wait_children(h_sub(spath, "leases"), 2);
	waiter_of(va, NULL, want, sizeof want);
	h_node_known(vb, got, sizeof got);
	assert_string_equal(got, want);
	zkl_semaphore_free(sb);
	CHECK_RC(ZKL_ECANCELED, async_rc);
	h_wait_children(h_sub(spath, "leases"), 1);
	zkl_semaphore_free(sa);
	zkl_mutex_free(mc);
	zkl_mutex_free(ma);
	zkl_client_close(b);
	zkl_client_close(a);
}

/* A semaphore's view takes one lease per acquire and gives back the last one first. */
static void test_semaphore_view_stacks_leases(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("stack");
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, path, 2));
	zkl_lock *l = zkl_semaphore_lock(s);
	char first[ZKL_NODE_MAX], second[ZKL_NODE_MAX], now[ZKL_NODE_MAX];
	CHECK_OK(zkl_lock_acquire(l, 5000));
	int64_t t1 = zkl_lock_token(l);
	assert_true(zkl_lock_node(l, first, sizeof first) > 0);
	CHECK_OK(zkl_lock_acquire(l, 5000));
	int64_t t2 = zkl_lock_token(l);
	assert_true(t2 > t1);
	assert_true(zkl_lock_node(l, second, sizeof second) > 0);
	assert_string_not_equal(first, second);
	h_wait_children(h_sub(path, "leases"), 2);
	/* Full: a third lease is not to be had. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 0));
	CHECK_OK(zkl_lock_release(l));
	assert_true(zkl_lock_is_held(l));
	assert_true(zkl_lock_node(l, now, sizeof now) > 0);
	assert_string_equal(now, first);
	assert_int_equal(zkl_lock_token(l), t1);
	assert_false(h_exists(second));
	CHECK_OK(zkl_lock_release(l));
	assert_false(zkl_lock_is_held(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_token(l));
	h_wait_children(h_sub(path, "leases"), 0);
	zkl_semaphore_free(s);
	zkl_client_close(c);
}

struct async {
	zkl_lock *l;
	atomic_int calls;
	int rc;
	int64_t token;
	bool held;
	h_latch *done;
};

static void async_init(struct async *a, zkl_lock *l)
{
	memset(a, 0, sizeof *a);
	a->l = l;
	a->done = h_latch_new();
}

static void acquired(zkl_lock *l, int rc, void *data)
{
	struct async *a = data;
	assert_ptr_equal(l, a->l);
	a->rc = rc;
	a->held = zkl_lock_is_held(l);
	a->token = zkl_lock_token(l);
	atomic_fetch_add(&a->calls, 1);
	h_latch_set(a->done);
}

/* Asynchronous leases: two of a semaphore of two at once, a third waits and gets the
 * lease the first gives back; a cancelled one leaves nothing behind. */
static void test_semaphore_async(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("sem-async");
	zkl_semaphore *s[4];
	struct async a[4];
	for (int i = 0; i < 4; i++) {
		CHECK_OK(zkl_semaphore_new(&s[i], c, path, 2));
		async_init(&a[i], zkl_semaphore_lock(s[i]));
	}
	CHECK_OK(zkl_lock_acquire_async(a[0].l, 10000, acquired, &a[0]));
	CHECK_OK(zkl_lock_acquire_async(a[1].l, 10000, acquired, &a[1]));
	/* One at a time per handle. */
	CHECK_RC(ZKL_EBUSY, zkl_lock_acquire_async(a[0].l, 10000, acquired, &a[0]));
	assert_true(h_latch_wait(a[0].done, 10000));
	assert_true(h_latch_wait(a[1].done, 10000));
	for (int i = 0; i < 2; i++) {
		CHECK_OK(a[i].rc);
		assert_true(a[i].held);
		assert_true(a[i].token > 0);
	}
	CHECK_RC(ZKL_EBUSY, zkl_lock_acquire_async(a[0].l, 10000, acquired, &a[0]));
	h_wait_children(h_sub(path, "leases"), 2);

	/* The third waits at the gate; the fourth queues behind it and is cancelled. */
	CHECK_OK(zkl_lock_acquire_async(a[2].l, -1, acquired, &a[2]));
	h_wait_children(h_sub(path, "leases"), 3);
	CHECK_OK(zkl_lock_acquire_async(a[3].l, -1, acquired, &a[3]));
	h_wait_children(h_sub(path, "locks"), 2);
	assert_int_equal(atomic_load(&a[2].calls), 0);
	zkl_lock_cancel(a[3].l);
	assert_true(h_latch_wait(a[3].done, 10000));
	CHECK_RC(ZKL_ECANCELED, a[3].rc);
	assert_false(a[3].held);
	h_wait_children(h_sub(path, "locks"), 1);

	/* A lease given back lets the third in, with a newer token. */
	int64_t before = a[1].token;
	CHECK_OK(zkl_lock_release(a[0].l));
	assert_true(h_latch_wait(a[2].done, 10000));
	CHECK_OK(a[2].rc);
	assert_true(a[2].held);
	assert_true(a[2].token > before);
	h_wait_children(h_sub(path, "leases"), 2);
	h_wait_children(h_sub(path, "locks"), 0);

	/* An asynchronous hold is released from any thread, once; then it may start again. */
	CHECK_OK(zkl_lock_release(a[1].l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(a[1].l));
	CHECK_OK(zkl_lock_release(a[2].l));
	h_wait_children(h_sub(path, "leases"), 0);
	for (int i = 0; i < 4; i++) {
		zkl_semaphore_free(s[i]);
		assert_int_equal(atomic_load(&a[i].calls), 1);
		h_latch_free(a[i].done);
	}
	zkl_client_close(c);
}

/* Freeing a semaphore while its asynchronous acquire waits: the callback says
 * ZKL_ECANCELED before the free returns, and nothing is left on the server. */
static void test_semaphore_async_free_while_waiting(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("sem-free");
	zkl_semaphore_mutex *holder, *waiter;
	CHECK_OK(zkl_semaphore_mutex_new(&holder, c, path));
	CHECK_OK(zkl_semaphore_mutex_new(&waiter, c, path));
	CHECK_OK(zkl_lock_acquire(zkl_semaphore_mutex_lock(holder), 5000));
	struct async a;
	async_init(&a, zkl_semaphore_mutex_lock(waiter));
	CHECK_OK(zkl_lock_acquire_async(a.l, -1, acquired, &a));
	h_wait_children(h_sub(path, "leases"), 2);
	zkl_semaphore_mutex_free(waiter);
	assert_int_equal(atomic_load(&a.calls), 1);
	CHECK_RC(ZKL_ECANCELED, a.rc);
	h_wait_children(h_sub(path, "leases"), 1);
	h_wait_children(h_sub(path, "locks"), 0);
	zkl_semaphore_mutex_free(holder);
	h_wait_children(h_sub(path, "leases"), 0);
	h_latch_free(a.done);
	zkl_client_close(c);
}

struct in_callback {
	zkl_lock *l;
	int blocking_rc;
	int release_rc;
	h_latch *done;
};

static void acquire_from_callback(zkl_lock *l, int rc, void *data)
{
	struct in_callback *k = data;
	assert_int_equal(rc, 0);
	k->blocking_rc = zkl_lock_acquire(l, 1000); /* would deadlock: refused at once */
	k->release_rc = zkl_lock_release(l);
	h_latch_set(k->done);
}

/* A semaphore-mutex's asynchronous hold: a blocking acquire from its callback is refused
 * at once, and the callback may release. */
static void test_semaphore_mutex_async_callback(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("sm-callback");
	zkl_semaphore_mutex *sm;
	CHECK_OK(zkl_semaphore_mutex_new(&sm, c, path));
	struct in_callback k = {zkl_semaphore_mutex_lock(sm), 0, -1, h_latch_new()};
	CHECK_OK(zkl_lock_acquire_async(k.l, 5000, acquire_from_callback, &k));
	assert_true(h_latch_wait(k.done, 10000));
	CHECK_RC(ZKL_EDEADLK, k.blocking_rc);
	CHECK_OK(k.release_rc);
	assert_false(zkl_lock_is_held(k.l));
	h_wait_children(h_sub(path, "leases"), 0);
	zkl_semaphore_mutex_free(sm);
	h_latch_free(k.done);
	zkl_client_close(c);
}

struct lost {
	zkl_lock *l;
	atomic_int calls;
	int reason;
	h_latch *done;
};

static void on_lost(zkl_lock *l, int reason, void *data)
{
	struct lost *k = data;
	assert_ptr_equal(l, k->l);
	k->reason = reason;
	atomic_fetch_add(&k->calls, 1);
	h_latch_set(k->done);
}

/* Node data and the lost callback are the view's, whatever the kind. */
static void test_data_and_lost_through_the_view(void **state)
{
	(void)state;
	zkl_client *c = h_client(4000);
	const char *path = h_path("data-lost");
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, path, 2));
	zkl_lock *l = zkl_semaphore_lock(s);
	CHECK_OK(zkl_lock_set_data(l, "job-42", 6));
	struct lost k = {l, 0, 0, h_latch_new()};
	CHECK_OK(zkl_lock_on_lost(l, on_lost, &k));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_path("data-lost-mutex")));
	zkl_lock *ml = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(ml, 5000));
	char node[ZKL_NODE_MAX], data[64];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	assert_int_equal(h_get(node, data, sizeof data), 6);
	assert_memory_equal(data, "job-42", 6);
	h_expire(c);
	assert_true(h_latch_wait(k.done, 20000));
	/* Closed from elsewhere: its node may be told gone before the session is. */
	assert_true(k.reason == ZKL_ELOST || k.reason == ZKL_EDELETED);
	assert_false(zkl_lock_is_held(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_token(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(l, node, sizeof node)); /* gone with its session */
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	assert_int_equal(atomic_load(&k.calls), 1);
	assert_false(zkl_lock_is_held(ml));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_token(ml));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(ml, node, sizeof node));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(ml));
	zkl_mutex_free(m);
	zkl_semaphore_free(s);
	h_latch_free(k.done);
	zkl_client_close(c);
}

/* A multi-lock of a mutex and a semaphore lease: all or nothing. */
static void test_multilock_of_kinds(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *mpath = h_path("ml-mutex"), *spath = h_path("ml-sem");
	zkl_mutex *m, *other;
	zkl_semaphore *s;
	zkl_multilock *ml;
	CHECK_OK(zkl_mutex_new(&m, c, mpath));
	CHECK_OK(zkl_mutex_new(&other, c, mpath));
	CHECK_OK(zkl_semaphore_new(&s, c, spath, 1));
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_semaphore_lock(s)));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(m)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(m)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, NULL));
	CHECK_OK(zkl_multilock_acquire(ml, 5000));
	assert_true(zkl_multilock_is_held(ml));
	assert_true(zkl_lock_is_held(zkl_semaphore_lock(s)));
	CHECK_OK(zkl_multilock_release(ml));
	h_wait_children(h_sub(spath, "leases"), 0);
	/* Someone else holds the mutex: the lease taken first is given back. */
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(other), 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(ml, 300));
	assert_false(zkl_lock_is_held(zkl_semaphore_lock(s)));
	h_wait_children(h_sub(spath, "leases"), 0);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(other)));
	zkl_multilock_free(ml);
	zkl_semaphore_free(s);
	zkl_mutex_free(other);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* One asynchronous acquire's end, for the test's thread to wait for. */
struct ended {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls;
	int rc;
	char error[256];
};

static void on_ended(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct ended *e = data;
	pthread_mutex_lock(&e->mu);
	e->calls++;
	e->rc = rc;
	snprintf(e->error, sizeof e->error, "%s", rc ? zkl_last_error() : "");
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

static void ended_wait(struct ended *e)
{
	pthread_mutex_lock(&e->mu);
	while (e->calls == 0)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
}

/* Every user of a semaphore's path must agree on its count: the count is recorded at
 * the path (as kazoo records it), and a handle asking for another one is refused. */
static void test_semaphore_counts_agree(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("count");
	zkl_semaphore *two, *three;
	zkl_semaphore_mutex *one;
	CHECK_OK(zkl_semaphore_new(&two, c, path, 2));
	CHECK_OK(zkl_semaphore_new(&three, c, path, 3));
	CHECK_OK(zkl_semaphore_mutex_new(&one, c, path));
	CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(two), 5000));
	char data[32];
	int n = h_get(path, data, sizeof data - 1);
	data[n > 0 ? n : 0] = 0;
	assert_string_equal(data, "2");
	CHECK_RC(ZKL_ECOUNT, zkl_lock_acquire(zkl_semaphore_lock(three), 1000));
	assert_non_null(strstr(zkl_last_error(), "records 2 leases"));
	assert_non_null(strstr(zkl_last_error(), "asks for 3"));
	/* The asynchronous start never waits for the server: it reads the count on the
	 * client's loop, and the refusal comes through the callback. */
	struct ended e = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	CHECK_OK(zkl_lock_acquire_async(zkl_semaphore_lock(three), 1000, on_ended, &e));
	ended_wait(&e);
	assert_int_equal(e.calls, 1);
	assert_int_equal(e.rc, ZKL_ECOUNT);
	assert_non_null(strstr(e.error, "records 2 leases"));
	assert_non_null(strstr(e.error, "asks for 3"));
	assert_false(zkl_lock_is_held(zkl_semaphore_lock(three)));
	CHECK_RC(ZKL_ECOUNT, zkl_lock_acquire(zkl_semaphore_mutex_lock(one), 1000));
	assert_non_null(strstr(zkl_last_error(), "asks for 1"));
	h_wait_children(h_sub(path, "leases"), 1); /* nothing of theirs */
	CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(two), 5000)); /* its second lease */
	CHECK_OK(zkl_lock_release(zkl_semaphore_lock(two)));
	CHECK_OK(zkl_lock_release(zkl_semaphore_lock(two)));
	zkl_semaphore_mutex_free(one);
	zkl_semaphore_free(three);
	zkl_semaphore_free(two);

	/* A path that records nothing (Curator's InterProcessSemaphoreV2 leaves its node
	 * empty) takes our count. */
	char empty[64]; /* at the root, which no reaping takes away (the server is the test's) */
	snprintf(empty, sizeof empty, "/count-empty-%d", (int)getpid());
	h_create(empty, "");
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, empty, 4));
	CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(s), 5000));
	n = h_get(empty, data, sizeof data - 1);
	data[n > 0 ? n : 0] = 0;
	assert_string_equal(data, "4");
	CHECK_OK(zkl_lock_release(zkl_semaphore_lock(s)));
	zkl_semaphore_free(s);
	zkl_client_close(c);
}

/* Two hosts configured with different counts arrive at an idle semaphore, in both
 * orders, after an operator set its count: the wrong one is refused whichever comes
 * first, the right one runs, and the server's reaping of the idle folder takes nothing
 * of the count. Then the count is cleared, and the next handle records its own. */
static void test_semaphore_count_set(void **state)
{
	(void)state;
	zkl_client *c = h_client(0), *d = h_client(0);
	const char *path = h_path("count-set");
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_set_count(c, "relative", 2));
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_set_count(c, path, -1));
	CHECK_OK(zkl_semaphore_set_count(c, path, 2));
	for (int order = 0; order < 2; order++) {
		zkl_semaphore *right, *wrong;
		CHECK_OK(zkl_semaphore_new(&right, c, path, 2));
		CHECK_OK(zkl_semaphore_new(&wrong, d, path, 3));
		for (int i = 0; i < 2; i++) {
			if ((i == 0) == (order == 0)) {
				CHECK_RC(ZKL_ECOUNT, zkl_lock_acquire(zkl_semaphore_lock(wrong), 0));
				assert_non_null(strstr(zkl_last_error(), "records 2 leases"));
			} else {
				CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(right), 5000));
				CHECK_OK(zkl_lock_release(zkl_semaphore_lock(right)));
			}
		}
		zkl_semaphore_free(right);
		zkl_semaphore_free(wrong);
		/* Idle: the server reaps its folders, and keeps the count. */
		assert_true(h_wait_deleted(h_sub(path, "leases"), 10000));
		char data[32];
		int n = h_get(path, data, sizeof data - 1);
		data[n > 0 ? n : 0] = 0;
		assert_string_equal(data, "2");
		n = h_get(h_sub(path, ZKL_SEMAPHORE_COUNT_NODE), data, sizeof data - 1);
		data[n > 0 ? n : 0] = 0;
		assert_string_equal(data, "2");
	}
	CHECK_OK(zkl_semaphore_set_count(c, path, 0));
	assert_false(h_exists(h_sub(path, ZKL_SEMAPHORE_COUNT_NODE)));
	zkl_semaphore *three;
	CHECK_OK(zkl_semaphore_new(&three, d, path, 3));
	CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(three), 5000));
	CHECK_OK(zkl_lock_release(zkl_semaphore_lock(three)));
	zkl_semaphore_free(three);
	zkl_client_close(d);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_node_is_our_own),
		cmocka_unit_test(test_node_while_queued),
		cmocka_unit_test(test_semaphore_view_stacks_leases),
		cmocka_unit_test(test_semaphore_async),
		cmocka_unit_test(test_semaphore_async_free_while_waiting),
		cmocka_unit_test(test_semaphore_mutex_async_callback),
		cmocka_unit_test(test_data_and_lost_through_the_view),
		cmocka_unit_test(test_multilock_of_kinds),
		cmocka_unit_test(test_semaphore_counts_agree),
		cmocka_unit_test(test_semaphore_count_set),
	};
	return H_RUN(tests);
}
