/* zkl_rwlock on a real ZooKeeper server (run through tests/with-zk), after Curator's
 * TestInterProcessReadWriteLock. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* ---- helpers ---- */

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Whether name is "_c_<36 chars of uuid>-<marker><10 digits>". */
static int curator_name(const char *name, const char *marker)
{
	if (strncmp(name, "_c_", 3) != 0 || strlen(name) != 3 + 36 + 1 + strlen(marker) + 10)
		return 0;
	for (int i = 3; i < 3 + 36; i++)
		if (!strchr("0123456789abcdef-", name[i]))
			return 0;
	if (name[3 + 36] != '-' || strncmp(name + 3 + 36 + 1, marker, strlen(marker)) != 0)
		return 0;
	for (const char *d = name + 3 + 36 + 1 + strlen(marker); *d; d++)
		if (*d < '0' || *d > '9')
			return 0;
	return 1;
}

/* Clients a and b (and x, with three) with a handle each on one read-write lock, and the
 * views of its halves: where most tests start. */
struct rws {
	const char *path;
	zkl_client *a, *b, *x;
	zkl_rwlock *ra, *rb, *rx;
	struct { zkl_lock *read, *write; } la, lb, lx; /* of ra, rb, rx */
};

static void rws_views(zkl_rwlock *rw, zkl_lock **read, zkl_lock **write)
{
	*read = zkl_mutex_lock(zkl_rwlock_read(rw));
	*write = zkl_mutex_lock(zkl_rwlock_write(rw));
}

static void rws_open(struct rws *t, const char *test, bool three)
{
	*t = (struct rws){ .path = h_path(test) };
	t->a = h_client(0);
	t->b = h_client(0);
	if (three)
		t->x = h_client(0);
	CHECK_OK(zkl_rwlock_new(&t->ra, t->a, t->path));
	CHECK_OK(zkl_rwlock_new(&t->rb, t->b, t->path));
	if (three)
		CHECK_OK(zkl_rwlock_new(&t->rx, t->x, t->path));
	rws_views(t->ra, &t->la.read, &t->la.write);
	rws_views(t->rb, &t->lb.read, &t->lb.write);
	if (three)
		rws_views(t->rx, &t->lx.read, &t->lx.write);
}

static void rws_close(struct rws *t)
{
	zkl_rwlock_free(t->ra);
	zkl_rwlock_free(t->rb);
	zkl_rwlock_free(t->rx);
	zkl_client_close(t->a);
	zkl_client_close(t->b);
	zkl_client_close(t->x);
}

/* ---- basic: 8 clients x 100 operations, 10% writes ---- */

struct basic {
	const char *path;
	int readers, writers;   /* inside, changed atomically */
	int max_readers;
	int violations;
	int errors;
	int reads, writes;
};

