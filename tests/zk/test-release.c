/* Releases that are sent, not awaited (the default): the next acquire pays no extra
 * round trip, our old node never counts against us, and nothing is left behind. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static zkl_client *fast_client(void)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	assert_false(o.confirm_release); /* the default */
	zkl_client *c = NULL;
	CHECK_OK(zkl_client_open(&c, &o));
	return c;
}

static void test_reacquire_at_once(void **state)
{
	(void)state;
	const char *path = h_path("fast");
	zkl_client *c = fast_client();
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	for (int i = 0; i < 200; i++) {
		/* Try-once right after a release: our previous node, whose delete may still
		 * be on its way, must not be taken for a contender. */
		CHECK_OK(zkl_lock_acquire(l, 0));
		int64_t t = zkl_lock_token(l);
		assert_true(t > 0);
		CHECK_OK(zkl_lock_release(l));
		assert_false(zkl_lock_is_held(l));
	}
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	assert_int_equal(n, 0);
	zkl_participants_free(ps, n);
	zkl_mutex_free(m);
	zkl_client_close(c);
	assert_true(h_children(path) <= 0);
}

struct worker {
	const char *path;
	int cycles;
	int *inside;
	int *max_inside;
	int errors;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	zkl_client *c = fast_client();
	zkl_mutex *m;
	zkl_mutex_new(&m, c, w->path);
	zkl_lock *l = zkl_mutex_lock(m);
	for (int i = 0; i < w->cycles; i++) {
		if (zkl_lock_acquire(l, 20000) != 0) {
			w->errors++;
			continue;
		}
		int now = __atomic_add_fetch(w->inside, 1, __ATOMIC_SEQ_CST);
		if (now > __atomic_load_n(w->max_inside, __ATOMIC_SEQ_CST))
			__atomic_store_n(w->max_inside, now, __ATOMIC_SEQ_CST);
		sched_yield();
		__atomic_sub_fetch(w->inside, 1, __ATOMIC_SEQ_CST);
		if (zkl_lock_release(l) != 0)
			w->errors++;
	}
	zkl_mutex_free(m);
	zkl_client_close(c);
	return NULL;
}

static void test_contended(void **state)
{
	(void)state;
	const char *path = h_path("fast-contended");
	int inside = 0, max_inside = 0;
	struct worker ws[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		ws[i] = (struct worker){path, 50, &inside, &max_inside, 0};
		pthread_create(&th[i], NULL, worker, &ws[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(ws[i].errors, 0);
	}
	assert_int_equal(max_inside, 1);
	assert_true(h_children(path) <= 0);
}

static void test_semaphore_fast(void **state)
{
	(void)state;
	const char *path = h_path("fast-sem");
	zkl_client *c = fast_client();
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, path, 2));
	for (int i = 0; i < 50; i++) {
		zkl_lease *l[2];
		CHECK_OK(zkl_semaphore_acquire(s, 2, 0, l));
		zkl_lease_free(l[0]);
		zkl_lease_free(l[1]);
	}
	zkl_semaphore_free(s);
	zkl_client_close(c);
	char leases[300];
	snprintf(leases, sizeof leases, "%s/leases", path);
	assert_true(h_children(leases) <= 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reacquire_at_once),
		cmocka_unit_test(test_contended),
		cmocka_unit_test(test_semaphore_fast),
	};
	return H_RUN(tests);
}
