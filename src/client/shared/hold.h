/* A hold's end by its owner, on the owner's thread, the statistics it counts there, and
 * the look at whether an observer is set before an event is made for it: inline, as
 * every grant and release runs them. The client's struct is needed whole, so they live
 * here, below internal.h (src/client/holds.c has the rest of a hold's life, observer.c
 * the observer's queue). */
#ifndef ZKL_HOLD_H
#define ZKL_HOLD_H

#include "internal.h"

/* Queues ev for the observer if one is set (obs_on; zkl__observe_queue(), observer.c):
 * a grant or a wait's end nobody watches takes no lock of the observer's. */
static inline void zkl__observe(zkl_client *c, const zkl_lock_event *ev)
{
	if (atomic_load_explicit(&c->obs_on, memory_order_relaxed))
		zkl__observe_queue(c, ev);
}
/* Counts ms in one of the client's histograms (hist, with its sum): any thread, no lock,
 * inline, as a release counts its hold on its way. bucket_ms: each bucket's upper
 * bound, the last bucket's none (zkl_stats_bucket_ms()). */
extern const int64_t zkl__bucket_ms[ZKL_STATS_BUCKETS - 1];
static inline void zkl__stats_count(atomic_uint_fast64_t *hist, atomic_uint_fast64_t *sum,
                                    int64_t ms)
{
	if (ms < 0)
		ms = 0;
	int i = 0;
	while (i < ZKL_STATS_BUCKETS - 1 && ms > zkl__bucket_ms[i])
		i++;
	atomic_fetch_add_explicit(&hist[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(sum, (uint_fast64_t)ms, memory_order_relaxed);
}
/* An event of hold h (type RELEASED, LOST or REVOKED): its hold time counted in the
 * client's hold histogram for RELEASED and LOST, and the observer told, if one is set
 * (obs_on; the releasing thread reads no lock for a release nobody watches). */
static inline void zkl__hold_observe(zkl_client *c, const struct zkl_hold *h,
                                     zkl_lock_event_type type)
{
	if (!h->kind)
		return;
	const int64_t now = zkl__now_ms();
	const int64_t held = now - h->granted_at;
	if (type == ZKL_EVENT_RELEASED || type == ZKL_EVENT_LOST)
		zkl__stats_count(c->hold_hist, &c->hold_sum, held);
	if (atomic_load_explicit(&c->obs_on, memory_order_relaxed))
		zkl__hold_tell(c, h, type, now, held);
}
/* Counts a wait in the client's histogram. */
static inline void zkl__observe_wait(zkl_client *c, int64_t wait_ms)
{
	zkl__stats_count(c->wait_hist, &c->wait_sum, wait_ms);
}

/* Queues m for the loop (loop.c; any thread): woken unless lazy. */
bool zkl__inbox_put(zkl_client *c, struct zkl_msg *m, bool lazy);
/* Applies h's end here (holds.c; on a thread that runs the loop, or with external_loop):
 * unlinked and freed, the client's mutex taken for it. */
void zkl__hold_end_here(zkl_client *c, struct zkl_hold *h);
/* Hands the loop h's ended record (zkl_hold.end, set up by zkl__hold_new), with no
 * wake: an ended hold is nothing to the loop but memory. With external_loop, or on the
 * loop's own thread, it is applied here. */
static inline void zkl__hold_post_end(zkl_client *c, struct zkl_hold *h)
{
	if (c->external || zkl__running_loop == c)
		zkl__hold_end_here(c, h);
	else
		zkl__inbox_put(c, &h->end, true);
}
/* Any end of a hold but the usual one (holds.c); ended: zkl__hold_end() moved it from
 * held to ended already, and then found the session changed. */
bool zkl__hold_end_other(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how,
                         bool ended);
/* zkl__hold_end(), whose contract is in internal.h's holds section. The usual end, a
 * release's on the session the client is on before and after it moves the hold from
 * held to ended, with the hold not lost, is made here, inline, on the releasing thread:
 * atomics, its hold time counted, and its record handed to the loop. Nothing is
 * reported and nothing waits. */
static inline bool zkl__hold_end(zkl_client *c, struct zkl_hold *h, enum zkl_hold_ending how)
{
	bool ended = false;
	if (how == ZKL_HOLD_END) {
		struct zkl_session *s = atomic_load(&c->sess_pub);
		if (s && s->gen == h->gen && !atomic_load(&h->lost)) {
			int st = ZKL_HOLD_HELD;
			ended = atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED);
			if (ended && atomic_load(&c->sess_pub) == s && !atomic_load(&h->lost)) {
				zkl__hold_observe(c, h, ZKL_EVENT_RELEASED);
				zkl__hold_post_end(c, h);
				return false;
			}
		}
	}
	return zkl__hold_end_other(c, h, how, ended);
}

#endif
