/* Monotonic time and deadlines. */
#ifndef ZKL_CLOCK_H
#define ZKL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t zkl_now_ms(void);

/* A deadline: INT64_MAX for "forever". */
int64_t zkl_deadline(int timeout_ms);

/* A CLOCK_MONOTONIC timespec for pthread_cond_timedwait (conds are made with
 * zkl_cond_init, which sets that clock). */
struct timespec zkl_ms_to_timespec(int64_t ms);

#include <pthread.h>
/* Initialises a condition variable that waits on CLOCK_MONOTONIC. */
int zkl_cond_init(pthread_cond_t *cv);
/* Waits on cv until signalled or the monotonic deadline (INT64_MAX: no limit).
 * Returns true if the deadline passed. */
bool zkl_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

#endif
