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
 * losses and to release what is left when it is freed.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/semaphore.h>

#include "common.h"
#include "predicates.h"

struct zkl_semaphore {
	zkl_client *c;
	char *path;
	char *locks_path;
	char *leases_path;
	int fixed_max;                 /* > 0, or 0 with a shared count */
	char *count_path;
	int32_t shared_max;            /* c->mu, kept by the count watch */
	unsigned epoch;                /* c->mu, bumped on every count change */
	struct zkl_revwatch *count;    /* c->mu */
	struct zkl_data data;          /* c->mu */
	struct zkl_lease *leases;      /* c->mu: every lease handle not yet freed */
	bool locks_seen, leases_seen;  /* c->mu: the engine has listed these folders */
	zkl_semaphore_lost_fn lost_fn; /* c->mu */
	void *lost_data;
};

struct zkl_lease {
	zkl_semaphore *s;
	struct zkl_lease *next, *prev; /* c->mu */
	struct zkl_node node;          /* c->mu: path NULL once released */
	struct zkl_hold hold;
	bool held;                     /* c->mu */
	char *path;                    /* the node's path, kept after release */
};

static void lease_lost(struct zkl_hold *h, void *ctx)
{
	(void)h;
	zkl_lease *l = ctx;
	zkl_semaphore *s = l->s;
	pthread_mutex_lock(&s->c->mu);
	zkl_semaphore_lost_fn fn = s->lost_fn;
	void *data = s->lost_data;
	pthread_mutex_unlock(&s->c->mu);
	zkl_log(s->c, ZKL_LOG_WARN, "lease %s lost with its session", l->path);
	if (fn)
		fn(s, l, ZKL_ELOST, data);
}