static void *basic_thread(void *arg)
{
	struct basic *b = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self() ^ (unsigned)getpid();
	zkl_client *c = h_client(0);
	zkl_rwlock *rw;
	if (zkl_rwlock_new(&rw, c, b->path) != 0) {
		__atomic_add_fetch(&b->errors, 1, __ATOMIC_SEQ_CST);
		zkl_client_close(c);
		return NULL;
	}
	for (int i = 0; i < 100; i++) {
		bool write = rand_r(&seed) % 10 == 0;
		zkl_lock *l = zkl_mutex_lock(write ? zkl_rwlock_write(rw) : zkl_rwlock_read(rw));
		if (zkl_lock_acquire(l, 30000) != 0) {
			__atomic_add_fetch(&b->errors, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (write) {
			int w = __atomic_add_fetch(&b->writers, 1, __ATOMIC_SEQ_CST);
			if (w != 1 || __atomic_load_n(&b->readers, __ATOMIC_SEQ_CST) != 0)
				__atomic_add_fetch(&b->violations, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&b->writes, 1, __ATOMIC_SEQ_CST);
		} else {
			int r = __atomic_add_fetch(&b->readers, 1, __ATOMIC_SEQ_CST);
			h_note_max(&b->max_readers, r);
			if (__atomic_load_n(&b->writers, __ATOMIC_SEQ_CST) != 0)
				__atomic_add_fetch(&b->violations, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&b->reads, 1, __ATOMIC_SEQ_CST);
		}
		/* The work: long enough for readers to meet. */
		usleep(500 + rand_r(&seed) % 2000);
		if (write) {
			if (__atomic_load_n(&b->readers, __ATOMIC_SEQ_CST) != 0 ||
			    __atomic_load_n(&b->writers, __ATOMIC_SEQ_CST) != 1)
				__atomic_add_fetch(&b->violations, 1, __ATOMIC_SEQ_CST);
			__atomic_sub_fetch(&b->writers, 1, __ATOMIC_SEQ_CST);
		} else {
			if (__atomic_load_n(&b->writers, __ATOMIC_SEQ_CST) != 0)
				__atomic_add_fetch(&b->violations, 1, __ATOMIC_SEQ_CST);
			__atomic_sub_fetch(&b->readers, 1, __ATOMIC_SEQ_CST);
		}
		if (zkl_lock_release(l) != 0)
			__atomic_add_fetch(&b->errors, 1, __ATOMIC_SEQ_CST);
	}
	zkl_rwlock_free(rw);
	zkl_client_close(c);
	return NULL;
}

static void test_basic(void **state)
{
	(void)state;
	struct basic b = { .path = h_path("rw-basic") };
	h_threads(8, basic_thread, &b);
	assert_int_equal(b.errors, 0);
	assert_int_equal(b.violations, 0);
	assert_int_equal(b.reads + b.writes, 800);
	assert_true(b.writes > 0);
	assert_true(b.max_readers > 1);
	assert_true(h_children(b.path) <= 0);
}

/* ---- 20 readers hold while 8 writers queue: participants ---- */

struct party {
	zkl_client *c;
	const char *path;
	bool write;
	int rc;
	h_counter *held;
	h_latch *release;
};

static void *party_thread(void *arg)
{
	struct party *p = arg;
	zkl_rwlock *rw;
	p->rc = zkl_rwlock_new(&rw, p->c, p->path);
	if (p->rc != 0)
		return NULL;
	zkl_lock *l = zkl_mutex_lock(p->write ? zkl_rwlock_write(rw) : zkl_rwlock_read(rw));
	p->rc = zkl_lock_acquire(l, 30000);
	if (p->rc == 0) {
		h_counter_add(p->held, 1);
		if (p->release)
			h_latch_wait(p->release, 60000);
		p->rc = zkl_lock_release(l);
	}
	zkl_rwlock_free(rw);
	return NULL;
}

static void test_participants(void **state)
{
	(void)state;
	enum { R = 20, W = 8, NC = 4 };
	const char *path = h_path("rw-participants");
	zkl_client *cs[NC];
	for (int i = 0; i < NC; i++)
		cs[i] = h_client(0);
	/* static: the threads must not point into a frame that a failed assertion left */
	static h_counter readers, writers;
	h_counter_init(&readers);
	h_counter_init(&writers);
	h_latch *release = h_latch_new();
	static struct party ps[R + W];
	static pthread_t th[R + W];
	for (int i = 0; i < R; i++) {
		ps[i] = (struct party){ cs[i % NC], path, false, -1, &readers, release };
		pthread_create(&th[i], NULL, party_thread, &ps[i]);
	}
	assert_true(h_counter_wait(&readers, R, 20000));
	for (int i = R; i < R + W; i++) {
		ps[i] = (struct party){ cs[i % NC], path, true, -1, &writers, NULL };
		pthread_create(&th[i], NULL, party_thread, &ps[i]);
	}
	h_wait_children(path, R + W);
	assert_int_equal(h_counter_get(&writers), 0);

	zkl_client *q = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, q, path));
	for (int half = 0; half < 2; half++) {
		zkl_lock *l = zkl_mutex_lock(half ? zkl_rwlock_write(rw) : zkl_rwlock_read(rw));
		zkl_participant *pl;
		size_t n;
		CHECK_OK(zkl_lock_participants(l, &pl, &n));
		assert_int_equal(n, R + W);
		int reads = 0, writes = 0, holders = 0;
		for (size_t i = 0; i < n; i++) {
			const char *name = base_name(pl[i].path);
			if (strstr(name, "__READ__")) {
				reads++;
				assert_true(curator_name(name, "__READ__"));
				assert_true(pl[i].holder);
				assert_true(i < R); /* queue order: the holders first */
			}
			if (strstr(name, "__WRIT__")) {
				writes++;
				assert_true(curator_name(name, "__WRIT__"));
				assert_false(pl[i].holder);
			}
			if (pl[i].holder)
				holders++;
			if (i > 0)
				assert_true(pl[i].sequence > pl[i - 1].sequence);
		}
		assert_int_equal(reads, R);
		assert_int_equal(writes, W);
		assert_int_equal(holders, R);
		zkl_participants_free(pl, n);
	}
	h_latch_set(release);
	for (int i = 0; i < R + W; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < R + W; i++)
		CHECK_OK(ps[i].rc);
	assert_int_equal(h_counter_get(&writers), W);
	assert_true(h_children(path) <= 0);
	zkl_rwlock_free(rw);
	zkl_client_close(q);
	for (int i = 0; i < NC; i++)
		zkl_client_close(cs[i]);
	h_latch_free(release);
	h_counter_destroy(&readers);
	h_counter_destroy(&writers);
}

