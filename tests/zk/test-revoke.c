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

/* The full path of the i-th contender in l's queue, copied into buf. */
static void node_at(zkl_lock *l, size_t i, char *buf, size_t size, int *data_len)
{
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	if (i >= n)
		fail_msg("queue has %zu contenders, wanted #%zu", n, i);
	snprintf(buf, size, "%s", ps[i].path);
	if (data_len)
		*data_len = ps[i].data_len;
	zkl_participants_free(ps, n);
}

/* What a revoke callback did. */
struct revoked {
	h_counter calls;
	int release_rc;       /* of the release it made, if it makes one */
	zkl_mutex *expect;    /* the handle it should be called with */
	int wrong;
	enum { DO_RELEASE, DO_NOTHING, DO_CANCEL } action;
};

static void revoked_init(struct revoked *r, zkl_mutex *m, int action)
{
	memset(r, 0, sizeof *r);
	h_counter_init(&r->calls);
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
		r->release_rc = zkl_lock_release(zkl_mutex_lock(m));
	else if (r->action == DO_CANCEL)
		zkl_lock_cancel(zkl_mutex_lock(m));
	h_counter_add(&r->calls, 1);
}

/* ---- a revocable holder releases when asked; the revoker gets the lock ---- */

/* What an asynchronous acquire's callback heard. */
struct async_got {
	h_latch *got;
	int rc;
};

static void async_granted(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct async_got *g = data;
	g->rc = rc;
	h_latch_set(g->got);
}

/* The holder took the lock with a blocking acquire, or (async) an asynchronous one. */
static void revocable_holder(const char *name, bool async)
{
	h_pair t;
	h_pair_open(&t, name);
	/* static: the callbacks and thread must not point into a frame a failure left */
	static struct revoked r;
	revoked_init(&r, t.ma, DO_RELEASE);
	CHECK_OK(zkl_mutex_make_revocable(t.ma, on_revoke, &r));
	if (async) {
		static struct async_got g;
		g.got = h_latch_new();
		g.rc = 1;
		CHECK_OK(zkl_lock_acquire_async(t.la, 5000, async_granted, &g));
		assert_true(h_latch_wait(g.got, 20000));
		CHECK_OK(g.rc);
		h_latch_free(g.got);
	} else {
		CHECK_OK(zkl_lock_acquire(t.la, 5000));
	}
	char node[512];
	int data_len = -1;
	node_at(t.lb, 0, node, sizeof node, &data_len);
	assert_int_equal(data_len, 0); /* revocable nodes carry no data */

	static h_acq w;
	h_acq_start(&w, t.lb, true);
	h_wait_children(t.path, 2);
	assert_int_equal(h_counter_get(&r.calls), 0);

	CHECK_OK(zkl_revoke(t.b, node));
	assert_true(h_counter_wait(&r.calls, 1, 20000));
	CHECK_OK(r.release_rc); /* released from the callback's thread */
	assert_true(h_latch_wait(w.done, 20000));
	CHECK_OK(w.rc);
	assert_int_equal(r.wrong, 0);
	assert_false(zkl_lock_is_held(t.la));
	assert_false(h_exists(node));
	h_acq_join(&w);
	CHECK_OK(w.release_rc);
	assert_true(h_children(t.path) <= 0);
	/* Once per request. */
	assert_int_equal(h_counter_get(&r.calls), 1);
	/* The revoked handle takes the lock again. */
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	CHECK_OK(zkl_lock_release(t.la));
	assert_int_equal(h_counter_get(&r.calls), 1);
	h_pair_close(&t);
}

static void test_revocable_holder(void **state)
{
	(void)state;
	revocable_holder("revoke", false);
}

/* A revocable handle's asynchronous hold is told of a request too. */
static void test_revocable_async_holder(void **state)
{
	(void)state;
	revocable_holder("revoke-async", true);
}

/* ---- a holder that is not revocable ignores the request ---- */

static void test_not_revocable_ignores(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "revoke-ignored");
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	char node[512];
	int data_len = -1;
	node_at(t.lb, 0, node, sizeof node, &data_len);
	assert_true(data_len > 0); /* the default "<host>:<pid>" */
	CHECK_OK(zkl_revoke(t.b, node));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 500));
	assert_true(zkl_lock_is_held(t.la));
	assert_true(h_exists(node));
	/* The request was written all the same. (A create of the timed-out acquire still
	 * out at its deadline is deleted once answered: wait for that before listing.) */
	h_wait_participants(t.lb, 1);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.lb, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, "__REVOKE__");
	zkl_participants_free(ps, n);
	CHECK_OK(zkl_lock_release(t.la));
	CHECK_OK(zkl_lock_acquire(t.lb, 5000));
	CHECK_OK(zkl_lock_release(t.lb));
	h_pair_close(&t);
}

