/* zklocks and the real kazoo (Debian's python3-kazoo 2.8.0, driven through peer.py) on
 * the same lock paths, with zklocks using kazoo's node names (ZKL_NAMING_KAZOO). One
 * Python process serves every test of this program; each kazoo contender is a slot of it.
 *
 * kazoo 2.8.0's ReadLock counts every write node as a predecessor, including writers that
 * queued after it (kazoo issue 649, fixed upstream later): a waiting kazoo reader with a
 * writer queued behind it deadlocks with that writer. The tests pair a kazoo reader only
 * where no writer queues behind it, and show that zklocks' own reader is right in the case
 * that kazoo 2.8.0 gets wrong (docs/INTEROP.md). Run through tests/with-zk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "peer.h"

static peer *P;

#define SOON PEER_SOON
#define TRY PEER_TRY
#define K ZKL_NAMING_KAZOO

/* ---- Lock ---- */

static void test_lock_zklocks_holds(void **state)
{
	(void)state;
	const char *path = h_path("k-lock-z");
	zh *z = zh_new(ZH_MUTEX, path, K, 0, NULL);
	CHECK_OK(zh_acquire(z, -1));
	peer_do(P, "a", "timeout", SOON, "acquire lock %s %d", path, TRY);
	peer_do(P, "a", "timeout", SOON, "acquire lock %s 0", path);
	h_wait_children(path, 1);
	peer_send(P, "a acquire lock %s 30000", path);
	h_wait_children(path, 2);
	assert_true(peer_quiet(P, "a", 300));
	CHECK_OK(zh_release(z));
	peer_expect(P, "a", "acquired", SOON);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, TRY));
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, 0));
	peer_do(P, "a", "released", SOON, "release");
	CHECK_OK(zh_acquire(z, 0));
	CHECK_OK(zh_release(z));
	zh_free(z);
}

static void test_lock_kazoo_holds(void **state)
{
	(void)state;
	peer_check_peer_holds(P, h_path("k-lock-k"), K, "lock");
}

/* Holder zklocks, then kazoo b, zklocks c, kazoo d, zklocks e: served in that order. */
static void test_lock_fifo_alternating(void **state)
{
	(void)state;
	peer_check_fifo_alternating(P, h_path("k-lock-fifo"), K, "lock");
}

/* ---- WriteLock and ReadLock ---- */

/* A kazoo writer keeps zklocks' readers out; they get in together once it goes. */
static void test_rw_kazoo_writer_blocks_zklocks_readers(void **state)
{
	(void)state;
	peer_check_peer_writer_blocks_readers(P, h_path("k-rw-kw"), K);
}

/* A zklocks writer keeps kazoo's readers out (no writer queues behind them: kazoo 649). */
static void test_rw_zklocks_writer_blocks_kazoo_readers(void **state)
{
	(void)state;
	const char *path = h_path("k-rw-zw");
	zh *w = zh_new(ZH_WRITE, path, K, 0, NULL);
	CHECK_OK(zh_acquire(w, -1));
	peer_do(P, "r1", "timeout", SOON, "acquire read %s %d", path, TRY);
	peer_send(P, "r1 acquire read %s 30000", path);
	peer_send(P, "r2 acquire read %s 30000", path);
	h_wait_children(path, 3);
	assert_true(peer_quiet(P, "r1", 300));
	assert_true(peer_quiet(P, "r2", 0));
	CHECK_OK(zh_release(w));
	peer_expect(P, "r1", "acquired", SOON);
	peer_expect(P, "r2", "acquired", SOON);
	/* kazoo's readers keep our writer out. */
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(w, TRY));
	peer_do(P, "r1", "released", SOON, "release");
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(w, TRY));
	zh_start_acquire(w, 30000);
	assert_int_equal(zh_wait(w, 300), ZH_PENDING);
	peer_do(P, "r2", "released", SOON, "release");
	CHECK_OK(zh_wait(w, SOON));
	/* And kazoo's WriteLock against our write half, both ways. */
	peer_do(P, "kw", "timeout", SOON, "acquire write %s %d", path, TRY);
	peer_send(P, "kw acquire write %s 30000", path);
	assert_true(peer_quiet(P, "kw", 300));
	CHECK_OK(zh_release(w));
	peer_expect(P, "kw", "acquired", SOON);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(w, TRY));
	peer_do(P, "kw", "released", SOON, "release");
	CHECK_OK(zh_acquire(w, SOON));
	CHECK_OK(zh_release(w));
	zh_free(w);
}

/* zklocks' and kazoo's readers hold together and keep writers of both libraries out; a
 * kazoo writer queued behind them keeps later zklocks readers out. */
