/* What the semaphore's files share: its handle and leases (semaphore.c) and the take of
 * leases, the one path of its blocking and asynchronous acquires (semaphore_take.c).
 * Never installed.
 *
 * Who touches what. The loop alone reads and writes what it keeps of a semaphore, the
 * core below: the shared count, the folders seen, the count check, and the takes under
 * way. An application thread reaches it by handing the loop a call (zkl__loop_run) or a
 * take (a job), never by touching it itself. The handle's own mutex (lock.mu) guards
 * the lease handles and what only the application's threads touch; the loop never
 * takes it in a step, only from a callout (zkl__loop_callout), where the application's
 * code may run too. What the loop publishes for other threads (the lease node a take
 * has made, for zkl_lock_node(): the engine publishes it, zkl_queue.pub) goes under
 * zkl__pub_mu, a leaf the loop takes in a step (lock.pub). */
#ifndef ZKL_SEMAPHORE_INTERNAL_H
#define ZKL_SEMAPHORE_INTERNAL_H

#include <stdatomic.h>

#include <zklocks/semaphore.h>

#include "lock_internal.h"
#include "predicates.h"

/* What the loop keeps of a semaphore. It may outlive the handle: a take orphaned by a
 * free on the loop's thread still reads it, and the last reference frees it. */
struct zkl__sem_core {
	atomic_int refs;               /* the handle's, and one per take */
	char *path, *locks_path, *leases_path;  /* fixed */
	int fixed_max;                 /* fixed: > 0, or 0 with a shared count */
	int32_t shared_max;            /* loop: kept by the count watch */
	unsigned epoch;                /* loop: bumped on every count change */
	struct zkl_revwatch *count;    /* loop */
	bool locks_seen, leases_seen;  /* loop: the engine has listed these folders */
	bool count_agreed;             /* loop: the recorded count was found equal ours */
};

/* Lets go of a reference (any thread); the last frees k. */
void zkl__sem_core_put(struct zkl__sem_core *k);

struct zkl_semaphore {
	zkl_lock lock;                 /* the view: one lease per acquire; client, path, node
	                                * data, lost callback */
	struct zkl__sem_core *k;       /* the loop's */
	char *count_path;
	struct zkl_lease *leases;      /* mu: every lease handle not yet freed */
	struct zkl_lease *view;        /* mu: the view's leases, the last taken first */
	struct zkl__sem_take *waiting; /* mu: blocking takes under way (zkl_lock_node) */
	/* Leases an asynchronous acquire took that are in the view: whether one holds the
	 * view (zkl__lock_async_claim asks on the loop, without the handle's
	 * mutex). */
	atomic_int async_held;
	zkl_lease_revoke_fn revoke_fn; /* mu: revocable if set */
	void *revoke_data;
	pthread_mutex_t own_mu;
	pthread_cond_t own_cv;
};

struct zkl_lease {
	zkl_semaphore *s;
	struct zkl_lease *next, *prev; /* mu */
	struct zkl_node node;          /* the loop's while it is taken; then mu: path NULL
	                                * once released; its hold, node.hold, made at the
	                                * grant */
	bool held;                     /* mu */
	bool was_lost;                 /* mu: lost when it was released */
	char *path;                    /* the node's path, kept after release */
	struct zkl_lease *below;       /* mu: the view's lease taken before this one */
	bool async;                    /* taken by the view's asynchronous acquire */
};

/* One take of n leases: a job the loop runs (semaphore_take.c), for a thread that waits
 * for it or for an asynchronous acquire's callback. */
struct zkl__sem_take {
	struct zkl_job job;            /* first: the loop hands it back */
	zkl_semaphore *s;              /* not read on the loop: it may be gone (orphaned) */
	struct zkl__sem_core *k;       /* a reference */
	int n;
	int got;                       /* loop: leases[0..got) hold */
	zkl_lease **leases;            /* n, made with the take; the loop fills their nodes */
	bool installed;                /* the leases are the handle's now */
	struct zkl_data data;          /* the lease nodes' data */
	bool revocable;
	int64_t deadline;
	int64_t since;                 /* when the take began (the observer's wait) */
	int timeout_ms;
	int st;                        /* loop: where it is (semaphore_take.c) */
	/* loop: the count check's request out, whether it is the write of our count (with
	 * the version read), how many it made, and its answer's deadline */
	struct zkl_op *cop;
	bool cset;
	int cversion;
	int crounds;
	int64_t cuntil;
	/* loop: the acquisition out (the job's child), and how it ended */
	struct zkl_queue q;
	struct zkl_limit max;
	struct zkl_node gate;
	bool out;
	int out_rc;
	char out_error[256];
	/* an asynchronous acquire's claim of the view, and whether its callback is due */
	struct zkl_lock_async a;
	bool call;
	/* a blocking acquire's owner (its thread's), while in s->waiting */
	zkl__owner taker;
	/* the lease node under way as the engine published it (zkl_queue.pub; NULL again
	 * once granted): a copy, zkl__pub_mu */
	char *node_pub;
	struct zkl__sem_take *next;
};

/* Makes a take of n leases of s for timeout_ms (no lock held; n checked): 0 with *out
 * set, or a ZKL_E* code. */
int zkl__sem_take_new(struct zkl__sem_take **out, zkl_semaphore *s, int n, int timeout_ms);
/* Frees it, with the leases it did not give to the handle. */
void zkl__sem_take_free(struct zkl__sem_take *t);
/* Runs t and waits for it (no lock held): 0 with t->leases the handle's, or a ZKL_E*
 * code with nothing taken. */
int zkl__sem_take_run(struct zkl__sem_take *t);
/* Starts t for the view's asynchronous acquire (no lock held), claiming the view: 0
 * (then t is the loop's, which frees it), or a ZKL_E* code (t is still the caller's). */
int zkl__sem_take_start(struct zkl__sem_take *t, zkl_lock_acquired_fn fn, void *data);
/* The lease node a take under way has made, as the engine published it, or NULL
 * (zkl__pub_mu held, as zkl_lock_node() holds it). */
const char *zkl__sem_take_node(const struct zkl__sem_take *t);

/* semaphore.c: a lease's lost and revocation callbacks (loop, no lock held); a lease
 * taken becomes the handle's (no lock held); one the view's asynchronous acquire took
 * goes on the view (no lock held). */
void zkl__sem_lease_lost(struct zkl_hold *h, void *ctx);
void zkl__sem_lease_revoked(void *ctx, const char *node);
void zkl__sem_lease_install(zkl_semaphore *s, zkl_lease *l);
void zkl__sem_view_push_async(zkl_semaphore *s, zkl_lease *l);

#endif
