/* A semaphore's take of n leases: the one path of its blocking and its asynchronous
 * acquire. A blocking acquire is a take handed to the loop and waited for
 * (zkl__sem_take_run); the view's asynchronous acquire is the same take with an end
 * that calls the application back (zkl__sem_take_start).
 *
 * Design notes.
 *
 * A take is a job the loop runs (src/client/loop.c, "Jobs"), and each of its steps runs there,
 * on the loop, as every engine step does: it touches the semaphore's core
 * (semaphore_internal.h), which nothing but the loop touches.
 *
 *   CHECK ──▶ GATE ──▶ GATED ──▶ GATE_CHECK ──▶ LEASED ──▶ GATE (the next lease) ... ──▶ 0
 *                                    │               └▶ GATE (the session changed past
 *                                    └▶ a failure, a cancel    the gate)
 *
 * CHECK compares the count the path records with ours (once per handle, a fixed limit
 * only). Each lease then takes its own turn at the gate: the take queues on
 * "<path>/locks" (an engine acquisition, the take's child), and once it holds the gate,
 * on "<path>/leases" with the count predicate (another child), and lets go of the gate
 * whatever happened: the gate's holder alone watches the leases, as Curator's
 * InterProcessSemaphoreV2 does. The lease belongs to the gate's session: if the session
 * changes before the lease holds, the gate node went (or goes) with the old one and
 * another taker may be past the gate already, so the lease's acquisition ends
 * (ZKL_ELOST, the engine's q->gen) and the take starts over from the gate. A path that
 * CHECK found missing exists once the gate is held: GATE_CHECK records our count there
 * before the lease is queued, or finds the record of a taker who came through the gate
 * first (no lease of ours exists yet, so none can be lost meanwhile).
 *
 * Every acquisition of one take ends by its one deadline (timeout 0: one try of each,
 * within one budget). A cancel of the semaphore reaches the take and its child alike
 * (both are owned by the core), so a cancel between the gate and the leases is seen
 * before the leases are queued. The take never ends while its child is out: the child
 * reads the take's queue, and wakes it at its end.
 *
 * Leases taken become the handle's on the caller's side, with no lock of the client held
 * (zkl__sem_take_finish): all or none, so a lease lost while the others were taken gives
 * them all back. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_internal.h"
#include "semaphore_internal.h"

enum take_state {
	T_CHECK,      /* the count check */
	T_GATE,       /* queue at the gate for the next lease, or end */
	T_GATED,      /* the gate's acquisition is out, or has ended */
	T_GATE_CHECK, /* holding the gate: the count check, if not done yet */
	T_LEASED,     /* the lease's acquisition is out, or has ended */
};

void zkl__sem_core_put(struct zkl__sem_core *k)
{
	if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	free(k->path);
	free(k->locks_path);
	free(k->leases_path);
	free(k);
}

/* Whether a lease node with data fits in one request: the lease's path is longer than
 * the gate's, and is checked before the gate is queued. */
static int lease_fits(zkl_semaphore *s, const struct zkl_data *data)
{
	const struct zkl_queue q = {.c = s->lock.c, .path = s->k->leases_path,
	                            .kind = ZKL_KIND_LEASE, .data = data->bytes,
	                            .data_len = data->len};
	return zkl__engine_fits(&q);
}

int zkl__sem_take_new(struct zkl__sem_take **out, zkl_semaphore *s, int n, int timeout_ms)
{
	*out = NULL;
	struct zkl__sem_take *t = calloc(1, sizeof *t);
	if (!t || !(t->leases = calloc((size_t)n, sizeof *t->leases))) {
		free(t);
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	}
	t->s = s;
	t->n = n;
	for (int i = 0; i < n; i++) {
		if (!(t->leases[i] = calloc(1, sizeof *t->leases[i]))) {
			zkl__sem_take_free(t);
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		}
		t->leases[i]->s = s;
	}
	/* Node data: none for a revocable semaphore, as Curator's revocable nodes carry
	 * none (a revocation writes over it). */
	pthread_mutex_lock(s->lock.mu);
	t->revocable = s->revoke_fn != NULL;
	int rc = t->revocable ? zkl__data_set(&t->data, NULL, 0)
	                      : zkl__lock_data_copy(&s->lock, &t->data);
	pthread_mutex_unlock(s->lock.mu);
	if (rc == 0)
		rc = lease_fits(s, &t->data);
	if (rc != 0) {
		zkl__sem_take_free(t);
		return rc;
	}
	atomic_fetch_add(&s->k->refs, 1);
	t->k = s->k;
	t->timeout_ms = timeout_ms;
	/* Trying once: every acquisition of the take tries once, within one budget. */
	t->deadline = zkl__deadline(timeout_ms ? timeout_ms : ZKL_TRY_ONCE_MS);
	t->since = zkl__now_ms();
	t->st = T_CHECK;
	t->max = (struct zkl_limit){&t->k->fixed_max, &t->k->shared_max};
	*out = t;
	return 0;
}

