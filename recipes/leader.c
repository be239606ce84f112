/* Leader election: zkl_leader (Curator's LeaderLatch layout, "latch-" nodes) and
 * zkl_selector (Curator's LeaderSelector, a mutex, "lock-" nodes), on one core.
 *
 * Design notes
 *
 * Threads. Each started handle has one election thread. It loops: queue a node with the
 * engine (zkl_engine_acquire, waiting forever, owner = the handle, so that close can
 * cancel it), then lead (lead() below) until leadership ends, then delete the node and,
 * for a latch or a requeueing selector, queue again. While it leads, the thread waits on
 * a waiter of its own for anything that ends leadership:
 *
 *   - the session: a hold (zkl_hold_add) whose on_lost, on the client's event thread,
 *     clears `leading` at once and wakes the thread;
 *   - the connection (lose_on_suspend): a state listener that, on SUSPENDED, clears
 *     `leading` at once, counts the suspension and wakes the thread;
 *   - our node: a data watch on it (deleted from outside, or changed: look again);
 *   - close, interrupt, or the selector's function returning.
 *
 * Leadership is announced only after a read of our node shows that its ephemeral owner is
 * our current session (Curator reads it with getData too): the engine says we are first,
 * and the read proves the node is ours and alive. After a suspension the read is done
 * again before leadership is announced again.
 *
 * Callbacks. A latch's gained and lost callbacks run on its election thread, so they
 * alternate and never overlap; `leading` (has_leadership) is cleared before, on whichever
 * thread learns of the loss. A selector's function runs on a thread started for each
 * leadership, so that the election thread keeps watching; the node is deleted only once
 * the function has returned, so no other participant leads while it still runs.
 *
 * Locking. Handle state is guarded by the client's mutex, as in the other recipes;
 * `cv` (on that mutex) is broadcast whenever `leading` changes or the thread ends. No
 * user code runs with the mutex held.
 */
#include <stdlib.h>
#include <string.h>

#include <zklocks/leader.h>

#include "common.h"
#include "predicates.h"

struct election {
	zkl_client *c;
	char *path;
	enum zkl_kind kind;            /* LATCH, or LOCK for a selector */
	void *self;                    /* the public handle, passed to user code */
	struct zkl_data id;            /* c->mu */
	bool lose_on_suspend;
	bool notify_on_close;
	zkl_leader_gained_fn on_gained;
	zkl_leader_lost_fn on_lost;
	void *data;
	zkl_selector_fn fn;            /* selector only */
	void *fn_data;
	bool requeue;
	bool folder_seen;              /* c->mu: the engine has listed our folder */

	pthread_cond_t cv;             /* on c->mu */
	bool started;                  /* c->mu */
	bool closing;                  /* c->mu */
	bool exited;                   /* c->mu: the election thread has ended */
	bool joined;
	bool listening;
	pthread_t thread;
	pthread_t worker;              /* selector: runs fn */
	bool worker_running;           /* c->mu */
	bool idle;                     /* c->mu: selector waiting for requeue */
	bool in_lead;                  /* c->mu: lead() runs: leading, or ending a leadership */
	bool again;                    /* c->mu: requeue asked while in lead() */
	bool leading;                  /* c->mu: has_leadership */
	int64_t token;                 /* c->mu: czxid of our node while leading */
	bool suspended;                /* c->mu: the client is SUSPENDED */
	unsigned suspensions;          /* c->mu: SUSPENDED states seen */
	bool interrupt;                /* c->mu: end this leadership (selector) */
	bool fn_done;                  /* c->mu: fn has returned */
	struct zkl_hold hold;
	struct zkl_waiter *wake;       /* c->mu: the election thread's waiter while it leads */
};

struct zkl_leader {
	struct election e;
};

struct zkl_selector {
	struct election e;
};

/* ---- notifications from other threads (c->mu held by the callers below) ---- */

static void wake_thread(struct election *e)
{
	if (e->wake)
		pthread_cond_signal(&e->wake->cv);
	pthread_cond_broadcast(&e->cv);
}

/* The session that held our node is gone (client's event thread). */
static void hold_lost(struct zkl_hold *h, void *ctx)
{
	(void)h;
	struct election *e = ctx;
	pthread_mutex_lock(&e->c->mu);
	e->leading = false;
	wake_thread(e);
	pthread_mutex_unlock(&e->c->mu);
	zkl_log(e->c, ZKL_LOG_WARN, "leadership of %s lost with the session", e->path);
}

