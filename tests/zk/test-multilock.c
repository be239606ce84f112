/* zkl_multilock on a real ZooKeeper server (run through tests/with-zk). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether another client can take path at once (a mutex, try-once), and then gives it
 * back. */
static bool other_can_take(zkl_client *c, const char *path)
{
	zkl_mutex *m;
	if (zkl_mutex_new(&m, c, path) != 0)
		return false;
	zkl_lock *l = zkl_mutex_lock(m);
	bool ok = zkl_lock_acquire(l, 0) == 0;
	if (ok)
		ok = zkl_lock_release(l) == 0;
	zkl_mutex_free(m);
	return ok;
}

/* The members of a test are h_sub(base, leaf) paths: the leaves make their canonical
 * (strcmp) order explicit. Here: client a's mutexes on <base>/1, /2 and /3, the members
 * of one canonical multi-lock; and a client b for the others. */
struct three {
	const char *base;
	const char *p[3];
	zkl_client *a, *b;
	zkl_mutex *m[3];
	zkl_lock *l[3]; /* their views */
	zkl_multilock *ml;
};

static void three_open(struct three *t, const char *test)
{
	t->base = h_path(test);
	t->a = h_client(0);
	t->b = h_client(0);
	CHECK_OK(zkl_multilock_new(&t->ml, ZKL_MULTILOCK_CANONICAL));
	static const char *const leaves[3] = {"1", "2", "3"};
	for (int i = 0; i < 3; i++) {
		t->p[i] = h_sub(t->base, leaves[i]);
		CHECK_OK(zkl_mutex_new(&t->m[i], t->a, t->p[i]));
		t->l[i] = zkl_mutex_lock(t->m[i]);
		CHECK_OK(zkl_multilock_add(t->ml, t->l[i]));
	}
}

static void three_close(struct three *t)
{
	zkl_multilock_free(t->ml);
	for (int i = 0; i < 3; i++)
		zkl_mutex_free(t->m[i]);
	zkl_client_close(t->a);
	zkl_client_close(t->b);
}

/* ---- all or nothing: a member that cannot be taken leaves nothing held ---- */

static void test_all_or_nothing(void **state)
{
	(void)state;
	struct three t;
	three_open(&t, "aon");
	zkl_mutex *other;
	CHECK_OK(zkl_mutex_new(&other, t.b, t.p[1]));
	zkl_lock *ol = zkl_mutex_lock(other);
	CHECK_OK(zkl_lock_acquire(ol, -1));

	int64_t t0 = now_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(t.ml, 2000));
	int64_t elapsed = now_ms() - t0;
	assert_true(elapsed >= 1950);
	assert_true(elapsed < 7000);
	assert_non_null(strstr(zkl_last_error(), t.p[1]));
	assert_false(zkl_multilock_is_held(t.ml));
	for (int i = 0; i < 3; i++)
		assert_false(zkl_lock_is_held(t.l[i]));
	/* Member 1 was taken and given back; member 2 withdrew its node (a create still out
	 * at the deadline is deleted when it is answered); 3 was not tried. */
	assert_true(h_children(t.p[0]) <= 0);
	h_wait_children(t.p[1], 1);
	assert_true(h_children(t.p[2]) <= 0);
	assert_true(other_can_take(t.b, t.p[0]));
	assert_true(other_can_take(t.b, t.p[2]));

	/* Try-once: the same, at once. */
	t0 = now_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(t.ml, 0));
	assert_true(now_ms() - t0 < 2000);
	assert_true(h_children(t.p[0]) <= 0);
	assert_int_equal(h_children(t.p[1]), 1);
	assert_true(other_can_take(t.b, t.p[0]));
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(t.ml));

	/* Once member 2 is free, the whole set can be taken. */
	CHECK_OK(zkl_lock_release(ol));
	CHECK_OK(zkl_multilock_acquire(t.ml, 5000));
	assert_true(zkl_multilock_is_held(t.ml));
	for (int i = 0; i < 3; i++)
		assert_int_equal(h_children(t.p[i]), 1);
	CHECK_OK(zkl_multilock_release(t.ml));
	assert_false(zkl_multilock_is_held(t.ml));
	for (int i = 0; i < 3; i++)
		assert_true(h_children(t.p[i]) <= 0);

	zkl_mutex_free(other);
	three_close(&t);
}

