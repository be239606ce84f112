/* The engine and the recipes on the in-memory ZooKeeper (fakezk.h): the queue protocol,
 * its races and its faults, with real clients and no server. Each test names the rule
 * it guards; breaking that rule in the code makes the test fail. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "clock.h"
#include "core.h" /* the loop's inbox and holds (test_release_deferred_while_lost_runs) */
#include "fzh.h"

#define CHECK_OK(x) assert_int_equal((x), 0)

/* Three clients, each with a mutex on one path, and the mutexes' views. */
struct pair {
	struct fz *z;
	zkl_client *a, *b, *c;
	zkl_mutex *ma, *mb, *mc;
	zkl_lock *la, *lb, *lc;
	const char *path;
};

static void pair_open(struct pair *p, const char *path)
{
	p->z = fz_new();
	p->path = path;
	CHECK_OK(fz_client_open(p->z, &p->a, NULL));
	CHECK_OK(fz_client_open(p->z, &p->b, NULL));
	CHECK_OK(fz_client_open(p->z, &p->c, NULL));
	CHECK_OK(zkl_mutex_new(&p->ma, p->a, path));
	CHECK_OK(zkl_mutex_new(&p->mb, p->b, path));
	CHECK_OK(zkl_mutex_new(&p->mc, p->c, path));
	p->la = zkl_mutex_lock(p->ma);
	p->lb = zkl_mutex_lock(p->mb);
	p->lc = zkl_mutex_lock(p->mc);
}

/* Makes the lock's folder (under /locks) before any client does. */
static void pair_folder(struct pair *p)
{
	CHECK_OK(fz_create(p->z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(p->z, p->path, NULL, ZOO_CONTAINER, 0, NULL, 0));
}

static void pair_close(struct pair *p)
{
	zkl_mutex_free(p->ma);
	zkl_mutex_free(p->mb);
	zkl_mutex_free(p->mc);
	zkl_client_close(p->a);
	zkl_client_close(p->b);
	zkl_client_close(p->c);
	fz_free(p->z);
}

/* Opens a client with a 1 s session, for tests that let the session be given up. */
static void open_short(struct fz *z, zkl_client **out)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.session_timeout_ms = 1000;
	CHECK_OK(fz_client_open(z, out, &o));
}

static int children(struct fz *z, const char *path)
{
	char buf[8192];
	return fz_children(z, path, buf, sizeof buf);
}

/* ---- the queue: first come, first served, one watcher per node ---- */

static void test_fifo_handoff(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	enum { N = 4 };
	zkl_client *c[N];
	zkl_mutex *m[N];
	zkl_lock *l[N];
	for (int i = 0; i < N; i++) {
		CHECK_OK(fz_client_open(z, &c[i], NULL));
		CHECK_OK(zkl_mutex_new(&m[i], c[i], "/locks/fifo"));
		l[i] = zkl_mutex_lock(m[i]);
	}
	CHECK_OK(zkl_lock_acquire(l[0], -1));
	struct fzh_acq w[N];
	for (int i = 1; i < N; i++) {
		fzh_acq_start(&w[i], z, l[i], -1, 0);
		fzh_wait_children(z, "/locks/fifo", i + 1);
		/* Each waiter watches the one node ahead of its own: no herd. (The holder
		 * watches its own node too: its deletion is its loss.) */
		char ahead[256];
		fzh_queue_node(z, "/locks/fifo", i - 1, ahead, sizeof ahead);
		fzh_wait_watched(z, ahead, 1);
		assert_int_equal(fz_watchers(z, ahead), 1);
	}
	int64_t token = zkl_lock_token(l[0]);
	CHECK_OK(zkl_lock_release(l[0]));
	for (int i = 1; i < N; i++) {
		CHECK_OK(fzh_acq_wait(&w[i]));
		assert_true(w[i].held);
		for (int j = i + 1; j < N; j++)
			assert_false(atomic_load(&w[j].done));
		assert_true(w[i].token > token);
		token = w[i].token;
		CHECK_OK(fzh_acq_finish(&w[i]));
	}
	/* One wake per release: each waiter was woken once, when the node ahead of its own
	 * went. The first waiter watched the holder's node and held at once; the others
	 * watched a waiter's node, whose going may be a withdrawal, so they listed once
	 * more before holding. */
	for (int i = 0; i < N; i++) {
		zkl_client_stats st;
		CHECK_OK(zkl_client_get_stats(c[i], &st, sizeof st));
		assert_int_equal(st.acquisitions, 1);
		assert_int_equal(st.granted, 1);
		assert_int_equal(st.wakes, i == 0 ? 0 : 1);
		if (i > 0)
			assert_int_equal(st.listings, i == 1 ? 1 : 2);
	}
	zkl_client_stats st;
	assert_int_equal(zkl_client_get_stats(NULL, &st, sizeof st), ZKL_EINVAL);
	assert_int_equal(zkl_client_get_stats(c[0], NULL, sizeof st), ZKL_EINVAL);
	assert_int_equal(zkl_client_get_stats(c[0], &st, 4), ZKL_EINVAL);
	/* An older, shorter struct gets its own fields and nothing past them. */
	uint64_t older[2] = { 0, 0xfeed };
	CHECK_OK(zkl_client_get_stats(c[1], (zkl_client_stats *)older, sizeof older[0]));
	assert_int_equal(older[0], 1);
	assert_int_equal(older[1], 0xfeed);
	for (int i = 0; i < N; i++) {
		zkl_mutex_free(m[i]);
		zkl_client_close(c[i]);
	}
	/* Nothing of ours is left: only the (container) folder. */
	assert_int_equal(children(z, "/locks/fifo"), 0);
	fz_free(z);
}

/* ---- a create applied whose answer is lost: found again by its uuid ---- */

struct lose_first {
	atomic_int creates;
	int64_t session;
};

static enum fz_action lose_first_create(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct lose_first *l = arg;
	if (r->op == FZ_CREATE && (r->mode & ZOO_SEQUENCE) && r->session == l->session &&
	    atomic_fetch_add(&l->creates, 1) == 0)
		return FZ_LOSE;
	return FZ_APPLY;
}

static void test_create_answer_lost(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/lost-answer");
	CHECK_OK(fz_create(p.z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(p.z, "/locks/lost-answer", NULL, ZOO_CONTAINER, 0, NULL, 0));
	struct lose_first l = { .session = zkl_client_session_id(p.a) };
	fz_set_hook(p.z, lose_first_create, &l);
	CHECK_OK(zkl_lock_acquire(p.la, 5000));
	fz_set_hook(p.z, NULL, NULL);
	assert_int_equal(atomic_load(&l.creates), 1);
	/* The node the lost answer made is ours, and the only one: adopted, not doubled. */
	assert_int_equal(fz_ephemerals(p.z, zkl_client_session_id(p.a)), 1);
	assert_int_equal(children(p.z, p.path), 1);
	char own[256];
	fzh_queue_node(p.z, p.path, 0, own, sizeof own);
	struct Stat st;
	assert_true(fz_stat(p.z, own, &st));
	assert_int_equal(zkl_lock_token(p.la), st.czxid);
	/* And it excludes: the other client cannot take it. */
	assert_int_equal(zkl_lock_acquire(p.lb, 0), ZKL_ETIMEDOUT);
	CHECK_OK(zkl_lock_release(p.la));
	/* A release sends its delete and returns: wait for it to land. */
	fzh_wait_children(p.z, p.path, 0);
	CHECK_OK(zkl_lock_acquire(p.lb, 0));
	CHECK_OK(zkl_lock_release(p.lb));
	pair_close(&p);
}

/* ---- a node that carries our uuid but belongs to another session is not ours ---- */

struct impostor {
	struct fz *z;
	int64_t session, peer;
	atomic_int creates;
	atomic_bool planted;
	char made[256];     /* the impostor's path, once planted */
};

static enum fz_action plant_impostor(void *arg, const struct fz_request *r, int *rc)
{
	struct impostor *im = arg;
	if (r->op != FZ_CREATE || !(r->mode & ZOO_SEQUENCE) || r->session != im->session ||
	    atomic_fetch_add(&im->creates, 1) != 0)
		return FZ_APPLY;
	/* Another session's node with our uuid; our own create is lost on the way. */
	CHECK_OK(fz_create(im->z, r->path, "peer", ZOO_EPHEMERAL_SEQUENTIAL, im->peer, im->made,
	                   sizeof im->made));
	atomic_store(&im->planted, true);
	fz_poke(im->z);
	*rc = ZCONNECTIONLOSS;
	return FZ_REFUSE;
}

static bool planted(void *arg)
{
	return atomic_load(&((struct impostor *)arg)->planted);
}

static void test_adopt_only_own_session(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/impostor");
	CHECK_OK(fz_create(p.z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(p.z, "/locks/impostor", NULL, ZOO_CONTAINER, 0, NULL, 0));
	struct impostor im = { .z = p.z, .session = zkl_client_session_id(p.a),
	                       .peer = fz_peer(p.z) };
	fz_set_hook(p.z, plant_impostor, &im);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.la, 5000, 0);
	/* The impostor sorts first and holds; we queue behind it on a node of our own. */
	fz_wait(p.z, planted, &im, "the impostor");
	fzh_wait_watched(p.z, im.made, 1);
	assert_false(atomic_load(&w.done));
	assert_int_equal(fz_ephemerals(p.z, im.session), 1);
	CHECK_OK(fz_delete(p.z, im.made));
	CHECK_OK(fzh_acq_wait(&w));
	fz_set_hook(p.z, NULL, NULL);
	char own[256];
	fzh_queue_node(p.z, p.path, 0, own, sizeof own);
	struct Stat st;
	assert_true(fz_stat(p.z, own, &st));
	assert_int_equal(st.ephemeralOwner, im.session);
	assert_int_equal(w.token, st.czxid);
	CHECK_OK(fzh_acq_finish(&w));
	fzh_wait_children(p.z, p.path, 0);
	pair_close(&p);
}

/* ---- a predecessor that withdrew is not one that released ---- */

static void test_withdrew_is_not_released(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/withdrew");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256], second[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	struct fzh_acq wb, wc;
	fzh_acq_start(&wb, p.z, p.lb, -1, 0);
	fzh_wait_children(p.z, p.path, 2);
	fzh_wait_watched(p.z, holder, 1);
	fzh_queue_node(p.z, p.path, 1, second, sizeof second);
	fzh_acq_start(&wc, p.z, p.lc, -1, 0);
	fzh_wait_watched(p.z, second, 1);
	/* The one ahead of the third withdraws: the third must look again, not hold. */
	zkl_lock_cancel(p.lb);
	assert_int_equal(fzh_acq_wait(&wb), ZKL_ECANCELED);
	CHECK_OK(fzh_acq_finish(&wb));
	fzh_wait_done_or_watched(p.z, &wc, holder);
	assert_false(atomic_load(&wc.done));
	assert_true(zkl_lock_is_held(p.la));
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&wc));
	assert_true(wc.held);
	CHECK_OK(fzh_acq_finish(&wc));
	pair_close(&p);
}

/* ---- the next in line holds when its predecessor goes, unless that one may have
 * downgraded: a write holder's read node then sorts ahead ---- */

/* a holds the write half of a read-write lock; b's write half waits behind it (on its
 * own thread, w), watching a's write node. */
struct downgrade {
	struct fz *z;
	zkl_client *a, *b;
	zkl_rwlock *ra, *rb;
	zkl_lock *write_a, *read_a;
	const char *path;
	struct fzh_acq w;
};

static void downgrade_open(struct downgrade *d, const char *path)
{
	d->z = fz_new();
	d->path = path;
	CHECK_OK(fz_client_open(d->z, &d->a, NULL));
	CHECK_OK(fz_client_open(d->z, &d->b, NULL));
	CHECK_OK(zkl_rwlock_new(&d->ra, d->a, path));
	CHECK_OK(zkl_rwlock_new(&d->rb, d->b, path));
	d->write_a = zkl_mutex_lock(zkl_rwlock_write(d->ra));
	d->read_a = zkl_mutex_lock(zkl_rwlock_read(d->ra));
	CHECK_OK(zkl_lock_acquire(d->write_a, -1));
	char writer[256];
	fzh_queue_node(d->z, path, 0, writer, sizeof writer);
	fzh_acq_start(&d->w, d->z, zkl_mutex_lock(zkl_rwlock_write(d->rb)), -1, 0);
	fzh_wait_watched(d->z, writer, 1);
}

