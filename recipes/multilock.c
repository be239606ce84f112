/* zkl_multilock: several locks held as one, all or nothing.
 *
 * Design notes
 * - Pure composition over the shared verbs of its members (zkl_lock_*): the multi-lock
 *   never touches ZooKeeper itself, so every member keeps its own queue, watch, lost
 *   reports and fencing token.
 * - Order. Members are kept in the order they will be taken. In canonical order an add
 *   inserts the member after every member that sorts before or equal to it (an insertion
 *   sort, hence stable): by the node path it resolves to (its client's chroot, then its
 *   path) with strcmp, and for equal paths the read half of a
 *   read-write lock after anything else, so that a multi-lock over both halves of one
 *   rwlock takes the write half first and the read half as a downgrade (the other way
 *   round would be an upgrade, ZKL_EDEADLK). Two multi-locks over the same locks, built
 *   in any order, therefore take them in the same order and cannot deadlock.
 * - One path. Every acquire is a run (struct run): member i's end, on its client's loop,
 *   starts member i + 1 with what is left of one deadline for the whole (-1, or 0 to
 *   try once; a member reached after the deadline is not tried). A run is the handle's
 *   (an asynchronous acquire: each member by its own asynchronous acquire) or an
 *   owner's (common.h): each member for that owner (start_as), so that mutex members
 *   re-enter and the read half of a rwlock whose write half the owner holds is a
 *   downgrade; members of kinds without owners (semaphores) are taken by their own
 *   asynchronous acquire then. The blocking acquire is an owner's run, the calling
 *   thread's, plus a wait for its end; the simulator starts owners' runs of its own
 *   (zkl__multilock_start_as). The waiting thread starts each member itself (a member's
 *   end only says it is time), and runs those on clients with external_loop
 *   (zkl__drive_run, loop.c), so the whole goes on while the application runs no loop. On any failure the members taken are given back in
 *   reverse order, so nothing stays held: by the waiting thread for a blocking acquire
 *   (whose members may be on several clients), else on the loop.
 * - Two kinds of hold, never at once. An owner's hold is nested like Curator's
 *   InterProcessMultiLock (acquiring again re-enters the mutex members; a semaphore
 *   member takes no second lease: the second acquire fails with ZKL_EBUSY), each
 *   release undoing one acquire; the owner of the first level is the owner, and only it
 *   may release, since its mutex members refuse anyone else. The handle's hold (an
 *   asynchronous acquire's) is not reentrant and any thread releases it.
 * - One client for a run whose end is on the loop (asynchronous, or an owner's started
 *   by zkl__multilock_start_as). Every member callback then runs on one event thread,
 *   the final callback too, and the members given back on a failure are released on
 *   their own client's loop, where a release never waits. Across clients a release made
 *   on one client's loop could wait for another client's loop (with confirm_release),
 *   and two such runs could wait for each other.
 * - Cancel. The member in flight is cancelled with zkl_lock_cancel(); while a member's
 *   acquire is being started (between the two, no lock held) a cancel only says so, and
 *   the starter cancels the member once its start has returned. A member callback that
 *   comes in meanwhile (on the loop, while a thread starts the first member) waits for
 *   the starter: member callbacks run on the loop after their start returned, never
 *   inside it. A blocking acquire is cancelled the same way.
 * - Lost members. The multi-lock listens to each member (zkl__lock_listen), so the
 *   member's own lost callback stays its owner's; a loss while held is told once on the
 *   view's lost callback; a loss while a run is still taking the others fails it with
 *   ZKL_ELOST, and every member taken is given back.
 * - Locks: ml->mu guards the state that the loop and other threads share. Member verbs
 *   are never called with ml->mu held, and nothing else is locked while it is: the loop
 *   calls the members' ends and lost listeners with its own turn's lock let go of
 *   (loop.c, holds.c). A multi-lock with owners' holds is used
 *   by one owner at a time, as before (see the header): one run at a time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/multilock.h>

#include "clock.h"
#include "errors_internal.h"
#include "lock_internal.h"
#include "multilock_internal.h"

struct member {
	zkl_lock *l;
	int rank;                       /* 1 for the read half of a read-write lock, else 0 */
	struct zkl_lock_listener *w;    /* ours on l, for its losses */
};

/* The detail of a member's failure, with the member's own detail, which later calls
 * overwrite (so it is copied out first). */
#define DETAIL_MAX 512

/* One acquire under way. Owned apart from the multi-lock, so that a free on the event
 * thread can leave it to its member callback (orphaned: ml NULL, read on the loop only),
 * unless that member forgets it (zkl__lock_async_forget): then it goes with the free.
 * Its fields are the multi-lock's mu's while ml is set. */
