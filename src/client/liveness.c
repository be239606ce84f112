/* Liveness: when the client gives its session up for lost (the loss rule, zkl__lost_at),
 * the heartbeats that keep that moment recent, and the closing of retired sessions.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

int zkl__session_timeout_ms(const zkl_client *c)
{
	return c->timeout_ms > 0 ? c->timeout_ms : c->session_timeout_req;
}

int zkl__session_timeout_any(zkl_client *c, bool *closing)
{
	*closing = atomic_load(&c->state_pub) == ZKL_STATE_CLOSED;
	return atomic_load(&c->timeout_pub);
}

/* A session on a follower is known to the leader only from the follower's reports of
 * the requests and pings it heard. While a session sends a request at least every sixth
 * of t, the leader's record is at most that much older than a write it committed (the
 * bound RELIABILITY.md documents). A quiet session is heard only by its pings, a third
 * of t apart: a write sent within a sixth of t after the quiet ended (at q) counts as if
 * sent a sixth of t after the last moment the follower surely heard the session, the
 * quiet's start or one ping interval before q, whichever is later. */
static int64_t proof_base(const zkl_client *c, const struct zkl_session *s)
{
	const int64_t t = zkl__session_timeout_ms(c), at = s->last_proof_sent,
	              q = s->quiet_ended;
	if (!q || at < q || at >= q + t / 6)
		return at;
	const int64_t heard = s->quiet_began > q - t / 3 ? s->quiet_began : q - t / 3;
	return heard + t / 6 < at ? heard + t / 6 : at;
}

int64_t zkl__lost_at(zkl_client *c)
{
	const struct zkl_session *s = c->sess;
	if (s->last_proof_sent == 0)
		return INT64_MAX;
	return proof_base(c, s) + (int64_t)zkl__session_timeout_ms(c) * c->loss_percent / 100;
}

int64_t zkl__giveup_at(zkl_client *c)
{
	const struct zkl_session *s = c->sess;
	if (c->holds || s->doomed)
		return zkl__lost_at(c);
	if (zkl__live_mode(c) == ZKL_LIVE_QUIET || s->last_heard_sent == 0)
		return INT64_MAX;
	const int64_t from = s->last_heard_sent > s->quiet_ended ? s->last_heard_sent
	                                                          : s->quiet_ended;
	return from + (int64_t)zkl__session_timeout_ms(c) * c->loss_percent / 100;
}

bool zkl__proof_fresh(zkl_client *c)
{
	const struct zkl_session *s = c->sess;
	return s->last_proof_sent != 0 &&
	       zkl__now_ms() - s->last_proof_sent < zkl__session_timeout_ms(c) / 3;
}


/* The session's mode changed (mu held, the loop): when its next heartbeat is due. A
 * session that must now prove itself sends its check a sixth of the timeout after its
 * last committed write (at once, after a quiet wait); one that comes out of quiet counts
 * its silence from now, and hears the server again at once. */
static void live_mode_changed(zkl_client *c, struct zkl_session *s, int mode, int64_t now)
{
	const int64_t sixth = zkl__session_timeout_ms(c) / 6;
	if (s->live_mode == ZKL_LIVE_QUIET)
		s->quiet_ended = now;
	s->live_mode = mode;
	if (mode == ZKL_LIVE_QUIET) {
		s->quiet_began = now;
		return;
	}
	const int64_t last = mode == ZKL_LIVE_PROVE ? s->last_proof_sent : s->last_heard_sent;
	const int64_t due = last ? last + sixth : now;
	if (due < c->next_heartbeat)
		c->next_heartbeat = due;
}

void zkl__proof_sent(zkl_client *c)
{
	struct zkl_session *s = c->sess;
	const int64_t now = zkl__now_ms();
	if (s->live_mode != ZKL_LIVE_PROVE)
		live_mode_changed(c, s, ZKL_LIVE_PROVE, now);
	c->next_heartbeat = now + zkl__session_timeout_ms(c) / 6;
}

