/* The mutex's handle, shared with the rwlock (rwlock.c), whose halves are mutexes.
 * Never installed. */
#ifndef ZKL_MUTEX_INTERNAL_H
#define ZKL_MUTEX_INTERNAL_H

#include <zklocks/mutex.h>

#include "common.h"

struct mutex_async;

struct zkl_mutex {
	zkl_client *c;
	char *path;
	enum zkl_kind kind;            /* LOCK, or READ / WRITE for a rwlock half */
	zkl_mutex *other;              /* the other half of a rwlock, or NULL */
	struct zkl_data data;          /* c->mu */
	struct zkl_acq *leases;      /* c->mu: acquisitions held, one per thread */
	zkl_mutex_lost_fn lost_fn;     /* c->mu */
	void *lost_data;
	zkl_revoke_fn revoke_fn;       /* c->mu */
	void *revoke_data;
	zkl_naming naming;             /* c->mu */
	bool folder_seen;              /* c->mu: the engine has listed our folder */
	struct mutex_async *pending;   /* c->mu: the asynchronous acquire under way */
	bool calling;                  /* c->mu: its callback is running */
};

/* Ends every hold of m (and its asynchronous acquire) and frees what m owns, not m. */
void zkl_mutex_dispose(zkl_mutex *m);

#endif
