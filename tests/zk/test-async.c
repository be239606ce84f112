/* Asynchronous acquires on a real server: many at once from one thread, their callbacks
 * exactly once on the event thread, cancels racing grants with nothing left behind. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { PATHS = 10, PER_PATH = 100, RACES = 1000 };

struct contender {
	zkl_mutex *m;
	int path;
	atomic_int calls;
	int rc;
	int release_rc;
};

struct world {
	atomic_int inside[PATHS];  /* holders in each critical section right now */
	atomic_int crowded;        /* times a holder found someone else inside */
	h_counter done;
};

static struct world *world;

static void granted(zkl_lock *l, int rc, void *data)
{
	struct contender *k = data;
	k->rc = rc;
	if (rc == 0) {
		if (atomic_fetch_add(&world->inside[k->path], 1) != 0)
			atomic_fetch_add(&world->crowded, 1);
		atomic_fetch_sub(&world->inside[k->path], 1);
		k->release_rc = zkl_lock_release(l);
	}
	atomic_fetch_add(&k->calls, 1);
	h_counter_add(&world->done, 1);
}

/* 1,000 acquires on 10 paths, started from one thread at once, on one client. */
static void test_thousand_from_one_thread(void **state)
{
	(void)state;
	zkl_client *c = h_client(10000);
	struct world w = {0};
	h_counter_init(&w.done);
	world = &w;
	const char *paths[PATHS];
	for (int p = 0; p < PATHS; p++)
		paths[p] = strdup(h_path("thousand"));
	struct contender *k = calloc(PATHS * PER_PATH, sizeof *k);
	assert_non_null(k);
	for (int i = 0; i < PATHS * PER_PATH; i++) {
		k[i].path = i % PATHS;
		CHECK_OK(zkl_mutex_new(&k[i].m, c, paths[k[i].path]));
	}
	for (int i = 0; i < PATHS * PER_PATH; i++)
		CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(k[i].m), -1, granted, &k[i]));
	assert_true(h_counter_wait(&w.done, PATHS * PER_PATH, 120000));
	for (int i = 0; i < PATHS * PER_PATH; i++) {
		CHECK_OK(k[i].rc);
		CHECK_OK(k[i].release_rc);
		assert_int_equal(atomic_load(&k[i].calls), 1);
	}
	assert_int_equal(atomic_load(&w.crowded), 0);
	for (int p = 0; p < PATHS; p++)
		h_wait_children(paths[p], 0);
	for (int i = 0; i < PATHS * PER_PATH; i++)
		zkl_mutex_free(k[i].m);
	zkl_client_close(c);
	for (int i = 0; i < PATHS * PER_PATH; i++)
		assert_int_equal(atomic_load(&k[i].calls), 1);
	for (int p = 0; p < PATHS; p++)
		free((char *)paths[p]);
	free(k);
	h_counter_destroy(&w.done);
}

/* A cancel racing the grant, 1,000 times: the callback says which won; a cancelled
 * acquire leaves nothing on the server, a granted one holds. */
static void test_cancel_races_grant(void **state)
{
	(void)state;
	h_pair t;
	h_pair_open(&t, "async-cancel");
	struct world w = {0};
	h_counter_init(&w.done);
	world = &w;
	int held = 0, canceled = 0;
	for (int i = 0; i < RACES; i++) {
		CHECK_OK(zkl_lock_acquire(t.la, -1));
		struct contender k = { .m = t.mb, .path = 0 };
		CHECK_OK(zkl_lock_acquire_async(t.lb, -1, granted, &k));
		if (i % 2)
			h_wait_children(t.path, 2);
		CHECK_OK(zkl_lock_release(t.la));
		zkl_lock_cancel(t.lb);
		assert_true(h_counter_wait(&w.done, i + 1, 20000));
		assert_int_equal(atomic_load(&k.calls), 1);
		if (k.rc == 0) {
			held++;
			CHECK_OK(k.release_rc);
		} else {
			CHECK_RC(ZKL_ECANCELED, k.rc);
			canceled++;
		}
		/* Nothing of either is left: the cancelled withdrew before its callback, the
		 * holder released in it, and a's release is on its way. */
		h_wait_children(t.path, 0);
	}
	assert_int_equal(held + canceled, RACES);
	print_message("cancel races: %d held, %d canceled\n", held, canceled);
	assert_int_equal(atomic_load(&w.crowded), 0);
	h_pair_close(&t);
	h_counter_destroy(&w.done);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thousand_from_one_thread),
		cmocka_unit_test(test_cancel_races_grant),
	};
	return H_RUN(tests);
}
