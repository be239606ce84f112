/* zkl_inspect on the in-memory ZooKeeper (fakezk.h): what it does when an answer is lost,
 * the session expires, or nothing answers. Each test names the rule it guards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fzh.h"

#define CHECK_OK(x) assert_int_equal((x), 0)
#define PATH "/locks/x"

/* A client, and two peers queued at PATH ("p1" holds, "p2" waits). */
struct fixture {
	struct fz *z;
	zkl_client *c;
	int64_t session;
	enum fz_action action;   /* what the hook does to the client's first listing of PATH */
	int refuse_rc;           /* with FZ_REFUSE */
	bool expire;             /* the hook expires the client's session first */
	atomic_int lists;        /* the client's listings of PATH */
	atomic_int hits;         /* how many times the hook acted */
	bool every;              /* act on every listing, not only the first */
};

static enum fz_action hook(void *arg, const struct fz_request *r, int *rc)
{
	struct fixture *f = arg;
	if (r->op != FZ_CHILDREN || strcmp(r->path, PATH) != 0 || r->session != f->session)
		return FZ_APPLY;
	if (atomic_fetch_add(&f->lists, 1) > 0 && !f->every)
		return FZ_APPLY;
	atomic_fetch_add(&f->hits, 1);
	if (f->expire)
		fz_expire(f->z, f->session);
	*rc = f->refuse_rc;
	return f->action;
}

static void open_fixture(struct fixture *f, enum fz_action action)
{
	memset(f, 0, sizeof *f);
	f->z = fz_new();
	f->action = action;
	CHECK_OK(fz_create(f->z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(f->z, PATH, NULL, ZOO_CONTAINER, 0, NULL, 0));
	int64_t peer = fz_peer(f->z);
	char made[256];
	CHECK_OK(fz_create(f->z, PATH "/_c_11111111-1111-4111-8111-111111111111-lock-", "p1",
	                   ZOO_EPHEMERAL_SEQUENTIAL, peer, made, sizeof made));
	CHECK_OK(fz_create(f->z, PATH "/_c_22222222-2222-4222-8222-222222222222-lock-", "p2",
	                   ZOO_EPHEMERAL_SEQUENTIAL, peer, made, sizeof made));
	CHECK_OK(fz_client_open(f->z, &f->c, NULL));
	f->session = zkl_client_session_id(f->c);
	assert_true(f->session != 0);
	fz_set_hook(f->z, hook, f);
}

static void close_fixture(struct fixture *f)
{
	fz_set_hook(f->z, NULL, NULL);
	zkl_client_close(f->c);
	fz_free(f->z);
}

static void expect_queue(zkl_inspection *in)
{
	assert_int_equal(zkl_inspection_nodes(in), 2);
	const zkl_node_info *a = zkl_inspection_node(in, 0), *b = zkl_inspection_node(in, 1);
	assert_string_equal(a->data, "p1");
	assert_int_equal(a->role, ZKL_ROLE_HOLDER);
	assert_string_equal(b->data, "p2");
	assert_int_equal(b->role, ZKL_ROLE_WAITING);
}

/* A listing whose answer is lost is asked again once the connection is back. */
static void test_lost_answer_asked_again(void **state)
{
	(void)state;
	struct fixture f;
	open_fixture(&f, FZ_LOSE);
	zkl_inspection *in = NULL;
	CHECK_OK(zkl_inspect(f.c, PATH, 10000, &in));
	expect_queue(in);
	zkl_inspection_free(in);
	assert_int_equal(atomic_load(&f.hits), 1);
	assert_int_equal(atomic_load(&f.lists), 2);
	close_fixture(&f);
}

/* Trying once does not wait for the connection: ZKL_ECONNLOSS, nothing returned. */
static void test_try_once_lost(void **state)
{
	(void)state;
	struct fixture f;
	open_fixture(&f, FZ_REFUSE);
	f.refuse_rc = ZCONNECTIONLOSS;
	zkl_inspection *in = (zkl_inspection *)&in;
	assert_int_equal(zkl_inspect(f.c, PATH, 0, &in), ZKL_ECONNLOSS);
	assert_null(in);
	assert_non_null(strstr(zkl_last_error(), PATH));
	assert_int_equal(atomic_load(&f.lists), 1);
	/* With time to wait, the next answer is taken. */
	CHECK_OK(zkl_inspect(f.c, PATH, 10000, &in));
	expect_queue(in);
	zkl_inspection_free(in);
	close_fixture(&f);
}

/* A session that expires under the reads: they are asked again on the new session. */
static void test_expired_session(void **state)
{
	(void)state;
	struct fixture f;
	open_fixture(&f, FZ_REFUSE);
	f.expire = true;
	f.refuse_rc = ZSESSIONEXPIRED;
	zkl_inspection *in = NULL;
	CHECK_OK(zkl_inspect(f.c, PATH, 10000, &in));
	expect_queue(in);
	zkl_inspection_free(in);
	assert_int_equal(atomic_load(&f.hits), 1);
	assert_true(zkl_client_session_id(f.c) != f.session);
	close_fixture(&f);
}

/* An answer that never comes ends the call at its deadline, and a connection that stays
 * down too. */
static void test_deadline(void **state)
{
	(void)state;
	struct fixture f;
	open_fixture(&f, FZ_PAUSE);
	zkl_inspection *in = (zkl_inspection *)&in;
	int64_t t0 = zkl_monotonic_ms();
	assert_int_equal(zkl_inspect(f.c, PATH, 300, &in), ZKL_ETIMEDOUT);
	int64_t took = zkl_monotonic_ms() - t0;
	assert_true(took >= 300 && took < 5000);
	assert_null(in);
	fz_pause(f.z, f.session, false);

	/* Every listing lost: asked again while the deadline allows, then ZKL_ETIMEDOUT. */
	f.action = FZ_REFUSE;
	f.refuse_rc = ZCONNECTIONLOSS;
	f.every = true;
	atomic_store(&f.lists, 0);
	atomic_store(&f.hits, 0);
	assert_int_equal(zkl_inspect(f.c, PATH, 500, &in), ZKL_ETIMEDOUT);
	assert_null(in);
	assert_true(atomic_load(&f.hits) >= 2);
	close_fixture(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_answer_asked_again),
		cmocka_unit_test(test_try_once_lost),
		cmocka_unit_test(test_expired_session),
		cmocka_unit_test(test_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