struct run {
	zkl_multilock *ml;
	zkl__owner owner;               /* whose the members' holds are; ZKL_OWNER_NONE:
	                                 * the handle's (an asynchronous acquire) */
	bool waited;                    /* a blocking acquire waits for the end, and gives
	                                 * back what was taken itself */
	zkl_lock_acquired_fn fn;        /* the handle's: the callback */
	void *fn_data;
	void (*done)(void *arg, int rc); /* an owner's not waited for */
	void *arg;
	size_t next;                    /* members [0, next) are taken; next is the one
	                                 * being taken */
	zkl_lock *current;              /* the member in flight */
	bool as_owner;                  /* it was started for the owner (start_as) */
	bool starting;                  /* its start is being called */
	bool inflight;                  /* it has been started and has not called back */
	bool canceled, cancel_sent;
	bool lost;                      /* a member taken already was lost */
	int timeout_ms;
	int64_t deadline;
	/* A waited run's: its thread starts every member (go), and runs those on clients
	 * with external_loop itself (drive): a member's end only says so (advance). */
	struct zkl__drive drive;
	bool advance;
	/* The end, for the waiting thread. */
	bool ended;
	int rc;
	char detail[DETAIL_MAX];
};

enum run_state { ML_IDLE, ML_RUNNING, ML_HELD };

struct zkl_multilock {
	zkl_lock lock;                  /* the view: mu and cv are ours, c is NULL */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum zkl_multilock_order order;
	struct member *members;
	size_t n;
	size_t cap;
	int depth;                      /* mu: owners' acquires not yet released */
	zkl__owner owner;               /* mu: the owner of the outermost, when depth > 0 */
	bool lost_told;                 /* mu: the current hold's loss has been told */
	bool releasing;                 /* mu: the handle's hold's release is under way: a
	                                 * member's loss is still the hold's */
	enum run_state state;           /* mu: ML_HELD is the handle's hold */
	struct run *run;                /* mu: while ML_RUNNING */
	zkl_client *ac;                 /* mu: the first member's client, once a run started */
	bool calling;                   /* mu: a run's callback is running */
};

#define ML(l) ((zkl_multilock *)(void *)(l))

/* The multi-lock whose acquire callback runs on this thread, and whether it freed it. */
static _Thread_local struct {
	zkl_multilock *ml;
	bool freed;
} in_callback;

static const struct zkl_lock_ops multilock_ops;

static const char *member_path(const struct member *m)
{
	return zkl_lock_path(m->l);
}

/* The chroot of l's servers ("" for none), which is part of the node it resolves to. */
static const char *member_chroot(const zkl_lock *l)
{
	const char *chroot = strchr(l->c->servers, '/');
	return !chroot || strcmp(chroot, "/") == 0 ? "" : chroot;
}

/* strcmp() of the concatenations a1 a2 and b1 b2. */
static int cmp2(const char *a1, const char *a2, const char *b1, const char *b2)
{
	for (;;) {
		if (!*a1 && a2) {
			a1 = a2;
			a2 = NULL;
		}
		if (!*b1 && b2) {
			b1 = b2;
			b2 = NULL;
		}
		if (*a1 != *b1 || !*a1)
			return (unsigned char)*a1 - (unsigned char)*b1;
		a1++;
		b1++;
	}
}

/* strcmp() of the node paths a and b resolve to: chroot, then path. */
static int resolved_cmp(const zkl_lock *a, const zkl_lock *b)
{
	return cmp2(member_chroot(a), a->path, member_chroot(b), b->path);
}

/* Whether the servers of a and b (chroot aside) name a server in common: then they are
 * one ensemble, as a server serves one. */
static bool same_ensemble(const zkl_lock *a, const zkl_lock *b)
{
	const char *sa = a->c->servers, *ea = sa + strcspn(sa, "/");
	const char *sb = b->c->servers, *eb = sb + strcspn(sb, "/");
	for (const char *p = sa; p < ea;) {
		size_t pl = strcspn(p, ",/");
		for (const char *q = sb; q < eb;) {
			size_t ql = strcspn(q, ",/");
			if (pl == ql && memcmp(p, q, pl) == 0)
				return true;
			q += ql + (q[ql] == ',');
		}
		p += pl + (p[pl] == ',');
	}
	return false;
}

/* Canonical comparison: the node path (chroot included), then write (or anything else)
 * before read. */
static int member_cmp(const struct member *a, const struct member *b)
{
	int c = resolved_cmp(a->l, b->l);
	if (c)
		return c;
	return a->rank - b->rank;
}

int zkl_multilock_new(zkl_multilock **out, enum zkl_multilock_order order)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "out is NULL");
	*out = NULL;
	if (order != ZKL_MULTILOCK_CANONICAL && order != ZKL_MULTILOCK_AS_ADDED)
		return zkl__fail(ZKL_EINVAL, "unknown multilock order %d", (int)order);
	zkl_multilock *ml = calloc(1, sizeof *ml);
	if (!ml)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	if (zkl__lock_init(&ml->lock, &multilock_ops, "multilock", NULL, "") != 0) {
		free(ml);
		return ZKL_ENOMEM;
	}
	pthread_mutex_init(&ml->mu, NULL);
	pthread_cond_init(&ml->cv, NULL);
	ml->lock.mu = &ml->mu;
	ml->lock.cv = &ml->cv;
	ml->order = order;
	*out = ml;
	return 0;
}

