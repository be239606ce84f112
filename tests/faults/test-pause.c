/* A holder's server stops answering (SIGSTOP of the one node its client knows): for longer
 * than the session timeout, for less, and while it releases. Run through
 * tests/with-ensemble.
 *
 * The holder's client is given only its follower's address, so that it cannot move to
 * another node; the waiter and the observers are given the other two nodes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

/* What a client and a lock went through, with when (f_now's clock). */
struct watch {
	pthread_mutex_t mu;
	int64_t lost_at;       /* first lost callback */
	int lost_calls;
	int64_t state_at[8];   /* first time each zkl_state was reported */
	int states;            /* how many state changes */
	h_latch *lost;
};

static void watch_init(struct watch *w)
{
	memset(w, 0, sizeof *w);
	pthread_mutex_init(&w->mu, NULL);
	w->lost = h_latch_new();
}

static void watch_destroy(struct watch *w)
{
	h_latch_free(w->lost);
	pthread_mutex_destroy(&w->mu);
}

static void on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	struct watch *w = data;
	int64_t now = f_now();
	pthread_mutex_lock(&w->mu);
	if (reason == ZKL_ELOST && !w->lost_calls)
		w->lost_at = now;
	w->lost_calls++;
	pthread_mutex_unlock(&w->mu);
	h_latch_set(w->lost);
}

static void on_state(zkl_client *c, zkl_state s, void *data)
{
	(void)c;
	struct watch *w = data;
	int64_t now = f_now();
	pthread_mutex_lock(&w->mu);
	if ((int)s >= 0 && (int)s < 8 && !w->state_at[s])
		w->state_at[s] = now;
	w->states++;
	pthread_mutex_unlock(&w->mu);
}

static int64_t state_at(struct watch *w, zkl_state s)
{
	pthread_mutex_lock(&w->mu);
	int64_t at = w->state_at[s];
	pthread_mutex_unlock(&w->mu);
	return at;
}

/* The full path of the first node (in queue order) under path, seen from servers. */
static void first_node(const char *servers, const char *path, char *buf, size_t size)
{
	char **names;
	int n = f_children(servers, path, &names);
	if (n < 1)
		fail_msg("no node under %s", path);
	snprintf(buf, size, "%s/%s", path, names[0]);
	f_names_free(names, n);
}

/* ---- paused past the session timeout: told lost before the server expires it ---- */

static void test_pause_past_timeout(void **state)
{
	(void)state;
	enum { T = 4000 };
	const char *path = h_path("pause-long");
	int f = f_follower(0);
	const char *others = f_servers_except(f);
	zkl_client *hc = f_client(f_server(f), T, true);
	zkl_client *wc = f_client(others, T, true);
	struct watch hw;
	watch_init(&hw);
	CHECK_OK(zkl_client_add_listener(hc, on_state, &hw));
	zkl_mutex *holder, *wm;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	CHECK_OK(zkl_mutex_new(&wm, wc, path));
	zkl_lock *hl = zkl_mutex_lock(holder);
	CHECK_OK(zkl_lock_on_lost(hl, on_lost, &hw));
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	int64_t old_token = zkl_lock_token(hl);
	f_waiter w = {0};
	f_waiter_start(&w, wm, 60000);
	assert_true(f_wait_children(others, path, 2, 10000));
	char node[512];
	first_node(others, path, node, sizeof node);
	/* The server side: when the holder's node goes, seen from the other nodes. */
	f_deletion *gone = f_watch_deletion(others, node);

	int64_t paused = f_now();
	f_ctl("pause", f);
	assert_true(h_latch_wait(hw.lost, T + 5000));
	assert_false(zkl_lock_is_held(hl));
	assert_true(h_latch_wait(w.done, T + 20000));
	CHECK_OK(w.rc);
	int64_t deleted = f_deletion_time(gone, 10000);
	assert_true(deleted > 0);
	int64_t lost = hw.lost_at;
	print_message("paused node %d: holder told lost after %lld ms, its node deleted after "
	              "%lld ms, waiter in after %lld ms\n", f, (long long)(lost - paused),
	              (long long)(deleted - paused), (long long)(w.returned - paused));
	/* Told before anyone else could have the lock, not after. */
	assert_true(lost < deleted);
	assert_true(lost < w.returned);
	/* And not for a mere hiccup: the client had heard from the server within a third
	 * of the timeout before the pause (heartbeats), so that is 2/3 T after it; half of
	 * T leaves room for a busy machine. */
	assert_true(lost - paused >= T / 2);
	assert_true(state_at(&hw, ZKL_STATE_LOST) > 0);
	assert_true(w.token > old_token);

	f_ctl("resume", f);
	CHECK_RC(ZKL_ELOST, zkl_lock_release(hl));
	assert_int_equal(hw.lost_calls, 1);
	assert_int_equal(f_children(others, path, NULL), 1);
	f_waiter_join(&w);
	CHECK_OK(w.release_rc);
	/* The old holder's client comes back on a new session and can lock again. */
	CHECK_OK(zkl_lock_acquire(hl, 20000));
	CHECK_OK(zkl_lock_release(hl));
	assert_true(f_wait_children(others, path, 0, 10000));
	f_deletion_free(gone);
	zkl_mutex_free(holder);
	zkl_mutex_free(wm);
	zkl_client_close(hc);
	zkl_client_close(wc);
	watch_destroy(&hw);
}

