/* Integration test helpers. See harness.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"

static zhandle_t *raw;

const char *h_servers(void)
{
	const char *s = getenv("ZKL_TEST_SERVERS");
	if (!s || !*s) {
		const char *ci = getenv("CI");
		fprintf(stderr, "ZKL_TEST_SERVERS is not set: run through tests/with-zk\n");
		exit(ci && strcmp(ci, "true") == 0 ? 1 : 77);
	}
	return s;
}

zkl_client *h_client(int session_timeout_ms)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = session_timeout_ms ? session_timeout_ms : 4000;
	zkl_client *c = NULL;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0)
		fail_msg("zkl_client_open: %s: %s", zkl_strerror(rc), zkl_last_error());
	return c;
}

const char *h_path(const char *test)
{
	static char bufs[16][256];
	static int n;
	char *b = bufs[n % 16];
	snprintf(b, sizeof bufs[0], "/t/%s-%d-%ld", test, n, (long)getpid());
	n++;
	return b;
}

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static zhandle_t *h_raw(void)
{
	if (raw)
		return raw;
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	raw = zookeeper_init(h_servers(), raw_watcher, 10000, NULL, NULL, 0);
	for (int i = 0; i < 500 && zoo_state(raw) != ZOO_CONNECTED_STATE; i++)
		usleep(10000);
	if (zoo_state(raw) != ZOO_CONNECTED_STATE)
		fail_msg("raw handle cannot connect to %s", h_servers());
	return raw;
}

int h_children(const char *path)
{
	struct String_vector sv = {0};
	int rc = zoo_get_children(h_raw(), path, 0, &sv);
	if (rc == ZNONODE)
		return -1;
	if (rc != ZOK)
		fail_msg("get_children %s: %s", path, zerror(rc));
	int n = sv.count;
	deallocate_String_vector(&sv);
	return n;
}

int h_exists(const char *path)
{
	struct Stat st;
	int rc = zoo_exists(h_raw(), path, 0, &st);
	if (rc != ZOK && rc != ZNONODE)
		fail_msg("exists %s: %s", path, zerror(rc));
	return rc == ZOK;
}

void h_create(const char *path, const char *data)
{
	int rc = zoo_create(h_raw(), path, data, data ? (int)strlen(data) : -1,
	                    &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK)
		fail_msg("create %s: %s", path, zerror(rc));
}

struct h_latch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int count;
	struct h_latch *next;
};

static struct h_latch *pending;

h_latch *h_latch_new(void)
{
	h_latch *l = calloc(1, sizeof *l);
	pthread_mutex_init(&l->mu, NULL);
	zkl_cond_init(&l->cv);
	return l;
}

void h_latch_set(h_latch *l)
{
	pthread_mutex_lock(&l->mu);
	l->count++;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

int h_latch_wait(h_latch *l, int ms)
{
	int64_t deadline = zkl_now_ms() + ms;
	pthread_mutex_lock(&l->mu);
	while (l->count == 0 && !zkl_cond_wait_until(&l->cv, &l->mu, deadline))
		;
	int set = l->count > 0;
	pthread_mutex_unlock(&l->mu);
	return set;
}

int h_latch_count(h_latch *l)
{
	pthread_mutex_lock(&l->mu);
	int n = l->count;
	pthread_mutex_unlock(&l->mu);
	return n;
}

void h_latch_free(h_latch *l)
{
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

static void deleted_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)state; (void)path;
	if (type == ZOO_DELETED_EVENT)
		h_latch_set(ctx);
}

int h_wait_deleted(const char *path, int ms)
{
	h_latch *l = h_latch_new();
	struct Stat st;
	int rc = zoo_wexists(h_raw(), path, deleted_watcher, l, &st);
	int gone = rc == ZNONODE || h_latch_wait(l, ms);
	/* A watch that has not fired stays with the raw handle (an exists watch is set even
	 * on an absent node): free its latch only after the handle is closed. */
	if (rc == ZOK && gone) {
		h_latch_free(l);
	} else {
		l->next = pending;
		pending = l;
	}
	return gone;
}

static void thief_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

void h_expire(zkl_client *c)
{
	pthread_mutex_lock(&c->mu);
	clientid_t cid = *zoo_client_id(c->sess->zh);
	uint64_t gen = c->gen;
	int timeout = zoo_recv_timeout(c->sess->zh);
	pthread_mutex_unlock(&c->mu);
	for (int attempt = 0; attempt < 10; attempt++) {
		zhandle_t *t = zookeeper_init2(h_servers(), thief_watcher, timeout, &cid, NULL, 0,
		                               NULL);
		for (int i = 0; i < 500 && zoo_state(t) != ZOO_CONNECTED_STATE; i++)
			usleep(2000);
		usleep(30000);
		for (int i = 0; i < 200 && zoo_state(t) != ZOO_CONNECTED_STATE; i++)
			usleep(1000);
		zookeeper_close(t);
		/* The client moves to a new generation once it has seen the expiry. */
		for (int i = 0; i < 200; i++) {
			pthread_mutex_lock(&c->mu);
			uint64_t now = c->gen;
			pthread_mutex_unlock(&c->mu);
			if (now != gen)
				return;
			usleep(10000);
		}
	}
	fail_msg("could not expire the session");
}

int h_setup(void **state)
{
	(void)state;
	h_servers();
	return 0;
}

int h_teardown(void **state)
{
	(void)state;
	if (raw) {
		zookeeper_close(raw);
		raw = NULL;
	}
	while (pending) {
		h_latch *l = pending;
		pending = l->next;
		h_latch_free(l);
	}
	return 0;
}
