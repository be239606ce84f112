/* Leader election (zkl_leader, zkl_selector) on a real ZooKeeper server (run through
 * tests/with-zk), after Curator's TestLeaderLatch and TestLeaderSelector: election among
 * five, the leader closing, its session expiring, its node deleted from outside, no two
 * leaders at once (a shared inside-counter and fencing tokens), no server at start, the
 * connection dropping and coming back, and the selector's run / give up / requeue cycle.
 *
 * Not here: the leader's server paused past the session timeout in an ensemble (the old
 * leader must be told before a new one is elected); that needs tests/with-ensemble and
 * belongs with the fault tests. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- participants ---- */

/* Order of callbacks across every participant of a test. */
static int sequence;

static int next_seq(void)
{
	return __atomic_add_fetch(&sequence, 1, __ATOMIC_SEQ_CST);
}

struct part {
	zkl_client *c;
	zkl_leader *l;
	char id[32];
	h_counter gained, lost;
	int last_reason;     /* atomic */
	int64_t token;       /* at the last gain (atomic) */
	int gained_seq;      /* next_seq() at the last gain */
	int lost_seq;        /* next_seq() at the last loss */
	int *inside;         /* shared by the participants of a test, or NULL */
	int *max_inside;
	bool led_in_gained;  /* has_leadership was true inside the last on_gained */
};

static void on_gained(zkl_leader *l, void *data)
{
	struct part *p = data;
	__atomic_store_n(&p->led_in_gained, zkl_lock_is_held(zkl_leader_lock(l)), __ATOMIC_SEQ_CST);
	__atomic_store_n(&p->token, zkl_lock_token(zkl_leader_lock(l)), __ATOMIC_SEQ_CST);
	if (p->inside)
		h_note_max(p->max_inside, __atomic_add_fetch(p->inside, 1, __ATOMIC_SEQ_CST));
	__atomic_store_n(&p->gained_seq, next_seq(), __ATOMIC_SEQ_CST);
	h_counter_add(&p->gained, 1);
}

static void on_lost(zkl_leader *l, int reason, void *data)
{
	(void)l;
	struct part *p = data;
	if (p->inside)
		__atomic_sub_fetch(p->inside, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&p->last_reason, reason, __ATOMIC_SEQ_CST);
	__atomic_store_n(&p->lost_seq, next_seq(), __ATOMIC_SEQ_CST);
	h_counter_add(&p->lost, 1);
}

/* Opens a client and a latch with callbacks (not started). */
static void part_open(struct part *p, const char *path, int i, int session_ms, bool notify)
{
	memset(p, 0, sizeof *p);
	h_counter_init(&p->gained);
	h_counter_init(&p->lost);
	snprintf(p->id, sizeof p->id, "participant-%d", i);
	p->c = h_client(session_ms);
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.id = p->id;
	o.on_gained = on_gained;
	o.on_lost = on_lost;
	o.data = p;
	o.notify_on_close = notify;
	CHECK_OK(zkl_leader_new(&p->l, p->c, path, &o));
}

static void part_close(struct part *p)
{
	zkl_leader_free(p->l);
	zkl_client_close(p->c);
	h_counter_destroy(&p->gained);
	h_counter_destroy(&p->lost);
}

/* Starts parts[0..n) one after the other, each once its node is queued, so that the
 * queue order is the array order. */
static void start_in_order(struct part *parts, int n, const char *path)
{
	for (int i = 0; i < n; i++) {
		CHECK_OK(zkl_leader_start(parts[i].l));
		h_wait_children(path, i + 1);
	}
}

static int leaders(struct part *parts, int n, int *which)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (zkl_lock_is_held(zkl_leader_lock(parts[i].l))) {
			k++;
			if (which)
				*which = i;
		}
	}
	return k;
}

/* Waits until exactly one of parts leads; returns its index. */
static int wait_one_leader(struct part *parts, int n)
{
	for (int t = 0; t < 2000; t++) {
		int who = -1;
		if (leaders(parts, n, &who) == 1)
			return who;
		usleep(5000);
	}
	fail_msg("no single leader among %d participants (%d lead)", n, leaders(parts, n, NULL));
	return -1;
}

/* ---- the latch ---- */

/* TestLeaderLatch.testBasic / testWaiting: one leader among five, the others wait. */
static void test_basic_five(void **state)
{
	(void)state;
	const char *path = h_path("leader-basic");
	struct part p[5];
	for (int i = 0; i < 5; i++)
		part_open(&p[i], path, i, 0, false);
	start_in_order(p, 5, path);
	int who = wait_one_leader(p, 5);
	assert_int_equal(who, 0);
	CHECK_OK(zkl_leader_await(p[0].l, 0));
	for (int i = 1; i < 5; i++)
		CHECK_RC(ZKL_ETIMEDOUT, zkl_leader_await(p[i].l, i == 1 ? 300 : 0));
	assert_true(h_counter_wait(&p[0].gained, 1, 5000));
	assert_true(p[0].led_in_gained);
	assert_int_equal(leaders(p, 5, NULL), 1);

	/* Curator's layout, the ids as data, the leader first. */
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[3].l), &ps, &n));
	assert_int_equal(n, 5);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(ps[i].data, p[i].id);
		assert_non_null(strstr(ps[i].path, "/_c_"));
		assert_non_null(strstr(ps[i].path, "-latch-"));
		assert_int_equal(ps[i].holder, i == 0);
	}
	assert_int_equal(zkl_lock_token(zkl_leader_lock(p[0].l)), ps[0].czxid);
	assert_int_equal(p[0].token, ps[0].czxid);
	zkl_participants_free(ps, n);
	char *id;
	CHECK_OK(zkl_leader_leader_id(p[4].l, &id));
	assert_string_equal(id, p[0].id);
	free(id);
	assert_int_equal(zkl_lock_token(zkl_leader_lock(p[1].l)), ZKL_ENOTHELD);

	for (int i = 0; i < 5; i++) {
		assert_int_equal(h_counter_get(&p[i].gained), i == 0 ? 1 : 0);
		assert_int_equal(h_counter_get(&p[i].lost), 0);
	}
	/* Close the followers first: the leader stays leader, silently closed. */
	for (int i = 4; i >= 0; i--)
		CHECK_OK(zkl_leader_close(p[i].l));
	assert_int_equal(h_counter_get(&p[0].lost), 0); /* SILENT */
	assert_false(zkl_lock_is_held(zkl_leader_lock(p[0].l)));
	assert_true(h_children(path) <= 0);
	for (int i = 0; i < 5; i++)
		part_close(&p[i]);
}

