/* zkl_semaphore: N leases in Curator's InterProcessSemaphoreV2 layout.
 *
 * A taker first holds the fair mutex "<path>/locks" (takers queue in order, and only the
 * one at the head watches the leases), creates its lease "<path>/leases/_c_<uuid>-lease-
 * <seq>", waits until the leases number at most the limit, and then lets go of
 * "<path>/locks". Each of n leases takes its own turn at the gate, all within one
 * deadline; on failure the leases already taken are given back.
 *
 * The limit is fixed, or a shared count that a count watch on the client's event thread
 * keeps current; a change ends the gate holder's wait like a lease going away does.
 * Lease handles belong to the caller; the semaphore keeps a list of them only to report
 * losses, to find the lease a revocation names, and to release what is left when it is
 * freed.
 *
 * Revocation is the mutex's (Curator's protocol) on lease nodes: a revocable
 * semaphore's leases carry empty data and a revocation watch, armed by the engine as
 * soon as the lease node exists; the watch calls lease_revoked(), which names the lease
 * to the application.
 *
 * Locking. The semaphore's own mutex (mu: lock.mu) guards its lease handles and what
 * only the application's threads touch; the client's (c->mu) guards what the engine and
 * the loop read or write: the shared count, cancels, the folders seen, the count check.
 * mu is taken before c->mu, and is never held while waiting for the loop to finish a
 * callback of this semaphore (a lost or revocation callback takes mu): a hold is taken
 * off the client's list, and a lease node released, with mu let go.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/semaphore.h>

#include "inspect_internal.h"
#include "lock_internal.h"
#include "predicates.h"

struct zkl_semaphore {
	zkl_lock lock;                 /* the view: one lease per acquire; client, path, node
	                                * data, lost callback */
	char *locks_path;
	char *leases_path;
	int fixed_max;                 /* > 0, or 0 with a shared count */
	char *count_path;
	int32_t shared_max;            /* c->mu, kept by the count watch */
	unsigned epoch;                /* c->mu, bumped on every count change */
	struct zkl_revwatch *count;    /* c->mu */
	struct zkl_lease *leases;      /* mu: every lease handle not yet freed */
	struct zkl_lease *view;        /* mu: the view's leases, the last taken first */
	struct zkl_lease *waiting;     /* mu: leases a blocking acquire is taking (their
	                                * nodes are the engine's: c->mu) */
	bool locks_seen, leases_seen;  /* c->mu: the engine has listed these folders */
	unsigned cancels;              /* c->mu: bumped by every cancel */
	bool count_agreed;             /* c->mu: the recorded count was found equal ours */
	zkl_lease_revoke_fn revoke_fn; /* mu: revocable if set */
	void *revoke_data;
	pthread_mutex_t own_mu;
	pthread_cond_t own_cv;
};

struct zkl_lease {
	zkl_semaphore *s;
	struct zkl_lease *next, *prev; /* mu */
	struct zkl_node node;          /* mu once installed: path NULL once released; its
	                                * hold, node.hold, made at the grant */
	bool held;                     /* mu */
	bool was_lost;                 /* mu: lost when it was released */
	char *path;                    /* the node's path, kept after release */
	struct zkl_lease *below;       /* mu: the view's lease taken before this one, or the
	                                * next in s->waiting while it is being taken */
	pthread_t taker;               /* the thread taking it, while in s->waiting */
	bool async;                    /* taken by the view's asynchronous acquire */
};

#define SEM(l) ((zkl_semaphore *)(void *)(l))

/* (loop) It may come as soon as the lease is granted, before the lease is installed:
 * l->s is set before the lease is taken, and the path is the hold's. */
static void lease_lost(struct zkl_hold *h, void *ctx)
{
	zkl_lease *l = ctx;
	zkl_semaphore *s = l->s;
	zkl__log(s->lock.c, ZKL_LOG_WARN, "lease %s lost with its session", h->path);
	zkl__lock_report_lost(&s->lock, ZKL_ELOST);
}

static const struct zkl_lock_ops semaphore_ops;
static void semaphore_view_cancel(zkl_lock *lk);

/* A revocation request on one of s's lease nodes (event thread, no lock held). The lease
 * handle stays valid while the callback runs: a release from another thread waits for
 * the watch's dispatch to end before the handle can be freed. */
static void lease_revoked(void *ctx, const char *node)
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

/* Node data of new leases (mu held): none for a revocable semaphore, as Curator's
 * revocable nodes carry none (a revocation writes over it). */
