/* Careless and hostile use of the API on a real ZooKeeper server (run through
 * tests/with-zk, and under AddressSanitizer by `scripts/test --sanitize`): constructors
 * that fail leave *out NULL for the documented cleanup; a client closed inside its own
 * callback, or before its handles, and handles freed inside their own callbacks, are
 * refused or put off, never freed under the library; multi-locks refuse members that
 * would wait for each other; bad options and inputs get an error that names them. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "internal.h"

/* A pointer that must never be freed: what a caller's variable held before. */
static char stale_byte;
#define STALE(type) ((type *)(void *)&stale_byte)

static zkl_client_options options(void)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.connect_timeout_ms = 2000;
	return o;
}

/* Every constructor that fails sets *out to NULL, and every free takes NULL: the
 * documented cleanup (free whatever *out holds) is safe after any failure. */
static void test_failed_new_leaves_null(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("misuse-new");

	zkl_mutex *m = STALE(zkl_mutex);
	CHECK_RC(ZKL_EINVAL, zkl_mutex_new(&m, c, "relative"));
	assert_null(m);
	zkl_mutex_free(m);

	zkl_rwlock *rw = STALE(zkl_rwlock);
	CHECK_RC(ZKL_EINVAL, zkl_rwlock_new(&rw, NULL, path));
	assert_null(rw);
	zkl_rwlock_free(rw);

	zkl_semaphore *s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, c, path, 0));
	assert_null(s);
	s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new(&s, c, "//x", 2));
	assert_null(s);
	/* The count path checked before anything is made. */
	s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, path, "count", 2));
	assert_non_null(strstr(zkl_last_error(), "count path"));
	assert_null(s);
	zkl_semaphore_free(s);
	s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, "bad", h_sub(path, "n"), 2));
	assert_null(s);
	s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, NULL, path, h_sub(path, "n"), 2));
	assert_null(s);
	s = STALE(zkl_semaphore);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_new_shared(&s, c, path, h_sub(path, "n"), 0));
	assert_null(s);
	zkl_semaphore_free(s);

	zkl_semaphore_mutex *sm = STALE(zkl_semaphore_mutex);
	CHECK_RC(ZKL_EINVAL, zkl_semaphore_mutex_new(&sm, c, "/zookeeper/x"));
	assert_null(sm);
	zkl_semaphore_mutex_free(sm);

	zkl_leader *l = STALE(zkl_leader);
	CHECK_RC(ZKL_EINVAL, zkl_leader_new(&l, c, "/a/./b", NULL));
	assert_null(l);
	zkl_leader_free(l);

	zkl_selector *sel = STALE(zkl_selector);
	CHECK_RC(ZKL_EINVAL, zkl_selector_new(&sel, c, path, NULL, NULL, NULL));
	assert_null(sel);
	zkl_selector_free(sel);

	zkl_multilock *ml = STALE(zkl_multilock);
	CHECK_RC(ZKL_EINVAL, zkl_multilock_new(&ml, (enum zkl_multilock_order)42));
	assert_null(ml);
	zkl_multilock_free(ml);

	zkl_client *bad = STALE(zkl_client);
	zkl_client_options o = options();
	o.loss_percent = 10;
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&bad, &o));
	assert_null(bad);
	zkl_client_close(bad);
	bad = STALE(zkl_client);
	CHECK_RC(ZKL_EINVAL, zkl_client_adopt(&bad, NULL, NULL));
	assert_null(bad);
	zkl_client_close(bad);

	zkl_inspection *in = STALE(zkl_inspection);
	CHECK_RC(ZKL_EINVAL, zkl_inspect(c, "x", 0, &in));
	assert_null(in);
	zkl_inspection_free(in);

	zkl_lease_free(NULL);
	zkl_client_close(c);
}

/* ---- a client closed inside its own callback ---- */

struct close_in_cb {
	zkl_client *c;
	int acquired_rc;
	char error[512];
	h_latch *done;
};

static void close_on_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct close_in_cb *k = data;
	k->acquired_rc = rc;
	zkl_client_close(k->c); /* refused: the loop that runs this callback is the client's */
	snprintf(k->error, sizeof k->error, "%s", zkl_last_error());
	h_latch_set(k->done);
}

