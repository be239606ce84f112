/* zkl_lock: the verbs every kind shares, and the bookkeeping of asynchronous acquires.
 *
 * Each handle embeds a zkl_lock whose table says what its kind does itself; the verbs
 * check their arguments once here and dispatch. Node data and the lost callback live in
 * the view itself, so they are set in one place for every kind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_internal.h"

/* The view whose acquire callback the event thread is running, and whether that callback
 * freed its handle (then nothing may touch the view afterwards). Callbacks do not nest. */
static _Thread_local struct {
	zkl_lock *l;
	bool freed;
} in_callback;

#define CHECK_LOCK(l)                                                                    \
	do {                                                                             \
		zkl__clear_error();                                                       \
		if (!(l))                                                                \
			return zkl__fail(ZKL_EINVAL, "lock is NULL");                      \
	} while (0)

int zkl__lock_init(zkl_lock *l, const struct zkl_lock_ops *ops, const char *kind,
                  zkl_client *c, const char *path)
{
	memset(l, 0, sizeof *l);
	if (!(l->path = strdup(path)))
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	if (zkl__data_init(&l->data) != 0) {
		free(l->path);
		l->path = NULL;
		return ZKL_ENOMEM;
	}
	l->ops = ops;
	l->kind = kind;
	l->c = c; /* mu and cv are the kind's own: it sets them next */
	return 0;
}

void zkl__lock_dispose(zkl_lock *l)
{
	zkl__data_free(&l->data);
	free(l->path);
	l->path = NULL;
}

void zkl__lock_async_drain(zkl_lock *l)
{
	const bool on_loop = zkl__is_loop_thread(l->c);
	pthread_mutex_lock(l->mu);
	if (on_loop) {
		/* Nothing waits on a thread that runs the loop: the acquire ends quietly,
		 * withdrawing its node by itself. */
		if (l->pending)
			atomic_store(&l->pending->orphaned, true);
		if (in_callback.l == l)
			in_callback.freed = true;
	} else {
		while (l->pending || l->calling)
			pthread_cond_wait(l->cv, l->mu);
	}
	l->pending = NULL;
	pthread_mutex_unlock(l->mu);
}

bool zkl__lock_async_forget(zkl_lock *l, void *data)
{
	pthread_mutex_lock(l->mu);
	bool forgot = l->pending && l->pending->fn_data == data;
	if (forgot)
		l->pending->fn_data = NULL;
	pthread_mutex_unlock(l->mu);
	return forgot;
}

bool zkl__lock_async_ending(struct zkl_lock_async *a)
{
	if (atomic_load(&a->orphaned))
		return false;
	a->l->pending = NULL;
	a->l->calling = true;
	return true;
}

void zkl__lock_async_call(zkl_lock *l, zkl_lock_acquired_fn fn, void *data, int rc,
                         const char *saved)
{
	if (rc != 0)
		zkl__fail(rc, "%s", saved);
	in_callback.l = l;
	in_callback.freed = false;
	fn(l, rc, data);
	in_callback.l = NULL;
	if (in_callback.freed)
		return;
	pthread_mutex_lock(l->mu);
	l->calling = false;
	pthread_cond_broadcast(l->cv);
	pthread_mutex_unlock(l->mu);
}

/* The lost reports under way on this thread, innermost first: a handle freed by its own
 * lost callback (or by one it leads to) is freed once its report has ended. */
struct lost_report {
	zkl_lock *l;
	void (*free_fn)(void *obj);
	void *obj;
	struct lost_report *up;
};
static _Thread_local struct lost_report *reporting_lost;

bool zkl__lock_defer_free(zkl_lock *l, void (*free_fn)(void *obj), void *obj)
{
	for (struct lost_report *r = reporting_lost; r; r = r->up) {
		if (r->l != l)
			continue;
		if (!r->free_fn) {
			r->free_fn = free_fn;
			r->obj = obj;
		}
		return true;
	}
	return false;
}

void zkl__lock_report_lost(zkl_lock *l, int reason)
{
	struct lost_report report = {.l = l, .up = reporting_lost};
	reporting_lost = &report;
	pthread_mutex_lock(l->mu);
	zkl_lock_lost_fn fn = l->lost_fn;
	void *data = l->lost_data;
	l->reporting++;
	pthread_mutex_unlock(l->mu);
	if (fn)
		fn(l, reason, data);
	/* The listeners in order; each is looked up again after the previous one returns,
	 * so that one removed meanwhile (on this thread) is skipped. */
	uint64_t done = 0;
	pthread_mutex_lock(l->mu);
	for (;;) {
		struct zkl_lock_listener *w = l->listeners;
		while (w && w->seq <= done)
			w = w->next;
		if (!w)
			break;
		done = w->seq;
		void (*lost)(zkl_lock *, int, void *) = w->lost;
		void *ctx = w->ctx;
		pthread_mutex_unlock(l->mu);
		lost(l, reason, ctx);
		pthread_mutex_lock(l->mu);
	}
	l->reporting--;
	pthread_cond_broadcast(l->cv);
	pthread_mutex_unlock(l->mu);
	reporting_lost = report.up;
	if (report.free_fn)
		report.free_fn(report.obj);
}

