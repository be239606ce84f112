/* The observer (zkl_client_set_observer) and the histograms of zkl_client_get_stats, on a
 * real server: each event in order, with the path, kind, node and token, and times
 * checked against bounds the test measures itself on the same clock, so that a wrong
 * time cannot pass. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* TIMEOUT_MS: an acquire that must time out, after it queued: long enough for its node
 * to be queued (a semaphore's gate, then its lease) on a loaded machine. */
enum { MAX_EVENTS = 64, WAIT_MS = 20000, KEEP_MS = 200, TIMEOUT_MS = 1500 };

struct seen {
	zkl_lock_event ev;
	char path[256], node[256], kind[32];
	bool on_event_thread_unlocked; /* a zklocks call made from the observer worked */
};

/* What one client's observer saw. */
struct log {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct seen ev[MAX_EVENTS];
	int n;
	zkl_client *c;
};

static void observed(zkl_client *c, const zkl_lock_event *ev, void *data)
{
	struct log *g = data;
	assert_ptr_equal(c, g->c);
	/* No lock of zklocks is held: a call that takes the client's lock returns. */
	zkl_client_stats st;
	const bool ok = zkl_client_get_stats(c, &st, sizeof st) == 0 &&
	                zkl_client_state(c) != ZKL_STATE_CLOSED;
	pthread_mutex_lock(&g->mu);
	if (g->n < MAX_EVENTS) {
		struct seen *s = &g->ev[g->n++];
		s->ev = *ev;
		snprintf(s->path, sizeof s->path, "%s", ev->path ? ev->path : "");
		snprintf(s->node, sizeof s->node, "%s", ev->node ? ev->node : "");
		snprintf(s->kind, sizeof s->kind, "%s", ev->kind ? ev->kind : "");
		s->on_event_thread_unlocked = ok;
	}
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static void log_init(struct log *g, zkl_client *c)
{
	memset(g, 0, sizeof *g);
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->c = c;
	CHECK_OK(zkl_client_set_observer(c, observed, g));
}

static void log_fini(struct log *g)
{
	CHECK_OK(zkl_client_set_observer(g->c, NULL, NULL));
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
}

/* Waits until the log holds n events; returns the n-th (1-based). Fails the test if it
 * does not come within WAIT_MS. */
static struct seen *nth(struct log *g, int n)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&g->mu);
	while (g->n < n && pthread_cond_timedwait(&g->cv, &g->mu, &until) != ETIMEDOUT)
		;
	const int have = g->n;
	pthread_mutex_unlock(&g->mu);
	if (have < n)
		fail_msg("the observer was told %d events, expected at least %d", have, n);
	struct seen *s = &g->ev[n - 1];
	print_message("# %d: %s %s %s node=%s token=%lld ahead=%d wait=%lld hold=%lld\n", n,
	              zkl_lock_event_name(s->ev.type), s->kind, s->path, s->node,
	              (long long)s->ev.token, s->ev.ahead, (long long)s->ev.wait_ms,
	              (long long)s->ev.hold_ms);
	assert_true(s->on_event_thread_unlocked);
	return s;
}

static int count(struct log *g)
{
	pthread_mutex_lock(&g->mu);
	int n = g->n;
	pthread_mutex_unlock(&g->mu);
	return n;
}

static uint64_t hist_sum(const uint64_t *h)
{
	uint64_t n = 0;
	for (int i = 0; i < ZKL_STATS_BUCKETS; i++)
		n += h[i];
	return n;
}

/* The bucket a time falls in, by zkl_stats_bucket_ms(). */
static int bucket_of(int64_t ms)
{
	int i = 0;
	while (ms > zkl_stats_bucket_ms(i))
		i++;
	return i;
}

static void set_on_grant(zkl_lock *l, int rc, void *latch)
{
	(void)l;
	if (rc == 0)
		h_latch_set(latch);
}

/* A waiter queued behind a holder of another client: queued with one ahead, granted after
 * the holder's release with the wait it had, released with the hold it had. */
