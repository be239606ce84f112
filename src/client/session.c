/* Sessions: one zhandle_t each, their events, the public state and its listeners, and
 * adopted handles (zkl_client_adopt).
 *
 * Design notes.
 *
 * `sess` is the current session; `gen` numbers them. A node created on session g is gone
 * once the client moves to g+1, so the engine compares generations instead of asking the
 * server. A session replaced (after expiry, or given up by the loss rule: liveness.c) is
 * retired and closed once every request sent on it has completed, since the C client
 * drops the completions still queued when a handle is closed.
 *
 * Adopted sessions. The handle is the application's: our watcher is chained in front of
 * its own (which the completion thread then calls, as it did before), the handle is never
 * closed here, and our watches are taken off it when its session object goes. The
 * generation moves only on expiry, when the session and its nodes are gone for sure; the
 * loss rule, which cannot know that, marks the holds lost and deletes their nodes
 * instead.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

/* A session event of s's handle (mu held): noted, and queued for the loop. */
void zkl__session_event_locked(zkl_client *c, struct zkl_session *s, int state,
                          int64_t id, int timeout, struct zkl_event *e)
{
	if (state == ZOO_CONNECTED_STATE) {
		s->connected = true;
		s->ever_connected = true;
		s->id = id;
		c->timeout_ms = timeout;
		atomic_store(&c->timeout_pub, zkl__session_timeout_ms(c));
	} else {
		s->connected = false;
		if (state == ZOO_EXPIRED_SESSION_STATE)
			s->expired = true;
	}
	if (e) {
		e->next = NULL;
		e->gen = s->gen;
		e->zk_state = state;
		if (c->events_tail)
			c->events_tail->next = e;
		else
			c->events = e;
		c->events_tail = e;
	}
	zkl__loop_wake(c);
	zkl__wake_all(c);
}

/* A session event on the loop: a session's own, or an adopted handle's, which is the
 * current session's if that is still on the handle. */
static struct zkl_waiter *session_ev_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_session_ev *ev = (struct zkl_session_ev *)m;
	struct zkl_session *s = ev->s;
	if (!s && !c->closing && c->sess && c->sess->zh == ev->zh)
		s = c->sess;
	/* A closing client has let go of its session (c->sess NULL) before it takes its
	 * watches off an adopted handle: events meanwhile are nobody's. */
	if (s)
		zkl__session_event_locked(c, s, ev->state, ev->id, ev->timeout,
		                          malloc(sizeof(struct zkl_event)));
	if (ev->heap)
		free(ev);
	else
		atomic_store(&ev->used, false);
	return NULL;
}

/* Takes a free one of the client's session events, or allocates one (completion
 * thread). Out of memory, the watcher waits for some: it takes no lock meanwhile, and a
 * lost session event would leave the loop with a session state that is not the
 * handle's. */
static struct zkl_session_ev *session_ev_take(zkl_client *c)
{
	for (int i = 0; i < ZKL_SESSION_EVS; i++)
		if (!atomic_exchange(&c->sess_evs[i].used, true))
			return &c->sess_evs[i];
	struct zkl_session_ev *ev;
	while (!(ev = calloc(1, sizeof *ev)))
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	ev->heap = true;
	return ev;
}

/* Posts a session event of zh to the loop (completion thread): s's, or with s NULL, an
 * adopted handle's. The handle is read here: by the time the loop applies the event it
 * may be closed. */
static void session_ev_post(zkl_client *c, struct zkl_session *s, zhandle_t *zh, int state)
{
	struct zkl_session_ev *ev = session_ev_take(c);
	ev->m.kind = MSG_SESSION;
	ev->m.apply = session_ev_apply;
	ev->s = s;
	ev->zh = zh;
	ev->state = state;
	ev->id = state == ZOO_CONNECTED_STATE ? c->zk->session_id(zh) : 0;
	ev->timeout = state == ZOO_CONNECTED_STATE ? c->zk->timeout(zh) : 0;
	zkl__inbox_put(c, &ev->m, false);
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)path;
	struct zkl_session *s = ctx;
	if (type == ZOO_SESSION_EVENT)
		session_ev_post(s->c, s, zh, state);
}

/* Adopted handles (zkl_client_adopt): the application's global watcher is chained behind
 * ours. Its context stays the application's (zoo_get_context), so ours finds the client
 * through this list, newest first. An entry stays after its client lets go (detached),
 * since a dispatch may be under way; then only the application's watcher is called. */
struct adoption {
	zhandle_t *zh;
	zkl_client *c;             /* adoptions_mu; NULL once detached */
	watcher_fn app;            /* adoptions_mu: the application's watcher */
	bool chained;              /* adoptions_mu: app is known */
	struct adoption *next;
};
static pthread_mutex_t adoptions_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t adoptions_cv = PTHREAD_COND_INITIALIZER;
static struct adoption *adoptions;

