/* The client: one ZooKeeper session shared by every recipe and thread of a process.
 *
 * Design notes.
 *
 * Threads. The C client runs every watcher and completion of a handle on its one
 * completion thread. Code that runs there (session_watcher, the op completions, the
 * node watcher) only records a result under `mu` and signals a condition variable; it
 * never blocks and never calls zoo_*. Everything that takes time or calls the user runs
 * elsewhere: on the thread that called the library, or on the client's own event thread.
 *
 * The event thread handles, in order: session state changes (it turns them into the
 * public states and, after expiry, opens a new session and reports every hold of the old
 * one lost), user callbacks (state listeners, lost callbacks; called with no lock held),
 * background deletes that must be retried until they succeed or their session is gone,
 * and closing retired sessions once every request sent on them has completed (the C
 * client drops completions still queued when a handle is closed).
 *
 * Requests go out through the request layer's table (zk.h), never to the C client
 * directly: zk.c fills it with the C client's calls, and the unit suite puts an
 * in-memory ZooKeeper in their place, with the same threading contract.
 *
 * Sessions. `sess` is the current session; `gen` numbers them. A node created on session
 * g is gone once the client moves to g+1, so the engine compares generations instead of
 * asking the server.
 *
 * Adopted sessions (zkl_client_adopt). The handle is the application's: our watcher is
 * chained in front of its own (which the completion thread then calls, as it did
 * before), the handle is never closed here, and our watches are taken off it when its
 * session object goes. The generation moves only on expiry, when the session and its
 * nodes are gone for sure; the loss rule, which cannot know that, marks the holds lost
 * and deletes their nodes instead.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

struct zkl_event {
	struct zkl_event *next;
	uint64_t gen;
	int zk_state;
};

enum task_kind { TASK_DELETE, TASK_FIND_DELETE };

/* A background task is on one of two lists: c->tasks while the loop has to look at it
 * (new, waiting to retry, or answered), c->tasks_out while a request of it is out. A
 * pending delete is also in the index of its folder, so that a listing finds our nodes
 * on their way out without going through every task of the client. */
struct zkl_task {
	struct zkl_msg msg;                /* its completion, in the inbox */
	struct zkl_msg rel;                /* a release's: the loop takes the task over */
	int zrc;                           /* the completion's return code, until applied */
	struct zkl_task *next, *prev;      /* mu: in c->tasks or c->tasks_out */
	bool out;                          /* mu: in c->tasks_out */
	struct zkl_task *fnext, *fprev;    /* mu: in folder->tasks */
	struct zkl_task_folder *folder;    /* mu: the index entry of a DELETE, or NULL */
	enum task_kind kind;
	char *path;                        /* DELETE: node; FIND_DELETE: parent */
	char uuid[ZKL_UUID_LEN + 1];
	uint64_t gen;
	bool inflight;                     /* a request for it is out */
	bool done;                         /* its request completed: look at rc */
	int rc;
	char *found;                       /* FIND_DELETE: the child that carries the uuid */
	int64_t not_before;
	struct zkl_session *s;
};

struct zkl_listener {
	zkl_state_fn fn;
	void *data;
};

static void *event_main(void *arg);

/* The client whose loop the calling thread is running (its event thread, or an
 * application's thread inside zkl_client_process()), or NULL. */
static _Thread_local zkl_client *running_loop;

/* Tells the loop there is work: wakes the event thread, or makes the application's loop
 * descriptor readable (once until the next zkl_client_process()). */
static void loop_wake(zkl_client *c)
{
	if (!c->external) {
		pthread_mutex_lock(&c->inbox_mu);
		c->kicks++;
		pthread_mutex_unlock(&c->inbox_mu);
		/* After the unlock: the woken loop does not then wait for inbox_mu. */
		pthread_cond_broadcast(&c->inbox_cv);
	}
	pthread_cond_broadcast(&c->ev_cv);
	if (c->efd >= 0 && !atomic_exchange(&c->efd_armed, true)) {
		uint64_t one = 1;
		ssize_t n = write(c->efd, &one, sizeof one);
		(void)n; /* EAGAIN: the counter is far from empty, so it is readable anyway */
	}
}
static void wake_all(zkl_client *c);

/* ------------------------------------------------------------------------------------ */
/* The inbox */

/* What the C client's completion thread hands the loop. With a loop thread of the
 * client's own, a completion or a watch event is copied into a message and queued, and
 * the loop applies it under mu: the completion thread never waits for the loop, and
 * never takes mu. With external_loop it applies the message itself, under mu, since the
 * application's loop thread may be the one blocked in a zklocks call that waits for it. */
enum msg_kind { MSG_OP, MSG_TASK, MSG_WATCH, MSG_REVWATCH, MSG_REVREAD, MSG_SESSION, MSG_CALL,
                MSG_HOLD_END, MSG_RELEASE };

/* A node watch's or a revocation watch's event. */
struct watch_msg {
	struct zkl_msg m;
	void *obj;                 /* struct zkl_watch or struct zkl_revwatch */
	int type;
};

/* A revocation watch's read. */
struct revread_msg {
	struct zkl_msg m;
	struct zkl_revwatch *rv;
	int rc;
	bool revoke;               /* the data asks the holder to let go */
	bool has_value;            /* a shared count's four bytes */
	int32_t value;
};

/* A session event, with what the handle said when it happened. */
struct session_msg {
	struct zkl_msg m;
	struct zkl_session *s;
	int state;
	int64_t id;
	int timeout;
	struct zkl_event *e;
};

static void msg_run(zkl_client *c, struct zkl_msg *m);
static void hold_unlink(zkl_client *c, struct zkl_hold *h);
static void task_take_over(zkl_client *c, struct zkl_task *t);
static void msg_apply(zkl_client *c, struct zkl_msg *m);

/* Queues m for the loop (no lock held), and wakes it unless `lazy` (then m waits for
 * the loop's next turn). A call is refused once the loop has ended. */
static bool inbox_put(zkl_client *c, struct zkl_msg *m, bool lazy)
{
	m->next = NULL;
	pthread_mutex_lock(&c->inbox_mu);
	bool taken = m->kind != MSG_CALL || !c->loop_ended;
	bool wake = false;
	if (taken) {
		if (c->inbox_tail)
			c->inbox_tail->next = m;
		else
			c->inbox = m;
		c->inbox_tail = m;
		/* An op's laziness is read again here, under inbox_mu: zkl_op_hasten() takes
		 * inbox_mu after clearing it, so the loop finds m in the inbox or is woken. */
		if (lazy && m->kind == MSG_OP)
			lazy = atomic_load(&((struct zkl_op *)m)->lazy);
		if (!lazy || atomic_load(&c->hurry)) {
			c->kicks++;
			wake = true;
		}
	}
	pthread_mutex_unlock(&c->inbox_mu);
	if (wake)
		pthread_cond_broadcast(&c->inbox_cv); /* after the unlock, as loop_wake() */
	return taken;
}

/* Hands m to the loop (no lock held), or applies it here (external_loop). */
static void inbox_post(zkl_client *c, struct zkl_msg *m, bool lazy)
{
	if (c->external) {
		pthread_mutex_lock(&c->mu);
		msg_apply(c, m);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	inbox_put(c, m, lazy);
}

/* Hands the loop a copy of one, a message of size bytes on the caller's stack
 * (completion thread). Without memory for the copy, one is applied here, under mu, as
 * with external_loop. */
static void post_copy(zkl_client *c, struct zkl_msg *one, size_t size)
{
	struct zkl_msg *m = malloc(size);
	if (!m) {
		pthread_mutex_lock(&c->mu);
		msg_run(c, one);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	memcpy(m, one, size);
	inbox_post(c, m, false);
}

/* Applies what is in the inbox, in the order it came (mu held). */
static void inbox_drain(zkl_client *c)
{
	pthread_mutex_lock(&c->inbox_mu);
	struct zkl_msg *m = c->inbox;
	c->inbox = c->inbox_tail = NULL;
	pthread_mutex_unlock(&c->inbox_mu);
	while (m) {
		struct zkl_msg *next = m->next;
		msg_apply(c, m);
		m = next;
	}
}

bool zkl_call(zkl_client *c, struct zkl_call *call)
{
	call->msg.kind = MSG_CALL;
	if (!c->external && running_loop != c)
		return inbox_put(c, &call->msg, false);
	/* The loop's own thread, or any thread with external_loop (whose completions are
	 * applied as they come): run it here, after what the inbox holds. */
	pthread_mutex_lock(&c->mu);
	bool taken = !c->loop_ended;
	if (taken) {
		inbox_drain(c);
		call->fn(c, call);
	}
	pthread_mutex_unlock(&c->mu);
	return taken;
}

static uint64_t kicks_now(zkl_client *c)
{
	pthread_mutex_lock(&c->inbox_mu);
	uint64_t k = c->kicks;
	pthread_mutex_unlock(&c->inbox_mu);
	return k;
}

/* Lets go of mu (held), then tells the threads of the jobs ended in this turn. */
static void unlock_and_tell(zkl_client *c)
{
	struct zkl_job *told = c->told;
	c->told = NULL;
	pthread_mutex_unlock(&c->mu);
	zkl_jobs_tell(told);
}

/* Waits (mu held, released meanwhile) until the loop was woken after kicks read k, or
 * until deadline; returns true if the deadline passed. Then applies the inbox. */
static bool inbox_wait(zkl_client *c, uint64_t k, int64_t deadline)
{
	bool timed = false;
	/* The threads of the jobs that ended first, while inbox_mu is free: a woken thread's
	 * next call (an acquire) takes it at once. */
	unlock_and_tell(c);
	pthread_mutex_lock(&c->inbox_mu);
	while (!c->inbox && c->kicks == k)
		if ((timed = zkl_cond_wait_until(&c->inbox_cv, &c->inbox_mu, deadline)))
			break;
	pthread_mutex_unlock(&c->inbox_mu);
	pthread_mutex_lock(&c->mu);
	inbox_drain(c);
	return timed;
}

/* Waits (mu held) for the C client to tell something, on any thread: the event thread
 * and a closing one apply the inbox themselves. Returns true if the deadline passed. */
static bool io_wait(zkl_client *c, int64_t deadline)
{
	if (c->external)
		return zkl_cond_wait_until(&c->ev_cv, &c->mu, deadline);
	return inbox_wait(c, kicks_now(c), deadline);
}
static void revwatch_put(zkl_client *c, struct zkl_revwatch *rv);
static bool watch_unregister_locked(struct zkl_watch *wt);
static void watch_register(zkl_client *c, struct zkl_op *op, struct zkl_watch *wt,
                           const char *path);

static void watch_free(struct zkl_watch *wt)
{
	free(wt->path);
	free(wt);
}
static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void revwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* ------------------------------------------------------------------------------------ */
/* Logging */

void zkl_log(zkl_client *c, zkl_log_level level, const char *fmt, ...)
{
	if (!c || !c->log || level > c->log_level)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	c->log(level, buf, c->log_data);
}

int zkl_default_data(char *buf, size_t size)
{
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		strcpy(host, "unknown");
	host[sizeof host - 1] = 0;
	int n = snprintf(buf, size, "%s:%ld", host, (long)getpid());
	return n < 0 ? 0 : (n >= (int)size ? (int)size - 1 : n);
}

/* ------------------------------------------------------------------------------------ */
/* Waiters */

void zkl_waiter_enter_loop(zkl_client *c, struct zkl_waiter *w, const void *owner,
                           void (*run)(zkl_client *c, struct zkl_waiter *w))
{
	w->owner = owner;
	w->canceled = false;
	w->run = run;
	w->queued = false;
	w->woken = false;
	w->wake_at = INT64_MAX;
	w->prev = NULL;
	w->next = c->waiters;
	if (c->waiters)
		c->waiters->prev = w;
	c->waiters = w;
	zkl_waiter_wake(c, w);
}

void zkl_waiter_wake(zkl_client *c, struct zkl_waiter *w)
{
	if (w->own_thread) {
		w->woken = true;
		pthread_cond_broadcast(&c->ev_cv);
		return;
	}
	if (w->queued)
		return;
	w->queued = true;
	w->ready_next = NULL;
	if (c->ready_tail)
		c->ready_tail->ready_next = w;
	else
		c->ready = w;
	c->ready_tail = w;
	loop_wake(c);
}

void zkl_waiter_wake_at(zkl_client *c, struct zkl_waiter *w, int64_t t)
{
	w->wake_at = t;
	if (t < c->loop_next)
		c->loop_next = t;
}

/* Takes w off the queue of waiters ready to run (mu held). */
static void waiter_unqueue(zkl_client *c, struct zkl_waiter *w)
{
	if (!w->queued)
		return;
	struct zkl_waiter *prev = NULL;
	for (struct zkl_waiter *r = c->ready; r; prev = r, r = r->ready_next) {
		if (r != w)
			continue;
		if (prev)
			prev->ready_next = r->ready_next;
		else
			c->ready = r->ready_next;
		if (c->ready_tail == r)
			c->ready_tail = prev;
		break;
	}
	w->queued = false;
}

bool zkl_waiter_due(struct zkl_waiter *w)
{
	if (!w->woken && w->wake_at > zkl_now_ms())
		return false;
	w->woken = false;
	w->wake_at = INT64_MAX;
	return true;
}

void zkl_waiter_leave(zkl_client *c, struct zkl_waiter *w)
{
	waiter_unqueue(c, w);
	if (w->prev)
		w->prev->next = w->next;
	else
		c->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
}

static void wake_all(zkl_client *c)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next)
		zkl_waiter_wake(c, w);
	pthread_cond_broadcast(&c->cv);
}

