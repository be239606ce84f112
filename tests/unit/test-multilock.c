/* The multi-lock's asynchronous acquire (its zkl_lock view) on the in-memory ZooKeeper
 * (fakezk.h): the chain of member acquires, one deadline, cancel, release from the
 * callback, losses; and the blocking acquire, the same run plus a wait. Each test names
 * the rule it guards; breaking that rule in recipes/multilock.c makes the test fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fzh.h"

#define CHECK_OK(x) assert_int_equal((x), 0)

enum { N = 3 };

/* Client a's mutexes on <base>/1, /2, /3, the members of one canonical multi-lock; a
 * client b with its own mutexes on the same paths, to contend. */
struct set {
	struct fz *z;
	zkl_client *a, *b;
	char path[N][64];
	zkl_mutex *m[N], *om[N];
	zkl_multilock *ml;
	zkl_lock *view;
	int64_t sa;            /* a's session */
};

static void set_open(struct set *s, const char *base)
{
	s->z = fz_new();
	CHECK_OK(fz_client_open(s->z, &s->a, NULL));
	CHECK_OK(fz_client_open(s->z, &s->b, NULL));
	CHECK_OK(zkl_multilock_new(&s->ml, ZKL_MULTILOCK_CANONICAL));
	s->view = zkl_multilock_lock(s->ml);
	assert_non_null(s->view);
	for (int i = 0; i < N; i++) {
		snprintf(s->path[i], sizeof s->path[i], "%s/%d", base, i + 1);
		CHECK_OK(zkl_mutex_new(&s->m[i], s->a, s->path[i]));
		CHECK_OK(zkl_mutex_new(&s->om[i], s->b, s->path[i]));
	}
	/* Added in reverse: the canonical order takes /1 first. */
	for (int i = N; i-- > 0;)
		CHECK_OK(zkl_multilock_add(s->ml, zkl_mutex_lock(s->m[i])));
	s->sa = zkl_client_session_id(s->a);
}

static void set_close(struct set *s)
{
	zkl_multilock_free(s->ml);
	for (int i = 0; i < N; i++) {
		zkl_mutex_free(s->m[i]);
		zkl_mutex_free(s->om[i]);
	}
	zkl_client_close(s->a);
	zkl_client_close(s->b);
	fz_free(s->z);
}

/* What an acquire callback saw. */
struct rec {
	struct fz *z;
	atomic_int calls;
	int rc;
	char error[512];
	int64_t session;       /* if not 0: its nodes at the callback */
	int nodes;
	zkl_mutex **members;   /* if not NULL: how many of these N are held at the callback */
	int members_held;
	bool held;             /* zkl_lock_is_held() in the callback */
	bool release;          /* release in the callback */
	int release_rc;
	zkl_multilock *blocking; /* a blocking acquire of this one in the callback */
	int blocking_rc;
	zkl_multilock *free_it;  /* freed in the callback */
	zkl_mutex *free_after;   /* freed in the callback, after free_it */
};

static void rec_cb(zkl_lock *l, int rc, void *data)
{
	struct rec *r = data;
	r->rc = rc;
	if (rc != 0)
		snprintf(r->error, sizeof r->error, "%s", zkl_last_error());
	if (r->session)
		r->nodes = fz_ephemerals(r->z, r->session);
	r->held = zkl_lock_is_held(l);
	for (int i = 0; r->members && i < N; i++)
		r->members_held += zkl_lock_is_held(zkl_mutex_lock(r->members[i]));
	if (r->blocking)
		r->blocking_rc = zkl_multilock_acquire(r->blocking, 1000);
	if (rc == 0 && r->release)
		r->release_rc = zkl_lock_release(l);
	if (r->free_it)
		zkl_multilock_free(r->free_it);
	if (r->free_after)
		zkl_mutex_free(r->free_after);
	/* The test may reuse r once calls is counted: nothing of r is read after. */
	struct fz *z = r->z;
	atomic_fetch_add(&r->calls, 1);
	fz_poke(z);
}

