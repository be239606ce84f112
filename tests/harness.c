/* Integration test helpers. See harness.h. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h"
#include "core.h" /* the loop's inbox and its kinds of message (expiry_heard) */

static zhandle_t *raw;

/* ---- the server, clients and paths ---- */

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
	/* Tests look at the tree right after a release: have it confirmed. The default
	 * (sent, not awaited) has tests of its own. */
	o.confirm_release = true;
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

const char *h_sub(const char *path, const char *leaf)
{
	/* Each thread its own: tests call it from their workers too. */
	static _Thread_local char bufs[16][300];
	static _Thread_local int n;
	char *b = bufs[n++ % 16];
	snprintf(b, sizeof bufs[0], "%s/%s", path, leaf);
	return b;
}

const char *h_default_data(void)
{
	static char data[300];
	char host[256];
	gethostname(host, sizeof host);
	snprintf(data, sizeof data, "%s:%ld", host, (long)getpid());
	return data;
}

void h_pair_open(h_pair *p, const char *test)
{
	p->path = h_path(test);
	p->a = h_client(0);
	p->b = h_client(0);
	CHECK_OK(zkl_mutex_new(&p->ma, p->a, p->path));
	CHECK_OK(zkl_mutex_new(&p->mb, p->b, p->path));
	p->la = zkl_mutex_lock(p->ma);
	p->lb = zkl_mutex_lock(p->mb);
}

void h_pair_close(h_pair *p)
{
	zkl_mutex_free(p->ma);
	zkl_mutex_free(p->mb);
	zkl_client_close(p->a);
	zkl_client_close(p->b);
}

/* ---- the tree, seen through a raw handle ---- */

/* For the raw handle and the one that expires a session: their events are not needed. */
static void no_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* The raw handle, connected: after a test restarted the server, the handle is still
 * finding it again, and a request sent meanwhile would fail. */