static void downgrade_close(struct downgrade *d)
{
	CHECK_OK(fzh_acq_finish(&d->w));
	zkl_rwlock_free(d->ra);
	zkl_rwlock_free(d->rb);
	zkl_client_close(d->a);
	zkl_client_close(d->b);
	fz_free(d->z);
}

static void test_downgrade_blocks_shortcut(void **state)
{
	(void)state;
	struct downgrade d;
	downgrade_open(&d, "/locks/rw");
	/* Downgrade: read while writing, then let the write go. */
	CHECK_OK(zkl_lock_acquire(d.read_a, -1));
	/* Its read node sorts right after its write node, ahead of the waiting writer. */
	char reader[256];
	fzh_queue_node(d.z, d.path, 1, reader, sizeof reader);
	assert_non_null(strstr(reader, "__READ__"));
	CHECK_OK(zkl_lock_release(d.write_a));
	/* The waiting writer sees the read node ahead and waits for it. */
	fzh_wait_done_or_watched(d.z, &d.w, reader);
	assert_false(atomic_load(&d.w.done));
	CHECK_OK(zkl_lock_release(d.read_a));
	CHECK_OK(fzh_acq_wait(&d.w));
	assert_true(d.w.held);
	downgrade_close(&d);
}

/* A downgrade's read node belongs to the write lock's session. If that session expires
 * while the node is being made, the write lock is gone (another writer may hold it
 * already), so the read lock is not taken on the new session: making the node there,
 * at the old writer's place, would let the reader in beside the new writer. */
struct expire_read_create {
	struct fz *z;
	int64_t session;
	atomic_int expired;
};

static enum fz_action expire_on_read_create(void *arg, const struct fz_request *r, int *rc)
{
	struct expire_read_create *k = arg;
	if (r->session != k->session || r->op != FZ_CREATE || !strstr(r->path, "__READ__") ||
	    atomic_exchange(&k->expired, 1))
		return FZ_APPLY;
	fz_expire(k->z, k->session);
	*rc = ZSESSIONEXPIRED;
	return FZ_REFUSE;
}

/* Whether c is on a session other than from. */
struct moved {
	zkl_client *c;
	int64_t from;
};

static bool session_moved(void *arg)
{
	struct moved *m = arg;
	int64_t id = zkl_client_session_id(m->c);
	return id != 0 && id != m->from;
}

static void test_downgrade_bound_to_writer_session(void **state)
{
	(void)state;
	struct downgrade d;
	downgrade_open(&d, "/locks/rw-expire");
	struct expire_read_create k = { .z = d.z, .session = zkl_client_session_id(d.a) };
	fz_set_hook(d.z, expire_on_read_create, &k);
	/* The downgrade's create meets the expiry: the write lock went with the session. */
	assert_int_equal(zkl_lock_acquire(d.read_a, 5000), ZKL_ELOST);
	assert_true(atomic_load(&k.expired));
	assert_false(zkl_lock_is_held(d.read_a));
	CHECK_OK(fzh_acq_wait(&d.w));
	assert_true(d.w.held);
	/* Only b's write node is in the queue: a made no read node on its new session. */
	assert_int_equal(children(d.z, d.path), 1);
	fz_set_hook(d.z, NULL, NULL);
	/* Once a is on its new session, its write lock is known lost. */
	struct moved mv = { d.a, k.session };
	fz_wait(d.z, session_moved, &mv, "a new session");
	assert_int_equal(zkl_lock_release(d.write_a), ZKL_ELOST);
	downgrade_close(&d);
}

/* ---- and where nothing can stand ahead, the handoff is one watch event: no list ---- */

struct count_lists {
	int64_t session;
	atomic_int lists;
};

static enum fz_action count_list(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct count_lists *k = arg;
	if (r->op == FZ_CHILDREN && r->session == k->session)
		atomic_fetch_add(&k->lists, 1);
	return FZ_APPLY;
}

static void test_next_in_line_shortcut(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/shortcut");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	struct count_lists k = { .session = zkl_client_session_id(p.b) };
	fz_set_hook(p.z, count_list, &k);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.lb, -1, 0);
	fzh_wait_watched(p.z, holder, 1);
	const int before = atomic_load(&k.lists);
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&w));
	assert_int_equal(atomic_load(&k.lists), before);
	fz_set_hook(p.z, NULL, NULL);
	CHECK_OK(fzh_acq_finish(&w));
	pair_close(&p);
}

/* ---- a timeout that races the grant: the waiter gives up and leaves nothing ---- */

struct queued_op {
	struct fz *z;
	int64_t session;
	int op;
};

static bool has_queued(void *arg)
{
	struct queued_op *q = arg;
	return fz_queued(q->z, q->session, q->op) > 0;
}

static void test_timeout_races_grant(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/timeout-race");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	const int64_t sb = zkl_client_session_id(p.b);
	struct fzh_acq w;
	/* Time enough to queue and arm the watch on a loaded machine. */
	fzh_acq_start(&w, p.z, p.lb, 2000, sb);
	fzh_wait_watched(p.z, holder, 1);
	/* The grant is on its way to the waiter when its deadline passes. */
	fz_pause(p.z, sb, true);
	CHECK_OK(zkl_lock_release(p.la));
	fzh_wait_children(p.z, p.path, 1);
	struct queued_op q = { p.z, sb, FZ_DELETE };
	fz_wait(p.z, has_queued, &q, "the waiter's withdrawal");
	fz_pause(p.z, sb, false);
	assert_int_equal(fzh_acq_wait(&w), ZKL_ETIMEDOUT);
	assert_false(w.held);
	assert_int_equal(w.nodes, 0);
	CHECK_OK(fzh_acq_finish(&w));
	CHECK_OK(zkl_lock_acquire(p.la, 0));
	CHECK_OK(zkl_lock_release(p.la));
	pair_close(&p);
}

/* ---- a cancel that races the grant, or the create: either it holds, or it returns
 * ECANCELED with nothing of its own left on the server ---- */

struct cancel_on {
	struct fz *z;
	bool pause;         /* the request waits until the test resumes the session */
	zkl_lock *l;
	int64_t session;
	int op;
	atomic_int fired;
};

static enum fz_action cancel_on_request(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct cancel_on *k = arg;
	if (r->session == k->session && (int)r->op == k->op &&
	    (r->op != FZ_CREATE || (r->mode & ZOO_SEQUENCE)) && atomic_fetch_add(&k->fired, 1) == 0) {
		zkl_lock_cancel(k->l);
		fz_poke(k->z);
		return k->pause ? FZ_PAUSE : FZ_APPLY;
	}
	return FZ_APPLY;
}

/* The cancel has come, and the request it came with waits, paused. */
static bool cancel_fired(void *arg)
{
	struct cancel_on *k = arg;
	return atomic_load(&k->fired) > 0 && fz_queued(k->z, k->session, k->op) > 0;
}

static void test_cancel_races_grant(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/cancel-race");
	const int64_t sb = zkl_client_session_id(p.b);
	int held = 0, canceled = 0;
	for (int i = 0; i < 40; i++) {
		CHECK_OK(zkl_lock_acquire(p.la, -1));
		char holder[256];
		fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
		struct fzh_acq w;
		fzh_acq_start(&w, p.z, p.lb, -1, sb);
		fzh_wait_watched(p.z, holder, 1);
		/* The cancel comes just as the holder's delete reaches the server. */
		struct cancel_on k = { .z = p.z, .l = p.lb, .session = zkl_client_session_id(p.a),
		                       .op = FZ_DELETE };
		fz_set_hook(p.z, cancel_on_request, &k);
		CHECK_OK(zkl_lock_release(p.la));
		int rc = fzh_acq_wait(&w);
		fz_set_hook(p.z, NULL, NULL);
		if (rc == 0) {
			held++;
			assert_true(w.held);
			assert_int_equal(w.nodes, 1);
		} else {
			canceled++;
			assert_int_equal(rc, ZKL_ECANCELED);
			assert_int_equal(w.nodes, 0);
		}
		CHECK_OK(fzh_acq_finish(&w));
		fzh_wait_children(p.z, p.path, 0);
	}
	assert_int_equal(held + canceled, 40);
	pair_close(&p);
}

static void test_cancel_races_create(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/cancel-create");
	const int64_t sb = zkl_client_session_id(p.b);
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	for (int i = 0; i < 40; i++) {
		/* The cancel comes while the waiter's create is on its way to the server,
		 * which applies it a moment later. */
		struct cancel_on k = { .z = p.z, .pause = true, .l = p.lb, .session = sb,
		                       .op = FZ_CREATE };
		fz_set_hook(p.z, cancel_on_request, &k);
		struct fzh_acq w;
		fzh_acq_start(&w, p.z, p.lb, -1, sb);
		fz_wait(p.z, cancel_fired, &k, "the cancel");
		fz_pause(p.z, sb, false);
		assert_int_equal(fzh_acq_wait(&w), ZKL_ECANCELED);
		fz_set_hook(p.z, NULL, NULL);
		assert_int_equal(atomic_load(&k.fired), 1);
		/* It returns with nothing of its own on the server, or on its way there. */
		assert_int_equal(w.nodes, 0);
		assert_int_equal(w.creates, 0);
		CHECK_OK(fzh_acq_finish(&w));
	}
	CHECK_OK(zkl_lock_release(p.la));
	pair_close(&p);
}

/* ---- expiry while waiting: queue again on the new session, keep waiting ---- */

static void test_expiry_while_waiting(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/expire-waiting");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	const int64_t old = zkl_client_session_id(p.b);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.lb, -1, 0);
	fzh_wait_watched(p.z, holder, 1);
	fz_expire(p.z, old);
	/* Its node went with the session; a new one on the new session waits behind. */
	fzh_wait_children(p.z, p.path, 2);
	fzh_wait_done_or_watched(p.z, &w, holder);
	assert_false(atomic_load(&w.done));
	const int64_t now = zkl_client_session_id(p.b);
	assert_true(now != old);
	assert_int_equal(fz_ephemerals(p.z, now), 1);
	int64_t token = zkl_lock_token(p.la);
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&w));
	assert_true(w.held);
	assert_true(w.token > token);
	CHECK_OK(fzh_acq_finish(&w));
	pair_close(&p);
}

/* ---- expiry while holding: the holder is told once, and the lock is free ---- */

static void test_expiry_while_holding(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/expire-holding");
	struct fzh_count lost = { .z = p.z };
	CHECK_OK(zkl_lock_on_lost(p.la, fzh_on_lost, &lost));
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	fz_expire(p.z, zkl_client_session_id(p.a));
	fzh_wait_count(&lost, 1);
	assert_false(zkl_lock_is_held(p.la));
	assert_int_equal(zkl_lock_release(p.la), ZKL_ELOST);
	assert_int_equal(children(p.z, p.path), 0);
	CHECK_OK(zkl_lock_acquire(p.lb, 0));
	CHECK_OK(zkl_lock_release(p.lb));
	/* The client works on its new session. */
	fzh_wait_children(p.z, p.path, 0);
	CHECK_OK(zkl_lock_acquire(p.la, 0));
	CHECK_OK(zkl_lock_release(p.la));
	assert_int_equal(atomic_load(&lost.n), 1);
	pair_close(&p);
}

/* ---- a release from another thread while the lost callback runs returns only once
 * the callback has: after a release returns, the holder's callback is over, so the
 * handle may be freed ---- */

/* What a lost callback records while its lock is released from another thread. */
struct lost_during {
	zkl_client *c;
	atomic_bool running, releasing, released, released_during, deferred;
	atomic_int calls;
};

/* The callback's start: counted, running, and on once the release is under way. */
static void lost_during_begin(struct lost_during *s)
{
	atomic_fetch_add(&s->calls, 1);
	atomic_store(&s->running, true);
	while (!atomic_load(&s->releasing))
		sched_yield();
}

/* The test's side: once the callback runs, releases la, which must say ZKL_ELOST and
 * return only after the callback has, once; then the handle can go at once (nothing of
 * it runs any more), and the lock passes on to b. */
