/* Unit tests of the SIGPIPE guard around the C client's calls (src/client/sigpipe.c).
 * No server needed. A write to a pipe whose reader is gone stands for a write to a
 * connection the server dropped: a SIGPIPE the guard lets through ends this process, and
 * the test with it. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigpipe.h"

static bool pipe_pending(void)
{
	sigset_t p;
	sigemptyset(&p);
	assert_int_equal(sigpending(&p), 0);
	return sigismember(&p, SIGPIPE) == 1;
}

static bool pipe_blocked(void)
{
	sigset_t m;
	pthread_sigmask(SIG_SETMASK, NULL, &m);
	return sigismember(&m, SIGPIPE) == 1;
}

/* Writes to a pipe without a reader: EPIPE (and SIGPIPE, unless blocked or ignored). */
static int write_broken(void)
{
	int fd[2];
	assert_int_equal(pipe(fd), 0);
	close(fd[0]);
	errno = 0;
	ssize_t w = write(fd[1], "x", 1);
	int e = errno;
	close(fd[1]);
	assert_int_equal(w, -1);
	return e;
}

static void block_pipe(bool block)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

/* Every test starts as an application does: SIGPIPE at its default action, unblocked,
 * none pending. */
static int setup(void **state)
{
	(void)state;
	struct sigaction sa;
	sigaction(SIGPIPE, NULL, &sa);
	if (sa.sa_handler != SIG_DFL)
		return -1;
	block_pipe(false);
	return pipe_pending() ? -1 : 0;
}

/* A SIGPIPE the call raises in the calling thread is taken off; the mask comes back as it
 * was, and the process lives on. */
static void test_raised_in_call(void **state)
{
	(void)state;
	sigset_t before, after;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	assert_true(pipe_blocked());
	assert_int_equal(write_broken(), EPIPE);
	assert_true(pipe_pending());
	errno = EBADF; /* the guarded call's errno survives the restore */
	zkl__sigpipe_restore(&g);
	assert_int_equal(errno, EBADF);
	assert_false(pipe_pending());
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	for (int sig = 1; sig < NSIG; sig++)
		assert_int_equal(sigismember(&before, sig), sigismember(&after, sig));
	assert_false(pipe_blocked());
}

struct writer {
	pthread_mutex_t mu; /* held by the test until the guard has ended */
	bool blocked;
	int err;
};

static void *writer(void *arg)
{
	struct writer *w = arg;
	pthread_mutex_lock(&w->mu);
	w->blocked = pipe_blocked();
	w->err = write_broken();
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* A thread started inside the guard (as the C client's are) keeps SIGPIPE blocked after
 * the guard ends: its writes fail with EPIPE and the process lives on. */
static void test_thread_started_inside(void **state)
{
	(void)state;
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	pthread_t t;
	struct writer w = { .mu = PTHREAD_MUTEX_INITIALIZER };
	pthread_mutex_lock(&w.mu);
	assert_int_equal(pthread_create(&t, NULL, writer, &w), 0);
	zkl__sigpipe_restore(&g);
	assert_false(pipe_blocked());
	pthread_mutex_unlock(&w.mu);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_mutex_destroy(&w.mu);
	assert_true(w.blocked);
	assert_int_equal(w.err, EPIPE);
	assert_false(pipe_pending()); /* it was the thread's, and went with it */
}

/* A SIGPIPE already pending when the guard begins is the application's: it stays, and so
 * does the caller's blocked mask. */
static void test_pending_before_is_kept(void **state)
{
	(void)state;
	block_pipe(true);
	assert_int_equal(pthread_kill(pthread_self(), SIGPIPE), 0);
	assert_true(pipe_pending());
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	assert_int_equal(write_broken(), EPIPE);
	zkl__sigpipe_restore(&g);
	assert_true(pipe_blocked());
	assert_true(pipe_pending());
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	const struct timespec now = { 0, 0 };
	assert_int_equal(sigtimedwait(&s, NULL, &now), SIGPIPE);
	block_pipe(false);
}

/* A caller that blocks SIGPIPE itself gets none from the call either (it would fire once
 * the caller unblocked it), and keeps its mask. */
static void test_blocked_by_caller(void **state)
{
	(void)state;
	block_pipe(true);
	struct zkl_sigpipe_guard g;
	zkl__sigpipe_block(&g);
	assert_int_equal(write_broken(), EPIPE);
	zkl__sigpipe_restore(&g);
	assert_true(pipe_blocked());
	assert_false(pipe_pending());
	block_pipe(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_raised_in_call, setup),
		cmocka_unit_test_setup(test_thread_started_inside, setup),
		cmocka_unit_test_setup(test_pending_before_is_kept, setup),
		cmocka_unit_test_setup(test_blocked_by_caller, setup),
	};
	return cmocka_run_group_tests_name("sigpipe", tests, NULL, NULL);
}