/* Connection states (client's event thread). */
static void state_changed(zkl_client *c, zkl_state st, void *data)
{
	struct election *e = data;
	pthread_mutex_lock(&c->mu);
	if (st == ZKL_STATE_SUSPENDED) {
		e->suspended = true;
		e->suspensions++;
		if (e->lose_on_suspend)
			e->leading = false;
	} else if (st == ZKL_STATE_CONNECTED || st == ZKL_STATE_RECONNECTED) {
		e->suspended = false;
	}
	wake_thread(e);
	pthread_mutex_unlock(&c->mu);
}

/* ---- leading ---- */

static void call_gained(struct election *e)
{
	if (!e->on_gained)
		return;
	pthread_mutex_unlock(&e->c->mu);
	e->on_gained(e->self, e->data);
	pthread_mutex_lock(&e->c->mu);
}

static void call_lost(struct election *e, int reason)
{
	if (!e->on_lost)
		return;
	pthread_mutex_unlock(&e->c->mu);
	e->on_lost(e->self, reason, e->data);
	pthread_mutex_lock(&e->c->mu);
}

static void *worker_main(void *arg)
{
	struct election *e = arg;
	e->fn(e->self, e->fn_data);
	pthread_mutex_lock(&e->c->mu);
	e->fn_done = true;
	e->leading = false; /* given up, though the node goes a moment later */
	wake_thread(e);
	pthread_mutex_unlock(&e->c->mu);
	return NULL;
}

enum check { CHECK_OK, CHECK_RETRY, CHECK_GONE, CHECK_LOST, CHECK_FAILED };

/* Reads our node (c->mu held, released meanwhile): with a data watch if *wt is NULL
 * (then *wt is the armed watch on success), else a plain exists. Says whether the node
 * is there and its ephemeral owner is the session it was created on, which is current. */
static enum check check_node(struct election *e, struct zkl_waiter *w, struct zkl_node *node,
                             struct zkl_watch **wt)
{
	zkl_client *c = e->c;
	struct zkl_watch *nw = NULL;
	if (!*wt) {
		nw = zkl_watch_new(c, w);
		if (!nw)
			return CHECK_RETRY;
	}
	int err = 0;
	pthread_mutex_unlock(&c->mu);
	struct zkl_op *op = nw ? zkl_op_get(c, w, node->path, nw, &err)
	                       : zkl_op_exists(c, w, node->path, &err);
	pthread_mutex_lock(&c->mu);
	if (!op) {
		if (nw)
			zkl_watch_put(c, nw);
		return err == ZKL_ECLOSED ? CHECK_LOST : CHECK_RETRY;
	}
	int64_t until = zkl_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 10000);
	int rc = zkl_op_wait(c, w, op, until);
	enum check result;
	if (rc != 0) {
		result = CHECK_RETRY; /* canceled or slow: the caller looks at why */
	} else if (op->rc == ZOK) {
		bool ours = op->s->gen == node->gen && op->s->gen == c->gen &&
		            op->stat.ephemeralOwner == op->s->id;
		result = ours ? CHECK_OK : CHECK_LOST;
	} else if (op->rc == ZNONODE) {
		result = CHECK_GONE;
	} else if (zkl_zk_transient(op->rc) || zkl_zk_class(op->rc) == ZKL_ZK_CLOSING) {
		result = CHECK_RETRY;
	} else if (zkl_zk_session_gone(op->rc)) {
		result = CHECK_LOST;
	} else {
		zkl_log(c, ZKL_LOG_ERROR, "cannot read %s: %s", node->path, zerror(op->rc));
		result = CHECK_FAILED;
	}
	zkl_op_put(c, op);
	if (nw) {
		if (result == CHECK_OK)
			*wt = nw;
		else
			zkl_watch_put(c, nw);
	}
	return result;
}

/* Leads with node (queue head) until leadership ends; then deletes the node. Returns why
 * it ended: 0 (the selector's function returned) or a reason of zkl_leader_lost_fn, or
 * ZKL_ECANCELED (interrupted). */