zkl_lock *zkl_multilock_lock(zkl_multilock *ml)
{
	return ml ? &ml->lock : NULL;
}

/* The time the next member gets within one deadline for all: what is left of it, or
 * timeout_ms itself (-1, 0); false once it has passed. */
static bool member_time(int timeout_ms, int64_t deadline, int *t)
{
	*t = timeout_ms;
	if (timeout_ms <= 0)
		return true;
	int64_t left = deadline - zkl__now_ms();
	*t = left > 0 ? (int)left : 0;
	return left > 0;
}

/* Releases one level of owner's hold of member m (ZKL_OWNER_NONE: the handle's). */
static int member_release(struct member *m, zkl__owner owner)
{
	if (owner != ZKL_OWNER_NONE && m->l->ops->release_as)
		return m->l->ops->release_as(m->l, owner);
	return zkl_lock_release(m->l);
}

/* Whether owner (ZKL_OWNER_NONE: the handle) holds member m, not lost. */
static bool member_held(struct member *m, zkl__owner owner)
{
	if (owner != ZKL_OWNER_NONE && m->l->ops->held_as)
		return m->l->ops->held_as(m->l, owner);
	return zkl_lock_is_held(m->l);
}

/* Releases members [0, count) of owner's in reverse order. Returns the first error,
 * with a detail naming its member. */
static int release_members(zkl_multilock *ml, size_t count, zkl__owner owner)
{
	int first = 0;
	char detail[DETAIL_MAX] = "";
	for (size_t i = count; i-- > 0;) {
		struct member *m = &ml->members[i];
		int rc = member_release(m, owner);
		if (rc && !first) {
			first = rc;
			snprintf(detail, sizeof detail, "releasing multilock member %zu of %zu (%s): %s",
			         i + 1, ml->n, member_path(m), zkl_last_error());
		}
	}
	if (first)
		return zkl__fail(first, "%s", detail);
	zkl__clear_error();
	return 0;
}

/* Releases one level of the owner's hold. */
static int release_owned(zkl_multilock *ml, zkl__owner owner)
{
	int rc = release_members(ml, ml->n, owner);
	pthread_mutex_lock(&ml->mu);
	if (ml->depth > 0)
		ml->depth--;
	pthread_mutex_unlock(&ml->mu);
	return rc;
}

/* A member's hold was lost (its client's event thread, no lock held). */
static void member_lost(zkl_lock *l, int reason, void *ctx)
{
	(void)l;
	zkl_multilock *ml = ctx;
	pthread_mutex_lock(&ml->mu);
	bool tell = (ml->depth > 0 || ml->state == ML_HELD || ml->releasing) && !ml->lost_told;
	if (tell)
		ml->lost_told = true;
	if (ml->run)
		ml->run->lost = true;
	pthread_mutex_unlock(&ml->mu);
	if (tell)
		zkl__lock_report_lost(&ml->lock, reason);
}

/* Waits (no lock held, on a thread that does not run the loop of the run's client)
 * until no run is under way and its callback has returned (finish() tells). */
static void wait_run(zkl_multilock *ml)
{
	pthread_mutex_lock(&ml->mu);
	while (ml->state == ML_RUNNING || ml->calling)
		pthread_cond_wait(&ml->cv, &ml->mu);
	pthread_mutex_unlock(&ml->mu);
}

static void multilock_cancel(zkl_lock *lk);

static void multilock_free_later(void *ml)
{
	zkl_multilock_free(ml);
}

