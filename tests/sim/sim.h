/* The simulator's world, shared by sim.c (the single server, the C client, the clients,
 * the scheduler and the checks) and ensemble.c (--ensemble: the servers of an ensemble
 * under the same model). tests/sim/README.md describes both. */
#ifndef ZKL_SIM_H
#define ZKL_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <zookeeper/zookeeper.h>
#include <zklocks/zklocks.h>

#define MAXC 5   /* clients */
#define MAXK 12  /* contenders (with --multi, a multi-lock's second member too) */
#define MAXF 24  /* faults */
#define MAXP 3   /* lock paths */

/* ------------------------------------------------------------------------------------ */
/* The world */

struct node {
	struct node *next;
	char *path;
	char *data;
	int len;
	struct Stat st;
	bool container;
};

enum wkind { W_DATA, W_CHILD };

struct watch {
	struct watch *next;
	uint64_t id;
	struct sess *s;
	char *path;
	enum wkind kind;
	watcher_fn fn;
	void *ctx;
};

enum op { OP_CREATE, OP_DELETE, OP_CHILDREN, OP_GET, OP_EXISTS, OP_SET, OP_SYNC, OP_CHECK,
          OP_MULTI };

/* One op of a multi, copied from the caller's zoo_op_t, and its result once applied. */
struct sub {
	int type;            /* ZOO_CREATE_OP ... ZOO_CHECK_OP */
	char *path;
	char *data;
	int len;
	int mode;
	int version;
	int err;
	char *created;
	struct Stat st;
};

/* A message: a request travelling to the server, or something travelling back (an
 * answer, a watch event, a session event). */
enum mkind { M_REQUEST, M_ANSWER, M_WATCH, M_SESSION };

struct msg {
	struct msg *next;
	enum mkind kind;
	int64_t at;          /* arrives no earlier than this (server clock) */
	bool local;          /* made by the client library itself: no network between */
	/* M_REQUEST, M_ANSWER */
	enum op op;
	char *path;
	char *data;
	int len;
	int mode;
	int version;
	watcher_fn wfn;
	void *wctx;
	uint64_t wid;        /* the watch this request left on the server */
	void (*done)(void);
	const void *arg;
	int rc;
	char *created;
	struct Stat st;
	char **names;
	int count;
	/* OP_MULTI: its ops, and where their results go (the caller's) */
	struct sub *subs;
	int nsubs;
	zoo_op_result_t *results;
	bool answered;       /* the server's answer, not the request's own failure */
	/* M_WATCH, M_SESSION */
	watcher_fn fn;
	void *ctx;
	int type;
	int state;
};

/* C_EXPIRING: the C client knows the session expired, and its event is on the way to
 * the library; C_DEAD: the event was delivered. Either way every request is refused on
 * the spot with ZINVALIDSTATE, as the C client does once its handle has seen the
 * expiry: the library must not take such a session for connected while the event is on
 * its way (RELIABILITY.md, finding 4). */
enum conn { C_CONNECTING, C_UP, C_DOWN, C_EXPIRING, C_DEAD };

struct sess {
	struct sess *next;
	int cl;               /* its client's slot */
	int64_t id;
	int timeout;
	watcher_fn fn;
	void *ctx;
	/* the server's side */
	bool known;           /* the server has the session (first connect done) */
	bool alive;           /* known, and neither expired nor closed */
	int64_t last_heard;
	bool kill_conn;       /* the server ended it: the client learns on its next contact */
	/* the connection, as the client's library sees it */
	enum conn conn;
	int64_t retry_at;     /* C_CONNECTING, C_DOWN: next attempt */
	int64_t last_recv;    /* last time anything arrived from the server */
	int64_t next_ping;
	bool lose_next;       /* fault: the next request is applied, its answer lost */
	bool lose_create;     /* fault: the next create is applied, its answer lost */
	bool closed;          /* the library closed the handle */
	bool lib_connected;   /* the last session event delivered said CONNECTED */
	int64_t lag0;         /* its client's lag when it was opened */
	struct msg *out, *out_tail;   /* to the server */
	int64_t out_last;
	struct msg *in, *in_tail;     /* to the client */
	int64_t in_last;
	struct msg *held;             /* watch events fired while disconnected */
	struct cwatch *cw;            /* the C client's table of watches it knows of */
	/* --ensemble: the server its connection is on; whether that server, a follower,
	 * heard of the session since its last ping answer to the leader; whether the
	 * leader's record of the session may lag behind what its server answered (it is
	 * attached to a follower: RELIABILITY.md's documented bound applies). */
	int srv;
	bool f_touched;
	bool via_follower;
	/* --ensemble, on a follower: when it last heard of the session, and the longest it
	 * went without hearing of it since it last told the leader */
	int64_t f_last, f_gap;
};