static int lease_data(zkl_semaphore *s, struct zkl_data *data)
{
	return s->revoke_fn ? zkl__data_set(data, NULL, 0) : zkl__lock_data_copy(&s->lock, data);
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
	if (!s || zkl__lock_init(&s->lock, &semaphore_ops, "semaphore", c, path) != 0) {
		free(s);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&s->own_mu, NULL);
	pthread_cond_init(&s->own_cv, NULL);
	s->lock.mu = &s->own_mu;
	s->lock.cv = &s->own_cv;
	zkl__client_handle_add(c);
	s->locks_path = zkl__path_join(path, "locks");
	s->leases_path = zkl__path_join(path, "leases");
	if (!s->locks_path || !s->leases_path) {
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
		(*out)->fixed_max = max_leases;
	return rc;
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
	pthread_mutex_lock(&c->mu);
	s->shared_max = value;
	s->count = zkl__countwatch_add(c, count_path, zkl__count_decode, &s->shared_max,
	                              &s->epoch);
	pthread_mutex_unlock(&c->mu);
	if (!s->count) {
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
	l->was_lost = zkl__hold_lost(l->node.hold);
	struct zkl_node node = l->node;
	memset(&l->node, 0, sizeof l->node);
	pthread_mutex_unlock(s->lock.mu);
	int rc = zkl__engine_release(c, &node);
	if (rc == ZKL_ELOST)
		return zkl__fail(ZKL_ELOST, "lease %s was lost before it was released", l->path);
	return rc;
}

/* (mu held) */
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
	pthread_mutex_lock(&c->mu);
	zkl__revwatch_remove(c, s->count);
	pthread_mutex_unlock(&c->mu);
	zkl__lock_dispose(&s->lock);
	pthread_mutex_destroy(&s->own_mu);
	pthread_cond_destroy(&s->own_cv);
	free(s->locks_path);
	free(s->leases_path);
	free(s->count_path);
	free(s);
	zkl__client_handle_done(c, false);
}

/* The timeout of a call's next acquisition: -1 (none), 0 (trying once: the acquisitions
 * of one call end by its one budget, q.until = deadline), or what is left of a positive
 * timeout; once that has passed, nothing more is tried: -2. */
static int remaining(int64_t deadline, int timeout_ms)
{
	if (timeout_ms <= 0)
		return timeout_ms;
	int64_t left = deadline - zkl__now_ms();
	return left > 0 ? (int)left : -2;
}

/* Readies q for the call's next acquisition: *left is its timeout (remaining()), and a
 * try-once ends by the call's one budget. ZKL_ETIMEDOUT once a positive deadline has
 * passed: nothing more is tried. */
static int queue_left(struct zkl_queue *q, int64_t deadline, int timeout_ms, int *left)
{
	*left = remaining(deadline, timeout_ms);
	if (*left == -2)
		return zkl__fail(ZKL_ETIMEDOUT, "the deadline of %d ms passed before %s was "
		                "queued", timeout_ms, q->path);
	q->until = timeout_ms == 0 ? deadline : 0;
	return 0;
}

static int acquire_left(struct zkl_queue *q, int64_t deadline, int timeout_ms,
                        struct zkl_node *node)
{
	int left, rc = queue_left(q, deadline, timeout_ms, &left);
	return rc ? rc : zkl__engine_acquire(q, left, node);
}

static int start_left(struct zkl_queue *q, int64_t deadline, int timeout_ms,
                      struct zkl_node *node, void (*done)(void *arg, int rc), void *arg)
{
	int left, rc = queue_left(q, deadline, timeout_ms, &left);
	return rc ? rc : zkl__engine_start(q, left, node, done, arg);
}

/* Keeps the path of a lease just taken (no lock held): 0, or ZKL_ENOMEM with its node
 * released. */
static int lease_keep_path(zkl_semaphore *s, zkl_lease *l)
{
	if (!(l->path = strdup(l->node.path))) {
		zkl__engine_release(s->lock.c, &l->node);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	return 0;
}

/* Registers a lease just taken (mu held); the engine made its hold at the grant. */
static void lease_install(zkl_semaphore *s, zkl_lease *l)
{
	l->held = true;
	l->next = s->leases;
	if (s->leases)
		s->leases->prev = l;
	s->leases = l;
}

/* The queue of takers at the gate, and the queue of leases behind it. */
static struct zkl_queue gate_queue(zkl_semaphore *s, const struct zkl_data *data,
                                   bool *seen)
{
	return (struct zkl_queue){
		.c = s->lock.c,
		.path = s->locks_path,
		.kind = ZKL_KIND_LOCK,
		.data = data->bytes,
		.data_len = data->len,
		.pred = &zkl_pred_first,
		.owner = s,
		.folder_seen = seen,
	};
}

static struct zkl_queue lease_queue(zkl_semaphore *s, const struct zkl_data *data,
                                    struct zkl_limit *max, bool *seen)
{
	pthread_mutex_lock(s->lock.mu);
	bool revocable = s->revoke_fn != NULL;
	pthread_mutex_unlock(s->lock.mu);
	return (struct zkl_queue){
		.c = s->lock.c,
		.path = s->leases_path,
		.kind = ZKL_KIND_LEASE,
		.data = data->bytes,
		.data_len = data->len,
		.pred = &zkl_pred_count,
		.pred_arg = max,
		.owner = s,
		.on_revoke = revocable ? lease_revoked : NULL,
		.revoke_ctx = s,
		.revoke_decode = zkl__revoke_decode,
		.epoch = s->count ? &s->epoch : NULL,
		.folder_seen = seen,
	};
}

/* The lease count, recorded where the semaphore lives as kazoo's Semaphore records it:
 * the path node's data, the count in decimal (digits only: zkl__count_parse(), the rule
 * the inspection reads it by too). Curator's InterProcessSemaphoreV2 records nothing
 * (empty data), so an empty or foreign record ("+3", " 3" included) is written over, a
 * number is compared. A fixed count only (a shared count changes by design). */

/* What one read of the path says (count_agree, and the asynchronous check). */
enum count_seen { COUNT_AGREES, COUNT_DIFFERS, COUNT_RECORD };

static enum count_seen count_look(const struct zkl_op *op, int mine, long *theirs)
{
	*theirs = zkl__count_parse(op->value, op->value_len);
	if (*theirs == 0)
		return COUNT_RECORD;
	return *theirs == mine ? COUNT_AGREES : COUNT_DIFFERS;
}

static int count_differs(const char *path, long theirs, int mine)
{
	return zkl__fail(ZKL_ECOUNT, "semaphore %s records %ld leases, and this handle asks "
	                "for %d: every user of a path must agree", path, theirs, mine);
}

/* The deadline of one request of the count check: the acquire's, and never past a
 * session timeout (an answer that does not come by then leaves the count unchecked). A
 * try (timeout 0) waits for the answer as its one round trip does, so that a count that
 * differs is told as such, not taken for a busy semaphore. */
static int64_t count_deadline(zkl_client *c, int64_t deadline, int timeout_ms)
{
	int64_t cap = zkl__now_ms() + zkl__session_timeout_ms(c);
	return timeout_ms < 0 || deadline > cap ? cap : deadline;
}

/* The blocking check: one round trip or two, once per handle, each within the deadline
 * (count_deadline). Returns 0, or ZKL_ECOUNT when the path records another count. A
 * request that fails with the connection or times out leaves the count unchecked: the
 * acquisition itself deals with the connection, and the next acquire looks again. */
static int count_agree(zkl_semaphore *s, int64_t deadline, int timeout_ms)
{
	zkl_client *c = s->lock.c;
	pthread_mutex_lock(&c->mu);
	bool done = s->count_agreed || s->fixed_max <= 0;
	pthread_mutex_unlock(&c->mu);
	if (done)
		return 0;
	char mine[16];
	int len = snprintf(mine, sizeof mine, "%d", s->fixed_max);
	for (int attempt = 0; attempt < 5; attempt++) {
		struct zkl_req get = {.kind = ZKL_OP_GET, .path = s->lock.path};
		struct zkl_op *op = NULL;
		int zrc = zkl__request(c, &get, count_deadline(c, deadline, timeout_ms), &op);
		if (zrc != ZOK) {
			if (op)
				zkl__op_release(c, op);
			if (zrc == ZNONODE) /* not there yet: the first acquire makes it */
				return 0;
			if (zrc == ZKL_ETIMEDOUT || zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc))
				return 0;
			return zrc < -1000 ? zrc : zkl__fail_zk(zrc, "cannot read", s->lock.path);
		}
		long theirs = 0;
		enum count_seen seen = count_look(op, s->fixed_max, &theirs);
		int version = op->stat.version;
		zkl__op_release(c, op);
		if (seen == COUNT_DIFFERS)
			return count_differs(s->lock.path, theirs, s->fixed_max);
		if (seen == COUNT_RECORD) {
			struct zkl_req set = {.kind = ZKL_OP_SET, .path = s->lock.path, .data = mine,
			                      .len = len, .version = version};
			zrc = zkl__request(c, &set, count_deadline(c, deadline, timeout_ms), NULL);
			if (zrc == ZBADVERSION || zrc == ZNONODE)
				continue; /* someone else wrote, or it went: look again */
			if (zrc == ZKL_ETIMEDOUT || zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc))
				return 0;
			if (zrc != ZOK)
				return zrc < -1000 ? zrc : zkl__fail_zk(zrc, "cannot record the count of",
				                                       s->lock.path);
		}
		pthread_mutex_lock(&c->mu);
		s->count_agreed = true;
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	return 0; /* raced five times: the next acquire looks again */
}

/* Whether a lease node with data fits in one request (no lock needed): the lease's path
 * is longer than the gate's, and is checked before the gate is queued. */
static int lease_fits(zkl_semaphore *s, const struct zkl_data *data)
{
	const struct zkl_queue q = {.c = s->lock.c, .path = s->leases_path,
	                            .kind = ZKL_KIND_LEASE, .data = data->bytes,
	                            .data_len = data->len};
	return zkl__engine_fits(&q);
}

/* Takes one lease through the gate. The lease belongs to the gate's session: if the
 * session changes before the lease holds, the gate node went (or goes) with the old one
 * and another taker may be past the gate already, so the lease's acquisition ends
 * (ZKL_ELOST, the engine's q->gen) and the taker starts over from the gate. */
static int take_one(zkl_semaphore *s, const struct zkl_data *data, int64_t deadline,
                    int timeout_ms, zkl_lease *l)
{
	int rc;
	pthread_mutex_lock(&s->lock.c->mu);
	const unsigned cancels = s->cancels;
	pthread_mutex_unlock(&s->lock.c->mu);
	for (;;) {
		struct zkl_node gate;
		struct zkl_queue q = gate_queue(s, data, &s->locks_seen);
		rc = acquire_left(&q, deadline, timeout_ms, &gate);
		if (rc != 0)
			return rc;
		/* A cancel between the two queues would find no wait to end. */
		pthread_mutex_lock(&s->lock.c->mu);
		bool canceled = cancels != s->cancels;
		pthread_mutex_unlock(&s->lock.c->mu);
		if (canceled) {
			zkl__engine_release(s->lock.c, &gate);
			return zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", s->lock.path);
		}
		struct zkl_limit max = {&s->fixed_max, &s->shared_max};
		struct zkl_queue lq = lease_queue(s, data, &max, &s->leases_seen);
		lq.gen = gate.gen;
		lq.on_lost = lease_lost;
		lq.lost_ctx = l;
		rc = acquire_left(&lq, deadline, timeout_ms, &l->node);
		/* Let the next taker in, whatever happened. */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		zkl__engine_release(s->lock.c, &gate);
		if (rc == ZKL_ELOST) {
			/* A cancel that came meanwhile may have found no wait to end. */
			pthread_mutex_lock(&s->lock.c->mu);
			canceled = cancels != s->cancels;
			pthread_mutex_unlock(&s->lock.c->mu);
			if (canceled)
				return zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled",
				                s->lock.path);
			zkl__log(s->lock.c, ZKL_LOG_INFO, "session changed past the gate of %s; "
			        "queueing at the gate again", s->lock.path);
			continue;
		}
		if (rc != 0)
			zkl__fail(rc, "%s", saved);
		return rc;
	}
}

