/* The acquisition's state, shared by the files that run it: acquire.c (the way in, the
 * queue, the way out) and folder.c (making a missing lock folder). Never used outside
 * src/engine. */
#ifndef ZKL_ACQUISITION_H
#define ZKL_ACQUISITION_H

#include "engine.h"

enum acq_state {
	A_TOP,         /* decide what comes next */
	A_FIND,        /* listing the folder for our uuid */
	A_FIND_EXISTS, /* found a node with our uuid: whose session owns it? */
	A_CREATE,      /* our create is out (with the folder's create, or the list) */
	A_SETTLE,      /* cancelled with the create out: waiting for its answer */
	A_ENSURE,      /* making the folder and its missing ancestors */
	A_FOLDER,      /* waiting for another acquisition to make the folder */
	A_LIST,        /* the queue's list is out */
	A_WATCH,       /* the request that arms our watch is out */
	A_WAIT,        /* waiting for the watch to fire */
	A_RECOVER,     /* waiting for the connection after a transient failure */
	A_TURN,        /* our turn came past the loss deadline: waiting for a new session */
	A_PROVE,       /* our turn came with no recent committed write: one is out */
	A_WITHDRAW,    /* deleting our node before reporting the failure */
};

/* What a state's function tells step() (or ZKL_E*: it failed); ANSWERED is await()'s. */
enum { GO_ON = 0, WAIT = 1, HELD = 2, ANSWERED = 3 };

struct zkl_acquisition {
	struct zkl_job job;            /* first: the loop runs it (src/client/loop.c, "Jobs") */
	const struct zkl_queue *q;
	struct zkl_node *node;         /* the caller's */
	enum acq_state st;
	int64_t deadline;
	bool try_once;                 /* timeout 0: one round trip, then give up */
	unsigned epoch;                /* *q->epoch when the queue was last looked at */
	bool unknown;                  /* a create of ours may exist: look for it by uuid */
	uint64_t unknown_gen;
	uint64_t uuid_gen;             /* the session node->uuid's last create went out on */
	char *target;                  /* the path our node is created at, named for */
	char target_uuid[ZKL_UUID_LEN + 1]; /* this uuid (node->uuid, unless renewed since) */
	struct zkl_op *folder, *create, *list, *op;
	struct zkl_watch *wt;
	bool watch_folder;             /* the watch is on the folder's children */
	bool heir;                     /* the watched node going means we hold */
	bool near;                     /* the next release may grant us (on_list) */
	bool near_counted;             /* counted in the client's near (zkl__near_set) */
	size_t listed;                 /* the queue's length when the watch was armed */
	uint64_t ggen;                 /* the session the watch was armed on */
	int64_t until;                 /* SETTLE, ENSURE: their own deadline */
	struct zkl_withdrawal withdrawal; /* WITHDRAW: the delete of our node */
	char *ensure;                  /* ENSURE: the folder's path; the create out (or next) */
	size_t ensure_len, ensure_full;/* is of its first ensure_len bytes */
	int ensure_mode;               /* and its mode */
	struct zkl_folder *folder_made;/* ENSURE: the folder we make for others too; FOLDER:
	                                * the one we wait for (NULL once it is done) */
	struct zkl_acquisition *folder_next; /* FOLDER: next waiter of folder_made */
	char *found;                   /* FIND_EXISTS */
	uint64_t found_gen;
	int failed;                    /* the failure being withdrawn from */
	bool begun;                    /* counted (zkl_client_get_stats) */
	int64_t since;                 /* when it began (the observer's wait_ms) */
	bool told_queued;              /* the observer was told it waits */
	void (*done_fn)(void *arg, int rc); /* or, started by zkl__engine_start: its end */
	void *done_arg;
};

/* Whether op has its answer (ANSWERED) or is still out (WAIT: the loop runs us again at
 * `deadline` at the latest), or the wait is over: ZKL_ECANCELED or ZKL_ETIMEDOUT. */
int zkl__acq_await(struct zkl_acquisition *a, const struct zkl_op *op, int64_t deadline);
/* The failure of a wait that ended (ZKL_ETIMEDOUT or ZKL_ECANCELED), with its detail. */
int zkl__acq_gave_up(const struct zkl_acquisition *a, int rc);
/* Lets go of *op, if any, and clears it. */
static inline void zkl__acq_put_op(zkl_client *c, struct zkl_op **op)
{
	if (*op) {
		zkl__op_put(c, *op);
		*op = NULL;
	}
}
/* After a transient failure: wait for the connection, unless trying once. */
int zkl__acq_start_recover(struct zkl_acquisition *a);

/* folder.c: the states ENSURE and FOLDER, what a create that found the folder missing
 * does, and letting go of the folder a makes or waits for. */
int zkl__acq_folder_missing(zkl_client *c, struct zkl_acquisition *a);
int zkl__acq_on_ensure(zkl_client *c, struct zkl_acquisition *a);
int zkl__acq_on_folder(zkl_client *c, struct zkl_acquisition *a);
void zkl__acq_folder_leave(zkl_client *c, struct zkl_acquisition *a, bool made);

#endif