void zkl_multilock_free(zkl_multilock *ml)
{
	if (!ml || zkl__lock_defer_free(&ml->lock, multilock_free_later, ml))
		return;
	/* A run under way ends with ZKL_ECANCELED, then is waited for; on a thread that runs
	 * its loop it is left to its member callback, and its callback never runs. */
	multilock_cancel(&ml->lock);
	pthread_mutex_lock(&ml->mu);
	zkl_client *c = ml->ac;
	pthread_mutex_unlock(&ml->mu);
	/* On a thread that runs the loop nothing waits for the server. */
	bool on_loop = c && zkl__is_loop_thread(c);
	pthread_mutex_lock(&ml->mu);
	size_t held = 0;
	zkl__owner owner = ZKL_OWNER_NONE;
	struct run *orphan = NULL;
	zkl_lock *forget = NULL;
	if (ml->state == ML_RUNNING && on_loop && !ml->run->waited) {
		orphan = ml->run;
		orphan->ml = NULL;
		ml->run = NULL;
		held = orphan->next;
		owner = orphan->owner;
		if (orphan->inflight && !orphan->as_owner)
			forget = orphan->current;
		ml->state = ML_IDLE;
	}
	if (in_callback.ml == ml)
		in_callback.freed = true;
	pthread_mutex_unlock(&ml->mu);
	/* The member being taken calls back with NULL from now on, so the run can go now:
	 * that member may be freed before it calls back, and then it never does. A member
	 * taken for an owner calls back with the run, which sees it orphaned and goes. */
	if (forget && zkl__lock_async_forget(forget, orphan))
		free(orphan);
	if (held > 0)
		release_members(ml, held, owner);
	if (c && !on_loop)
		wait_run(ml);
	pthread_mutex_lock(&ml->mu);
	bool handle_held = ml->state == ML_HELD;
	ml->state = ML_IDLE;
	pthread_mutex_unlock(&ml->mu);
	if (handle_held)
		release_members(ml, ml->n, ZKL_OWNER_NONE);
	while (ml->depth > 0)
		release_owned(ml, ml->owner);
	for (size_t i = 0; i < ml->n; i++) {
		zkl__lock_unlisten(ml->members[i].l, ml->members[i].w);
		free(ml->members[i].w);
	}
	free(ml->members);
	zkl__lock_dispose(&ml->lock);
	pthread_cond_destroy(&ml->cv);
	pthread_mutex_destroy(&ml->mu);
	free(ml);
}

static int add_member(zkl_multilock *ml, struct member m)
{
	pthread_mutex_lock(&ml->mu);
	bool busy = ml->depth > 0 || ml->state != ML_IDLE;
	pthread_mutex_unlock(&ml->mu);
	if (busy)
		return zkl__fail(ZKL_EBUSY, "cannot add %s to a multilock that is held or being "
		                "acquired", member_path(&m));
	for (size_t i = 0; i < ml->n; i++) {
		const zkl_lock *o = ml->members[i].l;
		if (o == m.l)
			return zkl__fail(ZKL_EINVAL, "%s is already a member of this multilock",
			                member_path(&m));
		if (resolved_cmp(o, m.l) != 0 || !same_ensemble(o, m.l))
			continue;
		/* Two handles on one node path of one ensemble (a chroot's and a plain client's
		 * alike: the path a lock resolves to is its chroot's and its own) queue behind
		 * each other: the acquire would wait for itself. The two halves of one read-write lock (they share its
		 * mutex) are taken write first, the read half as a downgrade: not in the order
		 * added with the read half first, which would be an upgrade. */
		bool halves = o->mu == m.l->mu && o->kind != m.l->kind;
		if (!halves)
			return zkl__fail(ZKL_EINVAL, "%s%s (a %s) is the node of member %zu (%s%s, a "
			                "%s, another handle): a multilock of both would wait for "
			                "itself", member_chroot(m.l), member_path(&m), m.l->kind, i + 1,
			                member_chroot(o), o->path, o->kind);
		if (ml->order == ZKL_MULTILOCK_AS_ADDED && m.rank == 0)
			return zkl__fail(ZKL_EINVAL, "%s: the write half added after the read half of "
			                "the same read-write lock, in the order added, would be taken "
			                "as an upgrade, which never succeeds (add the write half "
			                "first, or use the canonical order)", member_path(&m));
	}
	if (ml->n == ml->cap) {
		size_t cap = ml->cap ? ml->cap * 2 : 4;
		struct member *p = realloc(ml->members, cap * sizeof *p);
		if (!p)
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		ml->members = p;
		ml->cap = cap;
	}
	if (!(m.w = calloc(1, sizeof *m.w)))
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	m.w->lost = member_lost;
	m.w->ctx = ml;
	/* Insert after every member that sorts before or equal to it (stable). */
	size_t at = ml->n;
	if (ml->order == ZKL_MULTILOCK_CANONICAL)
		while (at > 0 && member_cmp(&ml->members[at - 1], &m) > 0)
			at--;
	memmove(&ml->members[at + 1], &ml->members[at], (ml->n - at) * sizeof m);
	ml->members[at] = m;
	ml->n++;
	zkl__lock_listen(m.l, m.w);
	return 0;
}

int zkl_multilock_add(zkl_multilock *ml, zkl_lock *l)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (!l->c)
		return zkl__fail(ZKL_EINVAL, "a multilock cannot be a member of a multilock: add "
		                "its members instead");
	struct member mb = { .l = l, .rank = strcmp(zkl_lock_kind(l), "read") == 0 ? 1 : 0 };
	return add_member(ml, mb);
}

/* ---- the run: one path for every acquire ---- */

/* Runs the end of a run that the loop ends (the handle's mutex held on entry, released):
 * the state is settled already; calls the callback once, or the owner's done. */