static int lead(struct election *e, struct zkl_node *node)
{
	zkl_client *c = e->c;
	struct zkl_waiter w;
	struct zkl_watch *wt = NULL; /* armed on our node */
	bool verified = false;       /* the node was read back as ours since the last check */
	bool announced = false;      /* leadership announced (gained called or fn started) */
	int end = 0;

	pthread_mutex_lock(&c->mu);
	zkl_waiter_enter(c, &w, e);
	e->wake = &w;
	e->in_lead = true;
	e->again = false;
	e->interrupt = false;
	e->fn_done = false;
	e->hold.on_lost = hold_lost;
	e->hold.ctx = e;
	zkl_hold_add(c, &e->hold, node->gen);
	unsigned susp = e->suspensions;
	int64_t retry_at = 0;

	for (;;) {
		if (e->closing || w.canceled || c->closing) {
			end = ZKL_ECLOSED;
			break;
		}
		if (e->hold.lost || node->gen != c->gen) {
			end = ZKL_ELOST;
			break;
		}
		if (e->interrupt) {
			end = ZKL_ECANCELED;
			break;
		}
		if (e->fn_done) {
			end = 0;
			break;
		}
		if (e->lose_on_suspend && susp != e->suspensions) {
			/* The connection dropped since we last looked: read the node again
			 * before leading again. */
			susp = e->suspensions;
			verified = false;
			if (announced) {
				if (e->fn) {
					end = ZKL_ECONNLOSS;
					break;
				}
				announced = false;
				e->leading = false;
				e->token = 0;
				pthread_cond_broadcast(&e->cv);
				call_lost(e, ZKL_ECONNLOSS);
				continue;
			}
		}
		if (wt && wt->fired) {
			/* Deleted or changed: look again (and arm a new watch). */
			zkl_watch_put(c, wt);
			wt = NULL;
			verified = false;
		}
		if (!verified && c->sess->connected && zkl_now_ms() >= retry_at) {
			enum check r = check_node(e, &w, node, &wt);
			if (r == CHECK_OK) {
				verified = true;
			} else if (r == CHECK_GONE) {
				zkl_log(c, ZKL_LOG_WARN, "node %s was deleted from outside", node->path);
				end = ZKL_ENOTHELD;
				break;
			} else if (r == CHECK_LOST) {
				end = ZKL_ELOST;
				break;
			} else if (r == CHECK_FAILED) {
				end = ZKL_EZK;
				break;
			} else {
				retry_at = zkl_now_ms() + 100;
			}
			continue;
		}
		if (verified && !announced && !(e->lose_on_suspend && e->suspended)) {
			announced = true;
			e->leading = true;
			e->token = node->czxid;
			pthread_cond_broadcast(&e->cv);
			if (e->fn) {
				e->worker_running = pthread_create(&e->worker, NULL, worker_main, e) == 0;
				if (!e->worker_running) {
					zkl_log(c, ZKL_LOG_ERROR, "cannot start a thread for the leader of %s",
					        e->path);
					end = ZKL_ENOMEM;
					break;
				}
			} else {
				call_gained(e);
			}
			continue;
		}
		int64_t until = INT64_MAX;
		if (!verified && retry_at > zkl_now_ms())
			until = retry_at;
		zkl_waiter_wait(c, &w, until);
	}

	e->leading = false;
	e->token = 0;
	pthread_cond_broadcast(&e->cv);
	if (e->worker_running) {
		/* The function sees has_leadership false; the node stays until it returns. */
		pthread_mutex_unlock(&c->mu);
		pthread_join(e->worker, NULL);
		pthread_mutex_lock(&c->mu);
		e->worker_running = false;
	} else if (announced && !e->fn && (end != ZKL_ECLOSED || e->notify_on_close)) {
		call_lost(e, end);
	}
	if (wt)
		zkl_watch_put(c, wt);
	e->wake = NULL;
	zkl_hold_remove(c, &e->hold);
	zkl_waiter_leave(c, &w);
	pthread_mutex_unlock(&c->mu);
	zkl_engine_release(c, node);
	return end;
}

/* ---- the election thread ---- */

