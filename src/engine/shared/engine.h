/* The lock-queue engine: the one mechanism every recipe uses (DESIGN.md), and what
 * recipes reach lock state through: their acquisitions and releases, the holds made at
 * a grant (hold.c), and the machines of their own that the loop runs (stage.c).
 *
 * The model: every step, callback and call of the engine and the recipes that this header
 * says runs "on the loop" runs there with the client's lock held, the loop's own state
 * theirs to read and write; none of them takes or lets go of that lock. So no function
 * here is named for the lock: the rest (an application's thread, no lock of the client
 * held) is said where it applies. */
#ifndef ZKL_ENGINE_H
#define ZKL_ENGINE_H

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "hold.h"

/* A queue's rule: what the engine asks of the queue, and what it may assume. The engine
 * gives the recipes three (predicates.h, in engine.c); each recipe chooses its own. */
#define ZKL_WATCH_CHILDREN SIZE_MAX
struct zkl_predicate {
	/* Given the queue in order and our position in it, returns true if we hold, else
	 * false with *watch set to the index of the one node to wait for, or to
	 * ZKL_WATCH_CHILDREN to wait for any change of the folder's children (a semaphore's
	 * single lease taker does that). arg is the queue's pred_arg. */
	bool (*holds)(const zkl_child *queue, size_t n, size_t self, void *arg, size_t *watch);
	/* Whether a waiter holds as soon as the node it watches (queue[watch], ahead of
	 * self) is gone, without listing again: the handoff then costs one watch event.
	 * Sequence numbers only grow, so no node created later can sort ahead of ours; what
	 * can appear ahead is the read node a downgrading holder leaves at its own number
	 * (zkl__kind_may_downgrade). NULL: always list again. */
	bool (*heir)(const zkl_child *queue, size_t self, size_t watch);
};

/* Whether our node is alone in its queue without listing it: we made the folder just
 * before our node (same session, in order), and our node took number 0. A sequential
 * node's number is its folder's child version, which counts every child made or deleted,
 * so 0 means no node was ever made in the folder before ours; a folder someone else made
 * (or one that existed) may hold anything. */
bool zkl__queue_alone(bool made_folder, const zkl_child *own);

/* One queued node of ours. */
struct zkl_node {
	char *path;                    /* full path, NULL while we have none */
	char uuid[ZKL_UUID_LEN + 1];
	uint64_t gen;                  /* session it lives on */
	int64_t czxid;                 /* fencing token */
	int64_t seq;
	struct zkl_revwatch *rev;      /* revocation watch, while the node lives */
	struct zkl_hold *hold;         /* made at the grant if the queue asked (on_lost) */
	/* The name of the last node the acquisition waited behind ("" if it never waited
	 * behind a node), cut short if longer: how its holder left is what
	 * zkl_lock_previous() tells. */
	char pred[96];
	/* A note node whose data the release sets to "released <name>" in the same
	 * transaction as the delete of the node (zkl_lock_track_previous()), or NULL. */
	char *note;
	/* How the hold ended, as the holder said it (zkl_lock_set_end()): the note's second
	 * line, "" for none. */
	char note_end[48];
};