static void test_wait_and_hold(void **state)
{
	(void)state;
	const char *path = h_path("observer-wait");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	struct log g;
	log_init(&g, b);
	zkl_client_stats before;
	CHECK_OK(zkl_client_get_stats(b, &before, sizeof before));

	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(ma), WAIT_MS));
	h_latch *granted = h_latch_new();
	const int64_t t0 = zkl_monotonic_ms();
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(mb), WAIT_MS, set_on_grant, granted));
	struct seen *q = nth(&g, 1);
	assert_int_equal(q->ev.type, ZKL_EVENT_QUEUED);
	assert_string_equal(q->kind, "mutex");
	assert_string_equal(q->path, path);
	assert_int_equal(q->ev.ahead, 1);
	assert_int_equal(strncmp(q->node, path, strlen(path)), 0);
	assert_true(q->ev.at_ms >= t0);
	/* The holder keeps it a known while after the waiter queued: the time measured,
	 * not a synchronisation (the queued event was). */
	usleep(KEEP_MS * 1000);
	const int64_t r0 = zkl_monotonic_ms();
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(ma)));
	assert_int_equal(h_latch_wait(granted, WAIT_MS), 1);
	const int64_t t1 = zkl_monotonic_ms();
	struct seen *gr = nth(&g, 2);
	assert_int_equal(gr->ev.type, ZKL_EVENT_GRANTED);
	assert_string_equal(gr->node, q->node);
	assert_int_equal(gr->ev.token, zkl_lock_token(zkl_mutex_lock(mb)));
	/* Granted after the holder began its release, and before the waiter was told. The
	 * wait counts from inside the acquire call, which may start well after t0 on a
	 * loaded machine, but before the waiter queued. */
	assert_true(gr->ev.wait_ms >= KEEP_MS && gr->ev.wait_ms >= r0 - q->ev.at_ms);
	assert_true(gr->ev.wait_ms <= t1 - t0);
	assert_true(gr->ev.at_ms >= r0 && gr->ev.at_ms <= t1);

	usleep(KEEP_MS * 1000); /* a hold of a known length */
	const int64_t h0 = zkl_monotonic_ms();
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(mb)));
	const int64_t h1 = zkl_monotonic_ms();
	struct seen *rel = nth(&g, 3);
	assert_int_equal(rel->ev.type, ZKL_EVENT_RELEASED);
	assert_string_equal(rel->node, q->node);
	assert_int_equal(rel->ev.token, gr->ev.token);
	assert_true(rel->ev.hold_ms >= KEEP_MS && rel->ev.hold_ms >= h0 - t1);
	assert_true(rel->ev.hold_ms <= h1 - gr->ev.at_ms);
	h_latch_free(granted);
	assert_int_equal(count(&g), 3);

	/* The histograms count the one wait and the one hold, in their buckets. */
	zkl_client_stats after;
	CHECK_OK(zkl_client_get_stats(b, &after, sizeof after));
	assert_int_equal(hist_sum(after.wait_hist) - hist_sum(before.wait_hist), 1);
	assert_int_equal(hist_sum(after.hold_hist) - hist_sum(before.hold_hist), 1);
	const int wb = bucket_of(gr->ev.wait_ms), hb = bucket_of(rel->ev.hold_ms);
	assert_int_equal(after.wait_hist[wb] - before.wait_hist[wb], 1);
	assert_int_equal(after.hold_hist[hb] - before.hold_hist[hb], 1);
	assert_int_equal(after.wait_sum_ms - before.wait_sum_ms, (uint64_t)gr->ev.wait_ms);
	assert_int_equal(after.hold_sum_ms - before.hold_sum_ms, (uint64_t)rel->ev.hold_ms);

	log_fini(&g);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
}

static void acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	int *out = data;
	*out = rc;
}

/* A timeout and a cancel are told with their waits; a try-once that finds the lock held
 * is a timeout without a queue. */
