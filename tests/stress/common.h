/* Small helpers shared by the stress programs (worker, resource, check). Header-only:
 * each program is one file plus this. */
#ifndef ZKL_STRESS_COMMON_H
#define ZKL_STRESS_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CLOCK_MONOTONIC in nanoseconds: every process of a run is on one machine, so these
 * times compare across processes. */
static inline int64_t st_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void st_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline void st_sleep_us(int64_t us)
{
	if (us <= 0)
		return;
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A small, thread-local pseudo-random generator (xorshift64*): good enough to pick
 * paths and sleep times, and free of rand()'s shared state. */
static inline uint64_t st_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15u;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1du;
}

__attribute__((format(printf, 2, 3), noreturn))
static inline void st_die(const char *prog, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* Parses a non-negative decimal integer, or dies naming the option. */
static inline int64_t st_parse_int(const char *prog, const char *opt, const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		st_die(prog, "%s wants a non-negative integer, not '%s'", opt, s);
	return (int64_t)v;
}

/* Longest line of the resource protocol (paths are short in a stress run). */
#define ST_LINE_MAX 1024

#endif