/* What the engine needs to know about a queue. */
struct zkl_queue {
	zkl_client *c;
	const char *path;           /* the lock folder */
	enum zkl_kind kind;         /* marker of the nodes we create */
	const void *data;           /* node data */
	int data_len;
	const struct zkl_predicate *pred;
	void *pred_arg;
	const void *owner;          /* for cancel */
	/* The kind the observer is told of ("mutex", ...: zkl_lock_kind()), or NULL: an
	 * acquisition of the recipe's own (a semaphore's gate) tells it nothing. */
	const char *name;
	/* For the observer: when the recipe's acquire began, if before this acquisition
	 * (a semaphore's lease, after its gate), else 0; and whether its grant is only a
	 * step of the acquire, told when the acquire is granted (a semaphore's gate). */
	int64_t since;
	bool quiet_grant;
	/* If set, our node carries a revocation watch that calls this (event thread) each
	 * time revoke_decode finds a request in the node's data. */
	void (*on_revoke)(void *ctx, const char *path);
	void *revoke_ctx;
	zkl_data_decode_fn revoke_decode;
	/* If set, a change of *epoch (on the loop) ends a wait as a fired watch does: the
	 * predicate's inputs changed (a semaphore's shared limit). */
	const unsigned *epoch;
	/* If set (read and written on the loop), whether this handle has seen its folder
	 * exist; while false, the folder is created ahead of our node in the same round
	 * trip (instead of after a create that failed for want of it), and the list is sent
	 * only if needed. */
	bool *folder_seen;
	/* If set, the grant makes node->hold: at the grant, in the loop's turn that decides
	 * it, a hold of our node (zkl__hold_new) goes on the client's list, reported lost
	 * through on_lost(lost_ctx), so that it counts from that moment (a client holding
	 * nothing may prove its session with a sync). The node's release ends it. Without
	 * memory for it the acquisition fails. */
	void (*on_lost)(struct zkl_hold *h, void *ctx);
	void *lost_ctx;
	/* If set, where the engine publishes our node's path to other threads while the
	 * acquisition goes on (the node zkl_lock_node() shows): each time the node is known
	 * (made, or found again after a lost answer) or forgotten (gone with its session or
	 * its folder, or withdrawn), on the loop, a copy goes there, NULL for none, under
	 * zkl__pub_mu (zkl__pub_set()). The slot is the recipe's: it lives as long as the
	 * acquisition, and the recipe frees its copy once the acquisition has ended. */
	char **pub;
	/* If set, called on the loop each time our node is known or forgotten, after pub: an
	 * election republishes its view (whose node shows only while it queues or leads).
	 * It takes no lock but a leaf of its own. */
	void (*on_node)(void *ctx);
	void *node_ctx;
	/* If not 0, when trying once (a timeout of 0) ends: a recipe that tries once through
	 * several acquisitions gives them one budget (ZKL_TRY_ONCE_MS from the call's
	 * start). 0: ZKL_TRY_ONCE_MS from the acquisition's start. */
	int64_t until;
	/* If not 0, the session the acquisition belongs to (a semaphore's lease belongs to
	 * the session its gate node lives on): once the client is on another session, or
	 * our node would be made on another, the acquisition ends with ZKL_ELOST instead of
	 * queueing again there, and its caller starts over. */
	uint64_t gen;
};

/* Queues a node and waits until the predicate says we hold, the deadline passes, or the
 * owner is canceled. timeout_ms as in the API (0: one round trip, then give up). On
 * success *node holds the node (free its path with zkl__node_clear after release). On
 * failure our node is gone (or queued for a background delete) and *node is cleared.
 * The acquisition runs on the client's event thread (acquire.c); called there (from a
 * callback), it fails at once with ZKL_EDEADLK. q must live until it returns. */
int zkl__engine_acquire(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node);

/* Whether the create of a node of q fits in one request (zkl__request_fits): 0, or
 * ZKL_EINVAL naming the limit. The acquisitions check it before sending anything; a
 * recipe that queues on two folders checks the second before the first. */
int zkl__engine_fits(const struct zkl_queue *q);

/* Starts the same acquisition and returns: 0, or a ZKL_E* code (then done never runs).
 * done(arg, rc) runs exactly once, on the client's event thread, with no lock held and
 * zkl_last_error() set, when the acquisition ends as zkl__engine_acquire would return.
 * q and node must live until then. A cancel of q->owner ends it with ZKL_ECANCELED. */
int zkl__engine_start(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node,
                     void (*done)(void *arg, int rc), void *arg);

/* The same from a step of a job the loop runs: the acquisition is the child
 * of parent (zkl__job_begin), run where parent is, and parent is woken once
 * done(arg, rc) has run (as above: on the loop, no lock held). */
int zkl__engine_start_child(const struct zkl_queue *q, int timeout_ms, struct zkl_node *node,
                           struct zkl_job *parent, void (*done)(void *arg, int rc),
                           void *arg);

/* Whether the grant of node, held, still stands (on the loop): its session is the current
 * one, not given up, and short of its loss deadline. A recipe that waits for more after
 * a grant (a semaphore's further leases) asks before it says it holds. */
bool zkl__engine_grant_stands(zkl_client *c, const struct zkl_node *node);

/* Deletes a node we hold, ending its hold first. Connected, the delete is sent at once and its answer is the
 * background's, which retries it until it succeeds or the session is gone; from an
 * application's thread that takes no lock of the client (zkl__task_delete_sent). With
 * confirm_release, or while disconnected, it waits for the answer, no longer than the
 * session can be alive. Returns 0, or ZKL_ELOST if the node's hold was lost or its
 * session already gone.
 * Clears *node. On the client's loop (a callback) it never waits: the delete goes to the
 * background at once. */
