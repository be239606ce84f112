/* Guarded transactions (zkl_lock_txn and its short forms, zkl_record_set_guarded) on a
 * real ZooKeeper server: the caller's writes commit together with a check of the hold's
 * own node, all or none, so that a holder whose lock is gone writes nothing. */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

static char self_exe[4096];

/* The data at path, as a string ("" if it is not there). */
static const char *data_of(const char *path)
{
	static char buf[256];
	buf[0] = '\0';
	if (!h_exists(path))
		return buf;
	int n = h_get(path, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static zkl_mutex *held_mutex(zkl_client *c, const char *path)
{
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 10000));
	return m;
}

/* Every kind of operation in one transaction, applied together; their results. */
static void test_every_op(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-ops");
	const char *dir = h_path("guard-ops-data");
	zkl_mutex *m = held_mutex(c, path); /* it makes /t */
	zkl_lock *l = zkl_mutex_lock(m);
	h_create(dir, NULL);
	const char *a = h_sub(dir, "a");
	const char *b = h_sub(dir, "b");
	const char *gone = h_sub(dir, "gone");
	h_create(a, "a0");
	h_create(gone, NULL);

	const char *seq = h_sub(dir, "s-");
	const zkl_txn_op ops[] = {
		{.kind = ZKL_TXN_CHECK, .path = a, .version = 0},
		{.kind = ZKL_TXN_SET, .path = a, .data = "a1", .len = 2, .version = 0},
		{.kind = ZKL_TXN_CREATE, .path = b, .data = "b0", .len = 2},
		{.kind = ZKL_TXN_CREATE, .path = seq, .flags = ZKL_TXN_SEQUENTIAL},
		{.kind = ZKL_TXN_CREATE, .path = h_sub(dir, "e"), .flags = ZKL_TXN_EPHEMERAL},
		{.kind = ZKL_TXN_DELETE, .path = gone, .version = -1},
	};
	zkl_txn_result r[6];
	CHECK_OK(zkl_lock_txn(l, ops, 6, r));
	for (int i = 0; i < 6; i++) {
		assert_int_equal(r[i].rc, 0);
		assert_int_equal(r[i].zk_rc, ZOK);
	}
	assert_int_equal(r[1].version, 1);
	assert_string_equal(r[2].path, b);
	assert_int_equal(strncmp(r[3].path, seq, strlen(seq)), 0);
	assert_int_equal(strlen(r[3].path), strlen(seq) + 10);
	assert_string_equal(data_of(a), "a1");
	assert_string_equal(data_of(b), "b0");
	assert_true(h_exists(r[3].path));
	assert_false(h_exists(gone));

	/* The short forms. */
	CHECK_OK(zkl_lock_guarded_set(l, b, "b1", 2));
	assert_string_equal(data_of(b), "b1");
	const char *cnode = h_sub(dir, "c");
	CHECK_OK(zkl_lock_guarded_create(l, cnode, "c0", 2));
	assert_string_equal(data_of(cnode), "c0");
	CHECK_RC(ZKL_EZK, zkl_lock_guarded_create(l, cnode, "c1", 2));
	assert_non_null(strstr(zkl_last_error(), cnode));
	assert_string_equal(data_of(cnode), "c0");

	/* The ephemeral node is the client's session's. */
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
	assert_false(h_exists(h_sub(dir, "e")));
}