static void test_close_in_callback_refused(void **state)
{
	(void)state;
	struct close_in_cb k = {.c = h_client(0), .acquired_rc = -1, .done = h_latch_new()};
	const char *path = h_path("misuse-close-cb");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, k.c, path));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), 5000, close_on_acquired, &k));
	assert_true(h_latch_wait(k.done, 10000));
	CHECK_OK(k.acquired_rc);
	assert_non_null(strstr(k.error, "in a callback of the same client"));
	/* The client goes on: the lock is still held, and released as usual. */
	assert_true(zkl_lock_is_held(zkl_mutex_lock(m)));
	assert_int_equal(zkl_client_state(k.c), ZKL_STATE_CONNECTED);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	h_latch_free(k.done);
	zkl_client_close(k.c);
}

/* ---- a client closed before its handles ---- */

static void test_close_before_handles_put_off(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("misuse-close-first");
	zkl_mutex *m;
	zkl_semaphore *s;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_semaphore_new(&s, c, h_sub(path, "sem"), 2));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));
	zkl_client_close(c); /* two handles are open: put off */
	assert_non_null(strstr(zkl_last_error(), "2 recipe handles"));
	assert_non_null(strstr(zkl_last_error(), "put off"));
	/* Nothing ended: the session and its lock node are still there. */
	assert_int_equal(h_children(path), 1);
	assert_true(zkl_lock_is_held(zkl_mutex_lock(m)));
	zkl_semaphore_free(s);
	assert_int_equal(h_children(path), 1);
	/* The last free closes the client: its session, and so its lock node, ends. */
	zkl_mutex_free(m);
	h_wait_children(path, 0);
}

/* ---- handles freed inside their own lost callbacks ---- */

struct free_in_lost {
	void (*free_fn)(void *handle);
	void *handle;
	int reason;
	h_latch *lost;
};

static void free_on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	struct free_in_lost *f = data;
	f->reason = reason;
	f->free_fn(f->handle); /* put off until the report of this loss has ended */
	f->handle = NULL;
	h_latch_set(f->lost);
}

static void free_mutex(void *h) { zkl_mutex_free(h); }
static void free_rwlock(void *h) { zkl_rwlock_free(h); }
static void free_semaphore_mutex(void *h) { zkl_semaphore_mutex_free(h); }
static void free_multilock(void *h) { zkl_multilock_free(h); }

/* After a loss told on c's loop: one blocking call through the loop, which has then
 * finished the turn that told it (and the frees put off to its end). */
static void loop_turn(zkl_client *c, const char *path)
{
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_sub(path, "turn")));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 10000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
}

/* Holds l, expires c's session, and waits for f's lost callback, which frees the
 * handle; then checks that the client has no handle left (its close is not put off). */
static void lose_and_free(zkl_client *c, zkl_lock *l, struct free_in_lost *f,
                          const char *path)
{
	f->lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, free_on_lost, f));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	h_expire(c);
	assert_true(h_latch_wait(f->lost, 20000));
	assert_true(f->reason == ZKL_ELOST || f->reason == ZKL_EDELETED);
	assert_null(f->handle);
	loop_turn(c, path);
	pthread_mutex_lock(&c->mu);
	size_t open = c->nhandles;
	pthread_mutex_unlock(&c->mu);
	assert_int_equal(open, 0);
	h_latch_free(f->lost);
}

static void test_free_in_lost_callback(void **state)
{
	(void)state;
	const char *path = h_path("misuse-free-lost");

	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_sub(path, "m")));
	struct free_in_lost f = {.free_fn = free_mutex, .handle = m};
	lose_and_free(c, zkl_mutex_lock(m), &f, path);
	zkl_client_close(c);

	c = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, h_sub(path, "rw")));
	f = (struct free_in_lost){.free_fn = free_rwlock, .handle = rw};
	lose_and_free(c, zkl_mutex_lock(zkl_rwlock_write(rw)), &f, path);
	zkl_client_close(c);

	c = h_client(0);
	zkl_semaphore_mutex *sm;
	CHECK_OK(zkl_semaphore_mutex_new(&sm, c, h_sub(path, "sm")));
	f = (struct free_in_lost){.free_fn = free_semaphore_mutex, .handle = sm};
	lose_and_free(c, zkl_semaphore_mutex_lock(sm), &f, path);
	zkl_client_close(c);

	/* A multi-lock freed in its own lost callback, which a member's loss leads to: the
	 * member's report is still under way when the multi-lock's runs. */
	c = h_client(0);
	zkl_mutex *a, *b;
	zkl_multilock *ml;
	CHECK_OK(zkl_mutex_new(&a, c, h_sub(path, "ml-a")));
	CHECK_OK(zkl_mutex_new(&b, c, h_sub(path, "ml-b")));
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(a)));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(b)));
	f = (struct free_in_lost){.free_fn = free_multilock, .handle = ml};
	f.lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(zkl_multilock_lock(ml), free_on_lost, &f));
	CHECK_OK(zkl_lock_acquire(zkl_multilock_lock(ml), 5000));
	h_expire(c);
	assert_true(h_latch_wait(f.lost, 20000));
	assert_null(f.handle);
	loop_turn(c, path);
	h_latch_free(f.lost);
	zkl_mutex_free(a);
	zkl_mutex_free(b);
	zkl_client_close(c);
}