int zkl__engine_release(zkl_client *c, struct zkl_node *node);
/* The same, with subs[0..n) in one transaction before the delete of
 * the node (and its note), waiting for the server: 0 when all were applied; ZKL_ELOST
 * (the node or its session is gone: nothing was applied); an operation's failure, after
 * which the node is deleted alone; ZKL_ECONNLOSS (an answer was lost: applied or not).
 * The hold ends whatever comes. *answer is the transaction's answered op, or NULL
 * (release it with zkl__op_release()). From an application's thread only. */
int zkl__engine_release_txn(zkl_client *c, struct zkl_node *node, const struct zkl_mop *subs,
                           int n, struct zkl_op **answer);

/* Deletes a node we hold in the background, without waiting (so also on the event
 * thread), ending its hold first: sent at once if connected, else when the session
 * reconnects. On a thread that runs the loop this is done at once; from another it is
 * handed to the loop. Clears *node. */
void zkl__engine_release_later(zkl_client *c, struct zkl_node *node);

/* The same from a step the loop runs, for a node without a hold (a
 * semaphore's gate node): sent at once, never waited for. */
void zkl__engine_release_now(zkl_client *c, struct zkl_node *node);

/* The leaf under which every published node path is written and read (engine.c):
 * the loop takes it to write one (zkl_queue.pub), a reader to copy one
 * (zkl_lock_node(), which takes it as the handle's zkl_lock.pub). */
extern pthread_mutex_t zkl__pub_mu;
/* Publishes a copy of path (NULL: none; without memory: none) at *slot, under
 * zkl__pub_mu, and frees the copy it replaces. */
void zkl__pub_set(char **slot, const char *path);

/* Forgets a node once its release is settled (or it was never made): its path and
 * note go. Inline: every release ends with it. */
static inline void zkl__node_clear(struct zkl_node *node)
{
	free(node->note);
	free(node->path);
	memset(node, 0, sizeof *node);
}

/* ---- holds (hold.c) ----
 *
 * What a recipe asks of the hold the engine made at the grant of its node (zkl_node.hold,
 * zkl_queue.on_lost). The client keeps the hold and the watch on its node (holds.c,
 * holds.c); recipes reach them only through these. */

/* Whether the hold of node is lost (any thread: the loss is atomic). No hold: false. */
bool zkl__node_lost(const struct zkl_node *node);

/* A hold's loss deadline on the current session (on the loop): the send time of its last
 * committed write plus loss_percent of the session timeout, past which the session may be
 * gone already and the loop gives it up; INT64_MAX while no write has been committed. */
int64_t zkl__loss_deadline(zkl_client *c);

/* The reason a lost hold h is told with (from its on_lost, on the loop): ZKL_EDELETED if
 * the server said its node is gone, or another session's (the next contender may hold
 * already), else ZKL_ELOST (its session ended or was given up). */
int zkl__loss_reason(const struct zkl_hold *h);
/* Whether h's node was deleted by someone else while its session lived on, as an answer
 * on that session said (on the loop); false while that is still being asked. */
bool zkl__loss_outside(const struct zkl_hold *h);

/* For a hold that is the loop's from its grant to its end, which a recipe tells its
 * application of only once the server has shown its node ours (an election's
 * leadership), all on the loop. */
struct zkl_stage;
/* Names s the stage woken each time a proof that node is ours comes (the watch's exists
 * after the grant, zkl__node_confirm()'s). false if nothing can prove it (no hold, or no
 * memory for its watch). */
bool zkl__node_follow(zkl_client *c, struct zkl_node *node, struct zkl_stage *s);
/* Asks for a new proof (after a suspension): zkl__node_confirmed() is false until it
 * comes. */
void zkl__node_confirm(zkl_client *c, struct zkl_node *node);
/* Whether the last proof asked for has come: an exists sent since found node there, with
 * its hold's session as its ephemeral owner. False once the hold is lost. */
bool zkl__node_confirmed(const struct zkl_node *node);
/* Whether the hold of node stands: 0. Else why it ended: ZKL_ELOST, with its session
 * (the hold lost, the client on another session, or past the loss deadline: the session
 * may be gone already, and the loop gives it up on this turn, so a proof answered after
 * a long stop proves nothing of the session today); ZKL_ENOTHELD, its node deleted from
 * outside while the session lived on. ZKL_HOLD_ASKING with *until set: lost, the watch
 * still asking the session whether the node went with it (a close of the session from
 * elsewhere deletes the node first); look again by *until, or when woken. */
