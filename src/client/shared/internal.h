/* Internal structures shared by the client (src/client), the lock-queue engine
 * (src/engine/) and the recipes. Never installed.
 *
 * What is shared between threads, and what guards it:
 *
 *   - The client's mutex `zkl_client.mu` is the drive lock: whichever thread runs a
 *     turn of the loop holds it for the turn (the event thread; with external_loop the
 *     application's thread in zkl_client_process(), or a blocking caller driving its
 *     own job), and lets go of it only around the application's callbacks and while it
 *     waits for work. It guards every field below marked "mu": engine and recipe
 *     state, waiters, sessions, background tasks, data watches, listeners. Everything in
 *     src/engine/ and recipes/ runs on the loop, under it, and never takes it; a step
 *     sends its requests while it holds it, since the C client's threads never take it
 *     (nothing that holds it waits inside the C client, except a session's close, done
 *     with it let go of). Application threads take it only at the API's edge, inside
 *     this layer, briefly and never across a wait for the server: to open and close the
 *     client and its handles, to read its lists (listeners, handles), to give back a
 *     request's answer (zkl__op_release); with external_loop also to run a call at once
 *     as the loop would (zkl__call) and to drive the job they wait for (zkl__job_wait,
 *     zkl__drive_run), and to apply a hold's end as the loop would. A hold's end that
 *     is not the usual one (lost, or its session changed) is a call to the loop
 *     (holds.c), which its owner waits for on the call alone. Everything else an
 *     application thread learns of the loop's state is published: atomics below, or an
 *     answer the loop marked (op->leaving).
 *   - `inbox_mu` guards the inbox and the loop's wake count (`kicks`). The C client's
 *     completion thread, in every mode, only queues what it hears there, in a message
 *     that lives in what it is about (struct zkl_msg), and wakes whoever waits for the
 *     loop's work; it never takes mu. An adopted handle's session events come through
 *     the watcher chained with the application's, which does the same under
 *     `adoptions_mu`. inbox_mu is taken after mu when both are held.
 *   - Atomics, read by any thread without a lock: a hold's state and whether it is lost
 *     (written by the loop and its owner), the published session and the count of
 *     releases sending their delete on it (`sess_pub`, `pins`), a session's `connected`,
 *     an op's laziness, a session event's `used`; what the loop publishes: the public
 *     state (`state_pub`, zkl_client_state()), the session timeout (`timeout_pub`), the
 *     thread that runs an external loop (`loop_tid`) and when the loop next has work
 *     (`due_pub`); the statistics, `hurry` and `efd_armed`.
 *   - `adoptions_mu` (session.c) guards the list of adopted handles, which the C
 *     client's completion thread reads to find the client of a handle.
 *
 * An application thread hands the loop an acquisition, a job (a request it waits for,
 * loop.c), a cancel, or any function of a recipe whose state only the loop touches
 * (zkl__loop_run, loopcall.c) as a call (zkl__call), through the inbox, and waits, if it
 * does, on that call, acquisition or job alone, never on mu: from the call on, only the
 * loop touches it. A wait for a condition of a recipe's state is a job too
 * (zkl__loop_wait), which the recipe's machine wakes (zkl__wake_owner). A step of
 * the loop runs the application's code with mu let go of (zkl__loop_callout). A job's
 * step may start further jobs (an engine acquisition) as its children
 * (zkl__job_begin), run where the job is run. Only the loop sends requests, with
 * one exception: a release sends its delete itself (zkl__task_delete_sent), leaving the
 * answer to the loop. */
#ifndef ZKL_INTERNAL_H
#define ZKL_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include <zklocks/client.h>
#include <zklocks/errors.h>

#include "clock.h"
#include "errors_internal.h"
#include "log.h"
#include "names.h"
#include "paths.h"
#include "zk.h"

/* Something the loop runs: an acquisition, a job (a thread's request, loop.c), or a
 * recipe's machine. It is linked into the client's list while it is under way, so that
 * completions, watches, state changes and cancel requests can wake it: waking queues it,
 * and the loop calls run(). */
struct zkl_waiter {
	struct zkl_waiter *next, *prev; /* mu: in client->waiters */
	const void *owner;              /* recipe handle, for *_cancel() */
	bool canceled;                  /* mu */
	void (*run)(zkl_client *c, struct zkl_waiter *w);
	int64_t wake_at;                /* mu: run it then even if nothing wakes it */
	bool queued;                    /* mu: in client->ready */
	/* Run by the thread that waits for it (a job with external_loop), never by the
	 * loop: waking it sets woken and wakes that thread (zkl__waiter_due). */
	bool own_thread;
	bool woken;                     /* mu */
	struct zkl_waiter *ready_next;  /* mu */
};

/* One ZooKeeper session: one zhandle_t. A new one replaces it after expiry; the old one
 * is closed once every request sent on it has completed. */
struct zkl_session {
	struct zkl_client *c;
	zhandle_t *zh;
	uint64_t gen;         /* client-wide session generation, 1, 2, ... */
	int inflight;         /* mu: requests sent whose completion has not run yet */
	int ops;              /* mu: requests (struct zkl_op) not freed yet: they point here */
	bool gone;            /* mu: closed (session_free()); freed with its last request */
	int64_t id;           /* mu: session id once connected */
	atomic_bool connected;/* written with mu held: the C client says CONNECTED right now */
	bool expired;         /* mu */
	bool check_refused;   /* mu: a heartbeat's check was refused (said once) */
	bool ever_connected;  /* mu */
	/* mu: when the last write a quorum committed on this session was sent (0: none
	 * yet): the server cannot expire the session before last_proof_sent + the session
	 * timeout, so every hold's loss deadline counts from it (zkl__lost_at). */
	int64_t last_proof_sent;
	/* mu: when the last request of any kind that the session's server answered was sent
	 * (0: none yet): what a session that holds nothing is given up by (liveness.c). */
	int64_t last_heard_sent;
	/* mu: the session's liveness mode at the loop's last look (enum zkl_live), and when
	 * it last entered and left ZKL_LIVE_QUIET (no heartbeat was due while quiet: the
	 * silence before counts for nothing, and the first writes after prove less,
	 * zkl__lost_at()). */
	int live_mode;
	int64_t quiet_began, quiet_ended;
	/* mu: a hold on it reached its loss deadline: the loop gives the session up at
	 * zkl__lost_at(), held or not by then, since the server may have expired it. */
	bool doomed;
	struct zkl_watch *watches; /* mu: watches the C client may still call */
	bool standin;         /* mu: an adopted client's expired handle, standing in until the
	                       * application hands the next one over */
	bool given_up;        /* mu: an adopted session (c->adopted: the application's handle,
	                       * never closed here) given up by the loss rule, and not
	                       * heard from since */
	int64_t given_up_at;  /* mu */
	struct zkl_session *next;  /* mu: in client->retired */
	int64_t retired_at;
};

