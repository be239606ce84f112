/* Records (zkl_record_get, zkl_record_set, zkl_record_delete) on a real ZooKeeper server (run through
 * tests/with-zk): persistent nodes of the application's own, on the client's session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Absent, then written (with its missing parents), read back, replaced, emptied. */
static void test_get_set(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_sub(h_path("record"), "deep/job.last-run");
	char *data = (char *)1;
	size_t len = 7;
	CHECK_RC(ZKL_ENOTHELD, zkl_record_get(c, path, &data, &len, NULL));
	assert_null(data);
	assert_int_equal(len, 0);

	CHECK_OK(zkl_record_set(c, path, "1700000000000 host:12", 21));
	char buf[64];
	assert_int_equal(h_get(path, buf, sizeof buf), 21); /* a plain node, seen from outside */
	int64_t mtime = 0;
	CHECK_OK(zkl_record_get(c, path, &data, &len, &mtime));
	assert_int_equal(len, 21);
	assert_string_equal(data, "1700000000000 host:12"); /* NUL-terminated */
	assert_true(mtime > 1600000000000LL);
	free(data);

	/* Bytes, NULs included, replace the old data whole. */
	CHECK_OK(zkl_record_set(c, path, "a\0b", 3));
	CHECK_OK(zkl_record_get(c, path, &data, &len, NULL));
	assert_int_equal(len, 3);
	assert_memory_equal(data, "a\0b", 4);
	free(data);

	CHECK_OK(zkl_record_set(c, path, NULL, 0));
	CHECK_OK(zkl_record_get(c, path, &data, &len, NULL));
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);

	/* Persistent: it outlives the session that wrote it. */
	zkl_client_close(c);
	c = h_client(0);
	assert_int_equal(h_exists(path), 1);
	h_delete(path);
	CHECK_RC(ZKL_ENOTHELD, zkl_record_get(c, path, &data, &len, NULL));
	zkl_client_close(c);
}

/* Deleted; its folders, which the write made, go with it (containers). */
static void test_delete(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *folder = h_sub(h_path("record-delete"), "deep");
	const char *path = h_sub(folder, "job.last-run");
	CHECK_RC(ZKL_ENOTHELD, zkl_record_delete(c, path));
	CHECK_OK(zkl_record_set(c, path, "x", 1));
	assert_int_equal(h_exists(folder), 1);
	/* A node with children is no record: left alone. */
	CHECK_RC(ZKL_EINVAL, zkl_record_delete(c, folder));
	assert_non_null(strstr(zkl_last_error(), "not a record"));
	assert_int_equal(h_exists(path), 1);
	CHECK_OK(zkl_record_delete(c, path));
	assert_int_equal(h_exists(path), 0);
	char *data = NULL;
	size_t len;
	CHECK_RC(ZKL_ENOTHELD, zkl_record_get(c, path, &data, &len, NULL));
	CHECK_RC(ZKL_ENOTHELD, zkl_record_delete(c, path));
	assert_non_null(strstr(zkl_last_error(), "does not exist"));
	/* The server reaps empty containers every 100 ms in the test configuration. */
	assert_true(h_wait_deleted(folder, 20000));
	CHECK_RC(ZKL_EINVAL, zkl_record_delete(c, "relative"));
	CHECK_RC(ZKL_EINVAL, zkl_record_delete(NULL, path));
	zkl_client_close(c);
}

