/* The loop: the one thread of control that owns the client's state (DESIGN.md, "The
 * core is event-driven").
 *
 * Design notes.
 *
 * The inbox. The C client's completion thread runs every watcher and completion of a
 * handle; what it hears is copied into a message (struct zkl_msg) and queued here, in
 * order, for the loop, which applies it under mu (zkl__msg_run). With a loop thread of the
 * client's own, the completion thread takes only inbox_mu and never waits for the loop.
 * With external_loop it applies the message itself, under mu, since the application's
 * loop thread may be the one blocked in a zklocks call that waits for it.
 *
 * Calls. An application thread hands the loop an acquisition, a job (job.c) or a cancel
 * as a call (zkl__call): queued in the inbox behind everything handed over before it, and
 * run by the loop.
 *
 * Waiters. Everything the loop runs for someone (an acquisition, a job, a recipe's
 * machine) is a waiter: woken by answers, watches, state changes and cancels, or by its
 * own timer, and run in the order it was woken.
 *
 * One turn (zkl_loop_once): the inbox, session events, lost holds, revocation watches,
 * waiters, background deletes, liveness, retired sessions; until nothing is ready. The
 * loop runs on the client's event thread (zkl_event_main), or, with external_loop, in
 * the application's calls to zkl_client_process().
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static void msg_apply(zkl_client *c, struct zkl_msg *m);

/* The client whose loop the calling thread is running (its event thread, or an
 * application's thread inside zkl_client_process()), or NULL. */
_Thread_local zkl_client *zkl__running_loop;

/* Tells the loop there is work: wakes the event thread, or makes the application's loop
 * descriptor readable (once until the next zkl_client_process()). */
void zkl__loop_wake(zkl_client *c)
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



/* Queues m for the loop (no lock held), and wakes it unless `lazy` (then m waits for
 * the loop's next turn). A call is refused once the loop has ended. */
bool zkl__inbox_put(zkl_client *c, struct zkl_msg *m, bool lazy)
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
		/* An op's laziness is read again here, under inbox_mu: zkl__op_hasten() takes
		 * inbox_mu after clearing it, so the loop finds m in the inbox or is woken. */
		if (lazy && m->kind == MSG_OP)
			lazy = atomic_load(&((struct zkl_op *)m)->lazy);
		/* A node event of a watch that is no news (its hold's own release deleted or
		 * wrote the node: zkl_watch.quiet_if) waits for the loop's next turn. The C
		 * client's reference keeps the watch until the loop applies the event. */
		if (!lazy && m->kind == MSG_WATCH) {
			const struct watch_msg *wm = (const struct watch_msg *)m;
			const struct zkl_watch *wt = wm->obj;
			lazy = wm->type != ZOO_SESSION_EVENT &&
			       (wt->quiet || (wt->quiet_if && atomic_load(wt->quiet_if)));
		}
		if (!lazy || atomic_load(&c->hurry)) {
			c->kicks++;
			wake = true;
		}
	}
	pthread_mutex_unlock(&c->inbox_mu);
	if (wake)
		pthread_cond_broadcast(&c->inbox_cv); /* after the unlock, as zkl__loop_wake() */
	return taken;
}

