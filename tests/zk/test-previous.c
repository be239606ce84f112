/* How the holder before left (zkl_lock_track_previous, zkl_lock_previous) on a real
 * ZooKeeper server (run through tests/with-zk): the note "<path>.previous" that tracking
 * handles read at the acquire and write at the acquire and the release. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

/* A thread that takes l (blocking), notes how its predecessor left, and holds it until
 * release is set. */
struct taker {
	zkl_lock *l;
	int rc;
	zkl_previous how;
	char who[128];
	char node[ZKL_NODE_MAX];
	h_latch *held, *release;
	pthread_t th;
};

static void *take_thread(void *arg)
{
	struct taker *t = arg;
	t->rc = zkl_lock_acquire(t->l, 30000);
	if (t->rc == 0) {
		assert_int_equal(zkl_lock_previous(t->l, &t->how, t->who, sizeof t->who), 0);
		assert_true(zkl_lock_node(t->l, t->node, sizeof t->node) > 0);
	}
	h_latch_set(t->held);
	if (t->rc == 0) {
		h_latch_wait(t->release, 60000);
		assert_int_equal(zkl_lock_release(t->l), 0);
	}
	return NULL;
}

static void taker_start(struct taker *t, zkl_lock *l)
{
	*t = (struct taker){.l = l, .held = h_latch_new(), .release = h_latch_new()};
	pthread_create(&t->th, NULL, take_thread, t);
}

static void taker_join(struct taker *t)
{
	h_latch_set(t->release);
	pthread_join(t->th, NULL);
	h_latch_free(t->held);
	h_latch_free(t->release);
}

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Takes l on this thread and returns how its predecessor left, with its node in who. */
static zkl_previous take(zkl_lock *l, char *who, size_t size, char *node, size_t nsize)
{
	CHECK_OK(zkl_lock_acquire(l, 10000));
	zkl_previous how = (zkl_previous)-1;
	CHECK_OK(zkl_lock_previous(l, &how, who, size));
	assert_true(zkl_lock_node(l, node, nsize) > 0);
	return how;
}

/* The first holder finds none; one that comes after a release finds it released, with
 * its node; one that comes after a holder whose session ended finds it vanished. */
static void test_none_released_vanished(void **state)
{
	(void)state;
	const char *path = h_path("previous-seq");
	char note[512];
	snprintf(note, sizeof note, "%s.previous", path);
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_track_previous(l, true));

	char who[128], node[ZKL_NODE_MAX], first[ZKL_NODE_MAX];
	assert_int_equal(take(l, who, sizeof who, first, sizeof first), ZKL_PREVIOUS_NONE);
	assert_string_equal(who, "");
	/* Re-entry reads nothing new. */
	CHECK_OK(zkl_lock_acquire(l, 0));
	CHECK_OK(zkl_lock_release(l));
	char data[256];
	int n = h_get(note, data, sizeof data);
	assert_true(n > 0);
	data[n] = '\0';
	char want[ZKL_NODE_MAX + 16];
	snprintf(want, sizeof want, "held %s", base(first));
	assert_string_equal(data, want);
	CHECK_OK(zkl_lock_release(l));
	/* The release wrote its note with the delete of its node. */
	assert_int_equal(h_exists(first), 0);
	n = h_get(note, data, sizeof data);
	data[n] = '\0';
	snprintf(want, sizeof want, "released %s", base(first));
	assert_string_equal(data, want);

	/* Arrived after the release: released, naming it. */
	assert_int_equal(take(l, who, sizeof who, node, sizeof node), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(who, base(first));

	/* A holder whose session ends without a release (the server expires it, and
	 * deletes its node): the next one finds it vanished. */
	char second[ZKL_NODE_MAX];
	snprintf(second, sizeof second, "%s", node);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, h_on_lost, lost));
	h_expire(c);
	assert_true(h_wait_deleted(second, 20000));
	assert_int_equal(h_latch_wait(lost, 20000), 1);
	zkl_client *c2 = h_client(0);
	zkl_mutex *m2;
	CHECK_OK(zkl_mutex_new(&m2, c2, path));
	zkl_lock *l2 = zkl_mutex_lock(m2);
	CHECK_OK(zkl_lock_track_previous(l2, true));
	assert_int_equal(take(l2, who, sizeof who, node, sizeof node), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, base(second));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	CHECK_OK(zkl_lock_release(l2));
	n = h_get(note, data, sizeof data);
	data[n] = '\0';
	snprintf(want, sizeof want, "released %s", base(node));
	assert_string_equal(data, want); /* the lost release wrote nothing */
	zkl_mutex_free(m2);
	zkl_mutex_free(m);
	h_latch_free(lost);
	zkl_client_close(c2);
	zkl_client_close(c);
	h_delete(note);
}

