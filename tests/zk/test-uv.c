/* zklocks on a libuv loop (include/zklocks/adapters/libuv.h), on a real ZooKeeper server:
 * one loop serves a 5 ms timer and a TCP echo while 100 acquisitions queue behind locks
 * another client holds (on a thread of its own, as another process would), then get them. Every zklocks callback runs on the loop's thread;
 * the echo never stops; the longest gap between timer ticks is printed (the loop-stall
 * figure of docs/BENCHMARKS.md). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zklocks/adapters/libuv.h>

#include "harness.h"

enum { PATHS = 10, PER_PATH = 10, ECHOES = 200, TICK_MS = 5, HOLD_MS = 1000 };

struct world {
	uv_loop_t *loop;
	pthread_t loop_thread;
	zkl_uv uv;
	zkl_client *c;
	uv_timer_t tick;
	uint64_t last_tick_ns, max_gap_ns, gap_pending_ns;
	int ticks;
	uv_tcp_t server;
	int port;
	uv_timer_t letgo;
	zkl_mutex *holders[PATHS];      /* on another client: hold every path at first */
	pthread_t holder_thread;        /* another process, as it were: takes them all, and
	                                 * lets go when the loop says (never on the loop) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool holding, let_go;           /* mu */
	int pending;                    /* acquisitions not yet granted */
	int granted, foreign, failed;
	atomic_int echoed;              /* round trips the echo client completed */
	atomic_int echo_done;
	bool detached;
};

static struct world W;

static void on_tick(uv_timer_t *t)
{
	(void)t;
	uint64_t now = uv_hrtime();
	uint64_t gap = now - W.last_tick_ns;
	if (gap > W.max_gap_ns)
		W.max_gap_ns = gap;
	if (W.pending == PATHS * PER_PATH && gap > W.gap_pending_ns)
		W.gap_pending_ns = gap;
	W.last_tick_ns = now;
	W.ticks++;
}

/* ---- the echo server ---- */

static void echo_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
	(void)h;
	buf->base = malloc(size);
	buf->len = buf->base ? size : 0;
}

static void echo_written(uv_write_t *w, int status)
{
	(void)status;
	free(w->data);
	free(w);
}

static void echo_closed(uv_handle_t *h)
{
	free(h);
}

static void echo_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	if (n > 0) {
		uv_write_t *w = malloc(sizeof *w);
		assert_non_null(w);
		w->data = buf->base;
		uv_buf_t out = uv_buf_init(buf->base, (unsigned)n);
		assert_int_equal(uv_write(w, s, &out, 1, echo_written), 0);
		return;
	}
	free(buf->base);
	if (n < 0)
		uv_close((uv_handle_t *)s, echo_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
	assert_int_equal(status, 0);
	uv_tcp_t *conn = malloc(sizeof *conn);
	assert_non_null(conn);
	uv_tcp_init(W.loop, conn);
	assert_int_equal(uv_accept(server, (uv_stream_t *)conn), 0);
	uv_read_start((uv_stream_t *)conn, echo_alloc, echo_read);
}

/* A plain client on its own thread: ECHOES round trips, each checked. */
static void *echo_client(void *arg)
{
	(void)arg;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)W.port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		atomic_store(&W.echo_done, 1);
		return NULL;
	}
	for (int i = 0; i < ECHOES; i++) {
		char msg[32], got[32];
		int len = snprintf(msg, sizeof msg, "ping %d", i);
		if (write(fd, msg, (size_t)len) != len)
			break;
		int have = 0;
		while (have < len) {
			ssize_t r = read(fd, got + have, (size_t)(len - have));
			if (r <= 0)
				break;
			have += (int)r;
		}
		if (have != len || memcmp(msg, got, (size_t)len) != 0)
			break;
		atomic_fetch_add(&W.echoed, 1);
		usleep(5000);
	}
	close(fd);
	atomic_store(&W.echo_done, 1);
	return NULL;
}

/* ---- the locks ---- */

static void detached(zkl_uv *u)
{
	(void)u;
	W.detached = true;
}

static void maybe_finish(void)
{
	if (W.pending == 0 && atomic_load(&W.echo_done)) {
		uv_timer_stop(&W.tick);
		uv_close((uv_handle_t *)&W.tick, NULL);
		uv_close((uv_handle_t *)&W.server, NULL);
		zkl_uv_detach(&W.uv, detached);
	}
}

static void granted(zkl_lock *l, int rc, void *data)
{
	(void)data;
	if (!pthread_equal(pthread_self(), W.loop_thread))
		W.foreign++;
	if (rc == 0 && zkl_lock_release(l) == 0)
		W.granted++;
	else
		W.failed++;
	W.pending--;
}

static void *hold_every_path(void *arg)
{
	(void)arg;
	int failed = 0;
	for (int p = 0; p < PATHS; p++)
		failed += zkl_lock_acquire(zkl_mutex_lock(W.holders[p]), 5000) != 0;
	pthread_mutex_lock(&W.mu);
	W.holding = true;
	pthread_cond_broadcast(&W.cv);
	while (!W.let_go)
		pthread_cond_wait(&W.cv, &W.mu);
	pthread_mutex_unlock(&W.mu);
	for (int p = 0; p < PATHS; p++)
		failed += zkl_lock_release(zkl_mutex_lock(W.holders[p])) != 0;
	return (void *)(intptr_t)failed;
}