/* ---- a selector freed inside its own function ---- */

struct self_free {
	zkl_selector *s;
	h_latch *ran;
};

static void leader_frees_itself(zkl_selector *s, void *data)
{
	struct self_free *k = data;
	assert_ptr_equal(s, k->s);
	zkl_selector_free(s); /* the handle goes once this function has returned */
	h_latch_set(k->ran);
}

static void test_selector_free_in_its_function(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("misuse-selector");
	struct self_free k = {.ran = h_latch_new()};
	CHECK_OK(zkl_selector_new(&k.s, c, path, leader_frees_itself, &k, NULL));
	CHECK_OK(zkl_selector_start(k.s));
	assert_true(h_latch_wait(k.ran, 10000));
	/* Close waits for the selector to be gone, then ends the session. */
	zkl_client_close(c);
	h_wait_children(path, 0);
	h_latch_free(k.ran);
}

/* ---- multi-locks that would wait for themselves ---- */

static void never_called(zkl_lock *l, int rc, void *data)
{
	(void)l, (void)rc, (void)data;
	fail_msg("the callback of an acquire that was refused ran");
}

static void test_multilock_same_path_refused(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("misuse-ml");
	const char *rwpath = h_sub(path, "rw");
	zkl_mutex *a, *b, *other;
	zkl_rwlock *rw, *rw2;
	zkl_multilock *ml;
	CHECK_OK(zkl_mutex_new(&a, c, path));
	CHECK_OK(zkl_mutex_new(&b, c, path));
	CHECK_OK(zkl_mutex_new(&other, c, h_sub(path, "other")));
	CHECK_OK(zkl_rwlock_new(&rw, c, rwpath));
	CHECK_OK(zkl_rwlock_new(&rw2, c, rwpath));
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(a)));
	/* Another handle on a member's path: it would wait for the member. */
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(b)));
	assert_non_null(strstr(zkl_last_error(), path));
	assert_non_null(strstr(zkl_last_error(), "is the node of member"));
	/* Both halves of one read-write lock: the read half is a downgrade of the write
	 * half for the blocking acquire; a half of another one on that path is refused. */
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(zkl_rwlock_write(rw))));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(zkl_rwlock_read(rw))));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(zkl_rwlock_read(rw2))));
	assert_non_null(strstr(zkl_last_error(), rwpath));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(other)));
	/* What was accepted works, at once. */
	CHECK_OK(zkl_lock_acquire(zkl_multilock_lock(ml), 5000));
	CHECK_OK(zkl_lock_release(zkl_multilock_lock(ml)));
	/* The asynchronous acquire has no downgrade (its holds are not a thread's): both
	 * halves would wait for each other, so it is refused before it starts. */
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire_async(zkl_multilock_lock(ml), 2000, never_called,
	                                            NULL));
	assert_non_null(strstr(zkl_last_error(), "both halves"));
	assert_non_null(strstr(zkl_last_error(), rwpath));
	/* In the order added, the read half first would make the write half an upgrade. */
	zkl_multilock *as;
	CHECK_OK(zkl_multilock_new(&as, ZKL_MULTILOCK_AS_ADDED));
	CHECK_OK(zkl_multilock_add(as, zkl_mutex_lock(zkl_rwlock_read(rw))));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(as, zkl_mutex_lock(zkl_rwlock_write(rw))));
	assert_non_null(strstr(zkl_last_error(), "upgrade"));
	zkl_multilock_free(as);
	zkl_multilock_free(ml);
	zkl_rwlock_free(rw2);
	zkl_rwlock_free(rw);
	zkl_mutex_free(other);
	zkl_mutex_free(b);
	zkl_mutex_free(a);
	zkl_client_close(c);
}

/* ---- options ---- */

