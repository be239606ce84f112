/* The request layer's multi against a real server: the table of multi-cases.h, which
 * the in-memory ZooKeeper passes too (tests/unit/test-multi.c), runs here through the C
 * client's multi and, in the same test, through the fake's: both answer every case as
 * the table says: all or none, the failing op's own error, ZOK for the ops before it and
 * ZRUNTIMEINCONSISTENCY for those after. */
#include <pthread.h>
#include <string.h>

#include "harness.h"
#include "../unit/fakezk.h"
#include "../unit/multi-cases.h"

/* A raw handle of the test's own, connected. */
struct raw {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool connected;
	zhandle_t *zh;
};

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct raw *r = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&r->mu);
	r->connected = state == ZOO_CONNECTED_STATE;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void raw_open(struct raw *r)
{
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->connected = false;
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	r->zh = zookeeper_init(h_servers(), raw_watcher, 10000, NULL, r, 0);
	assert_non_null(r->zh);
	pthread_mutex_lock(&r->mu);
	while (!r->connected)
		pthread_cond_wait(&r->cv, &r->mu); /* the test's own timeout ends a hang */
	pthread_mutex_unlock(&r->mu);
}

static void raw_close(struct raw *r)
{
	zookeeper_close(r->zh);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
}

static void server_create(void *ctx, const char *path)
{
	struct raw *r = ctx;
	int rc = zoo_create(r->zh, path, "v0", 2, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK)
		fail_msg("create %s: %s", path, zerror(rc));
}

static int server_exists(void *ctx, const char *path, int *version)
{
	struct raw *r = ctx;
	struct Stat st;
	int rc = zoo_exists(r->zh, path, 0, &st);
	if (rc != ZOK && rc != ZNONODE)
		fail_msg("exists %s: %s", path, zerror(rc));
	if (rc == ZOK)
		*version = st.version;
	return rc == ZOK;
}

static int server_multi(void *ctx, int count, const zoo_op_t *ops, zoo_op_result_t *results)
{
	struct raw *r = ctx;
	return zoo_multi(r->zh, count, ops, results);
}

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

static void server_and_fake_agree(void **state)
{
	(void)state;
	struct raw r;
	raw_open(&r);
	int rc = zoo_create(r.zh, "/t", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	assert_true(rc == ZOK || rc == ZNODEEXISTS);
	const struct multi_driver server = { server_create, server_exists, server_multi, &r };
	run_multi_cases(&server, h_path("multi"));
	raw_close(&r);

	struct fake f = { fz_new(), 0 };
	f.owner = fz_peer(f.z);
	const struct multi_driver fake = { fake_create, fake_exists, fake_multi, &f };
	run_multi_cases(&fake, "/m");
	fz_free(f.z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(server_and_fake_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