/* A watch as the C client knows it: only once the answer of the request that set it came
 * back ZOK. An event for a watch it does not know is dropped, as the C client does. */
struct cwatch {
	struct cwatch *next;
	uint64_t id;
	char *path;
	watcher_fn fn;
	void *ctx;
};

enum life { L_RUN, L_FROZEN, L_SUSPENDED, L_CRASHED };

struct client {
	zkl_client *c;
	int64_t lag;          /* how long its clock stood still */
	int64_t susp_from;    /* L_SUSPENDED: since when */
	struct sess *sess;    /* its newest session */
	enum life life;
	int64_t life_until;
	bool cs_up, sc_up;    /* client -> server, server -> client */
	int64_t part_until;
	bool blocked;         /* a thread of it waits inside the library (nested steps) */
	bool blocked_off_loop;/* that thread is not the loop's (off_loop): the application's
	                       * loop thread goes on running zkl_client_process() */
	int64_t wait_until;   /* until when (server clock), if it runs */
	uint64_t delivered;   /* deliveries so far: wakes a blocked wait */
	bool owed;            /* a hold of it must be told lost as soon as it runs again */
	int64_t faulted_until; /* the end of the last fault that touched it */
	bool stopped_expiry;  /* a session of it expired while its clock stood still, and it
	                       * has not opened another since: it cannot know */
	int timeout;
	/* --adopt: the application opens the client's sessions and lends them
	 * (zkl_client_adopt); after an expiry it opens the next one and hands it over
	 * (zkl_client_handover) at handover_at, and closes the expired handle, its own, at
	 * close_at. */
	int64_t handover_at;  /* 0: none due */
	/* How many times its state listener heard "lost": an adopted session given up by
	 * the loss rule keeps its id, but its client let go of everything on it. */
	int losses;
	struct sess *to_close;
	int64_t close_at;
	unsigned srv_mask;    /* --ensemble: the servers its connection string lists */
};

enum kind { K_MUTEX, K_READ, K_WRITE, K_SEM, K_SEMMUTEX, K_LEADER, K_MULTI };

enum cstate { CT_IDLE, CT_ACQUIRING, CT_HOLDING, CT_DONE };

/* A multi-lock (K_MULTI, with --multi) holds two mutexes of its client, on its path and
 * on its second member's: that member is a contender of its own in W.ct, its "shadow",
 * never driven by itself, whose hold the multi-lock's grant records, so that every
 * check of a path counts the multi-lock's hold there too. */