static bool rec_called(void *arg)
{
	return atomic_load(&((struct rec *)arg)->calls) > 0;
}

static void rec_wait(struct rec *r)
{
	fz_wait(r->z, rec_called, r, "a multilock acquire callback");
}

/* Member 1 is held by b and a's acquire of the view started: it takes member 0 and
 * queues for member 1 behind b, watching b's node, when this returns. */
static void start_behind_b(struct set *s, struct rec *r)
{
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s->om[1]), -1));
	char holder[256];
	fzh_queue_node(s->z, s->path[1], 0, holder, sizeof holder);
	CHECK_OK(zkl_lock_acquire_async(s->view, -1, rec_cb, r));
	fzh_wait_watched(s->z, holder, 1);
}

static bool session_empty(void *arg)
{
	struct set *s = arg;
	return fz_ephemerals(s->z, s->sa) == 0;
}

/* ---- the chain: every member, once, on the loop; then release ---- */

static void test_chain_succeeds(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-chain");
	struct rec r = { .z = s.z, .session = s.sa, .blocking = s.ml };
	CHECK_OK(zkl_lock_acquire_async(s.view, 5000, rec_cb, &r));
	/* One at a time per handle, and no blocking acquire meanwhile. */
	assert_int_equal(zkl_lock_acquire_async(s.view, 5000, rec_cb, &r), ZKL_EBUSY);
	rec_wait(&r);
	CHECK_OK(r.rc);
	assert_int_equal(r.nodes, N);
	assert_true(r.held);
	/* A blocking acquire on the loop fails at once instead of hanging. */
	assert_int_equal(r.blocking_rc, ZKL_EDEADLK);
	assert_true(zkl_lock_is_held(s.view));
	assert_true(zkl_multilock_is_held(s.ml));
	for (int i = 0; i < N; i++) {
		assert_true(zkl_lock_is_held(zkl_mutex_lock(s.m[i])));
		assert_int_equal(fzh_children(s.z, s.path[i]), 1);
		/* Nobody else can take any member. */
		assert_int_equal(zkl_lock_acquire(zkl_mutex_lock(s.om[i]), 0), ZKL_ETIMEDOUT);
	}
	assert_int_equal(zkl_lock_acquire_async(s.view, 5000, rec_cb, &r), ZKL_EBUSY);
	assert_int_equal(zkl_multilock_acquire(s.ml, 0), ZKL_EBUSY);
	/* No token, node or queue of its own. */
	assert_int_equal(zkl_lock_token(s.view), ZKL_ENOTSUP);
	char buf[ZKL_NODE_MAX];
	assert_int_equal(zkl_lock_node(s.view, buf, sizeof buf), ZKL_ENOTSUP);
	zkl_participant *p;
	size_t count;
	assert_int_equal(zkl_lock_participants(s.view, &p, &count), ZKL_ENOTSUP);
	assert_string_equal(zkl_lock_kind(s.view), "multilock");
	assert_int_equal(zkl_multilock_add(s.ml, zkl_mutex_lock(s.om[0])), ZKL_EBUSY);
	/* Released from another thread (the test's): every member goes. */
	CHECK_OK(zkl_lock_release(s.view));
	assert_false(zkl_lock_is_held(s.view));
	assert_int_equal(zkl_lock_release(s.view), ZKL_ENOTHELD);
	fz_wait(s.z, session_empty, &s, "the members' nodes to go");
	for (int i = 0; i < N; i++) {
		CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[i]), 0));
		CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[i])));
	}
	assert_int_equal(atomic_load(&r.calls), 1);
	set_close(&s);
}

/* ---- one deadline: a member busy until it passes; the members taken go back ---- */