static void *election_main(void *arg)
{
	struct election *e = arg;
	zkl_client *c = e->c;
	int backoff_ms = 0;

	for (;;) {
		pthread_mutex_lock(&c->mu);
		while (e->idle && !e->closing)
			pthread_cond_wait(&e->cv, &c->mu);
		if (e->closing) {
			pthread_mutex_unlock(&c->mu);
			break;
		}
		struct zkl_data data = {0};
		int rc = zkl_data_set(&data, e->id.bytes, (size_t)e->id.len);
		pthread_mutex_unlock(&c->mu);

		struct zkl_node node;
		if (rc == 0) {
			struct zkl_queue q = {
				.c = c,
				.path = e->path,
				.kind = e->kind,
				.data = data.bytes,
				.data_len = data.len,
				.pred = &zkl_pred_first,
				.owner = e,
				.folder_seen = &e->folder_seen,
			};
			rc = zkl_engine_acquire(&q, ZKL_WAIT_FOREVER, &node);
		}
		zkl_data_free(&data);
		if (rc == ZKL_ECLOSED)
			break;
		if (rc == ZKL_ECANCELED)
			continue; /* closing: seen at the top */
		if (rc != 0) {
			/* Not a wait that ran out: ZooKeeper refused (an ACL) or memory ran out.
			 * Try again, less and less often, until closed. */
			zkl_log(c, ZKL_LOG_ERROR, "cannot join the election at %s: %s: %s", e->path,
			        zkl_strerror(rc), zkl_last_error());
			backoff_ms = backoff_ms ? (backoff_ms * 2 > 10000 ? 10000 : backoff_ms * 2) : 250;
			pthread_mutex_lock(&c->mu);
			int64_t until = zkl_now_ms() + backoff_ms;
			while (!e->closing && !zkl_cond_wait_until(&e->cv, &c->mu, until))
				;
			pthread_mutex_unlock(&c->mu);
			continue;
		}
		backoff_ms = 0;
		int end = lead(e, &node);
		pthread_mutex_lock(&c->mu);
		e->in_lead = false;
		if (e->fn && !e->requeue && !e->again)
			e->idle = true;
		e->again = false;
		pthread_mutex_unlock(&c->mu);
		if (end == ZKL_ECLOSED)
			break;
		if (end == ZKL_EZK || end == ZKL_ENOMEM) {
			/* Do not spin on a failure that may last: wait a little first. */
			pthread_mutex_lock(&c->mu);
			int64_t until = zkl_now_ms() + 1000;
			while (!e->closing && !zkl_cond_wait_until(&e->cv, &c->mu, until))
				;
			pthread_mutex_unlock(&c->mu);
		}
	}

	pthread_mutex_lock(&c->mu);
	e->exited = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- the core's functions ---- */

static int election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                         enum zkl_kind kind, void *self)
{
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl_path_check(path, "election path");
	if (rc != 0)
		return rc;
	e->c = c;
	e->kind = kind;
	e->self = self;
	if (!(e->path = strdup(path)))
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	rc = id ? zkl_data_set(&e->id, id, strlen(id)) : zkl_data_init(&e->id);
	if (rc != 0) {
		free(e->path);
		return rc;
	}
	zkl_cond_init(&e->cv);
	return 0;
}

static int election_start(struct election *e)
{
	zkl_client *c = e->c;
	pthread_mutex_lock(&c->mu);
	if (e->closing) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ECLOSED, "the election handle of %s is closed", e->path);
	}
	if (e->started) {
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_EBUSY, "the election handle of %s was started already", e->path);
	}
	e->started = true;
	e->suspended = c->state == ZKL_STATE_SUSPENDED;
	pthread_mutex_unlock(&c->mu);

	int rc = zkl_client_add_listener(c, state_changed, e);
	if (rc != 0) {
		pthread_mutex_lock(&c->mu);
		e->started = false;
		pthread_mutex_unlock(&c->mu);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	e->listening = true;
	pthread_mutex_unlock(&c->mu);
	if (pthread_create(&e->thread, NULL, election_main, e) != 0) {
		zkl_client_remove_listener(c, state_changed, e);
		pthread_mutex_lock(&c->mu);
		e->listening = false;
		e->started = false;
		pthread_mutex_unlock(&c->mu);
		return zkl_fail(ZKL_ENOMEM, "cannot start the election thread");
	}
	return 0;
}

static bool on_own_thread(struct election *e)
{
	pthread_t self = pthread_self();
	return pthread_equal(self, e->thread) || (e->worker_running && pthread_equal(self, e->worker));
}