/* TestLeaderLatch.testCorrectWatching / testCallbackNotifyLeader: each leader in turn
 * closes (notifying), and the next in queue order takes over, told only after the old
 * one was. */
static void test_leader_closes_next_takes_over(void **state)
{
	(void)state;
	const char *path = h_path("leader-close");
	struct part p[5];
	int inside = 0, max_inside = 0;
	for (int i = 0; i < 5; i++) {
		part_open(&p[i], path, i, 0, true);
		p[i].inside = &inside;
		p[i].max_inside = &max_inside;
	}
	start_in_order(p, 5, path);
	for (int i = 0; i < 5; i++) {
		CHECK_OK(zkl_leader_await(p[i].l, 10000));
		assert_true(h_counter_wait(&p[i].gained, 1, 5000));
		assert_int_equal(leaders(p, 5, NULL), 1);
		if (i > 0) {
			assert_true(p[i].token > p[i - 1].token);
			assert_true(p[i - 1].lost_seq < p[i].gained_seq);
		}
		CHECK_OK(zkl_leader_close(p[i].l));
		/* The lost callback ran before close returned. */
		assert_int_equal(h_counter_get(&p[i].lost), 1);
		assert_int_equal(p[i].last_reason, ZKL_ECLOSED);
		assert_false(zkl_lock_is_held(zkl_leader_lock(p[i].l)));
		CHECK_RC(ZKL_ECLOSED, zkl_leader_await(p[i].l, 0));
		assert_int_equal(h_children(path) <= 0 ? 0 : h_children(path), 4 - i);
	}
	assert_int_equal(max_inside, 1);
	assert_int_equal(inside, 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(h_counter_get(&p[i].gained), 1);
		part_close(&p[i]);
	}
}

/* TestLeaderLatch.testSessionInterruptionDoNotCauseBrainSplit (and the "kill session"
 * cases of TestLeaderSelector): the leader's session expires; it is told (ZKL_ELOST), the
 * next one leads with a larger token, and the old one joins again at the back. */
static void test_leader_session_expired(void **state)
{
	(void)state;
	const char *path = h_path("leader-expired");
	struct part p[3];
	for (int i = 0; i < 3; i++)
		part_open(&p[i], path, i, 0, false);
	start_in_order(p, 3, path);
	assert_int_equal(wait_one_leader(p, 3), 0);
	assert_true(h_counter_wait(&p[0].gained, 1, 5000));
	int64_t old_token = p[0].token;

	h_expire(p[0].c);
	assert_true(h_counter_wait(&p[0].lost, 1, 10000));
	/* Expiring it from outside drops its connection first: told on suspension. */
	assert_true(p[0].last_reason == ZKL_ELOST || p[0].last_reason == ZKL_ECONNLOSS);
	CHECK_OK(zkl_leader_await(p[1].l, 10000));
	assert_true(h_counter_wait(&p[1].gained, 1, 5000));
	assert_true(p[1].token > old_token);
	/* The old leader queues again, on its new session, behind the others. */
	h_wait_children(path, 3);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[0].l), &ps, &n));
	assert_int_equal(n, 3);
	assert_string_equal(ps[0].data, p[1].id);
	assert_string_equal(ps[2].data, p[0].id);
	zkl_participants_free(ps, n);
	assert_int_equal(leaders(p, 3, NULL), 1);
	assert_false(zkl_lock_is_held(zkl_leader_lock(p[0].l)));
	/* (Between the two drops of its connection that the expiry causes, it may have led
	 * again briefly on its old session; each gain was followed by a loss.) */
	int gains = h_counter_get(&p[0].gained);
	assert_int_equal(h_counter_get(&p[0].lost), gains);

	/* It leads again once the others are gone. */
	CHECK_OK(zkl_leader_close(p[1].l));
	CHECK_OK(zkl_leader_close(p[2].l));
	CHECK_OK(zkl_leader_await(p[0].l, 10000));
	assert_true(h_counter_wait(&p[0].gained, gains + 1, 5000));
	assert_true(p[0].token > p[1].token);
	for (int i = 0; i < 3; i++)
		part_close(&p[i]);
}

/* The leader's node is deleted from outside: it is told (ZKL_ENOTHELD), the next one
 * leads, and the old one queues again. */
static void test_leader_node_deleted(void **state)
{
	(void)state;
	const char *path = h_path("leader-deleted");
	struct part p[3];
	for (int i = 0; i < 3; i++)
		part_open(&p[i], path, i, 0, false);
	start_in_order(p, 3, path);
	assert_int_equal(wait_one_leader(p, 3), 0);
	assert_true(h_counter_wait(&p[0].gained, 1, 5000));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[0].l), &ps, &n));
	assert_int_equal(n, 3);
	char node[512];
	snprintf(node, sizeof node, "%s", ps[0].path);
	zkl_participants_free(ps, n);

	h_delete(node);
	assert_true(h_counter_wait(&p[0].lost, 1, 10000));
	assert_int_equal(p[0].last_reason, ZKL_ENOTHELD);
	CHECK_OK(zkl_leader_await(p[1].l, 10000));
	h_wait_children(path, 3);
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[2].l), &ps, &n));
	assert_int_equal(n, 3);
	assert_string_equal(ps[0].data, p[1].id);
	assert_string_equal(ps[2].data, p[0].id);
	zkl_participants_free(ps, n);
	assert_int_equal(leaders(p, 3, NULL), 1);
	assert_false(zkl_lock_is_held(zkl_leader_lock(p[0].l)));

	/* A follower's node deleted from outside: nobody is told (followers watch only
	 * their predecessor, as in Curator); once its predecessor goes, it finds its node
	 * gone and queues again, behind p[0]. */
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[2].l), &ps, &n));
	assert_string_equal(ps[1].data, p[2].id);
	snprintf(node, sizeof node, "%s", ps[1].path);
	zkl_participants_free(ps, n);
	h_delete(node);
	usleep(200000);
	assert_int_equal(h_counter_get(&p[1].lost), 0);
	assert_true(zkl_lock_is_held(zkl_leader_lock(p[1].l)));
	CHECK_OK(zkl_leader_close(p[1].l));
	CHECK_OK(zkl_leader_await(p[0].l, 10000));
	h_wait_children(path, 2);
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p[2].l), &ps, &n));
	assert_int_equal(n, 2);
	assert_string_equal(ps[0].data, p[0].id);
	assert_string_equal(ps[1].data, p[2].id);
	zkl_participants_free(ps, n);
	assert_int_equal(h_counter_get(&p[2].gained), 0);
	for (int i = 0; i < 3; i++)
		part_close(&p[i]);
}

