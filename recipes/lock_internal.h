/* The shared verbs' side of every kind: the view each handle embeds, the table of what a
 * kind does itself, and the bookkeeping of asynchronous acquires that all kinds share.
 * Never installed. */
#ifndef ZKL_LOCK_INTERNAL_H
#define ZKL_LOCK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <zklocks/lock.h>

#include "common.h"

struct zkl_lock_async;

/* What a kind does itself. Every function gets the view its handle embeds. */
struct zkl_lock_ops {
	int (*acquire)(zkl_lock *l, int timeout_ms);
	/* Starts an asynchronous acquire (arguments checked): allocates what it needs, with
	 * a zkl_lock_async inside that it claims with zkl__lock_async_claim(). */
	int (*start)(zkl_lock *l, int timeout_ms, zkl_lock_acquired_fn fn, void *data);
	int (*release)(zkl_lock *l);
	void (*cancel)(zkl_lock *l);
	bool (*is_held)(zkl_lock *l);
	int64_t (*token)(zkl_lock *l);
	/* The node l holds, as zkl_lock_node() describes it (l->mu held, and l->pub if
	 * set), or NULL. The nodes of acquisitions under way are read as the loop
	 * publishes them, never from the engine's own fields. */
	const char *(*node)(zkl_lock *l);
	/* Whether an asynchronous acquire holds l (l->mu held). */
	bool (*holds_async)(zkl_lock *l);
	int (*participants)(zkl_lock *l, zkl_participant **out, size_t *count);
	/* Optional: the calling thread's hold (l->mu held), or NULL; kinds with one holder
	 * at a time that have it can track how their holders leave (previous.c). */
	struct zkl_acq *(*own)(zkl_lock *l);
	/* For a guarded transaction (txn.c): the node of the hold the verbs see (l->mu held:
	 * once held, its path is settled), copied into buf; returns 1 if it is held, -1 if
	 * it is lost and not yet released, 0 if there is none (or buf is too small). NULL:
	 * the kind has no node of its own (a multi-lock). */
	int (*hold_node)(zkl_lock *l, char *buf, size_t size);
	/* Optional: releases the calling thread's hold (its last level) with mops[0..n) in
	 * one transaction with the delete of its node (zkl__engine_release_txn(), whose
	 * answer it passes on); ZKL_EBUSY for a hold entered more than once. */
	int (*release_txn)(zkl_lock *l, const struct zkl_mop *mops, int n,
	                   struct zkl_op **answer);
	/* Optional: replaces the view's own node data (a multi-lock passes it on to its
	 * members). */
	int (*set_data)(zkl_lock *l, const void *data, size_t len);
	/* Optional, for kinds whose holds have owners (common.h), as a thread's blocking
	 * calls do: start an acquire for owner without waiting (0, then done(arg, rc) once
	 * on the loop with no lock held; 1: owner re-entered its hold at once, done never
	 * runs; or a ZKL_E* code), release one level of owner's hold, and whether owner
	 * holds l (not lost). A multi-lock takes its members for an owner with them. */
	int (*start_as)(zkl_lock *l, zkl__owner owner, int timeout_ms,
	                void (*done)(void *arg, int rc), void *arg);
	int (*release_as)(zkl_lock *l, zkl__owner owner);
	bool (*held_as)(zkl_lock *l, zkl__owner owner);
};

/* Told when a hold of the lock it listens to is lost, after the lock's own lost callback
 * (no lock held, on the event thread of the lock's client): how a multi-lock learns that
 * a member is lost without taking the member's lost callback from its owner. */
struct zkl_lock_listener {
	void (*lost)(zkl_lock *l, int reason, void *ctx);
	void *ctx;
	uint64_t seq;                   /* l->mu: the order of listening */
	struct zkl_lock_listener *next; /* l->mu */
};