/* ---- downgrade: write -> read -> release write -> release read ---- */

static void test_downgrade(void **state)
{
	(void)state;
	const char *path = h_path("rw-downgrade");
	zkl_client *c = h_client(0), *o = h_client(0);
	zkl_rwlock *rw, *other;
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	CHECK_OK(zkl_rwlock_new(&other, o, path));
	zkl_lock *other_r = zkl_mutex_lock(zkl_rwlock_read(other));
	zkl_lock *other_w = zkl_mutex_lock(zkl_rwlock_write(other));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw));
	CHECK_OK(zkl_lock_acquire(w, 5000));
	CHECK_OK(zkl_lock_acquire(r, 5000));
	assert_true(zkl_lock_is_held(w));
	assert_true(zkl_lock_is_held(r));
	assert_int_equal(h_children(path), 2);

	zkl_participant *pl;
	size_t n;
	CHECK_OK(zkl_lock_participants(r, &pl, &n));
	assert_int_equal(n, 2);
	const char *wname = NULL, *rname = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *name = base_name(pl[i].path);
		if (strstr(name, "__WRIT__"))
			wname = name;
		if (strstr(name, "__READ__"))
			rname = name;
	}
	assert_non_null(wname);
	assert_non_null(rname);
	assert_true(curator_name(wname, "__WRIT__"));
	/* The read node is not sequential: it carries the writer's number. */
	assert_true(curator_name(rname, "__READ__"));
	assert_string_equal(strstr(rname, "__READ__") + 8, strstr(wname, "__WRIT__") + 8);
	assert_int_equal(pl[0].sequence, pl[1].sequence);
	zkl_participants_free(pl, n);

	CHECK_OK(zkl_lock_release(w));
	assert_false(zkl_lock_is_held(w));
	assert_true(zkl_lock_is_held(r));
	assert_int_equal(h_children(path), 1);
	/* Still a reader: others may read, nobody may write. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(other_w, 200));
	CHECK_OK(zkl_lock_acquire(other_r, 5000));
	CHECK_OK(zkl_lock_release(other_r));
	CHECK_OK(zkl_lock_release(r));
	assert_false(zkl_lock_is_held(r));
	assert_true(h_children(path) <= 0);
	CHECK_OK(zkl_lock_acquire(other_w, 5000));
	CHECK_OK(zkl_lock_release(other_w));
	zkl_rwlock_free(rw);
	zkl_rwlock_free(other);
	zkl_client_close(c);
	zkl_client_close(o);
}

/* ---- contended downgrade: a waiting writer stays blocked until the read goes ---- */

