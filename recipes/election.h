/* What zkl_leader (latch.c) and zkl_selector (selector.c) share: one election, a state
 * machine that the client's loop runs (election.c has the design notes), its public
 * calls (election_calls.c) and its zkl_lock view (leader_view.c). Never installed. */
#ifndef ZKL_ELECTION_H
#define ZKL_ELECTION_H

#include <stdatomic.h>

#include <zklocks/leader.h>

#include "lock_internal.h"

enum election_state {
	E_OUT,      /* not in the election */
	E_QUEUE,    /* the engine's acquisition of our node is under way */
	E_BACKOFF,  /* joining failed: try again at retry_at */
	E_LEAD,     /* our node heads the queue: shown ours by its hold, announce */
	E_ENDING,   /* leadership over: the function's thread ends, callbacks */
	E_LEAVING,  /* our node's delete is out */
};

struct election {
	zkl_lock lock;                 /* first: the view (c, path, lost callback,
	                                * asynchronous acquire); its mu is pub_mu */
	enum zkl_kind kind;            /* LATCH, or LOCK for a selector */
	void *self;                    /* the public handle, passed to user code; freed
	                                * with free() by the loop if it is freed there */
	bool lose_on_suspend;
	bool notify_on_close;
	zkl_leader_gained_fn on_gained;
	zkl_leader_lost_fn on_lost;
	zkl_leader_revoke_fn on_revoke; /* latch only */
	void *data;
	zkl_selector_fn fn;            /* selector only */
	void *fn_data;
	bool requeue;

	/* What other threads read without asking the loop, published by the loop after
	 * each change (election_publish): whether this participant leads as the view's
	 * is_held says, the token of the leadership (ZKL_ENOTHELD: none), and our node.
	 * pub_mu is also the view's mutex (lock.mu): a leaf, taken by the loop in its
	 * steps and by application threads with nothing else. */
	atomic_bool held_pub;
	_Atomic int64_t token_pub;
	pthread_mutex_t pub_mu;
	pthread_cond_t pub_cv;         /* the view's cv */
	char *node_pub;                /* pub_mu */
	atomic_int waits;              /* threads in zkl__election_wait(): the machine wakes
	                                * their jobs only when there are some */

	/* Everything below: the loop's alone (calls reach it through zkl__loop_run). */
	struct zkl_stage stage;        /* the machine, which the loop runs (the engine's
	                                * stage); threads wait for its state on it */
	struct zkl_data id;            /* node data of the nodes made from now on */
	enum election_state st;
	bool listening;                /* the state listener is added, and heard */
	bool started;                  /* zkl_leader_start()/zkl_selector_start() */
	bool closing;                  /* leaves for good */
	bool freeing;                  /* freed on the loop: the machine frees it at rest */
	int calling;                   /* user callbacks of the machine running */
	bool idle;                     /* selector waiting for requeue */
	bool in_lead;                  /* from queued to the end of its leadership */
	bool again;                    /* requeue asked while in_lead */
	bool leading;                  /* has_leadership */
	int64_t token;                 /* czxid of our node while leading */
	bool suspended;                /* the client is SUSPENDED */
	unsigned suspensions;          /* SUSPENDED states seen */
	bool interrupt;                /* end this leadership (selector, started latch) */
	bool revoke_seen;              /* a revoker asked for our node (the engine's
	                                * revocation watch, a latch with on_revoke) */
	bool revoke_told;              /* and on_revoke has been called for it */

	/* The queue: the engine's acquisition, its node and what it reads. While leading,
	 * node.hold is the hold the engine made at the grant: its watch shows our node ours
	 * (zkl__node_confirmed) and tells its deletion as a loss (zkl__node_stands). */
	struct zkl_queue q;
	struct zkl_data qdata;
	struct zkl_node node;
	bool folder_seen;
	bool queue_done;
	bool queue_canceled;
	int queue_rc;
	char queue_error[256];
	int backoff_ms;
	int64_t retry_at;