/* No two leaders at once, with fencing tokens, while leaders close and rejoin, and
 * sessions expire. Leaders that give up cleanly never overlap (the inside-counter); every
 * new leadership carries a larger token than any before it. */
struct churn {
	const char *path;
	int index;
	int rounds;
	int *inside, *max_inside;
	pthread_mutex_t *mu;
	int64_t *last_token;
	int *bad_tokens;
	int *leaderships;
};

static void churn_gained(zkl_leader *l, void *data)
{
	struct churn *ch = data;
	h_note_max(ch->max_inside, __atomic_add_fetch(ch->inside, 1, __ATOMIC_SEQ_CST));
	int64_t t = zkl_lock_token(zkl_leader_lock(l));
	pthread_mutex_lock(ch->mu);
	if (t <= *ch->last_token)
		(*ch->bad_tokens)++;
	*ch->last_token = t;
	(*ch->leaderships)++;
	pthread_mutex_unlock(ch->mu);
}

static void churn_lost(zkl_leader *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct churn *ch = data;
	__atomic_sub_fetch(ch->inside, 1, __ATOMIC_SEQ_CST);
}

static void *churn_thread(void *arg)
{
	struct churn *ch = arg;
	zkl_client *c = h_client(0);
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.on_gained = churn_gained;
	o.on_lost = churn_lost;
	o.data = ch;
	o.notify_on_close = true;
	for (int r = 0; r < ch->rounds; r++) {
		zkl_leader *l;
		if (zkl_leader_new(&l, c, ch->path, &o) != 0 || zkl_leader_start(l) != 0)
			fail_msg("cannot start a latch: %s", zkl_last_error());
		if (zkl_leader_await(l, 30000) != 0)
			fail_msg("participant %d never led in round %d", ch->index, r);
		usleep(2000);
		zkl_leader_free(l);
	}
	zkl_client_close(c);
	return NULL;
}

static void test_no_two_leaders(void **state)
{
	(void)state;
	const char *path = h_path("leader-excl");
	int inside = 0, max_inside = 0, bad = 0, leaderships = 0;
	int64_t last = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct churn ch[5];
	pthread_t th[5];
	for (int i = 0; i < 5; i++) {
		ch[i] = (struct churn){ path, i, 8, &inside, &max_inside, &mu, &last, &bad,
		                        &leaderships };
		pthread_create(&th[i], NULL, churn_thread, &ch[i]);
	}
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(max_inside, 1);
	assert_int_equal(bad, 0);
	assert_int_equal(leaderships, 40);
	assert_true(h_children(path) <= 0);

	/* Now with expiring sessions: tokens still only grow from leader to leader. */
	path = h_path("leader-excl-expire");
	struct part p[4];
	for (int i = 0; i < 4; i++)
		part_open(&p[i], path, i, 0, false);
	start_in_order(p, 4, path);
	int64_t seen = 0;
	for (int round = 0; round < 6; round++) {
		int who = wait_one_leader(p, 4);
		assert_true(h_counter_wait(&p[who].gained, 1, 5000));
		int64_t t = zkl_lock_token(zkl_leader_lock(p[who].l));
		assert_true(t > seen);
		seen = t;
		int before = h_counter_get(&p[who].lost);
		h_expire(p[who].c);
		assert_true(h_counter_wait(&p[who].lost, before + 1, 10000));
		h_wait_children(path, 4);
	}
	for (int i = 0; i < 4; i++)
		part_close(&p[i]);
}

/* ---- a server that comes and goes ---- */

static void wait_state(zkl_client *c, zkl_state want)
{
	/* The C client may wait up to a third of the session timeout between attempts. */
	for (int i = 0; i < 6000 && zkl_client_state(c) != want; i++)
		usleep(5000);
	assert_int_equal(zkl_client_state(c), want);
}

/* TestLeaderLatch.testNoServerAtStart: the latch starts while no server answers, and
 * leads once one does. (Our client cannot be opened without a server, so the server goes
 * away after the open, before the latch starts.) */
static void test_no_server_at_start(void **state)
{
	(void)state;
	if (!h_server_driven()) {
		fprintf(stderr, "skip: ZKL_TEST_ZK_SCRIPT / ZKL_TEST_ZK_DIR not set\n");
		skip();
	}
	const char *path = h_path("leader-noserver");
	struct part p;
	part_open(&p, path, 0, 30000, false);
	h_server("stop");
	wait_state(p.c, ZKL_STATE_SUSPENDED);
	CHECK_OK(zkl_leader_start(p.l));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_leader_await(p.l, 500));
	h_server("start");
	CHECK_OK(zkl_leader_await(p.l, 30000));
	assert_true(h_counter_wait(&p.gained, 1, 5000));
	/* Looked at through our own client: the raw handle may still be reconnecting. */
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(p.l), &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, p.id);
	zkl_participants_free(ps, n);
	zkl_client *c = p.c;
	zkl_leader_free(p.l);
	zkl_leader *l;
	CHECK_OK(zkl_leader_new(&l, c, path, NULL));
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(l), &ps, &n));
	assert_int_equal(n, 0);
	zkl_leader_free(l);
	p.l = NULL;
	part_close(&p);
}

/* The connection drops (the server restarts) while the session lives: a latch that loses
 * leadership on suspension (the default) is told (ZKL_ECONNLOSS) and leads again with the
 * same node once reconnected; one that does not is never told. */
