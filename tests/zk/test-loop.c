/* The application's own loop (external_loop) on a real ZooKeeper server: an epoll loop on
 * the test's thread runs every callback; blocking calls work from other threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "harness.h"

/* An application: a client without a loop thread, and an epoll set with its descriptor. */
struct app {
	zkl_client *c;
	int ep;
	pthread_t self;
	atomic_int foreign;   /* callbacks that ran on another thread than the loop's */
};

static void app_open(struct app *a, int session_timeout_ms)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = session_timeout_ms > 0 ? session_timeout_ms : 4000;
	o.external_loop = true;
	CHECK_OK(zkl_client_open(&a->c, &o));
	a->self = pthread_self();
	atomic_init(&a->foreign, 0);
	a->ep = epoll_create1(EPOLL_CLOEXEC);
	assert_true(a->ep >= 0);
	int fd = zkl_client_loop_fd(a->c);
	assert_true(fd >= 0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	assert_int_equal(epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev), 0);
}

static void app_close(struct app *a)
{
	assert_int_equal(epoll_ctl(a->ep, EPOLL_CTL_DEL, zkl_client_loop_fd(a->c), NULL), 0);
	close(a->ep);
	zkl_client_close(a->c);
	assert_int_equal(atomic_load(&a->foreign), 0);
}

static void app_note_thread(struct app *a)
{
	if (!pthread_equal(pthread_self(), a->self))
		atomic_fetch_add(&a->foreign, 1);
}

/* Runs the loop until *count reaches want; fails the test after ms. */
static void app_run(struct app *a, atomic_int *count, int want, int ms)
{
	int64_t deadline = zkl_monotonic_ms() + ms;
	while (atomic_load(count) < want) {
		int64_t left = deadline - zkl_monotonic_ms();
		assert_true(left > 0);
		int t = zkl_client_loop_timeout(a->c);
		assert_true(t >= -1);
		if (t < 0 || t > left)
			t = (int)left;
		struct epoll_event ev;
		int n = epoll_wait(a->ep, &ev, 1, t);
		assert_true(n >= 0);
		CHECK_OK(zkl_client_process(a->c));
	}
}

/* Runs the loop until path has n children, or with fewer set fewer than n (polling the
 * server: the count is the event), at most about ten seconds. */
static void app_run_until_children(struct app *a, const char *path, int n, bool fewer)
{
	for (int i = 0; fewer ? h_children(path) >= n : h_children(path) < n; i++) {
		assert_true(i < 1000);
		int t = zkl_client_loop_timeout(a->c);
		struct epoll_event ev;
		assert_true(epoll_wait(a->ep, &ev, 1, t < 0 || t > 10 ? 10 : t) >= 0);
		CHECK_OK(zkl_client_process(a->c));
	}
}

static void test_contract(void **state)
{
	(void)state;
	zkl_client *threaded = h_client(0);
	CHECK_RC(ZKL_EINVAL, zkl_client_loop_fd(threaded));
	CHECK_RC(ZKL_EINVAL, zkl_client_loop_timeout(threaded));
	CHECK_RC(ZKL_EINVAL, zkl_client_process(threaded));
	assert_non_null(strstr(zkl_last_error(), "external_loop"));
	zkl_client_close(threaded);
	CHECK_RC(ZKL_EINVAL, zkl_client_loop_fd(NULL));
	CHECK_RC(ZKL_EINVAL, zkl_client_process(NULL));

	struct app a;
	app_open(&a, 0);
	/* Heartbeats and liveness are timers: there is always a next one. */
	int t = zkl_client_loop_timeout(a.c);
	assert_true(t >= 0 && t <= 10000);
	CHECK_OK(zkl_client_process(a.c));
	assert_int_equal(zkl_client_state(a.c), ZKL_STATE_CONNECTED);
	app_close(&a);
}

enum { PATHS = 10, PER_PATH = 10 };

struct contender {
	struct app *app;
	zkl_mutex *m;
	int path;
	atomic_int calls;
	int rc, release_rc, process_rc, blocking_rc;
};

static atomic_int inside[PATHS], crowded, done;