/* ---- revocable nodes have empty data; turning revocation off ---- */

static void test_revocable_data_and_off(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "revoke-data");
	static struct revoked r;
	revoked_init(&r, t.ma, DO_RELEASE);
	CHECK_OK(zkl_lock_set_data(t.la, "payload", 7));
	CHECK_OK(zkl_mutex_make_revocable(t.ma, on_revoke, &r));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	char node[512];
	int data_len = -1;
	node_at(t.lb, 0, node, sizeof node, &data_len);
	assert_int_equal(data_len, 0);
	CHECK_OK(zkl_lock_release(t.la));
	assert_int_equal(h_counter_get(&r.calls), 0);

	/* Not revocable any more: a request is ignored. */
	CHECK_OK(zkl_mutex_make_revocable(t.ma, NULL, NULL));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	node_at(t.lb, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(t.b, node));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb, 500));
	assert_true(zkl_lock_is_held(t.la));
	assert_int_equal(h_counter_get(&r.calls), 0);
	CHECK_OK(zkl_lock_release(t.la));
	h_pair_close(&t);
}

/* ---- revoking a node that does not exist ---- */

static void test_revoke_missing(void **state)
{
	(void)state;
	const char *path = h_path("revoke-missing");
	zkl_client *a = h_client(0);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	zkl_lock *la = zkl_mutex_lock(ma);
	char node[600];
	snprintf(node, sizeof node, "%s/_c_00000000-0000-4000-8000-000000000000-lock-0000000001",
	         path);
	CHECK_RC(ZKL_ENOTHELD, zkl_revoke(a, node));
	CHECK_OK(zkl_lock_acquire(la, 5000));
	node_at(la, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_lock_release(la));
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
	zkl_lock *la = zkl_mutex_lock(ma);
	static struct revoked r;
	revoked_init(&r, ma, DO_NOTHING);
	CHECK_OK(zkl_mutex_make_revocable(ma, on_revoke, &r));
	CHECK_OK(zkl_lock_acquire(la, 5000));
	char node[512];
	node_at(la, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(b, node));
	assert_true(h_counter_wait(&r.calls, 1, 20000));
	assert_true(zkl_lock_is_held(la)); /* the callback kept it */
	CHECK_OK(zkl_revoke(b, node));
	assert_true(h_counter_wait(&r.calls, 2, 20000));
	assert_true(zkl_lock_is_held(la));
	CHECK_OK(zkl_lock_release(la));
	assert_false(h_exists(node));
	assert_int_equal(h_counter_get(&r.calls), 2);
	assert_int_equal(r.wrong, 0);
	zkl_mutex_free(ma);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a queued waiter is told too (here it gives up) ---- */

/* The waiter queued with a blocking acquire on another thread, or (async) with an
 * asynchronous one. */
static void revoke_waiter(const char *name, bool async)
{
	h_pair t;
	h_pair_open(&t, name);
	static struct revoked r;
	revoked_init(&r, t.mb, DO_CANCEL);
	CHECK_OK(zkl_mutex_make_revocable(t.mb, on_revoke, &r));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	static h_acq w;
	static struct async_got g;
	if (async) {
		g.got = h_latch_new();
		g.rc = 1;
		CHECK_OK(zkl_lock_acquire_async(t.lb, ZKL_WAIT_FOREVER, async_granted, &g));
	} else {
		h_acq_start(&w, t.lb, false);
	}
	h_wait_children(t.path, 2);
	char node[512];
	node_at(t.la, 1, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(t.a, node));
	assert_true(h_counter_wait(&r.calls, 1, 20000));
	if (async) {
		assert_true(h_latch_wait(g.got, 20000));
		CHECK_RC(ZKL_ECANCELED, g.rc);
		h_latch_free(g.got);
	} else {
		assert_true(h_latch_wait(w.done, 20000));
		h_acq_join(&w);
		CHECK_RC(ZKL_ECANCELED, w.rc);
	}
	assert_int_equal(r.wrong, 0);
	assert_int_equal(h_children(t.path), 1);
	assert_true(zkl_lock_is_held(t.la));
	CHECK_OK(zkl_lock_release(t.la));
	assert_int_equal(h_counter_get(&r.calls), 1);
	h_pair_close(&t);
}

static void test_revoke_waiter(void **state)
{
	(void)state;
	revoke_waiter("revoke-waiter", false);
}

static void test_revoke_async_waiter(void **state)
{
	(void)state;
	revoke_waiter("revoke-async-waiter", true);
}

/* ---- a change of the node ahead is not its going ---- */

/* A waiter next in line takes the lock without listing again when the node ahead is
 * deleted; a revocation request changes that node's data, which fires the same watch.
 * The waiter must look again and keep waiting. */
static void test_request_keeps_waiter_out(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "revoke-ahead");
	static struct revoked r;
	revoked_init(&r, t.ma, DO_NOTHING);
	CHECK_OK(zkl_mutex_make_revocable(t.ma, on_revoke, &r));
	CHECK_OK(zkl_lock_acquire(t.la, 5000));
	static h_acq w;
	h_acq_start(&w, t.lb, false);
	h_wait_children(t.path, 2);
	char node[512];
	node_at(t.la, 0, node, sizeof node, NULL);
	CHECK_OK(zkl_revoke(t.b, node));
	assert_true(h_counter_wait(&r.calls, 1, 20000));
	/* The holder ignored the request: the waiter stays out. */
	assert_false(h_latch_wait(w.done, 300));
	assert_true(zkl_lock_is_held(t.la));
	assert_int_equal(h_children(t.path), 2);
	CHECK_OK(zkl_lock_release(t.la));
	assert_true(h_latch_wait(w.done, 20000));
	h_acq_join(&w);
	CHECK_OK(w.rc);
	assert_true(w.held);
	assert_int_equal(r.wrong, 0);
	h_pair_close(&t);
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
	zkl_lock *wl = zkl_mutex_lock(wa);
	zkl_lock *rdb = zkl_mutex_lock(zkl_rwlock_read(rb));
	static struct revoked r;
	revoked_init(&r, wa, DO_RELEASE);
	CHECK_OK(zkl_mutex_make_revocable(wa, on_revoke, &r));
	CHECK_OK(zkl_lock_acquire(wl, 5000));
	char node[512];
	int data_len = -1;
	node_at(rdb, 0, node, sizeof node, &data_len);
	assert_non_null(strstr(node, "__WRIT__"));
	assert_int_equal(data_len, 0);

	static h_acq rd;
	h_acq_start(&rd, rdb, true);
	h_wait_children(path, 2);
	CHECK_OK(zkl_revoke(b, node));
	assert_true(h_counter_wait(&r.calls, 1, 20000));
	CHECK_OK(r.release_rc); /* released from the callback's thread */
	assert_true(h_latch_wait(rd.done, 20000));
	CHECK_OK(rd.rc);
	assert_int_equal(r.wrong, 0);
	assert_false(zkl_lock_is_held(wl));
	assert_false(h_exists(node));
	h_acq_join(&rd);
	CHECK_OK(rd.release_rc);
	assert_int_equal(h_counter_get(&r.calls), 1);
	zkl_rwlock_free(ra);
	zkl_rwlock_free(rb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a latch: revocation asks the leader; its interrupt hands leadership over ---- */

/* What a latch saw. */
struct latch_seen {
	h_counter gained, lost, revoked;
	int last_lost;
	bool interrupt; /* on_revoke interrupts (planned failover) */
};

static void latch_gained(zkl_leader *l, void *data)
{
	(void)l;
	h_counter_add(&((struct latch_seen *)data)->gained, 1);
}

static void latch_lost(zkl_leader *l, int reason, void *data)
{
	(void)l;
	struct latch_seen *s = data;
	__atomic_store_n(&s->last_lost, reason, __ATOMIC_SEQ_CST);
	h_counter_add(&s->lost, 1);
}

static void latch_revoked(zkl_leader *l, void *data)
{
	struct latch_seen *s = data;
	h_counter_add(&s->revoked, 1);
	if (s->interrupt)
		zkl_leader_interrupt(l); /* from the loop: returns at once */
}

static zkl_leader *latch_open(zkl_client *c, const char *path, const char *id,
                              struct latch_seen *s)
{
	memset(s, 0, sizeof *s);
	h_counter_init(&s->gained);
	h_counter_init(&s->lost);
	h_counter_init(&s->revoked);
	s->interrupt = true;
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.id = id;
	o.on_gained = latch_gained;
	o.on_lost = latch_lost;
	o.on_revoke = latch_revoked;
	o.data = s;
	zkl_leader *l;
	CHECK_OK(zkl_leader_new(&l, c, path, &o));
	return l;
}

/* The ids of the election's participants, in order, joined by ",". */
static void election_ids(zkl_leader *l, char *buf, size_t size)
{
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(l), &ps, &n));
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? "," : "", ps[i].data);
	zkl_participants_free(ps, n);
}