static void test_member_busy_until_deadline(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-deadline");
	/* b holds member 2 throughout. */
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[1]), -1));
	struct rec r = { .z = s.z, .members = s.m };
	/* Time enough to take member 1 and queue on member 2 on a loaded machine. */
	CHECK_OK(zkl_lock_acquire_async(s.view, 2000, rec_cb, &r));
	rec_wait(&r);
	assert_int_equal(r.rc, ZKL_ETIMEDOUT);
	assert_non_null(strstr(r.error, s.path[1]));
	assert_non_null(strstr(r.error, "member 2 of 3"));
	/* By the callback, member 1 was given back (its delete on its way) and member 2
	 * withdrew its node. */
	assert_int_equal(r.members_held, 0);
	assert_false(r.held);
	assert_false(zkl_lock_is_held(s.view));
	assert_false(zkl_lock_is_held(zkl_mutex_lock(s.m[0])));
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	assert_true(fzh_children(s.z, s.path[0]) <= 0);
	assert_int_equal(fzh_children(s.z, s.path[1]), 1); /* b's */
	assert_true(fzh_children(s.z, s.path[2]) <= 0);    /* never tried */
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[0]), 0));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[0])));
	assert_int_equal(zkl_lock_release(s.view), ZKL_ENOTHELD);

	/* Try-once: the same at once. */
	struct rec t = { .z = s.z, .members = s.m };
	CHECK_OK(zkl_lock_acquire_async(s.view, 0, rec_cb, &t));
	rec_wait(&t);
	assert_int_equal(t.rc, ZKL_ETIMEDOUT);
	assert_int_equal(t.members_held, 0);
	fz_wait(s.z, session_empty, &s, "a's nodes to go");

	/* Once member 2 is free, the whole set is taken. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	struct rec h = { .z = s.z, .session = s.sa, .release = true };
	CHECK_OK(zkl_lock_acquire_async(s.view, 5000, rec_cb, &h));
	rec_wait(&h);
	CHECK_OK(h.rc);
	assert_int_equal(h.nodes, N);
	CHECK_OK(h.release_rc);
	assert_int_equal(atomic_load(&r.calls) + atomic_load(&t.calls), 2);
	set_close(&s);
}

/* ---- cancel in the middle: exactly one ZKL_ECANCELED, nothing left ---- */

static void test_cancel_in_the_middle(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-cancel");
	struct rec r = { .z = s.z, .members = s.m };
	start_behind_b(&s, &r);
	assert_int_equal(fz_ephemerals(s.z, s.sa), 2);
	assert_int_equal(atomic_load(&r.calls), 0);
	zkl_lock_cancel(s.view);
	rec_wait(&r);
	assert_int_equal(r.rc, ZKL_ECANCELED);
	assert_int_equal(r.members_held, 0);
	assert_false(zkl_lock_is_held(s.view));
	zkl_lock_cancel(s.view); /* nothing under way: no effect */
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	assert_int_equal(fzh_children(s.z, s.path[1]), 1);
	assert_true(fzh_children(s.z, s.path[2]) <= 0);
	/* The multi-lock works again; the first callback did not run twice. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	struct rec h = { .z = s.z, .session = s.sa };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &h));
	rec_wait(&h);
	CHECK_OK(h.rc);
	/* A cancel does not affect a hold. */
	zkl_lock_cancel(s.view);
	assert_true(zkl_lock_is_held(s.view));
	CHECK_OK(zkl_lock_release(s.view));
	assert_int_equal(atomic_load(&r.calls), 1);
	assert_int_equal(atomic_load(&h.calls), 1);
	set_close(&s);
}

/* ---- release from inside the acquired callback ---- */

