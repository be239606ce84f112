/* zkl_semaphore: N leases in Curator's InterProcessSemaphoreV2 layout.
 *
 * A taker first holds the fair mutex "<path>/locks" (takers queue in order, and only the
 * one at the head watches the leases), creates its lease "<path>/leases/_c_<uuid>-lease-
 * <seq>", waits until the leases number at most the limit, and then lets go of
 * "<path>/locks". Each of n leases takes its own turn at the gate, all within one
 * deadline; on failure the leases already taken are given back. The take is one path
 * for the blocking and the asynchronous acquire, run by the loop (semaphore_take.c).
 *
 * The limit is fixed, or a shared count that a count watch on the loop keeps current; a
 * change ends the gate holder's wait like a lease going away does. Lease handles belong
 * to the caller; the semaphore keeps a list of them only to report losses, to find the
 * lease a revocation names, and to release what is left when it is freed.
 *
 * Revocation is the mutex's (Curator's protocol) on lease nodes: a revocable
 * semaphore's leases carry empty data and a revocation watch, armed by the engine as
 * soon as the lease node exists; the watch calls zkl__sem_lease_revoked(), which names
 * the lease to the application.
 *
 * Who touches what: semaphore_internal.h. The loop alone touches the core (the shared
 * count, the count check, the folders seen); this file reaches it through calls
 * (zkl__loop_run). The handle's mutex (mu: lock.mu) guards the lease handles, and is
 * never held while waiting for the loop (a lost or revocation callback takes it).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_internal.h"
#include "semaphore_internal.h"

#define SEM(l) ((zkl_semaphore *)(void *)(l))

/* (loop, no lock held) It may come as soon as the lease is granted, before the lease is
 * installed: l->s is set when the take is made, and the path is the hold's. */
void zkl__sem_lease_lost(struct zkl_hold *h, void *ctx)
{
	zkl_lease *l = ctx;
	zkl_semaphore *s = l->s;
	const int why = zkl__loss_reason(h);
	zkl__log(s->lock.c, ZKL_LOG_WARN, "lease %s lost %s", h->path,
	         why == ZKL_EDELETED ? "with its node, deleted" : "with its session");
	zkl__lock_report_lost(&s->lock, why);
}

static const struct zkl_lock_ops semaphore_ops;
static void semaphore_view_cancel(zkl_lock *lk);

/* A revocation request on one of s's lease nodes (loop, no lock held). The lease handle
 * stays valid while the callback runs: a release from another thread waits for the
 * watch's dispatch to end before the handle can be freed. */
void zkl__sem_lease_revoked(void *ctx, const char *node)
{
	zkl_semaphore *s = ctx;
	zkl_client *c = s->lock.c;
	pthread_mutex_lock(s->lock.mu);
	zkl_lease_revoke_fn fn = s->revoke_fn;
	void *data = s->revoke_data;
	zkl_lease *lease = NULL;
	for (zkl_lease *l = s->leases; l && !lease; l = l->next)
		if (l->held && l->node.path && strcmp(l->node.path, node) == 0)
			lease = l;
	pthread_mutex_unlock(s->lock.mu);
	zkl__log(c, ZKL_LOG_INFO, "revocation of lease %s requested%s", node,
	        lease ? "" : " while it waits for its turn");
	if (fn)
		fn(s, lease, data);
}