int zkl_semaphore_acquire(zkl_semaphore *s, int n, int timeout_ms, zkl_lease **out)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output array is NULL");
	if (n < 1)
		return zkl__fail(ZKL_EINVAL, "lease count %d must be at least 1", n);
	if (s->fixed_max > 0 && n > s->fixed_max)
		return zkl__fail(ZKL_EINVAL, "%d leases asked of a semaphore of %d: it can never "
		                "succeed", n, s->fixed_max);
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
	zkl_client *c = s->lock.c;
	if (zkl__runs_loop(c))
		return zkl__fail(ZKL_EDEADLK, "cannot wait for %s on the thread that runs the "
		                "client's loop (in a callback, or the application's loop thread): "
		                "nothing would run the acquisition", s->lock.path);
	pthread_mutex_lock(s->lock.mu);
	struct zkl_data data = {0};
	rc = lease_data(s, &data);
	pthread_mutex_unlock(s->lock.mu);
	if (rc == 0 && (rc = lease_fits(s, &data)) != 0)
		zkl__data_free(&data);
	if (rc != 0)
		return rc;
	/* Trying once: every acquisition of the call tries once, within one budget. */
	int64_t deadline = zkl__deadline(timeout_ms ? timeout_ms : ZKL_TRY_ONCE_MS);
	if ((rc = count_agree(s, deadline, timeout_ms)) != 0) {
		zkl__data_free(&data);
		return rc;
	}
	zkl_lease **got = calloc((size_t)n, sizeof *got);
	if (!got) {
		zkl__data_free(&data);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	int k = 0;
	for (; k < n; k++) {
		zkl_lease *l = calloc(1, sizeof *l);
		if (!l) {
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		l->s = s;
		l->taker = pthread_self();
		pthread_mutex_lock(s->lock.mu);
		l->below = s->waiting;
		s->waiting = l;
		pthread_mutex_unlock(s->lock.mu);
		rc = take_one(s, &data, deadline, timeout_ms, l);
		pthread_mutex_lock(s->lock.mu);
		for (zkl_lease **pp = &s->waiting; *pp; pp = &(*pp)->below) {
			if (*pp == l) {
				*pp = l->below;
				break;
			}
		}
		l->below = NULL;
		pthread_mutex_unlock(s->lock.mu);
		if (rc == 0)
			rc = lease_keep_path(s, l);
		if (rc != 0) {
			free(l);
			break;
		}
		pthread_mutex_lock(s->lock.mu);
		lease_install(s, l);
		pthread_mutex_unlock(s->lock.mu);
		got[k] = l;
	}
	zkl__data_free(&data);
	if (rc != 0) {
		/* All or none: give back what was taken. */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		for (int i = k; i-- > 0;)
			zkl_lease_free(got[i]);
		free(got);
		return zkl__fail(rc, "%s", saved);
	}
	/* A path made by this acquire has no record yet: make it, or find we disagree with
	 * a taker that raced us, and give the leases back. */
	if ((rc = count_agree(s, deadline, -1)) != 0) {
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		for (int i = n; i-- > 0;)
			zkl_lease_free(got[i]);
		free(got);
		return zkl__fail(rc, "%s", saved);
	}
	/* All or none: a lease taken first may have been lost (its session ended) while the
	 * others were taken, and its slot may be someone else's already. A loss after this
	 * look is told by the lost callback, as for any lease held. */
	int lost = -1;
	for (int i = 0; i < n && lost < 0; i++)
		if (!zkl_lease_is_held(got[i]))
			lost = i;
	if (lost >= 0) {
		for (int i = n; i-- > 0;)
			zkl_lease_free(got[i]);
		free(got);
		return zkl__fail(ZKL_ELOST, "lease %d of the %d asked of %s was lost while the "
		                "others were taken: none is held", lost + 1, n, s->lock.path);
	}
	memcpy(out, got, (size_t)n * sizeof *got);
	free(got);
	return 0;
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
	bool held = l->held && !zkl__hold_lost(l->node.hold);
	pthread_mutex_unlock(l->s->lock.mu);
	return held;
}

int64_t zkl_lease_token(zkl_lease *l)
{
	if (!l)
		return ZKL_EINVAL;
	pthread_mutex_lock(l->s->lock.mu);
	int64_t t = l->held && !zkl__hold_lost(l->node.hold) ? l->node.czxid : ZKL_ENOTHELD;
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
	if (s->fixed_max > 0)
		return s->fixed_max;
	int32_t v = 0;
	int rc = zkl_shared_count_get(s->lock.c, s->count_path, &v);
	if (rc != 0)
		return rc;
	return v < 0 ? 0 : v;
}

static int semaphore_participants(zkl_lock *lk, zkl_participant **out, size_t *count)
{
	zkl_semaphore *s = SEM(lk);
	/* Every lease holds but the one the gate holder is waiting with: the tree says which
	 * (inspect.c), with the limit the path records, else this handle's. */
	pthread_mutex_lock(&s->lock.c->mu);
	int max = s->fixed_max > 0 ? s->fixed_max : s->shared_max;
	pthread_mutex_unlock(&s->lock.c->mu);
	return zkl__inspect_leases(s->lock.c, s->lock.path, max, out, count);
}

/* The view: each acquire takes one lease, pushed on the view's stack; each release gives
 * back the top one. A lease lost with its session stays until released, or until an
 * acquire succeeds again (which drops the lost ones, as a semaphore-mutex replaces its
 * lost lease). */

/* Pushes a lease the view took, dropping lost ones (mu held); returns the lost leases,
 * unlinked from the view, for the caller to free once no lock is held. */
static zkl_lease *view_push(zkl_semaphore *s, zkl_lease *l)
{
	zkl_lease *lost = NULL, *keep = NULL, **tail = &keep;
	for (zkl_lease *v = s->view, *next; v; v = next) {
		next = v->below;
		if (v->held ? zkl__hold_lost(v->node.hold) : v->was_lost) {
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

static void free_leases(zkl_lease *l)
{
	while (l) {
		zkl_lease *below = l->below;
		zkl_lease_free(l);
		l = below;
	}
}

static int semaphore_view_acquire(zkl_lock *lk, int timeout_ms)
{
	zkl_semaphore *s = SEM(lk);
	zkl_lease *l;
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
	zkl_lease_free(l);
	return rc ? zkl__fail(rc, "%s", saved) : 0;
}

static bool semaphore_view_is_held(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	pthread_mutex_lock(s->lock.mu);
	bool held = false;
	for (zkl_lease *l = s->view; l && !held; l = l->below)
		held = l->held && !zkl__hold_lost(l->node.hold);
	pthread_mutex_unlock(s->lock.mu);
	return held;
}

static int64_t semaphore_view_token(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	pthread_mutex_lock(s->lock.mu);
	zkl_lease *l = s->view;
	int64_t t = l && l->held && !zkl__hold_lost(l->node.hold) ? l->node.czxid : ZKL_ENOTHELD;
	pthread_mutex_unlock(s->lock.mu);
	return t;
}

struct sem_async;
static const char *sem_async_node(const struct sem_async *pa);

/* The lease taken last; else the lease node an acquire under way has made (past the
 * gate): the asynchronous one, the calling thread's, another thread's (mu and c->mu
 * held). */
static const char *semaphore_view_node(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	zkl_lease *l = s->view;
	if (l)
		return l->held && !zkl__hold_lost(l->node.hold) ? l->path : NULL;
	const char *node = lk->pending ? sem_async_node((const void *)lk->pending) : NULL;
	if (node)
		return node;
	const char *other = NULL;
	for (l = s->waiting; l; l = l->below) {
		if (l->node.path && pthread_equal(l->taker, pthread_self()))
			return l->node.path;
		if (l->node.path && !other)
			other = l->node.path;
	}
	return other;
}

static bool semaphore_view_holds_async(zkl_lock *lk)
{
	for (zkl_lease *l = SEM(lk)->view; l; l = l->below)
		if (l->async)
			return true;
	return false;
}

static void semaphore_view_cancel(zkl_lock *lk)
{
	zkl_semaphore *s = SEM(lk);
	pthread_mutex_lock(&s->lock.c->mu);
	s->cancels++;
	pthread_mutex_unlock(&s->lock.c->mu);
	zkl__client_cancel_owner(s->lock.c, s);
}

/* An asynchronous acquire of one lease: the count check (once per handle), the gate's
 * queue, then the leases' queue, each on the event thread; the gate is let go in the
 * background. Nothing waits: the count is read by a loop waiter of its own, and a count
 * the path records otherwise ends the acquire through its callback (ZKL_ECOUNT). Owned
 * here, so that the semaphore may be freed meanwhile. */
struct sem_async {
	struct zkl_lock_async a;
	zkl_semaphore *s;
	zkl_client *c;
	struct zkl_data data;
	char *path;                     /* copies: what the engine reads outlives s */
	char *locks_path, *leases_path;
	struct zkl_queue q;
	struct zkl_limit max;
	int fixed_max;
	struct zkl_node gate;
	zkl_lease *lease;
	int64_t deadline;
	int timeout_ms;
	unsigned cancels;
	bool locks_seen, leases_seen;
	/* The count check: a loop waiter (owner s, so a cancel reaches it), its request out,
	 * whether that is the write of our count (with the version read), and how many
	 * requests it made. */
	struct zkl_waiter cw;
	struct zkl_op *cop;
	bool cset;
	int cversion;
	int crounds;
	int64_t cuntil;
	char mine[16];
	int mine_len;
};

static const char *sem_async_node(const struct sem_async *pa)
{
	return pa->lease->node.path;
}

static void sem_async_free(struct sem_async *pa)
{
	zkl__data_free(&pa->data);
	free(pa->path);
	free(pa->locks_path);
	free(pa->leases_path);
	free(pa->lease);
	free(pa);
}

static void sem_async_end(struct sem_async *pa, int rc)
{
	zkl_client *c = pa->c;
	zkl_semaphore *s = pa->s;
	zkl_lease *l = pa->lease, *lost = NULL;
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	/* The semaphore lives on while its acquire is pending: the lease is installed
	 * first, with the semaphore's mutex, and only then does the acquire end, so that
	 * no second asynchronous acquire can be claimed in between (mutex.c does the
	 * same). */
	pthread_mutex_lock(&c->mu);
	const bool alive = !pa->a.orphaned;
	if (alive) {
		s->locks_seen |= pa->locks_seen;
		s->leases_seen |= pa->leases_seen;
	}
	pthread_mutex_unlock(&c->mu);
	if (alive && rc == 0)
		rc = lease_keep_path(s, l);
	if (alive && rc == 0) {
		pthread_mutex_lock(s->lock.mu);
		lease_install(s, l);
		l->async = true;
		lost = view_push(s, l);
		pthread_mutex_unlock(s->lock.mu);
		pa->lease = NULL;
	}
	/* The view's asynchronous acquire is the view's to end, under its mutex, which an
	 * orphaned acquire must not touch (it went with the handle). */
	bool call = false;
	if (alive) {
		pthread_mutex_lock(s->lock.mu);
		call = zkl__lock_async_ending(&pa->a);
		pthread_mutex_unlock(s->lock.mu);
	}
	if (pa->lease) {
		if (l->node.path)
			zkl__engine_release_later(c, &l->node); /* won for a handle that is gone */
		free(l->path);
	}
	zkl_lock_acquired_fn fn = pa->a.fn;
	void *data = pa->a.fn_data;
	sem_async_free(pa);
	if (!call)
		return;
	free_leases(lost);
	if (rc == ZKL_ENOMEM)
		snprintf(saved, sizeof saved, "out of memory");
	zkl__lock_async_call(&s->lock, fn, data, rc, saved);
}

/* Whether the acquire was canceled, or its handle freed (c->mu held; s is read only if
 * it is still there). */
static bool sem_async_canceled(const struct sem_async *pa)
{
	return pa->a.orphaned || pa->cancels != pa->s->cancels;
}

static void sem_async_gated(void *arg, int rc);

/* Queues at the gate (no lock held); on failure the acquire ends. */
static void sem_async_gate(struct sem_async *pa)
{
	int rc = start_left(&pa->q, pa->deadline, pa->timeout_ms, &pa->gate, sem_async_gated,
	                    pa);
	if (rc != 0)
		sem_async_end(pa, rc);
}

static void sem_async_leased(void *arg, int rc)
{
	struct sem_async *pa = arg;
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	zkl__engine_release_later(pa->c, &pa->gate); /* let the next taker in */
	if (rc == ZKL_ELOST) {
		/* The session changed past the gate: the gate node is (or will be) gone with
		 * the old one, so the lease may not be made on the new one without passing the
		 * gate again there (take_one()). */
		pthread_mutex_lock(&pa->c->mu);
		bool canceled = sem_async_canceled(pa);
		pthread_mutex_unlock(&pa->c->mu);
		if (canceled) {
			zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", pa->path);
			sem_async_end(pa, ZKL_ECANCELED);
			return;
		}
		zkl__log(pa->c, ZKL_LOG_INFO, "session changed past the gate of %s; queueing at "
		        "the gate again", pa->path);
		pa->q = gate_queue(pa->s, &pa->data, &pa->locks_seen);
		pa->q.path = pa->locks_path;
		sem_async_gate(pa);
		return;
	}
	if (rc != 0)
		zkl__fail(rc, "%s", saved);
	sem_async_end(pa, rc);
}

static void sem_async_gated(void *arg, int rc)
{
	struct sem_async *pa = arg;
	if (rc != 0) {
		sem_async_end(pa, rc);
		return;
	}
	pthread_mutex_lock(&pa->c->mu);
	bool canceled = sem_async_canceled(pa);
	pthread_mutex_unlock(&pa->c->mu);
	if (canceled) {
		zkl__engine_release_later(pa->c, &pa->gate);
		zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", pa->path);
		sem_async_end(pa, ZKL_ECANCELED);
		return;
	}
	/* The queue reads the limit through pa, which outlives the semaphore if it goes. */
	pa->q = lease_queue(pa->s, &pa->data, &pa->max, &pa->leases_seen);
	pa->q.path = pa->leases_path;
	pa->q.gen = pa->gate.gen; /* the lease belongs to the gate's session */
	pa->q.on_lost = lease_lost;
	pa->q.lost_ctx = pa->lease;
	rc = start_left(&pa->q, pa->deadline, pa->timeout_ms, &pa->lease->node, sem_async_leased,
	                pa);
	if (rc != 0)
		sem_async_leased(pa, rc);
}

/* The count check's one step (c->mu held): WAIT (1) while a request is out, 0 when the
 * gate may come next, or a ZKL_E* code that ends the acquire. A read that fails with the
 * connection, a session that changes, or an answer that has not come within a session
 * timeout leaves the count unchecked for this acquire (the next one looks again): the
 * acquisition deals with the connection. A cancel, the deadline or the close of the
 * client ends it. */
static int sem_count_check(zkl_client *c, struct sem_async *pa)
{
	for (;;) {
		if (c->closing)
			return zkl__fail(ZKL_ECLOSED, "the client is closing");
		if (pa->cw.canceled || sem_async_canceled(pa))
			return zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", pa->path);
		if (!pa->cop) {
			if (pa->crounds++ >= 10)
				return 0; /* raced five times: the next acquire looks again */
			int err = 0;
			pthread_mutex_unlock(&c->mu);
			struct zkl_op *op = pa->cset ? zkl__op_set(c, &pa->cw, pa->path, pa->mine,
			                                          pa->mine_len, pa->cversion, &err)
			                             : zkl__op_get(c, &pa->cw, pa->path, NULL, &err);
			pthread_mutex_lock(&c->mu);
			if (!op)
				return err;
			pa->cop = op;
			const int64_t now = zkl__now_ms();
			pa->cuntil = now + zkl__session_timeout_ms(c);
			if (pa->timeout_ms > 0 && pa->deadline < pa->cuntil)
				pa->cuntil = pa->deadline;
		}
		struct zkl_op *op = pa->cop;
		if (!op->done) {
			if (op->s->gen != c->gen)
				return 0;
			if (zkl__now_ms() >= pa->cuntil) {
				if (pa->timeout_ms > 0 && zkl__now_ms() >= pa->deadline)
					return zkl__fail(ZKL_ETIMEDOUT, "timed out reading the count of %s",
					                pa->path);
				return 0;
			}
			zkl__waiter_wake_at(c, &pa->cw, pa->cuntil);
			return 1;
		}
		const int zrc = op->rc;
		const bool set = pa->cset;
		long theirs = 0;
		enum count_seen seen = COUNT_RECORD;
		if (!set && zrc == ZOK) {
			seen = count_look(op, pa->fixed_max, &theirs);
			pa->cversion = op->stat.version;
		}
		zkl__op_put(c, op);
		pa->cop = NULL;
		pa->cset = false;
		if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc))
			return 0;
		if (set && (zrc == ZBADVERSION || zrc == ZNONODE))
			continue; /* someone else wrote, or it went: look again */
		if (!set && zrc == ZNONODE)
			return 0; /* not there yet: the first acquire makes it */
		if (zrc != ZOK)
			return zkl__fail_zk(zrc, set ? "cannot record the count of" : "cannot read",
			                   pa->path);
		if (seen == COUNT_DIFFERS)
			return count_differs(pa->path, theirs, pa->fixed_max);
		if (!set && seen == COUNT_RECORD) {
			pa->cset = true;
			continue;
		}
		pa->s->count_agreed = true; /* not orphaned: s is there while c->mu is held */
		return 0;
	}
}

static void sem_count_step(zkl_client *c, struct zkl_waiter *w)
{
	struct sem_async *pa = (struct sem_async *)(void *)((char *)w -
	                                                   offsetof(struct sem_async, cw));
	int rc = sem_count_check(c, pa);
	if (rc == 1)
		return;
	if (pa->cop) {
		zkl__op_put(c, pa->cop);
		pa->cop = NULL;
	}
	zkl__waiter_leave(c, w);
	pthread_mutex_unlock(&c->mu);
	if (rc == 0)
		sem_async_gate(pa);
	else
		sem_async_end(pa, rc);
	pthread_mutex_lock(&c->mu);
}

static int semaphore_view_start(zkl_lock *lk, int timeout_ms, zkl_lock_acquired_fn fn,
                                void *data)
{
	zkl_semaphore *s = SEM(lk);
	zkl_client *c = s->lock.c;
	struct sem_async *pa = calloc(1, sizeof *pa);
	if (!pa || !(pa->lease = calloc(1, sizeof *pa->lease)) ||
	    !(pa->path = strdup(s->lock.path)) || !(pa->locks_path = strdup(s->locks_path)) ||
	    !(pa->leases_path = strdup(s->leases_path))) {
		if (pa)
			sem_async_free(pa);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	pa->lease->s = s;
	bool check = false;
	pthread_mutex_lock(s->lock.mu);
	pthread_mutex_lock(&c->mu);
	int rc = zkl__lock_async_claim(lk, &pa->a, fn, data);
	if (rc == 0 && ((rc = lease_data(s, &pa->data)) != 0 || (rc = lease_fits(s, &pa->data))))
		zkl__lock_async_unclaim(lk, &pa->a);
	if (rc == 0) {
		pa->s = s;
		pa->c = c;
		pa->deadline = zkl__deadline(timeout_ms ? timeout_ms : ZKL_TRY_ONCE_MS);
		pa->timeout_ms = timeout_ms;
		pa->cancels = s->cancels;
		pa->locks_seen = s->locks_seen;
		pa->leases_seen = s->leases_seen;
		pa->fixed_max = s->fixed_max;
		pa->max = (struct zkl_limit){&pa->fixed_max, &s->shared_max};
		pa->q = gate_queue(s, &pa->data, &pa->locks_seen);
		pa->q.path = pa->locks_path;
		pa->mine_len = snprintf(pa->mine, sizeof pa->mine, "%d", s->fixed_max);
		check = s->fixed_max > 0 && !s->count_agreed;
		if (check && c->closing) {
			zkl__lock_async_unclaim(lk, &pa->a);
			rc = zkl__fail(ZKL_ECLOSED, "the client is closing");
		} else if (check) {
			/* The count check runs first, on the loop (sem_count_step). */
			zkl__waiter_enter_loop(c, &pa->cw, s, sem_count_step);
		}
	}
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(s->lock.mu);
	if (rc == 0 && !check)
		rc = zkl__lock_async_start(lk, &pa->a, &pa->q, timeout_ms, &pa->gate,
		                          sem_async_gated, pa);
	if (rc != 0)
		sem_async_free(pa);
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