/* What the loop is told from other threads: a completion or a watch event from the C
 * client's completion thread, or an application thread's call, queued in the client's
 * inbox (loop.c) and applied by the loop under mu, in order. */
struct zkl_msg {
	struct zkl_msg *next;      /* inbox_mu */
	int kind;                  /* core.h's enum msg_kind: what the inbox looks at */
	/* Applies the message on the loop; set by whoever posts it. A message lives in
	 * what it is about (a request, a watch, a task, a hold, a call), so that posting
	 * it allocates nothing: apply frees only what it allocated itself. Returns the
	 * waiter the message is for (a request's, a node watch's), which the loop then
	 * wakes, or NULL. */
	struct zkl_waiter *(*apply)(struct zkl_client *c, struct zkl_msg *m);
};

/* A node watch. Two references: the waiting thread's and the C client's (dropped when
 * the watch fires, when registration failed, or when its session is closed). */
struct zkl_watch {
	int refs;                       /* mu */
	struct zkl_session *s;
	struct zkl_waiter *w;           /* mu: NULL once the waiting thread has let go */
	bool fired;                     /* mu */
	int event;                      /* mu: the event that fired it (ZOO_DELETED_EVENT...) */
	bool registered;                /* mu: in s->watches */
	char *path;                     /* the watched path (to remove the watch from an
	                                 * adopted handle, which we never close) */
	struct zkl_watch *next, *prev;  /* mu */
	/* inbox_mu: a node event of it is no news to anyone, and does not wake the loop
	 * (zkl__inbox_put), once *quiet_if is true (the releasing flag of the hold whose
	 * node it watches: its owner's own delete fires it), or once quiet is (set when
	 * the loop lets go of it, with quiet_if NULL from then on). */
	const atomic_bool *quiet_if;
	bool quiet;
	/* The node event, posted to the loop by the watcher (completion thread): a watch
	 * fires once for its node, and session events are the session's to tell. */
	struct zkl_msg ev;
	int ev_type;
};

enum zkl_op_kind { ZKL_OP_CREATE, ZKL_OP_DELETE, ZKL_OP_CHILDREN, ZKL_OP_GET, ZKL_OP_EXISTS, ZKL_OP_SET,
                   ZKL_OP_SYNC, ZKL_OP_CHECK, ZKL_OP_MULTI };

/* One operation of a multi (ZKL_OP_MULTI), all of whose operations commit or none:
 * type is the C client's ZOO_CREATE_OP, ZOO_SETDATA_OP, ZOO_DELETE_OP or ZOO_CHECK_OP. */
struct zkl_mop {
	int type;
	const char *path;
	const void *data;   /* create, set: len bytes (NULL: none) */
	int len;
	int version;        /* set, delete, check: -1 for any */
	int mode;           /* create: ZOO_PERSISTENT, ZOO_EPHEMERAL... */
};


/* A call an application thread makes of the loop: fn runs with mu held, on the loop,
 * after everything handed to the loop before it (zkl__call). */
struct zkl__call {
	struct zkl_msg msg;
	void (*fn)(zkl_client *c, struct zkl__call *call); /* may free call */
};

/* One asynchronous request. Two references: the waiting thread's and the completion's. */
struct zkl_op {
	struct zkl_msg msg;        /* its completion, in the inbox */
	int zrc;                   /* the completion's return code, until applied */
	int refs;                  /* mu */
	int64_t sent_at;           /* when the request went out (ms) */
	enum zkl_op_kind kind;
	/* Sent while the session needed no committed write (zkl__live_mode() was not
	 * ZKL_LIVE_PROVE): any answer then counts for an adopted session given up. */
	bool idle;
	/* Its answer does not wake the loop: the answer of a request sent after it on the
	 * same session will, and the session answers in order (a create followed by its
	 * list). Read by the completion thread; zkl__op_hasten() clears it. */
	atomic_bool lazy;
	/* Set before it is sent: lazy as long as its answer is ZOK; the completion clears
	 * lazy for any other answer, which its waiter must hear at once. */
	bool lazy_unless_ok;
	struct zkl_session *s;
	struct zkl_waiter *w;      /* mu: NULL once abandoned */
	bool done;                 /* mu */
	int rc;                    /* mu: ZooKeeper's return code */
	struct Stat stat;
	char *value;               /* CREATE: created path; GET: data (NUL-terminated) */
	int value_len;
	char **names;              /* CHILDREN */
	int count;
	/* CHILDREN with mark_leaving: the folder listed, and with the answer, which of names
	 * are our own nodes on their way out (a background delete), as the loop saw then. */
	char *listed;
	bool *leaving;
	struct zkl_watch *watch;   /* GET/CHILDREN with a watch: dropped if not registered */
	/* MULTI: its operations' results (the C client writes them before the completion),
	 * where each create writes the node it made, and each set the node's stat. */
	int nmops;
	zoo_op_result_t *results;
	char **made;
	struct Stat *stats;
	/* A create abandoned before it completed: the completion queues the cleanup. */
	char *cleanup_parent;
	char uuid[ZKL_UUID_LEN + 1];
};

/* Something held on a session (a lock, a lease); the loop reports it lost once, also when
 * its owner ends it first (zkl__hold_end reports it, or waits for the loop to). The
 * loop owns the record: it makes and links it at the grant (zkl_queue.hold), its owner
 * ends it (zkl__hold_end), and the loop unlinks and frees it. No thread but the loop
 * takes mu for a hold: its state is atomic. */
enum zkl_hold_state {
	ZKL_HOLD_HELD,        /* the owner's */
	ZKL_HOLD_DISPATCHING, /* the loop runs on_lost: an end waits for it to return */
	ZKL_HOLD_ENDED,       /* let go of by its owner: the loop calls nothing more */
};

struct zkl_hold {
	struct zkl_msg end;               /* its end, handed to the loop */
	struct zkl_hold *next, *prev;     /* loop: in client->holds */
	uint64_t gen;                     /* session it was acquired on */
	atomic_int state;                 /* enum zkl_hold_state */
	atomic_bool lost;                 /* set by the loop; read by anyone */
	/* Set by its owner before its release sends the delete: the node's deletion from
	 * then on is the release's own, and the node's watch no loss (holds.c). */
	atomic_bool releasing;
	bool notified;                    /* loop: on_lost has been or is being called, or
	                                   * the loop found it ended */
	bool reported;                    /* mu: on_lost has been or is being called */
	bool in_dispatch;                 /* loop: its on_lost runs right now */
	bool unlinked;                    /* loop: ended and unlinked while on_lost ran */
	struct hold_finish *finish;       /* loop: an end asked for while on_lost ran */
	struct zkl_nodewatch *nw;         /* loop: the watch on its node (holds.c) */
	/* Loop: lost because its node was deleted by someone else, an answer on its session
	 * after the node went says so (holds.c); while deleting, the watch saw the node
	 * go and asks the session whether it lived on (its end: the node went with it). */
	bool deleted;
	bool deleting;
	/* Loop: lost because the server said its node is gone (or another session's), not
	 * by its session's end or silence: set before it is marked lost, read by on_lost
	 * (on the loop) to tell the loss ZKL_EDELETED rather than ZKL_ELOST. */
	bool node_gone;
	void (*on_lost)(struct zkl_hold *h, void *ctx);
	void *ctx;
	/* What the observer is told of it (zkl__hold_observe): its kind ("mutex", ...; NULL:
	 * nothing is told), token, and when it was granted. Set before it is linked. */
	const char *kind;
	int64_t token;
	int64_t granted_at;
	char path[];                      /* its node, or "" */
};