static void release_during_lost(struct pair *p, struct lost_during *s)
{
	const int64_t give_up = zkl__now_ms() + 30000;
	while (!atomic_load(&s->running))
		if (sched_yield() != 0 || zkl__now_ms() > give_up)
			fail_msg("the holder was never told its lock was lost");
	atomic_store(&s->releasing, true);
	assert_int_equal(zkl_lock_release(p->la), ZKL_ELOST);
	atomic_store(&s->released, true);
	assert_false(atomic_load(&s->running));
	assert_int_equal(atomic_load(&s->calls), 1);
	zkl_mutex_free(p->ma);
	p->ma = NULL;
	CHECK_OK(zkl_lock_acquire(p->lb, 0));
	CHECK_OK(zkl_lock_release(p->lb));
}

static void slow_lost_fn(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct lost_during *s = data;
	lost_during_begin(s);
	/* The release is under way on the test's thread: it must wait for this callback,
	 * however long it runs. A release that did not wait returns in microseconds. */
	const int64_t until = zkl__now_ms() + 200;
	while (zkl__now_ms() < until && !atomic_load(&s->released))
		sched_yield();
	atomic_store(&s->released_during, atomic_load(&s->released));
	atomic_store(&s->running, false);
}

static void test_release_waits_for_lost_callback(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/release-during-lost");
	struct lost_during s = {.c = p.a};
	CHECK_OK(zkl_lock_on_lost(p.la, slow_lost_fn, &s));
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	fz_expire(p.z, zkl_client_session_id(p.a));
	release_during_lost(&p, &s);
	assert_false(atomic_load(&s.released_during));
	pair_close(&p);
}

/* A release while the lost callback drives the loop itself (a call of the client's
 * inside it, run at once on the loop's thread): the release's end of the hold, handed
 * to the loop, is applied there, deeper in the loop's stack than the callback, and must
 * wait for the callback's end rather than end the hold under it. The node is deleted by
 * someone else, so the session lives and the release sends its delete itself: what
 * reaches the loop while the callback runs is the hold's end alone. */
static void nothing(zkl_client *c, void *arg)
{
	(void)c;
	(void)arg;
}

static void driving_lost_fn(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct lost_during *s = data;
	lost_during_begin(s);
	/* The release's call reaches the inbox, and is applied here, on the loop's thread. */
	const int64_t give_up = zkl__now_ms() + 30000;
	struct zkl_hold *h = s->c->holds;
	while (h && !h->finish && zkl__now_ms() < give_up) {
		bool queued = false;
		pthread_mutex_lock(&s->c->inbox_mu);
		for (struct zkl_msg *m = s->c->inbox; m; m = m->next)
			queued = queued || m->kind == MSG_CALL;
		pthread_mutex_unlock(&s->c->inbox_mu);
		if (queued)
			zkl__loop_run(s->c, nothing, NULL);
		else
			sched_yield();
	}
	/* The client's only hold is ours, its end asked for and put off. */
	atomic_store(&s->deferred, h && !h->next && h->finish &&
	                                   atomic_load(&h->state) == ZKL_HOLD_DISPATCHING &&
	                                   !atomic_load(&s->released));
	atomic_store(&s->running, false);
}

static void test_release_deferred_while_lost_runs(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/release-during-driving-lost");
	struct lost_during s = {.c = p.a};
	CHECK_OK(zkl_lock_on_lost(p.la, driving_lost_fn, &s));
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char name[256], node[512];
	assert_int_equal(fz_children(p.z, p.path, name, sizeof name), 1);
	name[strcspn(name, "\n")] = '\0';
	snprintf(node, sizeof node, "%s/%s", p.path, name);
	CHECK_OK(fz_delete(p.z, node));
	release_during_lost(&p, &s);
	assert_true(atomic_load(&s.deferred));
	pair_close(&p);
}

/* ---- the session given up on the client's own clock, before the server expires it:
 * a client that is no longer heard is told while its node still stands ---- */

/* A holder on a client with a 1 s session (a), and another client (b) on the same
 * path; lost counts a's lost callbacks. */
struct own_clock {
	struct fz *z;
	const char *path;
	zkl_client *a, *b;
	zkl_mutex *ma, *mb;
	zkl_lock *la, *lb;
	int64_t sa;
	struct fzh_count lost;
};

static void own_clock_hold(struct own_clock *t, struct fz *z, const char *path)
{
	t->z = z;
	t->path = path;
	open_short(z, &t->a);
	CHECK_OK(fz_client_open(z, &t->b, NULL));
	CHECK_OK(zkl_mutex_new(&t->ma, t->a, path));
	CHECK_OK(zkl_mutex_new(&t->mb, t->b, path));
	t->la = zkl_mutex_lock(t->ma);
	t->lb = zkl_mutex_lock(t->mb);
	t->sa = zkl_client_session_id(t->a);
	t->lost = (struct fzh_count){ .z = z, .session = t->sa };
	CHECK_OK(zkl_lock_on_lost(t->la, fzh_on_lost, &t->lost));
	CHECK_OK(zkl_lock_acquire(t->la, -1));
}

/* a was told, once, while its node still stood. */
static void own_clock_told(struct own_clock *t)
{
	assert_int_equal(t->lost.nodes, 1);
	assert_false(zkl_lock_is_held(t->la));
	assert_int_equal(zkl_lock_release(t->la), ZKL_ELOST);
}

/* Once the server has expired a's session, the lock passes on to b; then everything
 * goes. */
static void own_clock_passes_on(struct own_clock *t)
{
	fzh_wait_children(t->z, t->path, 0);
	CHECK_OK(zkl_lock_acquire(t->lb, 0));
	CHECK_OK(zkl_lock_release(t->lb));
	assert_int_equal(atomic_load(&t->lost.n), 1);
	zkl_mutex_free(t->ma);
	zkl_mutex_free(t->mb);
	zkl_client_close(t->a);
	zkl_client_close(t->b);
	fz_free(t->z);
}

static void test_lost_before_expiry(void **state)
{
	(void)state;
	struct own_clock t;
	own_clock_hold(&t, fz_new(), "/locks/own-clock");
	/* Nothing it sends is answered from now on; the server has not expired it. */
	fz_pause(t.z, t.sa, true);
	fzh_wait_count(&t.lost, 1);
	own_clock_told(&t);
	/* Only then may the server expire it, and the lock pass on. */
	fz_expire(t.z, t.sa);
	fz_pause(t.z, t.sa, false);
	own_clock_passes_on(&t);
}

/* ---- the holder's server is a leader cut off from the others: it answers reads and
 * syncs (until syncLimit passes, while the others elect a new leader that may expire
 * the session), but commits no write. Only a write's success proves the session for a
 * holder: it is told lost while its node still stands. With a sync for heartbeat, or any
 * answer for proof, it held on for ever ---- */

struct cut_leader {
	atomic_llong session; /* whose writes go unanswered; 0: nobody's */
	atomic_int reads;     /* its requests answered meanwhile */
};

static enum fz_action cut_leader_hook(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct cut_leader *k = arg;
	if (r->session != atomic_load(&k->session))
		return FZ_APPLY;
	if (r->op == FZ_CREATE || r->op == FZ_DELETE || r->op == FZ_SET || r->op == FZ_CHECK)
		return FZ_SWALLOW;
	atomic_fetch_add(&k->reads, 1);
	return FZ_APPLY;
}

static void test_lost_on_cut_off_leader(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct cut_leader k = {0};
	fz_set_hook(z, cut_leader_hook, &k);
	struct own_clock t;
	own_clock_hold(&t, z, "/locks/cut-leader");
	atomic_store(&k.session, t.sa);
	/* The holder reads all along (its participants), and is answered. */
	const int64_t give_up = zkl__now_ms() + 30000;
	while (atomic_load(&t.lost.n) == 0) {
		zkl_participant *ps = NULL;
		size_t n = 0;
		int rc = zkl_lock_participants(t.la, &ps, &n);
		zkl_participants_free(ps, n);
		assert_true(rc == 0 || atomic_load(&t.lost.n) > 0);
		if (zkl__now_ms() > give_up)
			fail_msg("a holder whose writes go unanswered was never told lost");
	}
	assert_true(atomic_load(&k.reads) > 0);
	own_clock_told(&t);
	/* Only then may the new leader expire it, and the lock pass on. */
	atomic_store(&k.session, 0);
	fz_expire(z, t.sa);
	own_clock_passes_on(&t);
}

/* ---- a heartbeat refused (no read access to /) is said, not left to look like a
 * silent server ---- */

struct refused_log {
	struct fz *z;
	atomic_int said;
};

static void refused_log_fn(zkl_log_level level, const char *message, void *data)
{
	struct refused_log *k = data;
	if (level == ZKL_LOG_ERROR && strstr(message, "heartbeat") &&
	    strstr(message, "not authenticated")) {
		atomic_fetch_add(&k->said, 1);
		fz_poke(k->z);
	}
}

static bool refused_said(void *arg)
{
	return atomic_load(&((struct refused_log *)arg)->said) > 0;
}

static enum fz_action refuse_check_hook(void *arg, const struct fz_request *r, int *rc)
{
	(void)arg;
	if (r->op != FZ_CHECK)
		return FZ_APPLY;
	*rc = ZNOAUTH;
	return FZ_REFUSE;
}

static void test_heartbeat_refused_said(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	fz_set_hook(z, refuse_check_hook, NULL);
	struct refused_log k = { .z = z };
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.session_timeout_ms = 1000;
	o.log = refused_log_fn;
	o.log_data = &k;
	zkl_client *a;
	CHECK_OK(fz_client_open(z, &a, &o));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, a, "/locks/refused"));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), -1));
	fz_wait(z, refused_said, &k, "the refused heartbeat said");
	/* Nothing proves the session: it may be given up by now. */
	int rc = zkl_lock_release(zkl_mutex_lock(m));
	assert_true(rc == 0 || rc == ZKL_ELOST);
	zkl_mutex_free(m);
	zkl_client_close(a);
	fz_free(z);
}

/* ---- a request still out on a session the client gave up and retired: when the client
 * closes that session's handle (5 s after retiring it), the request ends as on an
 * expired session, and the acquisition goes on with the client's new session. It used
 * to end with ZKL_ECLOSED, the error of a client that closes (RELIABILITY.md, the
 * simulation's finding 6) ---- */

static void test_retired_session_closed(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *a;
	open_short(z, &a);
	zkl_mutex *ma;
	CHECK_OK(zkl_mutex_new(&ma, a, "/locks/retired"));
	zkl_lock *la = zkl_mutex_lock(ma);
	/* A round trip answered: the loss rule's clock runs from it. */
	CHECK_OK(zkl_lock_acquire(la, -1));
	CHECK_OK(zkl_lock_release(la));
	fzh_wait_children(z, "/locks/retired", 0);
	const int64_t sa = zkl_client_session_id(a);
	/* Nothing sent on that session is answered any more: the acquire's requests stay
	 * out while the loss rule moves the client to a new session, and until the client
	 * closes the old session's handle. */
	fz_pause(z, sa, true);
	struct fzh_acq w;
	fzh_acq_start(&w, z, la, 30000, 0);
	CHECK_OK(fzh_acq_wait(&w));
	assert_true(w.held);
	assert_int_not_equal(zkl_client_session_id(a), sa);
	CHECK_OK(fzh_acq_finish(&w));
	zkl_mutex_free(ma);
	zkl_client_close(a);
	fz_free(z);
}

/* ---- stray children are not contenders ---- */

static void test_stray_children(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/stray");
	pair_folder(&p);
	CHECK_OK(fz_create(p.z, "/locks/stray/config", "x", 0, 0, NULL, 0));
	/* Lock names with a number no server writes ("%010d"), made before ours. */
	CHECK_OK(fz_create(p.z, "/locks/stray/lock-12", "x", 0, 0, NULL, 0));
	CHECK_OK(fz_create(p.z, "/locks/stray/_c_x-lock-000000001x", "x", 0, 0, NULL, 0));
	CHECK_OK(zkl_lock_acquire(p.la, 0));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	assert_true(strstr(holder, "/_c_") != NULL);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.lb, -1, 0);
	fzh_wait_watched(p.z, holder, 1);
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&w));
	CHECK_OK(fzh_acq_finish(&w));
	fzh_wait_children(p.z, p.path, 3);
	pair_close(&p);
}