struct contender {
	int cl;
	int path;            /* index in W.paths */
	enum kind kind;
	int shadow;          /* K_MULTI: index of its second member in W.ct */
	int shadow_of;       /* a second member: its multi-lock's index; else -1 */
	zkl_multilock *ml;
	zkl_mutex *m;
	zkl_rwlock *rw;
	zkl_semaphore *sem;
	zkl_semaphore_mutex *sm;
	zkl_leader *ld;
	zkl_lock *l;
	enum cstate st;
	int cycles;          /* left to do */
	int cycles0;         /* planned */
	int64_t next_at;     /* CT_IDLE: start; CT_ACQUIRING: cancel (or INT64_MAX);
	                      * CT_HOLDING: release */
	bool pending;        /* an async acquire's callback is owed */
	bool believes;       /* it was told it holds, and neither released nor told lost */
	bool voided;         /* its node was deleted by a peer: its hold counts no more */
	int64_t token;
	int64_t sess;        /* the session its node belongs to */
	char node[ZKL_NODE_MAX];
	int calls, losts;
	bool releasing;      /* its release is under way: a loss may still be told */
	bool told_lost;      /* its lost callback ran for the current hold */
	/* The acquire under way, for the FIFO check: cancelled, its deadline on its client's
	 * clock (INT64_MAX: none), the session its client was on when it started. */
	bool canceled;
	int64_t deadline;
	int64_t acq_sess;
	int acq_losses;      /* its client's losses when it started */
	char first[ZKL_NODE_MAX]; /* its first node on that session ("": none yet) */
	/* A revocable mutex: its holds last longer, and a request to give its node up must
	 * reach it (the revoke callback) while nothing else gets in the way. */
	int64_t granted_at;  /* when it was told it holds */
	bool revocable;
	int64_t revoke_at;   /* a request for the current hold's node: when (0: none) */
	bool revoke_told;
	bool revoke_gone;    /* a peer wrote over the request: it may never be read */
	/* A peer deleted the node of the current hold: when (0: no). The holder must be told
	 * "lost" within deleted_bound() unless something disturbed its client. */
	int64_t deleted_at;
	/* --ensemble: the leader expired its session while its loss deadline, this moment
	 * (server clock), was still ahead within the documented bound: told by then. */
	int64_t tell_by;
	/* A scripted scenario's contender: no timeout, no cancel, holds hold_for ms. */
	bool wrote;          /* --guarded: the current hold's guarded write has been started */
	bool scripted;
	int64_t hold_for;
	/* --owners: an owner id (0: none), as a thread's blocking calls carry: the contender
	 * acquires and releases through the mutex's owner entries (zkl__mutex_start_as),
	 * re-enters (levels held), and a writer downgrades: its read half's hold is its
	 * "shadow" contender's (K_READ, shadow_of), and held alongside the write lock it is
	 * the same owner's, not a second holder. */
	uint64_t owner;
	/* --multi: a multi-lock's owner id (0: none, the handle's asynchronous acquire): it
	 * acquires and releases through the multi-lock's owner entries
	 * (zkl__multilock_start_as), the run a blocking acquire waits for. */
	uint64_t mowner;
	zkl_mutex *om;       /* the mutex the owner takes (a rwlock's half) */
	int levels;          /* levels held (re-entries + 1) */
	bool downgrading;    /* a writer: its read half's acquire is under way */
	bool downgraded;     /* a writer: it holds the read half, the write half released */
};

enum fkind {
	F_LOSE,      /* the next request of a client is applied, its answer lost */
	F_DROP,      /* the connection drops; the client reconnects to the same session */
	F_EXPIRE,    /* cut off both ways for longer than the session timeout */
	F_FREEZE,    /* the process stops; its clock goes on (a long GC, SIGSTOP) */
	F_SUSPEND,   /* the machine stops; its monotonic clock stops too */
	F_CRASH,     /* the process dies: its session expires on the server */
	F_PEERDEL,   /* a peer deletes a lock node */
	F_STRAY,     /* a peer puts a stray child in a lock folder */
	F_CUT_CS,    /* one-way partition: the server no longer hears the client */
	F_CUT_SC,    /* one-way partition: the client no longer hears the server */
	F_LOSE_CUT,  /* the next create's answer is lost, and the client no longer hears the
	              * server for about the session timeout: the loss rule moves it to a new
	              * session while the server still has the old one */
	F_PEERWRITE, /* a peer writes over the data of a lock node (an operator, a revocation
	              * request): its watchers hear a change, not a deletion. Not drawn by
	              * itself: half of the stray faults become this one (see scenario()) */
	F_REVOKE,    /* a revocation request (the revoke marker written over a revocable
	              * mutex holder's node, as zkl_revoke() does) */
	F_COUNT,     /* a peer sets a semaphore's shared count to 1, 2 or 3 */
	F_SRV_CUT,   /* --ensemble: a server cut off from the other servers (its clients
	              * still reach it) */
	F_SRV_DOWN,  /* --ensemble: a server's process is gone for a while */
	F_NKINDS
};

struct fault {
	enum fkind kind;
	int cl;
	int64_t at, dur;
	uint64_t pick;
	bool done;
};

struct path_info {
	char path[64];
	enum kind kind;      /* of its contenders (K_READ/K_WRITE: a rwlock) */
	int max;             /* semaphores */
	int64_t max_token;   /* the highest token granted so far */
	int64_t max_excl;    /* the highest token of an exclusive hold */
	int64_t guarded;     /* --guarded: the highest token of an exclusive hold whose
	                      * guarded write committed (they never go backward) */
	/* A semaphore whose limit is a shared count (max is its first value): the values it
	 * has had, and since when. */
	bool shared;
	char count_path[64];
	int nvals;
	struct { int64_t at; int v; } vals[16];
};

