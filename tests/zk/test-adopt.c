/* The application's own session (zkl_client_adopt) on a real ZooKeeper server: its
 * ephemeral node and its lock live on one session, die with it, and after the handover
 * of the next handle new acquisitions work; the application's watcher sees every event,
 * and the handle outlives the client. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

/* What the application's own watcher saw. */
struct app {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int connected, expired, node_events;
};

static void app_init(struct app *a)
{
	memset(a, 0, sizeof *a);
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
}

static void app_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct app *a = ctx;
	pthread_mutex_lock(&a->mu);
	if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE)
		a->connected++;
	else if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE)
		a->expired++;
	else if (type != ZOO_SESSION_EVENT)
		a->node_events++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Waits until *field reaches want (the watcher's count is the event), at most 20 s. */
static void app_wait(struct app *a, int *field, int want)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 20;
	pthread_mutex_lock(&a->mu);
	int rc = 0;
	while (*field < want && rc == 0)
		rc = pthread_cond_timedwait(&a->cv, &a->mu, &t);
	int got = *field;
	pthread_mutex_unlock(&a->mu);
	assert_true(got >= want);
}

/* The application's handle, connected. */
static zhandle_t *app_open(struct app *a)
{
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	int before = a->connected;
	zhandle_t *zh = zookeeper_init(h_servers(), app_watcher, 4000, NULL, a, 0);
	assert_non_null(zh);
	app_wait(a, &a->connected, before + 1);
	return zh;
}

static int64_t ephemeral_owner(zhandle_t *zh, const char *path)
{
	struct Stat st;
	int rc = zoo_exists(zh, path, 0, &st);
	return rc == ZOK ? st.ephemeralOwner : -1;
}

static void note_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	if (reason == ZKL_ELOST)
		h_latch_set(data);
}

static zkl_client *adopt(zhandle_t *zh)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = NULL; /* the handle has its own */
	zkl_client *c;
	CHECK_OK(zkl_client_adopt(&c, zh, &o));
	return c;
}

static void test_arguments(void **state)
{
	(void)state;
	zkl_client *c = (zkl_client *)1;
	CHECK_RC(ZKL_EINVAL, zkl_client_adopt(&c, NULL, NULL));
	assert_null(c);
	assert_non_null(strstr(zkl_last_error(), "handle is NULL"));
	zkl_client *own = h_client(0);
	struct app a;
	app_init(&a);
	zhandle_t *zh = app_open(&a);
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(own, zh));
	assert_non_null(strstr(zkl_last_error(), "zkl_client_adopt"));
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(NULL, zh));
	zkl_client_close(own);
	zkl_client *c2 = adopt(zh);
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(c2, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(c2, zh));
	zkl_client_close(c2);
	assert_int_equal(zoo_state(zh), ZOO_CONNECTED_STATE);
	zookeeper_close(zh);
}

/* The application's registration and its lock on one session: expire it, both are gone,
 * the lock is reported lost, the application's watcher heard it; after the handover of
 * the next handle, acquisitions work on the new session. */
static void test_expiry_and_handover(void **state)
{
	(void)state;
	struct app a;
	app_init(&a);
	zhandle_t *zh = app_open(&a);
	char reg[64];
	snprintf(reg, sizeof reg, "/adopt-registration-%d", (int)getpid());
	assert_int_equal(zoo_create(zh, reg, "up", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL,
	                            0), ZOK);
	zkl_client *c = adopt(zh);
	const clientid_t *cid = zoo_client_id(zh);
	assert_int_equal(zkl_client_session_id(c), cid->client_id);

	const char *path = h_path("adopt");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, note_lost, lost));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	int64_t first = zkl_lock_token(l);
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	assert_int_equal(ephemeral_owner(zh, node), cid->client_id); /* one session */

	h_expire(c);
	assert_true(h_latch_wait(lost, 20000));
	app_wait(&a, &a.expired, 1); /* the application's watcher heard it too */
	assert_false(h_exists(reg));
	assert_false(h_exists(node));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	assert_int_equal(zkl_client_state(c), ZKL_STATE_LOST);
	/* No session until the handover: an acquire waits, and times out. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 300));
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(c, zh)); /* the expired one */

	struct app a2;
	app_init(&a2);
	zhandle_t *zh2 = app_open(&a2);
	CHECK_OK(zkl_client_handover(c, zh2));
	CHECK_RC(ZKL_EINVAL, zkl_client_handover(c, zh2));
	CHECK_OK(zkl_lock_acquire(l, 10000));
	assert_true(zkl_lock_token(l) > first);
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);
	assert_int_equal(ephemeral_owner(zh2, node), zoo_client_id(zh2)->client_id);
	assert_int_equal(zkl_client_session_id(c), zoo_client_id(zh2)->client_id);
	/* The session is alive: no handover now. */
	CHECK_RC(ZKL_EBUSY, zkl_client_handover(c, zh));
	CHECK_OK(zkl_lock_release(l));
	h_wait_children(path, 0);
	zkl_mutex_free(m);
	zkl_client_close(c);

	/* The handle is the application's still: open, and its own again. */
	assert_int_equal(zoo_state(zh2), ZOO_CONNECTED_STATE);
	assert_int_equal(zoo_create(zh2, reg, "up", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL,
	                            NULL, 0), ZOK);
	struct Stat st;
	assert_int_equal(zoo_wexists(zh2, reg, NULL, NULL, &st), ZOK);
	assert_int_equal(zoo_delete(zh2, reg, -1), ZOK);
	assert_int_equal(a2.connected, 1);
	zookeeper_close(zh);
	zookeeper_close(zh2);
	h_latch_free(lost);
}

/* Closing an adopted client leaves none of its nodes, neither held nor queued, and its
 * watches are off the handle: the application's session goes on. */
static void test_close_leaves_nothing(void **state)
{
	(void)state;
	struct app a;
	app_init(&a);
	zhandle_t *zh = app_open(&a);
	zkl_client *c = adopt(zh);
	const char *path = h_path("adopt-close");
	zkl_client *other = h_client(0);
	zkl_mutex *holder, *waiter, *mine;
	CHECK_OK(zkl_mutex_new(&holder, other, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(holder), 5000));
	CHECK_OK(zkl_mutex_new(&waiter, c, path));
	CHECK_OK(zkl_mutex_new(&mine, c, h_sub(path, "mine")));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(mine), 5000));
	/* The waiter times out: its node goes, its watch on the holder's node stays with the
	 * C client until it fires. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(zkl_mutex_lock(waiter), 200));
	zkl_mutex_free(mine);
	zkl_mutex_free(waiter);
	zkl_client_close(c);
	h_wait_children(h_sub(path, "mine"), 0);
	zkl_participant *p;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_mutex_lock(holder), &p, &n));
	assert_int_equal(n, 1);
	assert_true(p[0].holder);
	zkl_participants_free(p, n);
	/* The holder lets go: no watch of the closed client fires into freed memory. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(holder)));
	zkl_mutex_free(holder);
	zkl_client_close(other);
	assert_int_equal(zoo_state(zh), ZOO_CONNECTED_STATE);
	zookeeper_close(zh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arguments),
		cmocka_unit_test(test_expiry_and_handover),
		cmocka_unit_test(test_close_leaves_nothing),
	};
	return H_RUN(tests);
}