/* Queued behind a tracking holder that releases: released, naming the node it waited
 * behind. Queued behind a holder that leaves no note (a handle not tracking, as another
 * library's): vanished, naming it. */
static void test_queued_behind(void **state)
{
	(void)state;
	const char *path = h_path("previous-queue");
	char note[512];
	snprintf(note, sizeof note, "%s.previous", path);
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_mutex_lock(ma), *lb = zkl_mutex_lock(mb);
	CHECK_OK(zkl_lock_track_previous(la, true));
	CHECK_OK(zkl_lock_track_previous(lb, true));

	char who[128], held[ZKL_NODE_MAX];
	take(la, who, sizeof who, held, sizeof held);
	struct taker t;
	taker_start(&t, lb);
	h_wait_children(path, 2);
	assert_int_equal(h_latch_wait(t.held, 200), 0); /* it waits */
	CHECK_OK(zkl_lock_release(la));
	assert_int_equal(h_latch_wait(t.held, 20000), 1);
	assert_int_equal(t.rc, 0);
	assert_int_equal(t.how, ZKL_PREVIOUS_RELEASED);
	assert_string_equal(t.who, base(held));
	taker_join(&t);

	/* Now a holder that leaves no note: a handle of the same lock, not tracking. */
	CHECK_OK(zkl_lock_track_previous(la, false));
	CHECK_OK(zkl_lock_acquire(la, 10000));
	assert_true(zkl_lock_node(la, held, sizeof held) > 0);
	zkl_previous how;
	CHECK_RC(ZKL_EINVAL, zkl_lock_previous(la, &how, who, sizeof who));
	taker_start(&t, lb);
	h_wait_children(path, 2);
	CHECK_OK(zkl_lock_release(la));
	assert_int_equal(h_latch_wait(t.held, 20000), 1);
	assert_int_equal(t.rc, 0);
	assert_int_equal(t.how, ZKL_PREVIOUS_VANISHED);
	assert_string_equal(t.who, base(held));
	taker_join(&t);

	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
	h_delete(note);
}

/* A write lock queued behind readers only counts writers: readers keep no note. */
static void test_write_half(void **state)
{
	(void)state;
	const char *path = h_path("previous-rw");
	char note[512];
	snprintf(note, sizeof note, "%s.previous", path);
	zkl_client *c = h_client(0), *d = h_client(0);
	zkl_rwlock *rd, *wr;
	CHECK_OK(zkl_rwlock_new(&rd, c, path));
	CHECK_OK(zkl_rwlock_new(&wr, d, path));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rd)), *w = zkl_mutex_lock(zkl_rwlock_write(wr));
	CHECK_RC(ZKL_EINVAL, zkl_lock_track_previous(r, true));
	assert_non_null(strstr(zkl_last_error(), "read"));
	CHECK_OK(zkl_lock_track_previous(w, true));
	CHECK_OK(zkl_lock_acquire(r, 10000));
	struct taker t;
	taker_start(&t, w);
	h_wait_children(path, 2);
	CHECK_OK(zkl_lock_release(r));
	assert_int_equal(h_latch_wait(t.held, 20000), 1);
	assert_int_equal(t.rc, 0);
	assert_int_equal(t.how, ZKL_PREVIOUS_NONE);
	assert_string_equal(t.who, "");
	taker_join(&t);
	zkl_rwlock_free(rd);
	zkl_rwlock_free(wr);
	zkl_client_close(c);
	zkl_client_close(d);
	h_delete(note);
}

static void on_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	(void)data;
}

/* Misuse: kinds with several holders, NULLs, not held, an asynchronous acquire. */
static void test_misuse(void **state)
{
	(void)state;
	const char *path = h_path("previous-misuse");
	zkl_client *c = h_client(0);
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, h_sub(path, "sem"), 2));
	CHECK_RC(ZKL_EINVAL, zkl_lock_track_previous(zkl_semaphore_lock(s), true));
	CHECK_RC(ZKL_EINVAL, zkl_lock_track_previous(NULL, true));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_sub(path, "m")));
	zkl_lock *l = zkl_mutex_lock(m);
	zkl_previous how;
	char who[64];
	CHECK_RC(ZKL_EINVAL, zkl_lock_previous(l, &how, who, sizeof who));
	assert_non_null(strstr(zkl_last_error(), "zkl_lock_track_previous"));
	CHECK_OK(zkl_lock_track_previous(l, true));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_previous(l, &how, who, sizeof who));
	CHECK_RC(ZKL_EINVAL, zkl_lock_previous(l, NULL, who, sizeof who));
	CHECK_RC(ZKL_EINVAL, zkl_lock_previous(l, &how, NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_lock_previous(l, &how, who, 0));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_acquire_async(l, 1000, on_acquired, NULL));
	assert_non_null(strstr(zkl_last_error(), "blocking"));
	assert_string_equal(zkl_previous_name(ZKL_PREVIOUS_NONE), "none");
	assert_string_equal(zkl_previous_name(ZKL_PREVIOUS_RELEASED), "released");
	assert_string_equal(zkl_previous_name(ZKL_PREVIOUS_VANISHED), "vanished");
	assert_null(zkl_previous_name((zkl_previous)7));
	zkl_mutex_free(m);
	zkl_semaphore_free(s);
	zkl_client_close(c);
}

