/* zkl_multilock: several locks held as one, all or nothing.
 *
 * Design notes
 * - Pure composition over the shared verbs of its members (zkl_lock_*): the multi-lock
 *   never touches ZooKeeper itself, so every member keeps its own queue, watch, lost
 *   reports and fencing token.
 * - Order. Members are kept in the order they will be taken. In canonical order an add
 *   inserts the member after every member that sorts before or equal to it (an insertion
 *   sort, hence stable): by path with strcmp, and for equal paths the read half of a
 *   read-write lock after anything else, so that a multi-lock over both halves of one
 *   rwlock takes the write half first and the read half as a downgrade (the other way
 *   round would be an upgrade, ZKL_EDEADLK). Two multi-locks over the same locks, built
 *   in any order, therefore take them in the same order and cannot deadlock.
 * - One deadline for the whole acquire: each member gets the time that is left (or -1,
 *   or 0 to try once); a member reached after the deadline is not tried. On any failure
 *   the members already taken are released in reverse order, so nothing stays held.
 * - Two kinds of hold, never at once. A blocking acquire takes the members' blocking
 *   holds: held by the calling thread, nested like Curator's InterProcessMultiLock
 *   (acquiring again re-enters the mutex members; a semaphore member is not reentrant:
 *   it takes one more lease, so a multi-lock with a semaphore-mutex times out instead),
 *   each release undoing one acquire; the thread of the first level is the owner, and
 *   only it may release, since its mutex members refuse anyone else. An asynchronous
 *   acquire (the view's acquire_async) chains the members' own asynchronous acquires:
 *   member i's callback, on the loop, starts member i + 1 with what is left of the
 *   deadline; its hold is the handle's, not reentrant, released by any thread. The
 *   blocking acquire is not a wait on the asynchronous one: the members' asynchronous
 *   holds are not per thread, so they could neither nest nor take the read half of a
 *   rwlock as a downgrade of its write half, which a multi-lock over both halves needs.
 * - One client for an asynchronous acquire. Every member callback then runs on one
 *   event thread, the final callback too, and the members given back on a failure are
 *   released on their own client's loop, where a release never waits. Across clients a
 *   release made on one client's loop could wait for another client's loop (with
 *   confirm_release), and two such chains could wait for each other.
 * - Cancel. The member in flight is cancelled with zkl_lock_cancel(); while a member's
 *   acquire is being started (between the two, no lock held) a cancel only says so, and
 *   the starter cancels the member once its start has returned. A member callback that
 *   comes in meanwhile (on the loop, while a thread starts the first member) waits for
 *   the starter: member callbacks run on the loop after their start returned, never
 *   inside it.
 * - Lost members. The multi-lock listens to each member (zkl__lock_listen), so the
 *   member's own lost callback stays its owner's; a loss while held is told once on the
 *   view's lost callback; a loss while an acquire, asynchronous or blocking, is still
 *   taking the others fails it with ZKL_ELOST, and every member taken is given back.
 * - Locks: ml->mu guards the state that the loop and other threads share. Member verbs
 *   are never called with ml->mu held; a free that waits for the loop takes the client's
 *   mutex first, then ml->mu (the only nesting). A multi-lock with only blocking holds is
 *   used by one thread at a time, as before (see the header). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/multilock.h>

#include "clock.h"
#include "errors_internal.h"
#include "lock_internal.h"

struct member {
	zkl_lock *l;
	int rank;                       /* 1 for the read half of a read-write lock, else 0 */
	struct zkl_lock_listener *w;    /* ours on l, for its losses */
};

/* One asynchronous acquire. Owned apart from the multi-lock, so that a free on the event
 * thread can leave it to its member callback (orphaned: ml NULL, read on the loop only),
 * unless that member forgets it (zkl__lock_async_forget): then it goes with the free. */
struct run {
	zkl_multilock *ml;
};

enum async_state { ML_IDLE, ML_RUNNING, ML_HELD };