	/* Leading. */
	unsigned susp_seen;
	bool announced;                /* gained called, the function started, or the view
	                                * acquire answered */
	bool gained;                   /* the gained callback ran: lost runs at the end */
	int end;                       /* why leadership ended (E_ENDING) */
	struct zkl_withdrawal leave;   /* E_LEAVING: the delete of our node */
	enum election_state after_leave;
	pthread_t worker;              /* selector: runs fn */
	bool worker_running;
	bool fn_done;
	bool loss_told;                /* selector: this leadership's loss went to the view's
	                                * lost callback */

	/* The view's acquire: one at a time, answered to its callback (a blocking acquire
	 * is an asynchronous one and a wait: leader_view.c). */
	bool view_pending;
	bool view_cancel;
	int view_timeout;
	int64_t view_deadline;
	bool view_held;                /* leadership taken through the view, until released */
	bool view_lost;                /* and lost meanwhile */
	bool let_go;                   /* released on the loop's thread, which does not wait:
	                                * the node held is on its way out (until leave()) */
	struct zkl_lock_async async;
};

/* Sets up e for path (kind LATCH for a latch, LOCK for a selector); self is the public
 * handle passed to user code, which embeds e first. id is the node data (NULL:
 * "<host>:<pid>"). Returns 0 or a ZKL_E* code with nothing left to free. The caller
 * then sets the options and calls zkl__election_attach(). */
int zkl__election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                      enum zkl_kind kind, void *self);
/* Puts e on the client's loop and adds its state listener, once its options are set
 * (the loop reads them from then on). Returns 0, or a ZKL_E* code with what
 * zkl__election_init() made freed (not e). */
int zkl__election_attach(struct election *e);
/* Joins the election for good (until closed). */
int zkl__election_start(struct election *e);
/* Leaves the election; from another thread than the loop's (or the selector's
 * function), returns once the machine is at rest and no callback runs. */
int zkl__election_close(struct election *e);
/* Closes e and frees its handle (self), at once, or, on the loop's thread or from the
 * selector's function, once the machine is at rest (on the loop): returns whether it
 * was put off so. */
bool zkl__election_free(struct election *e);
/* Requeues a selector. */
int zkl__election_requeue(struct election *e);
/* Interrupts the current leadership (a selector, or a started latch). */
void zkl__election_interrupt(struct election *e);
/* Waits (timeout_ms as in the API) until leading (want == true) or not leading. */
int zkl__election_await(struct election *e, bool want, int timeout_ms);
/* The current leader's id (node data): *id is the caller's, free(). */
int zkl__election_leader_id(struct election *e, char **id);

/* Shared by the files of the election, on the loop. */

/* The view's table (leader_view.c). */
extern const struct zkl_lock_ops zkl__leader_ops;
/* Publishes what other threads read without asking the loop (the fields above). */
void zkl__election_publish(struct election *e);
/* Whether the handle wants to be in the election. */
bool zkl__election_want_in(struct election *e);
/* The machine is at rest: out of the election, not going in, nothing of it running. */
bool zkl__election_at_rest(struct election *e);
/* Wakes the machine. */
void zkl__election_wake(struct election *e);
/* Whether the calling thread must not wait for the machine (no lock held): one that
 * runs the loop (a callback, or the application's loop thread, which must never wait
 * for the server), or the selector's function. */
bool zkl__election_must_not_wait(struct election *e);
/* Waits (no lock held) until done(c, arg) holds, asked on the loop after each step of
 * the machine, or the deadline passes: 0, ZKL_ETIMEDOUT, ZKL_EDEADLK on the loop. */
int zkl__election_wait(struct election *e, bool (*done)(zkl_client *c, void *arg), void *arg,
                      int64_t deadline, const char *what);
/* Takes e, at rest, off the loop and frees its handle (no lock held, off the loop). */
void zkl__election_dispose(struct election *e);

#endif
