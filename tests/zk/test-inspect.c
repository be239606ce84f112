/* The inspection API (zkl_inspect, zkl_inspect_prefix) on a real ZooKeeper server, run
 * through tests/with-zk: every layout, roles and queue order, tokens and data, the walk
 * of a prefix, bad input, an application's own loop, and a path that Curator, kazoo and
 * zklocks share (tests/interop's peers). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "peer.h"

#define SOON 15000

/* ---- helpers ---- */

static zkl_inspection *inspect(zkl_client *c, const char *path)
{
	zkl_inspection *in = (zkl_inspection *)&in; /* must be overwritten */
	CHECK_OK(zkl_inspect(c, path, 10000, &in));
	assert_non_null(in);
	assert_int_equal(zkl_inspection_locks(in), 1);
	assert_int_equal(zkl_inspection_skipped(in), 0);
	const zkl_lock_info *L = zkl_inspection_lock(in, 0);
	assert_string_equal(L->path, path);
	assert_int_equal(L->first, 0);
	assert_int_equal(L->count, zkl_inspection_nodes(in));
	assert_int_equal(L->holders + L->waiting, L->count);
	return in;
}

static const zkl_node_info *node(const zkl_inspection *in, size_t i)
{
	const zkl_node_info *n = zkl_inspection_node(in, i);
	assert_non_null(n);
	return n;
}

/* Checks what every node says of itself, and its role, layout and data. */
static void expect(const zkl_node_info *n, zkl_role role, zkl_layout layout, const char *data)
{
	if (n->role != role || n->layout != layout)
		fail_msg("%s: %s %s, expected %s %s", n->path, zkl_role_name(n->role),
		         zkl_layout_name(n->layout), zkl_role_name(role), zkl_layout_name(layout));
	assert_int_equal(n->holds, role == ZKL_ROLE_HOLDER || role == ZKL_ROLE_LEASE ||
	                           role == ZKL_ROLE_LEADER);
	assert_string_equal(n->data, data);
	assert_int_equal(n->data_len, strlen(data));
	assert_ptr_equal(n->name, strrchr(n->path, '/') + 1);
	assert_int_equal(strncmp(n->path, n->lock_path, strlen(n->lock_path)), 0);
	assert_true(n->token > 0);
	assert_true(n->session != 0);
	assert_true(n->sequence >= 0);
	/* The server's clock is this host's. */
	int64_t now = (int64_t)time(NULL) * 1000;
	assert_true(n->ctime > now - 120000 && n->ctime < now + 120000);
}

static void acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	h_counter_add(data, rc == 0 ? 1 : 1000);
}

/* A contender on a client of its own, with its data. */
struct who {
	zkl_client *c;
	zkl_mutex *m;
	zkl_lock *l;
};

static void who_open(struct who *w, const char *path, const char *data)
{
	w->c = h_client(0);
	CHECK_OK(zkl_mutex_new(&w->m, w->c, path));
	w->l = zkl_mutex_lock(w->m);
	CHECK_OK(zkl_lock_set_data(w->l, data, strlen(data)));
}

static void who_close(struct who *w)
{
	zkl_mutex_free(w->m);
	zkl_client_close(w->c);
}

/* n is l's node. A waiting acquire learns its node's path on its client's event thread,
 * a moment after the node is on the server: wait for it. */
static void assert_node_of(const zkl_node_info *n, zkl_lock *l)
{
	char buf[ZKL_NODE_MAX];
	h_node_known(l, buf, sizeof buf);
	assert_string_equal(n->path, buf);
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_inspection *in = (zkl_inspection *)&in;
	CHECK_RC(ZKL_EINVAL, zkl_inspect(NULL, "/a", 1000, &in));
	assert_null(in);
	assert_non_null(strstr(zkl_last_error(), "client"));
	CHECK_RC(ZKL_EINVAL, zkl_inspect(c, "/a", 1000, NULL));
	const char *bad[] = {NULL, "", "locks/x", "/a/", "/", "/a//b", "/a/../b", "/zookeeper",
	                     "/zookeeper/quota"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		in = (zkl_inspection *)&in;
		CHECK_RC(ZKL_EINVAL, zkl_inspect(c, bad[i], 1000, &in));
		assert_null(in);
		assert_true(*zkl_last_error() != 0);
		if (bad[i] && strcmp(bad[i], "/") == 0)
			continue; /* a prefix may be the root */
		in = (zkl_inspection *)&in;
		CHECK_RC(ZKL_EINVAL, zkl_inspect_prefix(c, bad[i], 1000, &in));
		assert_null(in);
	}
	CHECK_RC(ZKL_EINVAL, zkl_inspect(c, "/a", -2, &in));
	assert_non_null(strstr(zkl_last_error(), "-2"));
	CHECK_RC(ZKL_EINVAL, zkl_inspect_prefix(c, "/a", -5, &in));
	CHECK_RC(ZKL_EINVAL, zkl_inspect_prefix(NULL, "/a", 1000, &in));
	CHECK_RC(ZKL_EINVAL, zkl_inspect_prefix(c, "/a", 1000, NULL));

	/* The accessors take NULL and out-of-range indexes. */
	assert_int_equal(zkl_inspection_locks(NULL), 0);
	assert_int_equal(zkl_inspection_nodes(NULL), 0);
	assert_int_equal(zkl_inspection_skipped(NULL), 0);
	assert_null(zkl_inspection_lock(NULL, 0));
	assert_null(zkl_inspection_node(NULL, 0));
	zkl_inspection_free(NULL);
	assert_string_equal(zkl_role_name(ZKL_ROLE_HOLDER), "holder");
	assert_string_equal(zkl_role_name(ZKL_ROLE_WAITING), "waiting");
	assert_string_equal(zkl_role_name(ZKL_ROLE_LEASE), "lease");
	assert_string_equal(zkl_role_name(ZKL_ROLE_GATE), "gate");
	assert_string_equal(zkl_role_name(ZKL_ROLE_LEADER), "leader");
	assert_string_equal(zkl_role_name((zkl_role)0), "unknown");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_MUTEX), "mutex");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_READ), "read");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_WRITE), "write");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_SEMAPHORE), "semaphore");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_LATCH), "latch");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_KAZOO_LOCK), "kazoo-lock");
	assert_string_equal(zkl_layout_name(ZKL_LAYOUT_KAZOO_READ), "kazoo-read");
	assert_string_equal(zkl_layout_name((zkl_layout)99), "unknown");
	zkl_client_close(c);
}