static void test_release_in_callback(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-release-cb");
	struct rec r = { .z = s.z, .session = s.sa, .release = true };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &r));
	rec_wait(&r);
	CHECK_OK(r.rc);
	assert_int_equal(r.nodes, N);
	assert_true(r.held);
	CHECK_OK(r.release_rc);
	assert_false(zkl_lock_is_held(s.view));
	assert_int_equal(zkl_lock_release(s.view), ZKL_ENOTHELD);
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	for (int i = 0; i < N; i++)
		assert_false(zkl_lock_is_held(zkl_mutex_lock(s.m[i])));
	/* Not busy: another acquire starts, and so does a blocking one after it. */
	struct rec h = { .z = s.z };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &h));
	rec_wait(&h);
	CHECK_OK(h.rc);
	CHECK_OK(zkl_lock_release(s.view));
	CHECK_OK(zkl_multilock_acquire(s.ml, 5000));
	assert_int_equal(zkl_lock_acquire_async(s.view, -1, rec_cb, &h), ZKL_EBUSY);
	CHECK_OK(zkl_multilock_release(s.ml));
	set_close(&s);
}

/* ---- a lost member is told once on the view, and the members' own callbacks stay ---- */

static void test_lost_told_once(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-lost");
	struct fzh_count lost = { .z = s.z }, own = { .z = s.z };
	CHECK_OK(zkl_lock_on_lost(s.view, fzh_on_lost, &lost));
	for (int i = 0; i < N; i++)
		CHECK_OK(zkl_lock_on_lost(zkl_mutex_lock(s.m[i]), fzh_on_lost, &own));
	struct rec r = { .z = s.z };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &r));
	rec_wait(&r);
	CHECK_OK(r.rc);
	fz_expire(s.z, s.sa);
	fzh_wait_count(&own, N);
	fzh_wait_count(&lost, 1);
	assert_false(zkl_lock_is_held(s.view));
	assert_int_equal(zkl_lock_release(s.view), ZKL_ELOST);
	/* The loop has told every loss before it runs this acquire's callback. */
	struct rec h = { .z = s.z };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &h));
	rec_wait(&h);
	CHECK_OK(h.rc);
	CHECK_OK(zkl_lock_release(s.view));
	assert_int_equal(atomic_load(&lost.n), 1);
	assert_int_equal(atomic_load(&own.n), N);
	set_close(&s);
}

/* ---- one client per asynchronous acquire; bad arguments ---- */

static void test_async_needs_one_client(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-clients");
	zkl_multilock *mixed;
	CHECK_OK(zkl_multilock_new(&mixed, ZKL_MULTILOCK_CANONICAL));
	zkl_lock *mv = zkl_multilock_lock(mixed);
	struct rec r = { .z = s.z };
	assert_int_equal(zkl_lock_acquire_async(mv, -1, rec_cb, &r), ZKL_EINVAL);
	CHECK_OK(zkl_multilock_add(mixed, zkl_mutex_lock(s.m[0])));
	CHECK_OK(zkl_multilock_add(mixed, zkl_mutex_lock(s.om[1])));
	assert_int_equal(zkl_lock_acquire_async(mv, -1, rec_cb, &r), ZKL_EINVAL);
	assert_non_null(strstr(zkl_last_error(), "different clients"));
	assert_int_equal(zkl_lock_acquire_async(mv, -1, NULL, &r), ZKL_EINVAL);
	assert_int_equal(zkl_lock_acquire_async(mv, -2, rec_cb, &r), ZKL_EINVAL);
	assert_int_equal(fz_ephemerals(s.z, s.sa), 0);
	/* The blocking acquire still takes members of several clients. */
	CHECK_OK(zkl_multilock_acquire(mixed, 5000));
	CHECK_OK(zkl_multilock_release(mixed));
	assert_int_equal(zkl_multilock_add(mixed, s.view), ZKL_EINVAL);
	assert_null(zkl_multilock_lock(NULL));
	zkl_multilock_free(mixed);
	assert_int_equal(atomic_load(&r.calls), 0);
	set_close(&s);
}

/* ---- freed while the chain waits: canceled, waited for, nothing left ---- */

static void test_free_while_waiting(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-free");
	struct rec r = { .z = s.z, .members = s.m };
	start_behind_b(&s, &r);
	zkl_multilock_free(s.ml);
	/* The callback ran before the free returned. */
	assert_int_equal(atomic_load(&r.calls), 1);
	assert_int_equal(r.rc, ZKL_ECANCELED);
	assert_int_equal(r.members_held, 0);
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	CHECK_OK(zkl_multilock_new(&s.ml, ZKL_MULTILOCK_CANONICAL));
	set_close(&s);
}