/* A release with a transaction: the record and the note are written with the delete
 * of the node, or nothing is. */
static void test_release_txn(void **state)
{
	(void)state;
	const char *path = h_path("previous-txn");
	char note[512], rec[512], data[256];
	snprintf(note, sizeof note, "%s.previous", path);
	snprintf(rec, sizeof rec, "%s.last-run", path);
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_track_previous(l, true));
	char node[ZKL_NODE_MAX], want[ZKL_NODE_MAX + 16];

	/* Applied: the record made, the node gone, the note says released. */
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	zkl_txn_op op = {.kind = ZKL_TXN_CREATE, .path = rec, .data = "run 1", .len = 5};
	zkl_txn_result r;
	CHECK_OK(zkl_lock_release_txn(l, &op, 1, &r));
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.path, rec);
	assert_false(zkl_lock_is_held(l));
	assert_int_equal(h_exists(node), 0);
	int n = h_get(rec, data, sizeof data);
	data[n] = '\0';
	assert_string_equal(data, "run 1");
	n = h_get(note, data, sizeof data);
	data[n] = '\0';
	snprintf(want, sizeof want, "released %s", strrchr(node, '/') + 1);
	assert_string_equal(data, want);

	/* An operation fails (the record is there already): nothing of it is applied, and
	 * the lock is released all the same, its note with it. */
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	zkl_txn_op two[2] = {
		{.kind = ZKL_TXN_SET, .path = rec, .data = "run 2", .len = 5, .version = -1},
		{.kind = ZKL_TXN_CREATE, .path = rec, .data = "x", .len = 1},
	};
	zkl_txn_result rr[2];
	CHECK_RC(ZKL_EZK, zkl_lock_release_txn(l, two, 2, rr));
	assert_int_equal(rr[0].rc, ZKL_ECANCELED);
	assert_int_equal(rr[1].rc, ZKL_EZK);
	assert_int_equal(rr[1].zk_rc, ZNODEEXISTS);
	assert_false(zkl_lock_is_held(l));
	assert_int_equal(h_exists(node), 0);
	n = h_get(rec, data, sizeof data);
	data[n] = '\0';
	assert_string_equal(data, "run 1"); /* the set before it was not applied either */
	n = h_get(note, data, sizeof data);
	data[n] = '\0';
	snprintf(want, sizeof want, "released %s", strrchr(node, '/') + 1);
	assert_string_equal(data, want);

	/* An operation on the hold's own node (which the release deletes): refused, nothing
	 * done, the lock still held with its node; a plain release then frees it. */
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	const zkl_txn_op own[2] = {
		{.kind = ZKL_TXN_SET, .path = rec, .data = "run 2", .len = 5, .version = -1},
		{.kind = ZKL_TXN_DELETE, .path = node, .version = -1},
	};
	memset(rr, 0, sizeof rr);
	CHECK_RC(ZKL_EINVAL, zkl_lock_release_txn(l, own, 2, rr));
	assert_non_null(strstr(zkl_last_error(), "own node"));
	assert_int_equal(rr[1].rc, ZKL_EINVAL);
	assert_true(zkl_lock_is_held(l));
	assert_int_equal(h_exists(node), 1);
	n = h_get(rec, data, sizeof data);
	data[n] = '\0';
	assert_string_equal(data, "run 1");
	CHECK_OK(zkl_lock_release(l));
	assert_int_equal(h_exists(node), 0);

	/* Held twice over: nothing is done. */
	CHECK_OK(zkl_lock_acquire(l, 10000));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	op = (zkl_txn_op){.kind = ZKL_TXN_SET, .path = rec, .data = "run 3", .len = 5,
	                  .version = -1};
	CHECK_RC(ZKL_EBUSY, zkl_lock_release_txn(l, &op, 1, &r));
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));

	/* Its node deleted by someone else: lost, told once, nothing applied. */
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, h_on_lost, lost));
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	h_delete(node);
	int rc = zkl_lock_release_txn(l, &op, 1, &r);
	assert_int_equal(rc, ZKL_ELOST);
	assert_int_equal(r.rc, ZKL_ELOST);
	assert_int_equal(h_latch_wait(lost, 20000), 1);
	assert_int_equal(h_latch_count(lost), 1);
	assert_false(zkl_lock_is_held(l));
	n = h_get(rec, data, sizeof data);
	data[n] = '\0';
	assert_string_equal(data, "run 1");
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release_txn(l, &op, 1, &r));
	CHECK_OK(zkl_lock_on_lost(l, NULL, NULL));
	h_latch_free(lost);

	/* Kinds without a node of one holder's. */
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, h_sub(path, "sem"), 2));
	zkl_lock *sl = zkl_semaphore_lock(s);
	CHECK_OK(zkl_lock_acquire(sl, 10000));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_release_txn(sl, &op, 1, &r));
	CHECK_OK(zkl_lock_release(sl));
	zkl_semaphore_free(s);
	CHECK_RC(ZKL_EINVAL, zkl_lock_release_txn(l, NULL, 1, &r));

	zkl_mutex_free(m);
	zkl_client_close(c);
	h_delete(rec);
	h_delete(note);
}

