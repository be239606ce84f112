/* The loop: the one thread of control that owns the client's state (DESIGN.md, "The
 * core is event-driven").
 *
 * Design notes.
 *
 * The inbox. The C client's completion thread runs every watcher and completion of a
 * handle; what it hears goes into a message (struct zkl_msg) that lives in what it is
 * about (the request, the watch, the task; session events in the client's sess_evs),
 * queued here, in order, for the loop, which applies it under mu with the message's
 * own apply function. In every mode the completion thread takes only inbox_mu and never
 * waits for the loop, so the loop sends its requests with mu held. With external_loop
 * the thread that waits for the loop's work (the application's loop in
 * zkl_client_process(), or a blocking caller driving its own job) applies the inbox
 * itself (zkl__io_wait).
 *
 * Calls. An application thread hands the loop an acquisition, a job or a cancel as a
 * call (zkl__call): queued in the inbox behind everything handed over before it, and run
 * by the loop.
 *
 * Waiters. Everything the loop runs for someone (an acquisition, a job, a recipe's
 * machine) is a waiter: woken by answers, watches, state changes and cancels, or by its
 * own timer, and run in the order it was woken.
 *
 * Jobs. A job is what a thread asks of ZooKeeper and waits for: a loop waiter with a
 * step function. The loop runs the step, mu held, whenever the job is woken: an answer
 * to a request it sent, a watch it armed, a session change, a cancel of its owner, or
 * the time it asked to be run at (zkl__waiter_wake_at). The step sends what comes next
 * and returns ZKL_JOB_WAIT, or returns the job's result. Nothing in a step blocks.
 *
 * The thread that asked waits on the job's own semaphore, not on the client's mutex
 * (zkl__job_wait), so a blocking call is a thin wait on the loop: the same as a blocking
 * acquire, which is a job too (src/engine/acquire.c). A job reaches the loop as a call,
 * behind everything handed to the loop before it, and from then on only the loop touches
 * it, until its end. The jobs of the client's own blocking calls (a request, a condition,
 * the connection) are in job.c.
 *
 * The client's event thread cannot wait for a job: nothing would run it. Such a call (a
 * callback's) fails at once with ZKL_EDEADLK (zkl__job_run), and so does one on the
 * application's loop thread (external_loop), which never waits for the server. With
 * external_loop the waiting thread runs its job's steps itself, applying the inbox as it
 * waits (zkl__io_wait): the application's loop may be that very thread, or not run at
 * all while it waits.
 *
 * A job's step may start another job from the loop (zkl__job_begin): a recipe made of
 * engine acquisitions (a semaphore's gate, then its lease) starts each as the child of
 * its own job, and is woken when the child ends. The child is run where its parent is:
 * by the loop, or by the parent's waiting thread with external_loop. So a blocking call
 * and an asynchronous one are the same job, waited for or with an end.
 *
 * A blocking call made of asynchronous acquisitions one after the other (a multi-lock's
 * members, possibly on several clients) drives them (zkl__drive_begin): with
 * external_loop, the job with an end that such a thread starts is run by that thread
 * (zkl__drive_run), as a waited job is, and its end tells the thread to start the next.
 *
 * One turn (zkl_loop_once): the inbox, session events, lost holds, revocation watches,
 * waiters, background deletes, liveness, retired sessions; until nothing is ready. The
 * loop runs on the client's event thread (zkl_event_main), or, with external_loop, in
 * the application's calls to zkl_client_process().
 */
#include <errno.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

/* The client whose loop the calling thread is running (its event thread, or an
 * application's thread inside zkl_client_process()), or NULL. */
_Thread_local zkl_client *zkl__running_loop;

/* Makes the application's loop descriptor readable (once until the next
 * zkl_client_process()). */
static void efd_arm(zkl_client *c)
{
	if (c->efd >= 0 && !atomic_exchange(&c->efd_armed, true)) {
		uint64_t one = 1;
		ssize_t n = write(c->efd, &one, sizeof one);
		(void)n; /* EAGAIN: the counter is far from empty, so it is readable anyway */
	}
}

/* Tells whoever waits for the loop's work that there is some (any thread, any lock
 * held but inbox_mu): the event thread, or with external_loop the thread that drives a
 * wait (zkl__io_wait). */
void zkl__kick(zkl_client *c)
{
	pthread_mutex_lock(&c->inbox_mu);
	c->kicks++;
	pthread_mutex_unlock(&c->inbox_mu);
	/* After the unlock: the woken thread does not then wait for inbox_mu. */
	pthread_cond_broadcast(&c->inbox_cv);
	pthread_cond_broadcast(&c->ev_cv);
}

/* Tells the loop there is work: a kick, and with external_loop the application's loop
 * descriptor too. */
