/* Leader election: zkl_leader (Curator's LeaderLatch) and zkl_selector (Curator's
 * LeaderSelector: run a function while leader).
 *
 * zkl_leader queues an ephemeral-sequential node "_c_<uuid>-latch-<seq>" under the
 * election path, with the participant's id as its data, exactly as Curator's LeaderLatch
 * does, so C and Java participants of one path elect one leader among them. The first
 * node leads, once a read of it has shown that its ephemeral owner is our current
 * session; every other participant watches the node just before its own. Once started
 * with zkl_leader_start(), a latch joins the election again by itself after a loss,
 * until it is closed (the election runs on the client's loop: see below).
 *
 * zkl_selector queues "_c_<uuid>-lock-<seq>" nodes (Curator's LeaderSelector, which is a
 * mutex: zkl_mutex and `zklock` on the same path exclude it) and, while it leads, runs a
 * function of the caller's; when the function returns, leadership is given up, and with
 * `requeue` the selector joins the election again.
 *
 * Leadership ends when the session is lost (expired, or given up for lost by the loss
 * rule of zkl_client_options.loss_percent: see zkl_state), when the leader's node is
 * deleted from outside, and, unless lose_on_suspend is false, as soon as the connection
 * drops (SUSPENDED: the session may still live, but nothing can be proven; Curator's
 * default). A latch that lost leadership to a suspension keeps its node and leads again
 * if, once reconnected, its node is still there and still its session's.
 *
 * Whether this participant leads (zkl_lock_is_held() of the latch's or the selector's
 * view) turns false as soon as the loss is known, on the thread that learns it (the
 * client's loop for a session or connection loss), before any callback runs. Every
 * fencing token (zkl_lock_token() of either view) is the czxid of the leader's node: it
 * only grows from one leader to the next.
 *
 * The election runs on the client's loop: no thread of its own, and every callback
 * (gained, lost, the view's acquired and lost callbacks) runs there, like every other
 * zklocks callback (in zkl_client_process() with external_loop). The one exception is
 * the selector's function, which may run for long: it runs on a thread that the
 * selector starts for each leadership, while the loop keeps watching.
 *
 * A latch is also a lock: zkl_leader_lock() gives its zkl_lock view, whose acquire joins
 * the election and returns once this participant leads (one leadership per acquire),
 * and whose release leaves it. A latch is used either way, not both: started with
 * zkl_leader_start() it stays in the election by itself until closed. Either way the
 * verbs every lock shares answer for it (is_held, token, node, participants, path,
 * set_data, on_lost): they are not repeated here.
 *
 * All functions are thread-safe. */
#ifndef ZKLOCKS_LEADER_H
#define ZKLOCKS_LEADER_H

#include <zklocks/common.h>
#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

/* ---- zkl_leader: the latch ---- */

typedef struct zkl_leader zkl_leader;

/* Called when this participant becomes the leader: once per leadership, on the client's
 * loop, with no zklocks lock held. Gained and lost calls of one latch alternate, gained
 * first, and never overlap. It may call any zkl_leader function on l except
 * zkl_leader_free(), and no blocking one (zkl_leader_await() with a timeout fails with
 * ZKL_EDEADLK); zkl_leader_close(l) from here returns at once and the latch leaves once
 * the callback has returned. It should return promptly: it runs on the loop. */
typedef void (*zkl_leader_gained_fn)(zkl_leader *l, void *data);

/* Called when leadership announced by the gained callback ends, once per leadership, on
 * the client's loop, with no zklocks lock held (same rules as the gained callback).
 * reason says why:
 *   ZKL_ELOST      the session was lost (expired, or could not be proven alive)
 *   ZKL_ECONNLOSS  the connection dropped (lose_on_suspend); leadership may come back
 *   ZKL_ENOTHELD   our node was deleted from outside
 *   ZKL_ECLOSED    zkl_leader_close() was called (only with notify_on_close)
 *   ZKL_ECANCELED  zkl_leader_interrupt() was called: leadership was given up
 * After every reason but ZKL_ECLOSED the latch stays in the election (with a new node
 * unless the reason was ZKL_ECONNLOSS; after ZKL_ECANCELED at the back of the queue, so
 * that the next in line leads at once). */
typedef void (*zkl_leader_lost_fn)(zkl_leader *l, int reason, void *data);
/* Called when a revoker asks the leader to give leadership up (zkl_revoke() of its
 * node, `zklock revoke PATH`, which writes "__REVOKE__" into the node): once per
 * leadership, on the client's loop, with no zklocks lock held, after the gained callback
 * (a request made before this participant led is told as soon as it leads). Leadership
 * goes on until the application gives it up: zkl_leader_interrupt() for a started latch,
 * zkl_lock_release() of the view for a leadership taken through it. Same rules as the
 * gained callback. */
typedef void (*zkl_leader_revoke_fn)(zkl_leader *l, void *data);