/* A failing operation in the middle: nothing applied, its index and error told. */
static void test_failing_middle(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-middle");
	const char *dir = h_path("guard-middle-data");
	zkl_mutex *m = held_mutex(c, path);
	zkl_lock *l = zkl_mutex_lock(m);
	h_create(dir, NULL);
	const char *a = h_sub(dir, "a");
	h_create(a, "a0");
	const char *missing = h_sub(dir, "missing");
	const zkl_txn_op ops[] = {
		{.kind = ZKL_TXN_SET, .path = a, .data = "a1", .len = 2, .version = -1},
		{.kind = ZKL_TXN_SET, .path = missing, .data = "x", .len = 1, .version = -1},
		{.kind = ZKL_TXN_CREATE, .path = h_sub(dir, "b")},
	};
	zkl_txn_result r[3];
	CHECK_RC(ZKL_EZK, zkl_lock_txn(l, ops, 3, r));
	assert_non_null(strstr(zkl_last_error(), "operation 1 (set)"));
	assert_non_null(strstr(zkl_last_error(), missing));
	assert_int_equal(r[0].rc, ZKL_ECANCELED);
	assert_int_equal(r[1].rc, ZKL_EZK);
	assert_int_equal(r[1].zk_rc, ZNONODE);
	assert_int_equal(r[2].rc, ZKL_ECANCELED);
	assert_int_equal(r[0].zk_rc, ZRUNTIMEINCONSISTENCY);
	assert_int_equal(r[2].zk_rc, ZRUNTIMEINCONSISTENCY);
	assert_string_equal(data_of(a), "a0");
	assert_false(h_exists(h_sub(dir, "b")));
	/* A version that differs. */
	const zkl_txn_op stale = {.kind = ZKL_TXN_SET, .path = a, .data = "a2", .len = 2,
	                          .version = 7};
	CHECK_RC(ZKL_EZK, zkl_lock_txn(l, &stale, 1, r));
	assert_int_equal(r[0].zk_rc, ZBADVERSION);
	/* The hold is untouched by its transactions' failures. */
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_guarded_set(l, a, "a3", 2));
	assert_string_equal(data_of(a), "a3");
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* Bad input: an error code, never a crash; nothing sent. */
static void test_bad_input(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-bad");
	const char *rec = h_sub(h_path("guard-bad-data"), "r");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	zkl_txn_op op = {.kind = ZKL_TXN_CREATE, .path = rec};
	zkl_txn_result r;
	/* Not held. */
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_txn(l, &op, 1, &r));
	assert_int_equal(r.rc, ZKL_ENOTHELD);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_guarded_set(l, rec, "x", 1));
	CHECK_RC(ZKL_ENOTHELD, zkl_record_set_guarded(l, rec, "x", 1));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(NULL, &op, 1, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, NULL, 1, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 0, NULL));
	zkl_txn_op many[ZKL_TXN_MAX + 1];
	for (int i = 0; i <= ZKL_TXN_MAX; i++)
		many[i] = op;
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, many, ZKL_TXN_MAX + 1, NULL));
	/* A count above ZKL_TXN_MAX is refused before anything is written: results may be
	 * shorter than the count (here one, or none at all with SIZE_MAX). */
	struct {
		zkl_txn_result r[ZKL_TXN_MAX + 1];
	} rs, unset;
	memset(&unset, 0x5a, sizeof unset);
	rs = unset;
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, many, ZKL_TXN_MAX + 1, rs.r));
	assert_memory_equal(&rs, &unset, sizeof rs);
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, many, SIZE_MAX, rs.r));
	assert_memory_equal(&rs, &unset, sizeof rs);
	CHECK_RC(ZKL_EINVAL, zkl_lock_release_txn(l, many, ZKL_TXN_MAX + 1, rs.r));
	assert_memory_equal(&rs, &unset, sizeof rs);
	CHECK_RC(ZKL_EINVAL, zkl_lock_release_txn(l, many, SIZE_MAX, rs.r));
	assert_memory_equal(&rs, &unset, sizeof rs);
	assert_true(zkl_lock_is_held(l));
	op.path = NULL;
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op.path = "relative/path";
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op.path = "/ends/with/";
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op = (zkl_txn_op){.kind = (zkl_txn_kind)99, .path = rec};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op = (zkl_txn_op){.kind = ZKL_TXN_CREATE, .path = rec, .flags = 8};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op = (zkl_txn_op){.kind = ZKL_TXN_SET, .path = rec, .data = NULL, .len = 3};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op = (zkl_txn_op){.kind = ZKL_TXN_SET, .path = rec, .version = -2};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	op = (zkl_txn_op){.kind = ZKL_TXN_SET, .path = rec, .data = "x",
	                  .len = (size_t)ZKL_RECORD_MAX + 1};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, &op, 1, NULL));
	/* Many big ones: longer than a server reads in one request. */
	static char big[600 * 1024];
	zkl_txn_op two[2] = {
		{.kind = ZKL_TXN_CREATE, .path = rec, .data = big, .len = sizeof big},
		{.kind = ZKL_TXN_SET, .path = rec, .data = big, .len = sizeof big, .version = -1},
	};
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn(l, two, 2, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_lock_txn_async(l, two, 1, NULL, NULL));
	assert_false(h_exists(rec));
	CHECK_RC(ZKL_EINVAL, zkl_record_set_guarded(NULL, rec, "x", 1));
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* Someone else deletes the holder's node: the next guarded write is refused, ZKL_ELOST,
 * and the hold is reported lost as any loss. The hold's watch on its node may tell the
 * client first: either way the write is refused, with the same answer. */