void zkl_cancel_owner_locked(zkl_client *c, const void *owner)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next) {
		if (w->owner == owner) {
			w->canceled = true;
			zkl_waiter_wake(c, w);
		}
	}
}

struct cancel_call {
	struct zkl_call call;
	const void *owner;
};

static void cancel_run(zkl_client *c, struct zkl_call *call)
{
	struct cancel_call *k = (struct cancel_call *)call;
	zkl_cancel_owner_locked(c, k->owner);
	free(k);
}

void zkl_client_cancel_owner(zkl_client *c, const void *owner)
{
	struct cancel_call *k = malloc(sizeof *k);
	if (k) {
		k->call.fn = cancel_run;
		k->owner = owner;
		if (zkl_call(c, &k->call))
			return;
		free(k);
	}
	/* No memory for the call, or the loop has ended (closing): cancel here. */
	pthread_mutex_lock(&c->mu);
	inbox_drain(c);
	zkl_cancel_owner_locked(c, owner);
	pthread_mutex_unlock(&c->mu);
}

bool zkl_on_event_thread(zkl_client *c)
{
	return running_loop == c;
}

bool zkl_runs_loop(zkl_client *c)
{
	return running_loop == c ||
	       (c->loop_known && pthread_equal(c->loop_thread, pthread_self()));
}