void zkl__sem_take_free(struct zkl__sem_take *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n && !t->installed && t->leases; i++) {
		if (t->leases[i])
			free(t->leases[i]->path);
		free(t->leases[i]);
	}
	free(t->leases);
	free(t->node_pub);
	zkl__data_free(&t->data);
	zkl__sem_core_put(t->k);
	free(t);
}

const char *zkl__sem_take_node(const struct zkl__sem_take *t)
{
	return t->node_pub;
}

/* ---- the count check -------------------------------------------------------------- */

/* The lease count, recorded where the semaphore lives as kazoo's Semaphore records it:
 * the path node's data, the count in decimal (digits only: zkl__count_parse(), the rule
 * the inspection reads it by too). Curator's InterProcessSemaphoreV2 records nothing
 * (empty data), so an empty or foreign record ("+3", " 3" included) is written over, a
 * number is compared. A fixed count only (a shared count changes by design). */

/* The deadline of one request of the count check: the take's, and never past a session
 * timeout (an answer that does not come by then leaves the count unchecked). A try
 * (timeout 0) waits for the answer as its one round trip does, so that a count that
 * differs is told as such, not taken for a busy semaphore. */
static int64_t count_deadline(zkl_client *c, const struct zkl__sem_take *t)
{
	int64_t cap = zkl__now_ms() + zkl__session_timeout_ms(c);
	return t->timeout_ms < 0 || t->deadline > cap ? cap : t->deadline;
}

static void count_drop(zkl_client *c, struct zkl__sem_take *t)
{
	if (t->cop)
		zkl__op_put(c, t->cop);
	t->cop = NULL;
	t->cset = false;
}

/* The count check's step (on the loop): ZKL_JOB_WAIT while a request is out, 0 when the
 * take may go on, or a ZKL_E* code that ends it (ZKL_ECOUNT: the path records another
 * count). A request that fails with the connection or the session, a session that
 * changes, or an answer that has not come by count_deadline() leaves the count
 * unchecked (the next acquire looks again): the acquisitions deal with the connection.
 * At most five reads and writes, raced each time: the next acquire looks again. */
static int count_check(zkl_client *c, struct zkl__sem_take *t)
{
	struct zkl__sem_core *k = t->k;
	for (;;) {
		if (k->fixed_max <= 0 || k->count_agreed) {
			count_drop(c, t); /* another take has agreed meanwhile */
			return 0;
		}
		if (c->closing)
			return zkl__fail(ZKL_ECLOSED, "the client is closing");
		if (t->job.w.canceled)
			return zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", k->path);
		if (!t->cop) {
			if (t->crounds++ >= 10)
				return 0;
			char mine[16];
			int len = snprintf(mine, sizeof mine, "%d", k->fixed_max);
			const struct zkl_req r = t->cset ? (struct zkl_req){
				.kind = ZKL_OP_SET, .path = k->path, .data = mine, .len = len,
				.version = t->cversion}
			                                 : (struct zkl_req){
				.kind = ZKL_OP_GET, .path = k->path};
			int err = zkl__job_send(c, &t->job, &r, &t->cop);
			if (!t->cop)
				return err;
			t->cuntil = count_deadline(c, t);
		}
		struct zkl_op *op = t->cop;
		if (!op->done) {
			if (op->s->gen != c->gen || zkl__now_ms() >= t->cuntil) {
				count_drop(c, t);
				return 0;
			}
			zkl__job_wake_at(c, &t->job, t->cuntil);
			return ZKL_JOB_WAIT;
		}
		const int zrc = op->rc;
		const bool set = t->cset;
		long theirs = 0;
		if (!set && zrc == ZOK) {
			theirs = zkl__count_parse(op->value, op->value_len);
			t->cversion = op->stat.version;
		}
		count_drop(c, t);
		if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc))
			return 0;
		if (set && (zrc == ZBADVERSION || zrc == ZNONODE))
			continue; /* someone else wrote, or it went: look again */
		if (!set && zrc == ZNONODE)
			return 0; /* not there yet: the gate makes it (GATE_CHECK) */
		if (zrc != ZOK)
			return zkl__fail_zk(zrc, set ? "cannot record the count of" : "cannot read",
			                   k->path);
		if (!set && theirs != 0 && theirs != k->fixed_max)
			return zkl__fail(ZKL_ECOUNT, "semaphore %s records %ld leases, and this "
			                "handle asks for %d: every user of a path must agree", k->path,
			                theirs, k->fixed_max);
		if (!set && theirs == 0) {
			t->cset = true; /* no record, or a foreign one: ours goes there */
			continue;
		}
		k->count_agreed = true;
		return 0;
	}
}