static void test_suspended_and_back(void **state)
{
	(void)state;
	if (!h_server_driven()) {
		fprintf(stderr, "skip: ZKL_TEST_ZK_SCRIPT / ZKL_TEST_ZK_DIR not set\n");
		skip();
	}
	const char *pa = h_path("leader-suspend"), *pb = h_path("leader-nosuspend");
	struct part a, b;
	part_open(&a, pa, 0, 30000, false);
	part_open(&b, pb, 1, 30000, false);
	zkl_leader_free(b.l);
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.on_gained = on_gained;
	o.on_lost = on_lost;
	o.data = &b;
	o.lose_on_suspend = false;
	CHECK_OK(zkl_leader_new(&b.l, b.c, pb, &o));
	CHECK_OK(zkl_leader_start(a.l));
	CHECK_OK(zkl_leader_start(b.l));
	CHECK_OK(zkl_leader_await(a.l, 10000));
	CHECK_OK(zkl_leader_await(b.l, 10000));
	assert_true(h_counter_wait(&a.gained, 1, 5000));
	assert_true(h_counter_wait(&b.gained, 1, 5000));
	int64_t token = __atomic_load_n(&a.token, __ATOMIC_SEQ_CST);

	h_server("stop");
	assert_true(h_counter_wait(&a.lost, 1, 10000));
	assert_int_equal(a.last_reason, ZKL_ECONNLOSS);
	assert_false(zkl_lock_is_held(zkl_leader_lock(a.l)));
	assert_true(zkl_lock_is_held(zkl_leader_lock(b.l)));
	h_server("start");
	CHECK_OK(zkl_leader_await(a.l, 30000));
	assert_true(h_counter_wait(&a.gained, 2, 5000));
	assert_int_equal(a.token, token); /* the same node */
	wait_state(b.c, ZKL_STATE_RECONNECTED);
	assert_int_equal(h_counter_get(&b.lost), 0);
	assert_int_equal(h_counter_get(&b.gained), 1);
	assert_true(zkl_lock_is_held(zkl_leader_lock(b.l)));
	part_close(&a);
	part_close(&b);
}

/* ---- API contract ---- */

static void test_api_contract(void **state)
{
	(void)state;
	const char *path = h_path("leader-api");
	zkl_client *c = h_client(0);
	zkl_leader *l = NULL;
	CHECK_RC(ZKL_EINVAL, zkl_leader_new(&l, c, "relative", NULL));
	assert_null(l);
	CHECK_RC(ZKL_EINVAL, zkl_leader_new(&l, NULL, path, NULL));
	CHECK_RC(ZKL_EINVAL, zkl_leader_new(NULL, c, path, NULL));
	CHECK_OK(zkl_leader_new(&l, c, path, NULL));
	assert_string_equal(zkl_lock_path(zkl_leader_lock(l)), path);
	CHECK_RC(ZKL_EINVAL, zkl_leader_await(l, 0)); /* not started */
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(zkl_leader_lock(l), &ps, &n));
	assert_int_equal(n, 0);
	zkl_participants_free(ps, n);
	char *id = (char *)"x";
	CHECK_RC(ZKL_ENOTHELD, zkl_leader_leader_id(l, &id));
	assert_null(id);
	CHECK_OK(zkl_leader_start(l));
	CHECK_RC(ZKL_EBUSY, zkl_leader_start(l));
	CHECK_RC(ZKL_EINVAL, zkl_leader_await(l, -2));
	CHECK_OK(zkl_leader_await(l, 10000));
	/* The default id says who leads. */
	CHECK_OK(zkl_leader_leader_id(l, &id));
	assert_string_equal(id, h_default_data());
	free(id);
	CHECK_OK(zkl_leader_close(l));
	CHECK_OK(zkl_leader_close(l));
	CHECK_RC(ZKL_ECLOSED, zkl_leader_start(l));
	CHECK_RC(ZKL_ECLOSED, zkl_leader_await(l, 1000));
	assert_int_equal(zkl_lock_token(zkl_leader_lock(l)), ZKL_ENOTHELD);
	zkl_leader_free(l);
	/* Never started, freed at once. */
	CHECK_OK(zkl_leader_new(&l, c, path, NULL));
	zkl_leader_free(l);
	zkl_leader_free(NULL);
	assert_true(h_children(path) <= 0);
	zkl_client_close(c);
}

/* Close from the gained callback: the latch leaves once the callback returns. */
static void close_in_callback(zkl_leader *l, void *data)
{
	CHECK_OK(zkl_leader_close(l));
	h_latch_set(data);
}

static void test_close_from_callback(void **state)
{
	(void)state;
	const char *path = h_path("leader-cbclose");
	zkl_client *c = h_client(0);
	h_latch *done = h_latch_new();
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.on_gained = close_in_callback;
	o.data = done;
	zkl_leader *l;
	CHECK_OK(zkl_leader_new(&l, c, path, &o));
	CHECK_OK(zkl_leader_start(l));
	assert_true(h_latch_wait(done, 10000));
	for (int i = 0; i < 1000 && h_children(path) > 0; i++)
		usleep(5000);
	assert_true(h_children(path) <= 0);
	assert_false(zkl_lock_is_held(zkl_leader_lock(l)));
	zkl_leader_free(l);
	h_latch_free(done);
	zkl_client_close(c);
}

/* ---- the selector ---- */

struct sel {
	zkl_selector *s;
	int index;
	h_counter runs;
	int *order;      /* shared log of who ran, in order */
	int *norder;
	pthread_mutex_t *mu;
	int *inside, *max_inside;
	int64_t *last_token;
	int *bad_tokens;
	bool wait_for_end;   /* atomic: fn sleeps until leadership ends */
	int wait_rc;
	bool led;            /* atomic: has_leadership inside fn */
	h_counter started;   /* fn entered (after led is set) */
	int *rotate;         /* atomic: fn returns once this many are queued (0: at once) */
};