void zkl__loop_wake(zkl_client *c)
{
	zkl__kick(c);
	efd_arm(c);
}

/* What a message that wakes the loop does: wakes the thread that waits for the loop's
 * work. */
static void inbox_wake(zkl_client *c)
{
	pthread_cond_broadcast(&c->inbox_cv);
	if (c->external) {
		pthread_cond_broadcast(&c->ev_cv);
		efd_arm(c);
	}
}

/* Queues m for the loop, and wakes it unless `lazy` (then m waits for the loop's next
 * turn). Any thread, holding nothing or mu: this is all the C client's completion thread
 * does with what it hears, in every mode. A call is refused once the loop has ended. */
bool zkl__inbox_put(zkl_client *c, struct zkl_msg *m, bool lazy)
{
	const bool adopted = c->adopted; /* c is not read after the unlock if adopted */
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
			const struct zkl_watch *wt =
			        (const struct zkl_watch *)((const char *)m - offsetof(struct zkl_watch, ev));
			lazy = wt->quiet || (wt->quiet_if && atomic_load(wt->quiet_if));
		}
		if (!lazy || atomic_load(&c->hurry)) {
			c->kicks++;
			wake = true;
		}
	}
	/* An adopted handle's completion thread outlives the client: once m is in the
	 * inbox, a close may apply it and free the client, so the wake is done before the
	 * unlock. Any other handle is closed, and its completion thread joined, before the
	 * client goes: its wake comes after the unlock, so that the woken thread does not
	 * then wait for inbox_mu. */
	if (wake && adopted)
		inbox_wake(c);
	pthread_mutex_unlock(&c->inbox_mu);
	if (wake && !adopted)
		inbox_wake(c);
	return taken;
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
		c->loop_work++;
		struct zkl_waiter *w = m->apply(c, m); /* m may be gone */
		if (w)
			zkl__waiter_wake(c, w);
		m = next;
	}
}

static struct zkl_waiter *call_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl__call *call = (struct zkl__call *)m;
	call->fn(c, call);
	return NULL;
}

bool zkl__call(zkl_client *c, struct zkl__call *call)
{
	call->msg.kind = MSG_CALL;
	call->msg.apply = call_apply;
	if (!c->external && zkl__running_loop != c)
		return zkl__inbox_put(c, &call->msg, false);
	/* The loop's own thread, or any thread with external_loop (which drives the loop as
	 * it calls): run it here, after what the inbox holds. */
	pthread_mutex_lock(&c->mu);
	bool taken = !c->loop_ended;
	if (taken) {
		zkl__inbox_drain(c);
		call->fn(c, call);
	}
	pthread_mutex_unlock(&c->mu);
	return taken;
}


/* Lets go of mu (held), then tells the threads of the jobs ended in this turn. */
static void unlock_and_tell(zkl_client *c)
{
	struct zkl_job *told = c->told;
	c->told = NULL;
	pthread_mutex_unlock(&c->mu);
	if (told)
		zkl__jobs_tell(told);
}

/* The loop's wake count: read before a look at what a wait is for (zkl__io_wait_since). */
uint64_t zkl__kicks(zkl_client *c)
{
	pthread_mutex_lock(&c->inbox_mu);
	uint64_t k = c->kicks;
	pthread_mutex_unlock(&c->inbox_mu);
	return k;
}


/* Waits (mu held, released meanwhile) until the loop was woken after kicks read k, or
 * until deadline; returns true if the deadline passed. Then applies the inbox. */
bool zkl__io_wait_since(zkl_client *c, uint64_t k, int64_t deadline)
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

/* Waits (mu held) for the C client to tell something, or for a kick, on any thread:
 * the waiting thread applies the inbox itself. Returns true if the deadline passed. */
bool zkl__io_wait(zkl_client *c, int64_t deadline)
{
	return zkl__io_wait_since(c, zkl__kicks(c), deadline);
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
		zkl__kick(c); /* its thread waits in zkl__io_wait() */
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

void zkl__cancel_owner(zkl_client *c, const void *owner)
{
	for (struct zkl_waiter *w = c->waiters; w; w = w->next) {
		if (w->owner == owner) {
			w->canceled = true;
			zkl__waiter_wake(c, w);
		}
	}
}

void zkl__wake_owner(zkl_client *c, const void *owner)
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
	zkl__cancel_owner(c, k->owner);
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
	zkl__cancel_owner(c, owner);
	pthread_mutex_unlock(&c->mu);
}

_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "a pthread_t fits a uintptr_t");


/* ---- Jobs: what a thread waits for, run by the loop ------------------------------ */

/* Wakes the thread that waits for j. A semaphore, not a condition variable: the woken
 * thread takes no mutex the loop may still hold, and may free j as soon as it wakes. */