/* ---- the gate and the leases ------------------------------------------------------ */

/* The end of the take's child (on the loop), before the take is woken. */
static void child_done(void *arg, int rc)
{
	struct zkl__sem_take *t = arg;
	t->out = false;
	t->out_rc = rc;
	snprintf(t->out_error, sizeof t->out_error, "%s", rc ? zkl_last_error() : "");
}

/* Queues node on t->q as the take's child (on the loop): the timeout is what is left of
 * the take's (-1: none; 0: trying once, by the take's one budget, q.until); once a
 * positive one has passed, nothing more is tried: ZKL_ETIMEDOUT. */
static int queue(zkl_client *c, struct zkl__sem_take *t, struct zkl_node *node)
{
	(void)c;
	int left = t->timeout_ms;
	if (left > 0) {
		int64_t rest = t->deadline - zkl__now_ms();
		if (rest <= 0)
			return zkl__fail(ZKL_ETIMEDOUT, "the deadline of %d ms passed before %s was "
			                "queued", t->timeout_ms, t->q.path);
		left = (int)rest;
	}
	t->q.until = t->timeout_ms == 0 ? t->deadline : 0;
	t->out = true;
	int rc = zkl__engine_start_child(&t->q, left, node, &t->job, child_done, t);
	if (rc != 0)
		t->out = false;
	return rc;
}

static int queue_gate(zkl_client *c, struct zkl__sem_take *t)
{
	struct zkl__sem_core *k = t->k;
	t->q = (struct zkl_queue){
		.c = c,
		.path = k->locks_path,
		.kind = ZKL_KIND_LOCK,
		.data = t->data.bytes,
		.data_len = t->data.len,
		.pred = &zkl__pred_first,
		.owner = k,
		.name = t->s->lock.kind,
		.since = t->since,
		.quiet_grant = true, /* the lease's grant is the acquire's */
		.folder_seen = &k->locks_seen,
	};
	return queue(c, t, &t->gate);
}

static int queue_lease(zkl_client *c, struct zkl__sem_take *t)
{
	struct zkl__sem_core *k = t->k;
	zkl_lease *l = t->leases[t->got];
	t->q = (struct zkl_queue){
		.c = c,
		.path = k->leases_path,
		.kind = ZKL_KIND_LEASE,
		.data = t->data.bytes,
		.data_len = t->data.len,
		.pred = &zkl__pred_count,
		.pred_arg = &t->max,
		.owner = k,
		.name = t->s->lock.kind,
		.since = t->since,
		.on_revoke = t->revocable ? zkl__sem_lease_revoked : NULL,
		.revoke_ctx = t->s,
		.revoke_decode = zkl__revoke_decode,
		.epoch = k->count ? &k->epoch : NULL,
		.folder_seen = &k->leases_seen,
		.gen = t->gate.gen, /* the lease belongs to the gate's session */
		.on_lost = zkl__sem_lease_lost,
		.lost_ctx = l,
		.pub = &t->node_pub,
	};
	return queue(c, t, &l->node);
}

static int canceled(const struct zkl__sem_take *t)
{
	return zkl__fail(ZKL_ECANCELED, "the acquire of %s was canceled", t->k->path);
}

/* Whether every lease taken still holds (on the loop), once the take is done: a lease
 * granted before the others may have been lost since, with its session, and its slot
 * may be someone else's already; the loop may not have marked its hold lost yet (the
 * loss rule runs after the waiters). All or none. */
static int leases_stand(zkl_client *c, const struct zkl__sem_take *t)
{
	for (int i = 0; i < t->got; i++) {
		const struct zkl_node *node = &t->leases[i]->node;
		if (!zkl__engine_grant_stands(c, node) || zkl__node_lost(node))
			return zkl__fail(ZKL_ELOST, "lease %d of the %d asked of %s was lost with its "
			                "session before the acquire ended: none is held", i + 1, t->n,
			                t->k->path);
	}
	return 0;
}