/* Hands m to the loop (no lock held), or applies it here (external_loop). */
void zkl__inbox_post(zkl_client *c, struct zkl_msg *m, bool lazy)
{
	if (c->external) {
		pthread_mutex_lock(&c->mu);
		msg_apply(c, m);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	zkl__inbox_put(c, m, lazy);
}

/* Hands the loop a copy of one, a message of size bytes on the caller's stack
 * (completion thread). Without memory for the copy, one is applied here, under mu, as
 * with external_loop. */
void zkl__post_copy(zkl_client *c, struct zkl_msg *one, size_t size)
{
	struct zkl_msg *m = malloc(size);
	if (!m) {
		pthread_mutex_lock(&c->mu);
		zkl__msg_run(c, one);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	memcpy(m, one, size);
	zkl__inbox_post(c, m, false);
}

/* Applies what is in the inbox, in the order it came (mu held). */
void zkl__inbox_drain(zkl_client *c)
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

bool zkl__call(zkl_client *c, struct zkl__call *call)
{
	call->msg.kind = MSG_CALL;
	if (!c->external && zkl__running_loop != c)
		return zkl__inbox_put(c, &call->msg, false);
	/* The loop's own thread, or any thread with external_loop (whose completions are
	 * applied as they come): run it here, after what the inbox holds. */
	pthread_mutex_lock(&c->mu);
	bool taken = !c->loop_ended;
	if (taken) {
		zkl__inbox_drain(c);
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
	zkl__jobs_tell(told);
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
		if ((timed = zkl__cond_wait_until(&c->inbox_cv, &c->inbox_mu, deadline)))
			break;
	pthread_mutex_unlock(&c->inbox_mu);
	pthread_mutex_lock(&c->mu);
	zkl__inbox_drain(c);
	return timed;
}

/* Waits (mu held) for the C client to tell something, on any thread: the event thread
 * and a closing one apply the inbox themselves. Returns true if the deadline passed. */
bool zkl__io_wait(zkl_client *c, int64_t deadline)
{
	if (c->external)
		return zkl__cond_wait_until(&c->ev_cv, &c->mu, deadline);
	return inbox_wait(c, kicks_now(c), deadline);
}

void zkl__waiter_enter_loop(zkl_client *c, struct zkl_waiter *w, const void *owner,
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
	zkl__waiter_wake(c, w);
}

void zkl__waiter_wake(zkl_client *c, struct zkl_waiter *w)
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
	/* On the loop's own thread, the turn under way runs what is ready before it ends
	 * (zkl__loop_once): a wake would only cost it a second, empty turn. */
	if (zkl__running_loop != c || c->external)
		zkl__loop_wake(c);
}

void zkl__waiter_wake_at(zkl_client *c, struct zkl_waiter *w, int64_t t)
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

bool zkl__waiter_due(struct zkl_waiter *w)
{
	if (!w->woken && w->wake_at > zkl__now_ms())
		return false;
	w->woken = false;
	w->wake_at = INT64_MAX;
	return true;
}

void zkl__waiter_leave(zkl_client *c, struct zkl_waiter *w)
{
	waiter_unqueue(c, w);
	if (w->prev)
		w->prev->next = w->next;
	else
		c->waiters = w->next;
	if (w->next)
		w->next->prev = w->prev;
}

void zkl__wake_all(zkl_client *c)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next)
		zkl__waiter_wake(c, w);
	pthread_cond_broadcast(&c->cv);
}

void zkl__cancel_owner_locked(zkl_client *c, const void *owner)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next) {
		if (w->owner == owner) {
			w->canceled = true;
			zkl__waiter_wake(c, w);
		}
	}
}

void zkl__wake_owner_locked(zkl_client *c, const void *owner)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next)
		if (w->owner == owner)
			zkl__waiter_wake(c, w);
}

struct cancel_call {
	struct zkl__call call;
	const void *owner;
};

static void cancel_run(zkl_client *c, struct zkl__call *call)
{
	struct cancel_call *k = (struct cancel_call *)call;
	zkl__cancel_owner_locked(c, k->owner);
	free(k);
}

void zkl__client_cancel_owner(zkl_client *c, const void *owner)
{
	struct cancel_call *k = malloc(sizeof *k);
	if (k) {
		k->call.fn = cancel_run;
		k->owner = owner;
		if (zkl__call(c, &k->call))
			return;
		free(k);
	}
	/* No memory for the call, or the loop has ended (closing): cancel here. */
	pthread_mutex_lock(&c->mu);
	zkl__inbox_drain(c);
	zkl__cancel_owner_locked(c, owner);
	pthread_mutex_unlock(&c->mu);
}

