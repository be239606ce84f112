/* Lock folders on a server without container nodes: the in-memory ZooKeeper (fakezk.h)
 * refuses every container create, as ZooKeeper 3.4 does (ZUNIMPLEMENTED) or a server
 * that speaks its protocol without them (ZBADARGUMENTS). Every recipe takes and gives
 * back its lock there, with its folders made persistent, and nothing of its own left
 * behind; the lock_folders option forces either kind; a folder that exists is used as
 * it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fzh.h"

#define CHECK_OK(x) assert_int_equal((x), 0)

/* What the hook saw, and what it answers a container create. */
struct seen {
	int refuse_rc;             /* 0: containers are made */
	atomic_int containers;     /* container creates asked for */
	atomic_int persistent;     /* persistent creates asked for */
	atomic_int warnings;       /* log lines that say the server refuses containers */
};

static enum fz_action hook(void *arg, const struct fz_request *r, int *rc)
{
	struct seen *s = arg;
	if (r->op != FZ_CREATE)
		return FZ_APPLY;
	if (r->mode == ZOO_CONTAINER) {
		atomic_fetch_add(&s->containers, 1);
		if (s->refuse_rc) {
			*rc = s->refuse_rc;
			return FZ_REFUSE;
		}
	} else if (r->mode == ZOO_PERSISTENT) {
		atomic_fetch_add(&s->persistent, 1);
	}
	return FZ_APPLY;
}

static void on_log(zkl_log_level level, const char *message, void *data)
{
	struct seen *s = data;
	if (level == ZKL_LOG_WARN && strstr(message, "refuses container nodes"))
		atomic_fetch_add(&s->warnings, 1);
}

static zkl_client *open_client(struct fz *z, struct seen *s, zkl_lock_folders kind)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.session_timeout_ms = 20000;
	o.log = on_log;
	o.log_data = s;
	o.lock_folders = kind;
	zkl_client *c = NULL;
	CHECK_OK(fz_client_open(z, &c, &o));
	return c;
}

struct gone {
	struct fz *z;
	int64_t session;
};

static bool no_ephemerals(void *arg)
{
	struct gone *g = arg;
	return fz_ephemerals(g->z, g->session) == 0;
}

/* Takes and gives back l twice (the second time its folder exists). */
static void cycle(zkl_lock *l)
{
	for (int i = 0; i < 2; i++) {
		CHECK_OK(zkl_lock_acquire(l, 5000));
		assert_true(zkl_lock_is_held(l));
		CHECK_OK(zkl_lock_release(l));
	}
}

/* Every recipe on folders whose parents are missing too. */
static void every_recipe(int refuse_rc)
{
	struct fz *z = fz_new();
	struct seen s = {.refuse_rc = refuse_rc};
	fz_set_hook(z, hook, &s);
	zkl_client *c = open_client(z, &s, ZKL_FOLDERS_AUTO);
	const int64_t sid = zkl_client_session_id(c);

	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/apps/a/mutex"));
	cycle(zkl_mutex_lock(m));
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, "/apps/b/rw"));
	cycle(zkl_mutex_lock(zkl_rwlock_write(rw)));
	cycle(zkl_mutex_lock(zkl_rwlock_read(rw)));
	zkl_semaphore *sem;
	CHECK_OK(zkl_semaphore_new(&sem, c, "/apps/c/sem", 2));
	zkl_lease *lease;
	for (int i = 0; i < 2; i++) {
		CHECK_OK(zkl_semaphore_acquire(sem, 1, 5000, &lease));
		assert_true(zkl_lease_is_held(lease));
		CHECK_OK(zkl_lease_release(lease));
		zkl_lease_free(lease);
	}
	zkl_semaphore_mutex *sm;
	CHECK_OK(zkl_semaphore_mutex_new(&sm, c, "/apps/d/smutex"));
	cycle(zkl_semaphore_mutex_lock(sm));
	zkl_leader *ld;
	CHECK_OK(zkl_leader_new(&ld, c, "/apps/e/leader", NULL));
	CHECK_OK(zkl_leader_start(ld));
	CHECK_OK(zkl_leader_await(ld, 5000));
	CHECK_OK(zkl_leader_close(ld));
	zkl_leader_free(ld);
	zkl_mutex *mm[2];
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	for (int i = 0; i < 2; i++) {
		char p[64];
		snprintf(p, sizeof p, "/apps/f/multi/%d", i);
		CHECK_OK(zkl_mutex_new(&mm[i], c, p));
		CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(mm[i])));
	}
	for (int i = 0; i < 2; i++) {
		CHECK_OK(zkl_multilock_acquire(ml, 5000));
		CHECK_OK(zkl_multilock_release(ml));
	}

	/* Nothing of the session is left (the last deletes may still be on their way), and
	 * the folders stay, empty: persistent. */
	struct gone g = {z, sid};
	fz_wait(z, no_ephemerals, &g, "the session's nodes deleted");
	fz_reap(z);
	const char *folders[] = {"/apps/a/mutex", "/apps/b/rw", "/apps/c/sem/locks",
	                         "/apps/c/sem/leases", "/apps/d/smutex/leases",
	                         "/apps/e/leader", "/apps/f/multi/0", "/apps/f/multi/1"};
	for (size_t i = 0; i < sizeof folders / sizeof *folders; i++) {
		struct Stat st;
		assert_true(fz_stat(z, folders[i], &st));
		assert_int_equal(fzh_children(z, folders[i]), 0);
		assert_int_equal(st.ephemeralOwner, 0);
	}
	/* The server was asked for one container, which it refused; told once. */
	assert_int_equal(atomic_load(&s.containers), 1);
	assert_true(atomic_load(&s.persistent) >= 8);
	assert_int_equal(atomic_load(&s.warnings), 1);

	zkl_multilock_free(ml);
	for (int i = 0; i < 2; i++)
		zkl_mutex_free(mm[i]);
	zkl_semaphore_mutex_free(sm);
	zkl_semaphore_free(sem);
	zkl_rwlock_free(rw);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

