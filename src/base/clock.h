/* Monotonic time and deadlines. */
#ifndef ZKL_CLOCK_H
#define ZKL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <errno.h>
#include <pthread.h>

/* Initialises a condition variable that waits on CLOCK_MONOTONIC. */
int zkl__cond_init(pthread_cond_t *cv);

/* The simulation's clock (tests/sim; internal, not exported, never set by the library).
 * While zkl__clock_hook is not NULL, zkl__now_ms() returns now(arg), and
 * zkl__cond_wait_until() calls wait(arg, mu, deadline_ms) instead of waiting on the
 * condition variable: wait is entered with mu held and returns with it held, as
 * pthread_cond_timedwait does, and may return early (a spurious wake: every caller checks
 * its condition again); it returns whether the deadline passed, on now's clock. The hook
 * is set before any client is opened and cleared after the last one is closed. */
struct zkl__clock_hook {
	int64_t (*now)(void *arg);
	bool (*wait)(void *arg, pthread_mutex_t *mu, int64_t deadline_ms);
	void *arg;
};
extern const struct zkl__clock_hook *zkl__clock_hook;

/* Milliseconds on CLOCK_MONOTONIC. Read on every request sent and every turn of the
 * loop, so it is inline: a read of the clock, not a call. */
static inline int64_t zkl__now_ms(void)
{
	if (zkl__clock_hook)
		return zkl__clock_hook->now(zkl__clock_hook->arg);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* cannot fail on Linux with a valid pointer */
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline: INT64_MAX for "forever". Callers reject negative values other than
 * ZKL_WAIT_FOREVER before they get here; any negative value still means "no limit"
 * rather than "already past". */
static inline int64_t zkl__deadline(int timeout_ms)
{
	return timeout_ms < 0 ? INT64_MAX : zkl__now_ms() + timeout_ms;
}

/* A CLOCK_MONOTONIC timespec for pthread_cond_timedwait (conds are made with
 * zkl__cond_init, which sets that clock). */
static inline struct timespec zkl__ms_to_timespec(int64_t ms)
{
	if (ms < 0)
		ms = 0;
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
	                      .tv_nsec = (long)(ms % 1000) * 1000000L};
	return ts;
}

/* Waits on cv until signalled or the monotonic deadline (INT64_MAX: no limit).
 * Returns true if the deadline passed. Every sleep of the loop and of a waiting caller
 * comes here, so it is inline too. */
static inline bool zkl__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                                        int64_t deadline_ms)
{
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
	const struct timespec ts = zkl__ms_to_timespec(deadline_ms);
	return pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT;
}

#endif