static void test_latch_revoke_hands_over(void **state)
{
	(void)state;
	const char *path = h_path("latch-revoke");
	zkl_client *a = h_client(10000), *b = h_client(10000);
	static struct latch_seen sa, sb;
	zkl_leader *la = latch_open(a, path, "A", &sa), *lb = latch_open(b, path, "B", &sb);
	CHECK_OK(zkl_leader_start(la));
	CHECK_OK(zkl_leader_await(la, 10000));
	CHECK_OK(zkl_leader_start(lb));
	h_wait_participants(zkl_leader_lock(la), 2);
	char node[512], ids[64];
	CHECK_OK(zkl_lock_node(zkl_leader_lock(la), node, sizeof node) > 0 ? 0 : -1);

	/* Asked: A's callback interrupts; A loses with ZKL_ECANCELED, B leads at once, A
	 * is queued again behind B. */
	CHECK_OK(zkl_revoke(b, node));
	assert_true(h_counter_wait(&sa.revoked, 1, 10000));
	CHECK_OK(zkl_leader_await(lb, 10000));
	assert_true(h_counter_wait(&sa.lost, 1, 10000));
	assert_int_equal(__atomic_load_n(&sa.last_lost, __ATOMIC_SEQ_CST), ZKL_ECANCELED);
	assert_false(zkl_lock_is_held(zkl_leader_lock(la)));
	assert_true(h_wait_deleted(node, 10000));
	h_wait_participants(zkl_leader_lock(la), 2);
	election_ids(la, ids, sizeof ids);
	assert_string_equal(ids, "B,A");

	/* A request to a leader that does not act on it changes nothing. */
	sb.interrupt = false;
	CHECK_OK(zkl_lock_node(zkl_leader_lock(lb), node, sizeof node) > 0 ? 0 : -1);
	CHECK_OK(zkl_revoke(a, node));
	assert_true(h_counter_wait(&sb.revoked, 1, 10000));
	assert_true(zkl_lock_is_held(zkl_leader_lock(lb)));
	assert_int_equal(h_counter_get(&sb.lost), 0);
	/* The interrupt from another thread does the same as from the callback. */
	zkl_leader_interrupt(lb);
	CHECK_OK(zkl_leader_await(la, 10000));
	assert_true(h_counter_wait(&sb.lost, 1, 10000));
	assert_true(h_counter_wait(&sa.gained, 2, 10000)); /* after await: gained runs next */
	assert_int_equal(h_counter_get(&sb.revoked), 1);
	zkl_leader_interrupt(NULL);
	zkl_leader_free(la);
	zkl_leader_free(lb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* Through the view, an interrupt does nothing: the view's release gives leadership up,
 * so the node stays while the application still acts as leader. */
static void test_latch_view_interrupt_noop(void **state)
{
	(void)state;
	const char *path = h_path("latch-view-interrupt");
	zkl_client *a = h_client(10000);
	static struct latch_seen sa;
	zkl_leader *la = latch_open(a, path, "A", &sa);
	sa.interrupt = false;
	zkl_lock *v = zkl_leader_lock(la);
	CHECK_OK(zkl_lock_acquire(v, 10000));
	char node[512];
	CHECK_OK(zkl_lock_node(v, node, sizeof node) > 0 ? 0 : -1);
	CHECK_OK(zkl_revoke(a, node));
	assert_true(h_counter_wait(&sa.revoked, 1, 10000));
	zkl_leader_interrupt(la);
	assert_true(zkl_lock_is_held(v));
	assert_true(h_exists(node));
	CHECK_OK(zkl_lock_release(v));
	assert_false(h_exists(node));
	zkl_leader_free(la);
	zkl_client_close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_revoke_missing),
		cmocka_unit_test(test_revocable_holder),
		cmocka_unit_test(test_revocable_async_holder),
		cmocka_unit_test(test_not_revocable_ignores),
		cmocka_unit_test(test_revocable_data_and_off),
		cmocka_unit_test(test_once_per_request),
		cmocka_unit_test(test_revoke_waiter),
		cmocka_unit_test(test_revoke_async_waiter),
		cmocka_unit_test(test_request_keeps_waiter_out),
		cmocka_unit_test(test_rwlock_write_revocable),
		cmocka_unit_test(test_latch_revoke_hands_over),
		cmocka_unit_test(test_latch_view_interrupt_noop),
	};
	return H_RUN(tests);
}
