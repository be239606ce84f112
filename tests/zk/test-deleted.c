/* A lock node deleted behind its holder's back (an operator "clearing a stuck lock" in
 * ZooKeeper's shell): on every kind the holder is told as soon as the server says so (its
 * lost callback, with ZKL_EDELETED, whose text says the node was deleted, not that the
 * session is gone; is_held false, release ZKL_ELOST), and the next contender holds. The
 * holder's own release is never taken for such a loss. */
#include <stdio.h>
#include <string.h>

#include "harness.h"

struct lost_rec {
	h_counter calls;
	int reason;
	int64_t at;
};

static void rec_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	struct lost_rec *r = data;
	r->reason = reason;
	r->at = zkl_monotonic_ms();
	h_counter_add(&r->calls, 1);
}


/* la is held by one client (taken here, or already: held), lb waits on another. node is
 * la's node, deleted from outside: la is told with reason, is_held turns false, release
 * says ZKL_ELOST, and lb holds. Then lb's own release is no loss: lb takes the lock once
 * more (the watch event of a deletion reaches its client before that answer), and its
 * lost callback never ran. */
static void deleted_case(zkl_lock *la, zkl_lock *lb, const char *node, int reason)
{
	struct lost_rec ra = { .reason = 0 }, rb = { .reason = 0 };
	h_counter_init(&ra.calls);
	h_counter_init(&rb.calls);
	CHECK_OK(zkl_lock_on_lost(la, rec_lost, &ra));
	CHECK_OK(zkl_lock_on_lost(lb, rec_lost, &rb));
	assert_true(zkl_lock_is_held(la));
	struct h_acquire w = { .rc = 1 };
	h_counter_init(&w.done);
	CHECK_OK(zkl_lock_acquire_async(lb, -1, h_acquired, &w));
	char queued[ZKL_NODE_MAX];
	h_node_known(lb, queued, sizeof queued);
	assert_int_equal(h_counter_get(&w.done), 0);

	int64_t t0 = zkl_monotonic_ms();
	h_delete(node);
	assert_true(h_counter_wait(&ra.calls, 1, 10000));
	assert_int_equal(ra.reason, reason);
	if (reason == ZKL_EDELETED)
		assert_non_null(strstr(zkl_strerror(ra.reason), "node was deleted"));
	assert_false(zkl_lock_is_held(la));
	assert_true(h_counter_wait(&w.done, 1, 10000));
	CHECK_OK(w.rc);
	assert_true(zkl_lock_is_held(lb));
	print_message("# told %lld ms after the delete\n", (long long)(ra.at - t0));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(la));
	assert_false(zkl_lock_is_held(la));

	CHECK_OK(zkl_lock_release(lb));
	CHECK_OK(zkl_lock_acquire(lb, 10000));
	CHECK_OK(zkl_lock_release(lb));
	assert_int_equal(h_counter_get(&rb.calls), 0);
	assert_int_equal(h_counter_get(&ra.calls), 1);
	CHECK_OK(zkl_lock_on_lost(la, NULL, NULL));
	CHECK_OK(zkl_lock_on_lost(lb, NULL, NULL));
	h_counter_destroy(&ra.calls);
	h_counter_destroy(&rb.calls);
	h_counter_destroy(&w.done);
}

/* Takes la and returns its node in node. */
static void take(zkl_lock *la, char *node, size_t size)
{
	CHECK_OK(zkl_lock_acquire(la, 10000));
	assert_true(zkl_lock_node(la, node, size) > 0);
	assert_int_equal(h_exists(node), 1);
}

static void test_mutex(void **state)
{
	(void)state;
	h_pair p;
	h_pair_open(&p, "deleted-mutex");
	char node[ZKL_NODE_MAX];
	take(p.la, node, sizeof node);
	deleted_case(p.la, p.lb, node, ZKL_EDELETED);
	/* And again on the same handles: the next hold is watched as well. */
	take(p.la, node, sizeof node);
	deleted_case(p.la, p.lb, node, ZKL_EDELETED);
	h_pair_close(&p);
}