/* Bad arguments: a clear ZKL_EINVAL, nothing written. */
static void test_bad_arguments(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_sub(h_path("record-bad"), "r");
	char *data;
	size_t len;
	CHECK_RC(ZKL_EINVAL, zkl_record_get(NULL, path, &data, &len, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_record_get(c, "relative", &data, &len, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_record_get(c, path, NULL, &len, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_record_get(c, path, &data, NULL, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_record_set(c, "relative", "x", 1));
	CHECK_RC(ZKL_EINVAL, zkl_record_set(c, path, NULL, 1));
	CHECK_RC(ZKL_EINVAL, zkl_record_set(c, path, "x", (size_t)ZKL_RECORD_MAX + 1));
	assert_non_null(strstr(zkl_last_error(), "at most"));
	assert_int_equal(h_exists(path), 0);
	zkl_client_close(c);
}

/* On the event thread (in a callback) a record call would wait for itself: refused. */
struct on_loop {
	zkl_client *c;
	const char *path;
	int get_rc, set_rc;
	h_latch *done;
};

static void on_acquired(zkl_lock *l, int rc, void *arg)
{
	struct on_loop *o = arg;
	char *data;
	size_t len;
	o->get_rc = zkl_record_get(o->c, o->path, &data, &len, NULL);
	o->set_rc = zkl_record_set(o->c, o->path, "x", 1);
	if (rc == 0)
		zkl_lock_release(l);
	h_latch_set(o->done);
}

static void test_event_thread_refused(void **state)
{
	(void)state;
	static struct on_loop o;
	o.c = h_client(0);
	const char *base = h_path("record-loop");
	o.path = h_sub(base, "r");
	o.done = h_latch_new();
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, o.c, h_sub(base, "lock")));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), 5000, on_acquired, &o));
	assert_true(h_latch_wait(o.done, 10000));
	CHECK_RC(ZKL_EDEADLK, o.get_rc);
	CHECK_RC(ZKL_EDEADLK, o.set_rc);
	zkl_mutex_free(m);
	h_latch_free(o.done);
	zkl_client_close(o.c);
}

/* zkl_record_find: the records under a prefix whose names end in the suffix, sorted, at
 * any depth, in one block; none under a prefix that does not exist. */
static void test_find(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *base = h_path("record-find");
	const char *b = h_sub(base, "jobs/b.last-run");
	const char *a = h_sub(base, "jobs/deep/a.last-run");
	const char *top = h_sub(base, "jobs.last-run"); /* beside the prefix, not under it */
	CHECK_OK(zkl_record_set(c, b, "1", 1));
	CHECK_OK(zkl_record_set(c, a, "2", 1));
	CHECK_OK(zkl_record_set(c, top, "3", 1));
	CHECK_OK(zkl_record_set(c, h_sub(base, "jobs/c.previous"), "4", 1));
	CHECK_OK(zkl_record_set(c, h_sub(base, "jobs/.last-run"), "5", 1)); /* the suffix alone */
	char **paths = NULL;
	size_t n = 9;
	CHECK_OK(zkl_record_find(c, h_sub(base, "jobs"), ".last-run", 5000, &paths, &n));
	assert_int_equal(n, 2);
	assert_string_equal(paths[0], b); /* "b.last-run" < "deep" */
	assert_string_equal(paths[1], a);
	assert_null(paths[2]);
	free(paths);
	CHECK_OK(zkl_record_find(c, base, ".last-run", 0, &paths, &n));
	assert_int_equal(n, 3);
	free(paths);
	CHECK_OK(zkl_record_find(c, h_sub(base, "none"), ".last-run", 5000, &paths, &n));
	assert_int_equal(n, 0);
	assert_non_null(paths);
	assert_null(paths[0]);
	free(paths);
	/* Bad arguments: a code and a message, never a crash. */
	CHECK_RC(ZKL_EINVAL, zkl_record_find(NULL, base, ".last-run", 0, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, "", 0, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, "a/b", 0, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, NULL, 0, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, "relative", ".last-run", 0, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, ".last-run", -2, &paths, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, ".last-run", 0, NULL, &n));
	CHECK_RC(ZKL_EINVAL, zkl_record_find(c, base, ".last-run", 0, &paths, NULL));
	assert_true(strstr(zkl_last_error(), "NULL") != NULL);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_set),
		cmocka_unit_test(test_delete),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_event_thread_refused),
		cmocka_unit_test(test_find),
	};
	return H_RUN(tests);
}