static void finish(zkl_multilock *ml, struct run *run, int rc, const char *detail)
{
	zkl_lock_acquired_fn fn = run->fn;
	void *data = run->fn_data;
	void (*done)(void *, int) = run->done;
	void *arg = run->arg;
	ml->calling = true;
	pthread_mutex_unlock(&ml->mu);
	free(run);
	if (rc != 0)
		zkl__fail(rc, "%s", detail);
	else
		zkl__clear_error();
	in_callback.ml = ml;
	in_callback.freed = false;
	if (fn)
		fn(&ml->lock, rc, data);
	else
		done(arg, rc);
	in_callback.ml = NULL;
	if (in_callback.freed)
		return;
	pthread_mutex_lock(&ml->mu);
	ml->calling = false;
	pthread_cond_broadcast(&ml->cv);
	pthread_mutex_unlock(&ml->mu);
}

/* The run is over (the handle's mutex held): the hold it took is the handle's or its
 * owner's, or there is none; another run may start. */
static void settle(zkl_multilock *ml, struct run *run, int rc)
{
	ml->run = NULL;
	ml->state = ML_IDLE;
	if (rc == 0 && run->owner == ZKL_OWNER_NONE) {
		ml->state = ML_HELD;
		ml->lost_told = false;
	} else if (rc == 0 && ml->depth++ == 0) {
		ml->owner = run->owner;
		ml->lost_told = false;
	}
	pthread_cond_broadcast(&ml->cv);
}

/* A run ends with rc (the handle's mutex held on entry, released). A success holds at
 * once, so that a loss from here on is the hold's. A waited run hands the rest to its
 * waiting thread; at its start (starter), one that cannot go on returns its result to the
 * starter instead of calling back. Returns the result for the starter. */
static int end(zkl_multilock *ml, struct run *run, int rc, const char *detail, bool starter)
{
	size_t taken = run->next;
	if (rc == 0)
		settle(ml, run, 0);
	if (run->waited) {
		run->ended = true;
		run->rc = rc;
		snprintf(run->detail, sizeof run->detail, "%s", detail);
		pthread_cond_broadcast(&ml->cv);
		pthread_mutex_unlock(&ml->mu);
		return 0;
	}
	if (rc != 0) {
		/* All or nothing: give back what was taken, newest first, then tell. */
		pthread_mutex_unlock(&ml->mu);
		release_members(ml, taken, run->owner);
		pthread_mutex_lock(&ml->mu);
		settle(ml, run, rc);
	}
	if (starter) {
		pthread_mutex_unlock(&ml->mu);
		free(run);
		return rc != 0 ? zkl__fail(rc, "%s", detail) : 1;
	}
	finish(ml, run, rc, detail);
	return 0;
}

/* A member's start has returned 0 (the handle's mutex held): a cancel that came while it
 * was being started reaches it now; then member callbacks may go on. */
static void started(zkl_multilock *ml, struct run *run, zkl_lock *l)
{
	while (run->canceled && !run->cancel_sent) {
		run->cancel_sent = true;
		pthread_mutex_unlock(&ml->mu);
		zkl_lock_cancel(l);
		pthread_mutex_lock(&ml->mu);
	}
	run->starting = false;
	run->inflight = true;
	pthread_cond_broadcast(&ml->cv);
}

static void member_done(void *arg, int rc);

static void member_acquired(zkl_lock *l, int rc, void *arg)
{
	(void)l;
	member_done(arg, rc);
}

/* Starts member m of run for t ms (no lock held): 0, 1 (the owner re-entered it at
 * once), or a ZKL_E* code. */
static int member_start(struct run *run, struct member *m, int t)
{
	if (run->as_owner)
		return m->l->ops->start_as(m->l, run->owner, t, member_done, run);
	return zkl_lock_acquire_async(m->l, t, member_acquired, run);
}

/* Takes the members from run->next on (the handle's mutex held on entry, released), until
 * one is in flight (its end goes on from there) or the run ends. Returns end()'s result,
 * or 0. */
