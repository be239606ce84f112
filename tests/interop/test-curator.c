/* zklocks and the real Curator (Debian's libcurator-recipes-java, driven through
 * Peer.java) on the same lock paths, with zklocks' default (Curator) node names. One JVM
 * serves every test of this program; each Curator contender is a slot of it.
 * Run through tests/with-zk. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "peer.h"

static peer *P;

/* A bound on "it happens soon" that a loaded CI machine still meets. */
#define SOON PEER_SOON
/* How long a try that must fail waits. */
#define TRY PEER_TRY

/* ---- mutex ---- */

static void test_mutex_zklocks_holds(void **state)
{
	(void)state;
	const char *path = h_path("c-mutex-z");
	zh *z = zh_new(ZH_MUTEX, path, ZKL_NAMING_CURATOR, 0, NULL);
	CHECK_OK(zh_acquire(z, -1));
	/* Curator's try times out and withdraws its node. */
	peer_do(P, "a", "timeout", SOON, "acquire mutex %s %d", path, TRY);
	h_wait_children(path, 1);
	/* A waiting Curator contender watches our node and gets the lock when it goes. */
	peer_send(P, "a acquire mutex %s %d", path, 30000);
	h_wait_children(path, 2);
	assert_true(peer_quiet(P, "a", 300));
	CHECK_OK(zh_release(z));
	peer_expect(P, "a", "acquired", SOON);
	/* Now Curator holds: zklocks' tries fail, with and without waiting. */
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, TRY));
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, 0));
	peer_do(P, "a", "released", SOON, "release");
	CHECK_OK(zh_acquire(z, 0));
	CHECK_OK(zh_release(z));
	zh_free(z);
}

static void test_mutex_curator_holds(void **state)
{
	(void)state;
	peer_check_peer_holds(P, h_path("c-mutex-c"), ZKL_NAMING_CURATOR, "mutex");
}

/* A queue that alternates between the libraries is served in the order it queued:
 * holder zklocks, then Curator b, zklocks c, Curator d, zklocks e. */
static void test_mutex_fifo_alternating(void **state)
{
	(void)state;
	peer_check_fifo_alternating(P, h_path("c-mutex-fifo"), ZKL_NAMING_CURATOR, "mutex");
}

/* ---- read-write lock ---- */

static void test_rw_curator_writer_blocks_zklocks_readers(void **state)
{
	(void)state;
	peer_check_peer_writer_blocks_readers(P, h_path("c-rw-cw"), ZKL_NAMING_CURATOR);
}

static void test_rw_zklocks_writer_blocks_curator_readers(void **state)
{
	(void)state;
	const char *path = h_path("c-rw-zw");
	zh *w = zh_new(ZH_WRITE, path, ZKL_NAMING_CURATOR, 0, NULL);
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
	/* Curator's readers keep our writer out. */
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(w, TRY));
	peer_do(P, "r1", "released", SOON, "release");
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(w, TRY));
	peer_do(P, "r2", "released", SOON, "release");
	CHECK_OK(zh_acquire(w, SOON));
	CHECK_OK(zh_release(w));
	zh_free(w);
}

/* zklocks' and Curator's readers hold together; a writer queued behind them (from either
 * library) keeps later readers (from either library) out until it has had its turn. */