static void test_node_deleted(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-deleted");
	const char *rec = h_path("guard-deleted-rec");
	h_create(rec, "before");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, h_on_lost, lost));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	h_delete(node);
	zkl_txn_result r;
	const zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = rec, .data = "after", .len = 5,
	                       .version = -1};
	CHECK_RC(ZKL_ELOST, zkl_lock_txn(l, &op, 1, &r));
	assert_int_equal(r.rc, ZKL_ELOST);
	assert_false(zkl_lock_is_held(l));
	assert_true(h_latch_wait(lost, 10000));
	assert_string_equal(data_of(rec), "before");
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	h_latch_free(lost);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* A transaction may delete the hold's own node with its last write: the check comes
 * first and passes, so the write is applied; the hold is gone then (lost, as with any
 * delete of its node but the release's), and the next transaction is refused. */
static void test_check_refuses(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-refuses");
	const char *rec = h_path("guard-refuses-rec");
	h_create(rec, "before");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, h_on_lost, lost));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	const zkl_txn_op ops[] = {
		{.kind = ZKL_TXN_DELETE, .path = node, .version = -1},
		{.kind = ZKL_TXN_SET, .path = rec, .data = "last", .len = 4, .version = -1},
	};
	CHECK_OK(zkl_lock_txn(l, ops, 2, NULL));
	assert_string_equal(data_of(rec), "last");
	const zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = rec, .data = "after", .len = 5,
	                       .version = -1};
	CHECK_RC(ZKL_ELOST, zkl_lock_txn(l, &op, 1, NULL));
	assert_false(zkl_lock_is_held(l));
	assert_true(h_latch_wait(lost, 10000));
	assert_string_equal(data_of(rec), "last");
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	h_latch_free(lost);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- a holder paused past its session (another process, stopped with SIGSTOP) ---- */

/* The holder: takes the lock, says "held <node>", waits for a line on stdin, then tries
 * a guarded write of "stale" and prints its answer's name. */
static int holder_main(const char *servers, const char *path, const char *rec)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	o.session_timeout_ms = 4000;
	zkl_client *c;
	if (zkl_client_open(&c, &o) != 0)
		return 2;
	zkl_mutex *m;
	if (zkl_mutex_new(&m, c, path) != 0 || zkl_lock_acquire(zkl_mutex_lock(m), 10000) != 0)
		return 3;
	char node[ZKL_NODE_MAX];
	if (zkl_lock_node(zkl_mutex_lock(m), node, sizeof node) <= 0)
		return 4;
	printf("held %s\n", node);
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 5;
	int rc = zkl_record_set_guarded(zkl_mutex_lock(m), rec, "stale", 5);
	printf("%s\n", zkl_errname(rc));
	fflush(stdout);
	zkl_lock_release(zkl_mutex_lock(m));
	zkl_mutex_free(m);
	zkl_client_close(c);
	return 0;
}