typedef struct zkl_leader_options {
	/* The participant id, stored as the node's data (copied). Default NULL: the id is
	 * "<hostname>:<pid>", so that `zklock status` can show who leads. (Curator's
	 * default id is the empty string.) */
	const char *id;
	/* Callbacks, each may be NULL (the default); data is passed to both. */
	zkl_leader_gained_fn on_gained;
	zkl_leader_lost_fn on_lost;
	void *data;
	/* Whether leadership ends when the connection drops (the client turns SUSPENDED).
	 * Default true, Curator's default. With false it ends only when the session is lost. */
	bool lose_on_suspend;
	/* Whether zkl_leader_close() of the leader calls on_lost with ZKL_ECLOSED, before
	 * the node is deleted. Default false (Curator's CloseMode.SILENT). */
	bool notify_on_close;
	/* Called when a revoker asks the leader to give up (see zkl_leader_revoke_fn), with
	 * data. Default NULL: a request is ignored (as Curator's LeaderLatch does). */
	zkl_leader_revoke_fn on_revoke;
} zkl_leader_options;

/* Fills o with the defaults above. */
ZKL_API void zkl_leader_options_init(zkl_leader_options *o);

/* Makes a latch for the absolute election path on client c (nothing is sent yet). path
 * and the options are copied; o may be NULL for the defaults. On success *out is the
 * caller's, freed with zkl_leader_free(). Returns 0, ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_leader_new(zkl_leader **out, zkl_client *c, const char *path,
                           const zkl_leader_options *o);

/* Joins the election for good: the client's loop queues our node and waits in the
 * background; returns at once. Once only: ZKL_EBUSY if already started, or while
 * leadership is taken through the latch's lock view; ZKL_ECLOSED after close. Returns
 * 0, ZKL_EINVAL, ZKL_EBUSY or ZKL_ECLOSED. */
ZKL_API int zkl_leader_start(zkl_leader *l);

/* Waits until this participant leads, at most timeout_ms (ZKL_WAIT_FOREVER, or 0 to look
 * once). Returns 0 when it leads, ZKL_ETIMEDOUT, ZKL_ECLOSED once closed (also while
 * waiting), ZKL_EINVAL (bad timeout, or not started), or ZKL_EDEADLK (a timeout other
 * than 0 on a thread that runs the client's loop: in a callback, or the application's
 * loop thread). */
ZKL_API int zkl_leader_await(zkl_leader *l, int timeout_ms);

/* Leaves the election for good: our node is deleted (or, with the connection down, left
 * to the session), and if we led and notify_on_close is set, on_lost(ZKL_ECLOSED) runs
 * first. From any thread but the loop's, it returns once the latch is out of the
 * election and none of its callbacks runs (so none runs after it); on a thread that runs
 * the loop (a callback, or the application's loop thread) it returns at once. Closing
 * twice, or a latch never started, is fine. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_leader_close(zkl_leader *l);

/* Closes l if needed and frees it. Not from l's own gained or lost callbacks. On the
 * loop's thread (another handle's callback, the view's acquired callback, or the
 * application's loop thread) it returns at once and the latch is freed once out of the
 * election. NULL is a no-op. */
ZKL_API void zkl_leader_free(zkl_leader *l);

/* Gives up the current leadership of a started latch (planned failover, as
 * zkl_selector_interrupt()): zkl_lock_is_held() of the view turns false at once, on_lost
 * runs with ZKL_ECANCELED, our node is deleted, and the latch joins the election again
 * at the back, so the next in line leads at once. No effect when not leading, nor on a
 * leadership taken through the view (release the view instead: its node stays until
 * then, so that nobody else leads while the application still acts as leader). Any
 * thread, callbacks too. NULL is a no-op. */
ZKL_API void zkl_leader_interrupt(zkl_leader *l);
/* The id of the current leader (the first participant), NUL-terminated, in *id: the
 * caller's, freed with free(). Returns 0, or ZKL_ENOTHELD (with *id NULL) if nobody
 * takes part in the election, or ZKL_EDEADLK on a thread that runs the client's loop (it
 * waits for ZooKeeper's answer, and nothing there waits for the server). */
ZKL_API int zkl_leader_leader_id(zkl_leader *l, char **id);

/* The latch's zkl_lock view (lock.h), kind "leader", valid as long as l; NULL for NULL.
 * Its verbs:
 * - acquire / acquire_async: join the election and end once this participant leads
 *   (after the read that proves our node ours), or when the timeout passes (our node is
 *   withdrawn: ZKL_ETIMEDOUT), or ZKL_ECANCELED (zkl_lock_cancel()). One at a time, and
 *   not while leading: ZKL_EBUSY; nor on a latch started with zkl_leader_start():
 *   ZKL_EBUSY. The latch's gained and lost callbacks run for this leadership too.
 * - release: leaves the election (our node is deleted; with notify_on_close the lost
 *   callback runs with ZKL_ECLOSED). ZKL_ENOTHELD without a leadership taken this way;
 *   ZKL_ELOST once it was lost.
 * - a leadership taken this way ends for good when lost (each reason of
 *   zkl_leader_lost_fn: ZKL_ELOST, ZKL_ECONNLOSS with lose_on_suspend, ZKL_ENOTHELD...):
 *   the latch leaves the election, the view's lost callback (zkl_lock_on_lost) runs with
 *   that reason, and the view must be released before it is acquired again.
 * - is_held, token: leadership (Curator's hasLeadership), whichever way it was taken:
 *   is_held turns false as soon as the loss is known, before any callback runs; the
 *   token is the czxid of our node. node: our node, queued or leading. set_data: the id
 *   stored in the nodes made from now on. participants: in election order, the leader
 *   first (holder set), with their ids as data; whether or not the latch was started.
 *   path: the election path. */