/* A path that does not exist is a lock nobody uses; a prefix that does not exist holds
 * no locks. A folder with no contenders is not a lock. */
static void test_absent(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("insp-absent");
	zkl_inspection *in = inspect(c, path);
	assert_int_equal(zkl_inspection_nodes(in), 0);
	assert_null(zkl_inspection_node(in, 0));
	assert_null(zkl_inspection_lock(in, 1));
	const zkl_lock_info *L = zkl_inspection_lock(in, 0);
	assert_false(L->exists);
	assert_int_equal(L->layouts, 0);
	assert_int_equal(L->limit, 0);
	zkl_inspection_free(in);

	CHECK_OK(zkl_inspect_prefix(c, path, 10000, &in));
	assert_int_equal(zkl_inspection_locks(in), 0);
	assert_int_equal(zkl_inspection_nodes(in), 0);
	zkl_inspection_free(in);

	/* Present, with a stray child (not a contender): exists, and nothing queued. */
	if (!h_exists("/t"))
		h_create("/t", "");
	h_create(path, "");
	h_create(h_sub(path, "not-a-lock"), "x");
	in = inspect(c, path);
	assert_true(zkl_inspection_lock(in, 0)->exists);
	assert_int_equal(zkl_inspection_nodes(in), 0);
	zkl_inspection_free(in);
	CHECK_OK(zkl_inspect_prefix(c, path, 10000, &in));
	assert_int_equal(zkl_inspection_locks(in), 0);
	zkl_inspection_free(in);
	h_delete(h_sub(path, "not-a-lock"));
	h_delete(path);
	zkl_client_close(c);
}

/* ---- a mutex: holder, then waiters in order ---- */

static void test_mutex(void **state)
{
	(void)state;
	const char *path = h_path("insp-mutex");
	struct who a, b, d;
	who_open(&a, path, "A");
	who_open(&b, path, "B");
	who_open(&d, path, "D");
	h_counter got;
	h_counter_init(&got);
	CHECK_OK(zkl_lock_acquire(a.l, 5000));
	CHECK_OK(zkl_lock_acquire_async(b.l, 30000, acquired, &got));
	h_wait_children(path, 2);
	CHECK_OK(zkl_lock_acquire_async(d.l, 30000, acquired, &got));
	h_wait_children(path, 3);

	zkl_inspection *in = inspect(a.c, path);
	const zkl_lock_info *L = zkl_inspection_lock(in, 0);
	assert_true(L->exists);
	assert_int_equal(L->count, 3);
	assert_int_equal(L->holders, 1);
	assert_int_equal(L->waiting, 2);
	assert_int_equal(L->layouts, 1u << ZKL_LAYOUT_MUTEX);
	assert_int_equal(L->limit, 0);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_MUTEX, "A");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, "B");
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, "D");
	assert_node_of(node(in, 0), a.l);
	assert_node_of(node(in, 1), b.l);
	assert_node_of(node(in, 2), d.l);
	assert_int_equal(node(in, 0)->token, zkl_lock_token(a.l));
	assert_int_equal(node(in, 0)->session, zkl_client_session_id(a.c));
	assert_int_equal(node(in, 1)->session, zkl_client_session_id(b.c));
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(node(in, i)->position, i);
		assert_ptr_equal(node(in, i)->lock_path, L->path);
		assert_non_null(strstr(node(in, i)->name, "-lock-"));
		if (i > 0) {
			assert_true(node(in, i)->sequence > node(in, i - 1)->sequence);
			assert_true(node(in, i)->token > node(in, i - 1)->token);
		}
	}
	int64_t first = node(in, 0)->token;
	zkl_inspection_free(in);

	/* The next in line holds, with a greater token; trying once gives the same. */
	CHECK_OK(zkl_lock_release(a.l));
	assert_true(h_counter_wait(&got, 1, SOON));
	CHECK_OK(zkl_inspect(d.c, path, 0, &in));
	assert_int_equal(zkl_inspection_nodes(in), 2);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_MUTEX, "B");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, "D");
	assert_true(node(in, 0)->token > first);
	assert_int_equal(node(in, 0)->token, zkl_lock_token(b.l));
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(b.l));
	assert_true(h_counter_wait(&got, 2, SOON));
	assert_int_equal(h_counter_get(&got), 2);
	CHECK_OK(zkl_lock_release(d.l));
	who_close(&a);
	who_close(&b);
	who_close(&d);
	h_counter_destroy(&got);
}