/* ---- the observer (observer.c) ---- */

/* Queues ev for the observer, if one is set (any thread, no lock of the client needed):
 * the strings are copied, and the loop tells it with no lock held. zkl__observe(), inline
 * in hold.h, calls it only while one is set (obs_on). */
void zkl__observe_queue(zkl_client *c, const zkl_lock_event *ev);
/* Tells the observer of an event of hold h (type RELEASED, LOST or REVOKED) at now, h
 * held for held ms: queued as zkl__observe_queue() does. */
void zkl__hold_tell(zkl_client *c, const struct zkl_hold *h, zkl_lock_event_type type,
                   int64_t now, int64_t held);
/* zkl__observe(), zkl__stats_count(), zkl__hold_observe() and zkl__observe_wait():
 * inline, hold.h. */
/* Tells the observer what is queued (on the loop, which lets go of its lock around the calls). */
void zkl__observer_run(zkl_client *c);
/* Sets up and frees what observer.c keeps in c. */
void zkl__observer_init(zkl_client *c);
void zkl__observer_free(zkl_client *c);

/* What a data watch found in its node's data. The recipe that keeps the watch decodes
 * it (recipes/revoke.c, recipes/shared_count.c): the client knows no format. A decoder
 * runs on the C client's completion thread, so it only reads its arguments. */
enum zkl__data_read { ZKL_DATA_NOTHING, ZKL_DATA_REQUEST, ZKL_DATA_VALUE };
typedef enum zkl__data_read (*zkl_data_decode_fn)(const char *data, int len, int32_t *value);

/* A data watch on one node: a revocation watch on one of our nodes (Curator's protocol),
 * whose fn the loop calls each time decode finds a request in the data, or a value
 * watch (a shared count).
 * References: the owner's, one per request in flight, one while the C client holds the
 * watch. */
struct zkl_revwatch {
	int refs;                         /* mu */
	struct zkl_revwatch *next, *prev; /* mu: in client->revwatches */
	char *path;
	uint64_t gen;
	bool active;        /* mu: the owner still wants it */
	bool want_read;     /* mu: (re)read the data and re-arm the watch */
	bool inflight;      /* mu */
	bool registered;    /* mu: the C client holds the watch */
	struct zkl_session *s;
	int requests;       /* mu: revocation requests seen and not yet dispatched */
	/* Shared-count mode (fn == NULL): each read stores the node's 4-byte big-endian value
	 * here, bumps *epoch and wakes every waiter; the watch follows new sessions. */
	int32_t *value;
	unsigned *epoch;
	bool dispatching;   /* mu */
	zkl_data_decode_fn decode;
	void (*fn)(void *ctx, const char *path);
	void *ctx;
	/* Posted to the loop by the completion thread: the watch's event (one per watch
	 * set: registered) and the read's answer (one read out at a time: inflight). */
	struct zkl_msg ev;
	int ev_type;
	struct zkl_msg read;
	int read_rc;
	enum zkl__data_read read_kind; /* what the decoder found */
	int32_t read_value;            /* ZKL_DATA_VALUE's */
};

/* A session event, with what the handle said when it happened: posted to the loop by
 * a handle's watcher (completion thread), in one of the client's sess_evs. */
struct zkl_session_ev {
	struct zkl_msg m;
	struct zkl_session *s;  /* its session's; NULL for an adopted handle's (zh) */
	zhandle_t *zh;
	int state;
	int64_t id;             /* CONNECTED: the session's id and timeout */
	int timeout;
	atomic_bool used;       /* taken by a watcher, until the loop has applied it */
	bool heap;              /* allocated: none of sess_evs was free */
};
#define ZKL_SESSION_EVS 8

struct zkl_client {
	const struct zkl_zk_ops *zk; /* the request layer's door to ZooKeeper (zk.h) */
	void *zk_self;
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* state changes: open, hold removal, drains */
	char *servers;
	int session_timeout_req;
	int connect_timeout;
	/* The session's credentials and transport; every string in it is the client's own
	 * copy (freed with it). */
	struct zkl_zk_creds creds;
	struct zkl_logger logger;   /* set at open, read by any thread */
	bool quiet_zk_log;
	bool confirm_release;
	/* mu: the last folder a handle's first acquire looked for was missing; the next one
	 * bets on a new folder too (engine.c). */
	bool folders_new;
	/* mu: folders being made by an acquisition that found one missing; the others of
	 * the same folder wait for it (the engine's: acquire.c). */
	struct zkl_folder *folders;
	/* The kind of folders made (folders.c): the option, and whether the server refused
	 * a container (with ZKL_FOLDERS_AUTO: from then on folders are persistent). */
	zkl_lock_folders lock_folders;
	atomic_bool containers_refused; /* calloc's false */

	struct zkl_session *sess;   /* mu: current session */
	/* The current session, for a release's delete sent without mu (NULL: send nothing
	 * so; adopted and external_loop clients never do), and the number of such deletes
	 * under way whose task the loop has not taken over yet: while it is not 0, the loop
	 * closes no session's handle (zkl__task_delete_sent). */
	_Atomic(struct zkl_session *) sess_pub;
	atomic_int pins;
	struct zkl_session *retired;/* mu: old sessions waiting to be closed */
	uint64_t gen;               /* mu: == sess->gen */
	zkl_state state;            /* mu: public state */
	atomic_int timeout_pub;     /* the session timeout (zkl__session_timeout_ms) */
	atomic_int state_pub;       /* state as the loop publishes it, ZKL_STATE_CLOSED once
	                             * closing: zkl_client_state() waits for no turn */
	int timeout_ms;             /* mu: negotiated */
	bool auth_failed;           /* mu */
	const struct ACL_vector *acl; /* of created nodes */
	struct ACL acl_entries[2];
	struct ACL_vector acl_custom;
	/* Liveness: a hold is lost at sess->last_proof_sent plus loss_percent of the session
	 * timeout, connected or not (zkl__lost_at), which leaves the holder the rest of the
	 * timeout to stop before the server can expire it. */
	int loss_percent;
	/* mu: acquisitions whose next grant may come with the next release (next in line,
	 * or waiting on a folder's count) or that prove the session for a grant: while there
	 * are any, the session proves itself with committed writes (liveness.c). */
	int near;
	int max_request;            /* the servers' jute.maxbuffer (request.c) */
	int64_t next_heartbeat;     /* mu: when to send the next heartbeat */
	bool closing;               /* mu */
	struct zkl_waiter *waiters; /* mu */
	struct zkl_waiter *ready, *ready_tail; /* mu: loop waiters woken, to run in order */
	int64_t loop_next;          /* mu: no loop waiter wants to run before this */
	struct zkl_hold *holds;     /* mu */
	uint64_t holds_gen;         /* mu: every hold of an older session has been found lost */
	bool holds_lost;            /* mu: a hold was marked lost since (holds_notify() looks) */
	struct zkl_revwatch *revwatches; /* mu */
	/* mu: jobs ended in this turn of the loop whose threads wait: told once the loop
	 * lets go of mu, so that a woken thread does not wait for the rest of the turn. */
	struct zkl_job *told;