/* The take's step (on the loop). */
static int take_step(zkl_client *c, struct zkl_job *j)
{
	struct zkl__sem_take *t = (struct zkl__sem_take *)j;
	if (t->out)
		return ZKL_JOB_WAIT; /* its child wakes it at its end */
	for (;;) {
		int rc;
		switch ((enum take_state)t->st) {
		case T_CHECK:
			if ((rc = count_check(c, t)) != 0)
				return rc;
			t->st = T_GATE;
			break;
		case T_GATE:
			if (t->got == t->n)
				return leases_stand(c, t);
			if (c->closing)
				return zkl__fail(ZKL_ECLOSED, "the client is closing");
			if (j->w.canceled)
				return canceled(t);
			if ((rc = queue_gate(c, t)) != 0)
				return rc;
			t->st = T_GATED;
			return ZKL_JOB_WAIT;
		case T_GATED:
			if (t->out_rc != 0)
				return zkl__fail(t->out_rc, "%s", t->out_error);
			t->crounds = 0;
			t->st = T_GATE_CHECK;
			break;
		case T_GATE_CHECK:
			/* A path CHECK found missing exists now: its record is made here. A cancel
			 * between the two queues would find no wait to end. */
			rc = count_check(c, t);
			if (rc == ZKL_JOB_WAIT)
				return rc;
			if (rc == 0)
				rc = c->closing ? zkl__fail(ZKL_ECLOSED, "the client is closing")
				                : j->w.canceled ? canceled(t) : queue_lease(c, t);
			if (rc != 0) {
				zkl__engine_release_now(c, &t->gate);
				return rc;
			}
			t->st = T_LEASED;
			return ZKL_JOB_WAIT;
		case T_LEASED:
			zkl__engine_release_now(c, &t->gate); /* the next taker's turn */
			if (t->out_rc == ZKL_ELOST && !c->closing) {
				/* A cancel that came meanwhile may have found no wait to end. */
				if (j->w.canceled)
					return canceled(t);
				zkl__log(c, ZKL_LOG_INFO, "session changed past the gate of %s; "
				        "queueing at the gate again", t->k->path);
				t->st = T_GATE;
				break;
			}
			if (t->out_rc != 0)
				return zkl__fail(t->out_rc, "%s", t->out_error);
			t->got++;
			/* Held: the view's now, not under way. */
			zkl__pub_set(&t->node_pub, NULL);
			t->st = T_GATE;
			break;
		}
	}
}

/* On the loop, at the end: nothing is out but the count check's request. */
static void take_drop(zkl_client *c, struct zkl_job *j)
{
	count_drop(c, (struct zkl__sem_take *)j);
}

/* The leases taken become the handle's, all or none (no lock held): rc is the take's
 * result and error its detail. Returns the acquire's result. */
static int take_finish(struct zkl__sem_take *t, int rc, const char *error)
{
	zkl_semaphore *s = t->s;
	char saved[256];
	snprintf(saved, sizeof saved, "%s", error);
	for (int i = 0; rc == 0 && i < t->got; i++) {
		zkl_lease *l = t->leases[i];
		if (!(l->path = strdup(l->node.path))) {
			rc = ZKL_ENOMEM;
			snprintf(saved, sizeof saved, "out of memory");
		}
	}
	if (rc != 0) {
		/* All or none: give back what was taken. */
		for (int i = t->got; i-- > 0;)
			zkl__engine_release(s->lock.c, &t->leases[i]->node);
		return zkl__fail(rc, "%s", saved);
	}
	for (int i = 0; i < t->n; i++)
		zkl__sem_lease_install(s, t->leases[i]);
	t->installed = true;
	/* All or none: a lease taken first may have been lost (its session ended) while the
	 * others were taken, and its slot may be someone else's already. A loss after this
	 * look is told by the lost callback, as for any lease held. */
	int lost = -1;
	for (int i = 0; i < t->n && lost < 0; i++)
		if (!zkl_lease_is_held(t->leases[i]))
			lost = i;
	if (lost < 0)
		return 0;
	for (int i = t->n; i-- > 0;) {
		zkl_lease_free(t->leases[i]);
		t->leases[i] = NULL;
	}
	return zkl__fail(ZKL_ELOST, "lease %d of the %d asked of %s was lost while the others "
	                "were taken: none is held", lost + 1, t->n, s->lock.path);
}