static void test_rw_readers_overlap(void **state)
{
	(void)state;
	const char *path = h_path("c-rw-readers");
	zh *z1 = zh_new(ZH_READ, path, ZKL_NAMING_CURATOR, 0, NULL);
	zh *z2 = zh_new(ZH_READ, path, ZKL_NAMING_CURATOR, 0, NULL);
	zh *zw = zh_new(ZH_WRITE, path, ZKL_NAMING_CURATOR, 0, NULL);
	CHECK_OK(zh_acquire(z1, -1));
	peer_do(P, "r1", "acquired", SOON, "acquire read %s %d", path, SOON);
	CHECK_OK(zh_acquire(z2, SOON));
	/* Three readers hold: no writer gets in. */
	peer_do(P, "w", "timeout", SOON, "acquire write %s %d", path, TRY);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(zw, TRY));

	/* A Curator writer queues behind the readers; later readers wait for it. */
	peer_send(P, "w acquire write %s 30000", path);
	h_wait_children(path, 4);
	zh *z3 = zh_new(ZH_READ, path, ZKL_NAMING_CURATOR, 0, NULL);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z3, TRY));
	peer_do(P, "r2", "timeout", SOON, "acquire read %s %d", path, TRY);
	CHECK_OK(zh_release(z1));
	peer_do(P, "r1", "released", SOON, "release");
	assert_true(peer_quiet(P, "w", 300));
	CHECK_OK(zh_release(z2));
	peer_expect(P, "w", "acquired", SOON);

	/* And the same with a zklocks writer queued behind a Curator reader. */
	peer_do(P, "w", "released", SOON, "release");
	peer_do(P, "r1", "acquired", SOON, "acquire read %s %d", path, SOON);
	zh_start_acquire(zw, 30000);
	h_wait_children(path, 2);
	peer_do(P, "r2", "timeout", SOON, "acquire read %s %d", path, TRY);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z3, TRY));
	assert_int_equal(zh_wait(zw, 0), ZH_PENDING);
	peer_do(P, "r1", "released", SOON, "release");
	CHECK_OK(zh_wait(zw, SOON));
	CHECK_OK(zh_release(zw));
	zh_free(z1);
	zh_free(z2);
	zh_free(z3);
	zh_free(zw);
}

/* ---- semaphore ---- */

static void test_semaphore_two_leases(void **state)
{
	(void)state;
	const char *path = h_path("c-sem");
	char leases[600];
	snprintf(leases, sizeof leases, "%s/leases", path);
	zh *z1 = zh_new(ZH_SEM, path, ZKL_NAMING_CURATOR, 2, NULL);
	zh *z2 = zh_new(ZH_SEM, path, ZKL_NAMING_CURATOR, 2, NULL);
	peer_do(P, "a", "acquired", SOON, "acquire sem %s %d 2", path, SOON);
	CHECK_OK(zh_acquire(z1, SOON));
	/* Two leases are out, one each: nobody else gets one. */
	peer_do(P, "b", "timeout", SOON, "acquire sem %s %d 2", path, TRY);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z2, TRY));
	assert_int_equal(h_children(leases), 2);
	/* A zklocks taker waits for a lease that Curator returns, and the other way round. */
	zh_start_acquire(z2, 30000);
	assert_int_equal(zh_wait(z2, 300), ZH_PENDING);
	peer_do(P, "a", "released", SOON, "release");
	CHECK_OK(zh_wait(z2, SOON));
	peer_send(P, "b acquire sem %s 30000 2", path);
	assert_true(peer_quiet(P, "b", 300));
	CHECK_OK(zh_release(z1));
	peer_expect(P, "b", "acquired", SOON);
	CHECK_OK(zh_release(z2));
	peer_do(P, "b", "released", SOON, "release");
	zh_free(z1);
	zh_free(z2);
}

/* Takers of both libraries cycle on a semaphore of 2 leases. A taker counts itself in
 * after its acquire returned and out before it releases, so the count never exceeds the
 * true number of holders: a count above 2 is a real breach. */
struct sem_run {
	const char *path;
	int cycles;
	int inside;
	int max_inside;
	int errors;
};

static void sem_in(struct sem_run *r)
{
	int now = __atomic_add_fetch(&r->inside, 1, __ATOMIC_SEQ_CST);
	int max = __atomic_load_n(&r->max_inside, __ATOMIC_SEQ_CST);
	while (now > max &&
	       !__atomic_compare_exchange_n(&r->max_inside, &max, now, false, __ATOMIC_SEQ_CST,
	                                    __ATOMIC_SEQ_CST))
		;
	usleep(5000);
	__atomic_sub_fetch(&r->inside, 1, __ATOMIC_SEQ_CST);
}