static void granted(zkl_lock *l, int rc, void *data)
{
	struct contender *k = data;
	app_note_thread(k->app);
	k->rc = rc;
	k->process_rc = zkl_client_process(k->app->c); /* not from a callback */
	k->blocking_rc = zkl_lock_acquire(l, 1000);     /* would wait for itself */
	if (rc == 0) {
		if (atomic_fetch_add(&inside[k->path], 1) != 0)
			atomic_fetch_add(&crowded, 1);
		atomic_fetch_sub(&inside[k->path], 1);
		k->release_rc = zkl_lock_release(l);
	}
	atomic_fetch_add(&k->calls, 1);
	atomic_fetch_add(&done, 1);
}

/* 100 acquisitions pending at once on 10 paths, every callback on the loop's thread. */
static void test_hundred_on_the_application_loop(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 0);
	atomic_store(&crowded, 0);
	atomic_store(&done, 0);
	const char *paths[PATHS];
	for (int p = 0; p < PATHS; p++)
		paths[p] = strdup(h_path("app-loop"));
	struct contender *k = calloc(PATHS * PER_PATH, sizeof *k);
	assert_non_null(k);
	for (int i = 0; i < PATHS * PER_PATH; i++) {
		k[i].app = &a;
		k[i].path = i % PATHS;
		CHECK_OK(zkl_mutex_new(&k[i].m, a.c, paths[k[i].path]));
		CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(k[i].m), -1, granted, &k[i]));
	}
	/* Nothing runs until the application runs the loop. */
	assert_int_equal(atomic_load(&done), 0);
	app_run(&a, &done, PATHS * PER_PATH, 60000);
	for (int i = 0; i < PATHS * PER_PATH; i++) {
		CHECK_OK(k[i].rc);
		CHECK_OK(k[i].release_rc);
		CHECK_RC(ZKL_EDEADLK, k[i].process_rc);
		CHECK_RC(ZKL_EDEADLK, k[i].blocking_rc);
		assert_int_equal(atomic_load(&k[i].calls), 1);
	}
	assert_int_equal(atomic_load(&crowded), 0);
	for (int p = 0; p < PATHS; p++)
		h_wait_children(paths[p], 0);
	for (int i = 0; i < PATHS * PER_PATH; i++)
		zkl_mutex_free(k[i].m);
	for (int p = 0; p < PATHS; p++)
		free((char *)paths[p]);
	free(k);
	app_close(&a);
}

struct blocker {
	zkl_lock *l;
	int rc, release_rc;
	atomic_int finished;
};

static void *block_and_release(void *arg)
{
	struct blocker *b = arg;
	b->rc = zkl_lock_acquire(b->l, 20000);
	if (b->rc == 0)
		b->release_rc = zkl_lock_release(b->l);
	atomic_store(&b->finished, 1);
	return NULL;
}

/* A blocking acquire from another thread is run by the application's loop; on the loop's
 * own thread it is refused at once. */
static void test_blocking_from_other_threads(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a.c, h_path("app-block")));
	struct blocker b = {.l = zkl_mutex_lock(m)};
	CHECK_OK(zkl_client_process(a.c)); /* this thread is now the loop's */
	CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(b.l, 1000));
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, block_and_release, &b), 0);
	app_run(&a, &b.finished, 1, 30000);
	pthread_join(th, NULL);
	CHECK_OK(b.rc);
	CHECK_OK(b.release_rc);
	zkl_mutex_free(m);
	app_close(&a);
}

struct lost {
	struct app *app;
	atomic_int acquired, calls, lost_state;
	int acquire_rc, reason;
};

static void keep(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct lost *k = data;
	app_note_thread(k->app);
	k->acquire_rc = rc;
	atomic_fetch_add(&k->acquired, 1);
}

static void on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	struct lost *k = data;
	app_note_thread(k->app);
	k->reason = reason;
	atomic_fetch_add(&k->calls, 1);
}

static void on_state(zkl_client *c, zkl_state st, void *data)
{
	(void)c;
	struct lost *k = data;
	app_note_thread(k->app);
	if (st == ZKL_STATE_LOST)
		atomic_fetch_add(&k->lost_state, 1);
}