static void test_timed_out_and_canceled(void **state)
{
	(void)state;
	const char *path = h_path("observer-timeout");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *ma, *mb;
	CHECK_OK(zkl_mutex_new(&ma, a, path));
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	struct log g;
	log_init(&g, b);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(ma), WAIT_MS));

	const int64_t t0 = zkl_monotonic_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(zkl_mutex_lock(mb), TIMEOUT_MS));
	const int64_t t1 = zkl_monotonic_ms();
	assert_int_equal(nth(&g, 1)->ev.type, ZKL_EVENT_QUEUED);
	struct seen *to = nth(&g, 2);
	assert_int_equal(to->ev.type, ZKL_EVENT_TIMED_OUT);
	assert_string_equal(to->path, path);
	assert_int_equal(to->ev.token, 0);
	assert_true(to->ev.wait_ms >= TIMEOUT_MS && to->ev.wait_ms <= t1 - t0);

	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(zkl_mutex_lock(mb), 0));
	struct seen *once = nth(&g, 3);
	assert_int_equal(once->ev.type, ZKL_EVENT_TIMED_OUT);

	int rc = 1;
	CHECK_OK(zkl_lock_acquire_async(zkl_mutex_lock(mb), -1, acquired, &rc));
	assert_int_equal(nth(&g, 4)->ev.type, ZKL_EVENT_QUEUED);
	zkl_lock_cancel(zkl_mutex_lock(mb));
	struct seen *cn = nth(&g, 5);
	assert_int_equal(cn->ev.type, ZKL_EVENT_CANCELED);
	assert_true(cn->ev.wait_ms >= 0);

	CHECK_OK(zkl_lock_release(zkl_mutex_lock(ma)));
	log_fini(&g);
	zkl_mutex_free(ma);
	zkl_mutex_free(mb);
	zkl_client_close(a);
	zkl_client_close(b);
	assert_int_equal(rc, ZKL_ECANCELED);
}

static void revoke_me(zkl_mutex *m, void *data)
{
	(void)m;
	h_latch_set(data);
}

/* A revocation request, then the loss of the hold to its node's deletion: each told with
 * the hold's node and token; the loss counts in the hold histogram. A read and a write
 * lock say which they are. */
static void test_revoked_and_lost(void **state)
{
	(void)state;
	const char *path = h_path("observer-lost");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_mutex *mb;
	CHECK_OK(zkl_mutex_new(&mb, b, path));
	h_latch *asked = h_latch_new();
	CHECK_OK(zkl_mutex_make_revocable(mb, revoke_me, asked));
	struct log g;
	log_init(&g, b);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(mb), WAIT_MS));
	struct seen *gr = nth(&g, 1);
	assert_int_equal(gr->ev.type, ZKL_EVENT_GRANTED);
	char node[256];
	h_node_known(zkl_mutex_lock(mb), node, sizeof node);
	assert_string_equal(gr->node, node);

	CHECK_OK(zkl_revoke(a, node));
	assert_int_equal(h_latch_wait(asked, WAIT_MS), 1);
	struct seen *rv = nth(&g, 2);
	assert_int_equal(rv->ev.type, ZKL_EVENT_REVOKED);
	assert_string_equal(rv->node, node);
	assert_int_equal(rv->ev.token, gr->ev.token);

	zkl_client_stats before;
	CHECK_OK(zkl_client_get_stats(b, &before, sizeof before));
	h_latch *lost = h_latch_new();
	CHECK_OK(zkl_lock_on_lost(zkl_mutex_lock(mb), h_on_lost, lost));
	h_delete(node);
	assert_int_equal(h_latch_wait(lost, WAIT_MS), 1);
	struct seen *ls = nth(&g, 3);
	assert_int_equal(ls->ev.type, ZKL_EVENT_LOST);
	assert_string_equal(ls->node, node);
	assert_int_equal(ls->ev.token, gr->ev.token);
	assert_true(ls->ev.hold_ms >= rv->ev.at_ms - gr->ev.at_ms);
	CHECK_RC(ZKL_ELOST, zkl_lock_release(zkl_mutex_lock(mb)));
	zkl_client_stats after;
	CHECK_OK(zkl_client_get_stats(b, &after, sizeof after));
	assert_int_equal(hist_sum(after.hold_hist) - hist_sum(before.hold_hist), 1);
	/* A lost hold's release is no second event. */
	assert_int_equal(count(&g), 3);

	zkl_rwlock *rw;
	CHECK_OK(zkl_rwlock_new(&rw, b, h_path("observer-rw")));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(zkl_rwlock_read(rw)), WAIT_MS));
	assert_string_equal(nth(&g, 4)->kind, "read");
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(zkl_rwlock_read(rw))));
	assert_int_equal(nth(&g, 5)->ev.type, ZKL_EVENT_RELEASED);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(zkl_rwlock_write(rw)), WAIT_MS));
	assert_string_equal(nth(&g, 6)->kind, "write");
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(zkl_rwlock_write(rw))));
	assert_int_equal(nth(&g, 7)->ev.type, ZKL_EVENT_RELEASED);

	log_fini(&g);
	zkl_rwlock_free(rw);
	zkl_mutex_free(mb);
	h_latch_free(asked);
	h_latch_free(lost);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* With no observer nothing is told or kept; a replaced observer is not called again once
 * set_observer returned; bad arguments are refused. */