/* ---- freed in its own callback: the hold goes with it ---- */

static void test_free_in_callback(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-free-cb");
	struct rec r = { .z = s.z, .session = s.sa, .free_it = s.ml };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &r));
	rec_wait(&r);
	CHECK_OK(r.rc);
	assert_int_equal(r.nodes, N);
	for (int i = 0; i < N; i++)
		assert_false(zkl_lock_is_held(zkl_mutex_lock(s.m[i])));
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	CHECK_OK(zkl_multilock_new(&s.ml, ZKL_MULTILOCK_CANONICAL));
	set_close(&s);
}

/* ---- freed on the loop (another lock's callback) while its chain waits: its callback
 * never runs, and what it took or queued goes ---- */

static bool session_has_one(void *arg)
{
	struct set *s = arg;
	return fz_ephemerals(s->z, s->sa) == 1;
}

/* Starts a's acquire of the view behind b, then frees the multi-lock on a's loop (the
 * callback of another lock of a), and with `member` the member being taken right after
 * it, before that member's acquire could call back (so it never does). What the
 * multi-lock took or queued goes: only the trigger's node stays, then nothing of a's. */
static void free_on_loop(struct set *s, struct rec *r, const char *trigger_path, bool member)
{
	start_behind_b(s, r);
	assert_int_equal(fz_ephemerals(s->z, s->sa), 2);
	zkl_mutex *trigger;
	CHECK_OK(zkl_mutex_new(&trigger, s->a, trigger_path));
	struct rec t = { .z = s->z, .free_it = s->ml };
	if (member) {
		t.free_after = s->m[1];
		s->m[1] = NULL;
	}
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(trigger), -1, rec_cb, &t));
	rec_wait(&t);
	CHECK_OK(t.rc);
	/* Member 1 given back, member 2 withdrawn. */
	fz_wait(s->z, session_has_one, s, "the multi-lock's nodes to go");
	assert_true(fzh_children(s->z, s->path[0]) <= 0);
	assert_int_equal(fzh_children(s->z, s->path[1]), 1); /* b's */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(trigger)));
	fz_wait(s->z, session_empty, s, "a's nodes to go");
	zkl_mutex_free(trigger);
	CHECK_OK(zkl_multilock_new(&s->ml, ZKL_MULTILOCK_CANONICAL));
}

static void test_free_on_loop_while_waiting(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-free-loop");
	struct rec r = { .z = s.z };
	free_on_loop(&s, &r, "/locks/ml-free-loop-trigger", false);
	/* b's member 2 free again: a's member 2 must not take it now. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[1]), 0));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	for (int i = 0; i < N; i++)
		assert_false(zkl_lock_is_held(zkl_mutex_lock(s.m[i])));
	assert_int_equal(atomic_load(&r.calls), 0);
	set_close(&s);
}

/* The same, with the member being taken freed too: the multi-lock's record of the
 * acquire goes with the free (the sanitizer build's leak check fails otherwise). */
static void test_free_on_loop_with_member(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-free-loop-member");
	struct rec r = { .z = s.z };
	free_on_loop(&s, &r, "/locks/ml-free-loop-member-trigger", true);
	assert_int_equal(atomic_load(&r.calls), 0);
	set_close(&s);
}

/* ---- a member lost while the chain takes the others fails it with ZKL_ELOST ---- */

static void test_member_lost_during_chain(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-lost-chain");
	struct fzh_count lost = { .z = s.z }, own = { .z = s.z };
	CHECK_OK(zkl_lock_on_lost(s.view, fzh_on_lost, &lost));
	CHECK_OK(zkl_lock_on_lost(zkl_mutex_lock(s.m[0]), fzh_on_lost, &own));
	struct rec r = { .z = s.z, .members = s.m };
	start_behind_b(&s, &r);
	/* Member 1 is held; a's session ends. */
	fz_expire(s.z, s.sa);
	fzh_wait_count(&own, 1);
	/* Member 2 comes free, on whatever session a has now. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	rec_wait(&r);
	assert_int_equal(r.rc, ZKL_ELOST);
	assert_int_equal(r.members_held, 0);
	assert_false(zkl_lock_is_held(s.view));
	/* Not held yet, so the view's lost callback was not told. */
	assert_int_equal(atomic_load(&lost.n), 0);
	s.sa = zkl_client_session_id(s.a);
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	struct rec h = { .z = s.z };
	CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &h));
	rec_wait(&h);
	CHECK_OK(h.rc);
	CHECK_OK(zkl_lock_release(s.view));
	assert_int_equal(atomic_load(&lost.n), 0);
	set_close(&s);
}