static void sel_fn(zkl_selector *s, void *data)
{
	struct sel *x = data;
	__atomic_store_n(&x->led, zkl_lock_is_held(zkl_selector_lock(s)), __ATOMIC_SEQ_CST);
	h_counter_add(&x->started, 1);
	if (x->inside)
		h_note_max(x->max_inside, __atomic_add_fetch(x->inside, 1, __ATOMIC_SEQ_CST));
	if (x->mu) {
		pthread_mutex_lock(x->mu);
		int64_t t = zkl_lock_token(zkl_selector_lock(s));
		if (x->last_token) {
			if (t <= *x->last_token) {
				(*x->bad_tokens)++;
				/* What a failure needs to be read: a token, or a leadership already
				 * over (ZKL_ENOTHELD) when the function began. */
				print_message("selector %d: token %lld after %lld (held now: %d; %s)\n",
				              x->index, (long long)t, (long long)*x->last_token,
				              (int)zkl_lock_is_held(zkl_selector_lock(s)),
				              t < 0 ? zkl_strerror((int)t) : "a token");
			}
			*x->last_token = t;
		}
		if (x->order)
			x->order[(*x->norder)++ % 64] = x->index;
		pthread_mutex_unlock(x->mu);
	}
	if (__atomic_load_n(&x->wait_for_end, __ATOMIC_SEQ_CST))
		x->wait_rc = zkl_selector_wait(s, 30000);
	else
		usleep(3000);
	/* Lead until every other selector has queued again, so that this one's next node
	 * goes behind theirs whatever the machine's load: the order is then the queue's. */
	for (int i = 0; x->rotate && i < 2000; i++) {
		int want = __atomic_load_n(x->rotate, __ATOMIC_SEQ_CST);
		zkl_participant *p = NULL;
		size_t n = 0;
		int rc = zkl_lock_participants(zkl_selector_lock(s), &p, &n);
		zkl_participants_free(p, n);
		if (want == 0 || (rc == 0 && (int)n >= want))
			break;
		usleep(2000);
	}
	if (x->inside)
		__atomic_sub_fetch(x->inside, 1, __ATOMIC_SEQ_CST);
	h_counter_add(&x->runs, 1);
}

/* TestLeaderSelector.testRotatingLeadership and autoRequeue: with requeue, leadership
 * passes round in queue order; nobody leads twice at once; tokens grow. */
static void test_selector_rotates(void **state)
{
	(void)state;
	const char *path = h_path("selector-rotate");
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int order[64], norder = 0, inside = 0, max_inside = 0, bad = 0, rotate = 3;
	int64_t last = 0;
	zkl_client *c[3];
	struct sel x[3];
	zkl_selector_options o;
	zkl_selector_options_init(&o);
	o.requeue = true;
	for (int i = 0; i < 3; i++) {
		c[i] = h_client(0);
		x[i] = (struct sel){ .index = i, .order = order, .norder = &norder, .mu = &mu,
		                     .inside = &inside, .max_inside = &max_inside,
		                     .last_token = &last, .bad_tokens = &bad, .rotate = &rotate };
		h_counter_init(&x[i].runs);
		h_counter_init(&x[i].started);
		CHECK_OK(zkl_selector_new(&x[i].s, c[i], path, sel_fn, &x[i], &o));
	}
	/* Start the others while the first leads, so that the queue order is known. */
	x[0].wait_for_end = true;
	CHECK_OK(zkl_selector_start(x[0].s));
	assert_true(h_counter_wait(&x[0].started, 1, 10000));
	assert_true(zkl_lock_is_held(zkl_selector_lock(x[0].s)));
	for (int i = 1; i < 3; i++) {
		CHECK_OK(zkl_selector_start(x[i].s));
		h_wait_children(path, i + 1);
	}
	__atomic_store_n(&x[0].wait_for_end, false, __ATOMIC_SEQ_CST);
	zkl_selector_interrupt(x[0].s);
	for (int i = 0; i < 3; i++)
		assert_true(h_counter_wait(&x[i].runs, 4, 20000));
	__atomic_store_n(&rotate, 0, __ATOMIC_SEQ_CST); /* closing: nobody queues again */
	for (int i = 0; i < 3; i++)
		CHECK_OK(zkl_selector_close(x[i].s));
	assert_int_equal(max_inside, 1);
	assert_int_equal(bad, 0);
	/* Round robin: 0 1 2 0 1 2 ... */
	for (int i = 0; i < 9; i++)
		assert_int_equal(order[i], i % 3);
	for (int i = 0; i < 3; i++) {
		assert_true(__atomic_load_n(&x[i].led, __ATOMIC_SEQ_CST));
		zkl_selector_free(x[i].s);
		h_counter_destroy(&x[i].runs);
		h_counter_destroy(&x[i].started);
		zkl_client_close(c[i]);
	}
	assert_true(h_children(path) <= 0);
}

/* Without requeue a selector leads once per start/requeue, and gives leadership up (its
 * node goes) when the function returns. */
static void test_selector_once_and_requeue(void **state)
{
	(void)state;
	const char *path = h_path("selector-once");
	zkl_client *c = h_client(0);
	struct sel x = { .index = 0 };
	h_counter_init(&x.runs);
	h_counter_init(&x.started);
	zkl_selector_options o;
	zkl_selector_options_init(&o);
	o.id = "the-worker";
	CHECK_OK(zkl_selector_new(&x.s, c, path, sel_fn, &x, &o));
	CHECK_RC(ZKL_EINVAL, zkl_selector_requeue(x.s));
	CHECK_OK(zkl_selector_start(x.s));
	assert_true(h_counter_wait(&x.runs, 1, 10000));
	for (int i = 0; i < 1000 && h_children(path) > 0; i++)
		usleep(5000);
	assert_true(h_children(path) <= 0);
	usleep(200000);
	assert_int_equal(h_counter_get(&x.runs), 1);
	assert_false(zkl_lock_is_held(zkl_selector_lock(x.s)));
	CHECK_OK(zkl_selector_wait(x.s, 0));
	CHECK_OK(zkl_selector_requeue(x.s));
	assert_true(h_counter_wait(&x.runs, 2, 10000));

	/* Curator's LeaderSelector layout: a mutex, whose holder zkl_mutex sees. (The run
	 * count goes up just before fn returns: wait until it has.) */
	for (int i = 0; i < 300 && zkl_lock_is_held(zkl_selector_lock(x.s)); i++)
		usleep(10000);
	x.wait_for_end = true;
	CHECK_OK(zkl_selector_requeue(x.s));
	assert_true(h_counter_wait(&x.started, 3, 10000));
	assert_true(zkl_lock_is_held(zkl_selector_lock(x.s)));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, path));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(l, 0));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(l, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].data, "the-worker");
	assert_non_null(strstr(ps[0].path, "-lock-"));
	assert_int_equal(ps[0].czxid, zkl_lock_token(zkl_selector_lock(x.s)));
	zkl_participants_free(ps, n);
	char *id;
	CHECK_OK(zkl_selector_leader_id(x.s, &id));
	assert_string_equal(id, "the-worker");
	free(id);
	/* Close interrupts the function and waits for it. */
	CHECK_OK(zkl_selector_close(x.s));
	assert_int_equal(h_counter_get(&x.runs), 3);
	assert_int_equal(x.wait_rc, 0);
	CHECK_OK(zkl_lock_acquire(l, 5000));
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	CHECK_RC(ZKL_ECLOSED, zkl_selector_requeue(x.s));
	zkl_selector_free(x.s);
	h_counter_destroy(&x.runs);
	h_counter_destroy(&x.started);
	zkl_client_close(c);
}

