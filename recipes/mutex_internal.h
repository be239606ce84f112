/* The mutex's handle, shared with the rwlock (rwlock.c), whose halves are mutexes.
 * Never installed. */
#ifndef ZKL_MUTEX_INTERNAL_H
#define ZKL_MUTEX_INTERNAL_H

#include <zklocks/mutex.h>

#include "lock_internal.h"

struct zkl_mutex {
	zkl_lock lock;                 /* the view: path, client, node data, lost callback */
	enum zkl_kind kind;            /* LOCK, or READ / WRITE for a rwlock half */
	zkl_mutex *other;              /* the other half of a rwlock, or NULL */
	struct zkl_acq *leases;        /* c->mu: acquisitions held, one per thread */
	struct zkl_acq *waiting;       /* c->mu: blocking acquisitions under way */
	zkl_revoke_fn revoke_fn;       /* c->mu */
	void *revoke_data;
	zkl_naming naming;             /* c->mu */
	bool folder_seen;              /* c->mu: the engine has listed our folder */
};

/* Makes the view of m, a mutex of kind at path (0, or ZKL_ENOMEM with nothing to free). */
int zkl_mutex_init(zkl_mutex *m, zkl_client *c, const char *path, enum zkl_kind kind);

/* Ends every hold of m (and its asynchronous acquire) and frees what m owns, not m. */
void zkl_mutex_dispose(zkl_mutex *m);

#endif