static void test_set_and_unset(void **state)
{
	(void)state;
	CHECK_RC(ZKL_EINVAL, zkl_client_set_observer(NULL, observed, NULL));
	assert_string_equal(zkl_lock_event_name(ZKL_EVENT_GRANTED), "granted");
	assert_string_equal(zkl_lock_event_name((zkl_lock_event_type)99), "unknown");
	assert_int_equal(zkl_stats_bucket_ms(0), 1);
	assert_int_equal(zkl_stats_bucket_ms(ZKL_STATS_BUCKETS - 1), INT64_MAX);
	assert_int_equal(zkl_stats_bucket_ms(-1), INT64_MAX);

	zkl_client *b = h_client(0);
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, b, h_path("observer-unset")));
	struct log g1, g2;
	log_init(&g1, b);
	CHECK_OK(zkl_client_set_observer(b, NULL, NULL));
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), WAIT_MS));
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	log_init(&g2, b);
	CHECK_OK(zkl_lock_acquire(zkl_mutex_lock(m), WAIT_MS));
	assert_int_equal(nth(&g2, 1)->ev.type, ZKL_EVENT_GRANTED);
	CHECK_OK(zkl_lock_release(zkl_mutex_lock(m)));
	assert_int_equal(nth(&g2, 2)->ev.type, ZKL_EVENT_RELEASED);
	assert_int_equal(count(&g1), 0);
	assert_int_equal(count(&g2), 2);
	log_fini(&g2);
	pthread_cond_destroy(&g1.cv);
	pthread_mutex_destroy(&g1.mu);
	zkl_mutex_free(m);
	zkl_client_close(b);
}

/* A leadership taken through the leader's lock view: granted and released, with the
 * leader's token; a second contender queues behind it and is granted after. */
static void test_leader(void **state)
{
	(void)state;
	const char *path = h_path("observer-leader");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_leader *la, *lb;
	CHECK_OK(zkl_leader_new(&la, a, path, NULL));
	CHECK_OK(zkl_leader_new(&lb, b, path, NULL));
	struct log g;
	log_init(&g, b);
	CHECK_OK(zkl_lock_acquire(zkl_leader_lock(la), WAIT_MS));
	h_latch *granted = h_latch_new();
	CHECK_OK(zkl_lock_acquire_async(zkl_leader_lock(lb), WAIT_MS, set_on_grant, granted));
	struct seen *q = nth(&g, 1);
	assert_int_equal(q->ev.type, ZKL_EVENT_QUEUED);
	assert_string_equal(q->kind, "leader");
	assert_int_equal(q->ev.ahead, 1);
	CHECK_OK(zkl_lock_release(zkl_leader_lock(la)));
	assert_int_equal(h_latch_wait(granted, WAIT_MS), 1);
	struct seen *gr = nth(&g, 2);
	assert_int_equal(gr->ev.type, ZKL_EVENT_GRANTED);
	assert_string_equal(gr->node, q->node);
	assert_int_equal(gr->ev.token, zkl_lock_token(zkl_leader_lock(lb)));
	CHECK_OK(zkl_lock_release(zkl_leader_lock(lb)));
	struct seen *rel = nth(&g, 3);
	assert_int_equal(rel->ev.type, ZKL_EVENT_RELEASED);
	assert_string_equal(rel->kind, "leader");
	assert_int_equal(rel->ev.token, gr->ev.token);
	assert_int_equal(count(&g), 3);
	log_fini(&g);
	h_latch_free(granted);
	zkl_leader_free(la);
	zkl_leader_free(lb);
	zkl_client_close(a);
	zkl_client_close(b);
}