/* ---- one deadline for all members, not one per member ---- */

struct staggered {
	zkl_client *c;
	const char *p2, *p3;
	h_latch *ready;
	h_latch *done;
	int rc;
};

/* Holds p2 and p3, gives p2 back after 2000 ms, and p3 when told. */
static void *staggered_thread(void *arg)
{
	struct staggered *s = arg;
	zkl_mutex *m2, *m3;
	s->rc = zkl_mutex_new(&m2, s->c, s->p2);
	s->rc |= zkl_mutex_new(&m3, s->c, s->p3);
	zkl_lock *l2 = zkl_mutex_lock(m2), *l3 = zkl_mutex_lock(m3);
	s->rc |= zkl_lock_acquire(l2, -1);
	s->rc |= zkl_lock_acquire(l3, -1);
	h_latch_set(s->ready);
	usleep(2000 * 1000);
	s->rc |= zkl_lock_release(l2);
	h_latch_wait(s->done, 60000);
	s->rc |= zkl_lock_release(l3);
	zkl_mutex_free(m2);
	zkl_mutex_free(m3);
	return NULL;
}

static void test_one_deadline(void **state)
{
	(void)state;
	struct three t;
	three_open(&t, "deadline");
	struct staggered s = { .c = t.b, .p2 = t.p[1], .p3 = t.p[2], .ready = h_latch_new(),
	                       .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, staggered_thread, &s);
	assert_true(h_latch_wait(s.ready, 20000));

	/* Member 2 comes free after about 2000 ms, member 3 never: with one deadline the call
	 * ends after about 4000 ms, with one per member it would take about 6000. */
	int64_t t0 = now_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(t.ml, 4000));
	int64_t elapsed = now_ms() - t0;
	assert_true(elapsed >= 3900);
	assert_true(elapsed < 5500);
	assert_non_null(strstr(zkl_last_error(), t.p[2]));
	assert_true(h_children(t.p[0]) <= 0);
	assert_true(h_children(t.p[1]) <= 0);
	assert_int_equal(h_children(t.p[2]), 1);

	h_latch_set(s.done);
	pthread_join(th, NULL);
	CHECK_OK(s.rc);
	CHECK_OK(zkl_multilock_acquire(t.ml, 5000));
	CHECK_OK(zkl_multilock_release(t.ml));
	h_latch_free(s.ready);
	h_latch_free(s.done);
	three_close(&t);
}

/* ---- a mix of kinds: mutex, semaphore-mutex, rwlock halves ---- */