enum { ZKL_HOLD_ASKING = 1 };
int zkl__node_stands(zkl_client *c, const struct zkl_node *node, int64_t *until);
/* Ends the hold of node and forgets it (nothing if none). ZKL_HOLD_END: the observer
 * hears of a release, or of a loss if the hold was lost; ZKL_HOLD_END_LOST: of a loss;
 * either way only if the loop has not reported the loss already. ZKL_HOLD_END_QUIET: it
 * hears nothing. */
void zkl__node_hold_end(zkl_client *c, struct zkl_node *node, enum zkl_hold_ending how);

/* For a guarded transaction, which knows its hold by its node's path (on the loop): how
 * the hold of ours whose node is path stands among the client's. */
enum zkl_held_at {
	ZKL_HELD_AT_NONE,          /* none, or ended or being released by its owner */
	ZKL_HELD_AT_GONE_LOST,     /* ended or being released, and found lost */
	ZKL_HELD_AT_HELD,          /* its owner's, not lost, of the current session */
	ZKL_HELD_AT_LOST,          /* its owner's, lost or of a session gone */
};
enum zkl_held_at zkl__held_at(zkl_client *c, const char *path);
/* The server says the node at path is gone: if its hold is its owner's (HELD or LOST
 * above), it is marked lost, and the loop reports it on its next turn as any loss.
 * Returns whether it was. */
bool zkl__held_at_gone(zkl_client *c, const char *path);

/* ---- stages (stage.c) ----
 *
 * A recipe's machine that the loop runs for as long as the recipe wants (an election,
 * for its handle's life). Its step runs on the loop each time the stage is woken: by
 * zkl__stage_wake(), at the time it asked for (zkl__stage_wake_at()), by the answer to a
 * delete it sent (zkl__stage_withdraw()), by a proof of a node it follows
 * (zkl__node_follow()), or by a session event (every stage wakes then). The step
 * returns; nothing in it waits. Threads that wait for a condition of the machine's state
 * wait on the stage (zkl__stage_wait()), and the step tells them when it changed. */
struct zkl_stage {
	struct zkl_waiter w;           /* first: the engine's, nothing of the recipe's */
	void (*step)(zkl_client *c, struct zkl_stage *s);
};
/* Puts s on the loop (on the loop): its step runs on this turn, and whenever woken. */
void zkl__stage_start(zkl_client *c, struct zkl_stage *s,
                     void (*step)(zkl_client *c, struct zkl_stage *s));
/* Takes s off the loop (on the loop): its step runs no more. */
void zkl__stage_stop(zkl_client *c, struct zkl_stage *s);
/* Has the step run on this turn or the next (on the loop). */
void zkl__stage_wake(zkl_client *c, struct zkl_stage *s);
/* Has the step run at t at the latest (from the step, on the loop, each time it
 * returns to wait for something that has a time). */
void zkl__stage_wake_at(zkl_client *c, struct zkl_stage *s, int64_t t);
/* Tells the threads waiting in zkl__stage_wait() on s that its state changed: each asks
 * its condition again (on the loop). */
void zkl__stage_tell(zkl_client *c, struct zkl_stage *s);
/* Waits (an application's thread, no lock held) until done(c, arg) holds, asked on the
 * loop when the wait begins and each time the stage tells, or until the deadline
 * passes: 0, ZKL_ETIMEDOUT, or ZKL_EDEADLK naming what on a thread that runs the loop.
 * It goes on while the client closes: done must come true then. */
int zkl__stage_wait(zkl_client *c, struct zkl_stage *s, bool (*done)(zkl_client *c, void *arg),
                   void *arg, int64_t deadline, const char *what);
/* Ends with ZKL_ECANCELED the engine acquisitions of owner under way (on the loop): a
 * machine cancelling what it started. */
void zkl__engine_cancel(zkl_client *c, const void *owner);
/* Starts job j (src/client/loop.c, "Jobs") from a call the loop runs (on the loop): its first
 * step runs on this turn; a cancel of owner cancels it. A recipe's machine that ends (a
 * semaphore's take, whose steps start engine acquisitions as its children with
 * zkl__engine_start_child()) is such a job. */
void zkl__engine_run_job(zkl_client *c, struct zkl_job *j, const void *owner);