/* ---- paused for less than the session timeout: nothing lost, nobody else gets in ---- */

static void test_pause_short(void **state)
{
	(void)state;
	/* The client hears from the server at least every T/3 (heartbeats), so a pause of P
	 * leaves it silent for at most P + T/3: 2500 + 2000 < 6000. */
	enum { T = 6000, P = 2500 };
	const char *path = h_path("pause-short");
	int f = f_follower(0);
	const char *others = f_servers_except(f);
	zkl_client *hc = f_client(f_server(f), T, true);
	zkl_client *wc = f_client(others, T, true);
	struct watch hw;
	watch_init(&hw);
	CHECK_OK(zkl_client_add_listener(hc, on_state, &hw));
	zkl_mutex *holder, *wm;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	CHECK_OK(zkl_mutex_new(&wm, wc, path));
	zkl_lock *hl = zkl_mutex_lock(holder), *wl = zkl_mutex_lock(wm);
	CHECK_OK(zkl_lock_on_lost(hl, on_lost, &hw));
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	int64_t token = zkl_lock_token(hl);
	int64_t sid = zkl_client_session_id(hc);

	f_ctl("pause", f);
	/* The waiter tries for the whole pause (the pause's length is the waiter's
	 * deadline) and does not get in. */
	int64_t t0 = f_now();
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(wl, P));
	assert_true(f_now() - t0 >= P - 50);
	f_ctl("resume", f);

	/* Still held, same session, nothing reported. */
	assert_true(zkl_lock_is_held(hl));
	assert_int_equal(zkl_lock_token(hl), token);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(hl, &ps, &n)); /* answered after the resume */
	assert_int_equal(n, 1);
	assert_true(ps[0].holder);
	assert_int_equal(ps[0].czxid, token);
	zkl_participants_free(ps, n);
	assert_int_equal(zkl_client_session_id(hc), sid);
	assert_int_equal(h_latch_count(hw.lost), 0);
	assert_int_equal(state_at(&hw, ZKL_STATE_LOST), 0);
	/* Nobody else gets in after the resume either. */
	CHECK_RC(ZKL_ETIMEDOUT, zkl_lock_acquire(wl, 500));
	CHECK_OK(zkl_lock_release(hl));
	CHECK_OK(zkl_lock_acquire(wl, 10000));
	assert_true(zkl_lock_token(wl) > token);
	CHECK_OK(zkl_lock_release(wl));
	assert_true(f_wait_children(others, path, 0, 10000));
	assert_int_equal(h_latch_count(hw.lost), 0);
	zkl_mutex_free(holder);
	zkl_mutex_free(wm);
	zkl_client_close(hc);
	zkl_client_close(wc);
	watch_destroy(&hw);
}

/* ---- release while the holder's server is paused (shorter than the timeout) ---- */