/* ---- a read-write lock: readers ahead of a writer hold; a downgrade holds both ---- */

static void test_rwlock(void **state)
{
	(void)state;
	const char *path = h_path("insp-rw");
	zkl_client *c[4];
	zkl_rwlock *rw[4];
	const char *data[4] = {"r1", "r2", "w3", "r4"};
	for (int i = 0; i < 4; i++) {
		c[i] = h_client(0);
		CHECK_OK(zkl_rwlock_new(&rw[i], c[i], path));
		zkl_mutex *half = i == 2 ? zkl_rwlock_write(rw[i]) : zkl_rwlock_read(rw[i]);
		CHECK_OK(zkl_lock_set_data(zkl_mutex_lock(half), data[i], 2));
	}
	h_counter got;
	h_counter_init(&got);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(zkl_rwlock_read(rw[0])), 5000));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(zkl_rwlock_read(rw[1])), 5000));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(zkl_rwlock_write(rw[2])), 30000, acquired,
	                                &got));
	h_wait_children(path, 3);
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(zkl_rwlock_read(rw[3])), 30000, acquired,
	                                &got));
	h_wait_children(path, 4);
	zkl_inspection *in = inspect(c[0], path);
	const zkl_lock_info *L = zkl_inspection_lock(in, 0);
	assert_int_equal(L->layouts, (1u << ZKL_LAYOUT_READ) | (1u << ZKL_LAYOUT_WRITE));
	assert_int_equal(L->holders, 2);
	assert_int_equal(L->waiting, 2);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_READ, "r1");
	expect(node(in, 1), ZKL_ROLE_HOLDER, ZKL_LAYOUT_READ, "r2");
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_WRITE, "w3");
	expect(node(in, 3), ZKL_ROLE_WAITING, ZKL_LAYOUT_READ, "r4");
	assert_non_null(strstr(node(in, 2)->name, "__WRIT__"));
	zkl_inspection_free(in);
	/* The readers go: the writer holds, the reader behind it waits. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(zkl_rwlock_read(rw[0]))));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(zkl_rwlock_read(rw[1]))));
	assert_true(h_counter_wait(&got, 1, SOON));
	in = inspect(c[1], path);
	assert_int_equal(zkl_inspection_nodes(in), 2);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_WRITE, "w3");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_READ, "r4");
	zkl_inspection_free(in);

	/* The writer (an asynchronous hold) goes, and the reader gets in. */
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw[2]));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw[2]));
	zkl_lock *r4 = zkl_mutex_lock(zkl_rwlock_read(rw[3]));
	CHECK_OK(zkl_lock_release(w));
	assert_true(h_counter_wait(&got, 2, SOON));
	CHECK_OK(zkl_lock_release(r4));

	/* A thread that holds the write half downgrades: its read node shares its number,
	 * and holds with it; a later reader waits for the writer. */
	CHECK_OK(zkl_lock_acquire(w, 5000));
	CHECK_OK(zkl_lock_set_data(r, "d3", 2));
	CHECK_OK(zkl_lock_acquire(r, 5000));
	CHECK_OK(zkl_lock_acquire_async(r4, 30000, acquired, &got));
	h_wait_children(path, 3);
	in = inspect(c[1], path);
	assert_int_equal(zkl_inspection_nodes(in), 3);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_WRITE, "w3");
	expect(node(in, 1), ZKL_ROLE_HOLDER, ZKL_LAYOUT_READ, "d3");
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_READ, "r4");
	assert_int_equal(node(in, 0)->sequence, node(in, 1)->sequence);
	assert_int_equal(zkl_inspection_lock(in, 0)->holders, 2);
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(w));
	assert_true(h_counter_wait(&got, 3, SOON));
	in = inspect(c[1], path);
	assert_int_equal(zkl_inspection_nodes(in), 2);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_READ, "d3");
	expect(node(in, 1), ZKL_ROLE_HOLDER, ZKL_LAYOUT_READ, "r4");
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(r));
	CHECK_OK(zkl_lock_release(r4));
	assert_int_equal(h_counter_get(&got), 3);
	for (int i = 0; i < 4; i++) {
		zkl_rwlock_free(rw[i]);
		zkl_client_close(c[i]);
	}
	h_counter_destroy(&got);
}

