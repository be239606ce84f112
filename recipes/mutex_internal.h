/* The mutex's handle, shared with the rwlock (rwlock.c), whose halves are mutexes.
 * Never installed. */
#ifndef ZKL_MUTEX_INTERNAL_H
#define ZKL_MUTEX_INTERNAL_H

#include <zklocks/mutex.h>

#include "lock_internal.h"

/* The handle's state is guarded by its own mutex, lock.mu (mu below): a mutex's own_mu,
 * or for both halves of a rwlock the read half's, since each half looks at the other's
 * holds. The nodes of acquisitions under way, which the engine writes on the loop, are
 * published by the engine into a copy under zkl__pub_mu, a leaf (lock.pub). mu is
 * never held while waiting for the client's loop to finish a callback of this handle (a
 * lost or revocation callback takes mu): zkl__engine_release() (which ends the node's
 * hold) and zkl__client_cancel_owner() are called without it. */
struct zkl_mutex {
	zkl_lock lock;                 /* the view: path, client, node data, lost callback */
	enum zkl_kind kind;            /* LOCK, or READ / WRITE for a rwlock half */
	zkl_mutex *other;              /* the other half of a rwlock, or NULL */
	struct zkl_acq *leases;        /* mu: acquisitions held, one per thread */
	struct zkl_acq *waiting;       /* mu: acquisitions of an owner under way (their nodes
	                                * as published: node_pub, zkl__pub_mu) */
	struct mutex_owned *started;   /* mu: those of them started by zkl__mutex_start_as */
	zkl_revoke_fn revoke_fn;       /* mu */
	void *revoke_data;
	zkl_naming naming;             /* mu */
	bool folder_seen;              /* mu: the engine has listed our folder (it writes a
	                                * copy of its own while an acquire runs) */
	pthread_mutex_t own_mu;
	pthread_cond_t own_cv;
};

/* Makes the view of m, a mutex of kind at path (0, or ZKL_ENOMEM with nothing to free). */
int zkl__mutex_init(zkl_mutex *m, zkl_client *c, const char *path, enum zkl_kind kind);

/* Makes b guarded by a's mutex (the halves of a rwlock). */
void zkl__mutex_share_mu(zkl_mutex *b, zkl_mutex *a);
/* Ends every hold of m (and its asynchronous acquire) and frees what m owns, not m; a
 * rwlock's half keeps its mutex until zkl__mutex_fini(). */
void zkl__mutex_dispose(zkl_mutex *m);
void zkl__mutex_fini(zkl_mutex *m);

/* Acquires m on behalf of owner, as the blocking acquire does for its thread, without
 * waiting: the owner's holds decide, as data. If owner holds m already, its count goes
 * up and 1 is returned (done never runs). If owner holds the write half of m's rwlock
 * and m is the read half, the read node is made at the writer's place (the downgrade);
 * the read half held, taking the write half is ZKL_EDEADLK. Otherwise 0, and done(arg,
 * rc) runs once on the loop, no lock held, when the acquire ends (0: owner holds m), or
 * a ZKL_E* code and done never runs. zkl_lock_cancel() cancels it. Freed on a thread
 * that runs the loop, m orphans it (it ends quietly); on another, the free waits for it.
 * The simulator drives owners with it; mutex_acquire() is the same plus a wait. */
int zkl__mutex_start_as(zkl_mutex *m, zkl__owner owner, int timeout_ms,
                       void (*done)(void *arg, int rc), void *arg);
/* Releases one level of owner's hold of m (as zkl_lock_release() does for the calling
 * thread's): 0, ZKL_ELOST, or ZKL_ENOTOWNER. */
int zkl__mutex_release_as(zkl_mutex *m, zkl__owner owner);
/* Owner's hold of m: its count (0: none), and if it is not lost its node's path (into
 * buf, of size len) and token. */
int zkl__mutex_held_as(zkl_mutex *m, zkl__owner owner, char *buf, size_t len,
                      int64_t *token);

#endif