/* TestLeaderSelector.testInterruptLeadershipWithRequeue and the killed session: the
 * function is told (zkl_selector_wait returns) and, with requeue, leads again. */
static void test_selector_interrupt_and_expiry(void **state)
{
	(void)state;
	const char *path = h_path("selector-interrupt");
	zkl_client *c = h_client(0);
	struct sel x = { .index = 0, .wait_for_end = true };
	h_counter_init(&x.runs);
	h_counter_init(&x.started);
	zkl_selector_options o;
	zkl_selector_options_init(&o);
	o.requeue = true;
	/* Expiring a session from outside drops its connection twice on the way: each would
	 * end a leadership that ends on suspension. Only the session's loss counts here. */
	o.lose_on_suspend = false;
	CHECK_OK(zkl_selector_new(&x.s, c, path, sel_fn, &x, &o));
	CHECK_OK(zkl_selector_start(x.s));
	assert_true(h_counter_wait(&x.started, 1, 10000));
	assert_true(zkl_lock_is_held(zkl_selector_lock(x.s)));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_selector_wait(x.s, 50));
	zkl_selector_interrupt(x.s);
	assert_true(h_counter_wait(&x.runs, 1, 10000));
	assert_int_equal(x.wait_rc, 0);
	/* Requeued: leads again. */
	assert_true(h_counter_wait(&x.started, 2, 10000));
	assert_true(zkl_lock_is_held(zkl_selector_lock(x.s)));
	int64_t before = zkl_lock_token(zkl_selector_lock(x.s));
	h_expire(c);
	assert_true(h_counter_wait(&x.runs, 2, 10000));
	assert_int_equal(x.wait_rc, 0);
	assert_true(h_counter_wait(&x.started, 3, 10000));
	assert_true(zkl_lock_is_held(zkl_selector_lock(x.s)));
	assert_true(zkl_lock_token(zkl_selector_lock(x.s)) > before);
	zkl_selector_free(x.s);
	assert_int_equal(h_counter_get(&x.runs), 3);
	assert_true(h_children(path) <= 0);
	h_counter_destroy(&x.runs);
	h_counter_destroy(&x.started);
	zkl_client_close(c);
}

/* The selector's view: what it says while the selector leads, acquire refused, and its
 * lost callback told once, on the loop, when the leadership is lost (our node deleted
 * from outside), not when it is interrupted. */
struct sel_lost {
	h_counter calls;
	int reason;
	bool on_loop;
	struct sel *x;
};

static void sel_view_lost(zkl_lock *l, int reason, void *data)
{
	struct sel_lost *sl = data;
	sl->reason = reason;
	/* On the loop's thread a wait is refused at once; and the view already says so. */
	sl->on_loop = zkl_selector_wait(sl->x->s, 100) == ZKL_EDEADLK && !zkl_lock_is_held(l);
	h_counter_add(&sl->calls, 1);
}

static void nop_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	(void)data;
}

static void test_selector_view(void **state)
{
	(void)state;
	const char *path = h_path("selector-view");
	zkl_client *c = h_client(0);
	struct sel x = { .index = 0, .wait_for_end = true };
	h_counter_init(&x.runs);
	h_counter_init(&x.started);
	struct sel_lost sl = { .x = &x };
	h_counter_init(&sl.calls);
	zkl_selector_options o;
	zkl_selector_options_init(&o);
	o.requeue = true;
	o.id = "viewed";
	CHECK_OK(zkl_selector_new(&x.s, c, path, sel_fn, &x, &o));
	zkl_lock *v = zkl_selector_lock(x.s);
	assert_non_null(v);
	assert_null(zkl_selector_lock(NULL));
	assert_string_equal(zkl_lock_kind(v), "selector");
	assert_string_equal(zkl_lock_path(v), path);
	CHECK_OK(zkl_lock_on_lost(v, sel_view_lost, &sl));
	assert_false(zkl_lock_is_held(v));
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_token(v));
	char node[512];
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(v, node, sizeof node));

	/* A selector leads through start and its function, never through the view. */
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_acquire(v, 0));
	assert_non_null(strstr(zkl_last_error(), "zkl_selector_start"));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_acquire_async(v, 1000, nop_acquired, NULL));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_release(v));
	zkl_lock_cancel(v);

	CHECK_OK(zkl_selector_start(x.s));
	assert_true(h_counter_wait(&x.started, 1, 10000));
	assert_true(zkl_lock_is_held(v));
	assert_true(__atomic_load_n(&x.led, __ATOMIC_SEQ_CST));
	assert_true(zkl_lock_node(v, node, sizeof node) > 0);
	assert_int_equal(h_exists(node), 1);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(v, &ps, &n));
	assert_int_equal(n, 1);
	assert_true(ps[0].holder);
	assert_string_equal(ps[0].path, node);
	assert_string_equal(ps[0].data, "viewed");
	assert_int_equal(ps[0].czxid, zkl_lock_token(v));
	zkl_participants_free(ps, n);
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_acquire(v, 0));
	CHECK_RC(ZKL_ENOTSUP, zkl_lock_release(v));
	assert_true(zkl_lock_is_held(v));

	/* Lost: told once, on the loop, with the reason. */
	int64_t before = zkl_lock_token(v);
	h_delete(node);
	assert_true(h_counter_wait(&sl.calls, 1, 10000));
	assert_int_equal(sl.reason, ZKL_ENOTHELD);
	assert_true(sl.on_loop);
	assert_true(h_counter_wait(&x.runs, 1, 10000));
	assert_int_equal(x.wait_rc, 0);

	/* Requeued: leads again with a higher token; an interrupt is no loss. */
	assert_true(h_counter_wait(&x.started, 2, 10000));
	assert_true(zkl_lock_is_held(v));
	assert_true(zkl_lock_token(v) > before);
	zkl_selector_interrupt(x.s);
	assert_true(h_counter_wait(&x.runs, 2, 10000));
	CHECK_OK(zkl_selector_close(x.s));
	assert_int_equal(h_counter_get(&sl.calls), 1);
	zkl_selector_free(x.s);
	assert_true(h_children(path) <= 0);
	h_counter_destroy(&sl.calls);
	h_counter_destroy(&x.runs);
	h_counter_destroy(&x.started);
	zkl_client_close(c);
}