/* ---- sequence numbers wrap: the server's counter is a signed int printed "%010d", so
 * 2147483647 is followed by -2147483648, and -1 by 0; the queue order holds across
 * both ---- */

static void sequence_wrap(int32_t start, const char *seq[3])
{
	struct pair p;
	pair_open(&p, "/locks/wrap");
	pair_folder(&p);
	CHECK_OK(fz_set_cversion(p.z, p.path, start));
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char first[256], second[256];
	fzh_queue_node(p.z, p.path, 0, first, sizeof first);
	assert_non_null(strstr(first, seq[0]));
	struct fzh_acq wb, wc;
	fzh_acq_start(&wb, p.z, p.lb, -1, 0);
	fzh_wait_watched(p.z, first, 1);
	fzh_queue_node(p.z, p.path, 1, second, sizeof second);
	assert_non_null(strstr(second, seq[1]));
	fzh_acq_start(&wc, p.z, p.lc, -1, 0);
	/* The third took the number after the wrap: it queues last, behind the second. */
	fzh_wait_done_or_watched(p.z, &wc, second);
	assert_false(atomic_load(&wc.done));
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&wb));
	assert_false(atomic_load(&wc.done));
	CHECK_OK(fzh_acq_finish(&wb));
	CHECK_OK(fzh_acq_wait(&wc));
	assert_true(wc.token > wb.token);
	char third[256];
	fzh_queue_node(p.z, p.path, 0, third, sizeof third);
	assert_non_null(strstr(third, seq[2]));
	CHECK_OK(fzh_acq_finish(&wc));
	pair_close(&p);
}

static void test_sequence_wrap_sign(void **state)
{
	(void)state;
	const char *seq[3] = { "2147483646", "2147483647", "-2147483648" };
	sequence_wrap(INT32_MAX - 1, seq);
}

static void test_sequence_wrap_zero(void **state)
{
	(void)state;
	const char *seq[3] = { "-000000002", "-000000001", "0000000000" };
	sequence_wrap(-2, seq);
}

/* ---- the node to watch is gone before the watch is armed: look again, do not wait
 * for an event that cannot come ---- */

struct vanish {
	struct fz *z;
	const char *target;
	atomic_int fired;
};

static enum fz_action vanish_before_watch(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct vanish *v = arg;
	if (r->op == FZ_GET && r->watch && strcmp(r->path, v->target) == 0 &&
	    atomic_fetch_add(&v->fired, 1) == 0)
		CHECK_OK(fz_delete(v->z, v->target));
	return FZ_APPLY;
}

static void test_watch_target_vanishes(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/vanish");
	pair_folder(&p);
	char peer[256];
	CHECK_OK(fz_create(p.z, "/locks/vanish/_c_00000000-0000-0000-0000-000000000000-lock-",
	                   "peer", ZOO_EPHEMERAL_SEQUENTIAL, fz_peer(p.z), peer, sizeof peer));
	struct vanish v = { .z = p.z, .target = peer };
	fz_set_hook(p.z, vanish_before_watch, &v);
	CHECK_OK(zkl_lock_acquire(p.lb, 10000));
	fz_set_hook(p.z, NULL, NULL);
	assert_int_equal(atomic_load(&v.fired), 1);
	assert_int_equal(fz_watches(p.z, peer), 0);
	CHECK_OK(zkl_lock_release(p.lb));
	pair_close(&p);
}

/* ---- a blocking acquire from a callback on the client's event thread would wait for
 * that very thread: it fails at once ---- */

struct reacquire {
	struct fz *z;
	zkl_lock *l;
	atomic_int rc;
	atomic_bool called;
};

static void lost_then_acquire(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct reacquire *r = data;
	int rc = zkl_lock_acquire(r->l, -1);
	if (rc == 0)
		rc = zkl_lock_release(r->l);
	atomic_store(&r->rc, rc);
	atomic_store(&r->called, true);
	fz_poke(r->z);
}

static bool reacquired(void *arg)
{
	return atomic_load(&((struct reacquire *)arg)->called);
}

static void test_blocking_from_callback(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/from-callback");
	struct reacquire r = { .z = p.z, .l = p.lb };
	CHECK_OK(zkl_lock_on_lost(p.la, lost_then_acquire, &r));
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	/* The callback runs on a's event thread and acquires on client b: fine. */
	fz_expire(p.z, zkl_client_session_id(p.a));
	fz_wait(p.z, reacquired, &r, "the lost callback");
	CHECK_OK(atomic_load(&r.rc));
	assert_int_equal(zkl_lock_release(p.la), ZKL_ELOST);
	/* On a's own client, the same call cannot be served: it says so at once. */
	atomic_store(&r.called, false);
	r.l = p.la;
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	fz_expire(p.z, zkl_client_session_id(p.a));
	fz_wait(p.z, reacquired, &r, "the lost callback");
	assert_int_equal(atomic_load(&r.rc), ZKL_EDEADLK);
	assert_int_equal(zkl_lock_release(p.la), ZKL_ELOST);
	pair_close(&p);
}

/* ---- asynchronous acquires: the callback runs once, on the event thread ---- */

struct arec {
	struct fz *z;
	atomic_int calls;
	int rc;
	int order;              /* when it was granted, among the others */
	atomic_int *granted;    /* shared counter of grants */
	atomic_int *inside;     /* shared: holders inside right now */
	int64_t session;        /* if not 0: count its nodes at the callback */
	int nodes;
	bool release;           /* release in the callback */
	int release_rc;
	bool crowded;           /* someone else was inside the critical section */
	zkl_mutex *free_it;     /* free this handle (the one acquiring) in the callback */
	zkl_lock *blocking;     /* acquire this one (blocking) in the callback */
	int blocking_rc;
	char error[256];        /* zkl_last_error() in the callback, on failure */
};

static void arec_cb(zkl_lock *l, int rc, void *data)
{
	struct arec *r = data;
	r->rc = rc;
	if (rc != 0)
		snprintf(r->error, sizeof r->error, "%s", zkl_last_error());
	if (r->session)
		r->nodes = fz_ephemerals(r->z, r->session);
	if (rc == 0 && r->granted)
		r->order = atomic_fetch_add(r->granted, 1);
	if (rc == 0 && r->inside) {
		/* The critical section: nobody else in it. (Checked by the test: cmocka's
		 * asserts belong to the test's thread.) */
		r->crowded = atomic_fetch_add(r->inside, 1) != 0;
		atomic_fetch_sub(r->inside, 1);
	}
	if (r->blocking)
		r->blocking_rc = zkl_lock_acquire(r->blocking, -1);
	if (rc == 0 && r->release)
		r->release_rc = zkl_lock_release(l);
	if (r->free_it)
		zkl_mutex_free(r->free_it);
	atomic_fetch_add(&r->calls, 1);
	fz_poke(r->z);
}

static bool arec_called(void *arg)
{
	return atomic_load(&((struct arec *)arg)->calls) > 0;
}

static void arec_wait(struct arec *r)
{
	fz_wait(r->z, arec_called, r, "an acquire callback");
}

static void test_async_fifo(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	enum { N = 6 };
	zkl_mutex *m[N];
	struct arec r[N];
	atomic_int granted = 0, inside = 0;
	for (int i = 0; i < N; i++) {
		CHECK_OK(zkl_mutex_new(&m[i], c, "/locks/async"));
		r[i] = (struct arec){ .z = z, .granted = &granted, .inside = &inside, .release = true };
	}
	/* All from one thread, at once; each granted in turn, in the order they queued
	 * (which is the order they started, once the folder exists). */
	CHECK_OK(fz_create(z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(z, "/locks/async", NULL, ZOO_CONTAINER, 0, NULL, 0));
	for (int i = 0; i < N; i++)
		CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m[i]), -1, arec_cb, &r[i]));
	for (int i = 0; i < N; i++)
		arec_wait(&r[i]);
	for (int i = 0; i < N; i++) {
		CHECK_OK(r[i].rc);
		CHECK_OK(r[i].release_rc);
		assert_false(r[i].crowded);
		assert_int_equal(r[i].order, i);
		assert_int_equal(atomic_load(&r[i].calls), 1);
	}
	fzh_wait_children(z, "/locks/async", 0);
	for (int i = 0; i < N; i++)
		zkl_mutex_free(m[i]);
	zkl_client_close(c);
	for (int i = 0; i < N; i++)
		assert_int_equal(atomic_load(&r[i].calls), 1);
	fz_free(z);
}

/* ---- many acquisitions on a new path make its folder once ---- */

struct count_folders {
	atomic_int parents;   /* container creates of the folder's parent */
	atomic_int folders;   /* and of the folder */
	struct fz *z;
	int64_t session;
	int n;
};

static bool all_creates_queued(void *arg)
{
	struct count_folders *k = arg;
	return fz_queued(k->z, k->session, FZ_CREATE) == k->n;
}

static enum fz_action count_folder(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct count_folders *k = arg;
	if (r->op == FZ_CREATE && r->mode == ZOO_CONTAINER && strcmp(r->path, "/new") == 0)
		atomic_fetch_add(&k->parents, 1);
	if (r->op == FZ_CREATE && r->mode == ZOO_CONTAINER && strcmp(r->path, "/new/folder") == 0)
		atomic_fetch_add(&k->folders, 1);
	return FZ_APPLY;
}

/* Acquisitions started at once on a path whose folder (and its parent) is missing all
 * find it missing; one makes the chain while the others wait for it, instead of each
 * making it. Then each is granted in turn. */
static void test_new_folder_made_once(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	enum { N = 20 };
	zkl_mutex *m[N];
	struct arec r[N];
	atomic_int granted = 0, inside = 0;
	for (int i = 0; i < N; i++) {
		CHECK_OK(zkl_mutex_new(&m[i], c, "/new/folder"));
		r[i] = (struct arec){ .z = z, .granted = &granted, .inside = &inside, .release = true };
	}
	/* Every first create is out before the first answer: held back until all are. */
	struct count_folders k = { .z = z, .session = zkl_client_session_id(c), .n = N };
	fz_set_hook(z, count_folder, &k);
	fz_pause(z, k.session, true);
	for (int i = 0; i < N; i++)
		CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m[i]), -1, arec_cb, &r[i]));
	fz_wait(z, all_creates_queued, &k, "every first create");
	fz_pause(z, k.session, false);
	for (int i = 0; i < N; i++)
		arec_wait(&r[i]);
	fz_set_hook(z, NULL, NULL);
	for (int i = 0; i < N; i++) {
		CHECK_OK(r[i].rc);
		CHECK_OK(r[i].release_rc);
		assert_false(r[i].crowded);
		assert_int_equal(atomic_load(&r[i].calls), 1);
	}
	/* One acquisition made the chain: "/new" once (after the folder's NONODE), and the
	 * folder twice (the first try, and again once its parent exists). An acquisition
	 * whose NONODE the loop takes up after the chain was made (how many depends on the
	 * machine's load) tries the folder once more (NODEEXISTS), but never its parent:
	 * each making the chain itself makes the parent 20 times. */
	assert_int_equal(atomic_load(&k.parents), 1);
	assert_true(atomic_load(&k.folders) >= 2);
	assert_true(atomic_load(&k.folders) <= N);
	for (int i = 0; i < N; i++)
		zkl_mutex_free(m[i]);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- a release in a callback never holds up the loop ---- */

/* Holds back the first request of a session of one kind (a create: a sequential one). */
struct hold_first {
	int64_t session;
	int op;
	atomic_int held;
};


/* The first request of k's kind held back: the hook has seen it, and the fake has put
 * it back in the session's queue (it takes it out to ask the hook). */
struct held_back {
	struct fz *z;
	struct hold_first *k;
};

static bool first_held_back(void *arg)
{
	struct held_back *h = arg;
	return atomic_load(&h->k->held) > 0 && fz_queued(h->z, h->k->session, h->k->op) == 1;
}

static enum fz_action hold_first_request(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct hold_first *k = arg;
	if (r->session == k->session && (int)r->op == k->op &&
	    (r->op != FZ_CREATE || (r->mode & ZOO_SEQUENCE)) && atomic_fetch_add(&k->held, 1) == 0)
		return FZ_PAUSE;
	return FZ_APPLY;
}

