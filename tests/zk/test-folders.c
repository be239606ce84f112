/* Lock folders that stay: folders made persistent by hand (as on a server without
 * containers, or by another client) are used as they are by every recipe; zkl_prune()
 * deletes the empty ones and nothing else, and racing acquirers never see an error
 * from it. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* Creates path and its missing parents, persistent and empty. */
static void mkdirs(const char *path)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == 0) {
			char c = *p;
			*p = 0;
			if (!h_exists(buf))
				h_create(buf, NULL);
			*p = c;
			if (!c)
				break;
		}
	}
}

static zkl_client *client_with(zkl_lock_folders kind)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.lock_folders = kind;
	zkl_client *c = NULL;
	CHECK_OK(zkl_client_open(&c, &o));
	return c;
}

static void cycle(zkl_lock *l)
{
	CHECK_OK(zkl_lock_acquire(l, 5000));
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
}

/* Every recipe in folders made persistent by hand: taken, given back, and the folders
 * stay as they were, empty. */
static void test_persistent_by_hand(void **state)
{
	(void)state;
	const char *base = h_path("by-hand");
	const char *mpath = h_sub(base, "mutex"), *rpath = h_sub(base, "rw");
	const char *spath = h_sub(base, "sem"), *lpath = h_sub(base, "leader");
	const char *dirs[] = {mpath, rpath, h_sub(spath, "locks"), h_sub(spath, "leases"),
	                      lpath};
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		mkdirs(dirs[i]);
	zkl_client *c = client_with(ZKL_FOLDERS_CONTAINER);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, mpath));
	cycle(zkl_mutex_lock(m));
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, rpath));
	cycle(zkl_mutex_lock(zkl_rwlock_write(rw)));
	cycle(zkl_mutex_lock(zkl_rwlock_read(rw)));
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, spath, 2));
	zkl_lease *lease;
	CHECK_OK(zkl_semaphore_acquire(s, 1, 5000, &lease));
	CHECK_OK(zkl_lease_release(lease));
	zkl_lease_free(lease);
	zkl_leader *ld;
	CHECK_OK(zkl_leader_new(&ld, c, lpath, NULL));
	CHECK_OK(zkl_leader_start(ld));
	CHECK_OK(zkl_leader_await(ld, 5000));
	CHECK_OK(zkl_leader_close(ld));
	zkl_leader_free(ld);
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		h_wait_children(dirs[i], 0);
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
		assert_true(h_exists(dirs[i]));
	zkl_semaphore_free(s);
	zkl_rwlock_free(rw);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

struct found {
	char paths[16][256];
	int n;
};

static void on_pruned(const char *path, void *data)
{
	struct found *f = data;
	if (f->n < 16)
		snprintf(f->paths[f->n], sizeof f->paths[0], "%s", path);
	f->n++;
}

static bool found_has(const struct found *f, const char *path)
{
	for (int i = 0; i < f->n && i < 16; i++)
		if (strcmp(f->paths[i], path) == 0)
			return true;
	return false;
}

/* Only empty folders go, deepest first; a held lock's folder, a node with data and the
 * folders above them stay. --dry-run deletes nothing and names the same folders. */
static void test_prune(void **state)
{
	(void)state;
	const char *base = h_path("prune");
	const char *deep = h_sub(h_sub(base, "a"), "b"), *a = h_sub(base, "a");
	const char *rec = h_sub(base, "record"), *held = h_sub(base, "held");
	mkdirs(deep);
	h_create(rec, "data");
	zkl_client *c = client_with(ZKL_FOLDERS_PERSISTENT);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, held));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));

	struct found dry = {0};
	assert_int_equal(zkl_prune(c, base, true, 5000, on_pruned, &dry), 2);
	assert_int_equal(dry.n, 2);
	assert_string_equal(dry.paths[0], deep);
	assert_string_equal(dry.paths[1], a);
	assert_true(h_exists(deep));

	struct found done = {0};
	assert_int_equal(zkl_prune(c, base, false, 5000, on_pruned, &done), 2);
	assert_true(found_has(&done, deep) && found_has(&done, a));
	assert_false(h_exists(a));
	assert_true(h_exists(rec));
	assert_true(zkl_lock_is_held(zkl_mutex_lock(m)));
	assert_int_equal(h_children(held), 1);

	/* Given back, its folder goes too; the record keeps base. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	h_wait_children(held, 0);
	struct found last = {0};
	assert_int_equal(zkl_prune(c, base, false, 5000, on_pruned, &last), 1);
	assert_string_equal(last.paths[0], held);
	assert_true(h_exists(base));
	/* And it comes back at the next acquire. */
	cycle(zkl_mutex_lock(m));
	assert_true(h_exists(held));

	assert_int_equal(zkl_prune(NULL, base, false, 5000, NULL, NULL), ZKL_EINVAL);
	assert_int_equal(zkl_prune(c, "relative", false, 5000, NULL, NULL), ZKL_EINVAL);
	assert_int_equal(zkl_prune(c, "/zookeeper", false, 5000, NULL, NULL), ZKL_EINVAL);
	assert_int_equal(zkl_prune(c, base, false, -2, NULL, NULL), ZKL_EINVAL);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* Prune racing acquirers. Each worker takes a mutex of its own, the shared mutex and a
 * lease of a shared semaphore, over and over, on persistent folders, while prune runs
 * again and again: every acquire and release succeeds, the shared mutex is never held
 * twice, and after each pass of its own a worker waits for two prune passes, so its own
 * folder is pruned at least once (the race happened). */