static void test_mixed_members(void **state)
{
	(void)state;
	const char *base = h_path("mixed");
	const char *pm = h_sub(base, "a-mutex"), *ps = h_sub(base, "b-sem");
	const char *pr = h_sub(base, "c-rw");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *m, *om;
	zkl_semaphore_mutex *s, *os;
	zkl_rwlock *rw, *orw;
	CHECK_OK(zkl_mutex_new(&m, a, pm));
	CHECK_OK(zkl_semaphore_mutex_new(&s, a, ps));
	CHECK_OK(zkl_rwlock_new(&rw, a, pr));
	CHECK_OK(zkl_mutex_new(&om, b, pm));
	CHECK_OK(zkl_semaphore_mutex_new(&os, b, ps));
	CHECK_OK(zkl_rwlock_new(&orw, b, pr));
	zkl_lock *lm = zkl_mutex_lock(m), *ls = zkl_semaphore_mutex_lock(s);
	zkl_lock *lr = zkl_mutex_lock(zkl_rwlock_read(rw));
	zkl_lock *lw = zkl_mutex_lock(zkl_rwlock_write(rw));
	zkl_lock *olm = zkl_mutex_lock(om), *ols = zkl_semaphore_mutex_lock(os);
	zkl_lock *olr = zkl_mutex_lock(zkl_rwlock_read(orw));
	zkl_lock *olw = zkl_mutex_lock(zkl_rwlock_write(orw));

	/* Added in the reverse of the canonical order; the read half before the write half
	 * of the same lock (taken as written: an upgrade, ZKL_EDEADLK). Canonical order takes
	 * the write half first, then the read half as a downgrade. */
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, lr));
	CHECK_OK(zkl_multilock_add(ml, lw));
	CHECK_OK(zkl_multilock_add(ml, ls));
	CHECK_OK(zkl_multilock_add(ml, lm));
	CHECK_OK(zkl_multilock_acquire(ml, 5000));
	assert_true(zkl_multilock_is_held(ml));
	assert_true(zkl_lock_is_held(lm));
	assert_true(zkl_lock_is_held(ls));
	assert_true(zkl_lock_is_held(lw));
	assert_true(zkl_lock_is_held(lr));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(olm, 0));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(ols, 0));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(olr, 0));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(olw, 0));

	/* A member whose hold ends behind the multi-lock's back makes it not held. */
	CHECK_OK(zkl_lock_release(ls));
	assert_false(zkl_multilock_is_held(ml));
	CHECK_OK(zkl_lock_acquire(ls, 5000));
	assert_true(zkl_multilock_is_held(ml));

	CHECK_OK(zkl_multilock_release(ml));
	assert_false(zkl_multilock_is_held(ml));
	assert_false(zkl_lock_is_held(lm));
	assert_false(zkl_lock_is_held(ls));
	assert_false(zkl_lock_is_held(lw));
	assert_false(zkl_lock_is_held(lr));
	assert_true(h_children(pm) <= 0);
	assert_true(h_children(pr) <= 0);
	CHECK_OK(zkl_lock_acquire(olm, 0));
	CHECK_OK(zkl_lock_acquire(ols, 0));
	CHECK_OK(zkl_lock_acquire(olw, 0));
	CHECK_OK(zkl_lock_release(olm));
	CHECK_OK(zkl_lock_release(ols));
	CHECK_OK(zkl_lock_release(olw));

	/* The same members in the order added: read, then write of one lock would be an
	 * upgrade, which never succeeds: refused when added. */
	zkl_multilock *as;
	CHECK_OK(zkl_multilock_new(&as, ZKL_MULTILOCK_AS_ADDED));
	CHECK_OK(zkl_multilock_add(as, lm));
	CHECK_OK(zkl_multilock_add(as, lr));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(as, lw));
	assert_non_null(strstr(zkl_last_error(), pr));
	assert_non_null(strstr(zkl_last_error(), "upgrade"));
	assert_false(zkl_lock_is_held(lm));
	assert_false(zkl_lock_is_held(lr));
	assert_true(h_children(pm) <= 0);
	assert_true(h_children(pr) <= 0);
	zkl_multilock_free(as);

	zkl_multilock_free(ml);
	zkl_mutex_free(m);
	zkl_mutex_free(om);
	zkl_semaphore_mutex_free(s);
	zkl_semaphore_mutex_free(os);
	zkl_rwlock_free(rw);
	zkl_rwlock_free(orw);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a member that fails to release does not keep the others ---- */

static void test_release_continues_past_errors(void **state)
{
	(void)state;
	struct three t;
	three_open(&t, "relerr");
	CHECK_OK(zkl_multilock_acquire(t.ml, 5000));
	/* Member 2 released behind the multi-lock's back: its release by the multi-lock
	 * fails (the thread no longer holds it), and the others are released all the same. */
	CHECK_OK(zkl_lock_release(t.l[1]));
	assert_false(zkl_multilock_is_held(t.ml));
	CHECK_RC(ZKL_ENOTOWNER, zkl_multilock_release(t.ml));
	assert_non_null(strstr(zkl_last_error(), t.p[1]));
	for (int i = 0; i < 3; i++) {
		assert_false(zkl_lock_is_held(t.l[i]));
		assert_true(h_children(t.p[i]) <= 0);
		assert_true(other_can_take(t.b, t.p[i]));
	}
	/* The hold is over. */
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(t.ml));

	/* The first error is the one returned: the last member fails first (reverse order). */
	zkl_semaphore_mutex *s;
	const char *ps = h_sub(t.base, "4");
	CHECK_OK(zkl_semaphore_mutex_new(&s, t.a, ps));
	zkl_lock *ls = zkl_semaphore_mutex_lock(s);
	CHECK_OK(zkl_multilock_add(t.ml, ls));
	CHECK_OK(zkl_multilock_acquire(t.ml, 5000));
	CHECK_OK(zkl_lock_release(ls));
	CHECK_OK(zkl_lock_release(t.l[0]));
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(t.ml));
	assert_non_null(strstr(zkl_last_error(), ps));
	for (int i = 0; i < 3; i++)
		assert_true(other_can_take(t.b, t.p[i]));

	zkl_multilock_free(t.ml); /* before its member s */
	t.ml = NULL;
	zkl_semaphore_mutex_free(s);
	three_close(&t);
}