/* A client whose releases wait for the delete's answer (confirm_release). */
static zkl_client *open_confirming(struct fz *z)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.confirm_release = true;
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, &o));
	return c;
}

/* With confirm_release, a release waits for the delete's answer, except on the client's
 * loop: a callback that releases returns at once, while the delete is held back, and the
 * node goes once it is let through. (Waiting there would stop every other acquisition,
 * callback and heartbeat of the client meanwhile.) */
static void test_release_in_callback_does_not_wait(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c = open_confirming(z);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/locks/release-in-callback"));
	struct hold_first k = { .session = zkl_client_session_id(c), .op = FZ_DELETE };
	fz_set_hook(z, hold_first_request, &k);
	struct arec r = { .z = z, .release = true };
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), -1, arec_cb, &r));
	arec_wait(&r); /* the callback returned: its release did not wait for the answer */
	CHECK_OK(r.rc);
	CHECK_OK(r.release_rc);
	struct held_back hb = { z, &k };
	fz_wait(z, first_held_back, &hb, "the delete held back");
	fz_pause(z, k.session, false);
	fzh_wait_children(z, "/locks/release-in-callback", 0);
	fz_set_hook(z, NULL, NULL);
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- only the loop sends ----
 * Each blocking call of an application thread that needs an answer from ZooKeeper has
 * the loop send its requests; fz_free() aborts if any came from another thread. These
 * are the calls whose requests are not an acquisition's: a confirmed release, the
 * participants' listing and reads, a downgrade's read node, a record's write and read,
 * a revocation request, and a semaphore's shared count. */
static void test_only_the_loop_sends(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c = open_confirming(z);

	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, c, "/locks/only-loop"));
	zkl_lock *wr = zkl_mutex_lock(zkl_rwlock_write(rw));
	zkl_lock *rd = zkl_mutex_lock(zkl_rwlock_read(rw));
	CHECK_OK(zkl_lock_acquire(wr, -1));
	CHECK_OK(zkl_lock_acquire(rd, -1)); /* a downgrade: a read node at the writer's place */
	zkl_participant *p;
	size_t n;
	CHECK_OK(zkl_lock_participants(rd, &p, &n));
	assert_int_equal(n, 2);
	assert_true(p[0].holder);
	zkl_participants_free(p, n);
	CHECK_OK(zkl_lock_release(wr)); /* confirmed: waits for the delete's answer */
	assert_int_equal(children(z, "/locks/only-loop"), 1);
	CHECK_OK(zkl_lock_release(rd));
	assert_int_equal(children(z, "/locks/only-loop"), 0);

	CHECK_OK(zkl_record_set(c, "/locks/only-loop-record", "abc", 3));
	char *data;
	size_t len;
	CHECK_OK(zkl_record_get(c, "/locks/only-loop-record", &data, &len, NULL));
	assert_int_equal(len, 3);
	assert_memory_equal(data, "abc", 3);
	free(data);

	zkl_semaphore *sem;
	CHECK_OK(zkl_semaphore_new_shared(&sem, c, "/locks/only-loop-sem", "/locks/only-loop-count",
	                                  2));
	zkl_lock *ls = zkl_semaphore_lock(sem);
	CHECK_OK(zkl_lock_acquire(ls, -1));
	char node[256];
	assert_true(zkl_lock_node(ls, node, sizeof node) > 0);
	CHECK_OK(zkl_revoke(c, node));
	CHECK_OK(zkl_lock_release(ls));
	zkl_semaphore_free(sem);

	zkl_rwlock_free(rw);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- a callback cannot wait for an answer ----
 * Answers reach a client's waiting threads through its loop: a callback on the loop's
 * own thread that waited for one would wait for itself. Each blocking call that needs
 * an answer fails there at once with ZKL_EDEADLK, and does nothing. */
struct waits_in_callback {
	struct fz *z;
	zkl_client *c;
	atomic_int calls;
	int rc;
	int participants, revoke, inspect, record, count;
};

static void waits_cb(zkl_lock *l, int rc, void *data)
{
	struct waits_in_callback *w = data;
	w->rc = rc;
	zkl_participant *p = NULL;
	size_t n = 0;
	w->participants = zkl_lock_participants(l, &p, &n);
	zkl_participants_free(p, n);
	char node[256];
	w->revoke = zkl_lock_node(l, node, sizeof node) > 0 ? zkl_revoke(w->c, node) : -1;
	zkl_inspection *in = NULL;
	w->inspect = zkl_inspect(w->c, zkl_lock_path(l), 5000, &in);
	zkl_inspection_free(in);
	w->record = zkl_record_set(w->c, "/locks/waits-record", "x", 1);
	int32_t v;
	w->count = zkl_shared_count_get(w->c, "/locks/waits-count", &v);
	atomic_fetch_add(&w->calls, 1);
	fz_poke(w->z);
}

static bool waits_called(void *arg)
{
	return atomic_load(&((struct waits_in_callback *)arg)->calls) > 0;
}

static void test_no_wait_in_callback(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	struct waits_in_callback w = { .z = z };
	CHECK_OK(fz_client_open(z, &w.c, NULL));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, w.c, "/locks/waits"));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire_async(l, -1, waits_cb, &w));
	fz_wait(z, waits_called, &w, "the acquired callback");
	CHECK_OK(w.rc);
	assert_int_equal(w.participants, ZKL_EDEADLK);
	assert_int_equal(w.revoke, ZKL_EDEADLK);
	assert_int_equal(w.inspect, ZKL_EDEADLK);
	assert_int_equal(w.record, ZKL_EDEADLK);
	assert_int_equal(w.count, ZKL_EDEADLK);
	assert_false(fz_stat(z, "/locks/waits-record", NULL));
	/* Nothing was written into the holder's node: it is still held, unrevoked. */
	assert_true(zkl_lock_is_held(l));
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(w.c);
	fz_free(z);
}

/* ---- our own nodes on their way out are no contenders ---- */

static atomic_int refusing, refused;

static enum fz_action refuse_deletes(void *arg, const struct fz_request *r, int *rc)
{
	(void)arg;
	if (r->op != FZ_DELETE || !atomic_load(&refusing))
		return FZ_APPLY;
	atomic_fetch_add(&refused, 1);
	*rc = ZOPERATIONTIMEOUT; /* not applied, may have been: retried in the background */
	return FZ_REFUSE;
}

static bool deletes_retried(void *arg)
{
	return atomic_load(&refused) >= *(int *)arg;
}

/* A node of ours whose delete is on its way (here refused, and retried in the
 * background) is no contender: a new acquire on the same path holds at once, with that
 * node still ahead of it in the listing. Over 100 folders, so that the client's index
 * of pending deletes by folder grows and each listing finds only its own folder's. */
static void test_own_leaving_nodes_skipped(void **state)
{
	(void)state;
	enum { N = 100 };
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	zkl_mutex *m[N];
	char path[N][64];
	for (int i = 0; i < N; i++) {
		snprintf(path[i], sizeof path[i], "/locks/leaving/l%d", i);
		CHECK_OK(zkl_mutex_new(&m[i], c, path[i]));
	}
	atomic_store(&refused, 0);
	atomic_store(&refusing, 1);
	fz_set_hook(z, refuse_deletes, NULL);
	for (int i = 0; i < N; i++) {
		CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m[i]), 5000));
		CHECK_OK(zkl_lock_release(zkl_mutex_lock(m[i])));
	}
	int want = N;
	fz_wait(z, deletes_retried, &want, "every delete refused once");
	for (int i = 0; i < N; i++) {
		/* One round trip: no wait for the old node to go. */
		CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m[i]), 0));
		assert_int_equal(children(z, path[i]), 2);
	}
	atomic_store(&refusing, 0);
	for (int i = 0; i < N; i++) {
		CHECK_OK(zkl_lock_release(zkl_mutex_lock(m[i])));
		fzh_wait_children(z, path[i], 0);
	}
	fz_set_hook(z, NULL, NULL);
	for (int i = 0; i < N; i++)
		zkl_mutex_free(m[i]);
	zkl_client_close(c);
	fz_free(z);
}

/* An inspection leaves our own node out while its delete is on its way (here refused,
 * and retried in the background), as the queue does: the listing's answer marks it on
 * the loop. Another client, which has no such delete, sees the node. Through a path's
 * inspection and a prefix's walk alike. */
static void test_inspect_leaves_out_own_leaving_node(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c, *other;
	CHECK_OK(fz_client_open(z, &c, NULL));
	CHECK_OK(fz_client_open(z, &other, NULL));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/locks/inspect-leaving/l"));
	atomic_store(&refused, 0);
	atomic_store(&refusing, 1);
	fz_set_hook(z, refuse_deletes, NULL);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), 5000));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	int want = 1;
	fz_wait(z, deletes_retried, &want, "the delete refused once");
	assert_int_equal(children(z, "/locks/inspect-leaving/l"), 1);
	zkl_inspection *in;
	for (int prefix = 0; prefix < 2; prefix++) {
		CHECK_OK(prefix ? zkl_inspect_prefix(c, "/locks/inspect-leaving", 5000, &in)
		                : zkl_inspect(c, "/locks/inspect-leaving/l", 5000, &in));
		assert_int_equal(zkl_inspection_nodes(in), 0);
		zkl_inspection_free(in);
		CHECK_OK(prefix ? zkl_inspect_prefix(other, "/locks/inspect-leaving", 5000, &in)
		                : zkl_inspect(other, "/locks/inspect-leaving/l", 5000, &in));
		assert_int_equal(zkl_inspection_nodes(in), 1);
		zkl_inspection_free(in);
	}
	atomic_store(&refusing, 0);
	fzh_wait_children(z, "/locks/inspect-leaving/l", 0);
	fz_set_hook(z, NULL, NULL);
	zkl_mutex_free(m);
	zkl_client_close(other);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- a latch's view: a cancel, then its deadline, while the queue's create is out ---- */

/* The view's acquire is cancelled while its node's create is out (held back), and its
 * deadline passes before the create is answered; woken then, the election waits for the
 * queue's end. Once the create is let through, the callback says ZKL_ECANCELED once and
 * the node is gone. (Woken past its deadline, the election used to ask the loop to run
 * it again at that passed time, which the loop did at once, again and again: the
 * simulation hung on it. Here the spin ends when the answer comes, so this test checks
 * the outcome; tests/sim covers the spin.) */