static void *sem_zklocks(void *arg)
{
	struct sem_run *r = arg;
	zkl_client *c = h_client(0);
	zkl_semaphore *s;
	if (zkl_semaphore_new(&s, c, r->path, 2) != 0) {
		__atomic_add_fetch(&r->errors, 1, __ATOMIC_SEQ_CST);
		zkl_client_close(c);
		return NULL;
	}
	for (int i = 0; i < r->cycles; i++) {
		zkl_lease *l;
		if (zkl_semaphore_acquire(s, 1, 30000, &l) != 0) {
			__atomic_add_fetch(&r->errors, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		sem_in(r);
		if (zkl_lease_release(l) != 0)
			__atomic_add_fetch(&r->errors, 1, __ATOMIC_SEQ_CST);
		zkl_lease_free(l);
	}
	zkl_semaphore_free(s);
	zkl_client_close(c);
	return NULL;
}

struct sem_curator {
	struct sem_run *r;
	const char *slot;
};

static void *sem_curator(void *arg)
{
	struct sem_curator *sc = arg;
	struct sem_run *r = sc->r;
	for (int i = 0; i < r->cycles; i++) {
		peer_send(P, "%s acquire sem %s 30000 2", sc->slot, r->path);
		char *t = peer_next(P, sc->slot, 40000);
		if (!t || strcmp(t, "acquired") != 0) {
			fprintf(stderr, "Curator slot %s: %s\n", sc->slot, t ? t : "(nothing)");
			__atomic_add_fetch(&r->errors, 1, __ATOMIC_SEQ_CST);
			free(t);
			return NULL;
		}
		free(t);
		sem_in(r);
		peer_send(P, "%s release", sc->slot);
		t = peer_next(P, sc->slot, 40000);
		if (!t || strcmp(t, "released") != 0)
			__atomic_add_fetch(&r->errors, 1, __ATOMIC_SEQ_CST);
		free(t);
	}
	return NULL;
}

static void test_semaphore_never_more_than_two(void **state)
{
	(void)state;
	struct sem_run r = { .path = h_path("c-sem-load"), .cycles = 12 };
	struct sem_curator sc[2] = { { &r, "s1" }, { &r, "s2" } };
	pthread_t th[4];
	pthread_create(&th[0], NULL, sem_zklocks, &r);
	pthread_create(&th[1], NULL, sem_zklocks, &r);
	pthread_create(&th[2], NULL, sem_curator, &sc[0]);
	pthread_create(&th[3], NULL, sem_curator, &sc[1]);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	print_message("4 takers (2 zklocks, 2 Curator) x %d cycles: at most %d held at once\n",
	              r.cycles, r.max_inside);
	assert_int_equal(r.errors, 0);
	assert_in_range(r.max_inside, 1, 2);
}

/* ---- semaphore-mutex ---- */

static void test_semaphore_mutex_both_ways(void **state)
{
	(void)state;
	const char *path = h_path("c-semmutex");
	zh *z = zh_new(ZH_SEMMUTEX, path, ZKL_NAMING_CURATOR, 0, NULL);
	CHECK_OK(zh_acquire(z, -1));
	peer_do(P, "a", "timeout", SOON, "acquire semmutex %s %d", path, TRY);
	peer_send(P, "a acquire semmutex %s 30000", path);
	assert_true(peer_quiet(P, "a", 300));
	CHECK_OK(zh_release(z));
	peer_expect(P, "a", "acquired", SOON);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, TRY));
	zh_start_acquire(z, 30000);
	assert_int_equal(zh_wait(z, 300), ZH_PENDING);
	peer_do(P, "a", "released", SOON, "release");
	CHECK_OK(zh_wait(z, SOON));
	CHECK_OK(zh_release(z));
	zh_free(z);
}

/* ---- participants: each library's node data, seen from both sides ---- */

