/* zkl_lock_keep() on a real ZooKeeper server (run through tests/with-zk, whose server has
 * extended types and checks its TTL nodes every 100 ms): a held mutex, write lock or
 * kazoo-named mutex handed to a TTL node in its own place in the queue, which outlives
 * the session, keeps other contenders out, and goes when deleted or when its time is up;
 * the kinds and arguments it refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The part of a node path after its last '/'. */
static const char *name_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* The node's name from its marker on ("-lock-0000000003", "__lock__0000000003"). */
static const char *tail_of(const char *path, const char *marker)
{
	const char *t = strstr(name_of(path), marker);
	assert_non_null(t);
	return t;
}

static void keep_and_check(zkl_client *c, zkl_lock *l, const char *path, const char *marker,
                           char *kept, size_t size)
{
	char held[ZKL_NODE_MAX];
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_lock_node(l, held, sizeof held) > 0);
	CHECK_OK(zkl_lock_keep(l, 600000, "maintenance", 11, kept, size));
	(void)c;
	/* In its place: the same folder and number, another name; ours released. */
	assert_int_equal(strncmp(kept, path, strlen(path)), 0);
	assert_string_equal(tail_of(kept, marker), tail_of(held, marker));
	assert_string_not_equal(kept, held);
	assert_false(zkl_lock_is_held(l));
	assert_int_equal(h_exists(held), 0);
	char data[32];
	assert_int_equal(h_get(kept, data, sizeof data), 11);
	assert_memory_equal(data, "maintenance", 11);
}

/* A mutex's hold kept: another contender times out, the same handle too; the kept node
 * outlives the client; deleting it lets the next one in. */
static void test_mutex(void **state)
{
	(void)state;
	const char *path = h_path("keep-mutex");
	zkl_client *c = h_client(0);
	zkl_mutex *m, *other;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_keep(l, 1000, NULL, 0, NULL, 0));
	char kept[ZKL_NODE_MAX];
	keep_and_check(c, l, path, "-lock-", kept, sizeof kept);
	assert_non_null(strstr(name_of(kept), "_c_"));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 0));
	zkl_mutex_free(m);
	zkl_client_close(c);

	/* Another session: still held. */
	c = h_client(0);
	assert_int_equal(h_exists(kept), 1);
	CHECK_OK(zkl_mutex_new(&other, c, path));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(zkl_mutex_lock(other), 300));
	CHECK_OK(zkl_record_delete(c, kept));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(other), 10000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(other)));
	zkl_mutex_free(other);
	zkl_client_close(c);
}

/* Its time up, the server deletes the node and a waiter gets in. */
static void test_expires(void **state)
{
	(void)state;
	const char *path = h_path("keep-expires");
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char kept[ZKL_NODE_MAX];
	int64_t t0 = zkl_monotonic_ms();
	CHECK_OK(zkl_lock_keep(l, 1000, NULL, 0, kept, sizeof kept));
	/* A waiter queued behind it gets the lock once the server has deleted it. */
	CHECK_OK(zkl_lock_acquire(l, 30000));
	assert_true(zkl_monotonic_ms() - t0 >= 1000);
	assert_int_equal(h_exists(kept), 0);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* The write half and kazoo's naming keep their markers; a read lock, bad arguments and
 * NULL are refused with the hold kept. */
static void test_kinds_and_arguments(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	char kept[ZKL_NODE_MAX];

	zkl_rwlock *rw;
	const char *rwpath = h_path("keep-rw");
	CHECK_OK(zkl_rwlock_new(&rw, c, rwpath));
	keep_and_check(c, zkl_mutex_lock(zkl_rwlock_write(rw)), rwpath, "__WRIT__", kept,
	               sizeof kept);
	CHECK_OK(zkl_record_delete(c, kept));
	zkl_lock *rl = zkl_mutex_lock(zkl_rwlock_read(rw));
	CHECK_OK(zkl_lock_acquire(rl, 10000));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_keep(rl, 1000, NULL, 0, NULL, 0));
	assert_true(zkl_lock_is_held(rl));
	CHECK_OK(zkl_lock_release(rl));
	zkl_rwlock_free(rw);

	zkl_mutex *k;
	const char *kpath = h_path("keep-kazoo");
	CHECK_OK(zkl_mutex_new(&k, c, kpath));
	CHECK_OK(zkl_mutex_set_naming(k, ZKL_NAMING_KAZOO));
	keep_and_check(c, zkl_mutex_lock(k), kpath, "__lock__", kept, sizeof kept);
	const char *name = name_of(kept);
	assert_int_equal(strspn(name, "0123456789abcdef"), 32);
	CHECK_OK(zkl_record_delete(c, kept));

	zkl_lock *l = zkl_mutex_lock(k);
	CHECK_OK(zkl_lock_acquire(l, 10000));
	CHECK_RC(ZKL_EINVAL, zkl_lock_keep(l, 0, NULL, 0, NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_keep(l, ZKL_KEEP_TTL_MAX + 1, NULL, 0, NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_keep(l, 1000, NULL, 3, NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_keep(NULL, 1000, NULL, 0, NULL, 0));
	assert_true(zkl_lock_is_held(l));
	/* A short buffer gets the path cut, with a NUL. */
	char small[8];
	CHECK_OK(zkl_lock_keep(l, 60000, NULL, 0, small, sizeof small));
	assert_int_equal(strlen(small), 7);
	assert_int_equal(strncmp(small, kpath, 7), 0);
	zkl_mutex_free(k);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex),
		cmocka_unit_test(test_expires),
		cmocka_unit_test(test_kinds_and_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