static void adopted_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	pthread_mutex_lock(&adoptions_mu);
	struct adoption *a = adoptions;
	while (a && a->zh != zh)
		a = a->next;
	while (a && !a->chained) /* the adopter is between its two steps */
		pthread_cond_wait(&adoptions_cv, &adoptions_mu);
	watcher_fn app = a ? a->app : NULL;
	/* Posted under adoptions_mu, so that the client cannot go meanwhile: it lets go of
	 * the handle (zkl__release_handle) before it applies its inbox for the last time. */
	if (a && a->c && type == ZOO_SESSION_EVENT)
		session_ev_post(a->c, NULL, zh, state);
	pthread_mutex_unlock(&adoptions_mu);
	if (app)
		app(zh, type, state, path, ctx);
}

/* Puts our watcher in front of the application's on zh (no lock held). */
int zkl__adopt_handle(zkl_client *c, zhandle_t *zh)
{
	struct adoption *a = calloc(1, sizeof *a);
	if (!a)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	a->zh = zh;
	a->c = c;
	pthread_mutex_lock(&adoptions_mu);
	/* One client per handle: a second one would take the handle's watcher from the
	 * first, which would then miss its session's events. */
	for (struct adoption *o = adoptions; o; o = o->next) {
		if (o->zh == zh && o->c && o->c != c) {
			pthread_mutex_unlock(&adoptions_mu);
			free(a);
			return zkl__fail(ZKL_EINVAL, "that ZooKeeper handle is in use by another "
			                "zklocks client already (one client per handle: share that "
			                "client, or close it first)");
		}
	}
	a->next = adoptions;
	adoptions = a;
	pthread_mutex_unlock(&adoptions_mu);
	watcher_fn app = c->zk->set_watcher(zh, adopted_watcher);
	pthread_mutex_lock(&adoptions_mu);
	a->app = app == adopted_watcher ? NULL : app;
	a->chained = true;
	pthread_cond_broadcast(&adoptions_cv);
	pthread_mutex_unlock(&adoptions_mu);
	return 0;
}

/* Lets go of zh: the application's watcher alone gets its events again (no lock held;
 * never with c->mu). */
void zkl__release_handle(zkl_client *c, zhandle_t *zh)
{
	pthread_mutex_lock(&adoptions_mu);
	for (struct adoption *a = adoptions; a; a = a->next) {
		if (a->zh == zh && a->c == c) {
			a->c = NULL;
			if (a->app)
				c->zk->set_watcher(zh, a->app);
			break;
		}
	}
	pthread_mutex_unlock(&adoptions_mu);
}

struct zkl_session *zkl__session_new(zkl_client *c, uint64_t gen)
{
	struct zkl_session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->c = c;
	s->gen = gen;
	s->zh = c->zk->open(c->zk_self, c->servers, c->session_timeout_req, session_watcher, s,
	                    c->quiet_zk_log, &c->creds);
	if (!s->zh) {
		free(s);
		return NULL;
	}
	return s;
}

/* Closes a session's handle (no lock held) and drops the watches the C client still had:
 * once zookeeper_close() returns, it never calls them again. */
void zkl__session_free(zkl_client *c, struct zkl_session *s)
{
	if (c->adopted) {
		/* The application's handle stays open: wait for our requests to complete
		 * (their completions know s), then take our watches off it. The removal waits
		 * for the C client's completion thread, which may need mu: collect first. */
		struct { char *path; watcher_fn fn; void *ctx; int type; } *rm = NULL;
		size_t n = 0, cap = 0;
		pthread_mutex_lock(&c->mu);
		while (s->inflight > 0)
			zkl__io_wait(c, zkl__now_ms() + 100);
		for (struct zkl_watch *wt = s->watches; wt; wt = wt->next)
			cap++;
		for (struct zkl_revwatch *rv = c->revwatches; rv; rv = rv->next)
			cap++;
		rm = cap ? calloc(cap, sizeof *rm) : NULL;
		for (struct zkl_watch *wt = s->watches; rm && wt; wt = wt->next)
			if (wt->path && (rm[n].path = strdup(wt->path)))
				rm[n].fn = zkl__node_watcher, rm[n].ctx = wt, rm[n++].type = ZWATCHTYPE_ANY;
		for (struct zkl_revwatch *rv = c->revwatches; rm && rv; rv = rv->next)
			if (rv->registered && rv->s == s && (rm[n].path = strdup(rv->path)))
				rm[n].fn = zkl__revwatch_watcher, rm[n].ctx = rv, rm[n++].type = ZWATCHTYPE_DATA;
		bool shared = c->sess && c->sess != s && c->sess->zh == s->zh;
		pthread_mutex_unlock(&c->mu);
		for (size_t i = 0; i < n; i++) {
			c->zk->remove_watch(s->zh, rm[i].path, rm[i].type, rm[i].fn, rm[i].ctx);
			free(rm[i].path);
		}
		free(rm);
		if (!shared)
			zkl__release_handle(c, s->zh);
	} else {
		c->zk->close(s->zh);
	}
	pthread_mutex_lock(&c->mu);
	/* What the C client said before the close is applied before s goes. */
	zkl__inbox_drain(c);
	while (s->watches) {
		struct zkl_watch *wt = s->watches;
		s->watches = wt->next;
		wt->registered = false;
		wt->next = wt->prev = NULL;
		if (--wt->refs == 0)
			zkl__watch_free(wt);
	}
	for (struct zkl_revwatch *rv = c->revwatches, *next; rv; rv = next) {
		next = rv->next;
		if (rv->registered && rv->s == s) {
			rv->registered = false;
			zkl__revwatch_put(c, rv);
		}
	}
	/* A request of s may still be held by whoever sent it (an acquisition reads its
	 * answer's session on its next step): the last of them frees s (op_free()). */
	bool last = s->ops == 0;
	s->gone = true;
	pthread_mutex_unlock(&c->mu);
	if (last)
		free(s);
}