/* A thread that waits in a blocking call runs its own request, so it is served while the
 * application runs no loop at all: a blocking acquire queued behind another client's
 * hold is granted when that hold goes, and the participants' listing and a confirmed
 * release work the same way. (If they waited for the application's loop, which never
 * runs here, the acquire would time out.) */
struct unlooped {
	zkl_lock *l;
	int rc, listed, n, release_rc;
	atomic_int finished;
};

static void *acquire_unlooped(void *arg)
{
	struct unlooped *u = arg;
	u->rc = zkl_lock_acquire(u->l, 20000);
	zkl_participant *p = NULL;
	size_t n = 0;
	u->listed = zkl_lock_participants(u->l, &p, &n);
	u->n = (int)n;
	zkl_participants_free(p, n);
	u->release_rc = zkl_lock_release(u->l);
	atomic_store(&u->finished, 1);
	return NULL;
}

/* A client with external_loop whose loop nobody runs: blocking calls must work by
 * themselves. Releases are confirmed, so that a release returns with the node gone. */
static zkl_client *unlooped_open(void)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = h_servers();
	o.session_timeout_ms = 4000;
	o.external_loop = true;
	o.confirm_release = true;
	zkl_client *c;
	CHECK_OK(zkl_client_open(&c, &o));
	return c;
}

static void test_blocking_without_the_loop(void **state)
{
	(void)state;
	zkl_client *c = unlooped_open();
	zkl_client *other = h_client(0);
	const char *path = h_path("unlooped");
	zkl_mutex *mine, *theirs;
	CHECK_OK(zkl_mutex_new(&mine, c, path));
	CHECK_OK(zkl_mutex_new(&theirs, other, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(theirs), -1));
	struct unlooped u = {.l = zkl_mutex_lock(mine)};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, acquire_unlooped, &u), 0);
	h_wait_children(path, 2); /* queued behind the other client */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(theirs)));
	pthread_join(th, NULL);
	CHECK_OK(u.rc);
	CHECK_OK(u.listed);
	assert_int_equal(u.n, 1);
	CHECK_OK(u.release_rc);
	assert_true(h_children(path) <= 0); /* confirmed: gone before release returned (an
	                                     * empty folder may be reaped too) */
	/* On the loop's thread between two zkl_client_process() calls, nothing waits for the
	 * server: a listing and a blocking acquire are refused at once. */
	CHECK_OK(zkl_client_process(c));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(theirs), -1));
	zkl_participant *p = NULL;
	size_t n = 0;
	CHECK_RC(ZKL_EDEADLK, zkl_lock_participants(zkl_mutex_lock(mine), &p, &n));
	assert_non_null(strstr(zkl_last_error(), "loop"));
	CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(zkl_mutex_lock(mine), 1000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(theirs)));
	zkl_mutex_free(mine);
	zkl_mutex_free(theirs);
	zkl_client_close(other);
	zkl_client_close(c);
}

/* The same for a blocking multi-lock, whose members are asynchronous acquisitions one
 * after the other: the waiting thread runs each itself (the semaphore member's gate and
 * lease too), so the whole is granted while the application runs no loop at all. */
struct unlooped_multi {
	zkl_multilock *ml;
	int rc, release_rc;
	bool held_all;
};

static void *multi_unlooped(void *arg)
{
	struct unlooped_multi *u = arg;
	u->rc = zkl_multilock_acquire(u->ml, 20000);
	u->held_all = zkl_multilock_is_held(u->ml);
	u->release_rc = zkl_multilock_release(u->ml);
	return NULL;
}