/* Liveness (event thread, mu held). Returns when to look again.
 *
 * The server cannot expire the session before T + t, T being the moment the last write
 * it committed was sent and t the session timeout; another client can hold our locks
 * only after that. So a hold is lost at T + loss_percent of t, on the client's own clock,
 * whatever the C client says of the connection: a client that still hears the server but
 * is no longer heard by it stays "connected" for the C client (a watch event restarts its
 * clock), and a holder told only at T + t would still be running when the next one
 * starts. Giving the session up reports every hold lost and moves the client to a new
 * session, as an expiry does; the old session's nodes go when its close reaches the
 * server, or with its expiry.
 *
 * Only a write that a quorum committed moves T (request.c, op_proves()): a follower cut
 * off from the leader still answers reads (and the C client's pings) until it gives up
 * on the leader (syncLimit ticks), while the leader, hearing nothing of the session,
 * expires it; and a leader cut off from the others answers syncs too, until syncLimit
 * passes, while they elect a new one that may expire the session first. What a session
 * sends to keep its moments recent depends on what it has at stake (zkl__live_mode()):
 *
 *   - It holds a lock, or an acquisition is near its grant (next in line, or counting
 *     a folder): a check of the version of / every sixth of t, a write that changes
 *     nothing, so that T stays recent and a client that must find another server (the C
 *     client notices silence after 2/3 t) still has time to reconnect before T +
 *     loss_percent of t. A session that holds is given up at that moment.
 *   - It holds and awaits nothing: a sync every sixth of t, which the ensemble does not
 *     log; any answer keeps it, and it is given up loss_percent of t after the last.
 *   - It only waits far back in queues: nothing, as a waiter of any other library; the
 *     C client's pings keep the session, and its expiry, if it comes, requeues the
 *     waits on a new one. No grant rests on this: a grant reported to a session whose
 *     last committed write is older than a third of t waits for a fresh one
 *     (zkl__proof_fresh(), the engine's turn), and its loss deadline counts from that.
 */
int64_t zkl__liveness_run(zkl_client *c)
{
	int64_t now = zkl__now_ms();
	struct zkl_session *s = c->sess;
	int64_t next = INT64_MAX;
	const int mode = zkl__live_mode(c);
	if (mode != s->live_mode)
		live_mode_changed(c, s, mode, now);
	if (s->connected && mode != ZKL_LIVE_QUIET) {
		if (now >= c->next_heartbeat) {
			c->next_heartbeat = now + zkl__session_timeout_ms(c) / 6;
			int err = 0;
			struct zkl_op *op = mode == ZKL_LIVE_IDLE ? zkl__op_sync(c, NULL, "/", &err)
			                                          : zkl__op_check(c, NULL, "/", &err);
			zkl__op_put(c, op);
			atomic_fetch_add_explicit(mode == ZKL_LIVE_IDLE ? &c->n_heartbeat_syncs
			                                                : &c->n_proof_writes, 1,
			                          memory_order_relaxed);
		}
		next = c->next_heartbeat;
	}
	if (s->expired || s->given_up)
		return next;
	int64_t at = zkl__giveup_at(c);
	if (now < at)
		return at < next ? at : next;
	if (c->adopted) {
		/* The application's session cannot be replaced here, and may live on: report
		 * every hold lost, and delete their nodes in the background (a node of this
		 * generation stays unless deleted). The session counts again once it answers. */
		zkl__log(c, ZKL_LOG_WARN, "ZooKeeper confirmed nothing sent in the last %lld ms "
		        "(more than %d%% of the session timeout) on the application's session: "
		        "locks held are lost", (long long)(now - (at - (int64_t)
		        zkl__session_timeout_ms(c) * c->loss_percent / 100)), c->loss_percent);
		s->given_up = true;
		s->given_up_at = now;
		for (struct zkl_hold *h = c->holds; h; h = h->next) {
			if (h->gen == s->gen && !h->lost) {
				h->lost = true;
				c->holds_lost = true;
				/* An ended hold's node is its owner's to delete. */
				if (h->path[0] && atomic_load(&h->state) != ZKL_HOLD_ENDED)
					zkl__task_delete(c, h->path, h->gen);
			}
		}
		zkl__holds_notify(c);
		if (c->state != ZKL_STATE_LOST)
			zkl__set_state(c, ZKL_STATE_LOST);
		return next;
	}
	bool any = false;
	for (struct zkl_hold *h = c->holds; h; h = h->next)
		any |= h->gen == s->gen && !h->lost;
	zkl__log(c, ZKL_LOG_WARN, "ZooKeeper confirmed nothing sent in the last %lld ms "
	        "(more than %d%% of the session timeout; %s): %s; opening a new session",
	        (long long)(now - (at - (int64_t)zkl__session_timeout_ms(c) * c->loss_percent /
	                           100)), c->loss_percent,
	        s->connected ? "connected" : "disconnected",
	        any ? "locks held are lost" : "the session may expire");
	/* The holds turn lost in zkl__holds_notify(), which calls their owners at once: marking
	 * them here, before zkl__session_replace() lets go of mu, would let a release forget a
	 * hold that is lost but not yet reported. */
	const uint64_t gen = s->gen;
	zkl__session_replace(c);
	if (c->gen == gen) {
		/* No new session could be opened: the holds are lost all the same. */
		for (struct zkl_hold *h = c->holds; h; h = h->next)
			if (h->gen == gen)
				h->lost = true;
		c->holds_lost = true;
	}
	zkl__holds_notify(c);
	if (c->state != ZKL_STATE_LOST)
		zkl__set_state(c, ZKL_STATE_LOST);
	return zkl__now_ms();
}