/* ZooKeeper 3.4. */
static void test_unimplemented(void **state)
{
	(void)state;
	every_recipe(ZUNIMPLEMENTED);
}

/* A server that takes the container mode for a bad argument. */
static void test_bad_arguments(void **state)
{
	(void)state;
	every_recipe(ZBADARGUMENTS);
}

/* Two clients contend on a server without containers: the second waits behind the
 * first in the persistent folder and takes the lock when it is given back. */
static void test_contenders(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct seen s = {.refuse_rc = ZUNIMPLEMENTED};
	fz_set_hook(z, hook, &s);
	zkl_client *a = open_client(z, &s, ZKL_FOLDERS_AUTO);
	zkl_client *b = open_client(z, &s, ZKL_FOLDERS_AUTO);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, "/x/lock"));
	CHECK_OK(zkl_mutex_new(&mb, b, "/x/lock"));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(ma), 5000));
	struct fzh_acq w;
	fzh_acq_start(&w, z, zkl_mutex_lock(mb), 5000, 0);
	fzh_wait_children(z, "/x/lock", 2);
	assert_false(atomic_load(&w.done));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(ma)));
	CHECK_OK(fzh_acq_wait(&w));
	assert_true(w.held);
	CHECK_OK(fzh_acq_finish(&w));
	/* The release's delete is answered in the background. */
	fzh_wait_children(z, "/x/lock", 0);
	/* a was refused and said so, once; b found the folder a made. */
	assert_int_equal(atomic_load(&s.containers), 1);
	assert_int_equal(atomic_load(&s.warnings), 1);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
	fz_free(z);
}

/* Containers forced: the acquire fails with a message that names the refusal. */
static void test_forced_container(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct seen s = {.refuse_rc = ZUNIMPLEMENTED};
	fz_set_hook(z, hook, &s);
	zkl_client *c = open_client(z, &s, ZKL_FOLDERS_CONTAINER);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/y/lock"));
	assert_int_equal(zkl_lock_acquire(zkl_mutex_lock(m), 5000), ZKL_EZK);
	assert_non_null(strstr(zkl_last_error(), "refuses container nodes"));
	assert_false(fz_stat(z, "/y/lock", NULL));
	assert_int_equal(atomic_load(&s.persistent), 0);
	assert_int_equal(atomic_load(&s.warnings), 0);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

/* Persistent forced: no container is ever asked for, even of a server that has them. */
static void test_forced_persistent(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct seen s = {0};
	fz_set_hook(z, hook, &s);
	zkl_client *c = open_client(z, &s, ZKL_FOLDERS_PERSISTENT);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/p/q/lock"));
	cycle(zkl_mutex_lock(m));
	fz_reap(z);
	assert_true(fz_stat(z, "/p/q/lock", NULL));
	assert_int_equal(atomic_load(&s.containers), 0);
	assert_true(atomic_load(&s.persistent) >= 3);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

/* A folder that exists is used as it is: no create of it, whatever the option. */
static void test_existing_folder(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct seen s = {.refuse_rc = ZUNIMPLEMENTED};
	CHECK_OK(fz_create(z, "/e", NULL, ZOO_PERSISTENT, 0, NULL, 0));
	CHECK_OK(fz_create(z, "/e/lock", NULL, ZOO_PERSISTENT, 0, NULL, 0));
	fz_set_hook(z, hook, &s);
	zkl_client *c = open_client(z, &s, ZKL_FOLDERS_CONTAINER);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/e/lock"));
	cycle(zkl_mutex_lock(m));
	assert_int_equal(atomic_load(&s.containers), 0);
	assert_int_equal(atomic_load(&s.persistent), 0);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

static void test_bad_option(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.lock_folders = (zkl_lock_folders)7;
	zkl_client *c = NULL;
	assert_int_equal(fz_client_open(z, &c, &o), ZKL_EINVAL);
	assert_null(c);
	assert_non_null(strstr(zkl_last_error(), "lock_folders"));
	fz_free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unimplemented),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_contenders),
		cmocka_unit_test(test_forced_container),
		cmocka_unit_test(test_forced_persistent),
		cmocka_unit_test(test_existing_folder),
		cmocka_unit_test(test_bad_option),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
