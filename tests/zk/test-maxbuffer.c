/* What a server cannot read in one request (its jute.maxbuffer, 1,048,575 bytes by
 * default) is refused before it is sent: at once, with ZKL_EINVAL and a message that names
 * the limit, leaving nothing behind, and with the client's other holds untouched (a
 * request the server cannot read would make it close the connection, again and again).
 * The largest request that fits is sent and served, so the measure is exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ZooKeeper's default jute.maxbuffer, and a create's bytes besides its path and data
 * with the open ACL: header 8, path and data lengths 4 + 4, the ACL (count 4, perms 4,
 * "world" 4 + 5, "anyone" 4 + 6), flags 4. */
enum { MAXBUF = 1048575, CREATE_EXTRA = 47 };
/* A lock node's name: "_c_" <uuid> "-" "lock-" (the server adds the sequence number). */
enum { LOCK_NAME = 3 + 36 + 1 + 5 };

/* A path of exactly len bytes under a fresh test path. */
static const char *long_path(const char *test, size_t len)
{
	static char buf[2][ZKL_PATH_MAX + 1];
	static int k;
	char *p = buf[k++ % 2];
	const char *base = h_path(test);
	size_t n = strlen(base);
	assert_true(len > n + 1 && len <= ZKL_PATH_MAX);
	memcpy(p, base, n);
	p[n] = '/';
	memset(p + n + 1, 'x', len - n - 1);
	p[len] = '\0';
	return p;
}

struct states {
	h_counter changes;
};

static void on_state(zkl_client *c, zkl_state st, void *data)
{
	(void)c;
	(void)st;
	h_counter_add(&((struct states *)data)->changes, 1);
}

/* A client holding a mutex on another path, and listening to its states. */
struct holder {
	zkl_client *c;
	zkl_mutex *m;
	struct states st;
};

static void holder_open(struct holder *h)
{
	h->c = h_client(0);
	h_counter_init(&h->st.changes);
	CHECK_OK(zkl_mutex_new(&h->m, h->c, h_path("maxbuf-other")));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(h->m), 10000));
	CHECK_OK(zkl_client_add_listener(h->c, on_state, &h->st));
}

/* The other hold is still held, the client's state never changed, and a request still
 * goes through (the participants of the other lock: one round trip). */
static void holder_check_close(struct holder *h)
{
	zkl_lock *l = zkl_mutex_lock(h->m);
	assert_true(zkl_lock_is_held(l));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	assert_int_equal(n, 1);
	zkl_participants_free(ps, n);
	assert_int_equal(h_counter_get(&h->st.changes), 0);
	assert_int_equal(zkl_client_state(h->c), ZKL_STATE_CONNECTED);
	CHECK_OK(zkl_client_remove_listener(h->c, on_state, &h->st));
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(h->m);
	zkl_client_close(h->c);
	h_counter_destroy(&h->st.changes);
}

static void refused_at_once(int rc, int64_t t0)
{
	int64_t took = zkl_monotonic_ms() - t0;
	CHECK_RC(ZKL_EINVAL, rc);
	assert_non_null(strstr(zkl_last_error(), "jute.maxbuffer"));
	assert_non_null(strstr(zkl_last_error(), "1048575"));
	print_message("# refused in %lld ms: %s\n", (long long)took, zkl_last_error());
	/* No round trip: a copy of a megabyte of data, even under a sanitizer. */
	assert_true(took < 1000);
}

/* A mutex's node: its path (lock path + name) and data, one byte over, and exactly. */
static void test_lock_data(void **state)
{
	(void)state;
	struct holder h;
	holder_open(&h);
	const size_t len = 960;
	const char *path = long_path("maxbuf-lock", len);
	const size_t node = len + 1 + LOCK_NAME;
	const size_t fit = MAXBUF - CREATE_EXTRA - node;
	char *data = calloc(1, fit + 1);
	assert_non_null(data);
	memset(data, 'd', fit + 1);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, h.c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_set_data(l, data, fit + 1));
	int64_t t0 = zkl_monotonic_ms();
	refused_at_once(zkl_lock_acquire(l, -1), t0);
	assert_false(zkl_lock_is_held(l));
	assert_int_equal(h_children(path), -1); /* not even its folder */

	/* Exactly what fits: sent and served. */
	CHECK_OK(zkl_lock_set_data(l, data, fit));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char got[ZKL_NODE_MAX];
	assert_int_equal(zkl_lock_node(l, got, sizeof got), (int)node + 10);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	free(data);
	holder_check_close(&h);
}

static void acquired_never(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	h_counter_add(data, 1);
}