/* ---- the latch's lock view ---- */

/* One leadership per acquire: the second participant waits, times out with its node
 * withdrawn, and leads once the first releases; the verbs answer for the leadership. */
static void test_view_acquire_release(void **state)
{
	(void)state;
	const char *path = h_path("leader-view");
	struct part a, b;
	part_open(&a, path, 0, 0, false);
	part_open(&b, path, 1, 0, false);
	zkl_lock *la = zkl_leader_lock(a.l), *lb = zkl_leader_lock(b.l);
	assert_non_null(la);
	assert_null(zkl_leader_lock(NULL));
	assert_string_equal(zkl_lock_kind(la), "leader");
	assert_string_equal(zkl_lock_path(la), path);

	CHECK_OK(zkl_lock_acquire(la, 5000));
	assert_true(zkl_lock_is_held(la));
	assert_true(zkl_lock_is_held(zkl_leader_lock(a.l)));
	assert_int_equal(h_counter_get(&a.gained), 1); /* the latch's callbacks run too */
	CHECK_RC(ZKL_EBUSY, zkl_lock_acquire(la, 0));  /* one leadership at a time */
	CHECK_RC(ZKL_EBUSY, zkl_leader_start(a.l));    /* one way or the other */
	char node[ZKL_NODE_MAX];
	assert_true(zkl_lock_node(la, node, sizeof node) > 0);
	assert_non_null(strstr(node, "-latch-"));
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(lb, &ps, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ps[0].path, node);
	assert_string_equal(ps[0].data, a.id);
	assert_int_equal(zkl_lock_token(la), ps[0].czxid);
	zkl_participants_free(ps, n);

	/* The other waits its turn, and gives its place up when its time runs out. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(lb, 300));
	assert_false(zkl_lock_is_held(lb));
	assert_int_equal(zkl_lock_token(lb), ZKL_ENOTHELD);
	h_wait_children(path, 1); /* a create still out at the deadline goes once answered */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(lb, 0));
	assert_int_equal(h_children(path), 1);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(lb));

	/* Released: our node goes, no lost callback (not notify_on_close), the other leads
	 * with a larger token. */
	int64_t first = zkl_lock_token(la);
	CHECK_OK(zkl_lock_release(la));
	assert_false(zkl_lock_is_held(la));
	assert_false(zkl_lock_is_held(zkl_leader_lock(a.l)));
	assert_true(h_children(path) <= 0); /* its folder, now empty, may be reaped */
	assert_int_equal(h_counter_get(&a.lost), 0);
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_release(la));
	CHECK_OK(zkl_lock_acquire(lb, 5000));
	assert_true(zkl_lock_token(lb) > first);
	/* Data set on the view is the id of the next node. */
	CHECK_OK(zkl_lock_set_data(la, "second-term", 11));
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(la, 200));
	CHECK_OK(zkl_lock_release(lb));
	CHECK_OK(zkl_lock_acquire(la, 5000));
	char *id;
	CHECK_OK(zkl_leader_leader_id(b.l, &id));
	assert_string_equal(id, "second-term");
	free(id);
	CHECK_OK(zkl_lock_release(la));

	/* A started latch has no acquire of its own: it leads by itself. */
	CHECK_OK(zkl_leader_start(b.l));
	CHECK_OK(zkl_leader_await(b.l, 5000));
	CHECK_RC(ZKL_EBUSY, zkl_lock_acquire(lb, 0));
	assert_true(zkl_lock_is_held(lb));
	part_close(&a);
	part_close(&b);
	assert_true(h_children(path) <= 0);
}

struct view_async {
	h_latch *done;
	int rc;
	bool loop_refuses;   /* a blocking acquire from the callback failed with EDEADLK */
	zkl_lock *other;     /* tried from the callback */
	bool release;        /* release from the callback */
	int release_rc;
};

static void view_acquired(zkl_lock *l, int rc, void *data)
{
	struct view_async *v = data;
	v->rc = rc;
	if (v->other)
		v->loop_refuses = zkl_lock_acquire(v->other, 1000) == ZKL_EDEADLK;
	if (v->release && rc == 0)
		v->release_rc = zkl_lock_release(l);
	h_latch_set(v->done);
}

/* Asynchronous: the callback runs once, on the loop (a blocking acquire there fails at
 * once); cancel ends a wait with nothing left behind; release from the callback; free
 * while waiting. */