static void test_contended_downgrade(void **state)
{
	(void)state;
	struct rws t;
	rws_open(&t, "rw-contended", true);
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	const int64_t tw = zkl_lock_token(t.la.write);
	static h_acq wb;
	h_acq_start(&wb, t.lb.write, false);
	h_wait_children(t.path, 2);

	CHECK_OK(zkl_lock_acquire(t.la.read, 5000));
	/* The read hold carries the write hold's token, below the queued writer's: its
	 * node, made after that writer's, has a czxid above it. */
	assert_int_equal(zkl_lock_token(t.la.read), tw);
	CHECK_OK(zkl_lock_release(t.la.write));
	assert_true(zkl_lock_is_held(t.la.read));
	assert_int_equal(zkl_lock_token(t.la.read), tw);
	/* B's writer is still queued behind A's read node; other writers and later readers
	 * are kept out too (the waiting writer comes first). */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lx.write, 300));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lx.read, 300));
	assert_int_equal(h_latch_count(wb.done), 0);
	/* A create of the timed-out acquires still out at their deadline is deleted once
	 * answered: wait for that before listing. */
	h_wait_participants(t.lx.read, 2);
	zkl_participant *pl;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.lx.read, &pl, &n));
	assert_int_equal(n, 2);
	assert_non_null(strstr(pl[0].path, "__READ__"));
	assert_true(pl[0].holder);
	assert_non_null(strstr(pl[1].path, "__WRIT__"));
	assert_false(pl[1].holder);
	assert_true(pl[1].czxid > tw);
	assert_true(pl[0].czxid > pl[1].czxid);
	zkl_participants_free(pl, n);

	CHECK_OK(zkl_lock_release(t.la.read));
	assert_true(h_latch_wait(wb.done, 20000));
	h_acq_join(&wb);
	CHECK_OK(wb.rc);
	CHECK_OK(wb.release_rc);
	assert_true(h_children(t.path) <= 0);
	rws_close(&t);
}

/* ---- downgrade respects threads ---- */

struct tries {
	zkl_rwlock *rw;
	int timeout; /* of each acquire, ms */
	int rc_read, rc_write;
};

static void *try_thread(void *arg)
{
	struct tries *t = arg;
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(t->rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(t->rw));
	t->rc_read = zkl_lock_acquire(r, t->timeout);
	if (t->rc_read == 0)
		zkl_lock_release(r);
	t->rc_write = zkl_lock_acquire(w, t->timeout);
	if (t->rc_write == 0)
		zkl_lock_release(w);
	return NULL;
}

static void test_downgrade_respects_threads(void **state)
{
	(void)state;
	const char *path = h_path("rw-threads");
	zkl_client *c = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw));
	CHECK_OK(zkl_lock_acquire(w, 5000));
	struct tries t = { .rw = rw, .timeout = 300, .rc_read = 1, .rc_write = 1 };
	h_in_thread(try_thread, &t);
	CHECK_RC(ZKL_ETIMEDOUT, t.rc_read);
	CHECK_RC(ZKL_ETIMEDOUT, t.rc_write);
	h_wait_children(path, 1); /* a create out at the deadline is deleted once answered */
	assert_true(zkl_lock_is_held(w));
	CHECK_OK(zkl_lock_release(w));
	/* Once free, the other thread gets both (the folder may have been reaped: time for a
	 * few round trips). */
	t.timeout = 5000;
	h_in_thread(try_thread, &t);
	CHECK_OK(t.rc_read);
	CHECK_OK(t.rc_write);
	zkl_rwlock_free(rw);
	zkl_client_close(c);
}

/* ---- upgrade is refused at once ---- */

struct upgrade {
	zkl_rwlock *rw;
	int rc;
	h_latch *done;
};