int zkl__sem_take_run(struct zkl__sem_take *t)
{
	zkl_semaphore *s = t->s;
	t->job = (struct zkl_job){.step = take_step, .drop = take_drop, .runs_closing = true};
	t->taker = zkl__owner_self();
	pthread_mutex_lock(s->lock.mu);
	t->next = s->waiting;
	s->waiting = t;
	pthread_mutex_unlock(s->lock.mu);
	int rc = zkl__job_run(s->lock.c, &t->job, t->k, "a semaphore's leases");
	pthread_mutex_lock(s->lock.mu);
	for (struct zkl__sem_take **pp = &s->waiting; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	pthread_mutex_unlock(s->lock.mu);
	return take_finish(t, rc, zkl_last_error());
}

/* ---- the view's asynchronous acquire ---------------------------------------------- */

/* The view's asynchronous acquire ends (its mutex held, the client's not). */
static void view_end(void *arg)
{
	struct zkl__sem_take *t = arg;
	pthread_mutex_lock(t->s->lock.mu);
	t->call = zkl__lock_async_ending(&t->a);
	pthread_mutex_unlock(t->s->lock.mu);
}

/* Its step: the take's, and at its result (on the loop) the acquire is no
 * longer under way, unless it was orphaned (its handle freed on the loop's thread). A
 * lease taken counts as the view's from here on, so that no second asynchronous acquire
 * is claimed before it is there. */
static int take_step_async(zkl_client *c, struct zkl_job *j)
{
	struct zkl__sem_take *t = (struct zkl__sem_take *)j;
	int rc = take_step(c, j);
	if (rc == ZKL_JOB_WAIT)
		return rc;
	/* The view's acquire is guarded by its mutex, which the loop takes only with the
	 * client's let go of (semaphore_internal.h); an orphaned acquire must not touch it:
	 * it went with the handle. */
	t->call = false;
	if (!atomic_load(&t->a.orphaned))
		zkl__loop_callout(c, view_end, t);
	if (t->call && rc == 0)
		atomic_fetch_add(&t->s->async_held, 1);
	return rc;
}

/* Its end, on the loop with no lock held: the lease goes on the view and the application
 * is called back; a lease won for a handle that is gone is given back. */
static void take_end(zkl_client *c, struct zkl_job *j)
{
	struct zkl__sem_take *t = (struct zkl__sem_take *)j;
	if (!t->call) {
		for (int i = 0; i < t->got; i++)
			zkl__engine_release_later(c, &t->leases[i]->node);
		zkl__job_destroy(j);
		zkl__sem_take_free(t);
		return;
	}
	zkl_semaphore *s = t->s;
	int rc = take_finish(t, j->rc, j->error);
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	if (rc == 0)
		zkl__sem_view_push_async(s, t->leases[0]);
	else if (j->rc == 0)
		atomic_fetch_sub(&s->async_held, 1);
	zkl_lock_acquired_fn fn = t->a.fn;
	void *data = t->a.fn_data;
	zkl__job_destroy(j);
	zkl__sem_take_free(t);
	zkl__lock_async_call(&s->lock, fn, data, rc, saved);
}

struct start_arg {
	struct zkl__sem_take *t;
	zkl_lock_acquired_fn fn;
	void *data;
	int rc;
	char error[256];
};

static void view_claim(void *arg)
{
	struct start_arg *sa = arg;
	struct zkl__sem_take *t = sa->t;
	pthread_mutex_lock(t->s->lock.mu);
	sa->rc = zkl__lock_async_claim(&t->s->lock, &t->a, sa->fn, sa->data);
	pthread_mutex_unlock(t->s->lock.mu);
}

/* On the loop: claims the view and hands the take to the loop. */
static void start_on_loop(zkl_client *c, void *arg)
{
	struct start_arg *sa = arg;
	struct zkl__sem_take *t = sa->t;
	if (c->closing)
		sa->rc = zkl__fail(ZKL_ECLOSED, "the client is closing");
	else
		zkl__loop_callout(c, view_claim, sa); /* as view_end, for the view's mutex */
	if (sa->rc != 0) {
		snprintf(sa->error, sizeof sa->error, "%s", zkl_last_error());
		return;
	}
	t->job = (struct zkl_job){.step = take_step_async, .drop = take_drop, .end = take_end,
	                          .runs_closing = true};
	zkl__engine_run_job(c, &t->job, t->k);
}

int zkl__sem_take_start(struct zkl__sem_take *t, zkl_lock_acquired_fn fn, void *data)
{
	struct start_arg sa = {.t = t, .fn = fn, .data = data};
	zkl__loop_run(t->s->lock.c, start_on_loop, &sa);
	return sa.rc ? zkl__fail(sa.rc, "%s", sa.error) : 0;
}