static void on_lost_latch(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	h_latch_set(data);
}

/* A holder says how its hold ended (zkl_lock_set_end): the next one reads it
 * (zkl_lock_previous_end); a hold that was lost says so (zkl_lock_tell_lost), and the
 * next one is told vanished with the end "lost". */
static void test_end_and_lost(void **state)
{
	(void)state;
	const char *path = h_path("previous-end");
	char note[512];
	snprintf(note, sizeof note, "%s.previous", path);
	zkl_client *c = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	char who[128], node[ZKL_NODE_MAX], end[ZKL_END_MAX];
	bool told = true;
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_end(l, "exited 0")); /* not tracking */
	CHECK_RC(ZKL_EINVAL, zkl_lock_tell_lost(l, 1000, &told));
	CHECK_OK(zkl_lock_track_previous(l, true));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_set_end(l, "exited 0"));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_previous_end(l, end, sizeof end));
	assert_int_equal(take(l, who, sizeof who, node, sizeof node), ZKL_PREVIOUS_NONE);
	CHECK_OK(zkl_lock_previous_end(l, end, sizeof end));
	assert_string_equal(end, "");
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_end(l, "two\nlines"));
	char big[ZKL_END_MAX + 1];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	CHECK_RC(ZKL_EINVAL, zkl_lock_set_end(l, big));
	CHECK_RC(ZKL_EBUSY, zkl_lock_tell_lost(l, 1000, &told)); /* held: release it */
	CHECK_OK(zkl_lock_set_end(l, "exited 3"));
	CHECK_OK(zkl_lock_release(l));
	char buf[256];
	int n = h_get(note, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	char want[ZKL_NODE_MAX + 32];
	snprintf(want, sizeof want, "released %s\nexited 3", base(node));
	assert_string_equal(buf, want);

	assert_int_equal(take(l, who, sizeof who, node, sizeof node), ZKL_PREVIOUS_RELEASED);
	CHECK_OK(zkl_lock_previous_end(l, end, sizeof end));
	assert_string_equal(end, "exited 3");
	/* Lost: the node deleted from outside. */
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, on_lost_latch, lost));
	char full[ZKL_NODE_MAX + 300];
	snprintf(full, sizeof full, "%s/%s", path, base(node));
	h_delete(full);
	assert_true(h_latch_wait(lost, 10000));
	CHECK_OK(zkl_lock_tell_lost(l, 10000, &told));
	assert_true(told);
	zkl_lock_release(l);
	n = h_get(note, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	snprintf(want, sizeof want, "lost %s", base(node));
	assert_string_equal(buf, want);
	CHECK_OK(zkl_lock_on_lost(l, NULL, NULL));
	assert_int_equal(take(l, who, sizeof who, node, sizeof node), ZKL_PREVIOUS_VANISHED);
	CHECK_OK(zkl_lock_previous_end(l, end, sizeof end));
	assert_string_equal(end, "lost");
	CHECK_OK(zkl_lock_release(l));
	h_latch_free(lost);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none_released_vanished),
		cmocka_unit_test(test_queued_behind),
		cmocka_unit_test(test_write_half),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_release_txn),
		cmocka_unit_test(test_end_and_lost),
	};
	return H_RUN(tests);
}