static void test_blocking_multilock_without_the_loop(void **state)
{
	(void)state;
	zkl_client *c = unlooped_open();
	zkl_client *other = h_client(0);
	const char *pa = h_path("unlooped-multi-a");
	const char *pb = h_path("unlooped-multi-b");
	const char *ps = h_path("unlooped-multi-sem");
	zkl_mutex *a, *b, *theirs;
	zkl_semaphore *s;
	CHECK_OK(zkl_mutex_new(&a, c, pa));
	CHECK_OK(zkl_mutex_new(&b, c, pb));
	CHECK_OK(zkl_semaphore_new(&s, c, ps, 1));
	CHECK_OK(zkl_mutex_new(&theirs, other, pb));
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(a)));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(b)));
	CHECK_OK(zkl_multilock_add(ml, zkl_semaphore_lock(s)));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(theirs), -1));
	struct unlooped_multi u = {.ml = ml};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, multi_unlooped, &u), 0);
	h_wait_children(pb, 2); /* a taken, b queued behind the other client */
	assert_int_equal(h_children(pa), 1);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(theirs)));
	pthread_join(th, NULL);
	CHECK_OK(u.rc);
	assert_true(u.held_all);
	CHECK_OK(u.release_rc);
	/* confirmed: every member's node gone before the release returned */
	assert_true(h_children(pa) <= 0);
	assert_true(h_children(pb) <= 0);
	assert_true(h_children(h_sub(ps, "leases")) <= 0);
	zkl_multilock_free(ml);
	zkl_semaphore_free(s);
	zkl_mutex_free(a);
	zkl_mutex_free(b);
	zkl_mutex_free(theirs);
	zkl_client_close(other);
	zkl_client_close(c);
}

struct expirer {
	zkl_client *c;
	atomic_int finished;
};

static void *expire_thread(void *arg)
{
	struct expirer *e = arg;
	h_expire(e->c); /* returns once the client has seen it: the loop must run */
	atomic_store(&e->finished, 1);
	return NULL;
}

/* The session expires: the lost callback and the state listener run on the loop. */
static void test_lost_on_the_application_loop(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 4000);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a.c, h_path("app-lost")));
	zkl_lock *l = zkl_mutex_lock(m);
	struct lost k = {.app = &a};
	CHECK_OK(zkl_lock_on_lost(l, on_lost, &k));
	CHECK_OK(zkl_client_add_listener(a.c, on_state, &k));
	CHECK_OK(zkl_lock_acquire_async(l, 5000, keep, &k));
	app_run(&a, &k.acquired, 1, 10000);
	CHECK_OK(k.acquire_rc);
	assert_true(zkl_lock_is_held(l));
	struct expirer e = {.c = a.c};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, expire_thread, &e), 0);
	app_run(&a, &e.finished, 1, 30000);
	pthread_join(th, NULL);
	app_run(&a, &k.calls, 1, 20000);
	/* Closed from elsewhere, the session's nodes go first: the watch on ours may tell
	 * the loss (ZKL_EDELETED) before the session's end does (ZKL_ELOST). */
	assert_true(k.reason == ZKL_ELOST || k.reason == ZKL_EDELETED);
	app_run(&a, &k.lost_state, 1, 20000);
	assert_false(zkl_lock_is_held(l));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(l));
	assert_int_equal(atomic_load(&k.calls), 1);
	CHECK_OK(zkl_client_remove_listener(a.c, on_state, &k));
	zkl_mutex_free(m);
	app_close(&a);
}

/* Freeing a handle whose asynchronous acquire waits, on the loop's thread outside
 * zkl_client_process(): the free returns at once, the callback never runs, and the
 * acquire withdraws its node by itself as the loop runs. */
static void test_free_while_waiting(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 0);
	const char *path = h_path("app-free");
	zkl_client *other = h_client(0);
	zkl_mutex *holder, *m;
	CHECK_OK(zkl_mutex_new(&holder, other, path));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(holder), 5000));
	CHECK_OK(zkl_mutex_new(&m, a.c, path));
	struct lost k = {.app = &a};
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), -1, keep, &k));
	app_run_until_children(&a, path, 2, false);
	zkl_mutex_free(m);
	app_run_until_children(&a, path, 2, true);
	assert_int_equal(h_children(path), 1);
	assert_int_equal(atomic_load(&k.acquired), 0);
	zkl_mutex_free(holder);
	zkl_client_close(other);
	app_close(&a);
}

/* ---- one way to learn of a loss: the lost callback, also when a release finds it ---- */

/* A hold of each kind whose release can find the loss first: its handles and view. */
struct kind_hold {
	const char *name;
	zkl_mutex *m, *mb;
	zkl_rwlock *rw;
	zkl_semaphore *sem;
	zkl_semaphore_mutex *sm;
	zkl_multilock *ml;
	zkl_lock *l;
};