/* ---- a semaphore: leases, the lease waiting at the gate, the gate's queue ---- */

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
	*t = (struct taker){.s = s, .done = h_latch_new()};
	assert_int_equal(pthread_create(&t->th, NULL, taker_thread, t), 0);
}

static void taker_join(struct taker *t)
{
	assert_true(h_latch_wait(t->done, 20000));
	pthread_join(t->th, NULL);
	h_latch_free(t->done);
	CHECK_OK(t->rc);
}

static void test_semaphore(void **state)
{
	(void)state;
	const char *path = h_path("insp-sem");
	const char *leases = h_sub(path, "leases"), *locks = h_sub(path, "locks");
	zkl_client *c[4];
	zkl_semaphore *s[4];
	const char *data[4] = {"sa", "sb", "sc", "sd"};
	for (int i = 0; i < 4; i++) {
		c[i] = h_client(0);
		CHECK_OK(zkl_semaphore_new(&s[i], c[i], path, 2));
		CHECK_OK(zkl_lock_set_data(zkl_semaphore_lock(s[i]), data[i], 2));
	}
	zkl_lease *la, *lb;
	CHECK_OK(zkl_semaphore_acquire(s[0], 1, 5000, &la));
	CHECK_OK(zkl_semaphore_acquire(s[1], 1, 5000, &lb));
	struct taker tc, td;
	taker_start(&tc, s[2]);
	h_wait_children(leases, 3); /* c's lease, at the gate */
	taker_start(&td, s[3]);
	h_wait_children(locks, 2);  /* d queued behind c at the gate */

	zkl_inspection *in = inspect(c[3], path);
	const zkl_lock_info *L = zkl_inspection_lock(in, 0);
	assert_int_equal(L->layouts, 1u << ZKL_LAYOUT_SEMAPHORE);
	assert_int_equal(L->limit, 2);
	assert_int_equal(L->count, 5);
	assert_int_equal(L->holders, 2);
	assert_int_equal(L->waiting, 3);
	expect(node(in, 0), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, "sa");
	expect(node(in, 1), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, "sb");
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_SEMAPHORE, "sc");
	expect(node(in, 3), ZKL_ROLE_GATE, ZKL_LAYOUT_SEMAPHORE, "sc");
	expect(node(in, 4), ZKL_ROLE_WAITING, ZKL_LAYOUT_SEMAPHORE, "sd");
	assert_string_equal(node(in, 0)->path, zkl_lease_path(la));
	assert_string_equal(node(in, 1)->path, zkl_lease_path(lb));
	assert_int_equal(node(in, 0)->token, zkl_lease_token(la));
	assert_int_equal(node(in, 1)->token, zkl_lease_token(lb));
	size_t pos[5] = {0, 1, 2, 0, 1};
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(node(in, i)->position, pos[i]);
		assert_string_equal(node(in, i)->lock_path, path);
		assert_non_null(strstr(node(in, i)->path, i < 3 ? "/leases/_c_" : "/locks/_c_"));
	}
	assert_int_equal(node(in, 2)->session, node(in, 3)->session);
	zkl_inspection_free(in);

	/* One goes: c's lease holds, and d waits at the gate with its own. */
	CHECK_OK(zkl_lease_release(la));
	taker_join(&tc);
	h_wait_children(leases, 3);
	h_wait_children(locks, 1);
	in = inspect(c[0], path);
	assert_int_equal(zkl_inspection_nodes(in), 4);
	expect(node(in, 0), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, "sb");
	expect(node(in, 1), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, "sc");
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_SEMAPHORE, "sd");
	expect(node(in, 3), ZKL_ROLE_GATE, ZKL_LAYOUT_SEMAPHORE, "sd");
	assert_int_equal(node(in, 1)->token, zkl_lease_token(tc.lease));
	zkl_inspection_free(in);
	CHECK_OK(zkl_lease_release(lb));
	taker_join(&td);
	zkl_lease_free(la);
	zkl_lease_free(lb);
	zkl_lease_free(tc.lease);
	zkl_lease_free(td.lease);
	for (int i = 0; i < 4; i++) {
		zkl_semaphore_free(s[i]);
		zkl_client_close(c[i]);
	}
}