/* A semaphore's lease: a wait for a lease that runs out is told as queued and timed out;
 * a lease taken is granted with its wait counted from the acquire's start (its gate's
 * turn included) and released with its hold. */
static void test_semaphore(void **state)
{
	(void)state;
	const char *path = h_path("observer-sem");
	zkl_client *a = h_client(0), *b = h_client(0);
	zkl_semaphore *sa, *sb;
	CHECK_OK(zkl_semaphore_new(&sa, a, path, 1));
	CHECK_OK(zkl_semaphore_new(&sb, b, path, 1));
	struct log g;
	log_init(&g, b);
	zkl_lease *la, *lb;
	CHECK_OK(zkl_semaphore_acquire(sa, 1, WAIT_MS, &la));
	/* sa's node at the gate may still be on its way out: sb would queue behind it
	 * there first (a queued event on the gate's folder). */
	h_wait_children(h_sub(path, "locks"), 0);
	const int64_t t0 = zkl_monotonic_ms();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_semaphore_acquire(sb, 1, TIMEOUT_MS, &lb));
	const int64_t t1 = zkl_monotonic_ms();
	struct seen *q = nth(&g, 1);
	assert_int_equal(q->ev.type, ZKL_EVENT_QUEUED);
	assert_string_equal(q->kind, "semaphore");
	assert_string_equal(q->path, h_sub(path, "leases"));
	assert_int_equal(q->ev.ahead, 1);
	struct seen *to = nth(&g, 2);
	assert_int_equal(to->ev.type, ZKL_EVENT_TIMED_OUT);
	assert_true(to->ev.wait_ms >= TIMEOUT_MS && to->ev.wait_ms <= t1 - t0);
	CHECK_OK(zkl_lease_release(la));
	zkl_lease_free(la);

	const int64_t t2 = zkl_monotonic_ms();
	CHECK_OK(zkl_semaphore_acquire(sb, 1, WAIT_MS, &lb));
	const int64_t t3 = zkl_monotonic_ms();
	struct seen *gr = nth(&g, 3);
	assert_int_equal(gr->ev.type, ZKL_EVENT_GRANTED);
	assert_string_equal(gr->kind, "semaphore");
	assert_true(gr->ev.token > 0);
	assert_true(gr->ev.wait_ms <= t3 - t2);
	CHECK_OK(zkl_lease_release(lb));
	zkl_lease_free(lb);
	struct seen *rel = nth(&g, 4);
	assert_int_equal(rel->ev.type, ZKL_EVENT_RELEASED);
	assert_string_equal(rel->node, gr->node);
	assert_int_equal(rel->ev.token, gr->ev.token);
	assert_int_equal(count(&g), 4);
	log_fini(&g);
	zkl_semaphore_free(sa);
	zkl_semaphore_free(sb);
	zkl_client_close(a);
	zkl_client_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_and_hold),
		cmocka_unit_test(test_timed_out_and_canceled),
		cmocka_unit_test(test_revoked_and_lost),
		cmocka_unit_test(test_set_and_unset),
		cmocka_unit_test(test_leader),
		cmocka_unit_test(test_semaphore),
	};
	return H_RUN(tests);
}