enum { K_MUTEX, K_WRITE, K_LEASE, K_SEMMUTEX, K_MULTI, NKINDS };

static void kind_open(struct kind_hold *k, int kind, zkl_client *c)
{
	memset(k, 0, sizeof *k);
	const char *path = h_path("lost-once");
	switch (kind) {
	case K_MUTEX:
		k->name = "mutex";
		CHECK_OK(zkl_mutex_new(&k->m, c, path));
		k->l = zkl_mutex_lock(k->m);
		break;
	case K_WRITE:
		k->name = "write lock";
		CHECK_OK(zkl_rwlock_new(&k->rw, c, path));
		k->l = zkl_mutex_lock(zkl_rwlock_write(k->rw));
		break;
	case K_LEASE:
		k->name = "semaphore lease";
		CHECK_OK(zkl_semaphore_new(&k->sem, c, path, 2));
		k->l = zkl_semaphore_lock(k->sem);
		break;
	case K_SEMMUTEX:
		k->name = "semaphore-mutex";
		CHECK_OK(zkl_semaphore_mutex_new(&k->sm, c, path));
		k->l = zkl_semaphore_mutex_lock(k->sm);
		break;
	default:
		k->name = "multi-lock";
		CHECK_OK(zkl_mutex_new(&k->m, c, path));
		CHECK_OK(zkl_mutex_new(&k->mb, c, h_path("lost-once-b")));
		CHECK_OK(zkl_multilock_new(&k->ml, ZKL_MULTILOCK_CANONICAL));
		CHECK_OK(zkl_multilock_add(k->ml, zkl_mutex_lock(k->m)));
		CHECK_OK(zkl_multilock_add(k->ml, zkl_mutex_lock(k->mb)));
		k->l = zkl_multilock_lock(k->ml);
		break;
	}
}

static void kind_close(struct kind_hold *k)
{
	zkl_multilock_free(k->ml);
	zkl_mutex_free(k->m);
	zkl_mutex_free(k->mb);
	zkl_rwlock_free(k->rw);
	zkl_semaphore_free(k->sem);
	zkl_semaphore_mutex_free(k->sm);
}

struct releaser {
	zkl_lock *l;
	struct lost *k;
	int rc, calls_at_return;
	atomic_int finished;
};

static void *release_thread(void *arg)
{
	struct releaser *r = arg;
	r->rc = zkl_lock_release(r->l);
	r->calls_at_return = atomic_load(&r->k->calls);
	atomic_store(&r->finished, 1);
	return NULL;
}

/* Takes k's lock on the application's loop and expires the session behind the loop's
 * back: the C client has said so, the loop has not looked yet. */
static void hold_then_expire(struct app *a, struct kind_hold *k, struct lost *w)
{
	memset(w, 0, sizeof *w);
	w->app = a;
	CHECK_OK(zkl_lock_on_lost(k->l, on_lost, w));
	CHECK_OK(zkl_lock_acquire_async(k->l, 10000, keep, w));
	app_run(a, &w->acquired, 1, 20000);
	CHECK_OK(w->acquire_rc);
	h_expire_unseen(a->c);
	assert_int_equal(atomic_load(&w->calls), 0);
}

/* Whichever finds a loss first, the loop or a release, the lost callback runs once for
 * it, before the release returns ZKL_ELOST: a release on the loop's thread (it calls it),
 * and one from another thread while the loop runs (it waits for the loop to). Then the
 * loop, which has the expiry to look at still, says nothing more. */