/* The bounded delete of a node of ours that must not stay (on the loop): an acquisition
 * withdrawing after a failure, an election leaving. Its revocation watch goes first.
 * Nothing is sent for a node gone with its session; while the client closes, is not
 * connected, or is past its loss deadline, the node goes to the background task
 * (zkl__task_delete). Else the delete is sent, its answer waited for no longer than
 * zkl__delete_deadline(c, cap), and read with zkl__delete_answer(): a delete unsure
 * goes to the background task too, which retries it until it succeeds or the session
 * is gone. */
struct zkl_withdrawal {
	struct zkl_op *op;             /* the delete out, or NULL */
	int64_t until;                 /* its answer's deadline */
};
/* Starts it for node, the requests answered to w: true with the delete out (poll it),
 * false with nothing to wait for. */
bool zkl__withdraw_start(zkl_client *c, struct zkl_waiter *w, struct zkl_node *node,
                        int64_t cap, struct zkl_withdrawal *wd);
/* true while its answer is still awaited (w woken by it, or at its deadline); false
 * once read, or with none out. node is the one started for. */
bool zkl__withdraw_poll(zkl_client *c, struct zkl_waiter *w, const struct zkl_node *node,
                       struct zkl_withdrawal *wd);
/* The same for a stage (stage.c), which the answer wakes, with no cap but the
 * session's: zkl__stage_withdraw() starts it, zkl__stage_withdrawing() polls it. */
bool zkl__stage_withdraw(zkl_client *c, struct zkl_stage *s, struct zkl_node *node,
                        struct zkl_withdrawal *wd);
bool zkl__stage_withdrawing(zkl_client *c, struct zkl_stage *s, const struct zkl_node *node,
                           struct zkl_withdrawal *wd);
/* The deadline of the answer to the delete of a node of ours sent now: a session timeout
 * from now, no later than cap, nor than the loss deadline (past which the session is
 * given up, and its node goes with it or with the background task). */
int64_t zkl__delete_deadline(zkl_client *c, int64_t cap);
/* How the answer zrc to the delete of our node at path reads. A refusal is logged. */
enum zkl_delete_answer {
	ZKL_DELETE_DONE,               /* deleted, or already gone */
	ZKL_DELETE_SESSION_GONE,       /* the node went with its session */
	ZKL_DELETE_UNSURE,             /* no answer: worth sending again (transient) */
	ZKL_DELETE_REFUSED,            /* anything else: logged as an error */
};
enum zkl_delete_answer zkl__delete_answer(zkl_client *c, const char *path, int zrc);

/* Creates the non-sequential ephemeral node "<q->path>/<name>" (a downgrade read node)
 * and fills *node. With stands_on (the node the new one takes the place of: the
 * downgrade's write node), that node is asked for right after the create, in the same
 * round trip: gone, the new node is deleted again and the result is ZKL_ELOST (a writer
 * behind it may hold already); unknown, ZKL_ECONNLOSS. With q->gen set, the node is made on that session only: once the
 * client is on another, or past that session's loss deadline, ZKL_ELOST. Returns 0, or a ZKL_E* code with nothing left
 * behind. */
int zkl__engine_create_fixed(const struct zkl_queue *q, const char *name,
                            const char *stands_on, int timeout_ms, struct zkl_node *node);

/* Starts the same creation and returns: 0, or a ZKL_E* code (then done never runs).
 * done(arg, rc) runs exactly once, on the client's event thread, with no lock held, when
 * it ends as zkl__engine_create_fixed would return; q and node must live until then. A
 * cancel of q->owner ends it with ZKL_ECANCELED. */
int zkl__engine_create_fixed_start(const struct zkl_queue *q, const char *name,
                                  const char *stands_on, int timeout_ms,
                                  struct zkl_node *node, void (*done)(void *arg, int rc),
                                  void *arg);

/* Lists and parses the queue under path (sorted). *names owns the strings the children
 * point at: free with zkl__names_free(names, count). An absent path is an empty queue. */
int zkl__engine_list(zkl_client *c, const char *path, zkl_child **queue, size_t *n,
                    char ***names, int *count);
void zkl__names_free(char **names, int count);

/* Fills participants for a sorted queue: reads each node's data (pipelined). holders is
 * how many at the head hold, or ZKL_HOLDERS_READERS for a read-write queue (the readers
 * ahead of the first writer, else that writer). */
#define ZKL_HOLDERS_READERS (SIZE_MAX - 1)
int zkl__engine_participants(zkl_client *c, const char *path, size_t holders,
                            zkl_participant **out, size_t *count);

#endif