static int election_close(struct election *e)
{
	zkl_client *c = e->c;
	pthread_mutex_lock(&c->mu);
	bool started = e->started;
	e->closing = true;
	e->leading = false;
	wake_thread(e);
	bool own = started && on_own_thread(e);
	pthread_mutex_unlock(&c->mu);
	if (!started || own)
		return 0;
	/* The thread may be on its way into an acquire, where a cancel sent before it began
	 * waiting would be missed: repeat the cancel until the thread is gone. */
	pthread_mutex_lock(&c->mu);
	while (!e->exited) {
		pthread_mutex_unlock(&c->mu);
		zkl_client_cancel_owner(c, e);
		pthread_mutex_lock(&c->mu);
		if (!e->exited)
			zkl_cond_wait_until(&e->cv, &c->mu, zkl_now_ms() + 50);
	}
	bool join = !e->joined;
	e->joined = true;
	bool listening = e->listening;
	e->listening = false;
	pthread_mutex_unlock(&c->mu);
	if (join)
		pthread_join(e->thread, NULL);
	if (listening)
		zkl_client_remove_listener(c, state_changed, e);
	return 0;
}

static void election_free(struct election *e)
{
	election_close(e);
	pthread_mutex_lock(&e->c->mu);
	zkl_data_free(&e->id);
	pthread_mutex_unlock(&e->c->mu);
	pthread_cond_destroy(&e->cv);
	free(e->path);
}

static bool election_leading(struct election *e)
{
	pthread_mutex_lock(&e->c->mu);
	bool l = e->leading;
	pthread_mutex_unlock(&e->c->mu);
	return l;
}

static int64_t election_token(struct election *e)
{
	pthread_mutex_lock(&e->c->mu);
	int64_t t = e->leading ? e->token : ZKL_ENOTHELD;
	pthread_mutex_unlock(&e->c->mu);
	return t;
}

static int election_participants(struct election *e, zkl_participant **out, size_t *count)
{
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl_engine_participants(e->c, e->path, 1, out, count);
}

static int election_leader_id(struct election *e, char **id)
{
	if (!id)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*id = NULL;
	zkl_participant *list;
	size_t n;
	int rc = zkl_engine_participants(e->c, e->path, 1, &list, &n);
	if (rc != 0)
		return rc;
	if (n == 0)
		return zkl_fail(ZKL_ENOTHELD, "nobody takes part in the election at %s", e->path);
	*id = list[0].data;
	list[0].data = NULL;
	zkl_participants_free(list, n);
	if (!*id)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	return 0;
}

/* ---- zkl_leader ---- */

void zkl_leader_options_init(zkl_leader_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->lose_on_suspend = true;
}

int zkl_leader_new(zkl_leader **out, zkl_client *c, const char *path,
                   const zkl_leader_options *o)
{
	zkl_clear_error();
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	zkl_leader_options defaults;
	if (!o) {
		zkl_leader_options_init(&defaults);
		o = &defaults;
	}
	zkl_leader *l = calloc(1, sizeof *l);
	if (!l)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	int rc = election_init(&l->e, c, path, o->id, ZKL_KIND_LATCH, l);
	if (rc != 0) {
		free(l);
		return rc;
	}
	l->e.on_gained = o->on_gained;
	l->e.on_lost = o->on_lost;
	l->e.data = o->data;
	l->e.lose_on_suspend = o->lose_on_suspend;
	l->e.notify_on_close = o->notify_on_close;
	*out = l;
	return 0;
}

int zkl_leader_start(zkl_leader *l)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return election_start(&l->e);
}

bool zkl_leader_has_leadership(zkl_leader *l)
{
	return l && election_leading(&l->e);
}

int zkl_leader_await(zkl_leader *l, int timeout_ms)
{
	ZKL_CHECK_HANDLE(l, "leader");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	struct election *e = &l->e;
	int64_t deadline = zkl_deadline(timeout_ms);
	pthread_mutex_lock(&e->c->mu);
	if (!e->started && !e->closing) {
		pthread_mutex_unlock(&e->c->mu);
		return zkl_fail(ZKL_EINVAL, "the latch of %s was not started", e->path);
	}
	for (;;) {
		if (e->closing) {
			rc = zkl_fail(ZKL_ECLOSED, "the latch of %s is closed", e->path);
			break;
		}
		if (e->leading) {
			rc = 0;
			break;
		}
		if (zkl_cond_wait_until(&e->cv, &e->c->mu, deadline) && !e->leading) {
			rc = e->closing ? zkl_fail(ZKL_ECLOSED, "the latch of %s is closed", e->path)
			                : zkl_fail(ZKL_ETIMEDOUT, "not the leader of %s", e->path);
			break;
		}
	}
	pthread_mutex_unlock(&e->c->mu);
	return rc;
}