static void test_paused_holder(void **state)
{
	(void)state;
	const char *path = h_path("guard-paused");
	const char *rec = h_path("guard-paused-rec");
	int in[2], out[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addclose(&fa, in[1]);
	posix_spawn_file_actions_addclose(&fa, out[0]);
	char *argv[] = {self_exe, (char *)"--holder", (char *)h_servers(), (char *)path,
	                (char *)rec, NULL};
	extern char **environ;
	pid_t pid;
	assert_int_equal(posix_spawn(&pid, self_exe, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	FILE *from = fdopen(out[0], "r");
	char line[ZKL_NODE_MAX + 16];
	assert_non_null(fgets(line, sizeof line, from));
	assert_int_equal(strncmp(line, "held ", 5), 0);
	line[strcspn(line, "\n")] = '\0';
	const char *node = line + 5;

	/* Paused past its session: the server expires it and deletes its node. */
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_true(h_wait_deleted(node, 30000));
	zkl_client *c = h_client(0);
	zkl_mutex *m = held_mutex(c, path);
	CHECK_OK(zkl_record_set_guarded(zkl_mutex_lock(m), rec, "fresh", 5));

	/* It wakes and writes: refused. */
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(write(in[1], "go\n", 3), 3);
	assert_non_null(fgets(line, sizeof line, from));
	assert_string_equal(line, "ZKL_ELOST\n");
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(from);
	close(in[1]);
	assert_string_equal(data_of(rec), "fresh");
	assert_true(zkl_lock_is_held(zkl_mutex_lock(m)));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- a guarded write racing the holder's own release ---- */

struct race {
	zkl_lock *l;
	const char *rec;
	char value[16];
	h_latch *go;
	int rc;
};

static void *race_write(void *arg)
{
	struct race *r = arg;
	h_latch_wait(r->go, 10000);
	r->rc = zkl_lock_guarded_set(r->l, r->rec, r->value, strlen(r->value));
	return NULL;
}

struct acq_end {
	h_latch *done;
	int rc;
};

static void acq_done(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct acq_end *a = data;
	a->rc = rc;
	h_latch_set(a->done);
}

static void count_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	__atomic_add_fetch((int *)data, 1, __ATOMIC_SEQ_CST);
}

/* Exactly one of two outcomes, every time: the write is applied (it reached the server
 * before the release's delete) and returns 0, or it is not (the release came first) and
 * returns ZKL_ENOTHELD. The hold is never reported lost by it. The write comes from
 * another thread than the release's, so the hold is the handle's (an asynchronous
 * acquire's). */
static void test_release_race(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-race");
	const char *rec = h_path("guard-race-rec");
	h_create(rec, "none");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	int lost = 0;
	CHECK_OK(zkl_lock_on_lost(l, count_lost, &lost));
	int applied = 0, refused = 0;
	for (int i = 0; i < 40; i++) {
		/* The handle's hold (an asynchronous acquire's), which any thread's write is
		 * guarded by; a blocking acquire's would be the calling thread's alone. */
		struct acq_end a = {.done = h_latch_new()};
		CHECK_OK(zkl_lock_acquire_async(l, 10000, acq_done, &a));
		assert_true(h_latch_wait(a.done, 10000));
		CHECK_OK(a.rc);
		h_latch_free(a.done);
		struct race r = {.l = l, .rec = rec, .go = h_latch_new()};
		snprintf(r.value, sizeof r.value, "w%d", i);
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, race_write, &r), 0);
		h_latch_set(r.go);
		/* Round by round the release goes a little later, behind reads of the tree
		 * through the test's own handle (work, not a wait for anything), so that
		 * both outcomes come up. */
		for (int k = 0; k < i % 8; k++)
			(void)h_exists(rec);
		CHECK_OK(zkl_lock_release(l));
		pthread_join(th, NULL);
		h_latch_free(r.go);
		if (r.rc == 0) {
			applied++;
			assert_string_equal(data_of(rec), r.value);
		} else {
			if (r.rc != ZKL_ENOTHELD)
				fail_msg("round %d: the write answered %s: %s", i, zkl_errname(r.rc),
				         zkl_last_error());
			refused++;
			assert_string_not_equal(data_of(rec), r.value);
		}
	}
	assert_int_equal(lost, 0);
	assert_int_equal(applied + refused, 40);
	print_message("release race: %d applied, %d refused\n", applied, refused);
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- every kind ---- */

static void guard_kind(zkl_lock *l, const char *rec)
{
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char value[64];
	snprintf(value, sizeof value, "%s", zkl_lock_kind(l));
	CHECK_OK(zkl_record_set_guarded(l, rec, value, strlen(value)));
	assert_string_equal(data_of(rec), value);
	CHECK_OK(zkl_lock_release(l));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_guarded_set(l, rec, "after", 5));
	assert_string_equal(data_of(rec), value);
}

static void test_every_kind(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *rec = h_sub(h_path("guard-kinds"), "deep/rec");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_path("guard-kind-mutex")));
	guard_kind(zkl_mutex_lock(m), rec);
	zkl_mutex_free(m);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, h_path("guard-kind-rw")));
	guard_kind(zkl_mutex_lock(zkl_rwlock_read(rw)), rec);
	guard_kind(zkl_mutex_lock(zkl_rwlock_write(rw)), rec);
	zkl_rwlock_free(rw);
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, h_path("guard-kind-sem"), 2));
	guard_kind(zkl_semaphore_lock(s), rec);
	zkl_semaphore_free(s);
	zkl_semaphore_mutex *sm;
	CHECK_OK(zkl_semaphore_mutex_new(&sm, c, h_path("guard-kind-semmutex")));
	guard_kind(zkl_semaphore_mutex_lock(sm), rec);
	zkl_semaphore_mutex_free(sm);
	zkl_leader *ld;
	CHECK_OK(zkl_leader_new(&ld, c, h_path("guard-kind-leader"), NULL));
	guard_kind(zkl_leader_lock(ld), rec);
	zkl_leader_free(ld);
	/* A multi-lock's view has no node of its own. */
	zkl_multilock *ml;
	zkl_mutex *m1;
	CHECK_OK(zkl_mutex_new(&m1, c, h_path("guard-kind-ml")));
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_AS_ADDED));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(m1)));
	CHECK_OK(zkl_lock_acquire(zkl_multilock_lock(ml), 10000));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_guarded_set(zkl_multilock_lock(ml), rec, "x", 1));
	CHECK_OK(zkl_lock_release(zkl_multilock_lock(ml)));
	zkl_multilock_free(ml);
	zkl_mutex_free(m1);
	zkl_client_close(c);
}

