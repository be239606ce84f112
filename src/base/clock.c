/* Monotonic time and deadlines.
 *
 * Every timeout in the library is turned into an absolute deadline on CLOCK_MONOTONIC
 * once, at the start of a call, so that a call that waits several times (connect, list,
 * watch, list again) is bounded as a whole. The monotonic clock is used because a
 * wall clock step (NTP, an operator) must neither cut a wait short nor stretch it. */
#include <stdint.h>
#include <time.h>

#include "clock.h"

/* The deterministic simulation (tests/sim) replaces the clock and the timed waits: it
 * runs every client on one thread, on simulated time. NULL (always, outside tests/sim):
 * CLOCK_MONOTONIC and pthread_cond_timedwait, and nothing else changes. */
const struct zkl__clock_hook *zkl__clock_hook;

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