bool zkl__on_event_thread(zkl_client *c)
{
	return zkl__running_loop == c;
}

bool zkl__runs_loop(zkl_client *c)
{
	return zkl__running_loop == c ||
	       (c->loop_known && pthread_equal(c->loop_thread, pthread_self()));
}

bool zkl__is_loop_thread(zkl_client *c)
{
	if (zkl__running_loop == c)
		return true;
	if (!c->external)
		return false;
	pthread_mutex_lock(&c->mu);
	bool r = zkl__runs_loop(c);
	pthread_mutex_unlock(&c->mu);
	return r;
}


/* Applies m (mu held). */
void zkl__msg_run(zkl_client *c, struct zkl_msg *m)
{
	switch ((enum msg_kind)m->kind) {
	case MSG_OP: {
		struct zkl_op *op = (struct zkl_op *)((char *)m - offsetof(struct zkl_op, msg));
		zkl__op_finish_locked(c, op, op->zrc);
		break;
	}
	case MSG_TASK: {
		struct zkl_task *t = (struct zkl_task *)((char *)m - offsetof(struct zkl_task, msg));
		zkl__task_answered(c, t, t->zrc);
		break;
	}
	case MSG_WATCH:
		zkl__node_watch_apply(c, ((struct watch_msg *)m)->obj, ((struct watch_msg *)m)->type);
		break;
	case MSG_REVWATCH:
		zkl__revwatch_event_apply(c, ((struct watch_msg *)m)->obj, ((struct watch_msg *)m)->type);
		break;
	case MSG_REVREAD:
		zkl__revread_apply(c, (struct revread_msg *)m);
		break;
	case MSG_SESSION: {
		struct session_msg *e = (struct session_msg *)m;
		zkl__session_event_locked(c, e->s, e->state, e->id, e->timeout, e->e);
		break;
	}
	case MSG_CALL: {
		struct zkl__call *call = (struct zkl__call *)m;
		call->fn(c, call);
		break;
	}
	case MSG_HOLD_END:
		zkl__hold_unlink(c, (struct zkl_hold *)((char *)m - offsetof(struct zkl_hold, end)));
		break;
	case MSG_RELEASE:
		zkl__task_take_over(c, (struct zkl_task *)((char *)m - offsetof(struct zkl_task, rel)));
		break;
	}
}

/* Applies m (mu held), and frees it unless its op or task carries it. */
static void msg_apply(zkl_client *c, struct zkl_msg *m)
{
	c->loop_work++;
	bool carried = m->kind == MSG_OP || m->kind == MSG_TASK || m->kind == MSG_CALL ||
	               m->kind == MSG_HOLD_END || m->kind == MSG_RELEASE;
	zkl__msg_run(c, m);
	if (!carried)
		free(m);
}


/* Runs the loop waiters that were woken or whose time has come (event thread, mu
 * held). Returns when the next one wants to run. */
int64_t zkl__loop_waiters_run(zkl_client *c)
{
	for (;;) {
		while (c->ready) {
			struct zkl_waiter *w = c->ready;
			c->ready = w->ready_next;
			if (!c->ready)
				c->ready_tail = NULL;
			w->queued = false;
			w->wake_at = INT64_MAX;
			c->loop_work++;
			w->run(c, w); /* may free w */
		}
		/* Timers: look through the waiters only when one of them is due (loop_next
		 * may be early, when its waiter has moved on; never late). */
		int64_t now = zkl__now_ms();
		if (now < c->loop_next)
			return c->loop_next;
		int64_t next = INT64_MAX;
		for (struct zkl_waiter *w = c->waiters; w; w = w->next) {
			if (w->queued || w->own_thread)
				continue;
			if (w->wake_at <= now)
				zkl__waiter_wake(c, w);
			else if (w->wake_at < next)
				next = w->wake_at;
		}
		c->loop_next = next;
		if (!c->ready)
			return next;
	}
}

