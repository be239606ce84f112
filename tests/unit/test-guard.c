/* Guarded transactions (zkl_lock_txn) on the in-memory ZooKeeper: what only the fake can
 * stage. The hold's node goes in the very moment the transaction reaches the server,
 * before the client can hear of it: the server's check alone refuses the writes, and the
 * client then reports the hold lost, as any loss, also when the transaction's answer is
 * its only news of it (the hold's own watch on its node not set). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fzh.h"

#define CHECK_OK(x) assert_int_equal((x), 0)

struct stage {
	struct fz *z;
	atomic_int multis;       /* multis seen */
	atomic_bool delete_next; /* the next multi's first op's node goes before it applies */
	char checked[256];       /* the first op's path of the last multi */
	/* The hold's own watch on its node is never set (its exists is swallowed): only the
	 * transaction's answer can tell the client that the node is gone. */
	atomic_bool blind;
	atomic_int swallowed;
};

static enum fz_action hook(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct stage *s = arg;
	if (r->op == FZ_EXISTS && r->watch && atomic_load(&s->blind) &&
	    strncmp(r->path, "/lock/", 6) == 0) {
		atomic_fetch_add(&s->swallowed, 1);
		return FZ_SWALLOW;
	}
	if (r->op != FZ_MULTI)
		return FZ_APPLY;
	snprintf(s->checked, sizeof s->checked, "%s", r->path);
	if (atomic_exchange(&s->delete_next, false))
		assert_int_equal(fz_delete(s->z, r->path), ZOK);
	atomic_fetch_add(&s->multis, 1);
	return FZ_APPLY;
}

static void count_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct fzh_count *k = data;
	atomic_fetch_add(&k->n, 1);
	fz_poke(k->z);
}

static bool lost_once(void *arg)
{
	return atomic_load(&((struct fzh_count *)arg)->n) == 1;
}

/* blind: the hold keeps no watch on its node (its exists is swallowed), so that the
 * transaction's answer is the only news of the node's end: the loss must come from it. */
static void refused_by_the_check_run(bool blind)
{
	struct stage s = {.z = fz_new()};
	atomic_store(&s.blind, blind);
	fz_set_hook(s.z, hook, &s);
	assert_int_equal(fz_create(s.z, "/rec", "before", ZOO_PERSISTENT, 0, NULL, 0), ZOK);
	zkl_client *c;
	CHECK_OK(fz_client_open(s.z, &c, NULL));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/lock"));
	zkl_lock *l = zkl_mutex_lock(m);
	struct fzh_count lost = {.z = s.z};
	CHECK_OK(zkl_lock_on_lost(l, count_lost, &lost));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);

	/* While the node is there: applied, with the check of the node first. */
	CHECK_OK(zkl_lock_guarded_set(l, "/rec", "held", 4));
	assert_string_equal(s.checked, node);
	char buf[64];
	assert_int_equal(fz_children(s.z, "/lock", buf, sizeof buf), 1);

	/* Gone as it arrives: refused, and the hold is lost. */
	atomic_store(&s.delete_next, true);
	zkl_txn_result r;
	const zkl_txn_op op = {.kind = ZKL_TXN_SET, .path = "/rec", .data = "late", .len = 4,
	                       .version = -1};
	assert_int_equal(zkl_lock_txn(l, &op, 1, &r), ZKL_ELOST);
	assert_int_equal(r.rc, ZKL_ELOST);
	assert_int_equal(r.zk_rc, ZRUNTIMEINCONSISTENCY);
	assert_false(zkl_lock_is_held(l));
	fz_wait(s.z, lost_once, &lost, "the hold reported lost");
	struct Stat st;
	assert_true(fz_stat(s.z, "/rec", &st));
	assert_int_equal(st.version, 1); /* the first write only */
	assert_int_equal(atomic_load(&s.multis), 2);

	/* Lost: refused before anything is sent. */
	assert_int_equal(zkl_lock_guarded_set(l, "/rec", "later", 5), ZKL_ELOST);
	assert_int_equal(atomic_load(&s.multis), 2);
	assert_int_equal(zkl_lock_release(l), ZKL_ELOST);
	assert_int_equal(atomic_load(&lost.n), 1);
	assert_int_equal(atomic_load(&s.swallowed), blind ? 1 : 0);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(s.z);
}

static void refused_by_the_check(void **state)
{
	(void)state;
	refused_by_the_check_run(false);
}

static void refused_by_the_check_blind(void **state)
{
	(void)state;
	refused_by_the_check_run(true);
}

/* A failing operation: nothing applied, and the hold stays. */
static void failing_op(void **state)
{
	(void)state;
	struct stage s = {.z = fz_new()};
	fz_set_hook(s.z, hook, &s);
	assert_int_equal(fz_create(s.z, "/a", "0", ZOO_PERSISTENT, 0, NULL, 0), ZOK);
	zkl_client *c;
	CHECK_OK(fz_client_open(s.z, &c, NULL));
	zkl_semaphore *sem;
	CHECK_OK(zkl_semaphore_new(&sem, c, "/sem", 1));
	zkl_lock *l = zkl_semaphore_lock(sem);
	CHECK_OK(zkl_lock_acquire(l, 10000));
	const zkl_txn_op ops[] = {
		{.kind = ZKL_TXN_SET, .path = "/a", .data = "1", .len = 1, .version = -1},
		{.kind = ZKL_TXN_DELETE, .path = "/nope", .version = -1},
		{.kind = ZKL_TXN_CREATE, .path = "/b"},
	};
	zkl_txn_result r[3];
	assert_int_equal(zkl_lock_txn(l, ops, 3, r), ZKL_EZK);
	assert_int_equal(r[1].zk_rc, ZNONODE);
	assert_int_equal(r[0].rc, ZKL_ECANCELED);
	assert_int_equal(r[2].rc, ZKL_ECANCELED);
	assert_false(fz_stat(s.z, "/b", NULL));
	struct Stat st;
	assert_true(fz_stat(s.z, "/a", &st));
	assert_int_equal(st.version, 0);
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_txn(l, ops, 1, r));
	assert_int_equal(r[0].version, 1);
	CHECK_OK(zkl_lock_release(l));
	zkl_semaphore_free(sem);
	zkl_client_close(c);
	fz_free(s.z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refused_by_the_check),
		cmocka_unit_test(refused_by_the_check_blind),
		cmocka_unit_test(failing_op),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
