/* The in-memory ZooKeeper's multi (fakezk.h, fz_multi): all or none, in order, each op's
 * result as the server gives it. The table (multi-cases.h) runs on a real server too
 * (tests/zk/test-multi.c); what only the fake can show is checked here besides: one
 * zxid for the whole multi, and a failed multi leaving the tree as it was, zxid and all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "fakezk.h"
#include "multi-cases.h"

struct fake {
	struct fz *z;
	int64_t owner;
};

static void fake_create(void *ctx, const char *path)
{
	struct fake *f = ctx;
	int rc = fz_create(f->z, path, "v0", ZOO_PERSISTENT, 0, NULL, 0);
	if (rc != ZOK)
		fail_msg("create %s: %s", path, zerror(rc));
}

static int fake_exists(void *ctx, const char *path, int *version)
{
	struct fake *f = ctx;
	struct Stat st;
	if (!fz_stat(f->z, path, &st))
		return 0;
	*version = st.version;
	return 1;
}

static int fake_multi(void *ctx, int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
	struct fake *f = ctx;
	return fz_multi(f->z, f->owner, count, ops, results);
}

static void table(void **state)
{
	(void)state;
	struct fake f = { fz_new(), 0 };
	f.owner = fz_peer(f.z);
	const struct multi_driver d = { fake_create, fake_exists, fake_multi, &f };
	run_multi_cases(&d, "/m");
	fz_free(f.z);
}

/* The ops of a multi share one zxid; a failed multi takes none. */
static void one_zxid(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	assert_int_equal(fz_create(z, "/a", "v0", ZOO_PERSISTENT, 0, NULL, 0), ZOK);
	struct Stat a0;
	assert_true(fz_stat(z, "/a", &a0));

	zoo_op_t ops[3];
	zoo_op_result_t res[3];
	char name[64];
	struct Stat st;
	zoo_create_op_init(&ops[0], "/b", "1", 1, &ZOO_OPEN_ACL_UNSAFE, 0, name, sizeof name);
	zoo_set_op_init(&ops[1], "/a", "2", 1, -1, &st);
	zoo_check_op_init(&ops[2], "/a", 1);
	assert_int_equal(fz_multi(z, 0, 3, ops, res), ZOK);
	assert_string_equal(name, "/b");
	struct Stat a1, b1;
	assert_true(fz_stat(z, "/a", &a1));
	assert_true(fz_stat(z, "/b", &b1));
	assert_int_equal(a1.mzxid, b1.czxid);
	assert_int_equal(a1.mzxid, a0.mzxid + 1);
	assert_int_equal(st.mzxid, a1.mzxid);
	assert_int_equal(st.version, 1);

	/* A failing one changes nothing, not even the zxid the next write gets. */
	zoo_create_op_init(&ops[0], "/c", "1", 1, &ZOO_OPEN_ACL_UNSAFE, 0, name, sizeof name);
	zoo_delete_op_init(&ops[1], "/b", -1);
	zoo_check_op_init(&ops[2], "/b", -1);
	assert_int_equal(fz_multi(z, 0, 3, ops, res), ZNONODE);
	assert_int_equal(res[0].err, ZOK);
	assert_null(res[0].value);
	assert_int_equal(res[1].err, ZOK);
	assert_int_equal(res[2].err, ZNONODE);
	assert_false(fz_stat(z, "/c", NULL));
	assert_true(fz_stat(z, "/b", NULL));
	assert_int_equal(fz_set(z, "/a", "3"), ZOK);
	struct Stat a2;
	assert_true(fz_stat(z, "/a", &a2));
	assert_int_equal(a2.mzxid, a1.mzxid + 1);

	/* A create's name is cut to its buffer, as the C client does. */
	char small[4];
	zoo_create_op_init(&ops[0], "/long-name", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, small,
	                   sizeof small);
	assert_int_equal(fz_multi(z, 0, 1, ops, res), ZOK);
	assert_string_equal(small, "/lo");
	assert_true(fz_stat(z, "/long-name", NULL));
	fz_free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table),
		cmocka_unit_test(one_zxid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