struct zkl_multilock {
	zkl_lock lock;                  /* the view: mu and cv are ours, c is NULL */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum zkl_multilock_order order;
	struct member *members;
	size_t n;
	size_t cap;
	int depth;                      /* mu: blocking acquires not yet released */
	int taking;                     /* mu: blocking acquires under way */
	bool taking_lost;               /* mu: a member was lost while the outermost one
	                                 * took the others */
	zkl__owner owner;               /* mu: the owner (thread) of the outermost, when
	                                 * depth > 0 */
	bool lost_told;                 /* mu: the current hold's loss has been told */
	bool releasing;                 /* mu: the asynchronous hold's release is under
	                                 * way: a member's loss is still the hold's */
	/* The asynchronous acquire (mu). */
	enum async_state astate;
	struct run *run;                /* while ML_RUNNING */
	zkl_client *ac;                 /* the members' client, once one was started */
	size_t next;                    /* the member being taken */
	bool starting;                  /* its acquire_async is being called */
	bool inflight;                  /* it has been started and has not called back */
	bool canceled, cancel_sent;
	bool chain_lost;                /* a member taken already was lost */
	int timeout_ms;
	int64_t deadline;
	zkl_lock_acquired_fn fn;
	void *fn_data;
	bool calling;                   /* fn is running */
};

#define ML(l) ((zkl_multilock *)(void *)(l))

/* The multi-lock whose acquire callback runs on this thread, and whether it freed it. */
static _Thread_local struct {
	zkl_multilock *ml;
	bool freed;
} in_callback;

/* The detail of a member's failure, with the member's own detail, which later calls
 * overwrite (so it is copied out first). */
#define DETAIL_MAX 512

static const struct zkl_lock_ops multilock_ops;

static const char *member_path(const struct member *m)
{
	return zkl_lock_path(m->l);
}