	/* The event thread: session events, user callbacks, background deletes. */
	pthread_t ev_thread;
	pthread_cond_t ev_cv;       /* broadcast by loop_wake(): there is work */
	bool ev_running;
	bool adopted;               /* sessions are the application's (zkl_client_adopt) */
	/* With external_loop, the application runs the loop in zkl_client_process(): */
	bool external;
	int efd;                    /* the eventfd it polls, or -1 */
	atomic_bool efd_armed;      /* efd is readable: loop_wake() wrote to it */
	/* A thread is inside zkl_client_process(): claimed by it before it takes mu, and
	 * given back under mu (with ev_cv broadcast). */
	atomic_bool processing;
	/* Published for any thread: the last caller of process (0: none yet, else its
	 * pthread_t), and when the loop next has something to do, as its last turn saw. */
	atomic_uintptr_t loop_tid;
	_Atomic int64_t due_pub;
	uint64_t loop_work;         /* mu: waiters run and messages applied, so far */
	struct zkl_event *events, *events_tail; /* mu */
	/* mu: background deletes (tasks.c): to look at, with a request out, how many in
	 * all, and an index of the pending deletes by folder. */
	struct zkl_task *tasks, *tasks_out;
	size_t ntasks;
	struct zkl_task_folder **task_folders;
	size_t task_nbuckets, task_nfolders;
	/* The inbox: what the C client's completion thread hands the loop. It takes only
	 * inbox_mu (after mu when both are held); with a loop thread of the client's own it
	 * never takes mu. kicks counts the loop's wake-ups. */
	pthread_mutex_t inbox_mu;
	pthread_cond_t inbox_cv;
	struct zkl_msg *inbox, *inbox_tail; /* inbox_mu */
	uint64_t kicks;                     /* inbox_mu */
	atomic_bool hurry;                  /* closing: no message waits for a turn */
	/* Session events: taken in turn by the watchers and given back as the loop applies
	 * them; beyond them a watcher allocates one (session.c, session_ev_take). */
	struct zkl_session_ev sess_evs[ZKL_SESSION_EVS];
	bool loop_ended;                    /* mu and inbox_mu: the loop runs no more
	                                     * waiter, so no call is taken */
	/* zkl_client_get_stats(): counted on the loop, read by any thread. */
	atomic_uint_fast64_t n_acquisitions, n_granted, n_wakes, n_listings;
	atomic_uint_fast64_t n_proof_writes, n_heartbeat_syncs;
	atomic_uint_fast64_t wait_hist[ZKL_STATS_BUCKETS], wait_sum;
	atomic_uint_fast64_t hold_hist[ZKL_STATS_BUCKETS], hold_sum;
	/* The observer (observer.c): obs_mu guards it and the events it has still to be
	 * told, which any thread may add (a release's, from the releasing thread); the
	 * loop tells them with no lock held. */
	pthread_mutex_t obs_mu;
	pthread_cond_t obs_cv;          /* obs_mu: an observer call ended */
	zkl_observer_fn obs_fn;         /* obs_mu */
	void *obs_data;                 /* obs_mu */
	struct zkl_obs *obs_head, *obs_tail; /* obs_mu */
	atomic_bool obs_queued;         /* written under obs_mu: obs_head is not NULL */
	unsigned obs_calling;           /* obs_mu: observer calls under way */
	pthread_t obs_thread;           /* obs_mu: the thread making them */
	unsigned obs_gen;               /* obs_mu: observers set so far */
	unsigned obs_call_gen;          /* obs_mu: obs_gen of the one being called */
	atomic_bool obs_on;             /* written under obs_mu: obs_fn is not NULL */
	struct zkl_listener *listeners;         /* mu */
	size_t nlisteners;
	bool listener_running;                  /* mu */
	/* mu: recipe handles made on the client and not freed yet, and whether a
	 * zkl_client_close() came while there were some: the last free closes it then
	 * (handles.c). */
	size_t nhandles;
	bool close_pending;
	/* mu: handles freed whose machine frees them later, on the loop (an election
	 * freed in its own callback or function); close waits for them, and the machine
	 * broadcasts cv as it frees one. */
	size_t nfreeing;
};

/* Opens a client whose sessions go through zk (zkl_client_open uses the C client; the
 * unit suite an in-memory ZooKeeper). */
int zkl__client_open_on(zkl_client **out, const zkl_client_options *o,
                       const struct zkl_zk_ops *zk, void *zk_self);
/* The same for a handle the application made (zkl_client_adopt), on zk: the simulator
 * adopts handles of its model of ZooKeeper. */
int zkl__client_adopt_on(zkl_client **out, zhandle_t *zh, const zkl_client_options *o,
                        const struct zkl_zk_ops *zk, void *zk_self);

/* Lock folders (folders.c). Checks the lock_folders option: 0, or ZKL_EINVAL with its
 * detail. */
int zkl__folders_check(const zkl_client_options *o);
/* The mode to create a missing folder with: ZOO_CONTAINER or ZOO_PERSISTENT. */
int zkl__folder_mode(zkl_client *c);
/* A create of the folder path with mode answered zrc. Returns 1: make it again (with
 * zkl__folder_mode(), persistent now: the server has no containers; logged once per
 * client); ZKL_EZK with its detail: the server has no containers and the client must
 * make containers; 0: anything else. */
int zkl__folder_refused(zkl_client *c, int mode, int zrc, const char *path);

/* Logging, to the client's logger (src/base/log.h). c may be NULL: nothing is logged. */
#define zkl__log(c, level, ...) zkl__logf((c) ? &(c)->logger : NULL, level, __VA_ARGS__)

