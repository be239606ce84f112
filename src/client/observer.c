/* The observer: one function per client told every lock event, with its times, and the
 * bounds of the wait and hold histograms of the client's statistics (counted inline,
 * zkl__stats_count() in hold.h, on the thread whose wait or hold ends).
 *
 * Events come from the engine on the loop (queued, granted, timed out, canceled), from
 * the holds the loop reports lost or revoked, and from a release, on whatever thread
 * releases. Each is copied into a queue of its own (obs_mu, never the client's mutex),
 * and the loop tells them in order, with no lock held, as it runs lost callbacks: so an
 * observer sees a release after the grant it ends, and may call any zklocks function
 * that does not wait for the server. Nothing is kept while no observer is set. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct zkl_obs {
	struct zkl_obs *next;
	zkl_lock_event ev;
	char strings[]; /* ev.path, then ev.node */
};

const int64_t zkl__bucket_ms[ZKL_STATS_BUCKETS - 1] = {
	1, 5, 10, 50, 100, 500, 1000, 5000, 10000, 60000, 300000,
};

int64_t zkl_stats_bucket_ms(int i)
{
	if (i < 0 || i >= ZKL_STATS_BUCKETS - 1)
		return INT64_MAX;
	return zkl__bucket_ms[i];
}

void zkl__observer_init(zkl_client *c)
{
	pthread_mutex_init(&c->obs_mu, NULL);
	atomic_init(&c->obs_on, false);
	zkl__cond_init(&c->obs_cv);
}

void zkl__observer_free(zkl_client *c)
{
	struct zkl_obs *o = c->obs_head;
	while (o) {
		struct zkl_obs *next = o->next;
		free(o);
		o = next;
	}
	c->obs_head = c->obs_tail = NULL;
	pthread_cond_destroy(&c->obs_cv);
	pthread_mutex_destroy(&c->obs_mu);
}

/* Whether an observer is set: events are made only then. */
static bool wanted(zkl_client *c)
{
	pthread_mutex_lock(&c->obs_mu);
	const bool w = c->obs_fn != NULL;
	pthread_mutex_unlock(&c->obs_mu);
	return w;
}

void zkl__observe_queue(zkl_client *c, const zkl_lock_event *ev)
{
	if (!wanted(c))
		return;
	const size_t plen = ev->path ? strlen(ev->path) + 1 : 0;
	const size_t nlen = ev->node ? strlen(ev->node) + 1 : 0;
	struct zkl_obs *o = malloc(sizeof *o + plen + nlen);
	if (!o)
		return; /* an observer misses an event rather than a lock its memory */
	o->next = NULL;
	o->ev = *ev;
	o->ev.path = plen ? memcpy(o->strings, ev->path, plen) : NULL;
	o->ev.node = nlen ? memcpy(o->strings + plen, ev->node, nlen) : NULL;
	pthread_mutex_lock(&c->obs_mu);
	if (c->obs_tail)
		c->obs_tail->next = o;
	else
		c->obs_head = o;
	c->obs_tail = o;
	atomic_store(&c->obs_queued, true);
	pthread_mutex_unlock(&c->obs_mu);
	if (!zkl__on_event_thread(c))
		zkl__loop_wake(c); /* the loop tells it on its next turn */
}

void zkl__hold_tell(zkl_client *c, const struct zkl_hold *h, zkl_lock_event_type type,
                   int64_t now, int64_t held)
{
	if (!wanted(c))
		return; /* no copy of the folder for an observer unset meanwhile */
	/* The folder: the node's path up to its last slash. */
	const char *slash = strrchr(h->path, '/');
	char *folder = strndup(h->path, slash ? (size_t)(slash - h->path) : 0);
	if (!folder)
		return;
	const zkl_lock_event ev = {
		.type = type,
		.kind = h->kind,
		.path = folder,
		.node = h->path[0] ? h->path : NULL,
		.token = h->token,
		.at_ms = now,
		.hold_ms = held,
	};
	zkl__observe_queue(c, &ev);
	free(folder);
}

void zkl__observer_run(zkl_client *c)
{
	pthread_mutex_lock(&c->obs_mu);
	/* One thread tells them at a time, so that they are told in order: another that
	 * runs the loop meanwhile (external_loop) leaves them to it. */
	if (c->obs_calling) {
		pthread_mutex_unlock(&c->obs_mu);
		return;
	}
	bool unlocked = false;
	while (c->obs_head) {
		struct zkl_obs *o = c->obs_head;
		c->obs_head = o->next;
		if (!c->obs_head)
			c->obs_tail = NULL;
		zkl_observer_fn fn = c->obs_fn;
		void *data = c->obs_data;
		if (!fn) {
			free(o);
			continue;
		}
		c->obs_calling++;
		c->obs_thread = pthread_self();
		c->obs_call_gen = c->obs_gen;
		pthread_mutex_unlock(&c->obs_mu);
		if (!unlocked) {
			pthread_mutex_unlock(&c->mu);
			unlocked = true;
		}
		fn(c, &o->ev, data);
		free(o);
		pthread_mutex_lock(&c->obs_mu);
		c->obs_calling--;
		pthread_cond_broadcast(&c->obs_cv);
	}
	atomic_store(&c->obs_queued, false);
	pthread_mutex_unlock(&c->obs_mu);
	if (unlocked)
		pthread_mutex_lock(&c->mu);
}

int zkl_client_set_observer(zkl_client *c, zkl_observer_fn fn, void *data)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	pthread_mutex_lock(&c->obs_mu);
	c->obs_fn = fn;
	c->obs_data = data;
	atomic_store(&c->obs_on, fn != NULL);
	const unsigned gen = ++c->obs_gen;
	/* The observer replaced may be running: wait for that call, unless this is it
	 * (calls of the new one may follow meanwhile). */
	while (c->obs_calling && c->obs_call_gen != gen &&
	       !pthread_equal(c->obs_thread, pthread_self()))
		pthread_cond_wait(&c->obs_cv, &c->obs_mu);
	pthread_mutex_unlock(&c->obs_mu);
	return 0;
}

const char *zkl_lock_event_name(zkl_lock_event_type type)
{
	switch (type) {
	case ZKL_EVENT_QUEUED: return "queued";
	case ZKL_EVENT_GRANTED: return "granted";
	case ZKL_EVENT_RELEASED: return "released";
	case ZKL_EVENT_LOST: return "lost";
	case ZKL_EVENT_REVOKED: return "revoked";
	case ZKL_EVENT_TIMED_OUT: return "timed out";
	case ZKL_EVENT_CANCELED: return "canceled";
	}
	return "unknown";
}