static void test_session_timeout_range(void **state)
{
	(void)state;
	zkl_client *c = STALE(zkl_client);
	zkl_client_options o = options();
	const int bad[] = {1, 99, ZKL_SESSION_TIMEOUT_MAX + 1, 1 << 30};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		o.session_timeout_ms = bad[i];
		CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
		assert_null(c);
		assert_non_null(strstr(zkl_last_error(), "100..3600000 ms"));
	}
	/* Both ends work; the server settles the value within its own bounds. */
	const int good[] = {ZKL_SESSION_TIMEOUT_MIN, ZKL_SESSION_TIMEOUT_MAX};
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		o.session_timeout_ms = good[i];
		CHECK_OK(zkl_client_open(&c, &o));
		assert_true(zkl_client_session_timeout(c) > 0);
		zkl_client_close(c);
	}
}

static void test_servers_strings(void **state)
{
	(void)state;
	zkl_client *c = NULL;
	zkl_client_options o = options();
	char servers[256];
	const char *port = strrchr(h_servers(), ':') + 1;

	o.servers = "127.0.0.1:99211";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "port \"99211\""));
	assert_non_null(strstr(zkl_last_error(), "1..65535"));
	o.servers = "127.0.0.1:0";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	o.servers = "127.0.0.1";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "no port"));
	snprintf(servers, sizeof servers, "127.0.0.1:%s/apps,127.0.0.2:%s", port, port);
	o.servers = servers;
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "must come last"));
	o.servers = "127.0.0.1:2181,,127.0.0.2:2181";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "empty entry"));
	o.servers = "[::1:2181";
	CHECK_RC(ZKL_EINVAL, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "[IPv6-address]:port"));

	/* A host name nobody can resolve (.invalid never resolves: RFC 2606). */
	o.servers = "no-such-host.invalid:2181";
	CHECK_RC(ZKL_ECONNECT, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "no-such-host.invalid"));
	assert_non_null(strstr(zkl_last_error(), "could not be resolved"));

	/* Several hosts with a chroot at the end, one of them right: connects. */
	snprintf(servers, sizeof servers, "127.0.0.1:1,%s/misuse-chroot", h_servers());
	o.servers = servers;
	CHECK_OK(zkl_client_open(&c, &o));
	zkl_client_close(c);

	/* An IPv6 literal in brackets: the client connects to it (a listener of our own on
	 * ::1 sees the connection; it is no ZooKeeper, so the open then times out). */
	int ls = socket(AF_INET6, SOCK_STREAM, 0);
	assert_true(ls >= 0);
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
	socklen_t alen = sizeof a;
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(ls, 8), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &alen), 0);
	snprintf(servers, sizeof servers, "[::1]:%d", ntohs(a.sin6_port));
	o.servers = servers;
	o.connect_timeout_ms = 300;
	CHECK_RC(ZKL_ECONNECT, zkl_client_open(&c, &o));
	assert_non_null(strstr(zkl_last_error(), "no answer from ZooKeeper at [::1]:"));
	struct pollfd p = {.fd = ls, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 0), 1); /* a connection is waiting */
	close(ls);
}

/* One handle, one client: a second client would take the handle's watcher. */
static void no_watcher(zhandle_t *zh, int type, int st, const char *path, void *ctx)
{
	(void)zh, (void)type, (void)st, (void)path, (void)ctx;
}