static int semaphore_make(zkl_semaphore **out, zkl_client *c, const char *path)
{
	if (out)
		*out = NULL;
	int rc = zkl_check_new(out, c, path);
	if (rc != 0)
		return rc;
	if (strlen(path) + sizeof "/leases" > ZKL_PATH_MAX)
		return zkl_fail(ZKL_EINVAL, "lock path \"%.40s...\" is too long for its "
		                "\"/leases\" folder", path);
	zkl_semaphore *s = calloc(1, sizeof *s);
	if (!s)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	s->c = c;
	s->path = strdup(path);
	s->locks_path = zkl_path_join(path, "locks");
	s->leases_path = zkl_path_join(path, "leases");
	if (!s->path || !s->locks_path || !s->leases_path || zkl_data_init(&s->data) != 0) {
		zkl_semaphore_free(s);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

int zkl_semaphore_new(zkl_semaphore **out, zkl_client *c, const char *path, int max_leases)
{
	if (max_leases < 1) {
		zkl_clear_error();
		if (out)
			*out = NULL;
		return zkl_fail(ZKL_EINVAL, "max_leases %d must be at least 1", max_leases);
	}
	int rc = semaphore_make(out, c, path);
	if (rc == 0)
		(*out)->fixed_max = max_leases;
	return rc;
}

int zkl_semaphore_new_shared(zkl_semaphore **out, zkl_client *c, const char *path,
                             const char *count_path, int initial_count)
{
	if (initial_count < 1) {
		zkl_clear_error();
		if (out)
			*out = NULL;
		return zkl_fail(ZKL_EINVAL, "initial count %d must be at least 1", initial_count);
	}
	int rc = zkl_path_check(count_path, "count path");
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
		return zkl_fail(ZKL_ENOMEM, "out of memory");
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
	s->count = zkl_countwatch_add(c, count_path, &s->shared_max, &s->epoch);
	pthread_mutex_unlock(&c->mu);
	if (!s->count) {
		zkl_semaphore_free(s);
		*out = NULL;
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	return 0;
}

/* Ends a lease's hold (c->mu held on entry and exit) and returns its release result. */
static int lease_end(zkl_lease *l)
{
	zkl_client *c = l->s->c;
	if (!l->held)
		return zkl_fail(ZKL_ENOTHELD, "lease %s was released already",
		                l->path ? l->path : "(none)");
	l->held = false;
	zkl_hold_remove(c, &l->hold);
	bool lost = l->hold.lost;
	struct zkl_node node = l->node;
	memset(&l->node, 0, sizeof l->node);
	pthread_mutex_unlock(&c->mu);
	int rc = zkl_engine_release(c, &node);
	pthread_mutex_lock(&c->mu);
	if (lost || rc == ZKL_ELOST)
		return zkl_fail(ZKL_ELOST, "lease %s was lost before it was released", l->path);
	return rc;
}

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

void zkl_semaphore_free(zkl_semaphore *s)
{
	if (!s)
		return;
	zkl_client *c = s->c;
	pthread_mutex_lock(&c->mu);
	while (s->leases) {
		zkl_lease *l = s->leases;
		if (l->held)
			lease_end(l);
		lease_unlink(l);
		free(l->path);
		free(l);
	}
	zkl_revwatch_remove(c, s->count);
	zkl_data_free(&s->data);
	pthread_mutex_unlock(&c->mu);
	free(s->path);
	free(s->locks_path);
	free(s->leases_path);
	free(s->count_path);
	free(s);
}

static int remaining(int64_t deadline, int timeout_ms)
{
	if (timeout_ms < 0)
		return -1;
	int64_t left = deadline - zkl_now_ms();
	return left > 0 ? (int)left : 0;
}

/* Takes one lease through the gate. */
static int take_one(zkl_semaphore *s, const struct zkl_data *data, int64_t deadline,
                    int timeout_ms, struct zkl_node *lease)
{
	struct zkl_node gate;
	struct zkl_queue q = {
		.c = s->c,
		.path = s->locks_path,
		.kind = ZKL_KIND_LOCK,
		.data = data->bytes,
		.data_len = data->len,
		.pred = &zkl_pred_first,
		.owner = s,
		.folder_seen = &s->locks_seen,
	};
	int rc = zkl_engine_acquire(&q, remaining(deadline, timeout_ms), &gate);
	if (rc != 0)
		return rc;
	struct zkl_limit max = {&s->fixed_max, &s->shared_max};
	struct zkl_queue lq = {
		.c = s->c,
		.path = s->leases_path,
		.kind = ZKL_KIND_LEASE,
		.data = data->bytes,
		.data_len = data->len,
		.pred = &zkl_pred_count,
		.pred_arg = &max,
		.owner = s,
		.epoch = s->count ? &s->epoch : NULL,
		.folder_seen = &s->leases_seen,
	};
	rc = zkl_engine_acquire(&lq, remaining(deadline, timeout_ms), lease);
	/* Let the next taker in, whatever happened. */
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	zkl_engine_release(s->c, &gate);
	if (rc != 0)
		zkl_fail(rc, "%s", saved);
	return rc;
}

int zkl_semaphore_acquire(zkl_semaphore *s, int n, int timeout_ms, zkl_lease **out)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output array is NULL");
	if (n < 1)
		return zkl_fail(ZKL_EINVAL, "lease count %d must be at least 1", n);
	if (s->fixed_max > 0 && n > s->fixed_max)
		return zkl_fail(ZKL_EINVAL, "%d leases asked of a semaphore of %d: it can never "
		                "succeed", n, s->fixed_max);
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	zkl_client *c = s->c;
	int64_t deadline = zkl_deadline(timeout_ms);
	pthread_mutex_lock(&c->mu);
	struct zkl_data data = {0};
	rc = zkl_data_set(&data, s->data.bytes, (size_t)s->data.len);
	pthread_mutex_unlock(&c->mu);
	if (rc != 0)
		return rc;
	zkl_lease **got = calloc((size_t)n, sizeof *got);
	if (!got) {
		zkl_data_free(&data);
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	}
	int k = 0;
	for (; k < n; k++) {
		zkl_lease *l = calloc(1, sizeof *l);
		if (!l) {
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		rc = take_one(s, &data, deadline, timeout_ms, &l->node);
		if (rc == 0 && !(l->path = strdup(l->node.path))) {
			zkl_engine_release(c, &l->node);
			rc = zkl_fail(ZKL_ENOMEM, "out of memory");
		}
		if (rc != 0) {
			free(l);
			break;
		}
		l->s = s;
		l->held = true;
		l->hold.on_lost = lease_lost;
		l->hold.ctx = l;
		pthread_mutex_lock(&c->mu);
		l->next = s->leases;
		if (s->leases)
			s->leases->prev = l;
		s->leases = l;
		zkl_hold_add(c, &l->hold, l->node.gen);
		pthread_mutex_unlock(&c->mu);
		got[k] = l;
	}
	zkl_data_free(&data);
	if (rc != 0) {
		/* All or none: give back what was taken. */
		char saved[256];
		snprintf(saved, sizeof saved, "%s", zkl_last_error());
		for (int i = k; i-- > 0;)
			zkl_lease_free(got[i]);
		free(got);
		return zkl_fail(rc, "%s", saved);
	}
	memcpy(out, got, (size_t)n * sizeof *got);
	free(got);
	return 0;
}

int zkl_lease_release(zkl_lease *l)
{
	ZKL_CHECK_HANDLE(l, "lease");
	zkl_client *c = l->s->c;
	pthread_mutex_lock(&c->mu);
	int rc = lease_end(l);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void zkl_lease_free(zkl_lease *l)
{
	if (!l)
		return;
	zkl_client *c = l->s->c;
	pthread_mutex_lock(&c->mu);
	if (l->held)
		lease_end(l);
	lease_unlink(l);
	pthread_mutex_unlock(&c->mu);
	free(l->path);
	free(l);
}

bool zkl_lease_is_held(zkl_lease *l)
{
	if (!l)
		return false;
	pthread_mutex_lock(&l->s->c->mu);
	bool held = l->held && !l->hold.lost;
	pthread_mutex_unlock(&l->s->c->mu);
	return held;
}

int64_t zkl_lease_token(zkl_lease *l)
{
	if (!l)
		return ZKL_EINVAL;
	pthread_mutex_lock(&l->s->c->mu);
	int64_t t = l->held && !l->hold.lost ? l->node.czxid : ZKL_ENOTHELD;
	pthread_mutex_unlock(&l->s->c->mu);
	return t;
}

const char *zkl_lease_path(const zkl_lease *l)
{
	return l ? l->path : NULL;
}

int zkl_semaphore_max(zkl_semaphore *s)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (s->fixed_max > 0)
		return s->fixed_max;
	int32_t v = 0;
	int rc = zkl_shared_count_get(s->c, s->count_path, &v);
	if (rc != 0)
		return rc;
	return v < 0 ? 0 : v;
}

void zkl_semaphore_cancel(zkl_semaphore *s)
{
	if (s)
		zkl_client_cancel_owner(s->c, s);
}

int zkl_semaphore_set_data(zkl_semaphore *s, const void *data, size_t len)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	pthread_mutex_lock(&s->c->mu);
	int rc = zkl_data_set(&s->data, data, len);
	pthread_mutex_unlock(&s->c->mu);
	return rc;
}

int zkl_semaphore_on_lost(zkl_semaphore *s, zkl_semaphore_lost_fn fn, void *data)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	pthread_mutex_lock(&s->c->mu);
	s->lost_fn = fn;
	s->lost_data = data;
	pthread_mutex_unlock(&s->c->mu);
	return 0;
}

int zkl_semaphore_participants(zkl_semaphore *s, zkl_participant **out, size_t *count)
{
	ZKL_CHECK_HANDLE(s, "semaphore");
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	/* The leases hold in order up to the limit; a lease beyond it is the gate holder's,
	 * waiting for one to go (it is always the newest). */
	pthread_mutex_lock(&s->c->mu);
	int max = s->fixed_max > 0 ? s->fixed_max : s->shared_max;
	pthread_mutex_unlock(&s->c->mu);
	return zkl_engine_participants(s->c, s->leases_path, max > 0 ? (size_t)max : 0, out,
	                               count);
}