static int semaphore_make(zkl_semaphore **out, zkl_client *c, const char *path)
{
	if (out)
		*out = NULL;
	int rc = zkl__check_new(out, c, path);
	if (rc != 0)
		return rc;
	if (strlen(path) + sizeof "/leases" > ZKL_PATH_MAX)
		return zkl__fail(ZKL_EINVAL, "lock path \"%.40s...\" is too long for its "
		                "\"/leases\" folder", path);
	zkl_semaphore *s = calloc(1, sizeof *s);
	struct zkl__sem_core *k = calloc(1, sizeof *k);
	if (!s || !k || zkl__lock_init(&s->lock, &semaphore_ops, "semaphore", c, path) != 0) {
		free(s);
		free(k);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&s->own_mu, NULL);
	pthread_cond_init(&s->own_cv, NULL);
	s->lock.mu = &s->own_mu;
	s->lock.cv = &s->own_cv;
	s->lock.pub = &zkl__pub_mu; /* the lease nodes the engine publishes */
	atomic_init(&s->async_held, 0);
	atomic_init(&k->refs, 1);
	s->k = k;
	zkl__client_handle_add(c);
	k->path = strdup(path);
	k->locks_path = zkl__path_join(path, "locks");
	k->leases_path = zkl__path_join(path, "leases");
	if (!k->path || !k->locks_path || !k->leases_path) {
		zkl_semaphore_free(s);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int zkl_semaphore_new(zkl_semaphore **out, zkl_client *c, const char *path, int max_leases)
{
	if (max_leases < 1) {
		zkl__clear_error();
		if (out)
			*out = NULL;
		return zkl__fail(ZKL_EINVAL, "max_leases %d must be at least 1", max_leases);
	}
	int rc = semaphore_make(out, c, path);
	if (rc == 0)
		(*out)->k->fixed_max = max_leases; /* before any take: the loop reads it after */
	return rc;
}

struct count_watch {
	struct zkl__sem_core *k;
	const char *path;
	int32_t value;
};

/* On the loop: the shared count's first value, and the watch that keeps it. */
static void count_watch_add(zkl_client *c, void *arg)
{
	struct count_watch *w = arg;
	w->k->shared_max = w->value;
	w->k->count = zkl__countwatch_add(c, w->path, zkl__count_decode, &w->k->shared_max,
	                                 &w->k->epoch);
}

int zkl_semaphore_new_shared(zkl_semaphore **out, zkl_client *c, const char *path,
                             const char *count_path, int initial_count)
{
	zkl__clear_error();
	if (out)
		*out = NULL;
	if (initial_count < 1) {
		return zkl__fail(ZKL_EINVAL, "initial count %d must be at least 1", initial_count);
	}
	int rc = zkl__check_new(out, c, path);
	if (rc == 0)
		rc = zkl__path_check(count_path, "count path");
	if (rc != 0)
		return rc;
	rc = semaphore_make(out, c, path);
	if (rc != 0)
		return rc;
	zkl_semaphore *s = *out;
	s->count_path = strdup(count_path);
	if (!s->count_path) {
		zkl_semaphore_free(s);
		*out = NULL;
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	/* Seed the count if nobody has yet, then read it. */
	int32_t value = 0;
	rc = zkl_shared_count_get(c, count_path, &value);
	if (rc == ZKL_ENOTHELD) {
		rc = zkl_shared_count_set(c, count_path, initial_count);
		value = initial_count;
	}
	if (rc != 0) {
		zkl_semaphore_free(s);
		*out = NULL;
		return rc;
	}
	struct count_watch w = {.k = s->k, .path = count_path, .value = value};
	zkl__loop_run(c, count_watch_add, &w);
	if (!s->k->count) { /* the loop's answer, read after it */
		zkl_semaphore_free(s);
		*out = NULL;
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	return 0;
}

/* Ends a lease's hold (no lock held) and returns its release result; quiet_unheld: 0
 * instead of ZKL_ENOTHELD for a lease no longer held. */
static int lease_end(zkl_lease *l, bool quiet_unheld)
{
	zkl_semaphore *s = l->s;
	zkl_client *c = s->lock.c;
	pthread_mutex_lock(s->lock.mu);
	if (!l->held) {
		pthread_mutex_unlock(s->lock.mu);
		return quiet_unheld ? 0 : zkl__fail(ZKL_ENOTHELD, "lease %s was released already",
		                                   l->path ? l->path : "(none)");
	}
	l->held = false;
	l->was_lost = zkl__node_lost(&l->node);
	struct zkl_node node = l->node;
	memset(&l->node, 0, sizeof l->node);
	pthread_mutex_unlock(s->lock.mu);
	int rc = zkl__engine_release(c, &node);
	if (rc == ZKL_ELOST)
		return zkl__fail(ZKL_ELOST, "lease %s was lost before it was released", l->path);
	return rc;
}

/* (the handle's mutex held) */
static void lease_unlink(zkl_lease *l)
{
	zkl_semaphore *s = l->s;
	if (l->prev)
		l->prev->next = l->next;
	else
		s->leases = l->next;
	if (l->next)
		l->next->prev = l->prev;
}

static void semaphore_free_later(void *s)
{
	zkl_semaphore_free(s);
}

/* On the loop: the count watch goes; a take orphaned by this free may still read the
 * core, which goes with the last reference. */
static void core_drop(zkl_client *c, void *arg)
{
	struct zkl__sem_core *k = arg;
	zkl__revwatch_remove(c, k->count);
	k->count = NULL;
	zkl__sem_core_put(k);
}

void zkl_semaphore_free(zkl_semaphore *s)
{
	if (!s || zkl__lock_defer_free(&s->lock, semaphore_free_later, s))
		return;
	zkl_client *c = s->lock.c;
	semaphore_view_cancel(&s->lock); /* between its two queues too */
	zkl__lock_async_drain(&s->lock);
	pthread_mutex_lock(s->lock.mu);
	s->view = NULL;
	while (s->leases) {
		zkl_lease *l = s->leases;
		lease_unlink(l);
		pthread_mutex_unlock(s->lock.mu);
		lease_end(l, true);
		free(l->path);
		free(l);
		pthread_mutex_lock(s->lock.mu);
	}
	pthread_mutex_unlock(s->lock.mu);
	zkl__loop_run(c, core_drop, s->k);
	zkl__lock_dispose(&s->lock);
	pthread_mutex_destroy(&s->own_mu);
	pthread_cond_destroy(&s->own_cv);
	free(s->count_path);
	free(s);
	zkl__client_handle_done(c, false);
}

/* Registers a lease just taken (no lock held); the engine made its hold at the grant. */
void zkl__sem_lease_install(zkl_semaphore *s, zkl_lease *l)
{
	pthread_mutex_lock(s->lock.mu);
	l->held = true;
	l->next = s->leases;
	if (s->leases)
		s->leases->prev = l;
	s->leases = l;
	pthread_mutex_unlock(s->lock.mu);
}

int zkl_semaphore_acquire(zkl_semaphore *s, int n, int timeout_ms, zkl_lease **out)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output array is NULL");
	if (n < 1)
		return zkl__fail(ZKL_EINVAL, "lease count %d must be at least 1", n);
	if (s->k->fixed_max > 0 && n > s->k->fixed_max)
		return zkl__fail(ZKL_EINVAL, "%d leases asked of a semaphore of %d: it can never "
		                "succeed", n, s->k->fixed_max);
	/* The leases folder is listed whole, in one answer, which peers (Curator, kazoo) read
	 * only within jute.maxbuffer: a lease's name takes 60 bytes there. */
	const int most = s->lock.c->max_request / 60;
	if (n > most)
		return zkl__fail(ZKL_EINVAL, "%d leases asked at once: at most %d, the leases one "
		                "listing of %s/leases names within the servers' jute.maxbuffer "
		                "(%d bytes)", n, most, s->lock.path, s->lock.c->max_request);
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	struct zkl__sem_take *t;
	if ((rc = zkl__sem_take_new(&t, s, n, timeout_ms)) != 0)
		return rc;
	rc = zkl__sem_take_run(t);
	if (rc == 0)
		memcpy(out, t->leases, (size_t)n * sizeof *t->leases);
	zkl__sem_take_free(t);
	return rc;
}

int zkl_lease_release(zkl_lease *l)
{
	ZKL_CHECK_HANDLE(l, "lease");
	return lease_end(l, false);
}

void zkl_lease_free(zkl_lease *l)
{
	if (!l)
		return;
	zkl_semaphore *s = l->s;
	lease_end(l, true);
	pthread_mutex_lock(s->lock.mu);
	lease_unlink(l);
	pthread_mutex_unlock(s->lock.mu);
	free(l->path);
	free(l);
}

bool zkl_lease_is_held(zkl_lease *l)
{
	if (!l)
		return false;
	pthread_mutex_lock(l->s->lock.mu);
	bool held = l->held && !zkl__node_lost(&l->node);
	pthread_mutex_unlock(l->s->lock.mu);
	return held;
}

int64_t zkl_lease_token(zkl_lease *l)
{
	if (!l)
		return ZKL_EINVAL;
	pthread_mutex_lock(l->s->lock.mu);
	int64_t t = l->held && !zkl__node_lost(&l->node) ? l->node.czxid : ZKL_ENOTHELD;
	pthread_mutex_unlock(l->s->lock.mu);
	return t;
}

const char *zkl_lease_path(const zkl_lease *l)
{
	return l ? l->path : NULL;
}

int zkl_semaphore_make_revocable(zkl_semaphore *s, zkl_lease_revoke_fn fn, void *data)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	pthread_mutex_lock(s->lock.mu);
	s->revoke_fn = fn;
	s->revoke_data = data;
	pthread_mutex_unlock(s->lock.mu);
	return 0;
}

int zkl_semaphore_max(zkl_semaphore *s)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (s->k->fixed_max > 0)
		return s->k->fixed_max;
	int32_t v = 0;
	int rc = zkl_shared_count_get(s->lock.c, s->count_path, &v);
	if (rc != 0)
		return rc;
	return v < 0 ? 0 : v;
}

struct limit_read {
	const struct zkl__sem_core *k;
	int max;
};

/* On the loop: the limit as the loop knows it. */
static void limit_read(zkl_client *c, void *arg)
{
	(void)c;
	struct limit_read *r = arg;
	r->max = r->k->fixed_max > 0 ? r->k->fixed_max : r->k->shared_max;
}

static int semaphore_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	zkl_semaphore *s = SEM(lk);
	/* Every lease holds but the one the gate holder is waiting with: the tree says which
	 * (inspect.c), with the limit the path records, else this handle's. */
	struct limit_read r = {.k = s->k};
	zkl__loop_run(s->lock.c, limit_read, &r);
	return zkl__inspect_leases(s->lock.c, s->lock.path, r.max, out, count);
}