static void test_leader_view_cancel_then_deadline(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	CHECK_OK(fz_create(z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(z, "/locks/leader-cancel", NULL, ZOO_CONTAINER, 0, NULL, 0));
	zkl_leader *ld;
	CHECK_OK(zkl_leader_new(&ld, c, "/locks/leader-cancel", NULL));
	zkl_lock *l = zkl_leader_lock(ld);
	struct hold_first k = { .session = zkl_client_session_id(c), .op = FZ_CREATE };
	fz_set_hook(z, hold_first_request, &k);
	struct arec r = { .z = z };
	CHECK_OK(zkl_lock_acquire_async(l, 100, arec_cb, &r));
	struct held_back hb = { z, &k };
	fz_wait(z, first_held_back, &hb, "the node's create held back");
	zkl_lock_cancel(l);
	/* Past the 100 ms deadline, the create still held (time passing is the point), the
	 * election runs again: a second cancel wakes it. */
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	zkl_lock_cancel(l);
	fz_pause(z, k.session, false);
	arec_wait(&r);
	assert_int_equal(r.rc, ZKL_ECANCELED);
	assert_int_equal(atomic_load(&r.calls), 1);
	fzh_wait_children(z, "/locks/leader-cancel", 0);
	assert_int_equal(atomic_load(&k.held), 1);
	fz_set_hook(z, NULL, NULL);
	zkl_leader_free(ld);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- a leader's node: what the hold made at the grant tells the election ---- */

/* What a latch's callbacks saw. */
struct latch_rec {
	struct fz *z;
	atomic_int gained, lost;
	_Atomic int64_t token;    /* at the last gained */
	atomic_int reason;        /* at the last lost */
};

static void latch_rec_gained(zkl_leader *l, void *data)
{
	struct latch_rec *r = data;
	atomic_store(&r->token, zkl_lock_token(zkl_leader_lock(l)));
	atomic_fetch_add(&r->gained, 1);
	fz_poke(r->z);
}

static void latch_rec_lost(zkl_leader *l, int reason, void *data)
{
	(void)l;
	struct latch_rec *r = data;
	atomic_store(&r->reason, reason);
	atomic_fetch_add(&r->lost, 1);
	fz_poke(r->z);
}

static zkl_leader *latch_rec_open(zkl_client *c, const char *path, struct latch_rec *r)
{
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.on_gained = latch_rec_gained;
	o.on_lost = latch_rec_lost;
	o.data = r;
	zkl_leader *l;
	CHECK_OK(zkl_leader_new(&l, c, path, &o));
	return l;
}

static bool latch_gained_once(void *arg)
{
	return atomic_load(&((struct latch_rec *)arg)->gained) >= 1;
}

static bool latch_lost_once(void *arg)
{
	return atomic_load(&((struct latch_rec *)arg)->lost) >= 1;
}

/* The first exists of session on a node in folder finds that node deleted and one of
 * its name made again by another session (peer). */
struct swap_owner {
	struct fz *z;
	int64_t session, peer;
	const char *folder;
	atomic_int done;
	int64_t czxid;            /* of the node before it was made again */
};

static enum fz_action swap_owner_hook(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct swap_owner *k = arg;
	const size_t n = strlen(k->folder);
	struct Stat st;
	if (r->session != k->session || r->op != FZ_EXISTS || strncmp(r->path, k->folder, n) != 0 ||
	    r->path[n] != '/' || atomic_load(&k->done) || !fz_stat(k->z, r->path, &st))
		return FZ_APPLY;
	k->czxid = st.czxid;
	CHECK_OK(fz_delete(k->z, r->path));
	CHECK_OK(fz_create(k->z, r->path, "someone else", ZOO_EPHEMERAL, k->peer, NULL, 0));
	atomic_store(&k->done, 1);
	return FZ_APPLY;
}

/* Leadership is announced only on a node shown ours: the hold's watch finds the node,
 * granted, owned by another session (ours deleted and its name made again), so the hold
 * is lost, nothing is announced on it, and the latch leads only on a node it made
 * again. (The election reads its node's owner from the hold's exists: without that
 * look, it would lead on a node that is not its own.) */
static void test_leader_node_not_ours(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	const char *path = "/locks/leader-not-ours";
	CHECK_OK(fz_create(z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(z, path, NULL, ZOO_CONTAINER, 0, NULL, 0));
	struct latch_rec r = { .z = z };
	zkl_leader *l = latch_rec_open(c, path, &r);
	struct swap_owner k = { .z = z, .session = zkl_client_session_id(c), .peer = fz_peer(z),
	                        .folder = path };
	fz_set_hook(z, swap_owner_hook, &k);
	CHECK_OK(zkl_leader_start(l));
	fz_wait(z, latch_gained_once, &r, "the latch leads");
	assert_int_equal(atomic_load(&k.done), 1);
	assert_true(atomic_load(&r.token) != k.czxid);
	assert_int_equal(atomic_load(&r.gained), 1);
	assert_int_equal(atomic_load(&r.lost), 0);
	fz_set_hook(z, NULL, NULL);
	zkl_leader_free(l);
	zkl_client_close(c);
	fz_free(z);
}

/* A leader's node deleted from outside: the hold's watch on it tells the latch, which
 * loses leadership with ZKL_ENOTHELD (not with the session) and leads again on a new
 * node. */
static void test_leader_node_deleted_hold(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	const char *path = "/locks/leader-deleted";
	struct latch_rec r = { .z = z };
	zkl_leader *l = latch_rec_open(c, path, &r);
	CHECK_OK(zkl_leader_start(l));
	fz_wait(z, latch_gained_once, &r, "the latch leads");
	const int64_t token = atomic_load(&r.token);
	char node[256];
	assert_true(zkl_lock_node(zkl_leader_lock(l), node, sizeof node) > 0);
	CHECK_OK(fz_delete(z, node));
	fz_wait(z, latch_lost_once, &r, "the latch is told");
	assert_int_equal(atomic_load(&r.reason), ZKL_ENOTHELD);
	CHECK_OK(zkl_leader_await(l, 10000));
	assert_true(zkl_lock_token(zkl_leader_lock(l)) > token);
	zkl_leader_free(l);
	zkl_client_close(c);
	fz_free(z);
}

/* The first exists of session: its session ends right then (a close from elsewhere
 * after it deleted the session's nodes), and the exists is refused as expired. */
struct end_on_exists {
	struct fz *z;
	int64_t session;
	atomic_int done;
};

static enum fz_action end_on_exists_hook(void *arg, const struct fz_request *r, int *rc)
{
	struct end_on_exists *k = arg;
	if (r->session != k->session || r->op != FZ_EXISTS || atomic_fetch_add(&k->done, 1) != 0)
		return FZ_APPLY;
	fz_expire(k->z, k->session);
	*rc = ZSESSIONEXPIRED;
	return FZ_REFUSE;
}

/* The leader's node goes and its session ends right after (as when the session is
 * closed from elsewhere: its ephemeral nodes go first, and the watch on the node hears
 * of it): the loss is the session's, ZKL_ELOST, not a deletion from outside. (Taken
 * from the watch's event alone, it would be told as ZKL_ENOTHELD.) */
static void test_leader_node_gone_with_session(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	const char *path = "/locks/leader-gone-with-session";
	struct latch_rec r = { .z = z };
	zkl_leader *l = latch_rec_open(c, path, &r);
	CHECK_OK(zkl_leader_start(l));
	fz_wait(z, latch_gained_once, &r, "the latch leads");
	char node[256];
	assert_true(zkl_lock_node(zkl_leader_lock(l), node, sizeof node) > 0);
	struct end_on_exists k = { .z = z, .session = zkl_client_session_id(c) };
	fz_set_hook(z, end_on_exists_hook, &k);
	CHECK_OK(fz_delete(z, node));
	fz_wait(z, latch_lost_once, &r, "the latch is told");
	assert_int_equal(atomic_load(&r.reason), ZKL_ELOST);
	assert_int_equal(atomic_load(&k.done), 1);
	fz_set_hook(z, NULL, NULL);
	zkl_leader_free(l);
	zkl_client_close(c);
	fz_free(z);
}

struct reproof {
	struct latch_rec *r;
	struct hold_first *k;
};

static bool reproof_held_or_led(void *arg)
{
	struct reproof *p = arg;
	return atomic_load(&p->r->lost) >= 1 &&
	       (atomic_load(&p->k->held) > 0 || atomic_load(&p->r->gained) >= 2);
}

static bool latch_gained_twice(void *arg)
{
	return atomic_load(&((struct latch_rec *)arg)->gained) >= 2;
}

/* A latch that keeps its node through a suspension leads again only once the node is
 * shown its own again: the exists sent after the connection is back (held here) must
 * be answered first. (Without that look it would lead again as soon as it reconnects,
 * on a node that may have gone meanwhile.) */
static void test_leader_proves_again_after_suspension(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	const char *path = "/locks/leader-reproof";
	struct latch_rec r = { .z = z };
	zkl_leader *l = latch_rec_open(c, path, &r);
	CHECK_OK(zkl_leader_start(l));
	fz_wait(z, latch_gained_once, &r, "the latch leads");
	const int64_t token = atomic_load(&r.token);
	const int64_t sid = zkl_client_session_id(c);
	struct hold_first k = { .session = sid, .op = FZ_EXISTS };
	fz_set_hook(z, hold_first_request, &k);
	fz_drop(z, sid);
	struct reproof p = { &r, &k };
	fz_wait(z, reproof_held_or_led, &p, "the latch suspended, and its node looked at");
	assert_int_equal(atomic_load(&r.reason), ZKL_ECONNLOSS);
	assert_int_equal(atomic_load(&r.gained), 1);
	assert_false(zkl_lock_is_held(zkl_leader_lock(l)));
	fz_set_hook(z, NULL, NULL);
	fz_pause(z, sid, false);
	fz_wait(z, latch_gained_twice, &r, "the latch leads again");
	assert_int_equal(atomic_load(&r.token), token); /* the same node */
	zkl_leader_free(l);
	zkl_client_close(c);
	fz_free(z);
}

static void test_async_cancel_timeout_busy(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/async-cancel");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	const int64_t sb = zkl_client_session_id(p.b);
	/* Cancel: ECANCELED, with its node gone before the callback runs. */
	struct arec r = { .z = p.z, .session = sb };
	CHECK_OK(zkl_lock_acquire_async(p.lb, -1, arec_cb, &r));
	assert_int_equal(zkl_lock_acquire_async(p.lb, -1, arec_cb, &r), ZKL_EBUSY);
	fzh_wait_watched(p.z, holder, 1);
	zkl_lock_cancel(p.lb);
	arec_wait(&r);
	assert_int_equal(r.rc, ZKL_ECANCELED);
	assert_int_equal(r.nodes, 0);
	/* Timeout: ETIMEDOUT, the same. */
	struct arec t = { .z = p.z, .session = sb };
	CHECK_OK(zkl_lock_acquire_async(p.lb, 50, arec_cb, &t));
	arec_wait(&t);
	assert_int_equal(t.rc, ZKL_ETIMEDOUT);
	assert_int_equal(t.nodes, 0);
	/* Held: busy until released, from any thread. */
	struct arec h = { .z = p.z };
	CHECK_OK(zkl_lock_acquire_async(p.lb, -1, arec_cb, &h));
	fzh_wait_watched(p.z, holder, 1);
	CHECK_OK(zkl_lock_release(p.la));
	arec_wait(&h);
	CHECK_OK(h.rc);
	assert_true(zkl_lock_is_held(p.lb));
	assert_true(zkl_lock_token(p.lb) > 0);
	assert_int_equal(zkl_lock_acquire_async(p.lb, -1, arec_cb, &h), ZKL_EBUSY);
	CHECK_OK(zkl_lock_release(p.lb));
	assert_false(zkl_lock_is_held(p.lb));
	assert_int_equal(zkl_lock_release(p.lb), ZKL_ENOTOWNER);
	assert_int_equal(atomic_load(&r.calls) + atomic_load(&t.calls) + atomic_load(&h.calls), 3);
	pair_close(&p);
}

/* A callback that keeps the loop's thread until the test lets it go. */
struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool inside, open;
	int rc;
};

static void gate_cb(zkl_lock *l, int rc, void *data)
{
	(void)l;
	struct gate *g = data;
	pthread_mutex_lock(&g->mu);
	g->rc = rc;
	g->inside = true;
	pthread_cond_broadcast(&g->cv);
	while (!g->open)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

/* Keeps the loop of l's client in gate_cb, l acquired: returns once it is there. */
static void gate_enter(struct gate *g, zkl_lock *l)
{
	*g = (struct gate){ .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	CHECK_OK(zkl_lock_acquire_async(l, -1, gate_cb, g));
	pthread_mutex_lock(&g->mu);
	while (!g->inside)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	CHECK_OK(g->rc);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->open = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* An application thread's acquire and cancel reach the loop in the order they were
 * made, even while the loop is busy (here: in a callback) and cannot take them yet: the
 * cancel finds the acquire it follows, which ends ECANCELED with nothing left behind,
 * instead of queueing behind a holder for good. */
static void test_cancel_follows_queued_acquire(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/call-order");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	zkl_mutex *busy;
	CHECK_OK(zkl_mutex_new(&busy, p.b, "/locks/call-gate"));
	struct gate g;
	gate_enter(&g, zkl_mutex_lock(busy));
	/* b's loop is in gate_cb: both calls wait for it, in order. */
	struct arec r = { .z = p.z };
	CHECK_OK(zkl_lock_acquire_async(p.lb, -1, arec_cb, &r));
	zkl_lock_cancel(p.lb);
	gate_open(&g);
	arec_wait(&r);
	assert_int_equal(r.rc, ZKL_ECANCELED);
	assert_int_equal(atomic_load(&r.calls), 1);
	assert_int_equal(children(p.z, p.path), 1); /* a's, and nothing of b's */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(busy)));
	zkl_mutex_free(busy);
	CHECK_OK(zkl_lock_release(p.la));
	pair_close(&p);
}

/* A release's delete that the C client refuses (its session expired, which the loop has
 * not heard yet: it is busy in a callback) is the loop's all the same: once the loop
 * runs, the session is replaced, the task dropped with it, and the client works on. */
static void test_release_refused(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/release-refused");
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	const int64_t old = zkl_client_session_id(p.a);
	zkl_mutex *busy;
	CHECK_OK(zkl_mutex_new(&busy, p.a, "/locks/release-refused-gate"));
	struct gate g;
	gate_enter(&g, zkl_mutex_lock(busy));
	fz_expire(p.z, old);
	/* a's loop has not heard of the expiry: the release sends its delete itself, and
	 * the C client refuses it. */
	int rc = zkl_lock_release(p.la);
	assert_true(rc == 0 || rc == ZKL_ELOST);
	gate_open(&g);
	CHECK_OK(zkl_lock_acquire(p.lb, -1));
	CHECK_OK(zkl_lock_release(p.lb));
	fzh_wait_children(p.z, p.path, 0);
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	assert_true(zkl_client_session_id(p.a) != old);
	CHECK_OK(zkl_lock_release(p.la));
	zkl_mutex_free(busy); /* its hold went with the old session */
	pair_close(&p);
}

static void test_async_callback_calls(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/async-calls");
	/* A blocking acquire in the callback cannot be served on that thread: EDEADLK. */
	struct arec r = { .z = p.z, .release = true };
	zkl_mutex *other;
	CHECK_OK(zkl_mutex_new(&other, p.a, "/locks/other"));
	r.blocking = zkl_mutex_lock(other);
	CHECK_OK(zkl_lock_acquire_async(p.la, -1, arec_cb, &r));
	arec_wait(&r);
	CHECK_OK(r.rc);
	CHECK_OK(r.release_rc);
	assert_int_equal(r.blocking_rc, ZKL_EDEADLK);
	zkl_mutex_free(other);
	/* Freeing the handle in its own callback ends its hold. */
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, p.b, p.path));
	struct arec f = { .z = p.z, .free_it = m };
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), -1, arec_cb, &f));
	arec_wait(&f);
	CHECK_OK(f.rc);
	fzh_wait_children(p.z, p.path, 0);
	/* Freeing a handle with an acquire under way cancels it, and waits for its
	 * callback. */
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	CHECK_OK(zkl_mutex_new(&m, p.b, p.path));
	struct arec g = { .z = p.z, .session = zkl_client_session_id(p.b) };
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(m), -1, arec_cb, &g));
	fzh_wait_watched(p.z, holder, 1);
	zkl_mutex_free(m);
	assert_int_equal(atomic_load(&g.calls), 1);
	assert_int_equal(g.rc, ZKL_ECANCELED);
	assert_int_equal(g.nodes, 0);
	CHECK_OK(zkl_lock_release(p.la));
	pair_close(&p);
}