static void test_lost_told_once_when_release_finds_it(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 4000);
	for (int kind = 0; kind < NKINDS; kind++) {
		struct kind_hold k;
		kind_open(&k, kind, a.c);
		struct lost w;
		hold_then_expire(&a, &k, &w);
		CHECK_RC(ZKL_ELOST, zkl_lock_release(k.l));
		if (atomic_load(&w.calls) != 1)
			fail_msg("%s: the lost callback ran %d times before the release on the loop "
			         "returned", k.name, atomic_load(&w.calls));
		assert_true(w.reason == ZKL_ELOST || w.reason == ZKL_EDELETED);
		for (int i = 0; i < 50; i++)
			CHECK_OK(zkl_client_process(a.c));
		assert_int_equal(atomic_load(&w.calls), 1);

		hold_then_expire(&a, &k, &w);
		struct releaser r = {.l = k.l, .k = &w};
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, release_thread, &r), 0);
		app_run(&a, &r.finished, 1, 20000);
		pthread_join(th, NULL);
		CHECK_RC(ZKL_ELOST, r.rc);
		if (r.calls_at_return != 1)
			fail_msg("%s: the lost callback ran %d times before the release from another "
			         "thread returned", k.name, r.calls_at_return);
		for (int i = 0; i < 50; i++)
			CHECK_OK(zkl_client_process(a.c));
		assert_int_equal(atomic_load(&w.calls), 1);
		kind_close(&k);
		print_message("%s: told once, by the lost callback, both ways\n", k.name);
	}
	app_close(&a);
}

/* A thread that takes k's lock itself (blocking: it drives its own acquisition), then,
 * told to (go), releases it as release_thread() does. */
struct owner_thread {
	struct releaser r;
	atomic_int acquired;
	h_latch *go;
	int acquire_rc;
};

static void *owner_main(void *arg)
{
	struct owner_thread *o = arg;
	o->acquire_rc = zkl_lock_acquire(o->r.l, 10000);
	atomic_store(&o->acquired, 1);
	h_latch_wait(o->go, 60000);
	return release_thread(&o->r);
}

/* With external_loop an expiry the C client has told waits in the inbox until a thread
 * drives the loop. A release from another thread meanwhile (its owner's, whose delete it
 * sends itself) applies the inbox first: it finds the hold lost, and waits for the loop
 * to tell the lost callback before it says ZKL_ELOST; it does not end before the loop
 * runs, as a release that had missed the expiry would. */
static void test_release_elsewhere_applies_the_expiry(void **state)
{
	(void)state;
	struct app a;
	app_open(&a, 4000);
	for (int kind = 0; kind < K_MULTI; kind++) {
		struct kind_hold k;
		kind_open(&k, kind, a.c);
		struct lost w = {.app = &a};
		CHECK_OK(zkl_lock_on_lost(k.l, on_lost, &w));
		struct owner_thread o = {.r = {.l = k.l, .k = &w}, .go = h_latch_new()};
		pthread_t th;
		assert_int_equal(pthread_create(&th, NULL, owner_main, &o), 0);
		app_run(&a, &o.acquired, 1, 20000);
		CHECK_OK(o.acquire_rc);
		h_expire_unseen(a.c);
		h_latch_set(o.go);
		/* The loop does not run for half a second: the release must wait for it. */
		const int64_t until = zkl_monotonic_ms() + 500;
		while (!atomic_load(&o.r.finished) && zkl_monotonic_ms() < until)
			usleep(1000);
		if (atomic_load(&o.r.finished))
			fail_msg("%s: the release ended (%s) before the application's loop ran: it "
			         "did not see the expiry the C client had told", k.name,
			         zkl_strerror(o.r.rc));
		app_run(&a, &o.r.finished, 1, 20000);
		pthread_join(th, NULL);
		h_latch_free(o.go);
		CHECK_RC(ZKL_ELOST, o.r.rc);
		assert_int_equal(o.r.calls_at_return, 1);
		assert_int_equal(atomic_load(&w.calls), 1);
		kind_close(&k);
		print_message("%s: the release saw the expiry\n", k.name);
	}
	app_close(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_contract),
		cmocka_unit_test(test_hundred_on_the_application_loop),
		cmocka_unit_test(test_blocking_from_other_threads),
		cmocka_unit_test(test_blocking_without_the_loop),
		cmocka_unit_test(test_blocking_multilock_without_the_loop),
		cmocka_unit_test(test_lost_on_the_application_loop),
		cmocka_unit_test(test_free_while_waiting),
		cmocka_unit_test(test_lost_told_once_when_release_finds_it),
		cmocka_unit_test(test_release_elsewhere_applies_the_expiry),
	};
	return H_RUN(tests);
}