/* One turn of the loop (mu held): session events, lost holds, revocation watches,
 * acquisitions, background deletes, liveness, old sessions, the observer; until nothing
 * is ready.
 * Returns when it next has something to do. */
int64_t zkl__loop_once(zkl_client *c)
{
	for (;;) {
		zkl__inbox_drain(c);
		while (c->events) {
			struct zkl_event *e = c->events;
			c->events = e->next;
			if (!c->events)
				c->events_tail = NULL;
			zkl__handle_event(c, e);
			free(e);
		}
		zkl__holds_notify(c);
		zkl__revwatches_run(c);
		int64_t next = zkl__loop_waiters_run(c);
		int64_t t = zkl__tasks_run(c);
		if (t < next)
			next = t;
		int64_t l = zkl__liveness_run(c);
		if (l < next)
			next = l;
		int64_t r = zkl__retired_reap(c, false);
		if (r < next)
			next = r;
		zkl__observer_run(c);
		if (c->closing || (!c->events && !c->ready))
			return next;
	}
}

void *zkl__event_main(void *arg)
{
	zkl_client *c = arg;
	zkl__running_loop = c;
	pthread_mutex_lock(&c->mu);
	while (!c->closing) {
		/* A wake-up while the turn runs (mu is released now and then) means another. */
		uint64_t k = kicks_now(c);
		int64_t next = zkl__loop_once(c);
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
	zkl__inbox_drain(c);
	zkl__loop_waiters_run(c);
	unlock_and_tell(c);
	return NULL;
}


bool zkl__loop_step(zkl_client *c)
{
	if (!c->external || zkl__running_loop == c || c->processing || !zkl__runs_loop(c))
		return false;
	const uint64_t work = c->loop_work;
	zkl__running_loop = c;
	int64_t next = c->loop_due = zkl__loop_once(c);
	zkl__running_loop = NULL;
	/* What the turn did may be what the caller waits for (an acquisition that ended):
	 * it looks before the loop waits for more, which may never come (nothing due). */
	if (c->loop_work == work)
		zkl__cond_wait_until(&c->ev_cv, &c->mu, next);
	return true;
}

/* The check of the application's loop functions: a client of external_loop. */
static int check_external(const zkl_client *c)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	if (!c->external)
		return zkl__fail(ZKL_EINVAL, "the client runs its own loop thread (external_loop "
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
	int64_t left = due - zkl__now_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

int zkl_client_process(zkl_client *c)
{
	int rc = check_external(c);
	if (rc != 0)
		return rc;
	if (zkl__running_loop == c)
		return zkl__fail(ZKL_EDEADLK, "zkl_client_process() called from a zklocks "
		                "callback of the same client");
	/* Claimed before mu: a loop turn holds mu most of the time, and a second thread
	 * must be told at once, not made to wait for it. */
	if (atomic_exchange(&c->processing, true))
		return zkl__fail(ZKL_EBUSY, "another thread is inside zkl_client_process()");
	/* Empty the descriptor first: a wake after this makes it readable again. */
	uint64_t n;
	while (read(c->efd, &n, sizeof n) > 0)
		;
	atomic_store(&c->efd_armed, false);
	pthread_mutex_lock(&c->mu);
	if (c->closing) {
		atomic_store(&c->processing, false);
		pthread_cond_broadcast(&c->ev_cv);
		pthread_mutex_unlock(&c->mu);
		return zkl__fail(ZKL_ECLOSED, "the client is closing");
	}
	c->loop_thread = pthread_self();
	c->loop_known = true;
	zkl_client *outer = zkl__running_loop;
	zkl__running_loop = c;
	c->loop_due = zkl__loop_once(c);
	zkl__running_loop = outer;
	atomic_store(&c->processing, false);
	pthread_cond_broadcast(&c->ev_cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}
