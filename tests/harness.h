/* Helpers for the integration tests: a server from tests/with-zk, clients, unique paths,
 * a raw ZooKeeper handle to look at the tree, forced session expiry, and the small thread
 * helpers (latches, counters, workers) that the tests of several recipes share. */
#ifndef ZKL_TEST_HARNESS_H
#define ZKL_TEST_HARNESS_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <zklocks/zklocks.h>

/* Prints the code, its name and the thread's error detail on failure. */
#define CHECK_RC(expected, expr)                                                          \
	do {                                                                              \
		int rc_ = (int)(expr);                                                    \
		if (rc_ != (expected))                                                    \
			fail_msg("%s: expected %s, got %s (%s): %s", #expr,               \
			         zkl_errname(expected), zkl_errname(rc_), zkl_strerror(rc_), \
			         zkl_last_error());                                       \
	} while (0)
#define CHECK_OK(expr) CHECK_RC(0, expr)

/* ---- the server, clients and paths ---- */

/* Servers from ZKL_TEST_SERVERS; exits 77 (skip) without it, or fails under CI=true. */
const char *h_servers(void);
/* Opens a client with a short session timeout (ms; 0 for 4000). */
zkl_client *h_client(int session_timeout_ms);
/* A fresh path "/t/<test>-<n>-<pid>" for this test (static storage, one per call). */
const char *h_path(const char *test);
/* "<path>/<leaf>" (static storage: sixteen buffers used in turn). */
const char *h_sub(const char *path, const char *leaf);
/* The data a handle gives its nodes unless told otherwise: "<host>:<pid>". */
const char *h_default_data(void);

/* Two clients a and b, each with its own zkl_mutex on one fresh path, and their views:
 * where most tests of two contenders start. h_pair_close frees both mutexes and closes
 * both clients. */
typedef struct h_pair {
	const char *path;
	zkl_client *a, *b;
	zkl_mutex *ma, *mb;
	zkl_lock *la, *lb; /* zkl_mutex_lock(ma), zkl_mutex_lock(mb) */
} h_pair;
void h_pair_open(h_pair *p, const char *test);
void h_pair_close(h_pair *p);

/* ---- the tree, seen through a raw handle ---- */

/* Number of children of path on a raw handle (-1 if the path does not exist). */
int h_children(const char *path);
/* Waits until path has n children (polling: the count is the event), or fails the test
 * after about ten seconds. For n == 0, a path that is gone (a reaped container) will
 * do. */
void h_wait_children(const char *path, int n);
/* Waits until l's participant list (zkl_lock_participants) has n entries, or fails the
 * test after about ten seconds: for a count that a timed-out acquire's node, deleted in
 * the background once its create is answered, may still hold for a moment. */
void h_wait_participants(zkl_lock *l, size_t n);
/* Waits until a queued acquire of l knows its node and copies the node's path into buf,
 * or fails the test after about ten seconds: the node is on the server a moment before
 * its client has read the create's answer. */
void h_node_known(zkl_lock *l, char *buf, size_t size);
/* Copies into buf the full path of a child of path whose name is not except; fails the
 * test if there is none. */
void h_child_except(const char *path, const char *except, char *buf, size_t size);
/* Whether path exists. */
int h_exists(const char *path);
/* Creates a persistent node (and nothing else). */
void h_create(const char *path, const char *data);
/* Deletes a node behind the library's back. */
void h_delete(const char *path);
/* Deletes a and b in one transaction: watchers see both gone at once. */
void h_delete_both(const char *a, const char *b);
/* Reads a node's data into buf; returns its length. */
int h_get(const char *path, char *buf, int size);
/* Waits until path is deleted (watch-driven), at most ms. Returns 1 if it was. */
int h_wait_deleted(const char *path, int ms);
/* Expires c's session from outside (a second handle with the same id and password). */
void h_expire(zkl_client *c);
/* The same, for a client with external_loop whose loop does not run meanwhile: returns
 * once the C client has told it of the expiry, before its loop has looked. */
void h_expire_unseen(zkl_client *c);
/* Whether the test's own server can be driven (tests/with-zk exports its script); without
 * it the test should skip, loudly. */