/* ---- the asynchronous form, and the loop's thread ---- */

struct async_end {
	h_latch *done;
	int rc;
	size_t n;
	zkl_txn_result r[2];
	int deadlk;
};

static void async_done(zkl_lock *l, int rc, const zkl_txn_result *results, size_t n,
                       void *data)
{
	struct async_end *e = data;
	e->rc = rc;
	e->n = n;
	memcpy(e->r, results, n * sizeof *results);
	/* A blocking transaction on the loop's thread would wait for itself. */
	e->deadlk = zkl_lock_guarded_set(l, "/x", "y", 1);
	h_latch_set(e->done);
}

static void test_async(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *path = h_path("guard-async");
	const char *dir = h_path("guard-async-data");
	zkl_mutex *m = held_mutex(c, path);
	zkl_lock *l = zkl_mutex_lock(m);
	h_create(dir, NULL);
	const zkl_txn_op ops[] = {
		{.kind = ZKL_TXN_CREATE, .path = h_sub(dir, "a"), .data = "1", .len = 1},
		{.kind = ZKL_TXN_SET, .path = h_sub(dir, "a"), .data = "2", .len = 1, .version = 0},
	};
	struct async_end e = {.done = h_latch_new()};
	CHECK_OK(zkl_lock_txn_async(l, ops, 2, async_done, &e));
	assert_true(h_latch_wait(e.done, 10000));
	CHECK_OK(e.rc);
	assert_int_equal(e.n, 2);
	assert_string_equal(e.r[0].path, h_sub(dir, "a"));
	assert_int_equal(e.r[1].version, 1);
	assert_int_equal(e.deadlk, ZKL_EDEADLK);
	assert_string_equal(data_of(h_sub(dir, "a")), "2");
	h_latch_free(e.done);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

/* ---- an adopted handle ---- */

struct app {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool connected;
};

static void app_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct app *a = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&a->mu);
	a->connected = state == ZOO_CONNECTED_STATE;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