/* ---- the same in a blocking acquire: a member lost while the others are being taken
 * makes the whole acquire fail with ZKL_ELOST, and nothing stays held (the lost member's
 * lock may be someone else's already) ---- */

static void test_member_lost_during_blocking_acquire(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-lost-blocking");
	struct fzh_count lost = { .z = s.z }, own = { .z = s.z };
	CHECK_OK(zkl_lock_on_lost(s.view, fzh_on_lost, &lost));
	CHECK_OK(zkl_lock_on_lost(zkl_mutex_lock(s.m[0]), fzh_on_lost, &own));
	/* b holds member 2's lock: a takes member 1 and queues for member 2. */
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[1]), -1));
	struct fzh_acq w;
	fzh_acq_start(&w, s.z, s.view, -1, 0);
	fzh_wait_children(s.z, s.path[1], 2);
	assert_int_equal(fzh_children(s.z, s.path[0]), 1);
	/* Member 1 is held; a's session ends, and member 1's lock with it. */
	fz_expire(s.z, s.sa);
	fzh_wait_count(&own, 1);
	/* Member 2 comes free, on whatever session a has now. */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	assert_int_equal(fzh_acq_wait(&w), ZKL_ELOST);
	assert_false(w.held);
	for (int i = 0; i < N; i++)
		assert_false(zkl_lock_is_held(zkl_mutex_lock(s.m[i])));
	for (int i = 0; i < N; i++)
		fzh_wait_children(s.z, s.path[i], 0);
	/* Never held, so the view's lost callback was not told. */
	assert_int_equal(atomic_load(&lost.n), 0);
	CHECK_OK(fzh_acq_finish(&w));
	/* And the next blocking acquire takes all three. */
	CHECK_OK(zkl_lock_acquire(s.view, -1));
	CHECK_OK(zkl_lock_release(s.view));
	assert_int_equal(atomic_load(&lost.n), 0);
	set_close(&s);
}

/* ---- a blocking acquire on a member's loop fails at once, before taking any member
 * (here the first member is on another client, which could have been taken) ---- */

struct creates {
	int64_t session;
	atomic_int n;
};

static enum fz_action count_creates(void *arg, const struct fz_request *r, int *rc)
{
	(void)rc;
	struct creates *k = arg;
	if (r->session == k->session && r->op == FZ_CREATE)
		atomic_fetch_add(&k->n, 1);
	return FZ_APPLY;
}