void zkl__set_state(zkl_client *c, zkl_state st)
{
	c->state = st;
	if (!c->closing)
		atomic_store(&c->state_pub, (int)st);
	pthread_cond_broadcast(&c->cv);
	if (c->nlisteners == 0)
		return;
	/* Call each listener with no lock held. The array may change meanwhile: copy. */
	size_t n = c->nlisteners;
	struct zkl_listener *copy = malloc(n * sizeof *copy);
	if (!copy)
		return;
	memcpy(copy, c->listeners, n * sizeof *copy);
	c->listener_running = true;
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < n; i++) {
		/* Skip listeners removed by an earlier one. */
		bool present = false;
		pthread_mutex_lock(&c->mu);
		for (size_t j = 0; j < c->nlisteners; j++)
			if (c->listeners[j].fn == copy[i].fn && c->listeners[j].data == copy[i].data)
				present = true;
		pthread_mutex_unlock(&c->mu);
		if (present)
			copy[i].fn(c, st, copy[i].data);
	}
	pthread_mutex_lock(&c->mu);
	c->listener_running = false;
	pthread_cond_broadcast(&c->cv);
	free(copy);
}

/* Moves to a new session after the current one expired or was given up for lost (event
 * thread, mu held). */
void zkl__session_replace(zkl_client *c)
{
	struct zkl_session *old = c->sess;
	struct zkl_session *s = NULL;
	if (c->adopted) {
		/* The application opens the next session and hands it over
		 * (zkl_client_handover()); until then the expired handle stands in, and every
		 * request on it fails as a lost session does, so acquisitions wait. */
		s = calloc(1, sizeof *s);
		if (s) {
			s->c = c;
			s->gen = old->gen + 1;
			s->zh = old->zh;
			s->expired = true;
			s->standin = true;
		}
	}
	pthread_mutex_unlock(&c->mu);
	/* Opening a session only allocates and starts threads; retry if it could not. */
	for (int i = 0; i < 50 && !s && !c->adopted; i++) {
		s = zkl__session_new(c, old->gen + 1);
		if (!s)
			usleep(100000);
	}
	pthread_mutex_lock(&c->mu);
	if (!s) {
		zkl__log(c, ZKL_LOG_ERROR, "cannot open a new ZooKeeper session: %s", strerror(errno));
		return;
	}
	c->sess = s;
	c->gen = s->gen;
	if (!c->adopted && !c->external)
		atomic_store(&c->sess_pub, s);
	old->retired_at = zkl__now_ms();
	old->next = c->retired;
	c->retired = old;
	zkl__wake_all(c);
}

void zkl__handle_event(zkl_client *c, struct zkl_event *e)
{
	if (e->gen != c->gen)
		return; /* from a retired session */
	struct zkl_session *s = c->sess;
	if (e->zk_state == ZOO_CONNECTED_STATE) {
		c->next_heartbeat = 0; /* prove the session at once */
		if (c->state == ZKL_STATE_CONNECTING)
			zkl__set_state(c, ZKL_STATE_CONNECTED);
		else if (c->state != ZKL_STATE_CONNECTED && c->state != ZKL_STATE_RECONNECTED)
			zkl__set_state(c, ZKL_STATE_RECONNECTED);
	} else if (e->zk_state == ZOO_EXPIRED_SESSION_STATE) {
		zkl__log(c, ZKL_LOG_WARN, "ZooKeeper session 0x%llx expired; %s",
		        (unsigned long long)s->id, c->adopted ? "waiting for the application's "
		        "next handle (zkl_client_handover)" : "opening a new one");
		zkl__session_replace(c);
		zkl__holds_notify(c);
		if (c->state != ZKL_STATE_LOST)
			zkl__set_state(c, ZKL_STATE_LOST);
	} else if (e->zk_state == ZOO_AUTH_FAILED_STATE) {
		c->auth_failed = true;
		zkl__log(c, ZKL_LOG_ERROR, "ZooKeeper refused the credentials");
		pthread_cond_broadcast(&c->cv);
	} else if (e->zk_state == ZOO_CONNECTING_STATE || e->zk_state == ZOO_ASSOCIATING_STATE ||
	           e->zk_state == ZOO_NOTCONNECTED_STATE || e->zk_state == 0) {
		if (c->state == ZKL_STATE_CONNECTED || c->state == ZKL_STATE_RECONNECTED)
			zkl__set_state(c, ZKL_STATE_SUSPENDED);
	}
}