struct options {
	uint64_t seed;
	bool trace;
	uint32_t fault_mask;   /* faults of the schedule kept (bit i: fault i) */
	uint32_t cont_mask;    /* contenders kept */
	bool verbose;
	bool sem_peerdel;      /* peers delete semaphore nodes too */
	bool known_sem;        /* the known semaphore stall is counted, not a failure */
	bool leaders;          /* the mutex paths are leader elections (latches' views) */
	bool multi;            /* mutex paths only; some contenders are multi-locks of two */
	bool adopt;            /* the clients' sessions are the application's (adopted) */
	bool ensemble;         /* three servers: a leader and followers (ensemble.c) */
	bool owners;           /* some contenders are owners (re-entry, downgrade) */
	bool guarded;          /* each hold makes a guarded write (zkl_lock_txn) of /guarded */
	int scenario;          /* --scenario: a scripted ensemble case (ensemble.c); 0: none */
	bool every;            /* --every-mode: the seed picks the mode (every_mode()) */
};

struct world {
	struct options o;
	uint64_t rng;
	int64_t now;
	int64_t zxid, next_sid;
	bool in_multi;        /* the ops of a multi share one zxid, as the server's do */
	uint64_t next_wid;
	struct node *nodes;
	struct watch *watches;
	struct sess *sessions;
	struct client cl[MAXC];
	int ncl;
	struct contender ct[MAXK];
	int nct;
	struct fault f[MAXF];
	int nf;
	struct path_info paths[MAXP];
	int npaths;
	int cur;             /* the client whose code runs now (its clock), or -1 */
	int depth;
	int64_t delay_max;
	int64_t fault_end;   /* no new fault starts after this */
	int64_t next_reap;
	char peer_deleted[16][ZKL_NODE_MAX];
	int npeer_deleted;
	bool tearing_down;
	bool checking;
	uint64_t steps;
	int holds;           /* holds granted */
	int exempt;          /* holds left unchecked: suspended or crashed */
	int known_stalls;    /* runs ended by the known semaphore stall */
	uint64_t fifo_pairs; /* FIFO: (grant, clean waiting contender) pairs compared */
	/* --ensemble: elections; holds whose session the leader expired, checked against
	 * their client's loss deadline; those expired before it (within the bound). */
	uint64_t elections, ens_checked, ens_early;
	/* --guarded: guarded writes started, and applied (each checked at its commit) */
	uint64_t gw_sent, gw_applied;
};
extern struct world W;
/* sim.c */
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
uint64_t rnd(uint64_t n);
int64_t between(int64_t lo, int64_t hi);
int64_t clock_of(int k);
int64_t delay(void);
void push_in(struct sess *s, struct msg *m, int64_t at);
void disconnect(struct sess *s, const char *why);
void check_expiry_told(struct sess *s);
bool clock_stood_still(const struct sess *s);
bool alive(int64_t id);
void release_held(struct sess *s, int64_t at);
struct sess *sess_by_id(int64_t id);
const char *kind_name(enum kind k);

/* ensemble.c (--ensemble) */
void ens_init(void);
int ens_scenario_named(const char *name);
const char *ens_scenario_name(int scenario);
void ens_scenario(void);
void ens_print(FILE *f);
void ens_tick(void);
int64_t ens_next(void);
int64_t ens_settled(void);
int64_t ens_disturbed(void);
bool ens_commits(void);
bool ens_ready(const struct sess *s, const struct msg *m);
bool ens_knows_expired(const struct sess *s);
bool ens_holds_events(const struct sess *s);
void ens_touch(struct sess *s);
void ens_sent(struct sess *s, int op);
void ens_granted(const struct contender *t, int j);
bool ens_answers_ping(const struct sess *s);
int ens_pick(struct sess *s);
void ens_connected(struct sess *s, int srv);
int64_t ens_expiry_at(const struct sess *s);
bool ens_expires(const struct sess *s);
void ens_check_expiry(struct sess *s);
void ens_check(void);
void ens_resume(int k);
void ens_fault(struct fault *f);
int64_t ens_extra_delay(const struct msg *m);

#endif