static void test_view_async(void **state)
{
	(void)state;
	const char *path = h_path("leader-view-async");
	struct part a, b;
	part_open(&a, path, 0, 0, false);
	part_open(&b, path, 1, 0, false);
	zkl_lock *la = zkl_leader_lock(a.l), *lb = zkl_leader_lock(b.l);

	zkl_leader *same; /* a latch on a's client: its loop is the one that calls back */
	CHECK_OK(zkl_leader_new(&same, a.c, h_sub(path, "same"), NULL));
	struct view_async va = { .done = h_latch_new(), .rc = 1, .other = zkl_leader_lock(same) };
	CHECK_OK(zkl_lock_acquire_async(la, 5000, view_acquired, &va));
	CHECK_RC(ZKL_EBUSY, zkl_lock_acquire_async(la, 5000, view_acquired, &va));
	assert_true(h_latch_wait(va.done, 10000));
	assert_int_equal(va.rc, 0);
	assert_true(va.loop_refuses);
	zkl_leader_free(same);
	assert_true(zkl_lock_is_held(la));

	/* b waits; cancel: ZKL_ECANCELED, b's node withdrawn. */
	struct view_async vb = { .done = h_latch_new(), .rc = 1 };
	CHECK_OK(zkl_lock_acquire_async(lb, ZKL_WAIT_FOREVER, view_acquired, &vb));
	h_wait_children(path, 2);
	zkl_lock_cancel(lb);
	assert_true(h_latch_wait(vb.done, 10000));
	assert_int_equal(vb.rc, ZKL_ECANCELED);
	h_wait_children(path, 1);
	assert_int_equal(h_latch_count(vb.done), 1);

	/* b waits again and takes over when a releases; its callback releases at once. */
	h_latch_free(vb.done);
	vb = (struct view_async){ .done = h_latch_new(), .rc = 1, .release = true };
	CHECK_OK(zkl_lock_acquire_async(lb, 10000, view_acquired, &vb));
	h_wait_children(path, 2);
	CHECK_OK(zkl_lock_release(la));
	assert_true(h_latch_wait(vb.done, 10000));
	assert_int_equal(vb.rc, 0);
	assert_int_equal(vb.release_rc, 0);
	h_wait_children(path, 0);
	assert_int_equal(h_counter_get(&b.gained), 1);

	/* a leads again; b waits, and is freed while it waits: its callback says
	 * ZKL_ECANCELED before the free returns, and its node goes. */
	CHECK_OK(zkl_lock_acquire(la, 5000));
	h_latch_free(vb.done);
	vb = (struct view_async){ .done = h_latch_new(), .rc = 1 };
	CHECK_OK(zkl_lock_acquire_async(lb, ZKL_WAIT_FOREVER, view_acquired, &vb));
	h_wait_children(path, 2);
	zkl_leader_free(b.l);
	b.l = NULL;
	assert_int_equal(h_latch_count(vb.done), 1);
	assert_int_equal(vb.rc, ZKL_ECANCELED);
	assert_int_equal(h_children(path), 1);
	CHECK_OK(zkl_lock_release(la));
	part_close(&a);
	part_close(&b);
	h_latch_free(va.done);
	h_latch_free(vb.done);
}

struct view_lost {
	h_latch *lost;
	int reason;
};

static void view_on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	struct view_lost *v = data;
	v->reason = reason;
	h_latch_set(v->lost);
}

/* A leadership taken through the view and lost ends for good: the view's lost callback
 * and the latch's are told (the connection drops first as the session is expired from
 * outside: ZKL_ECONNLOSS, lose_on_suspend being the default), the latch leaves the
 * election, the view says ZKL_ELOST until released, and then leads again on the new
 * session. */
static void test_view_lost(void **state)
{
	(void)state;
	const char *path = h_path("leader-view-lost");
	struct part a;
	part_open(&a, path, 0, 4000, false);
	zkl_lock *la = zkl_leader_lock(a.l);
	struct view_lost vl = { .lost = h_latch_new() };
	CHECK_OK(zkl_lock_on_lost(la, view_on_lost, &vl));
	CHECK_OK(zkl_lock_acquire(la, 5000));
	int64_t first = zkl_lock_token(la);
	h_expire(a.c);
	assert_true(h_latch_wait(vl.lost, 15000));
	assert_int_equal(vl.reason, ZKL_ECONNLOSS);
	assert_true(h_counter_wait(&a.lost, 1, 5000));
	assert_int_equal(a.last_reason, ZKL_ECONNLOSS);
	assert_false(zkl_lock_is_held(la));
	assert_int_equal(zkl_lock_token(la), ZKL_ENOTHELD);
	char node[ZKL_NODE_MAX];
	CHECK_RC(ZKL_ENOTHELD, zkl_lock_node(la, node, sizeof node));
	CHECK_RC(ZKL_ELOST, zkl_lock_acquire(la, 0));
	CHECK_RC(ZKL_ELOST, zkl_lock_release(la));
	CHECK_OK(zkl_lock_acquire(la, 15000));
	assert_true(zkl_lock_token(la) > first);
	assert_int_equal(h_counter_get(&a.gained), 2);
	assert_int_equal(h_latch_count(vl.lost), 1);
	CHECK_OK(zkl_lock_release(la));
	part_close(&a);
	h_latch_free(vl.lost);
}

struct in_loop {
	zkl_leader *other;
	int await_rc;
	int acquire_rc;
	h_latch *done;
};

static void in_loop_gained(zkl_leader *l, void *data)
{
	(void)l;
	struct in_loop *x = data;
	x->await_rc = zkl_leader_await(x->other, 100);
	x->acquire_rc = zkl_lock_acquire(zkl_leader_lock(x->other), 100);
	h_latch_set(x->done);
}

/* The gained callback runs on the client's loop: waiting there is refused at once. */
static void test_callbacks_on_the_loop(void **state)
{
	(void)state;
	const char *path = h_path("leader-loop");
	zkl_client *c = h_client(0);
	struct in_loop x = { .done = h_latch_new(), .await_rc = 1, .acquire_rc = 1 };
	zkl_leader_options o;
	zkl_leader_options_init(&o);
	o.on_gained = in_loop_gained;
	o.data = &x;
	zkl_leader *l;
	CHECK_OK(zkl_leader_new(&l, c, path, &o));
	CHECK_OK(zkl_leader_new(&x.other, c, h_sub(path, "other"), NULL));
	CHECK_OK(zkl_leader_start(x.other));
	CHECK_OK(zkl_leader_start(l));
	assert_true(h_latch_wait(x.done, 10000));
	assert_int_equal(x.await_rc, ZKL_EDEADLK);
	assert_int_equal(x.acquire_rc, ZKL_EDEADLK);
	zkl_leader_free(x.other);
	zkl_leader_free(l);
	h_latch_free(x.done);
	zkl_client_close(c);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]); /* e.g. "test_leader_*" */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api_contract),
		cmocka_unit_test(test_basic_five),
		cmocka_unit_test(test_leader_closes_next_takes_over),
		cmocka_unit_test(test_leader_session_expired),
		cmocka_unit_test(test_leader_node_deleted),
		cmocka_unit_test(test_no_two_leaders),
		cmocka_unit_test(test_close_from_callback),
		cmocka_unit_test(test_selector_rotates),
		cmocka_unit_test(test_selector_once_and_requeue),
		cmocka_unit_test(test_selector_interrupt_and_expiry),
		cmocka_unit_test(test_selector_view),
		cmocka_unit_test(test_suspended_and_back),
		cmocka_unit_test(test_no_server_at_start),
		cmocka_unit_test(test_view_acquire_release),
		cmocka_unit_test(test_view_async),
		cmocka_unit_test(test_view_lost),
		cmocka_unit_test(test_callbacks_on_the_loop),
	};
	return H_RUN(tests);
}
