/* Helpers for the integration tests: a server from tests/with-zk, clients, unique paths,
 * a raw ZooKeeper handle to look at the tree, and forced session expiry. */
#ifndef ZKL_TEST_HARNESS_H
#define ZKL_TEST_HARNESS_H

#include <stdarg.h>
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

/* Servers from ZKL_TEST_SERVERS; exits 77 (skip) without it, or fails under CI=true. */
const char *h_servers(void);
/* Opens a client with a short session timeout (ms; 0 for 4000). */
zkl_client *h_client(int session_timeout_ms);
/* A fresh path "/t/<test>-<n>-<pid>" for this test (static storage, one per call). */
const char *h_path(const char *test);
/* Number of children of path on a raw handle (-1 if the path does not exist). */
int h_children(const char *path);
/* Whether path exists. */
int h_exists(const char *path);
/* Creates a persistent node (and nothing else). */
void h_create(const char *path, const char *data);
/* Waits until path is deleted (watch-driven), at most ms. Returns 1 if it was. */
int h_wait_deleted(const char *path, int ms);
/* Expires c's session from outside (a second handle with the same id and password). */
void h_expire(zkl_client *c);
/* A one-shot latch for callbacks. */
typedef struct h_latch h_latch;
h_latch *h_latch_new(void);
void h_latch_set(h_latch *l);
int h_latch_wait(h_latch *l, int ms); /* 1 if set within ms */
int h_latch_count(h_latch *l);
void h_latch_free(h_latch *l);
/* Runs cmocka groups; returns its status. */
#define H_RUN(tests) _cmocka_run_group_tests(#tests, tests, sizeof(tests) / sizeof(tests)[0], \
                                             h_setup, h_teardown)
int h_setup(void **state);
int h_teardown(void **state);

#endif