struct zkl_lock {
	const struct zkl_lock_ops *ops;
	const char *kind;               /* "mutex", ... (static) */
	zkl_client *c;                  /* NULL for a multi-lock, whose members have theirs */
	pthread_mutex_t *mu;            /* guards the view's fields: the handle's own
	                                 * (set by its kind after zkl__lock_init); an
	                                 * election's is a leaf the loop takes in its
	                                 * steps (pub_mu); the others the loop takes
	                                 * only from a callout (zkl__loop_callout) */
	pthread_cond_t *cv;             /* with mu, the handle's own */
	/* The leaf under which the loop publishes the nodes of acquisitions under way (it
	 * takes it in its steps, and nothing while it holds it), taken by
	 * zkl_lock_node() after mu: the engine's zkl__pub_mu (a mutex's, a semaphore's);
	 * NULL when mu is that leaf itself (an election's). */
	pthread_mutex_t *pub;
	char *path;                     /* the handle's lock path, owned here */
	struct zkl_data data;           /* mu: data of the nodes created from now on */
	zkl_lock_lost_fn lost_fn;       /* mu */
	void *lost_data;
	struct zkl_lock_listener *listeners; /* mu, in the order of listening */
	uint64_t listen_seq;            /* mu */
	unsigned reporting;             /* mu: zkl__lock_report_lost() calls under way */
	struct zkl_lock_async *pending; /* mu: the asynchronous acquire under way */
	bool calling;                   /* mu: its callback is running */
	bool track;                     /* mu: zkl_lock_track_previous() */
};

/* An asynchronous acquire under way. A kind embeds it in what it allocates for one, so
 * that the handle may be freed meanwhile: the acquire is then orphaned and ends quietly. */
struct zkl_lock_async {
	zkl_lock *l;
	zkl_lock_acquired_fn fn;
	void *fn_data;
	/* The handle is gone: set by a drain on the loop's thread, read by the acquire's
	 * end there, before it touches the handle (whose mu may be gone with it). */
	atomic_bool orphaned;
};

/* Fills the view of a new handle: copies path, sets the default node data. The kind
 * sets mu and cv, its own, before the view is used. Returns 0, or ZKL_ENOMEM with nothing
 * to free. */
int zkl__lock_init(zkl_lock *l, const struct zkl_lock_ops *ops, const char *kind,
                  zkl_client *c, const char *path);

/* Frees what zkl__lock_init() made. zkl__lock_async_drain() comes first. */
void zkl__lock_dispose(zkl_lock *l);

/* Ends the asynchronous acquire of l before its handle goes, after the kind has
 * canceled it: waits for its callback, or on a thread that runs the loop (a callback,
 * or the application's loop thread, which never waits) orphans it, and tells a callback of this handle that is running that the handle is
 * gone. No lock held. */
void zkl__lock_async_drain(zkl_lock *l);

/* Claims l for a (l->mu held): ZKL_EBUSY if an asynchronous acquire is under way or
 * holds l. Inline, as are the two below: each is a few lines on every asynchronous
 * acquire's way to the engine. */
static inline int zkl__lock_async_claim(zkl_lock *l, struct zkl_lock_async *a,
                                        zkl_lock_acquired_fn fn, void *data)
{
	if (l->pending || l->ops->holds_async(l))
		return zkl__fail(ZKL_EBUSY, "an asynchronous acquire of %s is under way or holds "
		                "it: release it first", l->path);
	a->l = l;
	a->fn = fn;
	a->fn_data = data;
	atomic_init(&a->orphaned, false);
	l->pending = a;
	return 0;
}

/* Gives the claim back after a start that failed (l->mu held). */
static inline void zkl__lock_async_unclaim(zkl_lock *l, struct zkl_lock_async *a)
{
	if (l->pending == a)
		l->pending = NULL;
}

/* Starts the engine's acquisition of a claimed acquire (no lock held), giving the claim
 * back if it cannot start. Returns zkl__engine_start()'s result. */