static void *upgrade_thread(void *arg)
{
	struct upgrade *u = arg;
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(u->rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(u->rw));
	/* Holds the read half only, then asks for the write half without a limit. */
	u->rc = zkl_lock_acquire(r, 5000);
	if (u->rc == 0) {
		u->rc = zkl_lock_acquire(w, ZKL_WAIT_FOREVER);
		if (u->rc == 0)
			zkl_lock_release(w);
		zkl_lock_release(r);
	}
	h_latch_set(u->done);
	return NULL;
}

static void test_upgrade_refused(void **state)
{
	(void)state;
	const char *path = h_path("rw-upgrade");
	zkl_client *c = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw));
	CHECK_OK(zkl_lock_acquire(r, 5000));
	CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(w, 0));
	CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(w, 5000));
	CHECK_OK(zkl_lock_acquire(r, 0)); /* reentrant read: still refused */
	CHECK_RC(ZKL_EDEADLK, zkl_lock_acquire(w, 5000));
	assert_int_equal(h_children(path), 1);
	assert_false(zkl_lock_is_held(w));
	assert_true(zkl_lock_is_held(r));
	CHECK_OK(zkl_lock_release(r));
	CHECK_OK(zkl_lock_release(r));

	/* Without a limit, in a thread so that a hang fails the test instead of blocking. */
	static struct upgrade u;
	u = (struct upgrade){ .rw = rw, .rc = 1, .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, upgrade_thread, &u);
	if (!h_latch_wait(u.done, 5000))
		fail_msg("write acquire with -1 while holding the read half did not return");
	pthread_join(th, NULL);
	CHECK_RC(ZKL_EDEADLK, u.rc);
	h_latch_free(u.done);
	assert_true(h_children(path) <= 0);
	/* Nothing was left broken: the write half works. */
	CHECK_OK(zkl_lock_acquire(w, 5000));
	CHECK_OK(zkl_lock_release(w));
	zkl_rwlock_free(rw);
	zkl_client_close(c);
}

/* ---- the writer's session is killed: a reader gets in ---- */

static void test_holder_session_killed(void **state)
{
	(void)state;
	struct rws t;
	rws_open(&t, "rw-killed", false);
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(t.la.write, h_on_lost, lost));
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	zkl_participant *pl;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.la.write, &pl, &n));
	assert_int_equal(n, 1);
	char wpath[512];
	snprintf(wpath, sizeof wpath, "%s", pl[0].path);
	zkl_participants_free(pl, n);

	static h_acq rd;
	h_acq_start(&rd, t.lb.read, true);
	h_wait_children(t.path, 2);
	assert_int_equal(h_latch_count(rd.done), 0);

	h_expire(t.a);
	assert_true(h_latch_wait(lost, 20000));
	assert_true(h_latch_wait(rd.done, 20000));
	CHECK_OK(rd.rc);
	assert_false(h_exists(wpath));
	assert_false(zkl_lock_is_held(t.la.write));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(t.la.write));
	CHECK_OK(zkl_lock_participants(t.lb.read, &pl, &n));
	assert_int_equal(n, 1);
	assert_non_null(strstr(pl[0].path, "__READ__"));
	assert_true(pl[0].holder);
	zkl_participants_free(pl, n);
	h_acq_join(&rd);
	CHECK_OK(rd.release_rc);
	assert_int_equal(h_latch_count(lost), 1);
	/* The old client works on its new session. */
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	CHECK_OK(zkl_lock_release(t.la.write));
	assert_int_equal(h_latch_count(lost), 1);
	h_latch_free(lost);
	rws_close(&t);
}

/* ---- reentrancy of both halves ---- */

struct reader2 {
	zkl_rwlock *rw;
	int rc;
	int children;
	const char *path;
};

static void *second_reader(void *arg)
{
	struct reader2 *r = arg;
	zkl_lock *l = zkl_mutex_lock(zkl_rwlock_read(r->rw));
	r->rc = zkl_lock_acquire(l, 5000);
	if (r->rc == 0) {
		r->children = h_children(r->path);
		r->rc = zkl_lock_release(l);
	}
	return NULL;
}

