/* Helpers for the fault tests: a 3-node ensemble from tests/with-ensemble, driven through
 * scripts/zk-ensemble; clients and raw handles pinned to chosen nodes (so that pausing a
 * node affects exactly the clients on it); and client processes to SIGKILL.
 *
 * Nodes are numbered 1..3 as in the script. Every helper fails the running test
 * (cmocka) when the ensemble does not do what was asked, so a test never goes on
 * against an ensemble in an unknown state. */
#ifndef ZKL_TEST_FAULTS_H
#define ZKL_TEST_FAULTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"

/* ---- time ---- */

/* CLOCK_MONOTONIC in ms. */
int64_t f_now(void);
/* The epoch of a zxid (its high 32 bits): it grows with every new leader. */
#define F_EPOCH(zxid) ((int64_t)(zxid) >> 32)

/* ---- the ensemble ---- */

/* Runs "$ZKL_TEST_ENSEMBLE_SCRIPT CMD $ZKL_TEST_ENSEMBLE_DIR [N]" (N <= 0: none) and
 * fails the test if it does not exit 0. Exits 77 (skip), or 1 under CI=true, when not run
 * through tests/with-ensemble. */
void f_ctl(const char *cmd, int n);
/* The node that leads now (waits until there is exactly one). */
int f_leader(void);
/* A node other than the leader and other than except (0: any follower). */
int f_follower(int except);
/* "127.0.0.1:PORT" of node n (static storage, one per node). */
const char *f_server(int n);
/* The connect string of the two nodes other than n (static storage). */
const char *f_servers_except(int n);
/* Resumes paused nodes, starts stopped ones and waits until all three serve with a
 * leader: every test starts and ends with a whole ensemble. */
void f_heal(void);

/* ---- clients ---- */

/* Opens a client; fails the test unless it connects and negotiates exactly the session
 * timeout asked for (a clamped timeout would make the timing assertions meaningless). */
zkl_client *f_client(const char *servers, int session_timeout_ms, bool confirm_release);

/* ---- the tree, through raw handles that survive faults ---- */

/* A raw handle on servers, connected (fails the test after 20 s). Close with
 * zookeeper_close(). */
zhandle_t *f_raw(const char *servers);
/* In what follows, servers NULL means all three nodes.
 * The children of path seen from servers, retried through connection loss for up to
 * 20 s. Returns the count, -1 if path does not exist; *names (if not NULL) gets the
 * names in queue order (by their "-<sequence>" suffix), to be freed with f_names_free(). */
int f_children(const char *servers, const char *path, char ***names);
void f_names_free(char **names, int n);
/* Waits until path has n children as seen from servers (n == 0 also accepts an absent
 * path), polling the server for at most ms; returns 1 if it got there. */
int f_wait_children(const char *servers, const char *path, int n, int ms);
/* Whether path exists, seen from servers (retried through connection loss). */
bool f_exists(const char *servers, const char *path);

/* Watches path from servers and notes when it is deleted. */
typedef struct f_deletion f_deletion;
f_deletion *f_watch_deletion(const char *servers, const char *path);
/* When the deletion was seen (ms, f_now's clock), waiting at most ms; 0 if not seen. */
int64_t f_deletion_time(f_deletion *d, int ms);
void f_deletion_free(f_deletion *d);

/* ---- client processes ---- */

/* A client in a process of its own: the test binary run again with "--fault-child". It
 * opens a client on servers with the given session timeout, acquires a zkl_mutex on path
 * (waiting without limit), writes "held TOKEN TIMEOUT\n" to its pipe and then keeps its
 * session busy until it is killed: a request every 20 ms, each answered one reported as
 * "ok SENT\n", SENT being when it was sent (f_now's clock, which is system-wide). */
typedef struct f_child {
	pid_t pid;
	int fd;          /* read end of its stdout */
	char buf[512];
	size_t len;
	int64_t last_ok; /* after f_child_kill: the SENT of its last "ok" line, or 0 */
} f_child;
void f_child_spawn(f_child *ch, const char *servers, const char *path, int session_timeout_ms);
/* Reads the child's next line within ms into line; fails the test on timeout or EOF. */
void f_child_line(f_child *ch, char *line, size_t size, int ms);
/* SIGKILLs the child and reaps it; reads what it wrote before it died (setting
 * last_ok); returns the time just before the signal was sent. */
int64_t f_child_kill(f_child *ch);
/* Call first in main(): when the process was started as a child, runs it and never
 * returns. */
void f_child_main(int argc, char **argv);

/* ---- a waiter on a thread of its own ---- */

/* A thread that acquires m with a deadline and notes when it started and returned; if it
 * got the lock, it holds it (is_held and the token are taken on that thread) until
 * release is set, then releases. Zero it before f_waiter_start(). */
typedef struct f_waiter {
	zkl_mutex *m;
	int timeout_ms;
	int rc;
	int64_t started, returned;
	bool held;
	int64_t token;
	int release_rc;
	h_latch *done, *release;
	pthread_t th;
} f_waiter;
void f_waiter_start(f_waiter *a, zkl_mutex *m, int timeout_ms);
/* Lets the thread release (if it holds), joins it and frees its latches. */
void f_waiter_join(f_waiter *a);

/* ---- cmocka ---- */

/* Per-test setup and teardown: heal the ensemble, kill leftover child processes. */
int f_setup(void **state);
int f_teardown(void **state);
#define FAULT_TEST(fn) cmocka_unit_test_setup_teardown(fn, f_setup, f_teardown)

#endif