static void test_adopt_twice_refused(void **state)
{
	(void)state;
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	zhandle_t *zh = zookeeper_init(h_servers(), no_watcher, 4000, NULL, NULL, 0);
	assert_non_null(zh);
	zkl_client *a = NULL, *b = STALE(zkl_client);
	CHECK_OK(zkl_client_adopt(&a, zh, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_client_adopt(&b, zh, NULL));
	assert_null(b);
	assert_non_null(strstr(zkl_last_error(), "another zklocks client"));
	/* The first still hears its session: it takes a lock. */
	zkl_mutex *m;
	const char *path = h_path("misuse-adopt");
	CHECK_OK(zkl_mutex_new(&m, a, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	zkl_client_close(a);
	/* Once it has let go, another client may have the handle. */
	CHECK_OK(zkl_client_adopt(&b, zh, NULL));
	zkl_client_close(b);
	zookeeper_close(zh);
}

/* ---- inputs ---- */

/* A record under many missing folders is made with all of them. */
static void test_record_deep_parents(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *base = h_path("misuse-record");
	char path[512];
	snprintf(path, sizeof path, "%s/a/b/c/d/e/f/g/h/record", base);
	CHECK_OK(zkl_record_set(c, path, "x", 1));
	char buf[8];
	assert_int_equal(h_get(path, buf, sizeof buf), 1);
	zkl_client_close(c);
}

/* zkl_revoke() writes its marker into lock nodes only. */
static void test_revoke_lock_nodes_only(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("misuse-revoke");
	char buf[64];

	const char *record = h_sub(path, "record");
	CHECK_OK(zkl_record_set(c, record, "keep", 4));
	CHECK_RC(ZKL_EINVAL, zkl_revoke(c, record));
	assert_non_null(strstr(zkl_last_error(), "not a lock node"));
	assert_int_equal(h_get(record, buf, sizeof buf), 4);
	assert_memory_equal(buf, "keep", 4);

	const char *count = h_sub(path, "count");
	CHECK_OK(zkl_shared_count_set(c, count, 7));
	CHECK_RC(ZKL_EINVAL, zkl_revoke(c, count));
	int32_t v = 0;
	CHECK_OK(zkl_shared_count_get(c, count, &v));
	assert_int_equal(v, 7);

	/* A persistent node named like a lock node is no lock node either. */
	const char *fake = h_sub(path, "x-lock-0000000001");
	h_create(fake, "data");
	CHECK_RC(ZKL_EINVAL, zkl_revoke(c, fake));
	assert_int_equal(h_get(fake, buf, sizeof buf), 4);

	/* A lock's folder, and its holder's node. */
	const char *lock = h_sub(path, "lock");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, lock));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));
	CHECK_RC(ZKL_EINVAL, zkl_revoke(c, lock));
	char node[512];
	assert_true(zkl_lock_node(zkl_mutex_lock(m), node, sizeof node) > 0);
	CHECK_OK(zkl_revoke(c, node));
	assert_int_equal(h_get(node, buf, sizeof buf), 10);
	assert_memory_equal(buf, "__REVOKE__", 10);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	CHECK_RC(ZKL_ENOTHELD, zkl_revoke(c, node));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* zkl_lock_set_data() takes what its header says, and not a byte more. */
static void test_set_data_limit(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_path("misuse-data")));
	char *big = calloc(1, 1024 * 1024 + 1);
	assert_non_null(big);
	CHECK_OK(zkl_lock_set_data(zkl_mutex_lock(m), big, 1047552));
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_data(zkl_mutex_lock(m), big, 1047553));
	assert_non_null(strstr(zkl_last_error(), "1047552"));
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_data(zkl_mutex_lock(m), big, 1024 * 1024));
	free(big);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- zkl_client_process() from a second thread ---- */

struct second {
	zkl_client *c;
	int rc;
	char error[256];
};

static void *process_once(void *arg)
{
	struct second *k = arg;
	k->rc = zkl_client_process(k->c);
	snprintf(k->error, sizeof k->error, "%s", zkl_last_error());
	return NULL;
}

struct in_process {
	zkl_client *c;
	int second_rc;
	h_latch *done;
};

static void second_on_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	struct in_process *k = data;
	struct second s = {.c = k->c, .rc = 1};
	h_in_thread(process_once, &s);
	k->second_rc = s.rc;
	h_latch_set(k->done);
}

static void test_process_second_thread_busy(void **state)
{
	(void)state;
	zkl_client_options o = options();
	o.external_loop = true;
	zkl_client *c;
	CHECK_OK(zkl_client_open(&c, &o));
	/* While the loop's thread runs a callback. */
	struct in_process k = {.c = c, .second_rc = 1, .done = h_latch_new()};
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_path("misuse-process")));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), 5000, second_on_acquired, &k));
	while (!h_latch_wait(k.done, 0)) {
		struct pollfd p = {.fd = zkl_client_loop_fd(c), .events = POLLIN};
		poll(&p, 1, zkl_client_loop_timeout(c));
		CHECK_OK(zkl_client_process(c));
	}
	CHECK_RC(ZKL_EBUSY, k.second_rc);
	/* While the loop's thread is in the middle of a turn (it holds the client's mutex
	 * most of the time): told at once, not made to wait for the turn. */
	pthread_mutex_lock(&c->mu);
	atomic_store(&c->processing, true);
	struct second s = {.c = c, .rc = 1};
	h_in_thread(process_once, &s);
	atomic_store(&c->processing, false);
	pthread_mutex_unlock(&c->mu);
	CHECK_RC(ZKL_EBUSY, s.rc);
	assert_non_null(strstr(s.error, "another thread"));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	h_latch_free(k.done);
	zkl_client_close(c);
}

