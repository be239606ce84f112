/* Monotonic time and deadlines.
 *
 * Every timeout in the library is turned into an absolute deadline on CLOCK_MONOTONIC
 * once, at the start of a call, so that a call that waits several times (connect, list,
 * watch, list again) is bounded as a whole. The monotonic clock is used because a
 * wall clock step (NTP, an operator) must neither cut a wait short nor stretch it. */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"

/* The deterministic simulation (tests/sim) replaces the clock and the timed waits: it
 * runs every client on one thread, on simulated time. NULL (always, outside tests/sim):
 * CLOCK_MONOTONIC and pthread_cond_timedwait, and nothing else changes. */
const struct zkl__clock_hook *zkl__clock_hook;

struct timespec
zkl__ms_to_timespec(int64_t ms)
{
	struct timespec ts;

	if (ms < 0)
		ms = 0;
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	return ts;
}

int
zkl__cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t attr;
	int rc;

	rc = pthread_condattr_init(&attr);
	if (rc != 0)
		return rc;
	/* The deadlines are monotonic, so the condition variable must time out on the
	 * same clock; the default (CLOCK_REALTIME) would move with the wall clock. */
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
	return rc;
}

bool
zkl__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
	struct timespec ts;
	int rc;

	if (zkl__clock_hook)
		return zkl__clock_hook->wait(zkl__clock_hook->arg, mu, deadline_ms);
	if (deadline_ms == INT64_MAX) {
		pthread_cond_wait(cv, mu);
		return false;
	}
	/* A deadline that has already passed is reported without sleeping, so a caller
	 * with a 0 ms timeout never blocks. */
	if (zkl__now_ms() >= deadline_ms)
		return true;
	ts = zkl__ms_to_timespec(deadline_ms);
	rc = pthread_cond_timedwait(cv, mu, &ts);
	return rc == ETIMEDOUT;
}