static int go(zkl_multilock *ml, struct run *run, bool starter)
{
	char detail[DETAIL_MAX] = "";
	int rc;
	bool checked = false;
	for (;;) {
		size_t i = run->next;
		if (run->canceled) {
			rc = ZKL_ECANCELED;
			snprintf(detail, sizeof detail, "the acquire of the multilock was canceled "
			         "(after member %zu of %zu)", i, ml->n);
			break;
		}
		/* A loss fails the run once every member is taken (then all are given back), as
		 * a loss told later than the last member's end would. */
		if (i == ml->n && run->lost) {
			rc = ZKL_ELOST;
			snprintf(detail, sizeof detail, "a multilock member was lost while the others "
			         "were taken");
			break;
		}
		if (i == ml->n && checked) {
			rc = 0;
			break;
		}
		if (i == ml->n) {
			/* A member's loss may be known (its node deleted, its session gone) and not
			 * yet told (member_lost() comes on a later turn): the whole is then not
			 * held. A loss told meanwhile is seen above. */
			pthread_mutex_unlock(&ml->mu);
			size_t lost = ml->n;
			for (size_t k = 0; k < ml->n && lost == ml->n; k++)
				if (!member_held(&ml->members[k], run->owner))
					lost = k;
			pthread_mutex_lock(&ml->mu);
			if (lost < ml->n) {
				rc = ZKL_ELOST;
				snprintf(detail, sizeof detail, "multilock member %zu of %zu (%s) was lost "
				         "while the others were taken", lost + 1, ml->n,
				         member_path(&ml->members[lost]));
				break;
			}
			checked = true;
			continue;
		}
		struct member *m = &ml->members[i];
		int t;
		if (!member_time(run->timeout_ms, run->deadline, &t)) {
			rc = ZKL_ETIMEDOUT;
			snprintf(detail, sizeof detail, "the deadline of %d ms passed before multilock "
			         "member %zu of %zu (%s)", run->timeout_ms, i + 1, ml->n,
			         member_path(m));
			break;
		}
		run->current = m->l;
		run->as_owner = run->owner != ZKL_OWNER_NONE && m->l->ops->start_as;
		run->starting = true;
		run->cancel_sent = false;
		pthread_mutex_unlock(&ml->mu);
		if (run->waited)
			zkl__drive_begin(&run->drive);
		rc = member_start(run, m, t);
		if (run->waited)
			zkl__drive_end(&run->drive);
		if (rc < 0)
			snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
			         i + 1, ml->n, member_path(m), zkl_last_error());
		pthread_mutex_lock(&ml->mu);
		if (rc == 0) {
			started(ml, run, m->l);
			pthread_mutex_unlock(&ml->mu);
			return 0;
		}
		run->starting = false;
		pthread_cond_broadcast(&ml->cv);
		if (rc < 0)
			break;
		run->next++; /* re-entered */
	}
	return end(ml, run, rc, detail, starter);
}

/* A member's acquire ended (its event thread, no lock held). */
static void member_done(void *arg, int rc)
{
	struct run *run = arg;
	zkl_multilock *ml = run ? run->ml : NULL;
	if (!ml) {
		/* The multi-lock was freed on the loop meanwhile: give back what this member
		 * won, and end (the run went with the free if it is NULL here). */
		if (run && rc == 0) {
			struct member m = {.l = run->current};
			(void)member_release(&m, run->as_owner ? run->owner : ZKL_OWNER_NONE);
		}
		free(run);
		return;
	}
	char err[DETAIL_MAX / 2] = "";
	if (rc != 0)
		snprintf(err, sizeof err, "%s", zkl_last_error());
	pthread_mutex_lock(&ml->mu);
	while (run->starting)
		pthread_cond_wait(&ml->cv, &ml->mu);
	run->inflight = false;
	if (rc != 0) {
		char detail[DETAIL_MAX];
		snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
		         run->next + 1, ml->n, member_path(&ml->members[run->next]), err);
		end(ml, run, rc, detail, false);
		return;
	}
	run->next++;
	if (run->waited) {
		/* Its thread starts the next member, so that it runs it if need be. */
		run->advance = true;
		pthread_cond_broadcast(&ml->cv);
		pthread_mutex_unlock(&ml->mu);
		return;
	}
	go(ml, run, false);
}

/* Starts a run (arguments checked). For the handle (owner ZKL_OWNER_NONE, fn) or an
 * owner (done, or waited). Returns 0 (under way, or for a waited run ended already),
 * 1 (an owner re-entered every member at once: done never runs), or a ZKL_E* code
 * with nothing taken and nothing called. *out: the run, for a waited one. */