/* A semaphore-mutex is a semaphore of one lease, and shows as one. */
static void test_semaphore_mutex(void **state)
{
	(void)state;
	const char *path = h_path("insp-semmutex");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore_mutex *ma, *mb;
	CHECK_OK(zkl_semaphore_mutex_new(&ma, a, path));
	CHECK_OK(zkl_semaphore_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_semaphore_mutex_lock(ma), *lb = zkl_semaphore_mutex_lock(mb);
	CHECK_OK(zkl_lock_set_data(la, "ma", 2));
	CHECK_OK(zkl_lock_set_data(lb, "mb", 2));
	h_counter got;
	h_counter_init(&got);
	CHECK_OK(zkl_lock_acquire(la, 5000));
	CHECK_OK(zkl_lock_acquire_async(lb, 30000, acquired, &got));
	h_wait_children(h_sub(path, "leases"), 2);
	zkl_inspection *in = inspect(a, path);
	assert_int_equal(zkl_inspection_lock(in, 0)->limit, 1);
	assert_int_equal(zkl_inspection_nodes(in), 3);
	expect(node(in, 0), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, "ma");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_SEMAPHORE, "mb");
	expect(node(in, 2), ZKL_ROLE_GATE, ZKL_LAYOUT_SEMAPHORE, "mb");
	assert_node_of(node(in, 0), la);
	assert_int_equal(node(in, 0)->token, zkl_lock_token(la));
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(la));
	assert_true(h_counter_wait(&got, 1, SOON));
	assert_int_equal(h_counter_get(&got), 1);
	CHECK_OK(zkl_lock_release(lb));
	zkl_semaphore_mutex_free(ma);
	zkl_semaphore_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
	h_counter_destroy(&got);
}

/* ---- a leader latch: the leader, then the others ---- */

static void test_leader(void **state)
{
	(void)state;
	const char *path = h_path("insp-latch");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_leader *la, *lb;
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.id = "leader-a";
	CHECK_OK(zkl_leader_new(&la, a, path, &o));
	o.id = "leader-b";
	CHECK_OK(zkl_leader_new(&lb, b, path, &o));
	CHECK_OK(zkl_leader_start(la));
	CHECK_OK(zkl_leader_await(la, SOON));
	CHECK_OK(zkl_leader_start(lb));
	h_wait_children(path, 2);
	zkl_inspection *in = inspect(b, path);
	assert_int_equal(zkl_inspection_lock(in, 0)->layouts, 1u << ZKL_LAYOUT_LATCH);
	assert_int_equal(zkl_inspection_nodes(in), 2);
	expect(node(in, 0), ZKL_ROLE_LEADER, ZKL_LAYOUT_LATCH, "leader-a");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_LATCH, "leader-b");
	assert_int_equal(node(in, 0)->token, zkl_lock_token(zkl_leader_lock(la)));
	assert_non_null(strstr(node(in, 0)->name, "-latch-"));
	zkl_inspection_free(in);
	CHECK_OK(zkl_leader_close(la));
	CHECK_OK(zkl_leader_await(lb, SOON));
	in = inspect(a, path);
	assert_int_equal(zkl_inspection_nodes(in), 1);
	expect(node(in, 0), ZKL_ROLE_LEADER, ZKL_LAYOUT_LATCH, "leader-b");
	zkl_inspection_free(in);
	zkl_leader_free(la);
	zkl_leader_free(lb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- kazoo's names, from zklocks: one queue with Curator's ---- */

static void test_kazoo_names(void **state)
{
	(void)state;
	const char *path = h_path("insp-knames");
	struct who k, cu;
	who_open(&k, path, "kz");
	who_open(&cu, path, "cu");
	CHECK_OK(zkl_mutex_set_naming(k.m, ZKL_NAMING_KAZOO));
	h_counter got;
	h_counter_init(&got);
	CHECK_OK(zkl_lock_acquire(k.l, 5000));
	CHECK_OK(zkl_lock_acquire_async(cu.l, 30000, acquired, &got));
	h_wait_children(path, 2);
	zkl_inspection *in = inspect(k.c, path);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_KAZOO_LOCK, "kz");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, "cu");
	assert_non_null(strstr(node(in, 0)->name, "__lock__"));
	assert_int_equal(zkl_inspection_lock(in, 0)->layouts,
	                 (1u << ZKL_LAYOUT_KAZOO_LOCK) | (1u << ZKL_LAYOUT_MUTEX));
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(k.l));
	assert_true(h_counter_wait(&got, 1, SOON));
	CHECK_OK(zkl_lock_release(cu.l));
	who_close(&k);
	who_close(&cu);

	/* kazoo's read lock. */
	path = h_path("insp-krw");
	zkl_client *c = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	CHECK_OK(zkl_rwlock_set_naming(rw, ZKL_NAMING_KAZOO));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw));
	CHECK_OK(zkl_lock_set_data(r, "kr", 2));
	CHECK_OK(zkl_lock_acquire(r, 5000));
	in = inspect(c, path);
	assert_int_equal(zkl_inspection_nodes(in), 1);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_KAZOO_READ, "kr");
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(r));
	zkl_rwlock_free(rw);
	zkl_client_close(c);
	h_counter_destroy(&got);
}

/* ---- Curator, kazoo and zklocks on one path ---- */