/* The client notices the silence at 2/3 of the timeout after it last heard from the
 * server (SUSPENDED; the delete in flight fails with a timeout). The node is resumed
 * then, so that the release runs into a real connection loss, and the client reconnects
 * well before the timeout has passed since the last request answered before the pause. */
enum { RT = 6000 };

struct resumer {
	int node;
	h_latch *suspended;
	int64_t resumed_at;
	int noticed;
	pthread_t th;
};

static void *resumer_thread(void *arg)
{
	struct resumer *r = arg;
	r->noticed = h_latch_wait(r->suspended, RT);
	r->resumed_at = f_now();
	f_ctl("resume", r->node);
	return NULL;
}

static void on_suspended(zkl_client *c, zkl_state s, void *data)
{
	(void)c;
	if (s == ZKL_STATE_SUSPENDED)
		h_latch_set(data);
}

static void release_during_loss(bool confirm)
{
	const char *path = h_path(confirm ? "release-loss-confirm" : "release-loss");
	int f = f_follower(0);
	const char *others = f_servers_except(f);
	zkl_client *hc = f_client(f_server(f), RT, confirm);
	struct watch hw;
	watch_init(&hw);
	CHECK_OK(zkl_client_add_listener(hc, on_state, &hw));
	zkl_mutex *holder;
	CHECK_OK(zkl_mutex_new(&holder, hc, path));
	zkl_lock *hl = zkl_mutex_lock(holder);
	CHECK_OK(zkl_lock_on_lost(hl, on_lost, &hw));
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	char node[512];
	first_node(others, path, node, sizeof node);
	zkl_participant *ps;
	size_t n;
	CHECK_OK(zkl_lock_participants(hl, &ps, &n)); /* heard from just now */
	zkl_participants_free(ps, n);

	struct resumer r = { .node = f, .suspended = h_latch_new() };
	CHECK_OK(zkl_client_add_listener(hc, on_suspended, r.suspended));
	f_ctl("pause", f);
	pthread_create(&r.th, NULL, resumer_thread, &r);
	int64_t t0 = f_now();
	int rc = zkl_lock_release(hl);
	int64_t returned = f_now();
	pthread_join(r.th, NULL);
	assert_true(r.noticed);
	CHECK_OK(rc);
	assert_false(zkl_lock_is_held(hl));
	print_message("release %s returned after %lld ms (resume at %lld ms)\n",
	              confirm ? "(confirmed)" : "(background)", (long long)(returned - t0),
	              (long long)(r.resumed_at - t0));
	if (confirm) {
		/* It returned once the delete went through, so after the resume, and the
		 * node is gone. */
		assert_true(returned >= r.resumed_at);
		assert_false(f_exists(others, node));
	} else {
		/* Sent and returned; the delete is done in the background once the server
		 * answers again. */
		int64_t until = f_now() + 20000;
		while (f_exists(others, node) && f_now() < until)
			usleep(20000);
		assert_false(f_exists(others, node));
	}
	/* The connection was lost (the delete could not have gone through during the
	 * pause), but never the session. */
	assert_true(state_at(&hw, ZKL_STATE_SUSPENDED) > 0);
	assert_int_equal(state_at(&hw, ZKL_STATE_LOST), 0);
	assert_int_equal(h_latch_count(hw.lost), 0);
	assert_true(f_wait_children(others, path, 0, 10000));
	/* The client goes on as before. */
	CHECK_OK(zkl_lock_acquire(hl, 10000));
	CHECK_OK(zkl_lock_release(hl));
	zkl_mutex_free(holder);
	zkl_client_close(hc);
	h_latch_free(r.suspended);
	watch_destroy(&hw);
}

static void test_release_during_loss_confirmed(void **state)
{
	(void)state;
	release_during_loss(true);
}

static void test_release_during_loss_background(void **state)
{
	(void)state;
	release_during_loss(false);
}

int main(int argc, char **argv)
{
	f_child_main(argc, argv);
	const struct CMUnitTest tests[] = {
		FAULT_TEST(test_pause_past_timeout),
		FAULT_TEST(test_pause_short),
		FAULT_TEST(test_release_during_loss_confirmed),
		FAULT_TEST(test_release_during_loss_background),
	};
	return H_RUN(tests);
}