ZKL_API zkl_lock *zkl_leader_lock(zkl_leader *l);

/* ---- zkl_selector: run a function while leader ---- */

typedef struct zkl_selector zkl_selector;

/* Runs while this participant leads, on a thread that the selector starts for each
 * leadership, with no zklocks lock held. Leadership is given up (our node deleted) when
 * it returns. When leadership is lost or interrupted meanwhile (zkl_lock_is_held() of
 * zkl_selector_lock(s) turns false), it should return soon: zkl_selector_wait() is the
 * way to sleep until then. The node stays until it returns, so no other participant leads
 * before. It may call any zkl_selector function on s; zkl_selector_close(s) from here
 * returns at once, and zkl_selector_free(s) too: s is then freed once fn has returned (do
 * not use it after the free; a zkl_client_close() of its client waits for that). */
typedef void (*zkl_selector_fn)(zkl_selector *s, void *data);

typedef struct zkl_selector_options {
	/* The participant id, stored as node data (copied); default NULL: "<host>:<pid>". */
	const char *id;
	/* Join the election again each time fn returns, or leadership is lost. Default
	 * false: the selector then leads once per zkl_selector_start()/_requeue(). */
	bool requeue;
	/* Whether leadership ends when the connection drops. Default true. */
	bool lose_on_suspend;
} zkl_selector_options;

/* Fills o with the defaults above. */
ZKL_API void zkl_selector_options_init(zkl_selector_options *o);

/* Makes a selector for the absolute path on c that runs fn(s, data) while it leads.
 * Copies path and options (o may be NULL). *out is the caller's, freed with
 * zkl_selector_free(). Returns 0, ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_selector_new(zkl_selector **out, zkl_client *c, const char *path,
                             zkl_selector_fn fn, void *data, const zkl_selector_options *o);

/* Joins the election in the background (once; ZKL_EBUSY after). Returns at once. */
ZKL_API int zkl_selector_start(zkl_selector *s);

/* The selector's zkl_lock view (kind "selector"), owned by s. What the view says:
 *   zkl_lock_is_held(): whether this participant leads (true while fn runs, until the
 *   leadership is lost or interrupted);
 *   zkl_lock_token(): the fencing token of the current leadership, or ZKL_ENOTHELD;
 *   zkl_lock_node(): our node while queued or leading;
 *   zkl_lock_participants(): the participants in election order (holder first, with
 *   holder set), with their ids as data, whether or not the selector was started;
 *   zkl_lock_on_lost(): called on the client's loop as soon as a leadership is lost
 *   (the session, the connection with lose_on_suspend, or our node deleted from
 *   outside), while fn may still run; not when fn returns or is interrupted;
 *   zkl_lock_set_data(): the id of the nodes made from now on.
 * A selector leads through zkl_selector_start() and runs fn: acquire, acquire_async and
 * release on its view fail with ZKL_ENOTSUP (leadership as a lock is zkl_leader_lock()).
 * path: the election path. */
ZKL_API zkl_lock *zkl_selector_lock(zkl_selector *s);

/* Makes the selector take part in the election once more (Curator's requeue()): at once
 * if it is idle; once the current leadership has ended if it leads (so fn may call it to
 * lead again later); nothing if it is queued already. Returns 0, ZKL_EINVAL if not
 * started, ZKL_ECLOSED after close. */
ZKL_API int zkl_selector_requeue(zkl_selector *s);

/* For fn: sleeps until the current leadership ends (lost, interrupted, or closing) or
 * timeout_ms passes. Returns 0 when it has ended (or there is none), ZKL_ETIMEDOUT while
 * it lasts, ZKL_EINVAL for a bad timeout. */
ZKL_API int zkl_selector_wait(zkl_selector *s, int timeout_ms);

/* Ends the current leadership (Curator's interruptLeadership()): the view's
 * zkl_lock_is_held() turns false and zkl_selector_wait() returns; the node goes once fn
 * returns. No effect when not leading. */
ZKL_API void zkl_selector_interrupt(zkl_selector *s);

/* Leaves the election for good: interrupts fn, waits until it has returned and the
 * node is gone. From fn itself it returns at once. Returns 0 or ZKL_EINVAL. */
ZKL_API int zkl_selector_close(zkl_selector *s);

/* Closes s if needed and frees it. From fn, returns at once: s is freed once fn has
 * returned. NULL is a no-op. */
ZKL_API void zkl_selector_free(zkl_selector *s);


/* The id of the current leader; see zkl_leader_leader_id(). */
ZKL_API int zkl_selector_leader_id(zkl_selector *s, char **id);

ZKL_END_DECLS

#endif