static int run_start(zkl_multilock *ml, zkl__owner owner, bool waited, int timeout_ms,
                     zkl_lock_acquired_fn fn, void *fn_data, void (*done)(void *, int),
                     void *arg, struct run **out)
{
	if (ml->n == 0)
		return zkl__fail(ZKL_EINVAL, "the multilock has no members");
	zkl_client *c = ml->members[0].l->c;
	for (size_t i = 1; i < ml->n && !waited; i++)
		if (ml->members[i].l->c != c)
			return zkl__fail(ZKL_EINVAL, "multilock members %s and %s are on different "
			                "clients: an asynchronous acquire takes its members on one "
			                "client's event thread", member_path(&ml->members[0]),
			                member_path(&ml->members[i]));
	/* The handle's holds are not an owner's: the read half of a read-write lock whose
	 * write half is held is no downgrade then, and would wait for it. */
	for (size_t i = 0; i < ml->n && owner == ZKL_OWNER_NONE; i++)
		for (size_t k = i + 1; k < ml->n; k++)
			if (ml->members[i].rank != ml->members[k].rank &&
			    ml->members[i].l->mu == ml->members[k].l->mu &&
			    strcmp(member_path(&ml->members[i]), member_path(&ml->members[k])) == 0)
				return zkl__fail(ZKL_EINVAL, "multilock members %zu and %zu are both "
				                "halves of the read-write lock %s: an asynchronous "
				                "acquire cannot take the read half as a downgrade, and "
				                "would wait for itself (use zkl_multilock_acquire(), or "
				                "one half)", i + 1, k + 1, member_path(&ml->members[i]));
	struct run *run = calloc(1, sizeof *run);
	if (!run)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	pthread_mutex_lock(&ml->mu);
	int rc = 0;
	if (ml->state != ML_IDLE)
		rc = zkl__fail(ZKL_EBUSY, "an asynchronous acquire of the multilock is under way or "
		              "holds it: release it first");
	else if (owner == ZKL_OWNER_NONE && ml->depth > 0)
		rc = zkl__fail(ZKL_EBUSY, "the multilock is held or being taken by a blocking "
		              "acquire: release it first");
	if (rc != 0) {
		pthread_mutex_unlock(&ml->mu);
		free(run);
		return rc;
	}
	*run = (struct run){
		.ml = ml,
		.owner = owner,
		.waited = waited,
		.fn = fn,
		.fn_data = fn_data,
		.done = done,
		.arg = arg,
		.timeout_ms = timeout_ms,
		.deadline = zkl__deadline(timeout_ms),
	};
	ml->run = run;
	ml->state = ML_RUNNING;
	ml->ac = c;
	if (out)
		*out = run;
	return go(ml, run, true);
}

static int multilock_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	return run_start(ML(lk), ZKL_OWNER_NONE, false, timeout_ms, fn, data, NULL, NULL, NULL);
}

int zkl__multilock_start_as(zkl_multilock *ml, zkl__owner owner, int timeout_ms,
                           void (*done)(void *arg, int rc), void *arg)
{
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	return run_start(ml, owner, false, timeout_ms, NULL, NULL, done, arg, NULL);
}

/* The blocking acquire: the calling thread's run, and a wait for its end. */
static int multilock_acquire(zkl_lock *lk, int timeout_ms)
{
	zkl_multilock *ml = ML(lk);
	if (ml->n == 0)
		return zkl__fail(ZKL_EINVAL, "the multilock has no members");
	/* On a member's loop the acquisition of that member could never run: say so before
	 * anything is taken. */
	for (size_t i = 0; i < ml->n; i++) {
		if (zkl__is_loop_thread(ml->members[i].l->c))
			return zkl__fail(ZKL_EDEADLK, "cannot wait for multilock member %zu of %zu (%s) "
			                "on the thread that runs its client's loop (in a callback, or "
			                "the application's loop thread): nothing would run the "
			                "acquisition", i + 1, ml->n, member_path(&ml->members[i]));
	}
	const zkl__owner self = zkl__owner_self();
	struct run *run;
	int rc = run_start(ml, self, true, timeout_ms, NULL, NULL, NULL, NULL, &run);
	if (rc != 0)
		return rc;
	/* Start each member when the one before has ended, and run the member in flight
	 * if nothing else will (its client's loop is the application's). */
	pthread_mutex_lock(&ml->mu);
	while (!run->ended) {
		if (run->advance) {
			run->advance = false;
			go(ml, run, false);
			pthread_mutex_lock(&ml->mu);
		} else if (run->drive.job) {
			pthread_mutex_unlock(&ml->mu);
			zkl__drive_run(&run->drive);
			pthread_mutex_lock(&ml->mu);
		} else {
			pthread_cond_wait(&ml->cv, &ml->mu);
		}
	}
	pthread_mutex_unlock(&ml->mu);
	rc = run->rc;
	if (rc != 0) {
		/* All or nothing: give back what was taken, newest first, on this thread. */
		(void)release_members(ml, run->next, self);
		pthread_mutex_lock(&ml->mu);
		settle(ml, run, rc);
		pthread_mutex_unlock(&ml->mu);
		rc = zkl__fail(rc, "%s", run->detail);
		free(run);
		return rc;
	}
	free(run);
	/* Members that track how their holders leave read and write their notes now, as
	 * their own blocking acquire does at its grant. */
	for (size_t i = 0; i < ml->n; i++) {
		if ((rc = zkl__previous_at_grant(ml->members[i].l)) == 0)
			continue;
		char detail[DETAIL_MAX];
		snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
		         i + 1, ml->n, member_path(&ml->members[i]), zkl_last_error());
		for (size_t k = ml->n; k-- > 0;) /* member i gave its hold back */
			if (k != i)
				(void)member_release(&ml->members[k], self);
		pthread_mutex_lock(&ml->mu);
		ml->depth--;
		pthread_mutex_unlock(&ml->mu);
		return zkl__fail(rc, "%s", detail);
	}
	zkl__clear_error();
	return 0;
}

