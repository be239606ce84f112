/* What the files of src/client share among themselves (client.c lists them): the
 * messages of the inbox, background tasks, and the functions one file calls in another.
 * Never seen by the engine or the recipes, which have internal.h. Everything here runs
 * with the client's mu held unless it says otherwise. */
#ifndef ZKL_CLIENT_CORE_H
#define ZKL_CLIENT_CORE_H

#include "internal.h"
#include "hold.h"

struct zkl_event {
	struct zkl_event *next;
	uint64_t gen;
	int zk_state;
};

enum task_kind { TASK_DELETE, TASK_FIND_DELETE };

/* A background task is on one of two lists: c->tasks while the loop has to look at it
 * (new, waiting to retry, or answered), c->tasks_out while a request of it is out. A
 * pending delete is also in the index of its folder, so that a listing finds our nodes
 * on their way out without going through every task of the client. */
struct zkl_task {
	struct zkl_msg msg;                /* its completion, in the inbox */
	struct zkl_msg rel;                /* a release's: the loop takes the task over */
	int zrc;                           /* the completion's return code, until applied */
	struct zkl_task *next, *prev;      /* mu: in c->tasks or c->tasks_out */
	bool out;                          /* mu: in c->tasks_out */
	struct zkl_task *fnext, *fprev;    /* mu: in folder->tasks */
	struct zkl_task_folder *folder;    /* mu: the index entry of a DELETE, or NULL */
	enum task_kind kind;
	char *path;                        /* DELETE: node; FIND_DELETE: parent */
	char uuid[ZKL_UUID_LEN + 1];
	uint64_t gen;
	bool inflight;                     /* a request for it is out */
	bool done;                         /* its request completed: look at rc */
	int rc;
	char *found;                       /* FIND_DELETE: the child that carries the uuid */
	int64_t not_before;
	struct zkl_session *s;
};

struct zkl_listener {
	zkl_state_fn fn;
	void *data;
};

/* What the inbox tells apart in a message (struct zkl_msg, applied by its own apply):
 * a call is refused once the loop has ended, an op's answer may be lazy, and a node
 * watch's event may be no news (zkl__inbox_put). */
enum msg_kind { MSG_OP, MSG_TASK, MSG_WATCH, MSG_REVWATCH, MSG_REVREAD, MSG_SESSION, MSG_CALL,
                MSG_HOLD_END, MSG_RELEASE };

/* loopcall.c: hands call to the loop (zkl__call) and waits until done is posted (call's
 * fn posts it, now or later), no lock held; once the loop runs no more, runs call's fn
 * here, mu held. */
void zkl__call_wait(zkl_client *c, struct zkl__call *call, sem_t *done);

/* loop.c */
void zkl__kick(zkl_client *c);
void zkl__loop_wake(zkl_client *c);
uint64_t zkl__kicks(zkl_client *c);
bool zkl__io_wait_since(zkl_client *c, uint64_t k, int64_t deadline);
void zkl__wake_all(zkl_client *c);
/* zkl__inbox_put(): hold.h, for a hold's end inline. */
void zkl__inbox_drain(zkl_client *c);
bool zkl__io_wait(zkl_client *c, int64_t deadline);
int64_t zkl__loop_waiters_run(zkl_client *c);
int64_t zkl__loop_once(zkl_client *c);
void *zkl__event_main(void *arg);

/* session.c */
void zkl__session_event_locked(zkl_client *c, struct zkl_session *s, int state, int64_t id,
                          int timeout, struct zkl_event *e);
int zkl__adopt_handle(zkl_client *c, zhandle_t *zh);
void zkl__release_handle(zkl_client *c, zhandle_t *zh);
struct zkl_session *zkl__session_new(zkl_client *c, uint64_t gen);
void zkl__session_free(zkl_client *c, struct zkl_session *s);
void zkl__set_state(zkl_client *c, zkl_state st);
void zkl__session_replace(zkl_client *c);
void zkl__handle_event(zkl_client *c, struct zkl_event *e);

/* request.c */
void zkl__node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
void zkl__watch_free(struct zkl_watch *wt);

/* tasks.c */
void zkl__task_drop(zkl_client *c, struct zkl_task *t);
int64_t zkl__tasks_run(zkl_client *c);

/* revwatch.c */
void zkl__revwatch_put(zkl_client *c, struct zkl_revwatch *rv);
void zkl__revwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
void zkl__revwatches_run(zkl_client *c);

/* holds.c */
void zkl__hold_unlink(zkl_client *c, struct zkl_hold *h);
void zkl__holds_notify(zkl_client *c);

/* liveness.c */
int64_t zkl__liveness_run(zkl_client *c);
int64_t zkl__retired_reap(zkl_client *c, bool all);

#endif