static void test_adopted(void **state)
{
	(void)state;
	struct app a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	zhandle_t *zh = zookeeper_init(h_servers(), app_watcher, 10000, NULL, &a, 0);
	assert_non_null(zh);
	pthread_mutex_lock(&a.mu);
	while (!a.connected)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = NULL;
	zkl_client *c;
	CHECK_OK(zkl_client_adopt(&c, zh, &o));
	const char *rec = h_sub(h_path("guard-adopted"), "rec");
	zkl_mutex *m = held_mutex(c, h_path("guard-adopted-lock"));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_record_set_guarded(l, rec, "adopted", 7));
	assert_string_equal(data_of(rec), "adopted");
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	h_delete(node);
	CHECK_RC(ZKL_ELOST, zkl_record_set_guarded(l, rec, "late", 4));
	assert_string_equal(data_of(rec), "adopted");
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
	zookeeper_close(zh);
}

/* ---- a client whose loop is the application's (external_loop) ---- */

static int lost_calls;

static void *process_once(void *arg)
{
	return (void *)(intptr_t)zkl_client_process(arg);
}

/* A thread that is not the application's loop thread waits for its transaction and runs
 * its steps itself (loop.c, "Jobs"), the loop never called; the server's check alone refuses the
 * write once the node is gone (no loop turn has looked at the hold's watch). */
static void test_external_loop(void **state)
{
	(void)state;
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.external_loop = true;
	zkl_client *c;
	CHECK_OK(zkl_client_open(&c, &o));
	const char *rec = h_sub(h_path("guard-external"), "rec");
	zkl_mutex *m = held_mutex(c, h_path("guard-external-lock"));
	zkl_lock *l = zkl_mutex_lock(m);
	__atomic_store_n(&lost_calls, 0, __ATOMIC_SEQ_CST);
	CHECK_OK(zkl_lock_on_lost(l, count_lost, &lost_calls));
	CHECK_OK(zkl_record_set_guarded(l, rec, "one", 3));
	assert_string_equal(data_of(rec), "one");
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	h_delete(node);
	CHECK_RC(ZKL_ELOST, zkl_lock_guarded_set(l, rec, "two", 3));
	assert_false(zkl_lock_is_held(l));
	assert_string_equal(data_of(rec), "one");
	/* The loss is told on the application's loop, as any: one turn of it. */
	assert_int_equal(h_in_thread(process_once, c), 0);
	assert_int_equal(__atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST), 1);
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--holder") == 0)
		return holder_main(argv[2], argv[3], argv[4]);
	/* argv[0], not /proc/self/exe: under valgrind that is valgrind's own. */
	if (!realpath(argv[0], self_exe))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_op),
		cmocka_unit_test(test_failing_middle),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_node_deleted),
		cmocka_unit_test(test_check_refuses),
		cmocka_unit_test(test_paused_holder),
		cmocka_unit_test(test_release_race),
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_async),
		cmocka_unit_test(test_adopted),
		cmocka_unit_test(test_external_loop),
	};
	return H_RUN(tests);
}