/* The same through the asynchronous acquire: refused by the call, no callback. */
static void test_lock_data_async(void **state)
{
	(void)state;
	struct holder h;
	holder_open(&h);
	const char *path = long_path("maxbuf-async", 1000);
	size_t big = 1047552;
	char *data = calloc(1, big);
	assert_non_null(data);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, h.c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_set_data(l, data, big));
	h_counter calls;
	h_counter_init(&calls);
	int64_t t0 = zkl_monotonic_ms();
	refused_at_once(zkl_lock_acquire_async(l, -1, acquired_never, &calls), t0);
	/* The handle is free for another acquire at once: nothing was under way. */
	CHECK_OK(zkl_lock_set_data(l, "small", 5));
	CHECK_OK(zkl_lock_acquire_async(l, 10000, acquired_never, &calls));
	assert_true(h_counter_wait(&calls, 1, 10000));
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
	assert_int_equal(h_counter_get(&calls), 1);
	zkl_mutex_free(m);
	free(data);
	h_counter_destroy(&calls);
	holder_check_close(&h);
}

/* A semaphore's lease node is two bytes longer than its gate node ("leases/", "lease-"):
 * data that fits the gate and not the lease is refused before the gate is queued. */
static void test_semaphore_lease(void **state)
{
	(void)state;
	struct holder h;
	holder_open(&h);
	const size_t len = 960;
	const char *path = long_path("maxbuf-sem", len);
	const size_t gate = len + strlen("/locks/") + LOCK_NAME;
	const size_t fit_gate = MAXBUF - CREATE_EXTRA - gate;
	char *data = calloc(1, fit_gate);
	assert_non_null(data);
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, h.c, path, 2));
	zkl_lock *l = zkl_semaphore_lock(s);
	CHECK_OK(zkl_lock_set_data(l, data, fit_gate));
	int64_t t0 = zkl_monotonic_ms();
	refused_at_once(zkl_lock_acquire(l, -1), t0);
	zkl_lease *lease;
	t0 = zkl_monotonic_ms();
	refused_at_once(zkl_semaphore_acquire(s, 1, -1, &lease), t0);
	assert_int_equal(h_children(path), -1);
	/* Two bytes less fits the lease too. */
	CHECK_OK(zkl_lock_set_data(l, data, fit_gate - 2));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	CHECK_OK(zkl_lock_release(l));
	zkl_semaphore_free(s);
	free(data);
	holder_check_close(&h);
}

/* A record at a path of ZKL_PATH_MAX bytes: ZKL_RECORD_MAX bytes do not fit, nothing is
 * made (nor its parents); exactly what fits is written, and written over. */
static void test_record(void **state)
{
	(void)state;
	struct holder h;
	holder_open(&h);
	const char *parent = long_path("maxbuf-record", 200);
	char path[ZKL_PATH_MAX + 1];
	snprintf(path, sizeof path, "%s/", parent);
	size_t n = strlen(path);
	memset(path + n, 'r', ZKL_PATH_MAX - n);
	path[ZKL_PATH_MAX] = '\0';
	char *data = calloc(1, ZKL_RECORD_MAX);
	assert_non_null(data);
	int64_t t0 = zkl_monotonic_ms();
	refused_at_once(zkl_record_set(h.c, path, data, ZKL_RECORD_MAX), t0);
	assert_int_equal(h_exists(parent), 0);
	const size_t fit = MAXBUF - CREATE_EXTRA - ZKL_PATH_MAX;
	t0 = zkl_monotonic_ms();
	refused_at_once(zkl_record_set(h.c, path, data, fit + 1), t0);
	assert_int_equal(h_exists(parent), 0);
	CHECK_OK(zkl_record_set(h.c, path, data, fit));
	CHECK_OK(zkl_record_set(h.c, path, data, fit));
	char *back;
	size_t back_len;
	CHECK_OK(zkl_record_get(h.c, path, &back, &back_len, NULL));
	assert_int_equal(back_len, fit);
	free(back);
	h_delete(path);
	/* The record's folders were made as containers: the server removes them once the
	 * record is gone (deleting it here would race that). */
	assert_true(h_wait_deleted(parent, 10000));
	free(data);
	holder_check_close(&h);
}

/* The limit is the client's option: a smaller one refuses sooner, one below 1024 is
 * refused when the client opens. */
static void test_option(void **state)
{
	(void)state;
	zkl_client_options o;
	zkl_client_options_init(&o);
	assert_int_equal(o.max_request, MAXBUF);
	o.servers = h_servers();
	o.max_request = 1023;
	zkl_client *c;
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "max_request"));
	o.max_request = 4096;
	CHECK_OK(zkl_client_open(&c, &o));
	const char *path = h_path("maxbuf-option");
	char data[4096] = {0};
	int64_t t0 = zkl_monotonic_ms();
	CHECK_RC(ZKL_EINVAL, zkl_record_set(c, path, data, sizeof data));
	assert_true(zkl_monotonic_ms() - t0 < 1000);
	assert_non_null(strstr(zkl_last_error(), "4096"));
	CHECK_OK(zkl_record_set(c, path, data, 1024));
	h_delete(path);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_data),
		cmocka_unit_test(test_lock_data_async),
		cmocka_unit_test(test_semaphore_lease),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_option),
	};
	return H_RUN(tests);
}