bool zkl_is_loop_thread(zkl_client *c)
{
	if (running_loop == c)
		return true;
	if (!c->external)
		return false;
	pthread_mutex_lock(&c->mu);
	bool r = zkl_runs_loop(c);
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* ------------------------------------------------------------------------------------ */
/* Sessions */

/* A session event of s's handle (mu held): noted, and queued for the loop. */
static void session_event_locked(zkl_client *c, struct zkl_session *s, int state,
                                 int64_t id, int timeout, struct zkl_event *e)
{
	if (state == ZOO_CONNECTED_STATE) {
		s->connected = true;
		s->ever_connected = true;
		s->id = id;
		c->timeout_ms = timeout;
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
	loop_wake(c);
	wake_all(c);
}

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)path;
	struct zkl_session *s = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	zkl_client *c = s->c;
	/* The handle is read here: by the time the loop applies the event it may be closed. */
	struct session_msg m = {.m.kind = MSG_SESSION, .s = s, .state = state,
	                        .e = malloc(sizeof(struct zkl_event))};
	if (state == ZOO_CONNECTED_STATE) {
		m.id = c->zk->session_id(zh);
		m.timeout = c->zk->timeout(zh);
	}
	post_copy(c, &m.m, sizeof m);
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
	if (a && a->c && type == ZOO_SESSION_EVENT) {
		/* Under adoptions_mu, so that the client cannot go meanwhile; it never takes
		 * adoptions_mu while holding its own mu. */
		zkl_client *c = a->c;
		struct zkl_event *e = malloc(sizeof *e);
		pthread_mutex_lock(&c->mu);
		if (c->sess->zh == zh && !c->closing)
			session_event_locked(c, c->sess, state,
			                     state == ZOO_CONNECTED_STATE ? c->zk->session_id(zh) : 0,
			                     state == ZOO_CONNECTED_STATE ? c->zk->timeout(zh) : 0, e);
		else
			free(e);
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_unlock(&adoptions_mu);
	if (app)
		app(zh, type, state, path, ctx);
}

/* Puts our watcher in front of the application's on zh (no lock held). */
static int adopt_handle(zkl_client *c, zhandle_t *zh)
{
	struct adoption *a = calloc(1, sizeof *a);
	if (!a)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	a->zh = zh;
	a->c = c;
	pthread_mutex_lock(&adoptions_mu);
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
static void release_handle(zkl_client *c, zhandle_t *zh)
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

static struct zkl_session *session_new(zkl_client *c, uint64_t gen)
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
static void session_free(zkl_client *c, struct zkl_session *s)
{
	if (c->adopted) {
		/* The application's handle stays open: wait for our requests to complete
		 * (their completions know s), then take our watches off it. The removal waits
		 * for the C client's completion thread, which may need mu: collect first. */
		struct { char *path; watcher_fn fn; void *ctx; int type; } *rm = NULL;
		size_t n = 0, cap = 0;
		pthread_mutex_lock(&c->mu);
		while (s->inflight > 0)
			io_wait(c, zkl_now_ms() + 100);
		for (struct zkl_watch *wt = s->watches; wt; wt = wt->next)
			cap++;
		for (struct zkl_revwatch *rv = c->revwatches; rv; rv = rv->next)
			cap++;
		rm = cap ? calloc(cap, sizeof *rm) : NULL;
		for (struct zkl_watch *wt = s->watches; rm && wt; wt = wt->next)
			if (wt->path && (rm[n].path = strdup(wt->path)))
				rm[n].fn = node_watcher, rm[n].ctx = wt, rm[n++].type = ZWATCHTYPE_ANY;
		for (struct zkl_revwatch *rv = c->revwatches; rm && rv; rv = rv->next)
			if (rv->registered && rv->s == s && (rm[n].path = strdup(rv->path)))
				rm[n].fn = revwatch_watcher, rm[n].ctx = rv, rm[n++].type = ZWATCHTYPE_DATA;
		bool shared = c->sess && c->sess != s && c->sess->zh == s->zh;
		pthread_mutex_unlock(&c->mu);
		for (size_t i = 0; i < n; i++) {
			c->zk->remove_watch(s->zh, rm[i].path, rm[i].type, rm[i].fn, rm[i].ctx);
			free(rm[i].path);
		}
		free(rm);
		if (!shared)
			release_handle(c, s->zh);
	} else {
		c->zk->close(s->zh);
	}
	pthread_mutex_lock(&c->mu);
	/* What the C client said before the close is applied before s goes. */
	inbox_drain(c);
	while (s->watches) {
		struct zkl_watch *wt = s->watches;
		s->watches = wt->next;
		wt->registered = false;
		wt->next = wt->prev = NULL;
		if (--wt->refs == 0)
			watch_free(wt);
	}
	for (struct zkl_revwatch *rv = c->revwatches, *next; rv; rv = next) {
		next = rv->next;
		if (rv->registered && rv->s == s) {
			rv->registered = false;
			revwatch_put(c, rv);
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

/* ------------------------------------------------------------------------------------ */
/* Requests */

/* Whether the client holds nothing and waits for nothing (mu held): then any answer
 * proves its session (op_proves()), and its heartbeat need not be a write. */
static bool client_idle(const zkl_client *c)
{
	return !c->holds && !c->waiters;
}

static struct zkl_op *op_begin(zkl_client *c, struct zkl_waiter *w, enum zkl_op_kind kind,
                               int *err)
{
	struct zkl_op *op = calloc(1, sizeof *op);
	if (!op) {
		*err = zkl_fail(ZKL_ENOMEM, "out of memory");
		return NULL;
	}
	op->kind = kind;
	op->refs = 2;
	op->w = w;
	op->sent_at = zkl_now_ms();
	pthread_mutex_lock(&c->mu);
	if (c->closing) {
		pthread_mutex_unlock(&c->mu);
		free(op);
		*err = zkl_fail(ZKL_ECLOSED, "the client is closing");
		return NULL;
	}
	op->s = c->sess;
	op->s->inflight++;
	op->s->ops++;
	op->idle = client_idle(c);
	pthread_mutex_unlock(&c->mu);
	return op;
}

/* Whether op's answer proves the session alive when op was sent (zkl_lost_at).
 *
 * Once the client holds or waits for a lock, only a write that succeeded does: a quorum
 * committed it, so the leader that saw it was the ensemble's. A leader cut off from the
 * others goes on answering syncs and reads, and its clients' pings, until syncLimit
 * passes; the others may elect a new leader meanwhile (they too wait syncLimit for the
 * old one), which gives the session a fresh timeout from its own start and then expires
 * it. A holder that took the old leader's answers for proof would hold on past that
 * expiry. While the client holds and waits for nothing, any answer will do: no hold's
 * deadline rests on it, and the first write of an acquisition proves the session
 * again. */
static bool op_proves(const struct zkl_op *op, int rc)
{
	if (op->idle)
		return zkl_zk_answered(rc);
	if (rc != ZOK)
		return false;
	return op->kind == ZKL_OP_CREATE || op->kind == ZKL_OP_DELETE || op->kind == ZKL_OP_SET ||
	       op->kind == ZKL_OP_CHECK;
}

/* Frees op (mu held), and its session if that is closed and op was its last request. */
static void op_free(struct zkl_op *op)
{
	struct zkl_session *s = op->s;
	if (--s->ops == 0 && s->gone)
		free(s);
	free(op->value);
	if (op->names) {
		for (int i = 0; i < op->count; i++)
			free(op->names[i]);
		free(op->names);
	}
	free(op->cleanup_parent);
	free(op);
}

/* Runs on the completion thread (or on the caller's, when a request was refused before
 * it was sent): records, signals, and drops the completion's reference. */
static void op_finish_locked(zkl_client *c, struct zkl_op *op, int rc)
{
	struct zkl_session *s = op->s;
	/* A retired session's handle closed with this request still out (retired_reap()):
	 * the session is gone for it, not the client, which goes on with a new one. */
	if (zkl_zk_class(rc) == ZKL_ZK_CLOSING && s != c->sess && !c->closing)
		rc = ZSESSIONEXPIRED;
	op->rc = rc;
	op->done = true;
	/* The handle has seen its session expire (ZINVALIDSTATE is the C client refusing
	 * every request after that): nothing sent on it can succeed. Its expiry event may
	 * still be on its way to the loop; until it comes, nobody may take the session for
	 * connected, or a machine that waits for the connection would send again at once,
	 * be refused at once, and never let the loop get to that event. */
	if (s == c->sess && zkl_zk_class(rc) == ZKL_ZK_EXPIRED)
		s->connected = false;
	if (op->kind == ZKL_OP_CHECK && rc != ZOK && zkl_zk_answered(rc) && !s->check_refused) {
		s->check_refused = true;
		zkl_log(c, ZKL_LOG_ERROR, "the heartbeat, a check of the version of /, was refused: "
		        "%s; without it nothing proves the session while locks are held or "
		        "awaited (the client needs read access to /)", zerror(rc));
	}
	const bool proof = op_proves(op, rc);
	if (s == c->sess && proof && op->sent_at > s->last_ok_sent)
		s->last_ok_sent = op->sent_at;
	if (s == c->sess && s->given_up && proof && op->sent_at > s->given_up_at) {
		/* An adopted session given up for lost is alive after all: it counts again. */
		s->given_up = false;
		session_event_locked(c, s, ZOO_CONNECTED_STATE, c->zk->session_id(s->zh),
		                     c->zk->timeout(s->zh), malloc(sizeof(struct zkl_event)));
	}
	/* The C client registers a watch only when the request succeeded. */
	if (op->watch && rc != ZOK)
		watch_unregister_locked(op->watch);
	op->watch = NULL;
	if (op->w)
		zkl_waiter_wake(c, op->w);
	if (op->kind == ZKL_OP_CREATE && op->cleanup_parent && !op->w) {
		/* The waiter gave up while the create was out. If it was applied, or may
		 * have been, the node must go. */
		if (rc == ZOK && op->value)
			zkl_task_delete(c, op->value, s->gen);
		else if (zkl_zk_transient(rc))
			zkl_task_find_delete(c, op->cleanup_parent, op->uuid, s->gen);
	}
	if (--s->inflight == 0)
		loop_wake(c);
	if (--op->refs == 0)
		op_free(op);
}

static void op_refused(zkl_client *c, struct zkl_op *op, int rc)
{
	pthread_mutex_lock(&c->mu);
	op_finish_locked(c, op, rc);
	pthread_mutex_unlock(&c->mu);
}

/* A completion: what it carries is in op already, for the loop (completion thread). */
static void op_answered(struct zkl_op *op, int rc)
{
	op->zrc = rc;
	op->msg.kind = MSG_OP;
	inbox_post(op->s->c, &op->msg, atomic_load(&op->lazy));
}

static void string_stat_done(int rc, const char *value, const struct Stat *stat, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char *copy = (rc == ZOK && value) ? strdup(value) : NULL;
	if (rc == ZOK && stat)
		op->stat = *stat;
	op->value = copy;
	if (rc == ZOK && value && !copy)
		rc = ZSYSTEMERROR;
	op_answered(op, rc);
}

static void void_done(int rc, const void *data)
{
	op_answered((struct zkl_op *)data, rc);
}

static void strings_done(int rc, const struct String_vector *strings, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char **names = NULL;
	int count = 0;
	if (rc == ZOK && strings && strings->count > 0) {
		names = calloc((size_t)strings->count, sizeof *names);
		if (names) {
			for (count = 0; count < strings->count; count++) {
				names[count] = strdup(strings->data[count]);
				if (!names[count])
					break;
			}
		}
		if (!names || count < strings->count)
			rc = ZSYSTEMERROR;
	}
	op->names = names;
	op->count = count;
	op_answered(op, rc);
}

static void data_done(int rc, const char *value, int len, const struct Stat *stat,
                      const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	char *copy = NULL;
	if (rc == ZOK) {
		int n = len > 0 ? len : 0;
		copy = malloc((size_t)n + 1);
		if (copy) {
			if (n)
				memcpy(copy, value, (size_t)n);
			copy[n] = 0;
		} else {
			rc = ZSYSTEMERROR;
		}
		len = n;
	}
	if (rc == ZOK && stat)
		op->stat = *stat;
	op->value = copy;
	op->value_len = copy ? len : 0;
	op_answered(op, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
	struct zkl_op *op = (struct zkl_op *)data;
	if (rc == ZOK && stat)
		op->stat = *stat;
	op_answered(op, rc);
}

struct zkl_op *zkl_op_create_followed(zkl_client *c, struct zkl_waiter *w, const char *path,
                                      const void *data, int len, int mode, bool followed,
                                      int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CREATE, err);
	if (!op)
		return NULL;
	atomic_store(&op->lazy, followed);
	int rc = c->zk->create(op->s->zh, path, data, len, c->acl, mode, string_stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl_op_create(zkl_client *c, struct zkl_waiter *w, const char *path,
                             const void *data, int len, int mode, int *err)
{
	return zkl_op_create_followed(c, w, path, data, len, mode, false, err);
}

void zkl_op_hasten(zkl_client *c, struct zkl_op *op)
{
	atomic_store(&op->lazy, false);
	/* An answer queued lazily before this is in the inbox once we have passed its
	 * mutex, and the loop that called us looks there before it sleeps; one queued
	 * after reads the flag false (inbox_put) and wakes the loop. */
	pthread_mutex_lock(&c->inbox_mu);
	pthread_mutex_unlock(&c->inbox_mu);
}

struct zkl_op *zkl_op_delete(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	return zkl_op_delete_at(c, w, path, -1, err);
}

struct zkl_op *zkl_op_delete_at(zkl_client *c, struct zkl_waiter *w, const char *path,
                                int version, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_DELETE, err);
	if (!op)
		return NULL;
	int rc = c->zk->remove(op->s->zh, path, version, void_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl_op_children(zkl_client *c, struct zkl_waiter *w, const char *path,
                               struct zkl_watch *wt, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CHILDREN, err);
	if (!op)
		return NULL;
	if (wt)
		watch_register(c, op, wt, path);
	int rc = c->zk->children(op->s->zh, path, wt ? node_watcher : NULL, wt, strings_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

/* Drops the C client's reference to a watch it will not call again (mu held). Returns
 * true if the watch was freed. */
static bool watch_unregister_locked(struct zkl_watch *wt)
{
	if (!wt->registered)
		return false;
	struct zkl_session *s = wt->s;
	if (wt->prev)
		wt->prev->next = wt->next;
	else
		s->watches = wt->next;
	if (wt->next)
		wt->next->prev = wt->prev;
	wt->registered = false;
	wt->next = wt->prev = NULL;
	if (--wt->refs == 0) {
		watch_free(wt);
		return true;
	}
	return false;
}

/* Registers a watch for op before the request goes out: the watcher may run before the
 * completion does. */
static void watch_register(zkl_client *c, struct zkl_op *op, struct zkl_watch *wt,
                           const char *path)
{
	char *copy = c->adopted ? strdup(path) : NULL;
	pthread_mutex_lock(&c->mu);
	free(wt->path);
	wt->path = copy;
	wt->s = op->s;
	wt->refs++;
	wt->registered = true;
	wt->prev = NULL;
	wt->next = op->s->watches;
	if (op->s->watches)
		op->s->watches->prev = wt;
	op->s->watches = wt;
	op->watch = wt;
	pthread_mutex_unlock(&c->mu);
}

/* A node watch's event (mu held). The C client's reference keeps wt until then. */
static void node_watch_apply(zkl_client *c, struct zkl_watch *wt, int type)
{
	if (wt->w)
		zkl_waiter_wake(c, wt->w);
	/* Session events reach every registered watcher and leave it registered; only a
	 * node event ends the watch. */
	if (type != ZOO_SESSION_EVENT) {
		wt->fired = true;
		wt->event = type;
		watch_unregister_locked(wt);
	}
}

static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	struct zkl_watch *wt = ctx;
	struct watch_msg m = {.m.kind = MSG_WATCH, .obj = wt, .type = type};
	post_copy(wt->s->c, &m.m, sizeof m);
}

struct zkl_watch *zkl_watch_new(zkl_client *c, struct zkl_waiter *w)
{
	(void)c;
	struct zkl_watch *wt = calloc(1, sizeof *wt);
	if (!wt)
		return NULL;
	wt->refs = 1;
	wt->w = w;
	return wt;
}

void zkl_watch_put(zkl_client *c, struct zkl_watch *wt)
{
	(void)c;
	wt->w = NULL;
	if (--wt->refs == 0)
		watch_free(wt);
}

struct zkl_op *zkl_op_get(zkl_client *c, struct zkl_waiter *w, const char *path,
                          struct zkl_watch *wt, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_GET, err);
	if (!op)
		return NULL;
	if (wt)
		watch_register(c, op, wt, path);
	int rc = c->zk->get(op->s->zh, path, wt ? node_watcher : NULL, wt, data_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl_op_exists(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_EXISTS, err);
	if (!op)
		return NULL;
	int rc = c->zk->exists(op->s->zh, path, stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl_op_set(zkl_client *c, struct zkl_waiter *w, const char *path,
                          const void *data, int len, int version, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_SET, err);
	if (!op)
		return NULL;
	int rc = c->zk->set(op->s->zh, path, data, len, version, stat_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

static void string_done(int rc, const char *value, const void *data)
{
	(void)value;
	void_done(rc, data);
}

struct zkl_op *zkl_op_sync(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_SYNC, err);
	if (!op)
		return NULL;
	int rc = c->zk->sync(op->s->zh, path, string_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

struct zkl_op *zkl_op_check(zkl_client *c, struct zkl_waiter *w, const char *path, int *err)
{
	struct zkl_op *op = op_begin(c, w, ZKL_OP_CHECK, err);
	if (!op)
		return NULL;
	int rc = c->zk->check(op->s->zh, path, void_done, op);
	if (rc != ZOK)
		op_refused(c, op, rc);
	return op;
}

void zkl_op_put(zkl_client *c, struct zkl_op *op)
{
	(void)c;
	if (!op)
		return;
	op->w = NULL;
	if (--op->refs == 0)
		op_free(op);
}

struct zkl_op *zkl_op_send(zkl_client *c, struct zkl_waiter *w, const struct zkl_req *r,
                           int *err)
{
	switch (r->kind) {
	case ZKL_OP_CREATE:
		return zkl_op_create(c, w, r->path, r->data, r->len, r->mode, err);
	case ZKL_OP_DELETE:
		return zkl_op_delete_at(c, w, r->path, r->check_version ? r->version : -1, err);
	case ZKL_OP_CHILDREN:
		return zkl_op_children(c, w, r->path, NULL, err);
	case ZKL_OP_GET:
		return zkl_op_get(c, w, r->path, NULL, err);
	case ZKL_OP_EXISTS:
		return zkl_op_exists(c, w, r->path, err);
	case ZKL_OP_SET:
		return zkl_op_set(c, w, r->path, r->data, r->len, r->version, err);
	case ZKL_OP_SYNC:
		return zkl_op_sync(c, w, r->path, err);
	case ZKL_OP_CHECK:
		return zkl_op_check(c, w, r->path, err);
	}
	*err = zkl_fail(ZKL_EINVAL, "unknown request");
	return NULL;
}

void zkl_op_release(zkl_client *c, struct zkl_op *op)
{
	pthread_mutex_lock(&c->mu);
	zkl_op_put(c, op);
	pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------------------ */
/* Background tasks */

/* The pending deletes of one folder. */
struct zkl_task_folder {
	struct zkl_task_folder *next;      /* in its bucket */
	uint64_t hash;
	size_t len;
	struct zkl_task *tasks;
	char path[];                       /* the folder, len bytes, NUL-terminated */
};

static uint64_t folder_hash(const char *path, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)path[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static struct zkl_task_folder **folder_slot(zkl_client *c, const char *path, size_t len,
                                            uint64_t h)
{
	struct zkl_task_folder **fp = &c->task_folders[h & (c->task_nbuckets - 1)];
	while (*fp && ((*fp)->hash != h || (*fp)->len != len || memcmp((*fp)->path, path, len)))
		fp = &(*fp)->next;
	return fp;
}

static struct zkl_task_folder *folder_find(zkl_client *c, const char *path, size_t len)
{
	if (c->task_nfolders == 0)
		return NULL;
	return *folder_slot(c, path, len, folder_hash(path, len));
}

/* Doubles the buckets once there are more folders than buckets (a table that cannot
 * grow for want of memory only gets slower). */
static void folders_grow(zkl_client *c)
{
	if (c->task_nfolders < c->task_nbuckets)
		return;
	size_t n = c->task_nbuckets ? c->task_nbuckets * 2 : 64;
	struct zkl_task_folder **b = calloc(n, sizeof *b);
	if (!b)
		return;
	for (size_t i = 0; i < c->task_nbuckets; i++) {
		for (struct zkl_task_folder *f = c->task_folders[i], *next; f; f = next) {
			next = f->next;
			f->next = b[f->hash & (n - 1)];
			b[f->hash & (n - 1)] = f;
		}
	}
	free(c->task_folders);
	c->task_folders = b;
	c->task_nbuckets = n;
}

/* Puts a pending delete in its folder's index (mu held). Without memory it stays out of
 * it: a listing then counts that node of ours as a contender until its delete is
 * answered, which costs time, never exclusion. */
static void task_index(zkl_client *c, struct zkl_task *t)
{
	const char *slash = strrchr(t->path, '/');
	size_t len = slash ? (size_t)(slash - t->path) : 0;
	folders_grow(c);
	if (c->task_nbuckets == 0)
		return;
	uint64_t h = folder_hash(t->path, len);
	struct zkl_task_folder **fp = folder_slot(c, t->path, len, h);
	struct zkl_task_folder *f = *fp;
	if (!f) {
		f = malloc(sizeof *f + len + 1);
		if (!f)
			return;
		f->next = NULL;
		f->hash = h;
		f->len = len;
		f->tasks = NULL;
		memcpy(f->path, t->path, len);
		f->path[len] = 0;
		*fp = f;
		c->task_nfolders++;
	}
	t->folder = f;
	t->fprev = NULL;
	t->fnext = f->tasks;
	if (f->tasks)
		f->tasks->fprev = t;
	f->tasks = t;
}

static void task_unindex(zkl_client *c, struct zkl_task *t)
{
	struct zkl_task_folder *f = t->folder;
	if (!f)
		return;
	if (t->fprev)
		t->fprev->fnext = t->fnext;
	else
		f->tasks = t->fnext;
	if (t->fnext)
		t->fnext->fprev = t->fprev;
	t->folder = NULL;
	if (f->tasks)
		return;
	struct zkl_task_folder **fp = folder_slot(c, f->path, f->len, f->hash);
	*fp = f->next;
	c->task_nfolders--;
	free(f);
}

static void task_link(zkl_client *c, struct zkl_task *t, bool out)
{
	struct zkl_task **head = out ? &c->tasks_out : &c->tasks;
	t->out = out;
	t->prev = NULL;
	t->next = *head;
	if (*head)
		(*head)->prev = t;
	*head = t;
}

static void task_unlink(zkl_client *c, struct zkl_task *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else if (t->out)
		c->tasks_out = t->next;
	else
		c->tasks = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->next = t->prev = NULL;
}

/* Moves t to the list of tasks with a request out, or back (mu held). */
static void task_move(zkl_client *c, struct zkl_task *t, bool out)
{
	task_unlink(c, t);
	task_link(c, t, out);
}

static void task_free(struct zkl_task *t);

/* Ends a task (mu held). */
static void task_drop(zkl_client *c, struct zkl_task *t)
{
	task_unlink(c, t);
	task_unindex(c, t);
	c->ntasks--;
	task_free(t);
}

/* Adds a task (mu held); the event thread is woken to send it if `wake`. */
static void task_add(zkl_client *c, enum task_kind kind, const char *path, const char *uuid,
                     uint64_t gen, bool wake)
{
	struct zkl_task *t = calloc(1, sizeof *t);
	char *p = strdup(path);
	if (!t || !p) {
		/* Nothing more can be done without memory; the node goes with the session. */
		free(t);
		free(p);
		return;
	}
	t->kind = kind;
	t->path = p;
	if (uuid)
		memcpy(t->uuid, uuid, ZKL_UUID_LEN + 1);
	t->gen = gen;
	task_link(c, t, false);
	c->ntasks++;
	if (kind == TASK_DELETE)
		task_index(c, t);
	if (wake)
		loop_wake(c);
}

void zkl_task_delete(zkl_client *c, const char *path, uint64_t gen)
{
	task_add(c, TASK_DELETE, path, NULL, gen, true);
}

void zkl_task_find_delete(zkl_client *c, const char *parent, const char *uuid, uint64_t gen)
{
	task_add(c, TASK_FIND_DELETE, parent, uuid, gen, true);
}

static void task_void_done(int rc, const void *data);
static void task_strings_done(int rc, const struct String_vector *sv, const void *data);

/* Sends t's request now (mu held, released around the send). A request refused is
 * looked at again on the loop's next turn. */
static void task_send(zkl_client *c, struct zkl_task *t)
{
	t->s = c->sess;
	t->inflight = true;
	t->s->inflight++;
	task_move(c, t, true);
	zhandle_t *zh = t->s->zh;
	char *path = strdup(t->path);
	const enum task_kind kind = t->kind;
	pthread_mutex_unlock(&c->mu);
	int rc = ZSYSTEMERROR;
	if (path) {
		if (kind == TASK_DELETE)
			rc = c->zk->remove(zh, path, -1, task_void_done, t);
		else
			rc = c->zk->children(zh, path, NULL, NULL, task_strings_done, t);
	}
	free(path);
	pthread_mutex_lock(&c->mu);
	if (rc != ZOK) {
		/* Refused: no completion will come. */
		t->rc = rc;
		t->done = true;
		t->s->inflight--;
		task_move(c, t, false);
		loop_wake(c);
	}
}

/* Whether t can be sent at once: its session is the current one, and connected. */
static bool task_sendable(const zkl_client *c, const struct zkl_task *t)
{
	return t->gen == c->gen && c->sess->connected;
}

bool zkl_task_delete_now(zkl_client *c, const char *path, uint64_t gen)
{
	task_add(c, TASK_DELETE, path, NULL, gen, false);
	struct zkl_task *t = c->tasks;
	if (!t || strcmp(t->path, path) != 0 || t->inflight || !task_sendable(c, t)) {
		loop_wake(c); /* the loop sends it when it can */
		return false;
	}
	/* Sent from here, on any thread, at once: it travels ahead of whatever this thread
	 * sends next, and a release costs no thread switch (handing it to the loop made a
	 * lock-and-release cycle about 6% dearer). Its answer goes to the loop. */
	task_send(c, t);
	return true;
}

/* One release's delete fewer under way (zkl_task_delete_sent). */
static void unpin(zkl_client *c)
{
	if (atomic_fetch_sub(&c->pins, 1) == 1)
		pthread_cond_broadcast(&c->ev_cv); /* a close may wait for it */
}

bool zkl_task_delete_sent(zkl_client *c, char *path, uint64_t gen)
{
	/* Pinned from here until the loop takes the task over: meanwhile it closes no
	 * session's handle, so the one read below stays open. The pin is counted before
	 * the session is read, and the loop publishes a new session before it looks at the
	 * pins: one of the two sees the other. */
	atomic_fetch_add(&c->pins, 1);
	struct zkl_session *s = atomic_load(&c->sess_pub);
	struct zkl_task *t = NULL;
	if (!s || s->gen != gen || !s->connected || !(t = calloc(1, sizeof *t))) {
		unpin(c);
		return false;
	}
	t->kind = TASK_DELETE;
	t->path = path;
	t->gen = gen;
	t->s = s;
	t->inflight = true;
	t->msg.kind = MSG_TASK;
	t->rel.kind = MSG_RELEASE;
	/* Handed over before it is sent, so that the loop knows the task before its answer,
	 * and without a wake: it has nothing to do with it until the answer comes. */
	inbox_put(c, &t->rel, true);
	/* Sent from here, at once, for the reasons zkl_task_delete_now() gives. Once sent,
	 * t is the loop's. */
	int rc = c->zk->remove(s->zh, path, -1, task_void_done, t);
	if (rc != ZOK) {
		/* Refused: no completion will come; the loop sends it again when it can. */
		t->zrc = rc;
		inbox_put(c, &t->msg, false);
	}
	return true;
}

/* The loop takes over a release's delete sent by its releasing thread (mu held). */
static void task_take_over(zkl_client *c, struct zkl_task *t)
{
	t->s->inflight++; /* its answer, or its refusal, comes after this */
	task_link(c, t, true);
	c->ntasks++;
	task_index(c, t);
	unpin(c);
}

bool zkl_task_pending(zkl_client *c, const char *parent, size_t parent_len, const char *name)
{
	struct zkl_task_folder *f = folder_find(c, parent, parent_len);
	for (struct zkl_task *t = f ? f->tasks : NULL; t; t = t->fnext)
		if (strcmp(t->path + parent_len + 1, name) == 0)
			return true;
	return false;
}

size_t zkl_tasks_pending(zkl_client *c, const char *parent, size_t parent_len,
                         const char **names, size_t max)
{
	size_t n = 0;
	struct zkl_task_folder *f = folder_find(c, parent, parent_len);
	for (struct zkl_task *t = f ? f->tasks : NULL; t; t = t->fnext) {
		if (n < max)
			names[n] = t->path + parent_len + 1;
		n++;
	}
	return n;
}

static void task_free(struct zkl_task *t)
{
	free(t->path);
	free(t->found);
	free(t);
}

/* A task's request answered (mu held): a delete, or the search of a FIND_DELETE, whose
 * find is in t->found. */
static void task_answered(zkl_client *c, struct zkl_task *t, int rc)
{
	if (--t->s->inflight == 0)
		loop_wake(c);
	if (t->kind == TASK_DELETE && (rc == ZOK || rc == ZNONODE)) {
		/* Done: the usual end of a release. */
		task_drop(c, t);
		return;
	}
	t->rc = rc;
	t->done = true;
	task_move(c, t, false);
	loop_wake(c);
}

static void task_void_done(int rc, const void *data)
{
	struct zkl_task *t = (struct zkl_task *)data;
	t->zrc = rc;
	t->msg.kind = MSG_TASK;
	/* A delete done is the usual end of a release: nothing to do but forget the task,
	 * on the loop's next turn. */
	inbox_post(t->s->c, &t->msg, rc == ZOK || rc == ZNONODE);
}

static void task_strings_done(int rc, const struct String_vector *sv, const void *data)
{
	struct zkl_task *t = (struct zkl_task *)data;
	char *found = NULL;
	if (rc == ZOK && sv) {
		for (int i = 0; i < sv->count; i++) {
			if (zkl_name_has_uuid(sv->data[i], t->uuid)) {
				found = zkl_path_join(t->path, sv->data[i]);
				break;
			}
		}
	}
	t->found = found;
	t->zrc = rc;
	t->msg.kind = MSG_TASK;
	inbox_post(t->s->c, &t->msg, false);
}

/* One pass over the tasks (event thread, mu held). Returns the earliest time a task
 * wants another look, or INT64_MAX. */
static int64_t tasks_run(zkl_client *c)
{
	int64_t next_at = INT64_MAX;
	int64_t now = zkl_now_ms();
	/* Only this loop takes a task off this list (other threads add at its head, and a
	 * completion moves its task back to the head), so the next one stays while mu is
	 * released around a send. */
	struct zkl_task *t = c->tasks;
	while (t) {
		struct zkl_task *next = t->next;
		if (t->done) {
			t->inflight = t->done = false;
			int rc = t->rc;
			if (rc == ZOK && t->kind == TASK_FIND_DELETE) {
				if (t->found) {
					free(t->path);
					t->path = t->found;
					t->found = NULL;
					t->kind = TASK_DELETE;
					task_index(c, t);
					continue; /* delete it on this pass */
				}
				rc = ZNONODE; /* the create never happened */
			}
			if (rc == ZOK || rc == ZNONODE) {
				zkl_log(c, ZKL_LOG_DEBUG, "background delete of %s done", t->path);
				task_drop(c, t);
				t = next;
				continue;
			}
			const enum zkl_zk_class k = zkl_zk_class(rc);
			if (k != ZKL_ZK_UNKNOWN && k != ZKL_ZK_EXPIRED && k != ZKL_ZK_CLOSING) {
				zkl_log(c, ZKL_LOG_ERROR, "cannot delete %s: %s; it stays until its "
				        "session ends", t->path, zerror(rc));
				task_drop(c, t);
				t = next;
				continue;
			}
			t->not_before = now + 100;
		}
		if (t->gen != c->gen) {
			/* Its session is gone, and the ephemeral node with it. */
			task_drop(c, t);
			t = next;
			continue;
		}
		if (!c->sess->connected || t->not_before > now) {
			if (c->sess->connected && t->not_before < next_at)
				next_at = t->not_before;
			t = next;
			continue;
		}
		task_send(c, t);
		t = next;
	}
	return next_at;
}

/* ------------------------------------------------------------------------------------ */
/* Revocation watches */

static void revwatch_put(zkl_client *c, struct zkl_revwatch *rv)
{
	if (--rv->refs > 0)
		return;
	if (rv->prev)
		rv->prev->next = rv->next;
	else
		c->revwatches = rv->next;
	if (rv->next)
		rv->next->prev = rv->prev;
	free(rv->path);
	free(rv);
}

struct zkl_revwatch *zkl_revwatch_add(zkl_client *c, const char *path, uint64_t gen,
                                      void (*fn)(void *ctx, const char *path), void *ctx)
{
	struct zkl_revwatch *rv = calloc(1, sizeof *rv);
	if (!rv || !(rv->path = strdup(path))) {
		free(rv);
		return NULL;
	}
	rv->refs = 1;
	rv->gen = gen;
	rv->active = true;
	rv->want_read = true;
	rv->fn = fn;
	rv->ctx = ctx;
	rv->next = c->revwatches;
	if (c->revwatches)
		c->revwatches->prev = rv;
	c->revwatches = rv;
	loop_wake(c);
	return rv;
}

struct zkl_revwatch *zkl_countwatch_add(zkl_client *c, const char *path, int32_t *value,
                                        unsigned *epoch)
{
	struct zkl_revwatch *rv = zkl_revwatch_add(c, path, c->gen, NULL, NULL);
	if (rv) {
		rv->value = value;
		rv->epoch = epoch;
	}
	return rv;
}

void zkl_revwatch_remove(zkl_client *c, struct zkl_revwatch *rv)
{
	if (!rv)
		return;
	rv->active = false;
	while (rv->dispatching && !zkl_on_event_thread(c))
		pthread_cond_wait(&c->cv, &c->mu);
	revwatch_put(c, rv);
}

/* A revocation watch's event (mu held). */
static void revwatch_event_apply(zkl_client *c, struct zkl_revwatch *rv, int type)
{
	rv->registered = false;
	if (type == ZOO_CHANGED_EVENT)
		rv->want_read = true;
	loop_wake(c);
	revwatch_put(c, rv);
}

static void revwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	struct zkl_revwatch *rv = ctx;
	if (type == ZOO_SESSION_EVENT)
		return;
	struct watch_msg m = {.m.kind = MSG_REVWATCH, .obj = rv, .type = type};
	post_copy(rv->s->c, &m.m, sizeof m);
}

static void revread_apply(zkl_client *c, const struct revread_msg *m);

static void revwatch_read_done(int rc, const char *value, int len, const struct Stat *stat,
                               const void *data)
{
	(void)stat;
	struct zkl_revwatch *rv = (struct zkl_revwatch *)data;
	zkl_client *c = rv->s->c;
	struct revread_msg one = {.m.kind = MSG_REVREAD, .rv = rv, .rc = rc};
	one.revoke = rc == ZOK && len == (int)strlen(ZKL_REVOKE_DATA) &&
	             memcmp(value, ZKL_REVOKE_DATA, (size_t)len) == 0;
	if (rc == ZOK && len == 4) {
		const unsigned char *b = (const unsigned char *)value;
		one.has_value = true;
		one.value = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		                      (uint32_t)b[2] << 8 | (uint32_t)b[3]);
	}
	post_copy(c, &one.m, sizeof one);
}

/* A revocation watch's read answered (mu held). */
static void revread_apply(zkl_client *c, const struct revread_msg *m)
{
	struct zkl_revwatch *rv = m->rv;
	int rc = m->rc;
	rv->inflight = false;
	if (rc != ZOK && rv->registered) {
		/* No watch was left with the C client. */
		rv->registered = false;
		rv->refs--;
	}
	if (zkl_zk_transient(rc))
		rv->want_read = true;
	if (m->revoke && rv->fn)
		rv->requests++;
	if (rv->value && rv->active && m->has_value) {
		*rv->value = m->value;
		++*rv->epoch;
		wake_all(c);
	}
	if (--rv->s->inflight == 0)
		loop_wake(c);
	loop_wake(c);
	revwatch_put(c, rv);
}

/* Arms watches and dispatches requests (event thread, mu held). */
static void revwatches_run(zkl_client *c)
{
	for (struct zkl_revwatch *rv = c->revwatches; rv;) {
		if (rv->active && rv->requests > 0 && !rv->dispatching) {
			rv->requests = 0;
			rv->dispatching = true;
			rv->refs++;
			pthread_mutex_unlock(&c->mu);
			rv->fn(rv->ctx, rv->path);
			pthread_mutex_lock(&c->mu);
			rv->dispatching = false;
			pthread_cond_broadcast(&c->cv);
			revwatch_put(c, rv);
			rv = c->revwatches; /* the list may have changed */
			continue;
		}
		if (rv->value && rv->active && rv->gen != c->gen) {
			/* A shared count is watched on whatever session the client has. */
			rv->gen = c->gen;
			rv->want_read = true;
		}
		if (rv->active && rv->want_read && !rv->inflight && !rv->registered &&
		    rv->gen == c->gen && c->sess->connected) {
			rv->want_read = false;
			rv->inflight = true;
			rv->registered = true; /* assumed until the answer says otherwise */
			rv->refs += 2;
			rv->s = c->sess;
			rv->s->inflight++;
			zhandle_t *zh = rv->s->zh;
			char *path = strdup(rv->path);
			pthread_mutex_unlock(&c->mu);
			int rc = path ? c->zk->get(zh, path, revwatch_watcher, rv, revwatch_read_done, rv)
			              : ZSYSTEMERROR;
			free(path);
			if (rc != ZOK)
				revwatch_read_done(rc, NULL, 0, NULL, rv);
			pthread_mutex_lock(&c->mu);
			rv = c->revwatches;
			continue;
		}
		rv = rv->next;
	}
}

/* ------------------------------------------------------------------------------------ */
/* The inbox's messages applied */

/* Applies m (mu held). */
static void msg_run(zkl_client *c, struct zkl_msg *m)
{
	switch ((enum msg_kind)m->kind) {
	case MSG_OP: {
		struct zkl_op *op = (struct zkl_op *)((char *)m - offsetof(struct zkl_op, msg));
		op_finish_locked(c, op, op->zrc);
		break;
	}
	case MSG_TASK: {
		struct zkl_task *t = (struct zkl_task *)((char *)m - offsetof(struct zkl_task, msg));
		task_answered(c, t, t->zrc);
		break;
	}
	case MSG_WATCH:
		node_watch_apply(c, ((struct watch_msg *)m)->obj, ((struct watch_msg *)m)->type);
		break;
	case MSG_REVWATCH:
		revwatch_event_apply(c, ((struct watch_msg *)m)->obj, ((struct watch_msg *)m)->type);
		break;
	case MSG_REVREAD:
		revread_apply(c, (struct revread_msg *)m);
		break;
	case MSG_SESSION: {
		struct session_msg *e = (struct session_msg *)m;
		session_event_locked(c, e->s, e->state, e->id, e->timeout, e->e);
		break;
	}
	case MSG_CALL: {
		struct zkl_call *call = (struct zkl_call *)m;
		call->fn(c, call);
		break;
	}
	case MSG_HOLD_END:
		hold_unlink(c, (struct zkl_hold *)((char *)m - offsetof(struct zkl_hold, end)));
		break;
	case MSG_RELEASE:
		task_take_over(c, (struct zkl_task *)((char *)m - offsetof(struct zkl_task, rel)));
		break;
	}
}

/* Applies m (mu held), and frees it unless its op or task carries it. */
static void msg_apply(zkl_client *c, struct zkl_msg *m)
{
	bool carried = m->kind == MSG_OP || m->kind == MSG_TASK || m->kind == MSG_CALL ||
	               m->kind == MSG_HOLD_END || m->kind == MSG_RELEASE;
	msg_run(c, m);
	if (!carried)
		free(m);
}

/* ------------------------------------------------------------------------------------ */
/* Holds */

struct zkl_hold *zkl_hold_new(const char *path, uint64_t gen,
                              void (*on_lost)(struct zkl_hold *h, void *ctx), void *ctx)
{
	size_t len = path ? strlen(path) : 0;
	struct zkl_hold *h = calloc(1, sizeof *h + len + 1);
	if (!h)
		return NULL;
	h->gen = gen;
	atomic_init(&h->state, ZKL_HOLD_HELD);
	atomic_init(&h->lost, false);
	h->on_lost = on_lost;
	h->ctx = ctx;
	if (len)
		memcpy(h->path, path, len + 1);
	return h;
}

void zkl_hold_add_locked(zkl_client *c, struct zkl_hold *h)
{
	h->prev = NULL;
	h->next = c->holds;
	if (c->holds)
		c->holds->prev = h;
	c->holds = h;
	/* A hold of a session the loop has moved on from, or given up, is lost already:
	 * holds_notify() reports it on this turn. */
	if (h->gen != c->gen || (c->sess && c->sess->given_up)) {
		atomic_store(&h->lost, true);
		c->holds_lost = true;
		loop_wake(c);
	}
}

/* Hands the loop a hold's end (no lock held), or applies it here: with external_loop,
 * and on the loop's own thread (a callback). */
static void hold_post(zkl_client *c, struct zkl_msg *m)
{
	if (c->external || running_loop == c) {
		pthread_mutex_lock(&c->mu);
		msg_run(c, m);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	inbox_put(c, m, true);
}

/* Takes h off the client's list and frees it (mu held): an ended hold, or one whose
 * owner is the loop. One whose on_lost runs right now goes when it returns. */
static void hold_unlink(zkl_client *c, struct zkl_hold *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		c->holds = h->next;
	if (h->next)
		h->next->prev = h->prev;
	if (h->in_dispatch)
		h->unlinked = true;
	else
		free(h);
}

/* Moves h from held to ended, waiting out a dispatch of its on_lost on another thread;
 * returns whether it was lost. */
static bool hold_finish(zkl_client *c, struct zkl_hold *h)
{
	for (;;) {
		int st = ZKL_HOLD_HELD;
		if (atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_ENDED))
			break;
		if (st != ZKL_HOLD_DISPATCHING)
			break; /* ended already */
		if (zkl_on_event_thread(c)) {
			/* Only the loop dispatches: this is a release inside h's own on_lost. */
			atomic_store(&h->state, ZKL_HOLD_ENDED);
			break;
		}
		pthread_mutex_lock(&c->mu);
		while (atomic_load(&h->state) == ZKL_HOLD_DISPATCHING)
			pthread_cond_wait(&c->cv, &c->mu);
		pthread_mutex_unlock(&c->mu);
	}
	return atomic_load(&h->lost);
}

bool zkl_hold_end(zkl_client *c, struct zkl_hold *h)
{
	bool lost = hold_finish(c, h);
	/* No wake: an ended hold is nothing to the loop but memory. */
	h->end.kind = MSG_HOLD_END;
	hold_post(c, &h->end);
	return lost;
}

void zkl_hold_end_locked(zkl_client *c, struct zkl_hold *h)
{
	atomic_store(&h->state, ZKL_HOLD_ENDED);
	hold_unlink(c, h);
}

/* Marks every hold of a session other than the current one lost, and calls on_lost for
 * each once, with mu released (event thread). Every turn of the loop calls it: it looks
 * through the holds only when the session changed or a hold was marked lost since it
 * last found nothing to do, so that a client holding many locks does not pay for them
 * on every answer. */
static void holds_notify(zkl_client *c)
{
	if (c->holds_gen == c->gen && !c->holds_lost)
		return;
	for (;;) {
		struct zkl_hold *h;
		for (h = c->holds; h; h = h->next) {
			if (h->gen != c->gen)
				h->lost = true;
			if (h->lost && !h->notified)
				break;
		}
		if (!h) {
			/* One look through them all, mu held throughout, found nothing. */
			c->holds_gen = c->gen;
			c->holds_lost = false;
			return;
		}
		h->notified = true;
		int st = ZKL_HOLD_HELD;
		if (!atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_DISPATCHING))
			continue; /* ended by its owner: nobody to tell */
		h->in_dispatch = true;
		pthread_mutex_unlock(&c->mu);
		if (h->on_lost)
			h->on_lost(h, h->ctx);
		pthread_mutex_lock(&c->mu);
		h->in_dispatch = false;
		st = ZKL_HOLD_DISPATCHING;
		atomic_compare_exchange_strong(&h->state, &st, ZKL_HOLD_HELD);
		pthread_cond_broadcast(&c->cv);
		if (h->unlinked)
			free(h);
	}
}

/* ------------------------------------------------------------------------------------ */
/* The event thread */

static void set_state(zkl_client *c, zkl_state st)
{
	c->state = st;
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
static void session_replace(zkl_client *c)
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
		}
	}
	pthread_mutex_unlock(&c->mu);
	/* Opening a session only allocates and starts threads; retry if it could not. */
	for (int i = 0; i < 50 && !s && !c->adopted; i++) {
		s = session_new(c, old->gen + 1);
		if (!s)
			usleep(100000);
	}
	pthread_mutex_lock(&c->mu);
	if (!s) {
		zkl_log(c, ZKL_LOG_ERROR, "cannot open a new ZooKeeper session: %s", strerror(errno));
		return;
	}
	c->sess = s;
	c->gen = s->gen;
	if (!c->adopted && !c->external)
		atomic_store(&c->sess_pub, s);
	old->retired_at = zkl_now_ms();
	old->next = c->retired;
	c->retired = old;
	wake_all(c);
}

static void handle_event(zkl_client *c, struct zkl_event *e)
{
	if (e->gen != c->gen)
		return; /* from a retired session */
	struct zkl_session *s = c->sess;
	if (e->zk_state == ZOO_CONNECTED_STATE) {
		c->next_heartbeat = 0; /* prove the session at once */
		if (c->state == ZKL_STATE_CONNECTING)
			set_state(c, ZKL_STATE_CONNECTED);
		else if (c->state != ZKL_STATE_CONNECTED && c->state != ZKL_STATE_RECONNECTED)
			set_state(c, ZKL_STATE_RECONNECTED);
	} else if (e->zk_state == ZOO_EXPIRED_SESSION_STATE) {
		zkl_log(c, ZKL_LOG_WARN, "ZooKeeper session 0x%llx expired; %s",
		        (unsigned long long)s->id, c->adopted ? "waiting for the application's "
		        "next handle (zkl_client_handover)" : "opening a new one");
		session_replace(c);
		holds_notify(c);
		if (c->state != ZKL_STATE_LOST)
			set_state(c, ZKL_STATE_LOST);
	} else if (e->zk_state == ZOO_AUTH_FAILED_STATE) {
		c->auth_failed = true;
		zkl_log(c, ZKL_LOG_ERROR, "ZooKeeper refused the credentials");
		pthread_cond_broadcast(&c->cv);
	} else if (e->zk_state == ZOO_CONNECTING_STATE || e->zk_state == ZOO_ASSOCIATING_STATE ||
	           e->zk_state == ZOO_NOTCONNECTED_STATE || e->zk_state == 0) {
		if (c->state == ZKL_STATE_CONNECTED || c->state == ZKL_STATE_RECONNECTED)
			set_state(c, ZKL_STATE_SUSPENDED);
	}
}

static int session_timeout_ms(const zkl_client *c)
{
	return c->timeout_ms > 0 ? c->timeout_ms : c->session_timeout_req;
}

int64_t zkl_lost_at(zkl_client *c)
{
	const struct zkl_session *s = c->sess;
	if (s->last_ok_sent == 0)
		return INT64_MAX;
	return s->last_ok_sent + (int64_t)session_timeout_ms(c) * c->loss_percent / 100;
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
static int64_t liveness_run(zkl_client *c)
{
	int64_t now = zkl_now_ms();
	struct zkl_session *s = c->sess;
	int64_t next = INT64_MAX;
	if (s->connected) {
		if (now >= c->next_heartbeat) {
			c->next_heartbeat = now + session_timeout_ms(c) / 6;
			int err = 0;
			const bool idle = client_idle(c);
			pthread_mutex_unlock(&c->mu);
			struct zkl_op *op = idle ? zkl_op_sync(c, NULL, "/", &err)
			                         : zkl_op_check(c, NULL, "/", &err);
			pthread_mutex_lock(&c->mu);
			zkl_op_put(c, op);
			if (c->sess != s)
				return now; /* replaced meanwhile: look again */
		}
		next = c->next_heartbeat;
	}
	if (s->expired || s->given_up)
		return next;
	int64_t at = zkl_lost_at(c);
	if (now < at)
		return at < next ? at : next;
	if (c->adopted) {
		/* The application's session cannot be replaced here, and may live on: report
		 * every hold lost, and delete their nodes in the background (a node of this
		 * generation stays unless deleted). The session counts again once it answers. */
		zkl_log(c, ZKL_LOG_WARN, "ZooKeeper confirmed nothing sent in the last %lld ms "
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
					zkl_task_delete(c, h->path, h->gen);
			}
		}
		holds_notify(c);
		if (c->state != ZKL_STATE_LOST)
			set_state(c, ZKL_STATE_LOST);
		return next;
	}
	bool any = false;
	for (struct zkl_hold *h = c->holds; h; h = h->next)
		any |= h->gen == s->gen && !h->lost;
	zkl_log(c, ZKL_LOG_WARN, "ZooKeeper confirmed nothing sent in the last %lld ms "
	        "(more than %d%% of the session timeout; %s): %s; opening a new session",
	        (long long)(now - s->last_ok_sent), c->loss_percent,
	        s->connected ? "connected" : "disconnected",
	        any ? "locks held are lost" : "the session may expire");
	/* The holds turn lost in holds_notify(), which calls their owners at once: marking
	 * them here, before session_replace() lets go of mu, would let a release forget a
	 * hold that is lost but not yet reported. */
	const uint64_t gen = s->gen;
	session_replace(c);
	if (c->gen == gen) {
		/* No new session could be opened: the holds are lost all the same. */
		for (struct zkl_hold *h = c->holds; h; h = h->next)
			if (h->gen == gen)
				h->lost = true;
		c->holds_lost = true;
	}
	holds_notify(c);
	if (c->state != ZKL_STATE_LOST)
		set_state(c, ZKL_STATE_LOST);
	return zkl_now_ms();
}

/* Closes retired sessions whose requests have all completed, or that have waited long
 * enough (mu held, event thread). Returns when to look again. */
static int64_t retired_reap(zkl_client *c, bool all)
{
	int64_t next = INT64_MAX;
	struct zkl_session **pp = &c->retired;
	while (*pp) {
		struct zkl_session *s = *pp;
		/* An adopted handle stays open: its requests complete by themselves, and only
		 * then can it go without blocking the loop. */
		bool waited = !c->adopted && zkl_now_ms() - s->retired_at >= 5000;
		/* A release's delete may be on its way out on s (zkl_task_delete_sent): its
		 * task is the loop's on its next turn. */
		if (!all && atomic_load(&c->pins) > 0) {
			int64_t at = zkl_now_ms() + 10;
			if (at < next)
				next = at;
			pp = &s->next;
			continue;
		}
		if (all || s->inflight == 0 || waited) {
			*pp = s->next;
			pthread_mutex_unlock(&c->mu);
			session_free(c, s);
			pthread_mutex_lock(&c->mu);
			pp = &c->retired;
			continue;
		}
		int64_t at = c->adopted ? zkl_now_ms() + 1000 : s->retired_at + 5000;
		if (at < next)
			next = at;
		pp = &s->next;
	}
	return next;
}

/* Runs the loop waiters that were woken or whose time has come (event thread, mu
 * held). Returns when the next one wants to run. */
static int64_t loop_waiters_run(zkl_client *c)
{
	for (;;) {
		while (c->ready) {
			struct zkl_waiter *w = c->ready;
			c->ready = w->ready_next;
			if (!c->ready)
				c->ready_tail = NULL;
			w->queued = false;
			w->wake_at = INT64_MAX;
			w->run(c, w); /* may free w */
		}
		/* Timers: look through the waiters only when one of them is due (loop_next
		 * may be early, when its waiter has moved on; never late). */
		int64_t now = zkl_now_ms();
		if (now < c->loop_next)
			return c->loop_next;
		int64_t next = INT64_MAX;
		for (struct zkl_waiter *w = c->waiters; w; w = w->next) {
			if (w->queued || w->own_thread)
				continue;
			if (w->wake_at <= now)
				zkl_waiter_wake(c, w);
			else if (w->wake_at < next)
				next = w->wake_at;
		}
		c->loop_next = next;
		if (!c->ready)
			return next;
	}
}

/* One turn of the loop (mu held): session events, lost holds, revocation watches,
 * acquisitions, background deletes, liveness, old sessions; until nothing is ready.
 * Returns when it next has something to do. */
static int64_t loop_once(zkl_client *c)
{
	for (;;) {
		inbox_drain(c);
		while (c->events) {
			struct zkl_event *e = c->events;
			c->events = e->next;
			if (!c->events)
				c->events_tail = NULL;
			handle_event(c, e);
			free(e);
		}
		holds_notify(c);
		revwatches_run(c);
		int64_t next = loop_waiters_run(c);
		int64_t t = tasks_run(c);
		if (t < next)
			next = t;
		int64_t l = liveness_run(c);
		if (l < next)
			next = l;
		int64_t r = retired_reap(c, false);
		if (r < next)
			next = r;
		if (c->closing || (!c->events && !c->ready))
			return next;
	}
}

static void *event_main(void *arg)
{
	zkl_client *c = arg;
	running_loop = c;
	pthread_mutex_lock(&c->mu);
	while (!c->closing) {
		/* A wake-up while the turn runs (mu is released now and then) means another. */
		uint64_t k = kicks_now(c);
		int64_t next = loop_once(c);
		if (c->closing || c->events || c->ready) {
			unlock_and_tell(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		inbox_wait(c, k, next);
	}
	/* No call is taken from now on; those taken run, and the acquisitions still under
	 * way see the client closing and end. */
	pthread_mutex_lock(&c->inbox_mu);
	c->loop_ended = true;
	pthread_mutex_unlock(&c->inbox_mu);
	inbox_drain(c);
	loop_waiters_run(c);
	unlock_and_tell(c);
	return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Public API */

void zkl_client_options_init(zkl_client_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->servers = "127.0.0.1:2181";
	o->session_timeout_ms = 10000;
	o->connect_timeout_ms = 5000;
	o->log_level = ZKL_LOG_WARN;
	o->quiet_zk_log = true;
	o->confirm_release = false;
	o->loss_percent = 90;
}

/* *dst = a copy of src (NULL stays NULL); true when out of memory. */
static bool copy_opt(const char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst;
}

static const char secure_build_hint[] =
	"Debian's libzookeeper-mt has neither TLS nor SASL: build ZooKeeper's C client with "
	"scripts/build-secure-client and zklocks with -Dsecure_client=PREFIX (README, "
	"\"Secure connections\")";

/* A file option: set, readable, and (for the C client's certificate string) no comma. */
static int check_file_opt(const char *name, const char *path, bool comma_ok)
{
	if (!*path)
		return zkl_fail(ZKL_EINVAL, "%s is empty", name);
	if (!comma_ok && strchr(path, ','))
		return zkl_fail(ZKL_EINVAL, "%s \"%s\" contains a comma, which the C client's "
		                "certificate list cannot carry", name, path);
	if (access(path, R_OK) != 0)
		return zkl_fail(ZKL_EINVAL, "%s \"%s\": %s", name, path, strerror(errno));
	return 0;
}

/* The tls_* and sasl_* options: what this build can do, and whether they fit together. */
static int check_secure_options(const zkl_client_options *o, bool tls, bool sasl)
{
	unsigned have = zkl_zk_features();
	if (tls && !(have & ZKL_FEATURE_TLS))
		return zkl_fail(ZKL_ENOTSUP, "TLS was asked for (tls_ca), but this zklocks was "
		                "built against a ZooKeeper C client without TLS (no "
		                "zookeeper_init_ssl). %s", secure_build_hint);
	if (sasl && !(have & ZKL_FEATURE_SASL))
		return zkl_fail(ZKL_ENOTSUP, "SASL was asked for (sasl_mechanism), but this "
		                "zklocks was built against a ZooKeeper C client without SASL (no "
		                "zookeeper_init_sasl). %s", secure_build_hint);
	if (tls && sasl)
		return zkl_fail(ZKL_EINVAL, "TLS and SASL together: the ZooKeeper C client opens "
		                "a session with one or the other (digest_auth goes with either)");
	if (tls) {
		if (!o->tls_ca)
			return zkl_fail(ZKL_EINVAL, "tls_cert, tls_key or tls_key_password without "
			                "tls_ca (the CA file that signs the servers' certificates)");
		if (!o->tls_cert != !o->tls_key)
			return zkl_fail(ZKL_EINVAL, "tls_cert and tls_key go together (%s given alone)",
			                o->tls_cert ? "tls_cert" : "tls_key");
		if (o->tls_key_password && !o->tls_key)
			return zkl_fail(ZKL_EINVAL, "tls_key_password without tls_key");
		int rc = check_file_opt("tls_ca", o->tls_ca, false);
		if (rc == 0 && o->tls_cert)
			rc = check_file_opt("tls_cert", o->tls_cert, false);
		if (rc == 0 && o->tls_key)
			rc = check_file_opt("tls_key", o->tls_key, false);
		if (rc != 0)
			return rc;
		if (o->tls_key_password && strchr(o->tls_key_password, ','))
			return zkl_fail(ZKL_EINVAL, "tls_key_password contains a comma, which the C "
			                "client's certificate list cannot carry");
	}
	if (sasl) {
		if (!o->sasl_mechanism || !*o->sasl_mechanism)
			return zkl_fail(ZKL_EINVAL, "sasl_* options without sasl_mechanism "
			                "(\"DIGEST-MD5\", \"GSSAPI\")");
		if (strcasecmp(o->sasl_mechanism, "DIGEST-MD5") == 0) {
			if (!o->sasl_user || !*o->sasl_user)
				return zkl_fail(ZKL_EINVAL, "SASL DIGEST-MD5 needs sasl_user");
			if (!o->sasl_password && !o->sasl_password_file && !o->sasl_password_fn)
				return zkl_fail(ZKL_EINVAL, "SASL DIGEST-MD5 needs a password: "
				                "sasl_password, sasl_password_file or sasl_password_fn");
		}
		if (o->sasl_password_file && !o->sasl_password) {
			int rc = check_file_opt("sasl_password_file", o->sasl_password_file, true);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

unsigned zkl_features(void)
{
	return zkl_zk_features();
}

static void client_free(zkl_client *c)
{
	while (c->events) {
		struct zkl_event *e = c->events;
		c->events = e->next;
		free(e);
	}
	while (c->holds)
		hold_unlink(c, c->holds); /* of handles not freed first, against the contract */
	while (c->tasks)
		task_drop(c, c->tasks);
	while (c->tasks_out)
		task_drop(c, c->tasks_out);
	free(c->task_folders);
	free(c->listeners);
	free(c->servers);
	zkl_zk_creds_release(&c->creds);
	free((char *)c->creds.digest);
	free((char *)c->creds.tls);
	free((char *)c->creds.sasl_mechanism);
	free((char *)c->creds.sasl_user);
	free((char *)c->creds.sasl_service);
	free((char *)c->creds.sasl_host);
	if (c->creds.sasl_password) {
		explicit_bzero((char *)c->creds.sasl_password, strlen(c->creds.sasl_password));
		free((char *)c->creds.sasl_password);
	}
	free((char *)c->creds.sasl_password_file);
	pthread_cond_destroy(&c->ev_cv);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->inbox_cv);
	pthread_mutex_destroy(&c->inbox_mu);
	if (c->efd >= 0)
		close(c->efd);
	free(c);
}

int zkl_client_open(zkl_client **out, const zkl_client_options *o)
{
	return zkl_client_open_on(out, o, &zkl_zk_client, NULL);
}

static int client_open(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self, zhandle_t *adopt);

int zkl_client_open_on(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self)
{
	return client_open(out, o, zk, zk_self, NULL);
}

int zkl_client_adopt(zkl_client **out, zhandle_t *zh, const zkl_client_options *o)
{
	zkl_clear_error();
	if (out)
		*out = NULL;
	if (!zh)
		return zkl_fail(ZKL_EINVAL, "the ZooKeeper handle is NULL");
	return client_open(out, o, &zkl_zk_client, NULL, zh);
}

int zkl_client_handover(zkl_client *c, zhandle_t *zh)
{
	zkl_clear_error();
	if (!c || !zh)
		return zkl_fail(ZKL_EINVAL, "%s is NULL", c ? "the ZooKeeper handle" : "client");
	if (!c->adopted)
		return zkl_fail(ZKL_EINVAL, "the client has sessions of its own (it was not made "
		                "with zkl_client_adopt())");
	pthread_mutex_lock(&c->mu);
	struct zkl_session *s = c->sess;
	zhandle_t *old = s->zh;
	int rc = 0;
	if (c->closing)
		rc = zkl_fail(ZKL_ECLOSED, "the client is closing");
	else if (old == zh)
		rc = zkl_fail(ZKL_EINVAL, "that handle is the client's already");
	else if (!s->expired)
		rc = zkl_fail(ZKL_EBUSY, "the current session has not expired: hand the next "
		              "handle over once it has (the state listener hears \"lost\")");
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		return rc;
	release_handle(c, old);
	pthread_mutex_lock(&c->mu);
	s->zh = zh;
	s->expired = false;
	s->connected = false;
	s->ever_connected = false;
	s->id = 0;
	s->last_ok_sent = 0;
	pthread_mutex_unlock(&c->mu);
	rc = adopt_handle(c, zh);
	if (rc != 0)
		return rc;
	/* Connected before our watcher was in front: say so ourselves. */
	if (c->zk->connected(zh)) {
		pthread_mutex_lock(&c->mu);
		if (c->sess == s && !s->connected)
			session_event_locked(c, s, ZOO_CONNECTED_STATE, c->zk->session_id(zh),
			                     c->zk->timeout(zh), malloc(sizeof(struct zkl_event)));
		pthread_mutex_unlock(&c->mu);
	}
	return 0;
}

static int client_open(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self, zhandle_t *adopt)
{
	zkl_clear_error();
	zkl_client_options defaults;
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!o) {
		zkl_client_options_init(&defaults);
		o = &defaults;
	}
	/* An adopted handle has its servers, timeout and credentials already. */
	const char *servers = adopt ? "the application's handle" : o->servers;
	if (adopt)
		goto servers_checked;
	if (!o->servers || !*o->servers)
		return zkl_fail(ZKL_EINVAL, "servers is empty (expected \"host:port[,...][/chroot]\")");
	if (strspn(o->servers, " \t") == strlen(o->servers) || strchr(o->servers, ' '))
		return zkl_fail(ZKL_EINVAL, "servers \"%s\" contains spaces", o->servers);
	const char *chroot = strchr(o->servers, '/');
	if (chroot && zkl_path_check(chroot, "chroot") != 0 && strcmp(chroot, "/") != 0)
		return ZKL_EINVAL;
	if (o->session_timeout_ms <= 0)
		return zkl_fail(ZKL_EINVAL, "session timeout %d ms is not positive",
		                o->session_timeout_ms);
servers_checked:
	if (o->connect_timeout_ms < 0)
		return zkl_fail(ZKL_EINVAL, "connect timeout %d ms is negative", o->connect_timeout_ms);
	if (o->loss_percent < 50 || o->loss_percent > 100)
		return zkl_fail(ZKL_EINVAL, "loss_percent %d is out of range (50..100 %% of the "
		                "session timeout)", o->loss_percent);
	if (o->digest_auth && !strchr(o->digest_auth, ':'))
		return zkl_fail(ZKL_EINVAL, "digest credentials must look like \"user:password\"");
	if (o->acl != ZKL_ACL_OPEN && o->acl != ZKL_ACL_CREATOR_ALL &&
	    o->acl != ZKL_ACL_CREATOR_ALL_READ)
		return zkl_fail(ZKL_EINVAL, "acl %d is not a zkl_acl value", (int)o->acl);
	if (zkl_folders_check(o) != 0)
		return ZKL_EINVAL;
	bool tls = o->tls_ca || o->tls_cert || o->tls_key || o->tls_key_password;
	bool sasl = o->sasl_mechanism || o->sasl_user || o->sasl_password ||
	            o->sasl_password_file || o->sasl_password_fn || o->sasl_service || o->sasl_host;
	if (adopt && (tls || sasl))
		return zkl_fail(ZKL_EINVAL, "an adopted handle has its transport and credentials "
		                "already: the tls_* and sasl_* options do not apply to it");
	int rc = check_secure_options(o, tls, sasl);
	if (rc != 0)
		return rc;
	if (o->acl != ZKL_ACL_OPEN && !o->digest_auth && !o->sasl_mechanism && !o->tls_cert &&
	    !adopt)
		return zkl_fail(ZKL_EAUTH, "a creator-only ACL needs an identity: digest "
		                "credentials (digest_auth \"user:password\"), SASL "
		                "(sasl_mechanism) or a TLS client certificate (tls_cert)");

	zkl_client *c = calloc(1, sizeof *c);
	if (!c)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	c->zk = zk;
	c->zk_self = zk_self;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->inbox_mu, NULL);
	zkl_cond_init(&c->inbox_cv);
	zkl_cond_init(&c->cv);
	zkl_cond_init(&c->ev_cv);
	c->efd = -1;
	c->external = o->external_loop;
	c->loop_due = INT64_MAX;
	if (c->external && (c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		int e = errno;
		client_free(c);
		return zkl_fail(ZKL_ENOMEM, "cannot make the loop's descriptor: %s", strerror(e));
	}
	c->servers = strdup(servers);
	bool nomem = false;
	if (!adopt) {
		nomem |= copy_opt(&c->creds.digest, o->digest_auth);
		nomem |= copy_opt(&c->creds.sasl_mechanism, o->sasl_mechanism);
		nomem |= copy_opt(&c->creds.sasl_user, o->sasl_user);
		nomem |= copy_opt(&c->creds.sasl_password, o->sasl_password);
		nomem |= copy_opt(&c->creds.sasl_password_file, o->sasl_password_file);
		if (o->sasl_mechanism) {
			nomem |= copy_opt(&c->creds.sasl_service,
			                  o->sasl_service ? o->sasl_service : "zookeeper");
			nomem |= copy_opt(&c->creds.sasl_host,
			                  o->sasl_host ? o->sasl_host : "zk-sasl-md5");
		}
		c->creds.sasl_password_fn = o->sasl_password_fn;
		c->creds.sasl_password_data = o->sasl_password_data;
		if (o->tls_ca) {
			/* The C client's certificate string: "ca[,cert,key[,password]]". */
			char *t = NULL;
			if (asprintf(&t, "%s%s%s%s%s%s%s", o->tls_ca, o->tls_cert ? "," : "",
			             o->tls_cert ? o->tls_cert : "", o->tls_key ? "," : "",
			             o->tls_key ? o->tls_key : "", o->tls_key_password ? "," : "",
			             o->tls_key_password ? o->tls_key_password : "") < 0)
				t = NULL;
			c->creds.tls = t;
			nomem |= !t;
		}
	}
	c->session_timeout_req = o->session_timeout_ms;
	c->connect_timeout = o->connect_timeout_ms;
	c->log = o->log;
	c->log_data = o->log_data;
	c->log_level = o->log_level ? o->log_level : ZKL_LOG_WARN;
	c->quiet_zk_log = o->quiet_zk_log;
	c->confirm_release = o->confirm_release;
	c->loss_percent = o->loss_percent;
	c->lock_folders = o->lock_folders;
	c->state = ZKL_STATE_CONNECTING;
	if (o->acl == ZKL_ACL_OPEN) {
		c->acl = &ZOO_OPEN_ACL_UNSAFE;
	} else if (o->acl == ZKL_ACL_CREATOR_ALL) {
		c->acl = &ZOO_CREATOR_ALL_ACL;
	} else {
		c->acl_entries[0].perms = ZOO_PERM_ALL;
		c->acl_entries[0].id = ZOO_AUTH_IDS;
		c->acl_entries[1].perms = ZOO_PERM_READ;
		c->acl_entries[1].id = ZOO_ANYONE_ID_UNSAFE;
		c->acl_custom.count = 2;
		c->acl_custom.data = c->acl_entries;
		c->acl = &c->acl_custom;
	}
	if (!c->servers || nomem) {
		client_free(c);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	if (adopt) {
		c->adopted = true;
		c->sess = calloc(1, sizeof *c->sess);
		if (!c->sess) {
			client_free(c);
			return zkl_fail(ZKL_ENOMEM, "out of memory");
		}
		c->sess->c = c;
		c->sess->gen = 1;
		c->sess->zh = adopt;
		if (adopt_handle(c, adopt) != 0) {
			free(c->sess);
			client_free(c);
			return ZKL_ENOMEM;
		}
		/* Connected before our watcher was in front: say so ourselves. */
		if (c->zk->connected(adopt)) {
			pthread_mutex_lock(&c->mu);
			if (!c->sess->connected)
				session_event_locked(c, c->sess, ZOO_CONNECTED_STATE,
				                     c->zk->session_id(adopt), c->zk->timeout(adopt),
				                     malloc(sizeof(struct zkl_event)));
			pthread_mutex_unlock(&c->mu);
		}
	} else {
		c->sess = session_new(c, 1);
	}
	if (!c->sess) {
		int e = errno;
		client_free(c);
		if (e == EINVAL)
			return zkl_fail(ZKL_EINVAL, "servers \"%s\" cannot be parsed (expected "
			                "\"host:port[,...][/chroot]\")", o->servers);
		if (e == ENOTSUP)
			return zkl_fail(ZKL_ENOTSUP, "the ZooKeeper C client cannot open a %s "
			                "session", tls ? "TLS" : "SASL");
		return zkl_fail(ZKL_ECONNECT, "cannot start a ZooKeeper client for %s: %s",
		                o->servers, strerror(e));
	}
	c->gen = 1;
	if (!c->adopted && !c->external)
		atomic_store(&c->sess_pub, c->sess);
	if (!c->external && pthread_create(&c->ev_thread, NULL, event_main, c) != 0) {
		session_free(c, c->sess);
		client_free(c);
		return zkl_fail(ZKL_ENOMEM, "cannot start the event thread");
	}
	c->ev_running = !c->external;

	int64_t deadline = zkl_deadline(c->connect_timeout);
	pthread_mutex_lock(&c->mu);
	/* A SASL refusal shows only in the handle's state: look at it now and then. */
	bool poll_auth = c->creds.sasl_mechanism && c->zk->auth_failed;
	while (c->state == ZKL_STATE_CONNECTING && !c->auth_failed) {
		if (poll_auth && c->zk->auth_failed(c->sess->zh)) {
			c->auth_failed = true;
			break;
		}
		if (!c->external) {
			int64_t until = poll_auth ? zkl_now_ms() + 20 : deadline;
			if (zkl_cond_wait_until(&c->cv, &c->mu, until < deadline ? until : deadline) &&
			    zkl_now_ms() >= deadline)
				break;
			continue;
		}
		/* No loop thread: run the loop here until the session is up (no callback of
		 * the application can be registered yet). */
		running_loop = c;
		int64_t next = c->loop_due = loop_once(c);
		running_loop = NULL;
		if (c->state != ZKL_STATE_CONNECTING || c->auth_failed)
			break;
		if (poll_auth && next > zkl_now_ms() + 20)
			next = zkl_now_ms() + 20;
		if (zkl_cond_wait_until(&c->ev_cv, &c->mu, next < deadline ? next : deadline) &&
		    zkl_now_ms() >= deadline)
			break;
	}
	bool ok = c->state != ZKL_STATE_CONNECTING && !c->auth_failed;
	bool auth = c->auth_failed;
	pthread_mutex_unlock(&c->mu);
	if (!ok) {
		zkl_client_close(c);
		if (auth && o->sasl_mechanism)
			return zkl_fail(ZKL_EAUTH, "ZooKeeper at %s refused the SASL %s "
			                "authentication of \"%s\" (wrong user or password?)", servers,
			                o->sasl_mechanism, o->sasl_user ? o->sasl_user : "");
		if (auth)
			return zkl_fail(ZKL_EAUTH, "ZooKeeper at %s refused the credentials", servers);
		if (o->tls_ca)
			return zkl_fail(ZKL_ECONNECT, "no TLS session with ZooKeeper at %s within "
			                "%d ms: is it the server's secureClientPort, is its "
			                "certificate signed by a CA of tls_ca %s, and does it want "
			                "a client certificate (%s)?", servers, o->connect_timeout_ms,
			                o->tls_ca, o->tls_cert ? "it was sent: does it trust its CA"
			                : "none was given: tls_cert, tls_key");
		return zkl_fail(ZKL_ECONNECT, "no ZooKeeper server answered at %s within %d ms "
		                "(a port that takes only TLS answers no plaintext client: set "
		                "tls_ca)", servers, o->connect_timeout_ms);
	}
	*out = c;
	return 0;
}

/* Whether a request is out on the current session, or on a retired one still connected
 * (mu held). */
static bool requests_out(zkl_client *c)
{
	if (c->sess->inflight > 0 || atomic_load(&c->pins) > 0)
		return true;
	for (const struct zkl_session *s = c->retired; s; s = s->next)
		if (s->inflight > 0 && s->connected)
			return true;
	return false;
}

void zkl_client_close(zkl_client *c)
{
	if (!c)
		return;
	/* No release sends its delete by itself any more (zkl_task_delete_sent): those
	 * under way are waited for below, as requests out. */
	atomic_store(&c->sess_pub, NULL);
	/* From now on every completion wakes the loop: close waits for them. */
	atomic_store(&c->hurry, true);
	loop_wake(c);
	pthread_mutex_lock(&c->mu);
	if (c->adopted) {
		/* The session goes on without us: our nodes' background deletes must be done
		 * first, or a lock node would stay as long as the application's session. */
		int64_t until = zkl_now_ms() + session_timeout_ms(c);
		while (c->ntasks > 0 && !c->sess->expired && zkl_now_ms() < until)
			if (!zkl_loop_step(c))
				zkl_cond_wait_until(&c->ev_cv, &c->mu, zkl_now_ms() + 100);
		if (c->ntasks > 0)
			zkl_log(c, ZKL_LOG_ERROR, "closing with background deletes not done on the "
			        "application's session: their nodes stay until it ends");
	}
	/* Let the requests already sent complete, so their memory is not lost with the
	 * handle (the C client frees nothing of a request still out when it is closed from
	 * another thread); bounded, since a dead connection fails them within the session
	 * timeout. That holds for retired sessions still connected too: one given up a
	 * moment ago has a heartbeat out. */
	int64_t deadline = zkl_now_ms() + 3000;
	while (requests_out(c) && !zkl_cond_wait_until(&c->ev_cv, &c->mu, deadline))
		;
	c->closing = true;
	wake_all(c);
	loop_wake(c);
	if (c->external) {
		/* The application's loop: wait until no zkl_client_process() runs, then end
		 * what is under way here, as the event thread would. */
		while (c->processing)
			pthread_cond_wait(&c->ev_cv, &c->mu);
		zkl_client *outer = running_loop;
		running_loop = c;
		pthread_mutex_lock(&c->inbox_mu);
		c->loop_ended = true;
		pthread_mutex_unlock(&c->inbox_mu);
		loop_waiters_run(c);
		running_loop = outer;
	}
	pthread_mutex_unlock(&c->mu);
	if (c->ev_running)
		pthread_join(c->ev_thread, NULL);
	c->ev_running = false;
	pthread_mutex_lock(&c->mu);
	inbox_drain(c); /* releases handed over after the loop's last turn */
	retired_reap(c, true);
	struct zkl_session *s = c->sess;
	c->sess = NULL;
	pthread_mutex_unlock(&c->mu);
	session_free(c, s);
	client_free(c);
}

bool zkl_loop_step(zkl_client *c)
{
	if (!c->external || running_loop == c || c->processing || !zkl_runs_loop(c))
		return false;
	running_loop = c;
	int64_t next = c->loop_due = loop_once(c);
	running_loop = NULL;
	zkl_cond_wait_until(&c->ev_cv, &c->mu, next);
	return true;
}

/* The check of the application's loop functions: a client of external_loop. */
static int check_external(const zkl_client *c)
{
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	if (!c->external)
		return zkl_fail(ZKL_EINVAL, "the client runs its own loop thread (external_loop "
		                "was not set)");
	return 0;
}

int zkl_client_loop_fd(zkl_client *c)
{
	int rc = check_external(c);
	if (rc != 0)
		return rc;
	return c->efd;
}

int zkl_client_loop_timeout(zkl_client *c)
{
	int rc = check_external(c);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&c->mu);
	int64_t due = c->events || c->ready ? 0 : c->loop_due;
	pthread_mutex_unlock(&c->mu);
	if (due == INT64_MAX)
		return -1;
	int64_t left = due - zkl_now_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

int zkl_client_process(zkl_client *c)
{
	int rc = check_external(c);
	if (rc != 0)
		return rc;
	if (running_loop == c)
		return zkl_fail(ZKL_EDEADLK, "zkl_client_process() called from a zklocks "
		                "callback of the same client");
	/* Empty the descriptor first: a wake after this makes it readable again. */
	uint64_t n;
	while (read(c->efd, &n, sizeof n) > 0)
		;
	atomic_store(&c->efd_armed, false);
	pthread_mutex_lock(&c->mu);
	if (c->processing) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_EBUSY, "another thread is inside zkl_client_process()");
	}
	if (c->closing) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ECLOSED, "the client is closing");
	}
	c->processing = true;
	c->loop_thread = pthread_self();
	c->loop_known = true;
	zkl_client *outer = running_loop;
	running_loop = c;
	c->loop_due = loop_once(c);
	running_loop = outer;
	c->processing = false;
	pthread_cond_broadcast(&c->ev_cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int zkl_client_get_stats(const zkl_client *c, zkl_client_stats *out, size_t size)
{
	zkl_clear_error();
	if (!c || !out)
		return zkl_fail(ZKL_EINVAL, "%s is NULL", c ? "out" : "client");
	if (size < sizeof out->acquisitions)
		return zkl_fail(ZKL_EINVAL, "size %zu is too small for zkl_client_stats", size);
	zkl_client_stats s = {
		.acquisitions = atomic_load_explicit(&c->n_acquisitions, memory_order_relaxed),
		.granted = atomic_load_explicit(&c->n_granted, memory_order_relaxed),
		.wakes = atomic_load_explicit(&c->n_wakes, memory_order_relaxed),
		.listings = atomic_load_explicit(&c->n_listings, memory_order_relaxed),
	};
	memcpy(out, &s, size < sizeof s ? size : sizeof s);
	return 0;
}

zkl_state zkl_client_state(const zkl_client *c)
{
	if (!c)
		return ZKL_STATE_CLOSED;
	zkl_client *m = (zkl_client *)c;
	pthread_mutex_lock(&m->mu);
	zkl_state s = m->closing ? ZKL_STATE_CLOSED : m->state;
	pthread_mutex_unlock(&m->mu);
	return s;
}

const char *zkl_state_name(zkl_state s)
{
	switch (s) {
	case ZKL_STATE_CONNECTING: return "connecting";
	case ZKL_STATE_CONNECTED: return "connected";
	case ZKL_STATE_SUSPENDED: return "suspended";
	case ZKL_STATE_RECONNECTED: return "reconnected";
	case ZKL_STATE_LOST: return "lost";
	case ZKL_STATE_CLOSED: return "closed";
	}
	return "unknown";
}

int zkl_client_add_listener(zkl_client *c, zkl_state_fn fn, void *data)
{
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	if (!fn)
		return zkl_fail(ZKL_EINVAL, "listener function is NULL");
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nlisteners; i++) {
		if (c->listeners[i].fn == fn && c->listeners[i].data == data) {
			pthread_mutex_unlock(&c->mu);
			return zkl_fail(ZKL_EINVAL, "this listener was already added");
		}
	}
	struct zkl_listener *l = realloc(c->listeners, (c->nlisteners + 1) * sizeof *l);
	if (!l) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
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
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nlisteners; i++) {
		if (c->listeners[i].fn == fn && c->listeners[i].data == data) {
			memmove(&c->listeners[i], &c->listeners[i + 1],
			        (c->nlisteners - i - 1) * sizeof *c->listeners);
			c->nlisteners--;
			/* Promise: when this returns, the listener is not running. */
			while (c->listener_running && !zkl_on_event_thread(c))
				pthread_cond_wait(&c->cv, &c->mu);
			pthread_mutex_unlock(&c->mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return zkl_fail(ZKL_EINVAL, "no such listener");
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

int zkl_client_deadlines(const zkl_client *c, zkl_deadlines *out)
{
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	memset(out, 0, sizeof *out);
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	zkl_client *m = (zkl_client *)c;
	pthread_mutex_lock(&m->mu);
	const struct zkl_session *s = m->sess;
	if (s->last_ok_sent != 0 && !s->expired) {
		out->session_id = s->id;
		out->loss_ms = zkl_lost_at(m);
		out->expiry_ms = s->last_ok_sent + session_timeout_ms(m);
	}
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int64_t zkl_monotonic_ms(void)
{
	return zkl_now_ms();
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