static void tell(struct zkl_job *j)
{
	sem_post(&j->done);
}

/* The drive current on this thread (zkl__drive_begin), if any. */
static _Thread_local struct zkl__drive *driving;

static void job_step(zkl_client *c, struct zkl_waiter *w)
{
	struct zkl_job *j = (struct zkl_job *)w;
	int rc = c->closing && !j->runs_closing ? zkl__fail(ZKL_ECLOSED, "the client is closing")
	                                        : j->step(c, j);
	if (rc == ZKL_JOB_WAIT)
		return;
	if (rc != 0 && !j->error[0])
		snprintf(j->error, sizeof j->error, "%s", zkl_last_error());
	j->rc = rc;
	if (j->drop)
		j->drop(c, j);
	zkl__waiter_leave(c, &j->w);
	if (j->end) {
		struct zkl_job *parent = j->parent;
		/* A driven job ends: its thread stops running it before the end may start
		 * the next (which then becomes the drive's). */
		if (driving && driving->job == j)
			driving->job = NULL;
		pthread_mutex_unlock(&c->mu);
		j->end(c, j); /* j may be gone */
		pthread_mutex_lock(&c->mu);
		if (parent) {
			/* A child job (it has an end): its parent looks at what the end left. */
			parent->child = NULL;
			zkl__waiter_wake(c, &parent->w);
		}
		return;
	}
	if (j->w.own_thread) {
		j->finished = true;
		zkl__kick(c); /* its thread waits in zkl__io_wait() (zkl__job_wait) */
		return;
	}
	if (!c->external && zkl__on_event_thread(c)) {
		/* Told when the loop lets go of the mutex (loop.c, unlock_and_tell). */
		j->told_next = c->told;
		c->told = j;
		return;
	}
	tell(j);
}

void zkl__jobs_tell(struct zkl_job *list)
{
	while (list) {
		struct zkl_job *next = list->told_next;
		tell(list); /* list may be gone */
		list = next;
	}
}

/* On the loop (mu held): the job begins with its first step. */
static void job_begin(zkl_client *c, struct zkl__call *call)
{
	struct zkl_job *j = (struct zkl_job *)((char *)call - offsetof(struct zkl_job, call));
	zkl__waiter_enter_loop(c, &j->w, j->owner, job_step);
}

/* What every start of a job sets. */
static void job_init(struct zkl_job *j, const void *owner)
{
	j->owner = owner;
	j->rc = 0;
	j->error[0] = '\0';
	j->finished = false;
	j->parent = j->child = NULL;
	sem_init(&j->done, 0, 0);
}

/* Whether j (no parent) is run by the thread that starts it: with external_loop, a job
 * waited for, or the first with an end started by a thread that drives (it becomes the
 * drive's). */
static bool own_thread(zkl_client *c, struct zkl_job *j)
{
	if (!c->external)
		return false;
	if (!j->end)
		return true;
	if (!driving || driving->job)
		return false;
	driving->c = c;
	driving->job = j;
	return true;
}

void zkl__job_begin(zkl_client *c, struct zkl_job *j, const void *owner,
                          struct zkl_job *parent)
{
	job_init(j, owner);
	if (parent) {
		j->parent = parent;
		parent->child = j;
	}
	/* A child is run by whoever runs its parent: with external_loop, the thread that
	 * waits for the parent (zkl__job_wait, zkl__drive_run). */
	j->w.own_thread = parent ? parent->w.own_thread : own_thread(c, j);
	zkl__waiter_enter_loop(c, &j->w, owner, job_step);
}

int zkl__job_start(zkl_client *c, struct zkl_job *j, const void *owner)
{
	job_init(j, owner);
	j->call.fn = job_begin;
	j->w.own_thread = own_thread(c, j);
	if (!zkl__call(c, &j->call)) {
		if (driving && driving->job == j)
			driving->job = NULL;
		zkl__job_destroy(j);
		return zkl__fail(ZKL_ECLOSED, "the client is closing");
	}
	return 0;
}

/* Runs the step of j or of its child that is due, on the thread that runs j (mu
 * held), or waits until one is. j may be gone after a step that ended it with an end. */
static void run_own(zkl_client *c, struct zkl_job *j)
{
	struct zkl_job *k = j->child;
	if (k && zkl__waiter_due(&k->w))
		job_step(c, &k->w); /* k may be gone */
	else if (zkl__waiter_due(&j->w))
		job_step(c, &j->w);
	else
		zkl__io_wait(c, k && k->w.wake_at < j->w.wake_at ? k->w.wake_at : j->w.wake_at);
}

void zkl__drive_begin(struct zkl__drive *d)
{
	d->c = NULL;
	d->job = NULL;
	d->prev = driving;
	driving = d;
}

