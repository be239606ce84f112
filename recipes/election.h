/* What zkl_leader (latch.c) and zkl_selector (selector.c) share: one election, a state
 * machine that the client's loop runs (election.c has the design notes). Never
 * installed. */
#ifndef ZKL_ELECTION_H
#define ZKL_ELECTION_H

#include <zklocks/leader.h>

#include "lock_internal.h"

enum election_state {
	E_OUT,      /* not in the election */
	E_QUEUE,    /* the engine's acquisition of our node is under way */
	E_BACKOFF,  /* joining failed: try again at retry_at */
	E_LEAD,     /* our node heads the queue: prove it ours, announce, watch */
	E_ENDING,   /* leadership over: the function's thread ends, callbacks */
	E_LEAVING,  /* our node's delete is out */
};

struct election {
	zkl_lock lock;                 /* first: the view (c, path, node data = the id,
	                                * lost callback, asynchronous acquire) */
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

	/* Everything below: c->mu. */
	struct zkl_waiter w;           /* the loop waiter whose run() is the machine */
	pthread_cond_t cv;             /* broadcast after every turn of the machine */
	enum election_state st;
	bool listening;                /* the state listener is added */
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
	bool revoke_seen;              /* our node, read while leading, asks for revocation */
	bool revoke_told;              /* and on_revoke has been called for this leadership */

	/* The queue: the engine's acquisition, its node and what it reads. */
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
	struct zkl_hold *hold;         /* while leading */
	unsigned susp_seen;
	bool verified;                 /* our node was read back as ours since the last look */
	bool announced;                /* gained called, the function started, or the view
	                                * acquire answered */
	bool gained;                   /* the gained callback ran: lost runs at the end */
	struct zkl_op *check;          /* the read of our node that is out */
	bool check_watch;              /* it arms wt */
	int64_t check_until;
	struct zkl_watch *wt;          /* armed on our node */
	int end;                       /* why leadership ended (E_ENDING) */
	struct zkl_op *leave_op;       /* E_LEAVING: the delete of our node */
	int64_t leave_until;
	enum election_state after_leave;
	pthread_t worker;              /* selector: runs fn */
	bool worker_running;
	bool fn_done;
	bool loss_told;                /* selector: this leadership's loss went to the view's
	                                * lost callback */

	/* The view's acquire: one at a time, blocking or asynchronous. */
	bool view_pending;
	bool view_async;
	bool view_cancel;
	int view_timeout;
	int64_t view_deadline;
	bool view_done;                /* a blocking acquire's answer is in: */
	int view_rc;
	char view_error[256];
	bool view_held;                /* leadership taken through the view, until released */
	bool view_lost;                /* and lost meanwhile */
	bool let_go;                   /* released on the loop's thread, which does not wait:
	                                * the node held is on its way out (until leave()) */
	struct zkl_lock_async async;
};

/* Sets up e for path (kind LATCH for a latch, LOCK for a selector); self is the public
 * handle passed to user code, which embeds e first. id is the node data (NULL:
 * "<host>:<pid>"). Returns 0 or a ZKL_E* code with nothing left to free. The caller
 * then sets the options and calls election_attach(). */
int election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                  enum zkl_kind kind, void *self);
/* Puts e on the client's loop and adds its state listener, once its options are set
 * (the loop reads them from then on). Returns 0, or a ZKL_E* code with what
 * election_init() made freed (not e). */
int election_attach(struct election *e);
/* Joins the election for good (until closed). */
int election_start(struct election *e);
/* Leaves the election; from another thread than the loop's (or the selector's
 * function), returns once the machine is at rest and no callback runs. */
int election_close(struct election *e);
/* Closes e and frees its handle (self), at once, or, on the loop's thread or from the
 * selector's function, once the machine is at rest (on the loop): returns whether it
 * was put off so. */
bool election_free(struct election *e);
/* Requeues a selector. */
int election_requeue(struct election *e);
/* Interrupts the current leadership (a selector, or a started latch). */
void election_interrupt(struct election *e);

/* Waits (timeout_ms as in the API) until leading (want == true) or not leading. */
int election_await(struct election *e, bool want, int timeout_ms);
/* The current leader's id (node data): *id is the caller's, free(). */
int election_leader_id(struct election *e, char **id);

#endif