/* ---- opposite orders of addition do not deadlock in canonical order ---- */

struct crossed {
	const char *first, *second;
	int rounds;
	h_excl *excl; /* shared: counts who is inside */
	int errors;
	h_latch *done;
};

static void *crossed_thread(void *arg)
{
	struct crossed *x = arg;
	zkl_client *c = h_client(0);
	zkl_mutex *m1, *m2;
	zkl_multilock *ml;
	if (zkl_mutex_new(&m1, c, x->first) || zkl_mutex_new(&m2, c, x->second) ||
	    zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL) ||
	    zkl_multilock_add(ml, zkl_mutex_lock(m1)) ||
	    zkl_multilock_add(ml, zkl_mutex_lock(m2))) {
		x->errors++;
		h_latch_set(x->done);
		return NULL;
	}
	for (int i = 0; i < x->rounds; i++) {
		if (zkl_multilock_acquire(ml, -1) != 0) {
			x->errors++;
			continue;
		}
		h_excl_section(x->excl);
		if (zkl_multilock_release(ml) != 0)
			x->errors++;
	}
	zkl_multilock_free(ml);
	zkl_mutex_free(m1);
	zkl_mutex_free(m2);
	zkl_client_close(c);
	h_latch_set(x->done);
	return NULL;
}

static void test_opposite_orders(void **state)
{
	(void)state;
	const char *base = h_path("crossed");
	const char *pa = h_sub(base, "a"), *pb = h_sub(base, "b");
	h_excl excl = {0};
	struct crossed x[2] = {
		{ .first = pa, .second = pb, .rounds = 50, .excl = &excl, .done = h_latch_new() },
		{ .first = pb, .second = pa, .rounds = 50, .excl = &excl, .done = h_latch_new() },
	};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, crossed_thread, &x[i]);
	/* A deadlock shows as a thread that never finishes: fail rather than hang. */
	for (int i = 0; i < 2; i++)
		if (!h_latch_wait(x[i].done, 120000))
			fail_msg("thread %d did not finish its rounds: deadlock?", i);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(x[i].errors, 0);
		h_latch_free(x[i].done);
	}
	assert_int_equal(excl.max_inside, 1);
	assert_true(h_children(pa) <= 0);
	assert_true(h_children(pb) <= 0);
}

/* ---- ZKL_MULTILOCK_AS_ADDED keeps the order of addition ---- */

static void test_as_added_order(void **state)
{
	(void)state;
	const char *base = h_path("order");
	/* A is added first but sorts after B. */
	const char *pa = h_sub(base, "2-a"), *pb = h_sub(base, "1-b");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb, *other;
	CHECK_OK(zkl_mutex_new(&ma, a, pa));
	CHECK_OK(zkl_mutex_new(&mb, a, pb));
	CHECK_OK(zkl_mutex_new(&other, b, pb));
	zkl_lock *la = zkl_mutex_lock(ma), *lb = zkl_mutex_lock(mb), *ol = zkl_mutex_lock(other);
	CHECK_OK(zkl_lock_acquire(ol, -1));

	/* In the order added, A is taken (then given back) and B fails second. */
	zkl_multilock *as, *canon;
	CHECK_OK(zkl_multilock_new(&as, ZKL_MULTILOCK_AS_ADDED));
	CHECK_OK(zkl_multilock_add(as, la));
	CHECK_OK(zkl_multilock_add(as, lb));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(as, 0));
	assert_non_null(strstr(zkl_last_error(), "member 2 of 2"));
	assert_non_null(strstr(zkl_last_error(), pb));
	assert_false(zkl_lock_is_held(la));
	assert_true(h_children(pa) <= 0);

	/* In canonical order, B is first and fails before A is tried. */
	CHECK_OK(zkl_multilock_new(&canon, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(canon, la));
	CHECK_OK(zkl_multilock_add(canon, lb));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_multilock_acquire(canon, 0));
	assert_non_null(strstr(zkl_last_error(), "member 1 of 2"));
	assert_non_null(strstr(zkl_last_error(), pb));
	assert_false(zkl_lock_is_held(la));

	CHECK_OK(zkl_lock_release(ol));
	CHECK_OK(zkl_multilock_acquire(as, 0));
	CHECK_OK(zkl_multilock_release(as));
	zkl_multilock_free(as);
	zkl_multilock_free(canon);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_mutex_free(other);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- nesting, freeing while held, release from another thread ---- */

