/* Cron schedules for zklock: the five fields of a crontab line (minute, hour,
 * day-of-month, month, day-of-week) in a time zone, and the schedule times around an
 * instant. Self-contained (no zklocks, no ZooKeeper): the unit tests and the fuzz target
 * build it alone.
 *
 * Fields: "*", a number, a range "a-b", a step "*" "/n", "a-b/n" or "a/n" (a to the
 * field's end), and lists of these "a,b-c,*" "/n"; months JAN-DEC and days SUN-SAT by
 * name (any case, in ranges too); day-of-week 0-7, where 0 and 7 are Sunday. The macros
 * @yearly (@annually), @monthly, @weekly, @daily (@midnight) and @hourly stand for their
 * five fields. Day-of-month and day-of-week: as Vixie cron, when both are restricted
 * (neither field starts with "*") a day matches either one; otherwise both.
 *
 * Time zones: UTC (the default), a fixed offset "+HH:MM" or "-HH[:MM]" (ahead of UTC:
 * "+", as ISO 8601), or a name of the tz database read from its TZif file under
 * /usr/share/zoneinfo (or $TZDIR), its POSIX rule string included for the times after
 * its last transition. No process-wide state (TZ, localtime) is read or changed: every
 * function is thread-safe, a schedule read-only once made.
 *
 * Times are seconds since the epoch. A schedule time is an instant, on a whole minute,
 * whose local wall time matches the fields. Where the clocks change (daylight saving
 * time), as Vixie cron: a schedule whose minute or hour field starts with "*" runs on
 * real time (each wall time that exists, once per occurrence); one with a fixed minute
 * and hour runs once per wall time: at its first occurrence when the clocks go back, and
 * at the moment of the change when they go forward past it. */
#ifndef ZKLOCK_SCHEDULE_H
#define ZKLOCK_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched_zone;

struct schedule {
	uint64_t minutes;     /* bit m: minute m, 0-59 */
	uint32_t hours;       /* bit h: 0-23 */
	uint32_t mdays;       /* bit d: 1-31 */
	uint16_t months;      /* bit m: 1-12 */
	uint8_t wdays;        /* bit d: 0-6, Sunday 0 */
	bool mday_star, wday_star; /* the field starts with "*" */
	bool real_time;       /* the minute or hour field starts with "*" */
	struct sched_zone *zone; /* NULL: UTC */
};

/* The longest span schedule_slots() counts in: about nine years, more than the longest
 * gap between two February 29ths (eight years, 2096 to 2104). */
#define SCHEDULE_SEARCH_DAYS 3300
/* The latest instant the functions take or give: 9999-12-31T23:59:59Z. */
#define SCHEDULE_TIME_MAX INT64_C(253402300799)

/* Parses expr (five fields, or a macro) into *s, with the zone UTC. Returns 0, or -1
 * with a message naming the bad field in err: a field out of range, an unknown name, a
 * step of 0, a range that runs backwards, the wrong number of fields, or a day that
 * never comes (day-of-month 30 or 31 in February alone). */
int schedule_parse(struct schedule *s, const char *expr, char *err, size_t errsz);
/* Sets s's zone to name ("UTC", "+05:30", "Europe/Berlin"...). Returns 0, or -1 with a
 * message in err (unknown zone, unreadable or malformed file). */
int schedule_set_zone(struct schedule *s, const char *name, char *err, size_t errsz);
/* The same from the bytes of a TZif file (the fuzz target, the tests). */
int schedule_set_zone_tzif(struct schedule *s, const unsigned char *data, size_t len,
                           char *err, size_t errsz);
/* Frees the zone; s may be parsed again. */
void schedule_free(struct schedule *s);

/* The latest schedule time at or before t into *slot. False if there is none at or
 * after the epoch, or t is outside [0, SCHEDULE_TIME_MAX]. The search is bounded: the
 * calendar repeats every 400 years, and schedule_parse() refuses a schedule that matches
 * no day in them. */
bool schedule_prev(const struct schedule *s, int64_t t, int64_t *slot);
/* The first schedule time after t into *slot; false if there is none up to
 * SCHEDULE_TIME_MAX, or t is outside [0, SCHEDULE_TIME_MAX]. */
bool schedule_next(const struct schedule *s, int64_t t, int64_t *slot);
/* The schedule times in (a, b], the earliest first: the first max of them into out (out
 * may be NULL with max 0). Returns how many there are in all, or -1 if b - a spans more
 * than SCHEDULE_SEARCH_DAYS days or either is outside [0, SCHEDULE_TIME_MAX]. */
int64_t schedule_slots(const struct schedule *s, int64_t a, int64_t b, int64_t *out,
                       size_t max);

/* The UTC offset of zone s at t, in seconds (the tests). */
int32_t schedule_offset(const struct schedule *s, int64_t t);

#endif