/* The view: each acquire takes one lease, pushed on the view's stack; each release gives
 * back the top one. A lease lost with its session stays until released, or until an
 * acquire succeeds again (which drops the lost ones, as a semaphore-mutex replaces its
 * lost lease). */

/* Pushes a lease the view took, dropping lost ones (the handle's mutex held); returns the
 * lost leases, unlinked from the view, for the caller to free once no lock is held. */
static zkl_lease *view_push(zkl_semaphore *s, zkl_lease *l)
{
	zkl_lease *lost = NULL, *keep = NULL, **tail = &keep;
	for (zkl_lease *v = s->view, *next; v; v = next) {
		next = v->below;
		if (v->held ? zkl__node_lost(&v->node) : v->was_lost) {
			v->below = lost;
			lost = v;
		} else {
			*tail = v;
			tail = &v->below;
		}
	}
	*tail = NULL;
	l->below = keep;
	s->view = l;
	return lost;
}

/* Frees leases off the view (no lock held). */
static void free_leases(zkl_lease *l)
{
	while (l) {
		zkl_lease *below = l->below;
		if (l->async)
			atomic_fetch_sub(&l->s->async_held, 1);
		zkl_lease_free(l);
		l = below;
	}
}

void zkl__sem_view_push_async(zkl_semaphore *s, zkl_lease *l)
{
	pthread_mutex_lock(s->lock.mu);
	l->async = true; /* counted in async_held already (semaphore_take.c) */
	zkl_lease *lost = view_push(s, l);
	pthread_mutex_unlock(s->lock.mu);
	free_leases(lost);
}