/* ---- what a semaphore path records, read one way by all ---- */

static int inspected_limit(zkl_client *c, const char *path)
{
	zkl_inspection *in;
	CHECK_OK(zkl_inspect(c, path, 5000, &in));
	int limit = zkl_inspection_lock(in, 0)->limit;
	zkl_inspection_free(in);
	return limit;
}

static void test_semaphore_count_one_rule(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *const records[] = {"+3", " 3", "3 ", "03x"};
	for (size_t i = 0; i < sizeof records / sizeof *records; i++) {
		const char *path = h_path("misuse-count");
		h_create(path, records[i]);
		/* Not a count, to the inspection ... */
		assert_int_equal(inspected_limit(c, path), 0);
		/* ... nor to the semaphore, which records its own over it. */
		zkl_semaphore *s;
		CHECK_OK(zkl_semaphore_new(&s, c, path, 2));
		CHECK_OK(zkl_lock_acquire(zkl_semaphore_lock(s), 5000));
		char buf[16];
		int n = h_get(path, buf, sizeof buf);
		assert_int_equal(n, 1);
		assert_memory_equal(buf, "2", 1);
		assert_int_equal(inspected_limit(c, path), 2);
		CHECK_OK(zkl_lock_release(zkl_semaphore_lock(s)));
		zkl_semaphore_free(s);
	}
	zkl_client_close(c);
}

/* A semaphore with its gate and no leases yet: one semaphore to both inspections. */
static void test_inspect_gate_without_leases(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *base = h_path("misuse-gate");
	const char *path = h_sub(base, "sem");
	h_create(base, NULL);
	h_create(path, "2");
	h_create(h_sub(path, "locks"), NULL);
	/* A taker at the gate, as one is between its gate node and its lease. */
	zkl_mutex *gate;
	CHECK_OK(zkl_mutex_new(&gate, c, h_sub(path, "locks")));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(gate), 5000));

	zkl_inspection *one, *all;
	CHECK_OK(zkl_inspect(c, path, 5000, &one));
	CHECK_OK(zkl_inspect_prefix(c, base, 5000, &all));
	assert_int_equal(zkl_inspection_locks(all), 1);
	const zkl_lock_info *a = zkl_inspection_lock(one, 0), *b = zkl_inspection_lock(all, 0);
	assert_string_equal(a->path, path);
	assert_string_equal(b->path, path);
	assert_int_equal(a->limit, 2);
	assert_int_equal(b->limit, 2);
	assert_int_equal(a->count, 1);
	assert_int_equal(b->count, 1);
	assert_int_equal(a->layouts, b->layouts);
	assert_int_equal(zkl_inspection_node(one, a->first)->role,
	                 zkl_inspection_node(all, b->first)->role);
	zkl_inspection_free(one);
	zkl_inspection_free(all);

	/* Without a recorded count it is no semaphore, to either: its gate is a mutex. */
	CHECK_OK(zkl_record_set(c, path, "", 0));
	CHECK_OK(zkl_inspect(c, path, 5000, &one));
	CHECK_OK(zkl_inspect_prefix(c, base, 5000, &all));
	assert_int_equal(zkl_inspection_lock(one, 0)->count, 0);
	assert_int_equal(zkl_inspection_locks(all), 1);
	assert_string_equal(zkl_inspection_lock(all, 0)->path, h_sub(path, "locks"));
	zkl_inspection_free(one);
	zkl_inspection_free(all);

	CHECK_OK(zkl_lock_release(zkl_mutex_lock(gate)));
	zkl_mutex_free(gate);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_new_leaves_null),
		cmocka_unit_test(test_close_in_callback_refused),
		cmocka_unit_test(test_close_before_handles_put_off),
		cmocka_unit_test(test_free_in_lost_callback),
		cmocka_unit_test(test_selector_free_in_its_function),
		cmocka_unit_test(test_multilock_same_path_refused),
		cmocka_unit_test(test_session_timeout_range),
		cmocka_unit_test(test_servers_strings),
		cmocka_unit_test(test_adopt_twice_refused),
		cmocka_unit_test(test_record_deep_parents),
		cmocka_unit_test(test_revoke_lock_nodes_only),
		cmocka_unit_test(test_set_data_limit),
		cmocka_unit_test(test_process_second_thread_busy),
		cmocka_unit_test(test_semaphore_count_one_rule),
		cmocka_unit_test(test_inspect_gate_without_leases),
	};
	return H_RUN(tests);
}