/* Waiters (on the loop). Registers w and queues it to run. */
void zkl__waiter_enter_loop(zkl_client *c, struct zkl_waiter *w, const void *owner,
                           void (*run)(zkl_client *c, struct zkl_waiter *w));
void zkl__waiter_leave(zkl_client *c, struct zkl_waiter *w);
/* Wakes w (on the loop): queues it for the loop. */
void zkl__waiter_wake(zkl_client *c, struct zkl_waiter *w);
/* A waiter that returns to wait asks to be run at t at the latest (on the loop). */
void zkl__waiter_wake_at(zkl_client *c, struct zkl_waiter *w, int64_t t);
/* Whether w, a waiter of the caller's own thread, is due to run (on the loop): woken, or
 * past its wake_at. */
bool zkl__waiter_due(struct zkl_waiter *w);
/* Has the loop run call->fn (on the loop), after every message and call handed to it
 * before (no lock held). From an application thread the call is queued in the inbox and
 * the caller goes on: call must live until fn has run (fn may free it). On the loop's
 * own thread (a callback), with external_loop, it runs here, after what the inbox
 * holds. Returns false, without running fn, once the loop runs no more: the client is
 * closing. Only the loop then touches what fn touches: a call is how an application
 * thread hands the engine an acquisition or a cancel. */
bool zkl__call(zkl_client *c, struct zkl__call *call);
/* Wakes the waiters of owner with canceled set: a call (above), so that it comes after
 * an acquisition started before it. */
void zkl__client_cancel_owner(zkl_client *c, const void *owner);
/* The same on the loop: a recipe's machine cancels what it started. */
void zkl__cancel_owner(zkl_client *c, const void *owner);
/* Wakes every waiter of owner (on the loop): how a recipe's machine tells the threads that
 * wait for a condition of its state (zkl__loop_wait) that its state changed. */
void zkl__wake_owner(zkl_client *c, const void *owner);
/* Has the loop run fn(c, arg), mu held, and returns once it has (no lock held): how an
 * application thread reaches state that only the loop touches, fn writing any answer
 * into arg (loopcall.c). On a thread that runs the loop, and with external_loop on any
 * thread, fn runs at once on the calling thread, after what the inbox holds; once the
 * loop runs no more (closing), here too. fn runs exactly once. */
void zkl__loop_run(zkl_client *c, void (*fn)(zkl_client *c, void *arg), void *arg);
/* From a step the loop runs: runs fn(arg) with the lock let go of, as the
 * application's code runs (a user callback, or a call that hands the loop something
 * itself, such as zkl__engine_start()), then takes mu back; the caller looks again at
 * what may have changed meanwhile. */
void zkl__loop_callout(zkl_client *c, void (*fn)(void *arg), void *arg);

/* Requests. zkl_op_* issue an asynchronous request on the current session (mu must
 * NOT be held; on the loop) and return the op, bound to w, or NULL with *err set (ENOMEM, ECLOSED).
 * The op's `done` turns true under mu when its completion has run. */
struct zkl_op *zkl__op_create(zkl_client *c, struct zkl_waiter *w, const char *path,
                             const void *data, int len, int mode, int *err);
/* The same; followed: its answer does not wake the loop (lazy, above), since the caller
 * sends another request right after it, or calls zkl__op_hasten() if it cannot. */
struct zkl_op *zkl__op_create_followed(zkl_client *c, struct zkl_waiter *w, const char *path,
                                      const void *data, int len, int mode, bool followed,
                                      int *err);
void zkl__op_hasten(zkl_client *c, struct zkl_op *op);
/* A create of a TTL mode, with its time to live (ms): ZKL_ENOTSUP where the ZooKeeper
 * underneath has none. */
struct zkl_op *zkl__op_create_ttl(zkl_client *c, struct zkl_waiter *w, const char *path,
                                 const void *data, int len, int mode, int64_t ttl, int *err);
struct zkl_op *zkl__op_delete(zkl_client *c, struct zkl_waiter *w, const char *path, int *err);
/* A delete that fails (ZBADVERSION) unless the node's version is version (-1: any). */
struct zkl_op *zkl__op_delete_at(zkl_client *c, struct zkl_waiter *w, const char *path,
                                int version, int *err);
struct zkl_op *zkl__op_children(zkl_client *c, struct zkl_waiter *w, const char *path,
                               struct zkl_watch *watch, int *err);
struct zkl_op *zkl__op_get(zkl_client *c, struct zkl_waiter *w, const char *path,
                          struct zkl_watch *watch, int *err);
/* With watch, the C client keeps it whether the node is there or not (ZNONODE). */
struct zkl_op *zkl__op_exists(zkl_client *c, struct zkl_waiter *w, const char *path,
                             struct zkl_watch *watch, int *err);
/* The same, for an exists whose success nobody waits for (the watch a hold keeps on its
 * node): an answer ZOK does not wake the loop, which applies it on its next turn; any
 * other answer does (lazy_unless_ok below). */
struct zkl_op *zkl__op_exists_quiet(zkl_client *c, struct zkl_waiter *w, const char *path,
                                   struct zkl_watch *watch, int *err);
struct zkl_op *zkl__op_set(zkl_client *c, struct zkl_waiter *w, const char *path,
                          const void *data, int len, int version, int *err);
/* A sync: answered only once the ensemble's leader has seen it (a read is answered by
 * the server alone, even one cut off from the leader). */
struct zkl_op *zkl__op_sync(zkl_client *c, struct zkl_waiter *w, const char *path, int *err);
struct zkl_op *zkl__op_check(zkl_client *c, struct zkl_waiter *w, const char *path, int *err);
/* A multi of mops[0..n), committed all or none (zk.h's multi). Once done, op->rc is ZOK
 * or the failing operation's error (or the request's own: connection loss...), and, if
 * the server answered, op->results[i].err each operation's; a create's node is in
 * op->made[i], a set's stat in op->stats[i], when op->rc is ZOK. Refused before it is
 * sent (ZKL_EINVAL, with a detail) if it is longer than the servers read. */
struct zkl_op *zkl__op_multi(zkl_client *c, struct zkl_waiter *w, const struct zkl_mop *mops,
                            int n, int *err);
/* One request, run to its answer by zkl__request(). */
struct zkl_req {
	enum zkl_op_kind kind;
	const char *path;
	const void *data;   /* CREATE, SET */
	int len;
	int mode;           /* CREATE */
	int64_t ttl;        /* CREATE of a TTL mode: its time to live (ms); 0 otherwise */
	int version;        /* SET; DELETE with check_version */
	bool check_version; /* DELETE: only of the node at version */
	struct zkl_watch *watch; /* GET, EXISTS, CHILDREN: armed with the request */
	bool unbound;       /* zkl__ops_send: bound to no waiter (its answer alone
	                     * wakes nobody: the next one's, which comes after it, does) */
	const struct zkl_mop *mops; /* MULTI: nmops operations, committed all or none */
	int nmops;
	bool mark_leaving;  /* CHILDREN: the answer marks our nodes on their way out
	                     * (op->leaving), for a thread that cannot ask the loop */
};
/* Sends r now, bound to w: the loop's way to send one request, from a step it runs.
 * The send holds what the step holds: the C client's completion thread only posts to
 * the inbox, so nothing it does waits for the loop. Returns the op, or NULL with *err
 * set. */