/* Whether the peers can run here; under CI they must (peer_start() fails there). */
static bool peers_here(void)
{
	const char *ci = getenv("CI");
	if (ci && strcmp(ci, "true") == 0)
		return true;
	const char *java = getenv("ZKL_INTEROP_JAVA"), *py = getenv("ZKL_INTEROP_PYTHON");
	if (!java || !*java || !py || !*py)
		return false;
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "'%s' -c 'import kazoo' >/dev/null 2>&1", py);
	return system(cmd) == 0;
}

static void test_mixed_peers(void **state)
{
	(void)state;
	if (!peers_here()) {
		print_message("no Curator or kazoo peer here: skipped\n");
		skip();
	}
	peer *C = peer_start(PEER_CURATOR, 10000);
	peer *Z = peer_start(PEER_KAZOO, 10000);
	const char *path = h_path("insp-mixed");
	/* kazoo's holder, then Curator's (which does not see kazoo's, and holds too: see
	 * docs/INTEROP.md), then zklocks with each library's names. The inspection gives
	 * the one queue zklocks sees: the first holds. */
	peer_do(Z, "a", "acquired", SOON, "acquire lock %s -1", path);
	peer_do(C, "a", "acquired", SOON, "acquire mutex %s -1", path);
	struct who zc, zk;
	who_open(&zc, path, "zc");
	who_open(&zk, path, "zk");
	CHECK_OK(zkl_mutex_set_naming(zk.m, ZKL_NAMING_KAZOO));
	h_counter got;
	h_counter_init(&got);
	CHECK_OK(zkl_lock_acquire_async(zc.l, 60000, acquired, &got));
	h_wait_children(path, 3);
	CHECK_OK(zkl_lock_acquire_async(zk.l, 60000, acquired, &got));
	h_wait_children(path, 4);
	zkl_inspection *in = inspect(zc.c, path);
	assert_int_equal(zkl_inspection_nodes(in), 4);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_KAZOO_LOCK, peer_data(Z));
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, peer_data(C));
	expect(node(in, 2), ZKL_ROLE_WAITING, ZKL_LAYOUT_MUTEX, "zc");
	expect(node(in, 3), ZKL_ROLE_WAITING, ZKL_LAYOUT_KAZOO_LOCK, "zk");
	assert_int_equal(node(in, 0)->session, strtoll(peer_session(Z), NULL, 16));
	assert_int_equal(node(in, 1)->session, strtoll(peer_session(C), NULL, 16));
	assert_int_equal(zkl_inspection_lock(in, 0)->layouts,
	                 (1u << ZKL_LAYOUT_KAZOO_LOCK) | (1u << ZKL_LAYOUT_MUTEX));
	zkl_inspection_free(in);
	peer_do(Z, "a", "released", SOON, "release");
	peer_do(C, "a", "released", SOON, "release");
	assert_true(h_counter_wait(&got, 1, SOON));
	in = inspect(zc.c, path);
	assert_int_equal(zkl_inspection_nodes(in), 2);
	expect(node(in, 0), ZKL_ROLE_HOLDER, ZKL_LAYOUT_MUTEX, "zc");
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_KAZOO_LOCK, "zk");
	zkl_inspection_free(in);
	CHECK_OK(zkl_lock_release(zc.l));
	assert_true(h_counter_wait(&got, 2, SOON));
	CHECK_OK(zkl_lock_release(zk.l));

	/* Curator's semaphore records no count: the gate alone tells the waiting lease. */
	const char *sem = h_path("insp-mixed-sem");
	peer_do(C, "s1", "acquired", SOON, "acquire sem %s -1 1", sem);
	peer_send(C, "s2 acquire sem %s -1 1", sem);
	h_wait_children(h_sub(sem, "leases"), 2);
	in = inspect(zc.c, sem);
	assert_int_equal(zkl_inspection_lock(in, 0)->limit, 0);
	assert_int_equal(zkl_inspection_nodes(in), 3);
	expect(node(in, 0), ZKL_ROLE_LEASE, ZKL_LAYOUT_SEMAPHORE, peer_data(C));
	expect(node(in, 1), ZKL_ROLE_WAITING, ZKL_LAYOUT_SEMAPHORE, peer_data(C));
	expect(node(in, 2), ZKL_ROLE_GATE, ZKL_LAYOUT_SEMAPHORE, peer_data(C));
	zkl_inspection_free(in);
	peer_do(C, "s1", "released", SOON, "release");
	peer_expect(C, "s2", "acquired", SOON);
	peer_do(C, "s2", "released", SOON, "release");

	peer_stop(C);
	peer_stop(Z);
	who_close(&zc);
	who_close(&zk);
	h_counter_destroy(&got);
}

/* ---- the locks under a prefix ---- */