/* Closes retired sessions whose requests have all completed, or that have waited long
 * enough (mu held, event thread). Returns when to look again. */
int64_t zkl__retired_reap(zkl_client *c, bool all)
{
	int64_t next = INT64_MAX;
	struct zkl_session **pp = &c->retired;
	while (*pp) {
		struct zkl_session *s = *pp;
		/* An adopted handle stays open: its requests complete by themselves, and only
		 * then can it go without blocking the loop. */
		bool waited = !c->adopted && zkl__now_ms() - s->retired_at >= 5000;
		/* A release's delete may be on its way out on s (zkl__task_delete_sent): its
		 * task is the loop's on its next turn. */
		if (!all && atomic_load(&c->pins) > 0) {
			int64_t at = zkl__now_ms() + 10;
			if (at < next)
				next = at;
			pp = &s->next;
			continue;
		}
		if (all || s->inflight == 0 || waited) {
			*pp = s->next;
			pthread_mutex_unlock(&c->mu);
			zkl__session_free(c, s);
			pthread_mutex_lock(&c->mu);
			pp = &c->retired;
			continue;
		}
		int64_t at = c->adopted ? zkl__now_ms() + 1000 : s->retired_at + 5000;
		if (at < next)
			next = at;
		pp = &s->next;
	}
	return next;
}


int zkl_client_deadlines(const zkl_client *c, zkl_deadlines *out)
{
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	memset(out, 0, sizeof *out);
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	zkl_client *m = (zkl_client *)c;
	pthread_mutex_lock(&m->mu);
	const struct zkl_session *s = m->sess;
	if (s->last_proof_sent != 0 && !s->expired) {
		out->session_id = s->id;
		out->loss_ms = zkl__lost_at(m);
		out->expiry_ms = proof_base(m, s) + zkl__session_timeout_ms(m);
	}
	pthread_mutex_unlock(&m->mu);
	return 0;
}


int zkl_client_session_timeout(const zkl_client *c)
{
	if (!c)
		return 0;
	zkl_client *m = (zkl_client *)c;
	pthread_mutex_lock(&m->mu);
	int t = m->timeout_ms;
	pthread_mutex_unlock(&m->mu);
	return t;
}