struct zkl_op *zkl__op_send(zkl_client *c, struct zkl_waiter *w, const struct zkl_req *r,
                           int *err);
/* Sends reqs[0..n) in this order in one go, from a step the loop runs. The session
 * answers in order, so only the last answer wakes w: the others are lazy. Stops at the
 * first request refused (ops[k..n) NULL, *err set), and then the last one sent wakes w
 * itself. Returns how many were sent. */
int zkl__ops_send(zkl_client *c, struct zkl_waiter *w, const struct zkl_req *reqs,
                 struct zkl_op **ops, int n, int *err);

/* A job: a machine the loop runs for a thread that waits for its end, or for an end
 * function (src/client/loop.c, "Jobs"). Fill step (and drop, end) and hand it to
 * zkl__job_run(), or to zkl__job_start() and then zkl__job_wait(). */
enum { ZKL_JOB_WAIT = 1 };
struct zkl_job {
	struct zkl_waiter w;       /* first: the loop hands it back */
	struct zkl__call call;      /* how it reaches the loop */
	const void *owner;         /* a cancel of owner cancels it (w.canceled) */
	/* On the loop, each time the job is woken: ZKL_JOB_WAIT, or its result
	 * (0 or a ZKL_E* code with its detail set). Once the client closes it is not called
	 * (the job ends with ZKL_ECLOSED), unless runs_closing: then it must end. */
	int (*step)(zkl_client *c, struct zkl_job *j);
	bool runs_closing;
	/* On the loop, at the end: lets go of what the steps hold. May be NULL.
	 * Also called on the loop if the job never reached the loop. */
	void (*drop)(zkl_client *c, struct zkl_job *j);
	/* NULL: a thread waits for the end (zkl__job_wait). Else the end, on the loop with
	 * no lock held (it may run the user's callbacks), with rc and error set; the job is
	 * not touched after it. */
	void (*end)(zkl_client *c, struct zkl_job *j);
	/* mu: a job started by a step of another (zkl__job_begin), and the one
	 * child of a job under way; the parent is woken when its child ends. */
	struct zkl_job *parent, *child;
	int rc;                    /* once ended: its result, and its detail */
	char error[256];
	sem_t done;                /* posted once it ended: its waiting thread's wait */
	bool finished;             /* mu: it ended (own_thread's wait) */
	struct zkl_job *told_next; /* mu: in client->told */
};
/* Tells the waiting threads of the jobs in the list that they ended (no lock held). */
void zkl__jobs_tell(struct zkl_job *list);
/* Hands j to the loop (no lock held). Returns 0, or ZKL_ECLOSED (the loop runs no more,
 * j is left as it was). */
int zkl__job_start(zkl_client *c, struct zkl_job *j, const void *owner);
/* The same from a step or a call the loop runs (on the loop): j begins at once. With a
 * parent (the job whose step starts j; one child at a time), j is its child: the parent
 * is woken once j's end has run, and with external_loop the thread that waits for the
 * parent runs j's steps too. */
void zkl__job_begin(zkl_client *c, struct zkl_job *j, const void *owner,
                          struct zkl_job *parent);
/* Waits (no lock held) for the end of j, started without an end function. Returns its
 * result, with its detail for zkl_last_error(). With external_loop the waiting thread
 * runs j's steps (and its child's) itself. */
int zkl__job_wait(zkl_client *c, struct zkl_job *j);
/* Frees what zkl__job_start() set up, for a job with an end function, once it ended. */
void zkl__job_destroy(struct zkl_job *j);
/* A thread that waits for something made of jobs with ends (a blocking multi-lock: its
 * members' asynchronous acquisitions, one after the other) drives them itself with
 * external_loop, as zkl__job_wait() does a job without an end: the application's loop
 * may be that very thread, or not run at all while it waits. Between zkl__drive_begin()
 * and zkl__drive_end() (on one thread, no lock held), the first job with an end that a
 * client with external_loop starts on this thread (zkl__job_start, or
 * zkl__job_begin without a parent) becomes d's: run by this thread's
 * zkl__drive_run(), never by the loop. Jobs of other clients are run by their loops. */
struct zkl__drive {
	zkl_client *c;             /* the client of job */
	struct zkl_job *job;       /* d's job, until its end has begun; NULL: none */
	struct zkl__drive *prev;   /* the drive that was current before */
};
void zkl__drive_begin(struct zkl__drive *d);
void zkl__drive_end(struct zkl__drive *d);
/* Runs d's job (and its child) until its end has run (no lock held); nothing if none. */
void zkl__drive_run(struct zkl__drive *d);
/* Starts j and waits for it; on c's own event thread (a callback), which cannot wait
 * for a job, fails at once with ZKL_EDEADLK, naming what. */
int zkl__job_run(zkl_client *c, struct zkl_job *j, const void *owner, const char *what);
/* Waits (no lock held) until done(c, arg) holds, asked on the loop when the
 * wait begins and each time a waiter of tag is woken (zkl__wake_owner), or until
 * the deadline passes. Returns 0, ZKL_ETIMEDOUT, or, on a thread that runs the loop,
 * ZKL_EDEADLK naming what (zkl__job_run). It goes on while the client closes: done must
 * come true then. */
int zkl__loop_wait(zkl_client *c, const void *tag, bool (*done)(zkl_client *c, void *arg),
                  void *arg, int64_t deadline, const char *what);
/* For steps (on the loop): sends r bound to j.
 * Returns 0 with *op set, or a ZKL_E* code with *op NULL. */
int zkl__job_send(zkl_client *c, struct zkl_job *j, const struct zkl_req *r,
                 struct zkl_op **op);
/* For steps: 0 once op has its answer; else ZKL_JOB_WAIT (j runs again by deadline at
 * the latest), or, without a detail, ZKL_ECANCELED or ZKL_ETIMEDOUT. */
int zkl__job_await(zkl_client *c, struct zkl_job *j, const struct zkl_op *op,
                  int64_t deadline);
/* The same for the current session's connection. */
int zkl__job_await_connected(zkl_client *c, struct zkl_job *j, int64_t deadline);
/* For steps: has j run again at t at the latest, as a step that returns ZKL_JOB_WAIT
 * for something with a time asks. */
static inline void zkl__job_wake_at(zkl_client *c, struct zkl_job *j, int64_t t)
{
	zkl__waiter_wake_at(c, &j->w, t);
}