static int semaphore_view_acquire(zkl_lock *lk, int timeout_ms)
{
	zkl_semaphore *s = SEM(lk);
	zkl_lease *l = NULL;
	int rc = zkl_semaphore_acquire(s, 1, timeout_ms, &l);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(s->lock.mu);
	zkl_lease *lost = view_push(s, l);
	pthread_mutex_unlock(s->lock.mu);
	free_leases(lost);
	return 0;
}

static int semaphore_view_release(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	/* Leases released through their handle (from a revocation callback) are skipped. */
	zkl_lease *released = NULL;
	pthread_mutex_lock(s->lock.mu);
	zkl_lease *l = s->view;
	while (l && !l->held) {
		s->view = l->below;
		l->below = released;
		released = l;
		l = s->view;
	}
	if (l)
		s->view = l->below;
	pthread_mutex_unlock(s->lock.mu);
	free_leases(released);
	if (!l)
		return zkl__fail(ZKL_ENOTHELD, "%s %s is not held by this handle", lk->kind,
		                lk->path);
	int rc = zkl_lease_release(l);
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	l->below = NULL;
	free_leases(l);
	return rc ? zkl__fail(rc, "%s", saved) : 0;
}

static bool semaphore_view_is_held(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	pthread_mutex_lock(s->lock.mu);
	bool held = false;
	for (zkl_lease *l = s->view; l && !held; l = l->below)
		held = l->held && !zkl__node_lost(&l->node);
	pthread_mutex_unlock(s->lock.mu);
	return held;
}