static void test_prefix(void **state)
{
	(void)state;
	const char *prefix = h_path("insp-prefix");
	char pa[256], pb[256], pd[256], ps[256], pe[256];
	snprintf(pa, sizeof pa, "%s/a", prefix);
	snprintf(pb, sizeof pb, "%s/b/c", prefix);
	snprintf(pd, sizeof pd, "%s/deep/x/y", prefix);
	snprintf(ps, sizeof ps, "%s/s", prefix);
	snprintf(pe, sizeof pe, "%s/empty", prefix);
	zkl_client *c = h_client(0);
	zkl_mutex *ma, *md;
	zkl_rwlock *rw;
	zkl_semaphore *s;
	CHECK_OK(zkl_mutex_new(&ma, c, pa));
	CHECK_OK(zkl_mutex_new(&md, c, pd));
	CHECK_OK(zkl_rwlock_new(&rw, c, pb));
	CHECK_OK(zkl_semaphore_new(&s, c, ps, 3));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(ma), 5000));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(md), 5000));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(zkl_rwlock_read(rw)), 5000));
	zkl_lease *l[2];
	CHECK_OK(zkl_semaphore_acquire(s, 2, 5000, l));
	h_create(pe, "");

	zkl_inspection *in = (zkl_inspection *)&in;
	CHECK_OK(zkl_inspect_prefix(c, prefix, 10000, &in));
	assert_int_equal(zkl_inspection_skipped(in), 0);
	assert_int_equal(zkl_inspection_locks(in), 4);
	const char *want[4] = {pa, pb, pd, ps};
	zkl_layout layout[4] = {ZKL_LAYOUT_MUTEX, ZKL_LAYOUT_READ, ZKL_LAYOUT_MUTEX,
	                        ZKL_LAYOUT_SEMAPHORE};
	size_t count[4] = {1, 1, 1, 2};
	size_t total = 0;
	for (size_t i = 0; i < 4; i++) {
		const zkl_lock_info *L = zkl_inspection_lock(in, i);
		assert_string_equal(L->path, want[i]);
		assert_true(L->exists);
		assert_int_equal(L->layouts, 1u << layout[i]);
		assert_int_equal(L->first, total);
		assert_int_equal(L->count, count[i]);
		assert_int_equal(L->holders, count[i]);
		assert_int_equal(L->waiting, 0);
		for (size_t k = 0; k < L->count; k++) {
			const zkl_node_info *n = node(in, L->first + k);
			assert_ptr_equal(n->lock_path, L->path);
			assert_true(n->holds);
			assert_int_equal(n->position, k);
		}
		total += L->count;
	}
	assert_int_equal(zkl_inspection_lock(in, 3)->limit, 3);
	assert_int_equal(node(in, 0)->token, zkl_lock_token(zkl_mutex_lock(ma)));
	assert_int_equal(zkl_inspection_nodes(in), total);
	zkl_inspection_free(in);

	/* A prefix that is itself a lock; one below the locks. */
	CHECK_OK(zkl_inspect_prefix(c, ps, 10000, &in));
	assert_int_equal(zkl_inspection_locks(in), 1);
	assert_string_equal(zkl_inspection_lock(in, 0)->path, ps);
	zkl_inspection_free(in);
	CHECK_OK(zkl_inspect_prefix(c, pe, 10000, &in));
	assert_int_equal(zkl_inspection_locks(in), 0);
	zkl_inspection_free(in);

	/* The whole tree holds these four too (and no /zookeeper). */
	CHECK_OK(zkl_inspect_prefix(c, "/", 10000, &in));
	size_t found = 0;
	for (size_t i = 0; i < zkl_inspection_locks(in); i++) {
		const char *p = zkl_inspection_lock(in, i)->path;
		assert_true(strncmp(p, "/zookeeper", 10) != 0);
		found += strncmp(p, prefix, strlen(prefix)) == 0;
	}
	assert_int_equal(found, 4);
	zkl_inspection_free(in);

	CHECK_OK(zkl_lease_release(l[0]));
	CHECK_OK(zkl_lease_release(l[1]));
	zkl_lease_free(l[0]);
	zkl_lease_free(l[1]);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(ma)));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(md)));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(zkl_rwlock_read(rw))));
	zkl_mutex_free(ma);
	zkl_mutex_free(md);
	zkl_rwlock_free(rw);
	zkl_semaphore_free(s);
	h_delete(pe);
	zkl_client_close(c);
}