int zkl_multilock_acquire(zkl_multilock *ml, int timeout_ms)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	return zkl_lock_acquire(&ml->lock, timeout_ms);
}

static void multilock_cancel(zkl_lock *lk)
{
	zkl_multilock *ml = ML(lk);
	pthread_mutex_lock(&ml->mu);
	zkl_lock *target = NULL;
	struct run *run = ml->state == ML_RUNNING ? ml->run : NULL;
	if (run) {
		run->canceled = true;
		if (run->inflight && !run->cancel_sent) {
			run->cancel_sent = true;
			target = run->current;
		}
	}
	pthread_mutex_unlock(&ml->mu);
	if (target)
		zkl_lock_cancel(target);
}

/* ---- the other verbs ---- */

/* Releases one level of owner's hold, else, with any, the handle's hold. */
static int release_as(zkl_multilock *ml, zkl__owner owner, bool any)
{
	pthread_mutex_lock(&ml->mu);
	bool own = ml->depth > 0 && ml->owner == owner;
	bool handle = !own && any && ml->state == ML_HELD;
	bool other = ml->depth > 0;
	if (handle) {
		ml->state = ML_IDLE;
		ml->releasing = true;
	}
	pthread_mutex_unlock(&ml->mu);
	if (own)
		return release_owned(ml, owner);
	if (handle) {
		int rc = release_members(ml, ml->n, ZKL_OWNER_NONE);
		pthread_mutex_lock(&ml->mu);
		ml->releasing = false;
		pthread_mutex_unlock(&ml->mu);
		return rc;
	}
	if (other)
		return zkl__fail(ZKL_ENOTOWNER, "the multilock is held by another %s",
		                any ? "thread" : "owner");
	return zkl__fail(ZKL_ENOTHELD, "the multilock is not held");
}

static int multilock_release(zkl_lock *lk)
{
	return release_as(ML(lk), zkl__owner_self(), true);
}

int zkl__multilock_release_as(zkl_multilock *ml, zkl__owner owner)
{
	zkl__clear_error();
	return release_as(ml, owner, false);
}

int zkl_multilock_release(zkl_multilock *ml)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	return zkl_lock_release(&ml->lock);
}

/* Whether the multi-lock is held, by owner or (ZKL_OWNER_NONE) by the handle, and every
 * member still is. */
static bool held_by(zkl_multilock *ml, zkl__owner owner, bool any)
{
	pthread_mutex_lock(&ml->mu);
	bool held = ml->n > 0 && ((ml->depth > 0 && (any || ml->owner == owner)) ||
	                          (any && ml->state == ML_HELD));
	pthread_mutex_unlock(&ml->mu);
	for (size_t i = 0; held && i < ml->n; i++)
		if (!(any ? zkl_lock_is_held(ml->members[i].l) : member_held(&ml->members[i], owner)))
			held = false;
	return held;
}

static bool multilock_is_held(zkl_lock *lk)
{
	return held_by(ML(lk), ZKL_OWNER_NONE, true);
}

bool zkl__multilock_held_as(zkl_multilock *ml, zkl__owner owner)
{
	return held_by(ml, owner, false);
}

bool zkl_multilock_is_held(zkl_multilock *ml)
{
	return ml && multilock_is_held(&ml->lock);
}

static int64_t multilock_token(zkl_lock *lk)
{
	(void)lk;
	return zkl__fail(ZKL_ENOTSUP, "a multilock has no fencing token of its own: each "
	                "member's node has one (ask the member with zkl_lock_token)");
}

static bool multilock_holds_async(zkl_lock *lk)
{
	zkl_multilock *ml = ML(lk);
	pthread_mutex_lock(&ml->mu);
	bool held = ml->state == ML_HELD;
	pthread_mutex_unlock(&ml->mu);
	return held;
}

static int multilock_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	(void)lk;
	*out = NULL;
	*count = 0;
	return zkl__fail(ZKL_ENOTSUP, "a multilock has no queue of its own: each member has "
	                "one (list the member's participants)");
}

/* Node data goes to every member present (each keeps its own). */
static int multilock_set_data(zkl_lock *lk, const void *data, size_t len)
{
	zkl_multilock *ml = ML(lk);
	for (size_t i = 0; i < ml->n; i++) {
		int rc = zkl_lock_set_data(ml->members[i].l, data, len);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static const struct zkl_lock_ops multilock_ops = {
	.acquire = multilock_acquire,
	.start = multilock_start,
	.release = multilock_release,
	.cancel = multilock_cancel,
	.is_held = multilock_is_held,
	.token = multilock_token,
	.node = NULL, /* zkl_lock_node(): ZKL_ENOTSUP */
	.holds_async = multilock_holds_async,
	.participants = multilock_participants,
	.set_data = multilock_set_data,
};
