/* Helpers for the unit tests that run real clients on the in-memory ZooKeeper
 * (fakezk.h): contenders on threads, and conditions to wait for. */
#ifndef FZH_H
#define FZH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <zklocks/zklocks.h>

#include "fakezk.h"

/* A blocking acquire of a lock (the view of a mutex or a rwlock half) on its own thread,
 * which holds it (mutexes are held by a thread) until told to release. */
struct fzh_acq {
	struct fz *z;
	pthread_t thread;
	zkl_lock *l;
	int timeout_ms;
	int rc;
	atomic_bool done;
	bool held;          /* what the thread saw right after acquiring */
	int64_t token;
	atomic_bool release;
	int release_rc;
	int64_t session;    /* if not 0: */
	int nodes;          /* how many nodes it owned on the server as the acquire returned */
	int creates;        /* and how many of its creates were still on their way */
};

/* session: the client's session, to count its nodes as the acquire returns (or 0). */
void fzh_acq_start(struct fzh_acq *a, struct fz *z, zkl_lock *l, int timeout_ms,
                   int64_t session);
/* Waits until the acquire returned; its rc. */
int fzh_acq_wait(struct fzh_acq *a);
/* Has the thread release what it holds (if anything), joins it, and returns the
 * release's rc (0 when nothing was held). */
int fzh_acq_finish(struct fzh_acq *a);

/* How many children path has (-1: it does not exist). */
int fzh_children(struct fz *z, const char *path);
/* Waits until path has n children / at least n watches (not counting its owner's own,
 * fz_watchers) / session has n nodes. */
void fzh_wait_children(struct fz *z, const char *path, int n);
void fzh_wait_watched(struct fz *z, const char *path, int n);
void fzh_wait_done(struct fz *z, struct fzh_acq *a);
/* Waits until the acquire returned or path is watched: whichever comes first. */
void fzh_wait_done_or_watched(struct fz *z, struct fzh_acq *a, const char *path);

/* The full path of the i-th child of path in queue order (sequence numbers, as the
 * engine sorts them), in buf. */
void fzh_queue_node(struct fz *z, const char *path, int i, char *buf, size_t size);

/* Counts calls of a lost callback. */
struct fzh_count {
	struct fz *z;
	atomic_int n;
	int64_t session;    /* if not 0: */
	int nodes;          /* how many nodes it owned on the server at the first call */
};
void fzh_on_lost(zkl_lock *l, int reason, void *data);
void fzh_wait_count(struct fzh_count *k, int n);

#endif