static void *release_other(void *arg)
{
	return (void *)(intptr_t)zkl_multilock_release(arg);
}

static void test_nesting_and_free(void **state)
{
	(void)state;
	const char *base = h_path("nest");
	const char *p1 = h_sub(base, "1"), *p2 = h_sub(base, "2");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *m1, *m2;
	CHECK_OK(zkl_mutex_new(&m1, a, p1));
	CHECK_OK(zkl_mutex_new(&m2, a, p2));
	zkl_lock *l1 = zkl_mutex_lock(m1), *l2 = zkl_mutex_lock(m2);
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, l1));
	CHECK_OK(zkl_multilock_add(ml, l2));
	CHECK_OK(zkl_multilock_acquire(ml, -1));
	/* Mutex members are reentrant, so is the multi-lock; one release per acquire. */
	CHECK_OK(zkl_multilock_acquire(ml, 0));
	assert_int_equal(h_children(p1), 1);
	assert_int_equal(h_children(p2), 1);

	CHECK_RC(ZKL_ENOTOWNER, h_in_thread(release_other, ml));
	assert_true(zkl_multilock_is_held(ml));

	CHECK_OK(zkl_multilock_release(ml));
	assert_true(zkl_multilock_is_held(ml));
	assert_int_equal(h_children(p1), 1);
	CHECK_OK(zkl_multilock_release(ml));
	assert_false(zkl_multilock_is_held(ml));
	assert_true(h_children(p1) <= 0);

	/* Freeing a held multi-lock releases it (every level). */
	CHECK_OK(zkl_multilock_acquire(ml, -1));
	CHECK_OK(zkl_multilock_acquire(ml, -1));
	zkl_multilock_free(ml);
	assert_false(zkl_lock_is_held(l1));
	assert_false(zkl_lock_is_held(l2));
	assert_true(other_can_take(b, p1));
	assert_true(other_can_take(b, p2));

	zkl_mutex_free(m1);
	zkl_mutex_free(m2);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- a blocking multi-lock takes a semaphore member's lease as the handle's:
 * acquiring again while held fails at once with ZKL_EBUSY, and the re-entered mutex
 * member is given back one level, its node kept ---- */

static void test_nested_semaphore_member(void **state)
{
	(void)state;
	const char *base = h_path("nest-sem");
	const char *pm = h_sub(base, "1"), *ps = h_sub(base, "2");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *m;
	zkl_semaphore_mutex *s;
	CHECK_OK(zkl_mutex_new(&m, a, pm));
	CHECK_OK(zkl_semaphore_mutex_new(&s, a, ps));
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(m)));
	CHECK_OK(zkl_multilock_add(ml, zkl_semaphore_mutex_lock(s)));
	CHECK_OK(zkl_multilock_acquire(ml, 5000));
	CHECK_RC(ZKL_EBUSY, zkl_multilock_acquire(ml, 5000));
	assert_non_null(strstr(zkl_last_error(), ps));
	assert_true(zkl_multilock_is_held(ml));
	assert_int_equal(h_children(pm), 1);
	assert_false(other_can_take(b, pm));
	CHECK_OK(zkl_multilock_release(ml));
	assert_false(zkl_multilock_is_held(ml));
	assert_true(h_children(pm) <= 0);
	assert_true(other_can_take(b, pm));
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(ml));
	zkl_multilock_free(ml);
	zkl_mutex_free(m);
	zkl_semaphore_mutex_free(s);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* ---- bad arguments and states ---- */

