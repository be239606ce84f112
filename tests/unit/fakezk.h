/* An in-memory ZooKeeper for the unit suite: it sits under a real zkl_client through
 * the request layer's table (src/client/shared/zk.h), so the engine and the recipes run
 * unchanged, with no server.
 *
 * What it models: one tree of nodes with czxid/mzxid, versions and child versions;
 * sequential names numbered by the parent's child version, as the server does (so they
 * wrap past 2^31 - 1 as the server's do); ephemeral nodes owned by a session and removed
 * when it ends; container folders, reaped when fz_reap() is called; one-shot data and
 * child watches; session events; expiry; multis (all or none, under one zxid, each
 * op's result as the server gives it).
 *
 * How it runs: each session has one delivery thread, which takes the session's requests
 * in order, applies each to the tree and calls its completion at once, as a server and
 * the C client's completion thread would together. Watch events for the session that
 * made the change come before that request's answer; other sessions get theirs queued
 * behind what they already have. A test steers this with a hook, called on the delivery
 * thread before each request is applied, and with fz_pause() (a session's requests wait,
 * unapplied, and nothing reaches it).
 *
 * Only a client's loop sends requests (src/client/shared/zk.h): a request from any other thread
 * of a client with a loop thread of its own is counted, and fz_free() aborts naming the
 * first. The exception is a release's delete, unless the client has confirm_release. */
#ifndef FAKEZK_H
#define FAKEZK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

#include <zklocks/client.h>

struct fz;

enum fz_op {
	FZ_CREATE, FZ_DELETE, FZ_CHILDREN, FZ_GET, FZ_EXISTS, FZ_SET, FZ_SYNC, FZ_CHECK,
	FZ_MULTI, /* its path is its first op's */
};

/* What the hook wants done with a request. */
enum fz_action {
	FZ_APPLY,   /* as usual */
	FZ_LOSE,    /* applied, but the connection drops before the answer: it, and every
	             * request still queued, fail with ZCONNECTIONLOSS; the session's
	             * watchers see CONNECTING and then CONNECTED on the same session */
	FZ_REFUSE,  /* not applied; answered with the code the hook put in *rc */
	FZ_PAUSE,   /* not applied yet: the session pauses (fz_pause) with this request
	             * first in line; resuming applies it, without asking the hook again.
	             * A resume made while the hook runs (a test that saw its effect)
	             * counts: the session then does not pause. */
	FZ_SWALLOW, /* not applied, and not answered while the session stays connected
	             * (a leader cut off from the others does so with writes); the
	             * requests behind it go on. It fails with the connection (fz_drop),
	             * the session's expiry or its close */
};

struct fz_request {
	int64_t session;
	enum fz_op op;
	const char *path;
	bool watch;          /* GET and CHILDREN: a watch is asked for */
	int mode;            /* CREATE */
};

/* Runs on the requesting session's delivery thread with no lock held: it may change the
 * tree (fz_create, fz_delete...) or expire sessions, but must not wait for anything of
 * that session. */
typedef enum fz_action (*fz_hook_fn)(void *arg, const struct fz_request *r, int *rc);

struct fz *fz_new(void);
/* Every client on it must be closed first. Aborts if a request came from a thread that
 * does not run its client's loop. */
void fz_free(struct fz *z);
void fz_set_hook(struct fz *z, fz_hook_fn fn, void *arg);

/* Opens a zkl_client on z; o may be NULL (defaults, a 20 s session timeout). */
int fz_client_open(struct fz *z, zkl_client **out, const zkl_client_options *o);

/* The ground truth, changed from outside any client ("a peer"): owner is a session id
 * for an ephemeral node (fz_peer() makes one that no client uses), else 0. */
int64_t fz_peer(struct fz *z);
int fz_create(struct fz *z, const char *path, const char *data, int mode, int64_t owner,
              char *created, size_t size);
int fz_delete(struct fz *z, const char *path);
int fz_set(struct fz *z, const char *path, const char *data);
/* A multi as a peer makes it (ephemeral creates owned by owner), as the request layer's
 * multi applies it (zk.h): returns its rc and fills results. */
int fz_multi(struct fz *z, int64_t owner, int count, const zoo_op_t *ops,
             zoo_op_result_t *results);
/* Sets path's data to len bytes (any bytes; len <= 0: none) and its creation time. */
int fz_put(struct fz *z, const char *path, const void *data, int len, int64_t ctime);
/* Whether path exists; if so and st is not NULL, its stat. */
bool fz_stat(struct fz *z, const char *path, struct Stat *st);
/* The children's names, sorted by name, as one string of names each followed by '\n'
 * in buf. Returns how many, or -1 if path does not exist. */
int fz_children(struct fz *z, const char *path, char *buf, size_t size);
/* Sets the child version of path, which numbers its next sequential child. */
int fz_set_cversion(struct fz *z, const char *path, int32_t cversion);
/* Removes every empty container that ever had a child, as the server's reaper does. */
void fz_reap(struct fz *z);

/* Sessions. */
void fz_expire(struct fz *z, int64_t session);
void fz_pause(struct fz *z, int64_t session, bool paused);
/* Drops the connection of a session at once: requests still queued fail with
 * ZCONNECTIONLOSS; it reconnects to the same session. */
void fz_drop(struct fz *z, int64_t session);
/* Nodes owned by session; watches armed by anyone on path. */
int fz_ephemerals(struct fz *z, int64_t session);
int fz_watches(struct fz *z, const char *path);
/* The same, leaving out those of the node's owner (a holder's watch on its own node). */
int fz_watchers(struct fz *z, const char *path);
/* How many requests of session are waiting to be applied (of kind op; -1: any). */
int fz_queued(struct fz *z, int64_t session, int op);

/* Waits until pred(arg) holds: it is checked again after every change the fake sees.
 * A test that waits more than 30 s has failed: fz_wait aborts it, naming what. */
/* Something outside the fake changed (a thread finished, a callback ran): fz_wait looks
 * again. */
void fz_poke(struct fz *z);
void fz_wait(struct fz *z, bool (*pred)(void *arg), void *arg, const char *what);

#endif