static zhandle_t *h_raw(void)
{
	if (!raw) {
		zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
		raw = zookeeper_init(h_servers(), no_watcher, 10000, NULL, NULL, 0);
	}
	for (int i = 0; i < 1000 && zoo_state(raw) != ZOO_CONNECTED_STATE; i++)
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

void h_wait_children(const char *path, int n)
{
	for (int i = 0; i < 2000; i++) {
		int k = h_children(path);
		/* An empty container folder may be reaped: gone counts as empty. */
		if (k == n || (n == 0 && k < 0))
			return;
		usleep(5000);
	}
	fail_msg("%s never reached %d children (it has %d)", path, n, h_children(path));
}

void h_wait_participants(zkl_lock *l, size_t n)
{
	size_t k = 0;
	for (int i = 0; i < 2000; i++) {
		zkl_participant *ps;
		int rc = zkl_lock_participants(l, &ps, &k);
		if (rc != 0)
			fail_msg("zkl_lock_participants: %s: %s", zkl_errname(rc), zkl_last_error());
		zkl_participants_free(ps, k);
		if (k == n)
			return;
		usleep(5000);
	}
	fail_msg("the participants never came to %zu (there are %zu)", n, k);
}

void h_node_known(zkl_lock *l, char *buf, size_t size)
{
	for (int i = 0; i < 2000; i++) {
		if (zkl_lock_node(l, buf, size) > 0)
			return;
		usleep(5000);
	}
	fail_msg("the acquire never knew its node: %s", zkl_last_error());
}

void h_child_except(const char *path, const char *except, char *buf, size_t size)
{
	struct String_vector sv = {0};
	int rc = zoo_get_children(h_raw(), path, 0, &sv);
	if (rc != ZOK)
		fail_msg("get_children %s: %s", path, zerror(rc));
	buf[0] = '\0';
	for (int i = 0; i < sv.count; i++)
		if (strcmp(sv.data[i], except) != 0)
			snprintf(buf, size, "%s/%s", path, sv.data[i]);
	deallocate_String_vector(&sv);
	if (buf[0] == '\0')
		fail_msg("%s has no child but %s", path, except);
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

void h_delete(const char *path)
{
	int rc = zoo_delete(h_raw(), path, -1);
	if (rc != ZOK)
		fail_msg("delete %s: %s", path, zerror(rc));
}

void h_delete_both(const char *a, const char *b)
{
	zoo_op_t ops[2];
	zoo_op_result_t results[2];
	zoo_delete_op_init(&ops[0], a, -1);
	zoo_delete_op_init(&ops[1], b, -1);
	int rc = zoo_multi(h_raw(), 2, ops, results);
	if (rc != ZOK)
		fail_msg("delete %s and %s in one transaction: %s", a, b, zerror(rc));
}

int h_get(const char *path, char *buf, int size)
{
	int len = size;
	int rc = zoo_get(h_raw(), path, 0, buf, &len, NULL);
	if (rc != ZOK)
		fail_msg("get %s: %s", path, zerror(rc));
	return len;
}

/* ---- latches and counters ---- */

void h_counter_init(h_counter *k)
{
	pthread_mutex_init(&k->mu, NULL);
	zkl__cond_init(&k->cv);
	k->n = 0;
}

void h_counter_destroy(h_counter *k)
{
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
}

void h_counter_add(h_counter *k, int d)
{
	pthread_mutex_lock(&k->mu);
	k->n += d;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

int h_counter_get(h_counter *k)
{
	pthread_mutex_lock(&k->mu);
	int n = k->n;
	pthread_mutex_unlock(&k->mu);
	return n;
}

static bool reached(h_counter *k, int want, bool exact)
{
	return exact ? k->n == want : k->n >= want;
}

static int counter_wait(h_counter *k, int want, bool exact, int ms)
{
	int64_t deadline = zkl__now_ms() + ms;
	pthread_mutex_lock(&k->mu);
	while (!reached(k, want, exact) && !zkl__cond_wait_until(&k->cv, &k->mu, deadline))
		;
	int ok = reached(k, want, exact);
	pthread_mutex_unlock(&k->mu);
	return ok;
}

int h_counter_wait(h_counter *k, int want, int ms)
{
	return counter_wait(k, want, false, ms);
}

int h_counter_wait_eq(h_counter *k, int want, int ms)
{
	return counter_wait(k, want, true, ms);
}

void h_note_max(int *max, int now)
{
	int old = __atomic_load_n(max, __ATOMIC_SEQ_CST);
	while (now > old && !__atomic_compare_exchange_n(max, &old, now, false, __ATOMIC_SEQ_CST,
	                                                 __ATOMIC_SEQ_CST))
		;
}

/* A latch is a counter waited on until it is 1, kept on a list once its watch may still
 * fire (see h_wait_deleted). */
struct h_latch {
	h_counter k;
	struct h_latch *next;
};

static struct h_latch *pending;

h_latch *h_latch_new(void)
{
	h_latch *l = calloc(1, sizeof *l);
	h_counter_init(&l->k);
	return l;
}

void h_latch_set(h_latch *l)
{
	h_counter_add(&l->k, 1);
}

int h_latch_wait(h_latch *l, int ms)
{
	return h_counter_wait(&l->k, 1, ms);
}

int h_latch_count(h_latch *l)
{
	return h_counter_get(&l->k);
}

void h_latch_free(h_latch *l)
{
	h_counter_destroy(&l->k);
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

/* Whether c has heard that the session of generation gen expired: with seen, once its
 * loop has moved on to a new session; else once the C client said so (its handle's
 * state; with external_loop no loop need have run since). */
/* Whether the client has heard that its session of generation gen expired: the loop
 * moved on from it (seen); or, unseen, its expiry is at least in the loop's inbox (the
 * C client's handle saying so is not enough: its watcher may not have posted it yet). */
static bool expiry_heard(zkl_client *c, uint64_t gen, bool seen)
{
	pthread_mutex_lock(&c->mu);
	bool heard = seen ? c->gen != gen : c->sess->gen != gen || c->sess->expired;
	if (!heard) {
		pthread_mutex_lock(&c->inbox_mu);
		for (struct zkl_msg *m = c->inbox; m && !heard; m = m->next) {
			const struct zkl_session_ev *ev = (const struct zkl_session_ev *)m;
			heard = m->kind == MSG_SESSION && ev->state == ZOO_EXPIRED_SESSION_STATE &&
			        (ev->s == c->sess || (!ev->s && ev->zh == c->sess->zh));
		}
		pthread_mutex_unlock(&c->inbox_mu);
	}
	pthread_mutex_unlock(&c->mu);
	return heard;
}

static void expire(zkl_client *c, bool seen)
{
	pthread_mutex_lock(&c->mu);
	clientid_t cid = *zoo_client_id(c->sess->zh);
	uint64_t gen = c->gen;
	int timeout = zoo_recv_timeout(c->sess->zh);
	pthread_mutex_unlock(&c->mu);
	for (int attempt = 0; attempt < 10; attempt++) {
		zhandle_t *t = zookeeper_init2(h_servers(), no_watcher, timeout, &cid, NULL, 0,
		                               NULL);
		for (int i = 0; i < 500 && zoo_state(t) != ZOO_CONNECTED_STATE; i++)
			usleep(2000);
		usleep(30000);
		for (int i = 0; i < 200 && zoo_state(t) != ZOO_CONNECTED_STATE; i++)
			usleep(1000);
		zookeeper_close(t);
		for (int i = 0; i < 200; i++) {
			if (expiry_heard(c, gen, seen))
				return;
			usleep(10000);
		}
	}
	fail_msg("could not expire the session");
}

void h_expire(zkl_client *c)
{
	expire(c, true);
}

void h_expire_unseen(zkl_client *c)
{
	expire(c, false);
}

bool h_server_driven(void)
{
	const char *s = getenv("ZKL_TEST_ZK_SCRIPT");
	const char *d = getenv("ZKL_TEST_ZK_DIR");
	return s && *s && d && *d;
}

void h_server(const char *verb)
{
	if (!h_server_driven())
		fail_msg("ZKL_TEST_ZK_SCRIPT / ZKL_TEST_ZK_DIR not set (run through tests/with-zk)");
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s' %s '%s' >/dev/null", getenv("ZKL_TEST_ZK_SCRIPT"), verb,
	         getenv("ZKL_TEST_ZK_DIR"));
	if (system(cmd) != 0)
		fail_msg("%s failed", cmd);
}

/* ---- threads ---- */

int h_in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t th;
	void *ret = NULL;
	if (pthread_create(&th, NULL, fn, arg) != 0)
		fail_msg("cannot start a thread");
	pthread_join(th, &ret);
	return (int)(intptr_t)ret;
}

void h_threads(int n, void *(*fn)(void *), void *arg)
{
	pthread_t *th = calloc((size_t)n, sizeof *th);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, fn, arg);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
}

static void *acquire_thread(void *arg)
{
	h_acq *a = arg;
	a->rc = zkl_lock_acquire(a->l, 30000);
	a->held = zkl_lock_is_held(a->l);
	h_latch_set(a->done);
	if (a->rc == 0) {
		if (a->release)
			h_latch_wait(a->release, 60000);
		a->release_rc = zkl_lock_release(a->l);
	}
	return NULL;
}

void h_acq_start(h_acq *a, zkl_lock *l, bool hold)
{
	*a = (h_acq){ .l = l, .done = h_latch_new(), .release = hold ? h_latch_new() : NULL };
	pthread_create(&a->th, NULL, acquire_thread, a);
}

void h_acq_join(h_acq *a)
{
	if (a->release)
		h_latch_set(a->release);
	pthread_join(a->th, NULL);
	h_latch_free(a->done);
	if (a->release)
		h_latch_free(a->release);
	a->done = a->release = NULL;
}

void h_on_lost(zkl_lock *l, int reason, void *latch)
{
	(void)l;
	if (reason == ZKL_ELOST || reason == ZKL_EDELETED)
		h_latch_set(latch);
}

/* ---- mutual exclusion under contention ---- */

static void excl_error(h_excl *e)
{
	__atomic_add_fetch(&e->errors, 1, __ATOMIC_SEQ_CST);
}

void h_excl_section(h_excl *e)
{
	h_note_max(&e->max_inside, __atomic_add_fetch(&e->inside, 1, __ATOMIC_SEQ_CST));
	/* A read-modify-write that two holders at once would corrupt. */
	int t = e->total;
	sched_yield();
	e->total = t + 1;
	__atomic_sub_fetch(&e->inside, 1, __ATOMIC_SEQ_CST);
}

void *h_excl_thread(void *arg)
{
	h_excl *e = arg;
	zkl_client *c = h_client(0);
	zkl_mutex *m = NULL;
	zkl_semaphore_mutex *s = NULL;
	int rc = e->semaphore_mutex ? zkl_semaphore_mutex_new(&s, c, e->path)
	                            : zkl_mutex_new(&m, c, e->path);
	if (rc != 0) {
		excl_error(e);
		zkl_client_close(c);
		return NULL;
	}
	zkl_lock *l = s ? zkl_semaphore_mutex_lock(s) : zkl_mutex_lock(m);
	for (int i = 0; i < e->cycles; i++) {
		rc = zkl_lock_acquire(l, 30000);
		if (rc != 0) {
			excl_error(e);
			continue;
		}
		h_excl_section(e);
		rc = zkl_lock_release(l);
		if (rc != 0)
			excl_error(e);
	}
	zkl_semaphore_mutex_free(s);
	zkl_mutex_free(m);
	zkl_client_close(c);
	return NULL;
}

void h_filter(void)
{
	const char *f = getenv("ZKL_TEST_FILTER");
	if (f && *f)
		cmocka_set_test_filter(f);
}

/* ---- cmocka ---- */

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

void h_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct h_acquire *w = data;
	w->rc = rc;
	h_counter_add(&w->done, 1);
}