/* A folder that may not be read: the walk skips it and says so; inspecting it fails. */
static void test_acl(void **state)
{
	(void)state;
	const char *prefix = h_path("insp-acl");
	if (!h_exists("/t"))
		h_create("/t", "");
	h_create(prefix, "");
	char secret[256], open[256];
	snprintf(secret, sizeof secret, "%s/secret", prefix);
	snprintf(open, sizeof open, "%s/open", prefix);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.digest_auth = "alice:secret";
	o.acl = ZKL_ACL_CREATOR_ALL;
	zkl_client *alice, *anon = h_client(0);
	CHECK_OK(zkl_client_open(&alice, &o));
	zkl_mutex *ms, *mo;
	CHECK_OK(zkl_mutex_new(&ms, alice, secret));
	CHECK_OK(zkl_mutex_new(&mo, anon, open));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(ms), 5000));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(mo), 5000));

	zkl_inspection *in;
	CHECK_OK(zkl_inspect_prefix(anon, prefix, 10000, &in));
	assert_int_equal(zkl_inspection_skipped(in), 1);
	assert_int_equal(zkl_inspection_locks(in), 1);
	assert_string_equal(zkl_inspection_lock(in, 0)->path, open);
	zkl_inspection_free(in);
	in = (zkl_inspection *)&in;
	CHECK_RC(ZKL_EACL, zkl_inspect(anon, secret, 10000, &in));
	assert_null(in);
	assert_non_null(strstr(zkl_last_error(), secret));
	CHECK_RC(ZKL_EACL, zkl_inspect_prefix(anon, secret, 10000, &in));
	assert_null(in);
	/* Its owner sees both. */
	CHECK_OK(zkl_inspect_prefix(alice, prefix, 10000, &in));
	assert_int_equal(zkl_inspection_skipped(in), 0);
	assert_int_equal(zkl_inspection_locks(in), 2);
	assert_string_equal(zkl_inspection_lock(in, 1)->path, secret);
	assert_int_equal(zkl_inspection_node(in, 1)->token, zkl_lock_token(zkl_mutex_lock(ms)));
	zkl_inspection_free(in);

	CHECK_OK(zkl_lock_release(zkl_mutex_lock(ms)));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(mo)));
	zkl_mutex_free(ms);
	zkl_mutex_free(mo);
	zkl_client_close(alice);
	zkl_client_close(anon);
}

/* ---- an application's own loop: from another thread, and from a callback ---- */

struct loop_app {
	zkl_client *c;
	const char *path;
	atomic_int events;
	size_t in_callback;   /* nodes the acquired callback saw */
	int callback_rc;
	size_t from_thread;
	int thread_rc;
};

static void loop_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct loop_app *a = data;
	zkl_inspection *in = NULL;
	a->callback_rc = rc != 0 ? rc : zkl_inspect(a->c, a->path, 10000, &in);
	if (in && zkl_inspection_nodes(in) == 1 &&
	    zkl_inspection_node(in, 0)->role == ZKL_ROLE_HOLDER)
		a->in_callback = 1;
	zkl_inspection_free(in);
	atomic_fetch_add(&a->events, 1);
}

static void *loop_inspector(void *arg)
{
	struct loop_app *a = arg;
	zkl_inspection *in = NULL;
	a->thread_rc = zkl_inspect(a->c, a->path, 10000, &in);
	a->from_thread = zkl_inspection_nodes(in);
	zkl_inspection_free(in);
	atomic_fetch_add(&a->events, 1);
	return NULL;
}

static void loop_run(struct loop_app *a, int ep, int want)
{
	int64_t deadline = zkl_monotonic_ms() + SOON;
	while (atomic_load(&a->events) < want) {
		int64_t left = deadline - zkl_monotonic_ms();
		assert_true(left > 0);
		int t = zkl_client_loop_timeout(a->c);
		if (t < 0 || t > left)
			t = (int)left;
		struct epoll_event ev;
		assert_true(epoll_wait(ep, &ev, 1, t) >= 0);
		CHECK_OK(zkl_client_process(a->c));
	}
}

static void test_external_loop(void **state)
{
	(void)state;
	struct loop_app a = {.path = h_path("insp-loop")};
	atomic_init(&a.events, 0);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.external_loop = true;
	CHECK_OK(zkl_client_open(&a.c, &o));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	assert_true(ep >= 0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = zkl_client_loop_fd(a.c)};
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev), 0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a.c, a.path));
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), 10000, loop_acquired, &a));
	loop_run(&a, ep, 1);
	/* Nothing on the loop's thread waits for the server: refused at once in a callback
	 * and between two zkl_client_process() calls; from another thread it works. */
	CHECK_RC(ZKL_EDEADLK, a.callback_rc);
	assert_int_equal(a.in_callback, 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, loop_inspector, &a), 0);
	loop_run(&a, ep, 2);
	pthread_join(th, NULL);
	CHECK_OK(a.thread_rc);
	assert_int_equal(a.from_thread, 1);
	zkl_inspection *in;
	CHECK_RC(ZKL_EDEADLK, zkl_inspect(a.c, a.path, 10000, &in));
	assert_null(in);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	close(ep);
	zkl_client_close(a.c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_absent),
		cmocka_unit_test(test_mutex),
		cmocka_unit_test(test_rwlock),
		cmocka_unit_test(test_semaphore),
		cmocka_unit_test(test_semaphore_mutex),
		cmocka_unit_test(test_leader),
		cmocka_unit_test(test_kazoo_names),
		cmocka_unit_test(test_mixed_peers),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_acl),
		cmocka_unit_test(test_external_loop),
	};
	return H_RUN(tests);
}