static void test_invalid(void **state)
{
	(void)state;
	zkl_client *c = h_client(0);
	const char *base = h_path("invalid");
	zkl_multilock *ml = (zkl_multilock *)1;
	CHECK_RC(ZKL_EINVAL, zkl_multilock_new(NULL, ZKL_MULTILOCK_CANONICAL));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_new(&ml, (enum zkl_multilock_order)7));
	assert_null(ml);
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));

	CHECK_RC(ZKL_EINVAL, zkl_multilock_acquire(ml, -1));
	assert_true(strlen(zkl_last_error()) > 0);
	CHECK_RC(ZKL_EINVAL, zkl_multilock_acquire(ml, 0));
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(ml));
	assert_false(zkl_multilock_is_held(ml));

	zkl_mutex *m, *m2;
	zkl_semaphore_mutex *s;
	CHECK_OK(zkl_mutex_new(&m, c, h_sub(base, "m")));
	CHECK_OK(zkl_mutex_new(&m2, c, h_sub(base, "m2")));
	CHECK_OK(zkl_semaphore_mutex_new(&s, c, h_sub(base, "s")));
	zkl_lock *lm = zkl_mutex_lock(m), *lm2 = zkl_mutex_lock(m2);
	zkl_lock *ls = zkl_semaphore_mutex_lock(s);
	CHECK_OK(zkl_multilock_add(ml, lm));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, lm));
	assert_true(strlen(zkl_last_error()) > 0);
	CHECK_OK(zkl_multilock_add(ml, ls));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, ls));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(NULL)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_semaphore_mutex_lock(NULL)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_acquire(ml, -2));
	assert_non_null(strstr(zkl_last_error(), "-2"));
	CHECK_RC(ZKL_ENOTHELD, zkl_multilock_release(ml));

	CHECK_RC(ZKL_EINVAL, zkl_multilock_acquire(NULL, 0));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_release(NULL));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(NULL, lm));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(NULL, ls));
	assert_false(zkl_multilock_is_held(NULL));
	zkl_multilock_free(NULL);

	/* No adding while held. */
	CHECK_OK(zkl_multilock_acquire(ml, 5000));
	CHECK_RC(ZKL_EBUSY, zkl_multilock_add(ml, lm2));
	CHECK_OK(zkl_multilock_release(ml));
	CHECK_OK(zkl_multilock_add(ml, lm2));
	CHECK_OK(zkl_multilock_acquire(ml, 5000));
	assert_true(zkl_lock_is_held(lm2));
	CHECK_OK(zkl_multilock_release(ml));

	zkl_multilock_free(ml);
	zkl_mutex_free(m);
	zkl_mutex_free(m2);
	zkl_semaphore_mutex_free(s);
	zkl_client_close(c);
}

/* ---- asynchronous acquires of overlapping multi-locks on two clients, and a blocking
 * one on a third, keep a shared counter whole ---- */

/* Rounds of one asynchronous multi-lock, each started from the previous round's callback
 * after its release: everything runs on the client's event thread. */
struct async_rounds {
	zkl_lock *view;
	int left;
	h_excl *excl;
	int errors;
	int rc;         /* the last failure */
	char error[256];
	h_counter *done;
};

static void async_round(zkl_lock *l, int rc, void *data)
{
	struct async_rounds *r = data;
	if (rc == 0) {
		h_excl_section(r->excl);
		rc = zkl_lock_release(l);
	}
	if (rc == 0 && --r->left > 0)
		rc = zkl_lock_acquire_async(l, 30000, async_round, r);
	if (rc != 0) {
		r->errors++;
		r->rc = rc;
		snprintf(r->error, sizeof r->error, "%s: %s", zkl_strerror(rc), zkl_last_error());
	}
	if (rc != 0 || r->left == 0)
		h_counter_add(r->done, 1);
}

struct blocking_rounds {
	zkl_multilock *ml;
	int rounds;
	h_excl *excl;
	int errors;
	h_counter *done;
};

static void *blocking_round_thread(void *arg)
{
	struct blocking_rounds *b = arg;
	for (int i = 0; i < b->rounds; i++) {
		if (zkl_multilock_acquire(b->ml, 30000) != 0) {
			b->errors++;
			continue;
		}
		h_excl_section(b->excl);
		if (zkl_multilock_release(b->ml) != 0)
			b->errors++;
	}
	h_counter_add(b->done, 1);
	return NULL;
}