void zkl__lock_listen(zkl_lock *l, struct zkl_lock_listener *w)
{
	pthread_mutex_lock(l->mu);
	w->seq = ++l->listen_seq;
	w->next = NULL;
	struct zkl_lock_listener **pp = &l->listeners;
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	pthread_mutex_unlock(l->mu);
}

void zkl__lock_unlisten(zkl_lock *l, struct zkl_lock_listener *w)
{
	pthread_mutex_lock(l->mu);
	for (struct zkl_lock_listener **pp = &l->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	if (!(l->c && zkl__on_event_thread(l->c)))
		while (l->reporting > 0)
			pthread_cond_wait(l->cv, l->mu);
	pthread_mutex_unlock(l->mu);
}

int zkl_lock_acquire(zkl_lock *l, int timeout_ms)
{
	CHECK_LOCK(l);
	int rc = zkl__check_timeout(timeout_ms);
	if (rc == 0)
		rc = l->ops->acquire(l, timeout_ms);
	return rc == 0 ? zkl__previous_at_grant(l) : rc;
}

int zkl_lock_acquire_async(zkl_lock *l, int timeout_ms, zkl_lock_acquired_fn fn, void *data)
{
	CHECK_LOCK(l);
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	if (!fn)
		return zkl__fail(ZKL_EINVAL, "callback is NULL");
	if (zkl__lock_tracks(l))
		return zkl__fail(ZKL_ENOTSUP, "%s %s tracks how its holders leave, which only a "
		                "blocking acquire reads and writes", l->kind, l->path);
	return l->ops->start(l, timeout_ms, fn, data);
}

int zkl_lock_release(zkl_lock *l)
{
	CHECK_LOCK(l);
	return l->ops->release(l);
}

void zkl_lock_cancel(zkl_lock *l)
{
	if (l)
		l->ops->cancel(l);
}

bool zkl_lock_is_held(zkl_lock *l)
{
	return l && l->ops->is_held(l);
}

int64_t zkl_lock_token(zkl_lock *l)
{
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	return l->ops->token(l);
}

int zkl_lock_node(zkl_lock *l, char *buf, size_t size)
{
	CHECK_LOCK(l);
	if (!buf)
		return zkl__fail(ZKL_EINVAL, "buffer is NULL");
	if (!l->ops->node)
		return zkl__fail(ZKL_ENOTSUP, "a %s has no node of its own: each of its members "
		                "has one (ask the member)", l->kind);
	pthread_mutex_lock(l->mu);
	if (l->pub)
		pthread_mutex_lock(l->pub);
	const char *node = l->ops->node(l);
	size_t n = node ? strlen(node) : 0;
	int rc = (int)n;
	if (!node)
		rc = ZKL_ENOTHELD;
	else if (n >= size)
		rc = ZKL_EINVAL;
	else
		memcpy(buf, node, n + 1);
	if (l->pub)
		pthread_mutex_unlock(l->pub);
	pthread_mutex_unlock(l->mu);
	if (rc == ZKL_ENOTHELD)
		return zkl__fail(rc, "%s %s is not held here", l->kind, l->path);
	if (rc == ZKL_EINVAL)
		return zkl__fail(rc, "a buffer of %zu bytes is too small for the node path of "
		                "%zu bytes", size, n);
	return rc;
}

int zkl_lock_on_lost(zkl_lock *l, zkl_lock_lost_fn fn, void *data)
{
	CHECK_LOCK(l);
	pthread_mutex_lock(l->mu);
	l->lost_fn = fn;
	l->lost_data = data;
	pthread_mutex_unlock(l->mu);
	return 0;
}

int zkl_lock_set_data(zkl_lock *l, const void *data, size_t len)
{
	CHECK_LOCK(l);
	if (l->ops->set_data)
		return l->ops->set_data(l, data, len);
	pthread_mutex_lock(l->mu);
	int rc = zkl__data_set(&l->data, data, len);
	pthread_mutex_unlock(l->mu);
	return rc;
}

int zkl_lock_participants(zkl_lock *l, zkl_participant **out, size_t *count)
{
	CHECK_LOCK(l);
	if (!out || !count)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	return l->ops->participants(l, out, count);
}

const char *zkl_lock_path(const zkl_lock *l)
{
	return l ? l->path : NULL;
}

const char *zkl_lock_kind(const zkl_lock *l)
{
	return l ? l->kind : NULL;
}