static void on_letgo(uv_timer_t *t)
{
	(void)t;
	pthread_mutex_lock(&W.mu);
	W.let_go = true;
	pthread_cond_broadcast(&W.cv);
	pthread_mutex_unlock(&W.mu);
	uv_close((uv_handle_t *)&W.letgo, NULL);
}

/* Ends the run once everything is done (the echo client is not a libuv handle). */
static void on_check(uv_timer_t *t)
{
	if (W.pending == 0 && atomic_load(&W.echo_done)) {
		uv_timer_stop(t);
		uv_close((uv_handle_t *)t, NULL);
		maybe_finish();
	}
}

static void test_libuv_loop_never_stalls(void **state)
{
	(void)state;
	memset(&W, 0, sizeof W);
	W.loop = uv_default_loop();
	W.loop_thread = pthread_self();
	zkl_client *other = h_client(0);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.external_loop = true;
	CHECK_OK(zkl_client_open(&W.c, &o));
	assert_int_equal(zkl_uv_attach(&W.uv, W.loop, W.c), 0);

	/* Another client holds every path; 100 acquisitions queue behind. */
	zkl_mutex *m[PATHS * PER_PATH];
	char *paths[PATHS];
	for (int p = 0; p < PATHS; p++) {
		paths[p] = strdup(h_path("uv"));
		CHECK_OK(zkl_mutex_new(&W.holders[p], other, paths[p]));
	}
	pthread_mutex_init(&W.mu, NULL);
	pthread_cond_init(&W.cv, NULL);
	assert_int_equal(pthread_create(&W.holder_thread, NULL, hold_every_path, NULL), 0);
	pthread_mutex_lock(&W.mu);
	while (!W.holding)
		pthread_cond_wait(&W.cv, &W.mu);
	pthread_mutex_unlock(&W.mu);
	for (int p = 0; p < PATHS; p++) {
		for (int k = 0; k < PER_PATH; k++) {
			CHECK_OK(zkl_mutex_new(&m[p * PER_PATH + k], W.c, paths[p]));
			CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m[p * PER_PATH + k]), 60000,
			                                granted, NULL));
		}
	}
	W.pending = PATHS * PER_PATH;

	uv_timer_init(W.loop, &W.tick);
	W.last_tick_ns = uv_hrtime();
	uv_timer_start(&W.tick, on_tick, TICK_MS, TICK_MS);
	uv_tcp_init(W.loop, &W.server);
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", 0, &sa);
	assert_int_equal(uv_tcp_bind(&W.server, (const struct sockaddr *)&sa, 0), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&W.server, 16, on_connection), 0);
	struct sockaddr_in bound;
	int len = sizeof bound;
	assert_int_equal(uv_tcp_getsockname(&W.server, (struct sockaddr *)&bound, &len), 0);
	W.port = ntohs(bound.sin_port);
	pthread_t echo;
	assert_int_equal(pthread_create(&echo, NULL, echo_client, NULL), 0);
	uv_timer_init(W.loop, &W.letgo);
	uv_timer_start(&W.letgo, on_letgo, HOLD_MS, 0);
	uv_timer_t check;
	uv_timer_init(W.loop, &check);
	uv_timer_start(&check, on_check, 50, 50);

	assert_int_equal(uv_run(W.loop, UV_RUN_DEFAULT), 0);
	pthread_join(echo, NULL);
	void *holder_failed;
	pthread_join(W.holder_thread, &holder_failed);
	assert_int_equal((int)(intptr_t)holder_failed, 0);

	assert_true(W.detached);
	assert_int_equal(W.granted, PATHS * PER_PATH);
	assert_int_equal(W.failed, 0);
	assert_int_equal(W.foreign, 0);
	assert_int_equal(atomic_load(&W.echoed), ECHOES);
	assert_true(W.ticks > 0);
	printf("loop-stall: %d acquisitions pending on %d paths, %d echoes: longest gap "
	       "between %d ms timer ticks %.2f ms while all were pending, %.2f ms overall "
	       "(%d ticks)\n", PATHS * PER_PATH, PATHS, ECHOES, TICK_MS,
	       W.gap_pending_ns / 1e6, W.max_gap_ns / 1e6, W.ticks);
	for (int i = 0; i < PATHS * PER_PATH; i++)
		zkl_mutex_free(m[i]);
	for (int p = 0; p < PATHS; p++) {
		zkl_mutex_free(W.holders[p]);
		free(paths[p]);
	}
	pthread_cond_destroy(&W.cv);
	pthread_mutex_destroy(&W.mu);
	zkl_client_close(W.c);
	zkl_client_close(other);
	assert_int_equal(uv_loop_close(W.loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libuv_loop_never_stalls),
	};
	return H_RUN(tests);
}