static void test_participants(void **state)
{
	(void)state;
	const char *path = h_path("c-participants");
	zh *z = zh_new(ZH_MUTEX, path, ZKL_NAMING_CURATOR, 0, "zklocks-holder");
	CHECK_OK(zh_acquire(z, -1));
	peer_send(P, "a acquire mutex %s 30000", path);
	h_wait_children(path, 2);

	zkl_participant *list;
	size_t n;
	CHECK_OK(zh_participants(z, &list, &n));
	assert_int_equal(n, 2);
	assert_true(list[0].holder);
	assert_string_equal(list[0].data, "zklocks-holder");
	assert_false(list[1].holder);
	/* What Curator wrote: its default data, the host address. */
	assert_string_equal(list[1].data, peer_data(P));
	assert_non_null(strstr(list[1].path, "-lock-"));
	assert_true(list[0].sequence < list[1].sequence);
	/* Curator lists the same queue in the same order. */
	char want[2200];
	snprintf(want, sizeof want, "participants %s %s", list[0].path, list[1].path);
	peer_do(P, "p", want, SOON, "participants mutex %s", path);
	zkl_participants_free(list, n);

	CHECK_OK(zh_release(z));
	peer_expect(P, "a", "acquired", SOON);
	peer_do(P, "a", "released", SOON, "release");

	/* The semaphore's leases: Curator's data and ours side by side. */
	const char *spath = h_path("c-participants-sem");
	zh *s = zh_new(ZH_SEM, spath, ZKL_NAMING_CURATOR, 2, "zklocks-lease");
	peer_do(P, "a", "acquired", SOON, "acquire sem %s %d 2", spath, SOON);
	CHECK_OK(zh_acquire(s, SOON));
	CHECK_OK(zh_participants(s, &list, &n));
	assert_int_equal(n, 2);
	assert_string_equal(list[0].data, peer_data(P));
	assert_string_equal(list[1].data, "zklocks-lease");
	assert_true(list[0].holder && list[1].holder);
	zkl_participants_free(list, n);
	CHECK_OK(zh_release(s));
	peer_do(P, "a", "released", SOON, "release");
	zh_free(s);
	zh_free(z);
}

/* ---- a Curator holder's session ends: the zklocks waiter gets the lock ---- */

static void test_curator_session_expiry(void **state)
{
	(void)state;
	const char *path = h_path("c-expiry");
	peer_do(P, "x", "acquired", SOON, "acquire mutex %s -1", path);
	zh *z = zh_new(ZH_MUTEX, path, ZKL_NAMING_CURATOR, 0, NULL);
	zh_start_acquire(z, 60000);
	h_wait_children(path, 2);
	peer_expire(P);
	CHECK_OK(zh_wait(z, SOON));
	CHECK_OK(zh_release(z));
	zh_free(z);
	/* Curator keeps believing it holds (it does not watch its session for locks);
	 * release deletes nothing and succeeds or reports the missing node. */
	peer_send(P, "x release");
	char *t = peer_next(P, "x", SOON);
	assert_non_null(t);
	free(t);
}

static int setup(void **state)
{
	h_setup(state);
	P = peer_start(PEER_CURATOR, 10000);
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
	peer_check_note(P, h_path("c-note"), ZKL_NAMING_CURATOR, "mutex");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutex_zklocks_holds),
		cmocka_unit_test(test_mutex_curator_holds),
		cmocka_unit_test(test_mutex_fifo_alternating),
		cmocka_unit_test(test_rw_curator_writer_blocks_zklocks_readers),
		cmocka_unit_test(test_rw_zklocks_writer_blocks_curator_readers),
		cmocka_unit_test(test_rw_readers_overlap),
		cmocka_unit_test(test_semaphore_two_leases),
		cmocka_unit_test(test_semaphore_never_more_than_two),
		cmocka_unit_test(test_semaphore_mutex_both_ways),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_note_beside_the_lock),
		/* Last: it replaces the peer's session. */
		cmocka_unit_test(test_curator_session_expiry),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
