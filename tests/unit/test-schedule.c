/* zklock's cron schedules (tools/zklock/schedule.c): the parser and its messages, the
 * schedule times before and after an instant and between two, in UTC, fixed offsets and
 * zones of the tz database across their daylight saving changes; no server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "schedule.h"

/* "2024-05-01T12:00" (UTC) in seconds. */
static int64_t at(const char *iso)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	int n = sscanf(iso, "%d-%d-%dT%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	               &tm.tm_hour, &tm.tm_min);
	assert_int_equal(n, 5);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

/* Parses expr into s, freeing what s held before (each test's s starts zeroed). */
static void parse_ok(struct schedule *s, const char *expr)
{
	char err[256] = "";
	schedule_free(s);
	if (schedule_parse(s, expr, err, sizeof err) != 0)
		fail_msg("\"%s\" does not parse: %s", expr, err);
}

static void zone_ok(struct schedule *s, const char *zone)
{
	char err[256] = "";
	if (schedule_set_zone(s, zone, err, sizeof err) != 0)
		fail_msg("zone %s: %s", zone, err);
}

/* Parses expr, which must fail with a message containing each of the words. */
static void parse_bad(const char *expr, ...)
{
	struct schedule s = {0};
	char err[256] = "";
	if (schedule_parse(&s, expr, err, sizeof err) == 0)
		fail_msg("\"%s\" parses", expr);
	va_list ap;
	va_start(ap, expr);
	for (const char *w; (w = va_arg(ap, const char *));) {
		if (!strstr(err, w))
			fail_msg("\"%s\": the message \"%s\" does not say \"%s\"", expr, err, w);
	}
	va_end(ap);
}

static int64_t prev(const struct schedule *s, const char *iso)
{
	int64_t slot = -1;
	assert_true(schedule_prev(s, at(iso), &slot));
	return slot;
}

static int64_t next(const struct schedule *s, const char *iso)
{
	int64_t slot = -1;
	assert_true(schedule_next(s, at(iso), &slot));
	return slot;
}

static void test_fields(void **state)
{
	(void)state;
	struct schedule s = {0};
	parse_ok(&s, "*/15 * * * *");
	assert_int_equal(s.minutes, (1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45));
	assert_int_equal(s.hours, 0xffffffu);
	assert_true(s.real_time && s.mday_star && s.wday_star);
	parse_ok(&s, "  0 3,15  1-10/3 jan-MAR,Dec MON-FRI ");
	assert_int_equal(s.minutes, 1);
	assert_int_equal(s.hours, (1u << 3) | (1u << 15));
	assert_int_equal(s.mdays, (1u << 1) | (1u << 4) | (1u << 7) | (1u << 10));
	assert_int_equal(s.months, (1u << 1) | (1u << 2) | (1u << 3) | (1u << 12));
	assert_int_equal(s.wdays, 0x3e);
	assert_false(s.real_time || s.mday_star || s.wday_star);
	/* Sunday is 0 and 7; a range may end at SUN; "a/n" runs to the field's end. */
	parse_ok(&s, "0 0 * * 7");
	assert_int_equal(s.wdays, 1);
	parse_ok(&s, "0 0 * * FRI-SUN");
	assert_int_equal(s.wdays, (1u << 5) | (1u << 6) | 1u);
	parse_ok(&s, "50/5 22/1 * * *");
	assert_int_equal(s.minutes, (1ull << 50) | (1ull << 55));
	assert_int_equal(s.hours, (1u << 22) | (1u << 23));
	parse_ok(&s, "@daily");
	assert_int_equal(s.minutes, 1);
	assert_int_equal(s.hours, 1);
	parse_ok(&s, "@WEEKLY");
	assert_int_equal(s.wdays, 1);
}

static void test_errors(void **state)
{
	(void)state;
	parse_bad("", "5 fields", "not 0", NULL);
	parse_bad("* * * *", "5 fields", "not 4", NULL);
	parse_bad("* * * * * *", "not 6", NULL);
	parse_bad("61 * * * *", "minute field \"61\"", "61 is out of range 0-59", NULL);
	parse_bad("* 24 * * *", "hour field \"24\"", "0-23", NULL);
	parse_bad("* * 0 * *", "day-of-month field \"0\"", "1-31", NULL);
	parse_bad("* * * 13 *", "month field \"13\"", NULL);
	parse_bad("* * * * 8", "day-of-week field \"8\"", "0-7", NULL);
	parse_bad("* * * FOO *", "month field \"FOO\"", "unknown name", NULL);
	parse_bad("* * * * MONDAY", "day-of-week field", "unknown name", NULL);
	parse_bad("MON * * * *", "minute field", "only numbers", NULL);
	parse_bad("*/0 * * * *", "minute field \"*/0\"", "step", NULL);
	parse_bad("*/ * * * *", "minute field", "step must be a number", NULL);
	parse_bad("30-10 * * * *", "minute field", "30-10 runs backwards", NULL);
	parse_bad("1,,2 * * * *", "minute field \"1,,2\"", NULL);
	parse_bad("1, * * * *", "minute field", "ends with ','", NULL);
	parse_bad("1-2-3 * * * *", "minute field", "unexpected '-'", NULL);
	parse_bad("99999999999999999999 * * * *", "minute field", "out of range", NULL);
	parse_bad("@reboot", "unknown schedule", NULL);
	/* A day that never comes: refused, not searched for forever. */
	parse_bad("0 0 30 2 *", "day-of-month field \"30\"", "never runs", NULL);
	parse_bad("0 0 31 4,6,9,11 *", "day-of-month field \"31\"", NULL);
	/* Not refused: February 29th comes, and with the day-of-week restricted too, either
	 * day matches (Vixie cron's rule). */
	struct schedule s = {0};
	parse_ok(&s, "0 0 29 2 *");
	parse_ok(&s, "0 0 30 2 MON");
	char err[256];
	assert_int_equal(schedule_set_zone(&s, "Nowhere/Zone", err, sizeof err), -1);
	assert_non_null(strstr(err, "no such zone"));
	assert_int_equal(schedule_set_zone(&s, "../../etc/passwd", err, sizeof err), -1);
	assert_non_null(strstr(err, "not a zone name"));
	assert_int_equal(schedule_set_zone(&s, "+25:00", err, sizeof err), -1);
	assert_non_null(strstr(err, "+HH:MM"));
	assert_int_equal(schedule_set_zone(&s, "", err, sizeof err), -1);
	const unsigned char junk[] = "TZif2 this is not one";
	assert_int_equal(schedule_set_zone_tzif(&s, junk, sizeof junk, err, sizeof err), -1);
	assert_null(s.zone);
}

static void test_utc(void **state)
{
	(void)state;
	struct schedule s = {0};
	parse_ok(&s, "0 3,15 * * *");
	assert_int_equal(prev(&s, "2024-05-01T12:00"), at("2024-05-01T03:00"));
	assert_int_equal(next(&s, "2024-05-01T12:00"), at("2024-05-01T15:00"));
	/* A slot is its own latest; the next is after it. */
	assert_int_equal(prev(&s, "2024-05-01T15:00"), at("2024-05-01T15:00"));
	assert_int_equal(next(&s, "2024-05-01T15:00"), at("2024-05-02T03:00"));
	assert_int_equal(prev(&s, "2024-05-01T02:59"), at("2024-04-30T15:00"));
	/* Vixie's rule: both day fields restricted, either matches (Friday the 5th comes
	 * before the 13th); one of them starting with '*', both must. */
	parse_ok(&s, "0 0 13 * FRI");
	assert_int_equal(next(&s, "2024-01-01T00:00"), at("2024-01-05T00:00"));
	parse_ok(&s, "0 0 */2 * MON"); /* odd days that are Mondays */
	assert_int_equal(next(&s, "2024-01-02T00:00"), at("2024-01-15T00:00"));
	parse_ok(&s, "0 0 13 * *");
	assert_int_equal(next(&s, "2024-01-01T00:00"), at("2024-01-13T00:00"));
	/* February 29th: eight years apart across 2100, which is no leap year. */
	parse_ok(&s, "0 0 29 2 *");
	assert_int_equal(next(&s, "2097-01-01T00:00"), at("2104-02-29T00:00"));
	assert_int_equal(prev(&s, "2103-06-01T00:00"), at("2096-02-29T00:00"));
	/* A Sunday February 29th: 28 years apart, still found. */
	parse_ok(&s, "0 0 29 2 */7");
	assert_int_equal(next(&s, "2004-03-01T00:00"), at("2032-02-29T00:00"));
	/* The bounds: nothing before the epoch, nothing after 9999. */
	int64_t slot;
	parse_ok(&s, "0 0 2 1 *");
	assert_false(schedule_prev(&s, 0, &slot));
	assert_false(schedule_prev(&s, -1, &slot));
	assert_false(schedule_next(&s, SCHEDULE_TIME_MAX, &slot));
	assert_true(schedule_next(&s, 0, &slot));
	assert_int_equal(slot, at("1970-01-02T00:00"));
	parse_ok(&s, "0 0 1 1 *");
	assert_true(schedule_prev(&s, 0, &slot));
	assert_int_equal(slot, 0);
}

static void test_slots(void **state)
{
	(void)state;
	struct schedule s = {0};
	int64_t out[8];
	parse_ok(&s, "*/15 * * * *");
	/* (A, B]: A excluded, B included. */
	assert_int_equal(schedule_slots(&s, at("2024-05-01T00:00"), at("2024-05-01T01:00"), out, 8),
	                 4);
	assert_int_equal(out[0], at("2024-05-01T00:15"));
	assert_int_equal(out[3], at("2024-05-01T01:00"));
	assert_int_equal(schedule_slots(&s, at("2024-05-01T00:00"), at("2024-05-01T00:00"), out, 8),
	                 0);
	assert_int_equal(schedule_slots(&s, at("2024-05-01T01:00"), at("2024-05-01T00:00"), out, 8),
	                 0);
	/* More than max: counted all the same. */
	parse_ok(&s, "* * * * *");
	assert_int_equal(schedule_slots(&s, at("2024-05-01T00:00"), at("2024-05-02T00:00"), out, 8),
	                 1440);
	assert_int_equal(out[7], at("2024-05-01T00:08"));
	assert_int_equal(schedule_slots(&s, at("2024-05-01T00:00"), at("2024-05-01T00:10"), NULL, 0),
	                 10);
	/* Too long a span, and out of range. */
	assert_int_equal(schedule_slots(&s, at("2000-01-01T00:00"), at("2024-01-01T00:00"), NULL, 0),
	                 -1);
	assert_int_equal(schedule_slots(&s, -5, 60, NULL, 0), -1);
	/* Missed nights: (the last run, now]. */
	parse_ok(&s, "0 3 * * *");
	assert_int_equal(schedule_slots(&s, at("2024-05-01T03:00"), at("2024-05-04T02:00"), out, 8),
	                 2);
	assert_int_equal(out[1], at("2024-05-03T03:00"));
}

static void test_berlin(void **state)
{
	(void)state;
	struct schedule s = {0};
	int64_t out[8];
	/* Fixed wall time. 2024-03-31: 02:00 CET became 03:00 CEST at 01:00Z, 02:30 never
	 * came: the slot is the change itself. 2024-10-27: 03:00 CEST became 02:00 CET at
	 * 01:00Z, 02:30 came twice: the first one only. */
	parse_ok(&s, "30 2 * * *");
	zone_ok(&s, "Europe/Berlin");
	assert_int_equal(schedule_offset(&s, at("2024-01-15T00:00")), 3600);
	assert_int_equal(schedule_offset(&s, at("2024-07-15T00:00")), 7200);
	assert_int_equal(next(&s, "2024-03-30T12:00"), at("2024-03-31T01:00"));
	assert_int_equal(next(&s, "2024-03-31T01:00"), at("2024-04-01T00:30"));
	assert_int_equal(prev(&s, "2024-03-31T12:00"), at("2024-03-31T01:00"));
	assert_int_equal(next(&s, "2024-10-26T12:00"), at("2024-10-27T00:30"));
	assert_int_equal(next(&s, "2024-10-27T00:30"), at("2024-10-28T01:30"));
	assert_int_equal(prev(&s, "2024-10-27T12:00"), at("2024-10-27T00:30"));
	/* Several wall times in the gap are one slot. */
	parse_ok(&s, "0,30 2 * * *");
	zone_ok(&s, "Europe/Berlin");
	assert_int_equal(schedule_slots(&s, at("2024-03-30T12:00"), at("2024-03-31T12:00"), out, 8),
	                 1);
	assert_int_equal(out[0], at("2024-03-31T01:00"));
	/* Real time (the hour field starts with '*'): every hour that passes, twice 02:30
	 * when the clocks go back, none missing when they go forward. */
	parse_ok(&s, "30 * * * *");
	zone_ok(&s, "Europe/Berlin");
	assert_int_equal(schedule_slots(&s, at("2024-10-26T22:00"), at("2024-10-27T03:00"), out, 8),
	                 5);
	assert_int_equal(out[2], at("2024-10-27T00:30"));
	assert_int_equal(out[3], at("2024-10-27T01:30"));
	assert_int_equal(schedule_slots(&s, at("2024-03-30T23:00"), at("2024-03-31T03:00"), out, 8),
	                 4);
	assert_int_equal(out[1], at("2024-03-31T00:30"));
	assert_int_equal(out[2], at("2024-03-31T01:30"));
	/* A minute field starting with '*' in the hour that does not exist: none. */
	parse_ok(&s, "*/30 2 * * *");
	zone_ok(&s, "Europe/Berlin");
	assert_int_equal(schedule_slots(&s, at("2024-03-30T12:00"), at("2024-03-31T12:00"), out, 8),
	                 0);
	/* After the file's last transition: its rule (last Sunday of March, 2040-03-25). */
	parse_ok(&s, "30 2 * * *");
	zone_ok(&s, "Europe/Berlin");
	assert_int_equal(next(&s, "2040-03-24T12:00"), at("2040-03-25T01:00"));
	assert_int_equal(schedule_offset(&s, at("2040-07-01T00:00")), 7200);
	assert_int_equal(schedule_offset(&s, at("2040-12-01T00:00")), 3600);
	schedule_free(&s);
}

static void test_southern_and_fixed(void **state)
{
	(void)state;
	struct schedule s = {0};
	int64_t out[8];
	/* Sydney: 2024-04-07 03:00 AEDT became 02:00 AEST at 2024-04-06T16:00Z. */
	parse_ok(&s, "30 2 * * *");
	zone_ok(&s, "Australia/Sydney");
	assert_int_equal(schedule_offset(&s, at("2024-01-15T00:00")), 39600);
	assert_int_equal(schedule_offset(&s, at("2024-07-15T00:00")), 36000);
	assert_int_equal(next(&s, "2024-04-06T12:00"), at("2024-04-06T15:30"));
	assert_int_equal(next(&s, "2024-04-06T15:30"), at("2024-04-07T16:30"));
	parse_ok(&s, "30 * * * *");
	zone_ok(&s, "Australia/Sydney");
	assert_int_equal(schedule_slots(&s, at("2024-04-06T15:00"), at("2024-04-06T17:00"), out, 8),
	                 2);
	assert_int_equal(out[1], at("2024-04-06T16:30"));
	/* Fixed offsets; UTC again. */
	parse_ok(&s, "0 9 * * *");
	zone_ok(&s, "+05:30");
	assert_int_equal(next(&s, "2024-06-01T00:00"), at("2024-06-01T03:30"));
	zone_ok(&s, "-08");
	assert_int_equal(next(&s, "2024-06-01T00:00"), at("2024-06-01T17:00"));
	zone_ok(&s, "UTC");
	assert_null(s.zone);
	assert_int_equal(next(&s, "2024-06-01T00:00"), at("2024-06-01T09:00"));
	schedule_free(&s);
}

/* A TZif file with no transitions, its rule alone: New York's, in the POSIX form. */
static void test_rule_only(void **state)
{
	(void)state;
	static const char footer[] = "\nEST5EDT,M3.2.0,M11.1.0\n";
	unsigned char f[200];
	size_t n = 0;
	for (int block = 0; block < 2; block++) {
		memcpy(f + n, "TZif2", 5);
		memset(f + n + 5, 0, 39);
		f[n + 20 + 4 * 4 + 3] = 1; /* typecnt */
		f[n + 20 + 5 * 4 + 3] = 4; /* charcnt */
		n += 44;
		const unsigned char type[6] = {0xff, 0xff, 0xb9, 0xb0, 0, 0}; /* -18000 */
		memcpy(f + n, type, 6);
		memcpy(f + n + 6, "EST", 4);
		n += 10;
	}
	memcpy(f + n, footer, sizeof footer - 1);
	n += sizeof footer - 1;
	struct schedule s = {0};
	parse_ok(&s, "0 12 * * *");
	char err[128];
	if (schedule_set_zone_tzif(&s, f, n, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_int_equal(schedule_offset(&s, at("2024-01-15T00:00")), -18000);
	assert_int_equal(schedule_offset(&s, at("2024-07-15T00:00")), -14400);
	/* 2024-03-10 02:00 EST became 03:00 EDT at 07:00Z. */
	assert_int_equal(schedule_offset(&s, at("2024-03-10T06:59")), -18000);
	assert_int_equal(schedule_offset(&s, at("2024-03-10T07:00")), -14400);
	assert_int_equal(next(&s, "2024-07-01T00:00"), at("2024-07-01T16:00"));
	/* A footer that does not parse, and a truncated file. */
	memcpy(f + n - 5, "Q,Q\n", 4);
	assert_int_equal(schedule_set_zone_tzif(&s, f, n - 1, err, sizeof err), -1);
	assert_int_equal(schedule_set_zone_tzif(&s, f, 50, err, sizeof err), -1);
	assert_non_null(strstr(err, "truncated"));
	schedule_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_utc),
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_berlin),
		cmocka_unit_test(test_southern_and_fixed),
		cmocka_unit_test(test_rule_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
