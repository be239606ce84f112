/* The guard that keeps the C client's writes from raising SIGPIPE in the process
 * (sigpipe.h). */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "sigpipe.h"

static bool pipe_pending(void)
{
	sigset_t p;
	sigemptyset(&p);
	return sigpending(&p) == 0 && sigismember(&p, SIGPIPE) == 1;
}

void zkl__sigpipe_block(struct zkl_sigpipe_guard *g)
{
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
	g->pending = pipe_pending();
}

void zkl__sigpipe_restore(struct zkl_sigpipe_guard *g)
{
	int e = errno;
	if (!g->pending && pipe_pending()) {
		sigset_t pipe_set;
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		const struct timespec now = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &now) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
	errno = e;
}