enum { WORKERS = 3, CYCLES = 40 };

struct race {
	const char *base;
	h_counter passes;      /* prune passes finished */
	atomic_int pruned;     /* folders prune deleted */
	int inside;            /* holders of the shared mutex right now (atomic) */
	int max_inside;
	atomic_int errors;
	atomic_int workers_left;
	atomic_int next_id;
};

static void *worker(void *arg)
{
	struct race *r = arg;
	const int id = atomic_fetch_add(&r->next_id, 1);
	char own[256];
	snprintf(own, sizeof own, "%s/own-%d", r->base, id);
	zkl_client *c = client_with(ZKL_FOLDERS_PERSISTENT);
	zkl_mutex *mine, *shared;
	zkl_semaphore *sem;
	CHECK_OK(zkl_mutex_new(&mine, c, own));
	CHECK_OK(zkl_mutex_new(&shared, c, h_sub(r->base, "shared")));
	CHECK_OK(zkl_semaphore_new(&sem, c, h_sub(r->base, "sem"), 2));
	for (int i = 0; i < CYCLES; i++) {
		int rc = zkl_lock_acquire(zkl_mutex_lock(mine), 10000);
		rc = rc ? rc : zkl_lock_release(zkl_mutex_lock(mine));
		if (rc == 0 && (rc = zkl_lock_acquire(zkl_mutex_lock(shared), 10000)) == 0) {
			h_note_max(&r->max_inside, __atomic_add_fetch(&r->inside, 1, __ATOMIC_SEQ_CST));
			__atomic_sub_fetch(&r->inside, 1, __ATOMIC_SEQ_CST);
			rc = zkl_lock_release(zkl_mutex_lock(shared));
		}
		zkl_lease *lease = NULL;
		if (rc == 0 && (rc = zkl_semaphore_acquire(sem, 1, 10000, &lease)) == 0) {
			rc = zkl_lease_release(lease);
			zkl_lease_free(lease);
		}
		if (rc != 0) {
			print_error("worker %d cycle %d: %s: %s\n", id, i, zkl_errname(rc),
			            zkl_last_error());
			atomic_fetch_add(&r->errors, 1);
			break;
		}
		if (i % 8 == 0) {
			/* Two passes begun after our release: our own folder was empty in one. */
			if (!h_counter_wait(&r->passes, h_counter_get(&r->passes) + 2, 20000)) {
				print_error("worker %d: prune made no two passes in 20 s\n", id);
				atomic_fetch_add(&r->errors, 1);
				break;
			}
		}
	}
	zkl_semaphore_free(sem);
	zkl_mutex_free(shared);
	zkl_mutex_free(mine);
	zkl_client_close(c);
	atomic_fetch_sub(&r->workers_left, 1);
	return NULL;
}

static void count_pruned(const char *path, void *data)
{
	(void)path;
	atomic_fetch_add(&((struct race *)data)->pruned, 1);
}

static void test_prune_racing_acquirers(void **state)
{
	(void)state;
	struct race r = {.base = h_path("race")};
	atomic_init(&r.workers_left, WORKERS);
	h_counter_init(&r.passes);
	mkdirs(r.base);
	h_create(h_sub(r.base, "keep"), "data"); /* so that base stays */
	zkl_client *c = client_with(ZKL_FOLDERS_PERSISTENT);
	pthread_t th[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, &r), 0);
	while (atomic_load(&r.workers_left) > 0) {
		int rc = zkl_prune(c, r.base, false, 10000, count_pruned, &r);
		if (rc < 0)
			fail_msg("prune: %s: %s", zkl_errname(rc), zkl_last_error());
		h_counter_add(&r.passes, 1);
	}
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&r.errors), 0);
	assert_int_equal(r.max_inside, 1);
	assert_true(atomic_load(&r.pruned) >= WORKERS);
	/* Nothing is left but the nodes with data: ours, and the semaphore's, which records
	 * its limit (its locks/ and leases/ go). */
	assert_true(zkl_prune(c, r.base, false, 10000, NULL, NULL) >= 0);
	assert_int_equal(h_children(r.base), 2);
	assert_int_equal(h_children(h_sub(r.base, "sem")), 0);
	assert_false(h_exists(h_sub(r.base, "shared")));
	h_counter_destroy(&r.passes);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_persistent_by_hand),
		cmocka_unit_test(test_prune),
		cmocka_unit_test(test_prune_racing_acquirers),
	};
	return H_RUN(tests);
}