static void test_reentrant(void **state)
{
	(void)state;
	const char *path = h_path("rw-reentrant");
	zkl_client *c = h_client(0);
	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, path));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw));

	CHECK_OK(zkl_lock_acquire(w, 5000));
	int64_t t = zkl_lock_token(w);
	assert_true(t > 0);
	CHECK_OK(zkl_lock_acquire(w, 0));
	CHECK_OK(zkl_lock_acquire(w, 1000));
	assert_int_equal(zkl_lock_token(w), t);
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_lock_release(w));
	CHECK_OK(zkl_lock_release(w));
	assert_true(zkl_lock_is_held(w));
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_lock_release(w));
	assert_false(zkl_lock_is_held(w));
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(w));
	assert_true(h_children(path) <= 0);

	CHECK_OK(zkl_lock_acquire(r, 5000));
	t = zkl_lock_token(r);
	assert_true(t > 0);
	CHECK_OK(zkl_lock_acquire(r, 0));
	CHECK_OK(zkl_lock_acquire(r, 1000));
	assert_int_equal(zkl_lock_token(r), t);
	assert_int_equal(h_children(path), 1);
	/* Another thread of the same handle reads alongside, with a node of its own. */
	struct reader2 r2 = { .rw = rw, .rc = 1, .path = path };
	h_in_thread(second_reader, &r2);
	CHECK_OK(r2.rc);
	assert_int_equal(r2.children, 2);
	CHECK_OK(zkl_lock_release(r));
	CHECK_OK(zkl_lock_release(r));
	assert_true(zkl_lock_is_held(r));
	CHECK_OK(zkl_lock_release(r));
	assert_false(zkl_lock_is_held(r));
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(r));
	assert_true(h_children(path) <= 0);
	zkl_rwlock_free(rw);
	zkl_client_close(c);
}

/* ---- a timed-out wait leaves no node ---- */

static void test_timeout_leaves_nothing(void **state)
{
	(void)state;
	struct rws t;
	rws_open(&t, "rw-timeout", false);
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	/* A create still out at the deadline is deleted once it is answered. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.write, 300));
	h_wait_children(t.path, 1);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.read, 300));
	h_wait_children(t.path, 1);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.read, 0));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.write, 0));
	assert_int_equal(h_children(t.path), 1);
	assert_false(zkl_lock_is_held(t.lb.read));
	assert_int_equal(zkl_lock_token(t.lb.read), ZKL_ENOTHELD);
	CHECK_OK(zkl_lock_release(t.la.write));

	/* A reader holds: a writer times out, a reader does not. */
	CHECK_OK(zkl_lock_acquire(t.la.read, 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.write, 300));
	h_wait_children(t.path, 1);
	CHECK_OK(zkl_lock_acquire(t.lb.read, 0));
	assert_int_equal(h_children(t.path), 2);
	CHECK_OK(zkl_lock_release(t.lb.read));
	CHECK_OK(zkl_lock_release(t.la.read));
	assert_true(h_children(t.path) <= 0);
	rws_close(&t);
}

/* ---- stray children are ignored ---- */

static void test_stray_children(void **state)
{
	(void)state;
	struct rws t;
	rws_open(&t, "rw-stray", true);
	/* The junk goes in while the lock is held: an empty folder is a container the
	 * server may reap at any moment. */
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	const char *junk[] = {"stray", "__READ__", "__WRIT__", "x-__WRIT__12",
	                      "x-__WRIT__00000000ab", "readme.txt", "__WRIT__99999999999"};
	enum { NJ = sizeof junk / sizeof *junk };
	for (size_t i = 0; i < NJ; i++)
		h_create(h_sub(t.path, junk[i]), "junk");
	CHECK_OK(zkl_lock_release(t.la.write));
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.lb.read, 200));
	CHECK_OK(zkl_lock_release(t.la.write));
	CHECK_OK(zkl_lock_acquire(t.lb.read, 5000));
	CHECK_OK(zkl_lock_acquire(t.lx.read, 5000));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(t.la.write, 200));
	zkl_participant *pl;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.la.read, &pl, &n));
	assert_int_equal(n, 2);
	assert_true(pl[0].holder);
	assert_true(pl[1].holder);
	zkl_participants_free(pl, n);
	CHECK_OK(zkl_lock_release(t.lb.read));
	CHECK_OK(zkl_lock_release(t.lx.read));
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	CHECK_OK(zkl_lock_release(t.la.write));
	assert_int_equal(h_children(t.path), NJ);
	rws_close(&t);
}

