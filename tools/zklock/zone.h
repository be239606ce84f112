/* What schedule.c and zone.c share: the calendar, the zones' offsets, the error text.
 * Private to tools/zklock's schedules. */
#ifndef ZKLOCK_ZONE_H
#define ZKLOCK_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	DAY = 86400,
	MAX_OFFSET = 26 * 3600, /* the largest |UTC offset| taken */
};

/* A date of the proleptic Gregorian calendar. */
struct civil {
	int64_t y;
	int m, d, wd; /* wd: 0 Sunday */
};

int64_t floor_div(int64_t a, int64_t b);
bool is_leap(int64_t y);
int month_days(int64_t y, int m);
/* Days since 1970-01-01 of y-m-d, and back. */
int64_t days_from_civil(int64_t y, int m, int d);
struct civil civil_from_days(int64_t z);

struct sched_zone;
/* The UTC offset of zone z (NULL: UTC) at t, in seconds east. */
int32_t zone_offset(const struct sched_zone *z, int64_t t);

/* text[0..len) as a message shows it: printable bytes, '?' for others, cut at 40 with
 * "..." (out: size bytes). */
void shown(char *out, size_t size, const char *text, size_t len);

/* Writes a message into err (errsz bytes; nothing if err is NULL). */
void set_err(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
