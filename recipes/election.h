/* What zkl_leader (latch.c) and zkl_selector (selector.c) share: one election, run by
 * a thread of its own (election.c has the design notes). Never installed. */
#ifndef ZKL_ELECTION_H
#define ZKL_ELECTION_H

#include <zklocks/leader.h>

#include "common.h"

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

/* Wakes the election thread (c->mu held). */
void election_wake(struct election *e);

/* Sets up e for path (kind LATCH for a latch, LOCK for a selector); self is the public
 * handle passed to user code. Returns 0 or a ZKL_E* code with nothing left to free. */
int election_init(struct election *e, zkl_client *c, const char *path, const char *id,
                  enum zkl_kind kind, void *self);
/* Starts the election thread (once). */
int election_start(struct election *e);
/* Leaves the election and ends the thread; from a callback, returns at once. */
int election_close(struct election *e);
/* Closes if needed and frees what e owns (not e). */
void election_free(struct election *e);

bool election_leading(struct election *e);
/* The fencing token of the current leadership, or ZKL_ENOTHELD. */
int64_t election_token(struct election *e);
int election_participants(struct election *e, zkl_participant **out, size_t *count);
/* The current leader's id (node data): *id is the caller's, free(). */
int election_leader_id(struct election *e, char **id);

#endif