static void test_async_overlapping(void **state)
{
	(void)state;
	enum { ROUNDS = 40 };
	const char *base = h_path("async-overlap");
	const char *p[3] = { h_sub(base, "1"), h_sub(base, "2"), h_sub(base, "3") };
	/* a: {1, 2} asynchronously; b: {2, 3} asynchronously; c: {1, 3} blocking. Every two
	 * of them share a member, so at most one is inside at a time. */
	static const int pick[3][2] = { { 0, 1 }, { 1, 2 }, { 0, 2 } };
	zkl_client *c[3];
	zkl_mutex *m[3][2];
	zkl_multilock *ml[3];
	for (int i = 0; i < 3; i++) {
		c[i] = h_client(0);
		CHECK_OK(zkl_multilock_new(&ml[i], ZKL_MULTILOCK_CANONICAL));
		for (int j = 0; j < 2; j++) {
			CHECK_OK(zkl_mutex_new(&m[i][j], c[i], p[pick[i][j]]));
			CHECK_OK(zkl_multilock_add(ml[i], zkl_mutex_lock(m[i][j])));
		}
	}
	h_excl excl = {0};
	h_counter done;
	h_counter_init(&done);
	struct async_rounds r[2];
	for (int i = 0; i < 2; i++) {
		r[i] = (struct async_rounds){ .view = zkl_multilock_lock(ml[i]), .left = ROUNDS,
		                              .excl = &excl, .done = &done };
		CHECK_OK(zkl_lock_acquire_async(r[i].view, 30000, async_round, &r[i]));
	}
	struct blocking_rounds b = { .ml = ml[2], .rounds = ROUNDS, .excl = &excl,
	                             .done = &done };
	pthread_t th;
	pthread_create(&th, NULL, blocking_round_thread, &b);
	/* A deadlock shows as rounds that never end: fail rather than hang. */
	if (!h_counter_wait(&done, 3, 120000))
		fail_msg("the rounds did not finish: deadlock?");
	pthread_join(th, NULL);
	for (int i = 0; i < 2; i++)
		if (r[i].errors)
			fail_msg("async rounds of %d: %s", i, r[i].error);
	assert_int_equal(b.errors, 0);
	assert_int_equal(excl.max_inside, 1);
	assert_int_equal(excl.total, 3 * ROUNDS);
	for (int i = 0; i < 3; i++)
		assert_false(zkl_multilock_is_held(ml[i]));
	/* Nothing is left behind once the deletes sent on the loops are answered. */
	for (int k = 0; k < 3; k++)
		h_wait_children(p[k], 0);
	for (int i = 0; i < 3; i++) {
		zkl_multilock_free(ml[i]);
		for (int j = 0; j < 2; j++)
			zkl_mutex_free(m[i][j]);
		zkl_client_close(c[i]);
	}
	h_counter_destroy(&done);
}

/* ---- asynchronous acquire on a real server: all or nothing ---- */

static void test_async_all_or_nothing(void **state)
{
	(void)state;
	struct three t;
	three_open(&t, "async-aon");
	zkl_mutex *other;
	CHECK_OK(zkl_mutex_new(&other, t.b, t.p[1]));
	zkl_lock *ol = zkl_mutex_lock(other);
	CHECK_OK(zkl_lock_acquire(ol, -1));
	zkl_lock *view = zkl_multilock_lock(t.ml);
	h_counter done;
	h_counter_init(&done);
	struct async_rounds r = { .view = view, .left = 1, .excl = &(h_excl){0}, .done = &done };
	CHECK_OK(zkl_lock_acquire_async(view, 2000, async_round, &r));
	assert_true(h_counter_wait(&done, 1, 20000));
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.rc, ZKL_ETIMEDOUT);
	assert_non_null(strstr(r.error, t.p[1]));
	h_wait_children(t.p[0], 0);
	h_wait_children(t.p[1], 1);
	assert_true(h_children(t.p[2]) <= 0);
	assert_true(other_can_take(t.b, t.p[0]));
	CHECK_OK(zkl_lock_release(ol));
	zkl_mutex_free(other);
	h_counter_destroy(&done);
	three_close(&t);
}

/* ---- one deadline for the whole asynchronous acquire, not one per member ---- */

