/* Driving a peer process of the interop tests (Peer.java on Curator, peer.py on kazoo)
 * from C: it is spawned with pipes on its stdin and stdout, takes "<slot> <command>"
 * lines and answers "<slot> <event>" lines (the protocol is in Peer.java and peer.py).
 *
 * A reader thread collects the peer's lines; the test waits for the next line of a slot.
 * Every function is thread-safe, so test threads can drive different slots at once. */
#ifndef ZKL_INTEROP_PEER_H
#define ZKL_INTEROP_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include <zklocks/zklocks.h>

typedef struct peer peer;

enum peer_kind {
	PEER_CURATOR, /* Peer.java: needs ZKL_INTEROP_JAVA and ZKL_INTEROP_CLASSPATH */
	PEER_KAZOO,   /* peer.py: needs ZKL_INTEROP_PYTHON and ZKL_INTEROP_PEER_PY */
};

/* Starts a peer on the test server with the given session timeout (ms) and waits for its
 * "ready" line. If the peer cannot run here (no java, no kazoo, no Curator jars) it exits
 * the test program with 77 (skipped), or fails with the reason when CI=true: CI must run
 * these tests. */
peer *peer_start(enum peer_kind kind, int session_timeout_ms);

/* What the "ready" line said: the session id (hex) and the data of the peer's nodes
 * (Curator's default data, kazoo's identifier). Borrowed, valid until peer_stop(). */
const char *peer_session(const peer *p);
const char *peer_data(const peer *p);

/* Sends one command line, printf-style, e.g. peer_send(p, "a acquire mutex %s 500", path). */
void peer_send(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The next line of slot (without "<slot> "), waiting at most ms; NULL on timeout or if
 * the peer has exited. The caller frees it. */
char *peer_next(peer *p, const char *slot, int ms);

/* Fails the test unless the next line of slot, within ms, begins with want. */
void peer_expect(peer *p, const char *slot, const char *want, int ms);

/* Whether slot stays silent for ms (nothing is consumed). */
bool peer_quiet(peer *p, const char *slot, int ms);

/* Sends a command and expects its answer: peer_do(p, "a", "acquired", 10000,
 * "acquire mutex %s -1", path) sends "a acquire mutex <path> -1". */
void peer_do(peer *p, const char *slot, const char *want, int ms, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Ends the peer's session from outside, as the server does when it expires: asks the peer
 * for its session id and password ("* info") and closes a second handle opened with
 * them. Waits until the peer reports its state LOST. */
void peer_expire(peer *p);

/* Asks the peer to quit and waits for it (kills it after 10 s). NULL is a no-op. */
void peer_stop(peer *p);

/* ---- zklocks contenders, each on its own client (session), as another process ---- */

/* A zklocks lock held by a thread of its own, so that a test can start an acquire, go on
 * driving the peers, and later see how it ended. Commands run in order on that thread
 * (zkl_mutex holds belong to the thread that acquired them). */
typedef struct zh zh;

enum zh_kind {
	ZH_MUTEX,     /* zkl_mutex */
	ZH_READ,      /* zkl_rwlock, read half */
	ZH_WRITE,     /* zkl_rwlock, write half */
	ZH_SEMMUTEX,  /* zkl_semaphore_mutex */
	ZH_SEM,       /* zkl_semaphore, one lease */
};

/* An acquire that has not finished yet (zh_wait()); never a ZKL_E* code. */
#define ZH_PENDING 1

/* A contender for path with its own client. max_leases is for ZH_SEM (else ignored);
 * data, if not NULL, is the node data (zkl_*_set_data). */
zh *zh_new(enum zh_kind kind, const char *path, zkl_naming naming, int max_leases,
           const char *data);
/* Starts an acquire on the contender's thread and returns at once. */
void zh_start_acquire(zh *z, int timeout_ms);
/* The result of the last command, waiting at most ms: 0, a ZKL_E* code, or ZH_PENDING. */
int zh_wait(zh *z, int ms);
/* Acquires and waits for the result (0 or a ZKL_E* code). */
int zh_acquire(zh *z, int timeout_ms);
/* Releases the hold (0 or a ZKL_E* code). */
int zh_release(zh *z);
/* Lists the participants of the contender's lock (zkl_*_participants()). */
int zh_participants(zh *z, zkl_participant **out, size_t *count);
/* Cancels a pending acquire, releases a hold, ends the thread, closes the client. */
void zh_free(zh *z);
/* Makes the contender track how its holders leave (zkl_lock_track_previous), and reads
 * what its last acquire found (zkl_lock_previous), with the previous holder's node. */
void zh_track(zh *z);
zkl_previous zh_previous(zh *z, char *node, size_t size);

/* ---- scenarios that both the Curator and the kazoo tests run ---- */

/* "It happens soon", on a loaded CI machine too, and how long a try that must fail
 * waits (ms). */
#define PEER_SOON 15000
#define PEER_TRY 400

/* In what follows, verb is the peer's name for an exclusive lock ("mutex" for Curator,
 * "lock" for kazoo) and naming the node names zklocks uses beside that peer. */

/* The peer's slot a holds the lock at path; a zklocks contender's tries fail, it then
 * waits and gets in when a releases; the peer's slot b then times out until zklocks
 * releases. */
void peer_check_peer_holds(peer *p, const char *path, zkl_naming naming, const char *verb);
/* A queue at path that alternates between the libraries is served in the order it
 * queued: holder zklocks, then the peer's b, zklocks c, the peer's d, zklocks e. */
void peer_check_fifo_alternating(peer *p, const char *path, zkl_naming naming,
                                 const char *verb);
/* The peer's writer (slot w) keeps two zklocks readers out; they get in together once it
 * goes, and keep it out until both have released. */
void peer_check_peer_writer_blocks_readers(peer *p, const char *path, zkl_naming naming);

/* A tracking zklocks mutex and the peer's on one path: the peer is unaffected by the
 * note beside the lock, and a zklocks holder that waited behind the peer is told
 * "vanished" with the peer's node (the peer leaves no note). */
void peer_check_note(peer *p, const char *path, zkl_naming naming, const char *verb);

#endif