static inline int zkl__lock_async_start(zkl_lock *l, struct zkl_lock_async *a,
                                        const struct zkl_queue *q, int timeout_ms,
                                        struct zkl_node *node,
                                        void (*done)(void *arg, int rc), void *arg)
{
	int rc = zkl__engine_start(q, timeout_ms, node, done, arg);
	if (rc != 0) {
		pthread_mutex_lock(l->mu);
		zkl__lock_async_unclaim(l, a);
		pthread_mutex_unlock(l->mu);
	}
	return rc;
}

/* The acquire of a has ended (event thread; l->mu held unless a was orphaned, which the
 * kind may ask first with atomic_load(&a->orphaned)): false if a was orphaned (the kind
 * undoes a success quietly and calls nobody); true otherwise, and the kind installs a
 * success, then calls zkl__lock_async_call() once no lock is held. */
bool zkl__lock_async_ending(struct zkl_lock_async *a);

/* On l's event thread (no lock held): if the asynchronous acquire under way on l was
 * started with data as its callback's data, its callback gets NULL instead from now on
 * (its caller has gone), and true is returned; else false. */
bool zkl__lock_async_forget(zkl_lock *l, void *data);

/* Runs the callback of an acquire that zkl__lock_async_ending() let through (no lock
 * held; a may be freed already: its fields are passed). saved is the error detail. */
void zkl__lock_async_call(zkl_lock *l, zkl_lock_acquired_fn fn, void *data, int rc,
                         const char *saved);

/* Reports a lost hold of l to its lost callback, then to its listeners (no lock held). */
void zkl__lock_report_lost(zkl_lock *l, int reason);

/* Called first by the free of a handle whose view is l: if l's loss is being reported on
 * this thread (the free comes from its lost callback, or from a callback that one leads
 * to), records free_fn(obj) to run once the report has ended and returns true (the free
 * returns at once); else returns false. */
bool zkl__lock_defer_free(zkl_lock *l, void (*free_fn)(void *obj), void *obj);

/* Adds a listener to l (no lock held). */
void zkl__lock_listen(zkl_lock *l, struct zkl_lock_listener *w);

/* Removes a listener (no lock held). Once it returns, w is not called any more: it waits
 * for a report under way on another thread; on l's event thread (in a callback) the
 * report under way, if any, skips w. */
void zkl__lock_unlisten(zkl_lock *l, struct zkl_lock_listener *w);

/* Whether l tracks how its holders leave (zkl_lock_track_previous(); no lock held). */
static inline bool zkl__lock_tracks(zkl_lock *l)
{
	pthread_mutex_lock(l->mu);
	const bool track = l->track;
	pthread_mutex_unlock(l->mu);
	return track;
}

/* After a blocking acquire of l took the lock (no lock held): reads the note of how the
 * holder before left and writes its own (previous.c). On failure the hold is given back
 * and the reason returned. */
int zkl__previous_note(zkl_lock *l);

/* The same, if l tracks; a lock that does not track goes no further than its own flag. */
static inline int zkl__previous_at_grant(zkl_lock *l)
{
	return zkl__lock_tracks(l) ? zkl__previous_note(l) : 0;
}

/* Decides how the previous holder left (previous.c; pure): the note's data (NULL if
 * there is none), the node the acquire last waited behind ("" if none), our own node's
 * name; writes the previous holder's node name to who. */
zkl_previous zkl__previous_decide(const char *note, size_t len, const char *pred,
                                  const char *self, char *who, size_t size);
/* The same, and how a holder that released said it ended (its note's second line) into
 * end ("" if it did not; "lost" after a holder that said it lost its lock; end may be
 * NULL). */
zkl_previous zkl__previous_decide_end(const char *note, size_t len, const char *pred,
                                      const char *self, char *who, size_t size, char *end,
                                      size_t endsize);

/* Copies l's node data (l->mu held) for an acquisition to send. */
static inline int zkl__lock_data_copy(zkl_lock *l, struct zkl_data *out)
{
	return zkl__data_set(out, l->data.bytes, (size_t)l->data.len);
}

#endif