/* Jobs that run requests (no lock held; from the loop's thread, ZKL_EDEADLK):
 * zkl__requests() sends the n requests r and waits until each has its answer, or the
 * deadline passes. Returns 0 with ops[i] the op of r[i] (release them with
 * zkl__ops_release()), or ZKL_ETIMEDOUT / ZKL_ECLOSED / ZKL_ENOMEM with no op left.
 * zkl__request() is the same for one request, and returns the ZooKeeper code of its
 * answer: if out is not NULL, *out is its op (release it with zkl__op_release()). */
int zkl__requests(zkl_client *c, const struct zkl_req *r, size_t n, int64_t deadline,
                 struct zkl_op **ops);
int zkl__request(zkl_client *c, const struct zkl_req *r, int64_t deadline, struct zkl_op **out);
void zkl__ops_release(zkl_client *c, struct zkl_op **ops, size_t n);
/* The same, with what the answers say read on the loop: once every one is answered,
 * answered(c, ops, n, arg) runs there and its return is the result. The ops
 * stay the job's (ops is its room for them, n long) and go with it. */
typedef int (*zkl_answered_fn)(zkl_client *c, struct zkl_op **ops, size_t n, void *arg);
int zkl__requests_then(zkl_client *c, const struct zkl_req *r, size_t n, int64_t deadline,
                      struct zkl_op **ops, zkl_answered_fn answered, void *arg);
/* Waits (no lock held) no sooner than pause, and then until the current session is
 * connected and is not the session `gone` (0: any). Returns 0, ZKL_ETIMEDOUT,
 * ZKL_ECLOSED or ZKL_EDEADLK (on the loop's thread). */
int zkl__await_connection(zkl_client *c, uint64_t gone, int64_t pause, int64_t deadline);
void zkl__op_release(zkl_client *c, struct zkl_op *op);
/* Drops the caller's reference (on the loop). If the op has not completed, it is abandoned. */
void zkl__op_put(zkl_client *c, struct zkl_op *op);

/* Watches: new and put on the loop; zkl__op_get registers it. */
struct zkl_watch *zkl__watch_new(zkl_client *c, struct zkl_waiter *w);
void zkl__watch_put(zkl_client *c, struct zkl_watch *watch);
/* Takes the watch's quiet_if off it (on the loop), which must be done before what it
 * points to goes: quiet keeps what it says now. */
void zkl__watch_settle_quiet(zkl_client *c, struct zkl_watch *watch);

/* Background cleanup, retried until it succeeds or the session `gen` is gone (on the loop). */
void zkl__task_delete(zkl_client *c, const char *path, uint64_t gen);
void zkl__task_find_delete(zkl_client *c, const char *parent, const char *uuid, uint64_t gen);
/* Sends the delete of path at once (mu held), from any thread that holds it,
 * and leaves its answer to the background task. Returns false if it could not be sent
 * now (then the task sends it when it can). */
bool zkl__task_delete_now(zkl_client *c, const char *path, uint64_t gen);
/* A release's delete of path, sent at once from the calling thread (any but the loop's,
 * no lock held) when gen is the current session's and it is connected; its answer goes
 * to the loop, which then owns the task as any background delete. Takes path and
 * returns true; false, with path left to the caller, if it cannot be sent so. */
bool zkl__task_delete_sent(zkl_client *c, char *path, uint64_t gen);
/* Whether parent/name is one of our nodes on its way out (on the loop): a queue we list must
 * not count it as a contender. */
bool zkl__task_pending(zkl_client *c, const char *parent, size_t parent_len, const char *name);
/* From any thread (no lock held): the session timeout (zkl__session_timeout_ms), and
 * whether the client is closing. */
int zkl__session_timeout_any(zkl_client *c, bool *closing);
/* The same for a whole listing: our nodes directly under parent whose delete is on its
 * way (on the loop): a queue we list
 * must not count them as contenders. Puts up to max of their names (valid while mu is
 * held) in names; returns how many there are. */
size_t zkl__tasks_pending_in(zkl_client *c, const char *parent, size_t parent_len,
                            const char **names, size_t max);
static inline size_t zkl__tasks_pending(zkl_client *c, const char *parent,
                                        size_t parent_len, const char **names, size_t max)
{
	/* Most listings find no delete of ours on its way anywhere. */
	return c->task_nfolders ? zkl__tasks_pending_in(c, parent, parent_len, names, max) : 0;
}

/* Holds (src/engine links them at a grant). zkl__hold_new() makes one (NULL without
 * memory; path may be NULL) and zkl__hold_add() links it (on the loop), marking
 * it lost at once if its session is not the current one. zkl__hold_end() lets go of it,
 * from any thread without mu: a hold lost and not yet reported is reported first (on a
 * thread that runs the loop, there; elsewhere it waits for the loop's turn) unless how
 * is ZKL_HOLD_END_QUIET, it waits
 * while on_lost runs on another thread, returns whether the hold was lost, and the loop
 * frees it. zkl__hold_drop() is the loop's
 * own, on the loop, for a hold that is the loop's from start to end (an election's). */
struct zkl_hold *zkl__hold_new(const char *path, uint64_t gen,
                              void (*on_lost)(struct zkl_hold *h, void *ctx), void *ctx);
void zkl__hold_add(zkl_client *c, struct zkl_hold *h);
enum zkl_hold_ending {
	ZKL_HOLD_END,        /* its owner's release */
	ZKL_HOLD_END_LOST,   /* the same, which found it lost (its session gone) */
	ZKL_HOLD_END_QUIET,  /* its owner is gone: nothing is reported any more */
};
/* bool zkl__hold_end(c, h, how): inline, hold.h. */
void zkl__hold_drop(zkl_client *c, struct zkl_hold *h);
/* Marks h lost (on the loop): holds_notify() reports it on the loop's next turn. */
void zkl__hold_mark_lost(zkl_client *c, struct zkl_hold *h);
/* Keeps an exists watch on h's node while h lasts (on the loop), and marks h lost when
 * the server says the node is gone (holds.c). Unwatch, when h is unlinked, lets go
 * of it. */
void zkl__hold_watch_node(zkl_client *c, struct zkl_hold *h);
void zkl__hold_unwatch_node(zkl_client *c, struct zkl_hold *h);
/* The node shown ours (holds.c; on the loop): whether an exists sent since the last
 * ask (the grant's, or zkl__hold_confirm()'s) found h's node there with h's session as
 * its ephemeral owner. False without a watch (no memory for it) or once h is lost, its
 * watch stopped. zkl__hold_confirm() asks for a new proof (after a suspension), and
 * zkl__hold_follow() names the waiter woken when a proof comes; a node found gone or
 * not ours makes h lost instead, told through its on_lost. */