/* ---- a list whose answer is lost: recover and list again ---- */

/* The lists a session sent, counted by a hook. */
struct list_count {
	int64_t session;
	atomic_int lists;
};

static enum fz_action lose_first_list(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct list_count *l = arg;
	if (r->op == FZ_CHILDREN && r->session == l->session &&
	    atomic_fetch_add(&l->lists, 1) == 0)
		return FZ_LOSE;
	return FZ_APPLY;
}

static void test_list_answer_lost(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/lost-list");
	pair_folder(&p);
	CHECK_OK(zkl_lock_acquire(p.la, -1));
	struct list_count l = { .session = zkl_client_session_id(p.b) };
	fz_set_hook(p.z, lose_first_list, &l);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.lb, 10000, 0);
	char holder[256];
	fzh_queue_node(p.z, p.path, 0, holder, sizeof holder);
	fzh_wait_done_or_watched(p.z, &w, holder);
	assert_false(atomic_load(&w.done));
	CHECK_OK(zkl_lock_release(p.la));
	CHECK_OK(fzh_acq_wait(&w));
	fz_set_hook(p.z, NULL, NULL);
	assert_true(atomic_load(&l.lists) >= 2);
	CHECK_OK(fzh_acq_finish(&w));
	pair_close(&p);
}

/* ---- a thread's requests are jobs of the loop: retried through connection loss ----
 * A confirmed release and a downgrade's read node are jobs the loop runs while the
 * calling thread waits. A delete or a create applied whose answer is lost is sent again
 * once the connection is back: the delete then finds the node gone (done), the create
 * finds it there, owned by our session (ours). */
struct lose_one {
	int64_t session;
	enum fz_op op;
	const char *mark;     /* only a request whose path has this in it */
	atomic_int seen;
};

static enum fz_action lose_one_request(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct lose_one *k = arg;
	if (r->session != k->session || r->op != k->op || !strstr(r->path, k->mark))
		return FZ_APPLY;
	return atomic_fetch_add(&k->seen, 1) == 0 ? FZ_LOSE : FZ_APPLY;
}

static void test_confirmed_release_answer_lost(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c = open_confirming(z);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, "/locks/release-lost"));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, -1));
	assert_int_equal(children(z, "/locks/release-lost"), 1);
	struct lose_one k = { .session = zkl_client_session_id(c), .op = FZ_DELETE,
	                      .mark = "/locks/release-lost/" };
	fz_set_hook(z, lose_one_request, &k);
	/* Confirmed: the answer that was lost is asked for again, and the node is gone. */
	CHECK_OK(zkl_lock_release(l));
	assert_int_equal(children(z, "/locks/release-lost"), 0);
	assert_int_equal(atomic_load(&k.seen), 2);
	fz_set_hook(z, NULL, NULL);
	assert_false(zkl_lock_is_held(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
}

static void test_downgrade_answer_lost(void **state)
{
	(void)state;
	struct downgrade d;
	downgrade_open(&d, "/locks/rw-lost");
	struct lose_one k = { .session = zkl_client_session_id(d.a), .op = FZ_CREATE,
	                      .mark = "__READ__" };
	fz_set_hook(d.z, lose_one_request, &k);
	/* The read node was made, its answer lost: the retry finds it, ours, and holds. */
	CHECK_OK(zkl_lock_acquire(d.read_a, 5000));
	fz_set_hook(d.z, NULL, NULL);
	assert_int_equal(atomic_load(&k.seen), 2);
	assert_true(zkl_lock_is_held(d.read_a));
	char reader[256];
	fzh_queue_node(d.z, d.path, 1, reader, sizeof reader);
	assert_non_null(strstr(reader, "__READ__"));
	assert_int_equal(fz_ephemerals(d.z, zkl_client_session_id(d.a)), 2);
	/* It holds as a reader: the waiting writer still waits for it. */
	CHECK_OK(zkl_lock_release(d.write_a));
	fzh_wait_done_or_watched(d.z, &d.w, reader);
	assert_false(atomic_load(&d.w.done));
	CHECK_OK(zkl_lock_release(d.read_a));
	CHECK_OK(fzh_acq_wait(&d.w));
	assert_true(d.w.held);
	downgrade_close(&d);
}

/* ---- a session the handle has seen expire is not connected ----
 * Once the C client has seen its session expire it refuses every request with
 * ZINVALIDSTATE, and the expiry event reaches the loop after. Until it does, an
 * acquisition that waits for the connection must not take the session for connected:
 * it would list again at once, be refused at once, and so on, past its deadline (with
 * the real client, refused on the spot, the loop itself would spin). */
static enum fz_action refuse_lists_invalid(void *arg, const struct fz_request *r, int *rc)
{
	struct list_count *k = arg;
	if (r->op != FZ_CHILDREN || r->session != k->session)
		return FZ_APPLY;
	atomic_fetch_add(&k->lists, 1);
	*rc = ZINVALIDSTATE;
	return FZ_REFUSE;
}

static void test_expired_handle_not_connected(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p, "/locks/expired-handle");
	pair_folder(&p);
	CHECK_OK(zkl_lock_acquire(p.lb, -1));
	struct list_count k = { .session = zkl_client_session_id(p.a) };
	fz_set_hook(p.z, refuse_lists_invalid, &k);
	struct fzh_acq w;
	fzh_acq_start(&w, p.z, p.la, 1500, 0);
	assert_int_equal(fzh_acq_wait(&w), ZKL_ETIMEDOUT);
	/* One list, refused; then a wait for the session, not a storm of lists. */
	assert_int_equal(atomic_load(&k.lists), 1);
	fz_set_hook(p.z, NULL, NULL);
	CHECK_OK(fzh_acq_finish(&w));
	CHECK_OK(zkl_lock_release(p.lb));
	pair_close(&p);
}

/* ---- a semaphore's asynchronous start never blocks: the count recorded at its path is
 * read on the loop, and a count that differs comes through the callback ---- */

struct pause_get {
	struct fz *z;
	int64_t session;
	const char *path;
	atomic_int paused;
};

static enum fz_action pause_count_read(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct pause_get *p = arg;
	if (r->op == FZ_GET && r->session == p->session && strcmp(r->path, p->path) == 0 &&
	    atomic_fetch_add(&p->paused, 1) == 0) {
		fz_poke(p->z);
		return FZ_PAUSE;
	}
	return FZ_APPLY;
}

struct chain {
	struct fz *z;
	zkl_lock *next;         /* started asynchronously from the callback */
	struct arec *rec;
	atomic_int start_rc;
	atomic_bool started;
};

static void start_in_callback(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	struct chain *ch = data;
	atomic_store(&ch->start_rc, zkl_lock_acquire_async(ch->next, -1, arec_cb, ch->rec));
	atomic_store(&ch->started, true);
	fz_poke(ch->z);
}

static bool chain_started(void *arg)
{
	return atomic_load(&((struct chain *)arg)->started);
}

static void test_semaphore_start_on_loop(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *a;
	open_short(z, &a);
	const int64_t sa = zkl_client_session_id(a);
	/* A hold on a, which must be told "lost" before the server may expire a's session. */
	zkl_semaphore_mutex *held;
	CHECK_OK(zkl_semaphore_mutex_new(&held, a, "/locks/loop-held"));
	zkl_lock *lh = zkl_semaphore_mutex_lock(held);
	struct fzh_count lost = { .z = z, .session = sa };
	CHECK_OK(zkl_lock_on_lost(lh, fzh_on_lost, &lost));
	CHECK_OK(zkl_lock_acquire(lh, -1));
	/* A callback on a's loop starts an asynchronous acquire of a fresh semaphore, whose
	 * count read the server never answers (the session is paused on it). */
	struct pause_get pg = { .z = z, .session = sa, .path = "/locks/loop-sem" };
	fz_set_hook(z, pause_count_read, &pg);
	zkl_semaphore *sem;
	CHECK_OK(zkl_semaphore_new(&sem, a, pg.path, 2));
	zkl_mutex *trigger;
	CHECK_OK(zkl_mutex_new(&trigger, a, "/locks/loop-trigger"));
	struct arec rec = { .z = z };
	struct chain ch = { .z = z, .next = zkl_semaphore_lock(sem), .rec = &rec };
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(trigger), -1, start_in_callback, &ch));
	fz_wait(z, chain_started, &ch, "the start from the callback to return");
	CHECK_OK(atomic_load(&ch.start_rc));
	/* The loop runs on: the loss rule tells the holder while its node still stands. */
	fzh_wait_count(&lost, 1);
	assert_true(lost.nodes > 0);
	assert_int_equal(atomic_load(&pg.paused), 1);
	fz_expire(z, sa);
	fz_pause(z, sa, false);
	/* The acquire goes on, on the new session. */
	arec_wait(&rec);
	CHECK_OK(rec.rc);
	assert_int_equal(atomic_load(&rec.calls), 1);
	CHECK_OK(zkl_lock_release(zkl_semaphore_lock(sem)));
	assert_int_equal(zkl_lock_release(lh), ZKL_ELOST);
	assert_int_equal(zkl_lock_release(zkl_mutex_lock(trigger)), ZKL_ELOST);
	fz_set_hook(z, NULL, NULL);
	zkl_mutex_free(trigger);
	zkl_semaphore_free(sem);
	zkl_semaphore_mutex_free(held);
	zkl_client_close(a);
	fz_free(z);
}