int zkl_client_handover(zkl_client *c, zhandle_t *zh)
{
	zkl__clear_error();
	if (!c || !zh)
		return zkl__fail(ZKL_EINVAL, "%s is NULL", c ? "the ZooKeeper handle" : "client");
	if (!c->adopted)
		return zkl__fail(ZKL_EINVAL, "the client has sessions of its own (it was not made "
		                "with zkl_client_adopt())");
	pthread_mutex_lock(&c->mu);
	struct zkl_session *s = c->sess;
	zhandle_t *old = s->zh;
	int rc = 0;
	if (c->closing)
		rc = zkl__fail(ZKL_ECLOSED, "the client is closing");
	else if (old == zh)
		rc = zkl__fail(ZKL_EINVAL, "that handle is the client's already");
	else if (!s->standin)
		/* Not before the loop has moved on from the expired session: it would move
		 * the new handle's session aside as expired when it gets to the expiry. */
		rc = zkl__fail(ZKL_EBUSY, "the current session has not expired, or the client "
		              "has not yet moved on from it: hand the next handle over once it "
		              "has (the state listener hears \"lost\")");
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		return rc;
	zkl__release_handle(c, old);
	pthread_mutex_lock(&c->mu);
	s->zh = zh;
	s->expired = false;
	s->standin = false;
	s->connected = false;
	s->ever_connected = false;
	s->id = 0;
	s->last_proof_sent = 0;
	s->last_heard_sent = 0;
	s->quiet_began = 0;
	s->quiet_ended = 0;
	s->doomed = false;
	pthread_mutex_unlock(&c->mu);
	rc = zkl__adopt_handle(c, zh);
	if (rc != 0)
		return rc;
	/* Connected before our watcher was in front: say so ourselves. */
	if (c->zk->connected(zh)) {
		pthread_mutex_lock(&c->mu);
		if (c->sess == s && !s->connected)
			zkl__session_event_locked(c, s, ZOO_CONNECTED_STATE, c->zk->session_id(zh),
			                     c->zk->timeout(zh), malloc(sizeof(struct zkl_event)));
		pthread_mutex_unlock(&c->mu);
	}
	return 0;
}


int zkl_client_add_listener(zkl_client *c, zkl_state_fn fn, void *data)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	if (!fn)
		return zkl__fail(ZKL_EINVAL, "listener function is NULL");
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nlisteners; i++) {
		if (c->listeners[i].fn == fn && c->listeners[i].data == data) {
			pthread_mutex_unlock(&c->mu);
			return zkl__fail(ZKL_EINVAL, "this listener was already added");
		}
	}
	struct zkl_listener *l = realloc(c->listeners, (c->nlisteners + 1) * sizeof *l);
	if (!l) {
		pthread_mutex_unlock(&c->mu);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	l[c->nlisteners].fn = fn;
	l[c->nlisteners].data = data;
	c->listeners = l;
	c->nlisteners++;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int zkl_client_remove_listener(zkl_client *c, zkl_state_fn fn, void *data)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nlisteners; i++) {
		if (c->listeners[i].fn == fn && c->listeners[i].data == data) {
			memmove(&c->listeners[i], &c->listeners[i + 1],
			        (c->nlisteners - i - 1) * sizeof *c->listeners);
			c->nlisteners--;
			/* Promise: when this returns, the listener is not running. */
			while (c->listener_running && !zkl__on_event_thread(c))
				pthread_cond_wait(&c->cv, &c->mu);
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return zkl__fail(ZKL_EINVAL, "no such listener");
}

int64_t zkl_client_session_id(const zkl_client *c)
{
	if (!c)
		return 0;
	zkl_client *m = (zkl_client *)c;
	pthread_mutex_lock(&m->mu);
	int64_t id = m->sess && m->sess->connected ? m->sess->id : 0;
	pthread_mutex_unlock(&m->mu);
	return id;
}