bool zkl__hold_confirmed(const struct zkl_hold *h);
void zkl__hold_confirm(zkl_client *c, struct zkl_hold *h);
void zkl__hold_follow(zkl_client *c, struct zkl_hold *h, struct zkl_waiter *w);
/* Whether h is lost (NULL: not lost). */
static inline bool zkl__hold_lost(const struct zkl_hold *h)
{
	return h && atomic_load(&h->lost);
}

/* Data watches (on the loop), kept by the loop across events. A request watch calls fn each
 * time decode finds a request in the node's data (a revocation); remove waits while fn
 * runs on another thread, and the record is freed once the C client lets go of it. */
struct zkl_revwatch *zkl__revwatch_add(zkl_client *c, const char *path, uint64_t gen,
                                      zkl_data_decode_fn decode,
                                      void (*fn)(void *ctx, const char *path), void *ctx);
/* A value watch keeps *value equal to what decode reads at path, on whatever session the
 * client has (a semaphore's shared count), bumps *epoch and wakes every waiter. */
struct zkl_revwatch *zkl__countwatch_add(zkl_client *c, const char *path,
                                        zkl_data_decode_fn decode, int32_t *value,
                                        unsigned *epoch);
void zkl__revwatch_remove(zkl_client *c, struct zkl_revwatch *rv);

/* The session timeout in ms (on the loop): the one the server gave the session, or the one
 * asked for until it has answered. */
int zkl__session_timeout_ms(const zkl_client *c);

/* Liveness (liveness.c, on the loop). What the session must prove of itself, and how:
 *   ZKL_LIVE_PROVE  something is held, or an acquisition is near its grant (c->near):
 *                   a committed write (a check of /) every sixth of the timeout;
 *   ZKL_LIVE_IDLE   nothing held or awaited, or a request of a wait is out: a sync
 *                   every sixth of the timeout;
 *   ZKL_LIVE_QUIET  only waits far from their grant, with nothing out: nothing beyond
 *                   the C client's pings.
 */
enum zkl_live { ZKL_LIVE_IDLE, ZKL_LIVE_PROVE, ZKL_LIVE_QUIET };
/* Inline: read on every request sent (request.c) and every turn (liveness.c). */
static inline int zkl__live_mode(const zkl_client *c)
{
	if (c->holds || c->near > 0)
		return ZKL_LIVE_PROVE;
	/* Waits with a request out are not quiet: their answers are awaited. */
	return c->waiters && c->sess->inflight == 0 ? ZKL_LIVE_QUIET : ZKL_LIVE_IDLE;
}

/* A hold's loss deadline on the current session: the send time of its last committed
 * write plus loss_percent of the session timeout (on the loop); INT64_MAX while no write has
 * been committed on it. */
int64_t zkl__lost_at(zkl_client *c);

/* When the loop gives the current session up for lost (on the loop): for a session that
 * holds, zkl__lost_at(); for one that holds nothing, loss_percent of the timeout after
 * the last answer of any kind; never while it is quiet. INT64_MAX if never. */
int64_t zkl__giveup_at(zkl_client *c);

/* Whether a grant may be reported now (on the loop): the session's last committed write was
 * sent less than a third of the session timeout ago (two heartbeats), so the new hold's
 * loss deadline is well ahead. A grant that finds it older proves the session first. */
bool zkl__proof_fresh(zkl_client *c);

/* A write that proves the session went out on it for a turn (on the loop): it
 * stands for the next heartbeat, due a sixth of the timeout from now. */
void zkl__proof_sent(zkl_client *c);

/* Counts an acquisition near its grant, or not (on the loop): *flag is its own
 * record of being counted. The session's mode follows (zkl__live_mode()): a first near
 * acquisition makes it prove itself, and the loop's next look (liveness.c) makes a
 * heartbeat due. Inline: each step of an acquisition says it. */
static inline void zkl__near_set(zkl_client *c, bool *flag, bool near)
{
	if (*flag == near)
		return;
	*flag = near;
	c->near += near ? 1 : -1;
}

/* The client whose loop the calling thread is running (its event thread, or an
 * application's thread inside zkl_client_process()), or NULL (loop.c). */
extern _Thread_local zkl_client *zkl__running_loop;

/* Whether the caller runs c's loop right now: its event thread, or with external_loop
 * the application's thread inside zkl_client_process(). Inline: asked on every send. */
static inline bool zkl__on_event_thread(const zkl_client *c)
{
	return zkl__running_loop == c;
}

/* Whether the calling thread runs c's loop (any thread, no lock needed): its event
 * thread, a callback, or the application's thread that calls zkl_client_process() (the
 * loop's thread is published only by that call, loop_tid). Such a thread cannot wait
 * for an acquisition. */
static inline bool zkl__is_loop_thread(zkl_client *c)
{
	if (zkl__running_loop == c)
		return true;
	const uintptr_t id = atomic_load(&c->loop_tid);
	pthread_t t;
	memcpy(&t, &id, sizeof t);
	return id != 0 && pthread_equal(t, pthread_self());
}

/* The recipe handles made on a client (handles.c). A handle's _new counts it once made,
 * its _free uncounts it once done with the client (no lock held); put_off: the handle's
 * machine frees it later on the loop (an election freed in its own callback or
 * function), so this free cannot close the client. zkl_client_close() asks zkl__client_close_refused() first: true
 * (logged, and the error detail set) inside a callback of the client, which would end
 * the loop that runs it, or while handles are open: the close is then left to the free
 * of the last one. */
void zkl__client_handle_add(zkl_client *c);
void zkl__client_handle_done(zkl_client *c, bool put_off);
bool zkl__client_close_refused(zkl_client *c);
/* A handle freed on the loop's thread whose machine frees it later (on the loop):
 * counted until the machine has (free_done), so that a close waits for it. */
void zkl__client_free_put_off(zkl_client *c);
void zkl__client_free_done(zkl_client *c);
/* On the application's loop thread outside zkl_client_process() (on the loop): runs the loop
 * once and, if the turn did nothing, waits for more work or its next timer; returns true
 * (the caller looks again at what it waits for). Elsewhere returns false
 * at once: then the loop runs elsewhere, and the caller waits as usual. For waits that
 * the loop must end (an asynchronous acquire canceled by a free). */
bool zkl__loop_step(zkl_client *c);

/* The length of a create or set request (kind) of a path of path_len bytes with
 * data_len bytes of data, as the server reads it (request.c), and whether it is at most
 * what the servers read in one request (c->max_request): 0, or ZKL_EINVAL with a detail
 * that names name (the node or its folder) and the limit. */
int64_t zkl__request_size(const zkl_client *c, enum zkl_op_kind kind, size_t path_len,
                         int data_len);
int zkl__request_fits(const zkl_client *c, enum zkl_op_kind kind, const char *name,
                     size_t path_len, int data_len);

/* Default node data: "<hostname>:<pid>" in buf. Returns its length. */
int zkl__default_data(char *buf, size_t size);

#endif