static int64_t semaphore_view_token(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	pthread_mutex_lock(s->lock.mu);
	zkl_lease *l = s->view;
	int64_t t = l && l->held && !zkl__node_lost(&l->node) ? l->node.czxid : ZKL_ENOTHELD;
	pthread_mutex_unlock(s->lock.mu);
	return t;
}

/* The lease taken last; else the lease node a take under way has made (past the gate),
 * as the loop published it: the asynchronous one, the calling thread's, another
 * thread's (the handle's mutex and zkl__pub_mu held, by zkl_lock_node()). */
static const char *semaphore_view_node(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	zkl_lease *l = s->view;
	if (l)
		return l->held && !zkl__node_lost(&l->node) ? l->path : NULL;
	if (lk->pending) {
		const struct zkl__sem_take *t = (const struct zkl__sem_take *)(const void *)(
			(const char *)lk->pending - offsetof(struct zkl__sem_take, a));
		const char *node = zkl__sem_take_node(t);
		if (node)
			return node;
	}
	const char *other = NULL;
	for (const struct zkl__sem_take *t = s->waiting; t; t = t->next) {
		const char *node = zkl__sem_take_node(t);
		if (node && t->taker == zkl__owner_self())
			return node;
		if (node && !other)
			other = node;
	}
	return other;
}

static int semaphore_view_hold_node(zkl_lock *lk, char *buf, size_t size)
{
	const zkl_lease *l = SEM(lk)->view;
	if (!l || !l->held || !l->path || strlen(l->path) >= size)
		return 0;
	strcpy(buf, l->path);
	return zkl__node_lost(&l->node) ? -1 : 1;
}

/* Asked on the loop by zkl__lock_async_claim(), without the handle's mutex: a count, kept
 * as leases an asynchronous acquire took enter and leave the view. */
static bool semaphore_view_holds_async(zkl_lock *lk)
{
	return atomic_load(&SEM(lk)->async_held) > 0;
}

static void semaphore_view_cancel(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	/* The core owns every take of s and each take's acquisitions. */
	zkl__client_cancel_owner(s->lock.c, s->k);
}

static int semaphore_view_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn,
                                void *data)
{
	struct zkl__sem_take *t;
	int rc = zkl__sem_take_new(&t, SEM(lk), 1, timeout_ms);
	if (rc == 0 && (rc = zkl__sem_take_start(t, fn, data)) != 0)
		zkl__sem_take_free(t);
	return rc;
}

static const struct zkl_lock_ops semaphore_ops = {
	.acquire = semaphore_view_acquire,
	.start = semaphore_view_start,
	.release = semaphore_view_release,
	.cancel = semaphore_view_cancel,
	.is_held = semaphore_view_is_held,
	.token = semaphore_view_token,
	.node = semaphore_view_node,
	.hold_node = semaphore_view_hold_node,
	.holds_async = semaphore_view_holds_async,
	.participants = semaphore_participants,
};

zkl_lock *zkl_semaphore_lock(zkl_semaphore *s)
{
	return s ? &s->lock : NULL;
}

void zkl__semaphore_set_kind(zkl_semaphore *s, const char *kind)
{
	s->lock.kind = kind;
}