/* ---- fencing tokens grow from holder to holder ---- */

static void test_tokens_grow(void **state)
{
	(void)state;
	struct rws t;
	rws_open(&t, "rw-tokens", false);
	assert_int_equal(zkl_lock_token(t.la.write), ZKL_ENOTHELD);
	CHECK_OK(zkl_lock_acquire(t.la.write, 5000));
	int64_t t1 = zkl_lock_token(t.la.write);
	assert_true(t1 > 0);
	zkl_participant *pl;
	size_t n;
	CHECK_OK(zkl_lock_participants(t.lb.write, &pl, &n));
	assert_int_equal(n, 1);
	assert_int_equal(pl[0].czxid, t1);
	zkl_participants_free(pl, n);
	CHECK_OK(zkl_lock_release(t.la.write));
	assert_int_equal(zkl_lock_token(t.la.write), ZKL_ENOTHELD);

	CHECK_OK(zkl_lock_acquire(t.lb.read, 5000));
	int64_t t2 = zkl_lock_token(t.lb.read);
	CHECK_OK(zkl_lock_acquire(t.la.read, 5000));
	int64_t t3 = zkl_lock_token(t.la.read);
	assert_true(t2 > t1);
	assert_true(t3 > t2);
	CHECK_OK(zkl_lock_release(t.lb.read));
	CHECK_OK(zkl_lock_release(t.la.read));
	CHECK_OK(zkl_lock_acquire(t.lb.write, 5000));
	assert_true(zkl_lock_token(t.lb.write) > t3);
	CHECK_OK(zkl_lock_release(t.lb.write));
	rws_close(&t);
}

/* ---- bad arguments ---- */

static void test_invalid(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	zkl_rwlock *rw = NULL;
	CHECK_RC(ZKL_EINVAL, zkl_rwlock_new(&rw, c, "locks/x"));
	assert_null(rw);
	CHECK_RC(ZKL_EINVAL, zkl_rwlock_new(&rw, c, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_rwlock_new(&rw, NULL, "/x"));
	CHECK_RC(ZKL_EINVAL, zkl_rwlock_new(NULL, c, "/x"));
	CHECK_OK(zkl_rwlock_new(&rw, c, h_path("rw-invalid")));
	assert_non_null(zkl_rwlock_read(rw));
	assert_non_null(zkl_rwlock_write(rw));
	assert_true(zkl_rwlock_read(rw) != zkl_rwlock_write(rw));
	zkl_lock *r = zkl_mutex_lock(zkl_rwlock_read(rw));
	zkl_lock *w = zkl_mutex_lock(zkl_rwlock_write(rw));
	assert_true(r != w);
	assert_string_equal(zkl_lock_path(r), zkl_lock_path(w));
	CHECK_RC(ZKL_EINVAL, zkl_lock_acquire(r, -2));
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(r));
	CHECK_RC(ZKL_ENOTOWNER, zkl_lock_release(w));
	zkl_rwlock_free(rw);
	zkl_rwlock_free(NULL);
	zkl_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_reentrant),
		cmocka_unit_test(test_timeout_leaves_nothing),
		cmocka_unit_test(test_tokens_grow),
		cmocka_unit_test(test_stray_children),
		cmocka_unit_test(test_downgrade),
		cmocka_unit_test(test_contended_downgrade),
		cmocka_unit_test(test_downgrade_respects_threads),
		cmocka_unit_test(test_upgrade_refused),
		cmocka_unit_test(test_participants),
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_holder_session_killed),
	};
	return H_RUN(tests);
}