int64_t zkl_leader_token(zkl_leader *l)
{
	return l ? election_token(&l->e) : ZKL_EINVAL;
}

int zkl_leader_close(zkl_leader *l)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return election_close(&l->e);
}

void zkl_leader_free(zkl_leader *l)
{
	if (!l)
		return;
	election_free(&l->e);
	free(l);
}

int zkl_leader_participants(zkl_leader *l, zkl_participant **out, size_t *count)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return election_participants(&l->e, out, count);
}

int zkl_leader_leader_id(zkl_leader *l, char **id)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return election_leader_id(&l->e, id);
}

const char *zkl_leader_path(const zkl_leader *l)
{
	return l ? l->e.path : NULL;
}

/* ---- zkl_selector ---- */

void zkl_selector_options_init(zkl_selector_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->lose_on_suspend = true;
}

int zkl_selector_new(zkl_selector **out, zkl_client *c, const char *path, zkl_selector_fn fn,
                     void *data, const zkl_selector_options *o)
{
	zkl_clear_error();
	if (!out)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!fn)
		return zkl_fail(ZKL_EINVAL, "leader function is NULL");
	zkl_selector_options defaults;
	if (!o) {
		zkl_selector_options_init(&defaults);
		o = &defaults;
	}
	zkl_selector *s = calloc(1, sizeof *s);
	if (!s)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	int rc = election_init(&s->e, c, path, o->id, ZKL_KIND_LOCK, s);
	if (rc != 0) {
		free(s);
		return rc;
	}
	s->e.fn = fn;
	s->e.fn_data = data;
	s->e.requeue = o->requeue;
	s->e.lose_on_suspend = o->lose_on_suspend;
	*out = s;
	return 0;
}

int zkl_selector_start(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return election_start(&s->e);
}

int zkl_selector_requeue(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	struct election *e = &s->e;
	int rc = 0;
	pthread_mutex_lock(&e->c->mu);
	if (e->closing)
		rc = zkl_fail(ZKL_ECLOSED, "the selector of %s is closed", e->path);
	else if (!e->started)
		rc = zkl_fail(ZKL_EINVAL, "the selector of %s was not started", e->path);
	else if (e->idle) {
		e->idle = false;
		pthread_cond_broadcast(&e->cv);
	} else if (e->in_lead) {
		e->again = true;
	}
	pthread_mutex_unlock(&e->c->mu);
	return rc;
}

bool zkl_selector_has_leadership(zkl_selector *s)
{
	return s && election_leading(&s->e);
}

int zkl_selector_wait(zkl_selector *s, int timeout_ms)
{
	ZKL_CHECK_HANDLE(s, "selector");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	struct election *e = &s->e;
	int64_t deadline = zkl_deadline(timeout_ms);
	pthread_mutex_lock(&e->c->mu);
	while (e->leading) {
		if (zkl_cond_wait_until(&e->cv, &e->c->mu, deadline) && e->leading) {
			rc = ZKL_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&e->c->mu);
	return rc;
}

void zkl_selector_interrupt(zkl_selector *s)
{
	if (!s)
		return;
	struct election *e = &s->e;
	pthread_mutex_lock(&e->c->mu);
	if (e->leading) {
		e->interrupt = true;
		e->leading = false;
		wake_thread(e);
	}
	pthread_mutex_unlock(&e->c->mu);
}

int64_t zkl_selector_token(zkl_selector *s)
{
	return s ? election_token(&s->e) : ZKL_EINVAL;
}

int zkl_selector_close(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return election_close(&s->e);
}

void zkl_selector_free(zkl_selector *s)
{
	if (!s)
		return;
	election_free(&s->e);
	free(s);
}

int zkl_selector_participants(zkl_selector *s, zkl_participant **out, size_t *count)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return election_participants(&s->e, out, count);
}

int zkl_selector_leader_id(zkl_selector *s, char **id)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return election_leader_id(&s->e, id);
}
