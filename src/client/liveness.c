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
	pthread_mutex_lock(&c->mu);
	const int t = zkl__session_timeout_ms(c);
	*closing = c->closing;
	pthread_mutex_unlock(&c->mu);
	return t;
}

int64_t zkl__lost_at(zkl_client *c)
{
	const struct zkl_session *s = c->sess;
	if (s->last_ok_sent == 0)
		return INT64_MAX;
	return s->last_ok_sent + (int64_t)zkl__session_timeout_ms(c) * c->loss_percent / 100;
}

/* Liveness (event thread, mu held). Returns when to look again.
 *
 * The server cannot expire the session before T + t, T being the moment the last request
 * it answered was sent and t the session timeout; another client can hold our locks only
 * after that. So the client gives the session up at T + loss_percent of t, on its own
 * clock, whatever the C client says of the connection: a client that still hears the
 * server but is no longer heard by it stays "connected" for the C client (a watch event
 * restarts its clock), and a holder told only at T + t would still be running when the
 * next one starts. Giving the session up reports every hold lost and moves the client to
 * a new session, as an expiry does; the old session's nodes go when its close reaches the
 * server, or with its expiry.
 *
 * While connected, a heartbeat every sixth of t keeps T recent, so that a client that
 * must find another server (the C client notices silence after 2/3 t) still has time to
 * reconnect before T + loss_percent of t. While the client holds or waits for a lock,
 * the heartbeat is a write that changes nothing (a version check of "/"), answered only
 * once a quorum has committed it; only such answers move T then (op_proves()). A
 * follower cut off from the leader still answers reads (and the C client's pings) until
 * it gives up on the leader (syncLimit ticks), while the leader, hearing nothing of the
 * session, expires it; and a leader cut off from the others answers syncs too, until
 * syncLimit passes, while they elect a new one that may expire the session first. With
 * nothing held or awaited, the heartbeat is a sync, which costs the ensemble no write. */
int64_t zkl__liveness_run(zkl_client *c)
{
	int64_t now = zkl__now_ms();
	struct zkl_session *s = c->sess;
	int64_t next = INT64_MAX;
	if (s->connected) {
		if (now >= c->next_heartbeat) {
			c->next_heartbeat = now + zkl__session_timeout_ms(c) / 6;
			int err = 0;
			const bool idle = zkl__client_idle(c);
			pthread_mutex_unlock(&c->mu);
			struct zkl_op *op = idle ? zkl__op_sync(c, NULL, "/", &err)
			                         : zkl__op_check(c, NULL, "/", &err);
			pthread_mutex_lock(&c->mu);
			zkl__op_put(c, op);
			if (c->sess != s)
				return now; /* replaced meanwhile: look again */
		}
		next = c->next_heartbeat;
	}
	if (s->expired || s->given_up)
		return next;
	int64_t at = zkl__lost_at(c);
	if (now < at)
		return at < next ? at : next;
	if (c->adopted) {
		/* The application's session cannot be replaced here, and may live on: report
		 * every hold lost, and delete their nodes in the background (a node of this
		 * generation stays unless deleted). The session counts again once it answers. */
		zkl__log(c, ZKL_LOG_WARN, "ZooKeeper confirmed nothing sent in the last %lld ms "
		        "(more than %d%% of the session timeout) on the application's session: "
		        "locks held are lost", (long long)(now - s->last_ok_sent), c->loss_percent);
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
	        (long long)(now - s->last_ok_sent), c->loss_percent,
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
	if (s->last_ok_sent != 0 && !s->expired) {
		out->session_id = s->id;
		out->loss_ms = zkl__lost_at(m);
		out->expiry_ms = s->last_ok_sent + zkl__session_timeout_ms(m);
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