static void test_blocking_on_loop_takes_nothing(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-blocking-loop");
	/* Member 1 on client b, member 2 on client a. */
	zkl_multilock *mixed;
	CHECK_OK(zkl_multilock_new(&mixed, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(mixed, zkl_mutex_lock(s.m[1])));
	CHECK_OK(zkl_multilock_add(mixed, zkl_mutex_lock(s.om[0])));
	struct creates k = { .session = zkl_client_session_id(s.b) };
	fz_set_hook(s.z, count_creates, &k);
	/* On a's loop (the callback of a's own lock), a blocking acquire of it. */
	zkl_mutex *trigger;
	CHECK_OK(zkl_mutex_new(&trigger, s.a, "/locks/ml-blocking-loop-trigger"));
	struct rec t = { .z = s.z, .blocking = mixed };
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(trigger), -1, rec_cb, &t));
	rec_wait(&t);
	CHECK_OK(t.rc);
	assert_int_equal(t.blocking_rc, ZKL_EDEADLK);
	fz_set_hook(s.z, NULL, NULL);
	assert_int_equal(atomic_load(&k.n), 0);
	assert_false(zkl_multilock_is_held(mixed));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(trigger)));
	/* Off the loop, the same acquire works. */
	CHECK_OK(zkl_multilock_acquire(mixed, 5000));
	CHECK_OK(zkl_multilock_release(mixed));
	zkl_multilock_free(mixed);
	zkl_mutex_free(trigger);
	set_close(&s);
}

/* ---- a cancel right after the start (the first member in flight): always
 * ZKL_ECANCELED, once, nothing left; the last member is never free, so nothing else
 * could end the acquire ---- */

static void test_cancel_at_once(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-cancel-at-once");
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[2]), -1));
	for (int i = 0; i < 50; i++) {
		struct rec r = { .z = s.z, .members = s.m };
		CHECK_OK(zkl_lock_acquire_async(s.view, -1, rec_cb, &r));
		zkl_lock_cancel(s.view);
		rec_wait(&r);
		assert_int_equal(r.rc, ZKL_ECANCELED);
		assert_int_equal(r.members_held, 0);
		assert_int_equal(atomic_load(&r.calls), 1);
		assert_false(zkl_lock_is_held(s.view));
	}
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[2])));
	set_close(&s);
}

/* ---- a blocking acquire is the same run plus a wait: zkl_lock_cancel() on the view,
 * from another thread, ends it with ZKL_ECANCELED; the member taken is given back and
 * the one in flight withdraws its node ---- */

static void test_blocking_cancel(void **state)
{
	(void)state;
	struct set s;
	set_open(&s, "/locks/ml-blocking-cancel");
	/* b holds member 2's lock: a's blocking acquire takes member 1 and queues behind b. */
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(s.om[1]), -1));
	char holder[256];
	fzh_queue_node(s.z, s.path[1], 0, holder, sizeof holder);
	struct fzh_acq w;
	fzh_acq_start(&w, s.z, s.view, -1, 0);
	fzh_wait_watched(s.z, holder, 1);
	assert_int_equal(fzh_children(s.z, s.path[0]), 1);
	zkl_lock_cancel(s.view);
	assert_int_equal(fzh_acq_wait(&w), ZKL_ECANCELED);
	assert_false(w.held);
	CHECK_OK(fzh_acq_finish(&w));
	fz_wait(s.z, session_empty, &s, "a's nodes to go");
	assert_int_equal(fzh_children(s.z, s.path[1]), 1); /* b's */
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(s.om[1])));
	/* The next blocking acquire takes all three. */
	CHECK_OK(zkl_lock_acquire(s.view, -1));
	assert_true(zkl_lock_is_held(s.view));
	CHECK_OK(zkl_lock_release(s.view));
	set_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_succeeds),
		cmocka_unit_test(test_member_busy_until_deadline),
		cmocka_unit_test(test_cancel_in_the_middle),
		cmocka_unit_test(test_release_in_callback),
		cmocka_unit_test(test_lost_told_once),
		cmocka_unit_test(test_async_needs_one_client),
		cmocka_unit_test(test_free_while_waiting),
		cmocka_unit_test(test_free_in_callback),
		cmocka_unit_test(test_free_on_loop_while_waiting),
		cmocka_unit_test(test_free_on_loop_with_member),
		cmocka_unit_test(test_member_lost_during_chain),
		cmocka_unit_test(test_member_lost_during_blocking_acquire),
		cmocka_unit_test(test_blocking_on_loop_takes_nothing),
		cmocka_unit_test(test_cancel_at_once),
		cmocka_unit_test(test_blocking_cancel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