static void test_async_one_deadline(void **state)
{
	(void)state;
	struct three t;
	three_open(&t, "async-deadline");
	struct staggered s = { .c = t.b, .p2 = t.p[1], .p3 = t.p[2], .ready = h_latch_new(),
	                       .done = h_latch_new() };
	pthread_t th;
	pthread_create(&th, NULL, staggered_thread, &s);
	assert_true(h_latch_wait(s.ready, 20000));
	h_counter done;
	h_counter_init(&done);
	struct async_rounds r = { .view = zkl_multilock_lock(t.ml), .left = 1,
	                          .excl = &(h_excl){0}, .done = &done };
	/* Member 2 comes free after about 2000 ms, member 3 never: with one deadline the
	 * callback comes after about 4000 ms, with one per member after about 6000. */
	int64_t t0 = now_ms();
	CHECK_OK(zkl_lock_acquire_async(r.view, 4000, async_round, &r));
	assert_true(h_counter_wait(&done, 1, 20000));
	int64_t elapsed = now_ms() - t0;
	assert_int_equal(r.rc, ZKL_ETIMEDOUT);
	assert_true(elapsed >= 3900);
	assert_true(elapsed < 5500);
	assert_non_null(strstr(r.error, t.p[2]));
	h_wait_children(t.p[0], 0);
	h_wait_children(t.p[1], 0);
	assert_int_equal(h_children(t.p[2]), 1);
	h_latch_set(s.done);
	pthread_join(th, NULL);
	CHECK_OK(s.rc);
	h_latch_free(s.ready);
	h_latch_free(s.done);
	h_counter_destroy(&done);
	three_close(&t);
}

static zkl_client *client_on(const char *servers)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	o.session_timeout_ms = 4000;
	zkl_client *c = NULL;
	CHECK_OK(zkl_client_open(&c, &o));
	return c;
}

/* Members are one node when they resolve to one: a chroot client's "/m" is a plain
 * client's "<chroot>/m" on the same ensemble (servers that name a server in common),
 * and a multi-lock of both would wait for itself: refused. Another chroot is another
 * node. */
static void test_same_node_through_a_chroot(void **state)
{
	(void)state;
	const char *root = h_path("ml-chroot");
	char servers[1024], more[1024], other[1024], plain_path[512];
	snprintf(servers, sizeof servers, "%s%s", h_servers(), root);
	snprintf(more, sizeof more, "127.0.0.1:1,%s", h_servers());
	snprintf(other, sizeof other, "%s%s-other", h_servers(), root);
	snprintf(plain_path, sizeof plain_path, "%s/m", root);
	zkl_client *cc = client_on(servers), *cp = client_on(more), *co = client_on(other);
	zkl_mutex *mc, *mp, *mo;
	CHECK_OK(zkl_mutex_new(&mc, cc, "/m"));
	CHECK_OK(zkl_mutex_new(&mp, cp, plain_path));
	CHECK_OK(zkl_mutex_new(&mo, co, "/m"));
	zkl_multilock *ml;
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_CANONICAL));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(mc)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(mp)));
	assert_non_null(strstr(zkl_last_error(), "wait for itself"));
	assert_non_null(strstr(zkl_last_error(), plain_path));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(mo)));
	zkl_multilock_free(ml);
	/* The other way round too. */
	CHECK_OK(zkl_multilock_new(&ml, ZKL_MULTILOCK_AS_ADDED));
	CHECK_OK(zkl_multilock_add(ml, zkl_mutex_lock(mp)));
	CHECK_RC(ZKL_EINVAL, zkl_multilock_add(ml, zkl_mutex_lock(mc)));
	zkl_multilock_free(ml);
	zkl_mutex_free(mc);
	zkl_mutex_free(mp);
	zkl_mutex_free(mo);
	zkl_client_close(cc);
	zkl_client_close(cp);
	zkl_client_close(co);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nested_semaphore_member),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_same_node_through_a_chroot),
		cmocka_unit_test(test_all_or_nothing),
		cmocka_unit_test(test_one_deadline),
		cmocka_unit_test(test_mixed_members),
		cmocka_unit_test(test_release_continues_past_errors),
		cmocka_unit_test(test_as_added_order),
		cmocka_unit_test(test_nesting_and_free),
		cmocka_unit_test(test_opposite_orders),
		cmocka_unit_test(test_async_overlapping),
		cmocka_unit_test(test_async_all_or_nothing),
		cmocka_unit_test(test_async_one_deadline),
	};
	return H_RUN(tests);
}