static void test_rwlock(void **state)
{
	(void)state;
	const char *path = h_path("deleted-rwlock");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_rwlock *ra, *rb;
	CHECK_OK(zkl_rwlock_new(&ra, a, path));
	CHECK_OK(zkl_rwlock_new(&rb, b, path));
	zkl_lock *wa = zkl_mutex_lock(zkl_rwlock_write(ra));
	zkl_lock *rda = zkl_mutex_lock(zkl_rwlock_read(ra));
	zkl_lock *wb = zkl_mutex_lock(zkl_rwlock_write(rb));
	char node[ZKL_NODE_MAX];
	/* The write half, with a writer waiting. */
	take(wa, node, sizeof node);
	deleted_case(wa, wb, node, ZKL_EDELETED);
	/* The read half, with a writer waiting. */
	take(rda, node, sizeof node);
	deleted_case(rda, wb, node, ZKL_EDELETED);
	zkl_rwlock_free(ra);
	zkl_rwlock_free(rb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void test_semaphore(void **state)
{
	(void)state;
	const char *path = h_path("deleted-semaphore");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	zkl_lock *la = zkl_semaphore_lock(sa), *lb = zkl_semaphore_lock(sb);
	char node[ZKL_NODE_MAX];
	/* A lease of the view. */
	take(la, node, sizeof node);
	deleted_case(la, lb, node, ZKL_EDELETED);

	/* A lease of zkl_semaphore_acquire(): told on the view's lost callback. */
	zkl_lease *lease;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, 10000, &lease));
	struct lost_rec r = { .reason = 0 };
	h_counter_init(&r.calls);
	CHECK_OK(zkl_lock_on_lost(la, rec_lost, &r));
	struct h_acquire w = { .rc = 1 };
	h_counter_init(&w.done);
	CHECK_OK(zkl_lock_acquire_async(lb, -1, h_acquired, &w));
	char queued[ZKL_NODE_MAX];
	h_node_known(lb, queued, sizeof queued);
	assert_true(zkl_lease_is_held(lease));
	h_delete(zkl_lease_path(lease));
	assert_true(h_counter_wait(&r.calls, 1, 10000));
	assert_int_equal(r.reason, ZKL_EDELETED);
	assert_false(zkl_lease_is_held(lease));
	assert_true(h_counter_wait(&w.done, 1, 10000));
	CHECK_OK(w.rc);
	CHECK_RC(ZKL_ELOST, zkl_lease_release(lease));
	zkl_lease_free(lease);
	CHECK_OK(zkl_lock_release(lb));
	CHECK_OK(zkl_lock_on_lost(la, NULL, NULL));
	h_counter_destroy(&r.calls);
	h_counter_destroy(&w.done);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void test_semaphore_mutex(void **state)
{
	(void)state;
	const char *path = h_path("deleted-semmutex");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore_mutex *sa, *sb;
	CHECK_OK(zkl_semaphore_mutex_new(&sa, a, path));
	CHECK_OK(zkl_semaphore_mutex_new(&sb, b, path));
	zkl_lock *la = zkl_semaphore_mutex_lock(sa), *lb = zkl_semaphore_mutex_lock(sb);
	char node[ZKL_NODE_MAX];
	take(la, node, sizeof node);
	deleted_case(la, lb, node, ZKL_EDELETED);
	zkl_semaphore_mutex_free(sa);
	zkl_semaphore_mutex_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* The leader latch watched its node already: through its view it answers the same way,
 * with its own reason for the loss (ZKL_ENOTHELD: "our node was deleted from outside"). */
static void test_leader(void **state)
{
	(void)state;
	const char *path = h_path("deleted-leader");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_leader *xa, *xb;
	CHECK_OK(zkl_leader_new(&xa, a, path, NULL));
	CHECK_OK(zkl_leader_new(&xb, b, path, NULL));
	zkl_lock *la = zkl_leader_lock(xa), *lb = zkl_leader_lock(xb);
	char node[ZKL_NODE_MAX];
	take(la, node, sizeof node);
	deleted_case(la, lb, node, ZKL_ENOTHELD);
	zkl_leader_free(xa);
	zkl_leader_free(xb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* A member of a multi-lock: the multi-lock is lost as a whole, with the member's reason. */
static void test_multilock(void **state)
{
	(void)state;
	const char *p1 = h_path("deleted-multi-1"), *p2 = h_path("deleted-multi-2");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *m1, *m2, *mb;
	CHECK_OK(zkl_mutex_new(&m1, a, p1));
	CHECK_OK(zkl_mutex_new(&m2, a, p2));
	CHECK_OK(zkl_mutex_new(&mb, b, p2));
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(m1)));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(m2)));
	zkl_lock *la = zkl_multilock_lock(ml);
	CHECK_OK(zkl_lock_acquire(la, 10000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(zkl_mutex_lock(m2), node, sizeof node) > 0);
	deleted_case(la, zkl_mutex_lock(mb), node, ZKL_EDELETED);
	/* The other member was given back with the release: free for anyone. */
	assert_false(zkl_lock_is_held(zkl_mutex_lock(m1)));
	h_wait_children(p1, 0);
	zkl_multilock_free(ml);
	zkl_mutex_free(m1);
	zkl_mutex_free(m2);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* A blocking holder with nobody waiting is told too; re-entry into the lost hold is
 * refused until it is released, and the next hold is the handle's as before. */
static void test_blocking_holder(void **state)
{
	(void)state;
	h_pair p;
	h_pair_open(&p, "deleted-blocking");
	char node[ZKL_NODE_MAX];
	take(p.la, node, sizeof node);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(p.la, h_on_lost, lost));
	h_delete(node);
	assert_true(h_latch_wait(lost, 10000));
	assert_false(zkl_lock_is_held(p.la));
	assert_true(zkl_lock_token(p.la) < 0);
	CHECK_RC(ZKL_ELOST, zkl_lock_acquire(p.la, 0));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(p.la));
	take(p.la, node, sizeof node);
	CHECK_OK(zkl_lock_release(p.la));
	assert_int_equal(h_latch_count(lost), 1);
	CHECK_OK(zkl_lock_on_lost(p.la, NULL, NULL));
	h_latch_free(lost);
	h_pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex),
		cmocka_unit_test(test_rwlock),
		cmocka_unit_test(test_semaphore),
		cmocka_unit_test(test_semaphore_mutex),
		cmocka_unit_test(test_leader),
		cmocka_unit_test(test_multilock),
		cmocka_unit_test(test_blocking_holder),
	};
	return H_RUN(tests);
}