void zkl__drive_end(struct zkl__drive *d)
{
	driving = d->prev;
}

void zkl__drive_run(struct zkl__drive *d)
{
	zkl_client *c = d->c;
	if (!d->job)
		return;
	struct zkl__drive *was = driving;
	driving = d; /* so that the end of d's job clears it */
	pthread_mutex_lock(&c->mu);
	while (d->job && d->c == c)
		run_own(c, d->job);
	pthread_mutex_unlock(&c->mu);
	driving = was;
}

int zkl__job_wait(zkl_client *c, struct zkl_job *j)
{
	if (c->external) {
		/* The waiting thread runs its job itself, applying the inbox as it waits:
		 * the application's loop may be this very thread, and then nothing else
		 * would run it. The loop leaves it alone (own_thread). */
		pthread_mutex_lock(&c->mu);
		while (!j->finished)
			run_own(c, j);
		pthread_mutex_unlock(&c->mu);
	} else {
		while (sem_wait(&j->done) != 0)
			; /* EINTR: a signal handler ran */
	}
	zkl__job_destroy(j);
	if (j->rc != 0)
		zkl__fail(j->rc, "%s", j->error);
	else
		zkl__clear_error();
	return j->rc;
}

void zkl__job_destroy(struct zkl_job *j)
{
	sem_destroy(&j->done);
}

static int refuse_on_loop(zkl_client *c, const char *what)
{
	if (!zkl__is_loop_thread(c))
		return 0;
	if (c->external && !zkl__on_event_thread(c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the application's loop "
		                "thread: nothing on the loop's thread waits for the server (call "
		                "it from another thread)", what);
	return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the client's event thread (in a "
	                "callback): the loop would wait for itself", what);
}

int zkl__job_run(zkl_client *c, struct zkl_job *j, const void *owner, const char *what)
{
	int rc = refuse_on_loop(c, what);
	if (rc == 0)
		rc = zkl__job_start(c, j, owner);
	if (rc != 0) {
		if (j->drop) {
			pthread_mutex_lock(&c->mu);
			j->drop(c, j);
			pthread_mutex_unlock(&c->mu);
		}
		return rc;
	}
	return zkl__job_wait(c, j);
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
		/* What has nothing to do is not called: lost holds only after the session
		 * changed or a hold was marked lost since the last look; tasks, data watches,
		 * retired sessions and the observer's events only if there are any. */
		if (c->holds_gen != c->gen || c->holds_lost)
			zkl__holds_notify(c);
		if (c->revwatches)
			zkl__revwatches_run(c);
		int64_t next = zkl__loop_waiters_run(c);
		if (c->tasks) {
			int64_t t = zkl__tasks_run(c);
			if (t < next)
				next = t;
		}
		int64_t l = zkl__liveness_run(c);
		if (l < next)
			next = l;
		if (c->retired) {
			int64_t r = zkl__retired_reap(c, false);
			if (r < next)
				next = r;
		}
		if (atomic_load(&c->obs_queued))
			zkl__observer_run(c);
		if (c->closing || (!c->events && !c->ready)) {
			atomic_store(&c->due_pub, c->events || c->ready ? 0 : next);
			return next;
		}
	}
}

void *zkl__event_main(void *arg)
{
	zkl_client *c = arg;
	zkl__running_loop = c;
	pthread_mutex_lock(&c->mu);
	while (!c->closing) {
		/* A wake-up while the turn runs (mu is released now and then) means another. */
		uint64_t k = zkl__kicks(c);
		int64_t next = zkl__loop_once(c);
		if (c->closing || c->events || c->ready) {
			unlock_and_tell(c);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		zkl__io_wait_since(c, k, next);
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
	if (!c->external || zkl__running_loop == c || c->processing || !zkl__is_loop_thread(c))
		return false;
	const uint64_t work = c->loop_work;
	const uint64_t k = zkl__kicks(c);
	zkl__running_loop = c;
	int64_t next = zkl__loop_once(c);
	zkl__running_loop = NULL;
	/* What the turn did may be what the caller waits for (an acquisition that ended):
	 * it looks before the loop waits for more, which may never come (nothing due). */
	if (c->loop_work == work)
		zkl__io_wait_since(c, k, next);
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
	const int64_t due = atomic_load(&c->due_pub);
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
	const pthread_t self = pthread_self();
	uintptr_t id = 0;
	memcpy(&id, &self, sizeof self);
	atomic_store(&c->loop_tid, id);
	zkl_client *outer = zkl__running_loop;
	zkl__running_loop = c;
	zkl__loop_once(c);
	zkl__running_loop = outer;
	atomic_store(&c->processing, false);
	pthread_cond_broadcast(&c->ev_cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}