/* Canonical comparison: path, then write (or anything else) before read. */
static int member_cmp(const struct member *a, const struct member *b)
{
	int c = strcmp(member_path(a), member_path(b));
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

/* Releases members [0, count) in reverse order. Returns the first error, with a detail
 * naming its member. */
static int release_members(zkl_multilock *ml, size_t count)
{
	int first = 0;
	char detail[DETAIL_MAX] = "";
	for (size_t i = count; i-- > 0;) {
		struct member *m = &ml->members[i];
		int rc = zkl_lock_release(m->l);
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

/* Releases one level of the blocking hold. */
static int release_blocking(zkl_multilock *ml)
{
	int rc = release_members(ml, ml->n);
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
	bool tell = (ml->depth > 0 || ml->astate == ML_HELD || ml->releasing) && !ml->lost_told;
	if (tell)
		ml->lost_told = true;
	if (ml->astate == ML_RUNNING)
		ml->chain_lost = true;
	if (ml->taking > 0 && ml->depth == 0)
		ml->taking_lost = true;
	pthread_mutex_unlock(&ml->mu);
	if (tell)
		zkl__lock_report_lost(&ml->lock, reason);
}

/* Waits (no lock held, on a thread that does not run the loop of the acquire's client)
 * until no asynchronous acquire runs and its callback has returned (finish() tells). */
static void wait_async(zkl_multilock *ml)
{
	pthread_mutex_lock(&ml->mu);
	while (ml->astate == ML_RUNNING || ml->calling)
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
	/* An asynchronous acquire under way ends with ZKL_ECANCELED, then is waited for; on
	 * a thread that runs its loop it is left to its member callback, and its callback
	 * never runs. */
	multilock_cancel(&ml->lock);
	pthread_mutex_lock(&ml->mu);
	zkl_client *c = ml->ac;
	pthread_mutex_unlock(&ml->mu);
	/* On a thread that runs the loop nothing waits for the server. */
	bool on_loop = c && zkl__is_loop_thread(c);
	pthread_mutex_lock(&ml->mu);
	size_t held = 0;
	struct run *orphan = NULL;
	zkl_lock *inflight = NULL;
	if (ml->astate == ML_RUNNING && on_loop) {
		orphan = ml->run;
		orphan->ml = NULL;
		ml->run = NULL;
		held = ml->next;
		if (ml->inflight)
			inflight = ml->members[ml->next].l;
		ml->astate = ML_IDLE;
	}
	if (in_callback.ml == ml)
		in_callback.freed = true;
	pthread_mutex_unlock(&ml->mu);
	/* The member being taken calls back with NULL from now on, so the run can go now:
	 * that member may be freed before it calls back, and then it never does. */
	if (inflight && zkl__lock_async_forget(inflight, orphan))
		free(orphan);
	if (held > 0)
		release_members(ml, held);
	if (c && !on_loop)
		wait_async(ml);
	pthread_mutex_lock(&ml->mu);
	bool async_held = ml->astate == ML_HELD;
	ml->astate = ML_IDLE;
	pthread_mutex_unlock(&ml->mu);
	if (async_held)
		release_members(ml, ml->n);
	while (ml->depth > 0)
		release_blocking(ml);
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
	bool busy = ml->depth > 0 || ml->taking > 0 || ml->astate != ML_IDLE;
	pthread_mutex_unlock(&ml->mu);
	if (busy)
		return zkl__fail(ZKL_EBUSY, "cannot add %s to a multilock that is held or being "
		                "acquired", member_path(&m));
	for (size_t i = 0; i < ml->n; i++) {
		const zkl_lock *o = ml->members[i].l;
		if (o == m.l)
			return zkl__fail(ZKL_EINVAL, "%s is already a member of this multilock",
			                member_path(&m));
		if (strcmp(o->path, m.l->path) != 0 || strcmp(o->c->servers, m.l->c->servers) != 0)
			continue;
		/* Two handles on one path of one ensemble queue behind each other: the acquire
		 * would wait for itself. The two halves of one read-write lock (they share its
		 * mutex) are taken write first, the read half as a downgrade: not in the order
		 * added with the read half first, which would be an upgrade. */
		bool halves = o->mu == m.l->mu && o->kind != m.l->kind;
		if (!halves)
			return zkl__fail(ZKL_EINVAL, "%s (a %s) is on the same path as member %zu (a "
			                "%s, another handle): a multilock of both would wait for "
			                "itself", member_path(&m), m.l->kind, i + 1, o->kind);
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

/* ---- blocking ---- */

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
	pthread_mutex_lock(&ml->mu);
	bool busy = ml->astate != ML_IDLE;
	if (!busy && ml->taking++ == 0 && ml->depth == 0)
		ml->taking_lost = false;
	pthread_mutex_unlock(&ml->mu);
	if (busy)
		return zkl__fail(ZKL_EBUSY, "an asynchronous acquire of the multilock is under way "
		                "or holds it: release it first");
	int64_t deadline = zkl__deadline(timeout_ms);
	char detail[DETAIL_MAX];
	size_t taken = 0;
	int rc = 0;
	for (; taken < ml->n; taken++) {
		struct member *m = &ml->members[taken];
		int t;
		if (!member_time(timeout_ms, deadline, &t)) {
			rc = ZKL_ETIMEDOUT;
			snprintf(detail, sizeof detail, "the deadline of %d ms passed before "
			         "multilock member %zu of %zu (%s)", timeout_ms, taken + 1,
			         ml->n, member_path(m));
			break;
		}
		rc = zkl_lock_acquire(m->l, t);
		if (rc) {
			snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
			         taken + 1, ml->n, member_path(m), zkl_last_error());
			break;
		}
	}
	/* A member taken first may have been lost while the others were taken: then the
	 * whole is not held (that member's lock may be someone else's already). Its loss
	 * is either known here or recorded by member_lost() before the hold counts. */
	for (size_t i = 0; i < taken && rc == 0; i++) {
		if (!zkl_lock_is_held(ml->members[i].l)) {
			rc = ZKL_ELOST;
			snprintf(detail, sizeof detail, "multilock member %zu of %zu (%s) was lost "
			         "while the others were taken", i + 1, ml->n,
			         member_path(&ml->members[i]));
		}
	}
	pthread_mutex_lock(&ml->mu);
	if (rc == 0 && ml->depth == 0 && ml->taking_lost) {
		rc = ZKL_ELOST;
		snprintf(detail, sizeof detail, "a multilock member was lost while the others "
		         "were taken");
	}
	if (rc == 0) {
		ml->taking--;
		if (ml->depth++ == 0) {
			ml->owner = zkl__owner_self();
			ml->lost_told = false;
		}
	}
	pthread_mutex_unlock(&ml->mu);
	if (rc != 0) {
		/* All or nothing: give back what was taken, newest first. */
		(void)release_members(ml, taken);
		pthread_mutex_lock(&ml->mu);
		ml->taking--;
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

/* ---- asynchronous ---- */

/* The end of an asynchronous acquire (mu held on entry, released): the state is set
 * already; runs the callback once. */
static void finish(zkl_multilock *ml, struct run *run, int rc, const char *detail)
{
	zkl_lock_acquired_fn fn = ml->fn;
	void *data = ml->fn_data;
	ml->run = NULL;
	ml->calling = true;
	pthread_mutex_unlock(&ml->mu);
	free(run);
	if (rc != 0)
		zkl__fail(rc, "%s", detail);
	else
		zkl__clear_error();
	in_callback.ml = ml;
	in_callback.freed = false;
	fn(&ml->lock, rc, data);
	in_callback.ml = NULL;
	if (in_callback.freed)
		return;
	pthread_mutex_lock(&ml->mu);
	ml->calling = false;
	pthread_cond_broadcast(&ml->cv);
	pthread_mutex_unlock(&ml->mu);
}

/* A member's acquire_async has returned 0 (mu held): a cancel that came while it was
 * being started reaches it now; then member callbacks may go on. */
static void started(zkl_multilock *ml, zkl_lock *l)
{
	while (ml->canceled && !ml->cancel_sent) {
		ml->cancel_sent = true;
		pthread_mutex_unlock(&ml->mu);
		zkl_lock_cancel(l);
		pthread_mutex_lock(&ml->mu);
	}
	ml->starting = false;
	ml->inflight = true;
	pthread_cond_broadcast(&ml->cv);
}

static void member_acquired(zkl_lock *l, int rc, void *arg);

/* A member's asynchronous acquire ended (the event thread, no lock held). */
static void member_acquired(zkl_lock *l, int rc, void *arg)
{
	struct run *run = arg;
	zkl_multilock *ml = run ? run->ml : NULL;
	if (!ml) {
		/* The multi-lock was freed on the loop meanwhile: give back what this member
		 * won, and end (the run went with the free if it is NULL here). */
		if (rc == 0)
			(void)zkl_lock_release(l);
		free(run);
		return;
	}
	char err[DETAIL_MAX / 2] = "";
	if (rc != 0)
		snprintf(err, sizeof err, "%s", zkl_last_error());
	char detail[DETAIL_MAX] = "";
	pthread_mutex_lock(&ml->mu);
	while (ml->starting)
		pthread_cond_wait(&ml->cv, &ml->mu);
	ml->inflight = false;
	size_t i = ml->next;
	size_t taken = rc == 0 ? i + 1 : i;
	if (rc == 0 && taken == ml->n && !ml->canceled && !ml->chain_lost) {
		/* A member's loss may be known (its node deleted, its session gone) and not yet
		 * told (member_lost() comes on a later turn): the whole is then not held. */
		pthread_mutex_unlock(&ml->mu);
		size_t lost = taken;
		for (size_t k = 0; k < taken && lost == taken; k++)
			if (!zkl_lock_is_held(ml->members[k].l))
				lost = k;
		pthread_mutex_lock(&ml->mu);
		if (lost < taken) {
			ml->chain_lost = true;
			i = lost;
		}
	}
	if (rc != 0) {
		snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
		         i + 1, ml->n, member_path(&ml->members[i]), err);
	} else if (ml->canceled) {
		rc = ZKL_ECANCELED;
		snprintf(detail, sizeof detail, "the asynchronous acquire of the multilock was "
		         "canceled (after member %zu of %zu)", i + 1, ml->n);
	} else if (ml->chain_lost) {
		rc = ZKL_ELOST;
		snprintf(detail, sizeof detail, "a multilock member was lost while member %zu of "
		         "%zu (%s) was being taken", i + 1, ml->n, member_path(&ml->members[i]));
	} else if (taken == ml->n) {
		ml->astate = ML_HELD;
		ml->lost_told = false;
		finish(ml, run, 0, NULL);
		return;
	} else {
		int t;
		if (!member_time(ml->timeout_ms, ml->deadline, &t)) {
			rc = ZKL_ETIMEDOUT;
			snprintf(detail, sizeof detail, "the deadline of %d ms passed before multilock "
			         "member %zu of %zu (%s)", ml->timeout_ms, taken + 1, ml->n,
			         member_path(&ml->members[taken]));
		} else {
			zkl_lock *nl = ml->members[taken].l;
			ml->next = taken;
			ml->starting = true;
			ml->cancel_sent = false;
			pthread_mutex_unlock(&ml->mu);
			rc = zkl_lock_acquire_async(nl, t, member_acquired, run);
			if (rc != 0)
				snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu "
				         "(%s): %s", taken + 1, ml->n, member_path(&ml->members[taken]),
				         zkl_last_error());
			pthread_mutex_lock(&ml->mu);
			if (rc == 0) {
				started(ml, nl);
				pthread_mutex_unlock(&ml->mu);
				return;
			}
			ml->starting = false;
		}
	}
	/* All or nothing: give back what was taken, newest first, then tell. */
	pthread_mutex_unlock(&ml->mu);
	release_members(ml, taken);
	pthread_mutex_lock(&ml->mu);
	ml->astate = ML_IDLE;
	finish(ml, run, rc, detail);
}

static int multilock_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	zkl_multilock *ml = ML(lk);
	if (ml->n == 0)
		return zkl__fail(ZKL_EINVAL, "the multilock has no members");
	zkl_client *c = ml->members[0].l->c;
	for (size_t i = 1; i < ml->n; i++)
		if (ml->members[i].l->c != c)
			return zkl__fail(ZKL_EINVAL, "multilock members %s and %s are on different "
			                "clients: an asynchronous acquire takes its members on one "
			                "client's event thread", member_path(&ml->members[0]),
			                member_path(&ml->members[i]));
	/* Asynchronous holds are the handle's, not a thread's: the read half of a read-write
	 * lock whose write half is held is no downgrade then, and would wait for it. */
	for (size_t i = 0; i < ml->n; i++)
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
	if (ml->astate != ML_IDLE)
		rc = zkl__fail(ZKL_EBUSY, "an asynchronous acquire of the multilock is under way or "
		              "holds it: release it first");
	else if (ml->depth > 0 || ml->taking > 0)
		rc = zkl__fail(ZKL_EBUSY, "the multilock is held or being taken by a blocking "
		              "acquire: release it first");
	if (rc != 0) {
		pthread_mutex_unlock(&ml->mu);
		free(run);
		return rc;
	}
	run->ml = ml;
	ml->run = run;
	ml->astate = ML_RUNNING;
	ml->ac = c;
	ml->next = 0;
	ml->starting = true;
	ml->inflight = false;
	ml->canceled = ml->cancel_sent = ml->chain_lost = false;
	ml->timeout_ms = timeout_ms;
	ml->deadline = zkl__deadline(timeout_ms);
	ml->fn = fn;
	ml->fn_data = data;
	pthread_mutex_unlock(&ml->mu);
	zkl_lock *first = ml->members[0].l;
	rc = zkl_lock_acquire_async(first, timeout_ms, member_acquired, run);
	pthread_mutex_lock(&ml->mu);
	if (rc == 0) {
		started(ml, first);
		pthread_mutex_unlock(&ml->mu);
		return 0;
	}
	ml->starting = false;
	ml->astate = ML_IDLE;
	ml->run = NULL;
	pthread_cond_broadcast(&ml->cv);
	pthread_mutex_unlock(&ml->mu);
	free(run);
	return zkl__fail(rc, "acquiring multilock member 1 of %zu (%s): %s", ml->n,
	                member_path(&ml->members[0]), zkl_last_error());
}

static void multilock_cancel(zkl_lock *lk)
{
	zkl_multilock *ml = ML(lk);
	pthread_mutex_lock(&ml->mu);
	zkl_lock *target = NULL;
	if (ml->astate == ML_RUNNING) {
		ml->canceled = true;
		if (ml->inflight && !ml->cancel_sent) {
			ml->cancel_sent = true;
			target = ml->members[ml->next].l;
		}
	}
	pthread_mutex_unlock(&ml->mu);
	if (target)
		zkl_lock_cancel(target);
}

/* ---- the other verbs ---- */

static int multilock_release(zkl_lock *lk)
{
	zkl_multilock *ml = ML(lk);
	pthread_mutex_lock(&ml->mu);
	bool own = ml->depth > 0 && ml->owner == zkl__owner_self();
	bool async_held = !own && ml->astate == ML_HELD;
	bool other = ml->depth > 0;
	if (async_held) {
		ml->astate = ML_IDLE;
		ml->releasing = true;
	}
	pthread_mutex_unlock(&ml->mu);
	if (own)
		return release_blocking(ml);
	if (async_held) {
		int rc = release_members(ml, ml->n);
		pthread_mutex_lock(&ml->mu);
		ml->releasing = false;
		pthread_mutex_unlock(&ml->mu);
		return rc;
	}
	if (other)
		return zkl__fail(ZKL_ENOTOWNER, "the multilock is held by another thread");
	return zkl__fail(ZKL_ENOTHELD, "the multilock is not held");
}

int zkl_multilock_release(zkl_multilock *ml)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	return zkl_lock_release(&ml->lock);
}

static bool multilock_is_held(zkl_lock *lk)
{
	zkl_multilock *ml = ML(lk);
	pthread_mutex_lock(&ml->mu);
	bool held = (ml->depth > 0 || ml->astate == ML_HELD) && ml->n > 0;
	pthread_mutex_unlock(&ml->mu);
	for (size_t i = 0; held && i < ml->n; i++)
		if (!zkl_lock_is_held(ml->members[i].l))
			held = false;
	return held;
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
	bool held = ml->astate == ML_HELD;
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