static void test_rw_readers_overlap(void **state)
{
	(void)state;
	const char *path = h_path("k-rw-readers");
	zh *z1 = zh_new(ZH_READ, path, K, 0, NULL);
	zh *z2 = zh_new(ZH_READ, path, K, 0, NULL);
	zh *z3 = zh_new(ZH_READ, path, K, 0, NULL);
	zh *zw = zh_new(ZH_WRITE, path, K, 0, NULL);
	CHECK_OK(zh_acquire(z1, -1));
	peer_do(P, "r1", "acquired", SOON, "acquire read %s %d", path, SOON);
	CHECK_OK(zh_acquire(z2, SOON));
	peer_do(P, "w", "timeout", SOON, "acquire write %s %d", path, TRY);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(zw, TRY));

	peer_send(P, "w acquire write %s 30000", path);
	h_wait_children(path, 4);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z3, TRY));
	/* A kazoo reader queued after the writer waits for it too (kazoo is right here:
	 * the writer is ahead of it). */
	peer_do(P, "r2", "timeout", SOON, "acquire read %s %d", path, TRY);
	CHECK_OK(zh_release(z1));
	peer_do(P, "r1", "released", SOON, "release");
	assert_true(peer_quiet(P, "w", 300));
	CHECK_OK(zh_release(z2));
	peer_expect(P, "w", "acquired", SOON);
	peer_do(P, "w", "released", SOON, "release");
	zh_free(z1);
	zh_free(z2);
	zh_free(z3);
	zh_free(zw);
}

/* The case kazoo 2.8.0's ReadLock gets wrong, with zklocks as the reader: a kazoo writer
 * holds, a zklocks reader waits, a second kazoo writer queues behind the reader. When the
 * first writer goes, the reader must get in (the later writer is behind it), and the later
 * writer must wait for the reader. A kazoo 2.8.0 reader in the same place would wait for
 * the later writer while that writer waits for it. */
static void test_rw_reader_before_later_writer(void **state)
{
	(void)state;
	const char *path = h_path("k-rw-649");
	peer_do(P, "w1", "acquired", SOON, "acquire write %s -1", path);
	zh *r = zh_new(ZH_READ, path, K, 0, NULL);
	zh_start_acquire(r, 30000);
	h_wait_children(path, 2);
	peer_send(P, "w2 acquire write %s 30000", path);
	h_wait_children(path, 3);
	assert_int_equal(zh_wait(r, 300), ZH_PENDING);
	peer_do(P, "w1", "released", SOON, "release");
	CHECK_OK(zh_wait(r, SOON));
	assert_true(peer_quiet(P, "w2", 300));
	CHECK_OK(zh_release(r));
	peer_expect(P, "w2", "acquired", SOON);
	peer_do(P, "w2", "released", SOON, "release");
	zh_free(r);
}

/* ---- participants: kazoo's identifier and our data, seen from both sides ---- */

static void test_participants(void **state)
{
	(void)state;
	const char *path = h_path("k-participants");
	peer_do(P, "a", "acquired", SOON, "acquire lock %s -1", path);
	zh *z = zh_new(ZH_MUTEX, path, K, 0, "zklocks-waiter");
	zh_start_acquire(z, 30000);
	h_wait_children(path, 2);

	zkl_participant *list;
	size_t n;
	CHECK_OK(zh_participants(z, &list, &n));
	assert_int_equal(n, 2);
	assert_true(list[0].holder);
	assert_string_equal(list[0].data, peer_data(P)); /* kazoo's identifier */
	assert_non_null(strstr(list[0].path, "__lock__"));
	assert_false(list[1].holder);
	assert_string_equal(list[1].data, "zklocks-waiter");
	assert_non_null(strstr(list[1].path, "__lock__"));
	zkl_participants_free(list, n);
	/* kazoo's contenders(): its identifier, then our data, in queue order. */
	char want[600];
	snprintf(want, sizeof want, "contenders %s zklocks-waiter", peer_data(P));
	peer_do(P, "p", want, SOON, "contenders lock %s", path);

	peer_do(P, "a", "released", SOON, "release");
	CHECK_OK(zh_wait(z, SOON));
	CHECK_OK(zh_release(z));
	zh_free(z);
}

/* ---- a kazoo holder's session expires: the zklocks waiter gets the lock ---- */

static void test_kazoo_session_expiry(void **state)
{
	(void)state;
	const char *path = h_path("k-expiry");
	peer_do(P, "x", "acquired", SOON, "acquire lock %s -1", path);
	zh *z = zh_new(ZH_MUTEX, path, K, 0, NULL);
	zh_start_acquire(z, 60000);
	h_wait_children(path, 2);
	assert_int_equal(zh_wait(z, 300), ZH_PENDING);
	peer_expire(P);
	CHECK_OK(zh_wait(z, SOON));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zh_release(z));
	zh_free(z);
	/* kazoo still believes it holds; release finds its node gone. */
	peer_send(P, "x release");
	char *t = peer_next(P, "x", SOON);
	assert_non_null(t);
	free(t);
}

static int setup(void **state)
{
	h_setup(state);
	P = peer_start(PEER_KAZOO, 10000);
	return 0;
}

static int teardown(void **state)
{
	peer_stop(P);
	P = NULL;
	return h_teardown(state);
}

static void test_note_beside_the_lock(void **state)
{
	(void)state;
	peer_check_note(P, h_path("k-note"), K, "lock");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_zklocks_holds),
		cmocka_unit_test(test_lock_kazoo_holds),
		cmocka_unit_test(test_lock_fifo_alternating),
		cmocka_unit_test(test_rw_kazoo_writer_blocks_zklocks_readers),
		cmocka_unit_test(test_rw_zklocks_writer_blocks_kazoo_readers),
		cmocka_unit_test(test_rw_readers_overlap),
		cmocka_unit_test(test_rw_reader_before_later_writer),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_note_beside_the_lock),
		/* Last: it replaces the peer's session. */
		cmocka_unit_test(test_kazoo_session_expiry),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