static void test_semaphore_count_differs_async(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *c;
	CHECK_OK(fz_client_open(z, &c, NULL));
	CHECK_OK(fz_create(z, "/locks", NULL, ZOO_CONTAINER, 0, NULL, 0));
	CHECK_OK(fz_create(z, "/locks/count-three", "3", 0, 0, NULL, 0));
	zkl_semaphore *s;
	CHECK_OK(zkl_semaphore_new(&s, c, "/locks/count-three", 2));
	struct arec rec = { .z = z };
	CHECK_OK(zkl_lock_acquire_async(zkl_semaphore_lock(s), -1, arec_cb, &rec));
	arec_wait(&rec);
	assert_int_equal(rec.rc, ZKL_ECOUNT);
	assert_non_null(strstr(rec.error, "records 3 leases"));
	assert_non_null(strstr(rec.error, "asks for 2"));
	assert_int_equal(fz_ephemerals(z, zkl_client_session_id(c)), 0);
	assert_false(zkl_lock_is_held(zkl_semaphore_lock(s)));
	/* The blocking acquire says the same. */
	assert_int_equal(zkl_lock_acquire(zkl_semaphore_lock(s), 1000), ZKL_ECOUNT);
	assert_non_null(strstr(zkl_last_error(), "records 3 leases"));
	zkl_semaphore_free(s);
	zkl_client_close(c);
	fz_free(z);
}

/* ---- a semaphore's lease belongs to the session of its gate node: if the session
 * changes between the gate's turn and the lease, the taker passes the gate again ---- */

struct gate_faults {
	struct fz *z;
	int64_t a, b;           /* pause a's first lease create, b's first lease list */
	atomic_int a_paused, b_paused;
};

static bool is_lease_folder(const char *path)
{
	const char *leases = "/locks/gate-session/leases";
	return strncmp(path, leases, strlen(leases)) == 0;
}

static enum fz_action pause_lease_steps(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct gate_faults *g = arg;
	if (r->op == FZ_CREATE && (r->mode & ZOO_SEQUENCE) && r->session == g->a &&
	    is_lease_folder(r->path) && atomic_fetch_add(&g->a_paused, 1) == 0) {
		fz_poke(g->z);
		return FZ_PAUSE;
	}
	if (r->op == FZ_CHILDREN && r->session == g->b && is_lease_folder(r->path) &&
	    atomic_fetch_add(&g->b_paused, 1) == 0) {
		fz_poke(g->z);
		return FZ_PAUSE;
	}
	return FZ_APPLY;
}

static bool a_paused(void *arg)
{
	return atomic_load(&((struct gate_faults *)arg)->a_paused) > 0;
}

static bool b_paused(void *arg)
{
	return atomic_load(&((struct gate_faults *)arg)->b_paused) > 0;
}

/* a's lease is made on its new session (2 leases), or a queues at the gate again. */
struct requeued {
	struct fz *z;
};

static bool lease_or_gate_again(void *arg)
{
	struct requeued *q = arg;
	return children(q->z, "/locks/gate-session/leases") >= 2 ||
	       children(q->z, "/locks/gate-session/locks") >= 2;
}

static void test_semaphore_gate_session(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *a, *b;
	open_short(z, &a);
	CHECK_OK(fz_client_open(z, &b, NULL));
	const char *path = "/locks/gate-session";
	zkl_semaphore_mutex *ma, *mb;
	CHECK_OK(zkl_semaphore_mutex_new(&ma, a, path));
	CHECK_OK(zkl_semaphore_mutex_new(&mb, b, path));
	zkl_lock *la = zkl_semaphore_mutex_lock(ma), *lb = zkl_semaphore_mutex_lock(mb);
	const int64_t sa = zkl_client_session_id(a);
	struct gate_faults g = { .z = z, .a = sa, .b = zkl_client_session_id(b) };
	fz_set_hook(z, pause_lease_steps, &g);
	/* a's turn at the gate comes; its lease's create never gets there. */
	struct fzh_acq wa, wb;
	fzh_acq_start(&wa, z, la, -1, 0);
	fz_wait(z, a_paused, &g, "a's lease create");
	assert_int_equal(children(z, "/locks/gate-session/locks"), 1);
	/* The server expires a's session, and a's gate node with it: b passes the gate and
	 * makes its lease (its list of the leases waits). */
	fz_expire(z, sa);
	fzh_acq_start(&wb, z, lb, 5000, 0);
	fz_wait(z, b_paused, &g, "b's list of the leases");
	/* a gives its session up and moves to a new one. */
	struct moved m = { .c = a, .from = sa };
	fz_wait(z, session_moved, &m, "a's new session");
	fz_pause(z, sa, false);
	struct requeued rq = { .z = z };
	fz_wait(z, lease_or_gate_again, &rq, "a's next step on its new session");
	/* One lease for one slot: b holds, a waits at the gate behind it. */
	assert_int_equal(children(z, "/locks/gate-session/leases"), 1);
	fz_pause(z, g.b, false);
	CHECK_OK(fzh_acq_wait(&wb));
	assert_true(wb.held);
	assert_false(atomic_load(&wa.done));
	CHECK_OK(fzh_acq_finish(&wb));
	CHECK_OK(fzh_acq_wait(&wa));
	assert_true(wa.held);
	assert_int_equal(children(z, "/locks/gate-session/leases"), 1);
	CHECK_OK(fzh_acq_finish(&wa));
	fz_set_hook(z, NULL, NULL);
	zkl_semaphore_mutex_free(ma);
	zkl_semaphore_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
	fz_free(z);
}

/* ---- several leases in one call are all or none: a lease lost while the others are
 * taken fails the call, and every lease taken is given back ---- */

struct take_two {
	struct fz *z;
	zkl_semaphore *s;
	zkl_lease *got[2];
	int rc;
	atomic_bool done;
};

static void *take_two_main(void *arg)
{
	struct take_two *t = arg;
	t->rc = zkl_semaphore_acquire(t->s, 2, 10000, t->got);
	atomic_store(&t->done, true);
	fz_poke(t->z);
	return NULL;
}

static bool two_taken(void *arg)
{
	return atomic_load(&((struct take_two *)arg)->done);
}

static void test_semaphore_lease_lost_while_taking(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *a, *b;
	CHECK_OK(fz_client_open(z, &a, NULL));
	CHECK_OK(fz_client_open(z, &b, NULL));
	const char *path = "/locks/sem-two";
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 2));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 2));
	zkl_lease *lb;
	CHECK_OK(zkl_semaphore_acquire(sb, 1, -1, &lb));
	/* a takes one lease and waits for the second: b's holds the other slot. */
	struct take_two t = { .z = z, .s = sa };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, take_two_main, &t), 0);
	fzh_wait_children(z, "/locks/sem-two/leases", 3);
	/* a's session ends: its first lease with it. */
	const int64_t old = zkl_client_session_id(a);
	fz_expire(z, old);
	struct moved m = { .c = a, .from = old };
	fz_wait(z, session_moved, &m, "a's new session");
	/* The slot comes free: a takes a lease on its new session, but it had asked for two,
	 * and holds one. */
	CHECK_OK(zkl_lease_release(lb));
	fz_wait(z, two_taken, &t, "the acquire of two leases");
	pthread_join(th, NULL);
	assert_int_equal(t.rc, ZKL_ELOST);
	fzh_wait_children(z, "/locks/sem-two/leases", 0);
	zkl_lease_free(lb);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
	fz_free(z);
}

/* ---- a blocking take with external_loop: the application's loop may never run while
 * a thread waits, so that thread runs the take and the acquisitions it starts (the gate,
 * then the lease) itself ---- */

struct take_one {
	struct fz *z;
	zkl_semaphore *s;
	zkl_lease *got;
	int rc;
	atomic_bool done;
};

static void *take_one_main(void *arg)
{
	struct take_one *t = arg;
	t->rc = zkl_semaphore_acquire(t->s, 1, 10000, &t->got);
	atomic_store(&t->done, true);
	fz_poke(t->z);
	return NULL;
}

static bool one_taken(void *arg)
{
	return atomic_load(&((struct take_one *)arg)->done);
}

static void test_semaphore_blocking_external_loop(void **state)
{
	(void)state;
	struct fz *z = fz_new();
	zkl_client *a, *b;
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.session_timeout_ms = 20000;
	o.external_loop = true; /* and zkl_client_process() is never called */
	CHECK_OK(fz_client_open(z, &a, &o));
	CHECK_OK(fz_client_open(z, &b, NULL));
	const char *path = "/locks/sem-external";
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	zkl_lease *lb;
	CHECK_OK(zkl_semaphore_acquire(sb, 1, -1, &lb));
	/* a passes the gate and waits with its lease behind b's. */
	struct take_one t = { .z = z, .s = sa };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, take_one_main, &t), 0);
	fzh_wait_children(z, "/locks/sem-external/leases", 2);
	assert_false(atomic_load(&t.done));
	CHECK_OK(zkl_lease_release(lb));
	fz_wait(z, one_taken, &t, "the blocking acquire on the external loop's client");
	pthread_join(th, NULL);
	CHECK_OK(t.rc);
	assert_true(zkl_lease_is_held(t.got));
	/* The gate was let go of, and a holds the one slot: b's try finds it taken. */
	fzh_wait_children(z, "/locks/sem-external/locks", 0);
	assert_int_equal(zkl_semaphore_acquire(sb, 1, 0, &lb), ZKL_ETIMEDOUT);
	CHECK_OK(zkl_lease_release(t.got));
	zkl_lease_free(t.got);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
	fz_free(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_handoff),
		cmocka_unit_test(test_create_answer_lost),
		cmocka_unit_test(test_adopt_only_own_session),
		cmocka_unit_test(test_withdrew_is_not_released),
		cmocka_unit_test(test_downgrade_blocks_shortcut),
		cmocka_unit_test(test_downgrade_bound_to_writer_session),
		cmocka_unit_test(test_next_in_line_shortcut),
		cmocka_unit_test(test_timeout_races_grant),
		cmocka_unit_test(test_cancel_races_grant),
		cmocka_unit_test(test_cancel_races_create),
		cmocka_unit_test(test_expiry_while_waiting),
		cmocka_unit_test(test_expiry_while_holding),
		cmocka_unit_test(test_release_waits_for_lost_callback),
		cmocka_unit_test(test_release_deferred_while_lost_runs),
		cmocka_unit_test(test_lost_before_expiry),
		cmocka_unit_test(test_lost_on_cut_off_leader),
		cmocka_unit_test(test_heartbeat_refused_said),
		cmocka_unit_test(test_retired_session_closed),
		cmocka_unit_test(test_stray_children),
		cmocka_unit_test(test_sequence_wrap_sign),
		cmocka_unit_test(test_sequence_wrap_zero),
		cmocka_unit_test(test_watch_target_vanishes),
		cmocka_unit_test(test_blocking_from_callback),
		cmocka_unit_test(test_list_answer_lost),
		cmocka_unit_test(test_confirmed_release_answer_lost),
		cmocka_unit_test(test_downgrade_answer_lost),
		cmocka_unit_test(test_expired_handle_not_connected),
		cmocka_unit_test(test_async_fifo),
		cmocka_unit_test(test_async_cancel_timeout_busy),
		cmocka_unit_test(test_cancel_follows_queued_acquire),
		cmocka_unit_test(test_release_refused),
		cmocka_unit_test(test_new_folder_made_once),
		cmocka_unit_test(test_release_in_callback_does_not_wait),
		cmocka_unit_test(test_only_the_loop_sends),
		cmocka_unit_test(test_no_wait_in_callback),
		cmocka_unit_test(test_own_leaving_nodes_skipped),
		cmocka_unit_test(test_inspect_leaves_out_own_leaving_node),
		cmocka_unit_test(test_leader_view_cancel_then_deadline),
		cmocka_unit_test(test_leader_node_not_ours),
		cmocka_unit_test(test_leader_node_deleted_hold),
		cmocka_unit_test(test_leader_node_gone_with_session),
		cmocka_unit_test(test_leader_proves_again_after_suspension),
		cmocka_unit_test(test_async_callback_calls),
		cmocka_unit_test(test_semaphore_start_on_loop),
		cmocka_unit_test(test_semaphore_count_differs_async),
		cmocka_unit_test(test_semaphore_gate_session),
		cmocka_unit_test(test_semaphore_lease_lost_while_taking),
		cmocka_unit_test(test_semaphore_blocking_external_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