bool h_server_driven(void);
/* Runs "$ZKL_TEST_ZK_SCRIPT VERB $ZKL_TEST_ZK_DIR" (stop, start, pause, resume); fails the
 * test if it does not exit 0. */
void h_server(const char *verb);

/* ---- latches and counters ---- */

/* A one-shot latch for callbacks. */
typedef struct h_latch h_latch;
h_latch *h_latch_new(void);
void h_latch_set(h_latch *l);
int h_latch_wait(h_latch *l, int ms); /* 1 if set within ms */
int h_latch_count(h_latch *l);
void h_latch_free(h_latch *l);

/* A counter that threads can wait on until it reaches a value. */
typedef struct h_counter {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* broadcast on every change */
	int n;             /* under mu */
} h_counter;
void h_counter_init(h_counter *k);
void h_counter_destroy(h_counter *k);
void h_counter_add(h_counter *k, int d);
int h_counter_get(h_counter *k);
/* Wait until the counter is at least (h_counter_wait) or exactly (h_counter_wait_eq)
 * want, at most ms. Return 1 if it got there. */
int h_counter_wait(h_counter *k, int want, int ms);
int h_counter_wait_eq(h_counter *k, int want, int ms);

/* An asynchronous acquire's end: h_acquired() as its callback, with a struct h_acquire as
 * its data (done init'ed by the caller) counts it in done and keeps its rc. */
struct h_acquire {
	h_counter done;
	int rc;
};
void h_acquired(zkl_lock *l, int rc, void *data);

/* Raises *max to now if now is larger (atomically). */
void h_note_max(int *max, int now);

/* ---- threads ---- */

/* Runs fn(arg) on a thread of its own, waits for it and returns what it returned, as an
 * int: for a call that must come from a thread other than the holder's. */
int h_in_thread(void *(*fn)(void *), void *arg);
/* Runs n threads of fn(arg) and waits for them all. */
void h_threads(int n, void *(*fn)(void *), void *arg);

/* A thread that acquires l (30 s at most), notes the outcome, sets done, and if it got the
 * lock releases it, after release is set when it was started to hold. */
typedef struct h_acq {
	zkl_lock *l;
	int rc;           /* of the acquire */
	bool held;        /* zkl_lock_is_held right after it */
	int release_rc;   /* of the release, if it got the lock */
	h_latch *done;    /* set once the acquire has returned */
	h_latch *release; /* with hold: keeps the lock until this is set (by h_acq_join) */
	pthread_t th;
} h_acq;
void h_acq_start(h_acq *a, zkl_lock *l, bool hold);
/* Lets a holding thread release, waits for the thread and frees its latches. */
void h_acq_join(h_acq *a);

/* A lost-hold callback for zkl_lock_on_lost: sets the latch in data on ZKL_ELOST or
 * ZKL_EDELETED (a loss of either kind). */
void h_on_lost(zkl_lock *l, int reason, void *latch);

/* ---- mutual exclusion under contention ---- */

/* The count of who is inside the critical sections of a lock that must let one in at a
 * time. Threads of h_excl_thread each open a client and a zkl_mutex (or, with
 * semaphore_mutex, a zkl_semaphore_mutex) on path and take it cycles times, passing
 * through h_excl_section while they hold it. */
typedef struct h_excl {
	const char *path;
	bool semaphore_mutex;
	int cycles;     /* per thread */
	int inside;     /* holders inside right now (atomic) */
	int max_inside; /* the most that ever were at once */
	int total;      /* sections passed, by a read-modify-write that overlap would corrupt */
	int errors;     /* failed calls (atomic) */
} h_excl;
void *h_excl_thread(void *excl);
void h_excl_section(h_excl *e);

/* ---- cmocka ---- */

/* Runs cmocka groups; returns its status. With ZKL_TEST_FILTER set, only the tests
 * whose names match it (cmocka's pattern: '*' and '?'), to run one test over and over:
 *   ZKL_TEST_FILTER=test_selector_rotates tests/with-zk build/tests/zk/test-leader */
#define H_RUN(tests) (h_filter(), \
                      _cmocka_run_group_tests(#tests, tests, sizeof(tests) / sizeof(tests)[0], \
                                              h_setup, h_teardown))
void h_filter(void);
int h_setup(void **state);
int h_teardown(void **state);

#endif
