/* The mutex's handle, shared with the rwlock (rwlock.c), whose halves are mutexes.
 * Never installed. */
#ifndef ZKL_MUTEX_INTERNAL_H
#define ZKL_MUTEX_INTERNAL_H

#include <zklocks/mutex.h>

#include "lock_internal.h"

/* The handle's state is guarded by its own mutex, lock.mu (mu below): a mutex's own_mu,
 * or for both halves of a rwlock the read half's, since each half looks at the other's
 * holds. mu is never held while waiting for the
 * client's loop to finish a callback of this handle (a lost or revocation callback
 * takes mu): zkl__hold_end(), zkl__engine_release() and zkl__client_cancel_owner() are
 * called without it. */
struct zkl_mutex {
	zkl_lock lock;                 /* the view: path, client, node data, lost callback */
	enum zkl_kind kind;            /* LOCK, or READ / WRITE for a rwlock half */
	zkl_mutex *other;              /* the other half of a rwlock, or NULL */
	struct zkl_acq *leases;        /* mu: acquisitions held, one per thread */
	struct zkl_acq *waiting;       /* mu: blocking acquisitions under way (their nodes
	                                * are the engine's: c->mu) */
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

#endif
