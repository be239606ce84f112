/* The application's own session (zkl_client_adopt) on a real ZooKeeper server: its
 * ephemeral node and its lock live on one session, die with it, and after the handover
 * of the next handle new acquisitions work; the application's watcher sees every event,
 * and the handle outlives the client. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	if (reason == ZKL_ELOST || reason == ZKL_EDELETED)
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

/* A state listener: counts ZKL_STATE_LOST in k[0] and ZKL_STATE_RECONNECTED in k[1]. */
static void count_state(zkl_client *c, zkl_state st, void *data)
{
	(void)c;
	h_counter *k = data;
	if (st == ZKL_STATE_LOST)
		h_counter_add(&k[0], 1);
	else if (st == ZKL_STATE_RECONNECTED)
		h_counter_add(&k[1], 1);
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
	h_counter states[2];
	h_counter_init(&states[0]);
	h_counter_init(&states[1]);
	CHECK_OK(zkl_client_add_listener(c, count_state, states));
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
	/* The client's state moves after the lost callbacks have run: wait for it. */
	assert_true(h_counter_wait(&states[0], 1, 10000));
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
	CHECK_OK(zkl_client_remove_listener(c, count_state, states));
	zkl_client_close(c);
	h_counter_destroy(&states[0]);
	h_counter_destroy(&states[1]);

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

/* A TCP proxy in front of the server that can hold every byte in both directions (the
 * kernel buffers them) and let them through later: a partition that heals, with no
 * connection closed. */
struct proxy {
	int listen_fd, port, server_port;
	atomic_bool hold, stop;
	pthread_t th;
};

static int connect_server(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	enum { PAIRS = 8 };
	int a[PAIRS], b[PAIRS];
	for (int i = 0; i < PAIRS; i++)
		a[i] = b[i] = -1;
	while (!atomic_load(&p->stop)) {
		struct pollfd fds[1 + 2 * PAIRS];
		int n = 0;
		fds[n++] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
		bool held = atomic_load(&p->hold);
		for (int i = 0; i < PAIRS; i++) {
			fds[n++] = (struct pollfd){.fd = held ? -1 : a[i], .events = POLLIN};
			fds[n++] = (struct pollfd){.fd = held ? -1 : b[i], .events = POLLIN};
		}
		if (poll(fds, (nfds_t)n, 20) <= 0)
			continue;
		if (fds[0].revents & POLLIN) {
			int c = accept(p->listen_fd, NULL, NULL);
			int s = c >= 0 ? connect_server(p->server_port) : -1;
			int i = 0;
			while (i < PAIRS && a[i] >= 0)
				i++;
			if (c >= 0 && s >= 0 && i < PAIRS) {
				a[i] = c;
				b[i] = s;
			} else {
				if (c >= 0)
					close(c);
				if (s >= 0)
					close(s);
			}
		}
		for (int i = 0; i < PAIRS; i++) {
			for (int dir = 0; dir < 2; dir++) {
				short ev = fds[1 + 2 * i + dir].revents;
				if (!ev || a[i] < 0)
					continue;
				int from = dir ? b[i] : a[i], to = dir ? a[i] : b[i];
				char buf[16384];
				ssize_t r = read(from, buf, sizeof buf);
				if (r <= 0 || write(to, buf, (size_t)r) != r) {
					close(a[i]);
					close(b[i]);
					a[i] = b[i] = -1;
				}
			}
		}
	}
	for (int i = 0; i < PAIRS; i++) {
		if (a[i] >= 0) {
			close(a[i]);
			close(b[i]);
		}
	}
	return NULL;
}

static void proxy_start(struct proxy *p)
{
	memset(p, 0, sizeof *p);
	const char *colon = strrchr(h_servers(), ':');
	assert_non_null(colon);
	p->server_port = atoi(colon + 1);
	p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(p->listen_fd, 8), 0);
	socklen_t len = sizeof sa;
	assert_int_equal(getsockname(p->listen_fd, (struct sockaddr *)&sa, &len), 0);
	p->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&p->th, NULL, proxy_main, p), 0);
}

static void proxy_stop(struct proxy *p)
{
	atomic_store(&p->stop, true);
	pthread_join(p->th, NULL);
	close(p->listen_fd);
}

/* The loss rule gives the application's session up (nothing heard for half its
 * timeout) while the server still keeps it: the lock is reported lost and its node is
 * deleted once the partition heals, on the same session, which counts again. Giving
 * the session up the way a client's own is (a new generation) would leave that node on
 * the application's session for as long as it lives. */
static void test_loss_rule_keeps_the_session(void **state)
{
	(void)state;
	struct proxy px;
	proxy_start(&px);
	char servers[64];
	snprintf(servers, sizeof servers, "127.0.0.1:%d", px.port);
	struct app a;
	app_init(&a);
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	zhandle_t *zh = zookeeper_init(servers, app_watcher, 8000, NULL, &a, 0);
	assert_non_null(zh);
	app_wait(&a, &a.connected, 1);
	char reg[64];
	snprintf(reg, sizeof reg, "/adopt-loss-registration-%d", (int)getpid());
	assert_int_equal(zoo_create(zh, reg, "up", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL,
	                            0), ZOK);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.loss_percent = 50;
	zkl_client *c;
	CHECK_OK(zkl_client_adopt(&c, zh, &o));
	int64_t session = zkl_client_session_id(c);
	h_counter states[2];
	h_counter_init(&states[0]);
	h_counter_init(&states[1]);
	CHECK_OK(zkl_client_add_listener(c, count_state, states));
	const char *path = h_path("adopt-loss");
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(l, note_lost, lost));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(l, node, sizeof node) > 0);

	atomic_store(&px.hold, true);
	assert_true(h_latch_wait(lost, 10000)); /* at half the timeout of silence */
	assert_true(h_counter_wait(&states[0], 1, 10000));
	assert_true(h_exists(node)); /* the server still keeps the session */
	atomic_store(&px.hold, false);
	assert_true(h_wait_deleted(node, 10000));
	assert_true(h_exists(reg)); /* the same session lives on */
	assert_true(h_counter_wait(&states[1], 1, 10000));
	assert_int_equal(zkl_client_session_id(c), session);
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	CHECK_OK(zkl_lock_acquire(l, 5000));
	CHECK_OK(zkl_lock_release(l));
	assert_int_equal(a.expired, 0);

	zkl_mutex_free(m);
	CHECK_OK(zkl_client_remove_listener(c, count_state, states));
	zkl_client_close(c);
	zookeeper_close(zh);
	proxy_stop(&px);
	h_latch_free(lost);
	h_counter_destroy(&states[0]);
	h_counter_destroy(&states[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arguments),
		cmocka_unit_test(test_expiry_and_handover),
		cmocka_unit_test(test_close_leaves_nothing),
		cmocka_unit_test(test_loss_rule_keeps_the_session),
	};
	return H_RUN(tests);
}
