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

#include "election.h"
#include "predicates.h"

/* ---- notifications from other threads (c->mu held by the callers below) ---- */

void election_wake(struct election *e)
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
	election_wake(e);
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
	election_wake(e);
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
	election_wake(e);
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

int election_init(struct election *e, zkl_client *c, const char *path, const char *id,
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

int election_start(struct election *e)
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

int election_close(struct election *e)
{
	zkl_client *c = e->c;
	pthread_mutex_lock(&c->mu);
	bool started = e->started;
	e->closing = true;
	e->leading = false;
	election_wake(e);
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

void election_free(struct election *e)
{
	election_close(e);
	pthread_mutex_lock(&e->c->mu);
	zkl_data_free(&e->id);
	pthread_mutex_unlock(&e->c->mu);
	pthread_cond_destroy(&e->cv);
	free(e->path);
}

bool election_leading(struct election *e)
{
	pthread_mutex_lock(&e->c->mu);
	bool l = e->leading;
	pthread_mutex_unlock(&e->c->mu);
	return l;
}

int64_t election_token(struct election *e)
{
	pthread_mutex_lock(&e->c->mu);
	int64_t t = e->leading ? e->token : ZKL_ENOTHELD;
	pthread_mutex_unlock(&e->c->mu);
	return t;
}

int election_participants(struct election *e, zkl_participant **out, size_t *count)
{
	if (!out || !count)
		return zkl_fail(ZKL_EINVAL, "output pointer is NULL");
	return zkl_engine_participants(e->c, e->path, 1, out, count);
}

int election_leader_id(struct election *e, char **id)
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
