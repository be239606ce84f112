/* The decision of a scheduled run in its slot (tools/zklock/slot.c): which slot a run
 * belongs to, by its arrival on the server's clock, whether the record holds it done,
 * which slots were missed and which a catch-up run stands for, the start deadline. No
 * server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "slot.h"

/* "2024-05-01T03:00:07" (UTC) in ms. */
static int64_t ms(const char *iso)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	assert_int_equal(sscanf(iso, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	                        &tm.tm_hour, &tm.tm_min, &tm.tm_sec), 6);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000;
}

static struct schedule nightly(void)
{
	struct schedule s;
	char err[128];
	assert_int_equal(schedule_parse(&s, "0 3 * * *", err, sizeof err), 0);
	return s;
}

/* The slot is the latest schedule time at or before the arrival: a host whose cron
 * fires early (its clock runs ahead) arrives in the slot before, one that comes after
 * the next schedule time belongs to the next slot. */
static void test_slot_of_arrival(void **state)
{
	(void)state;
	struct schedule s = nightly();
	struct slot_plan p;
	slot_plan(&s, ms("2024-05-01T03:00:07") + 123, 0, CATCH_UP_SKIP, 0, &p);
	assert_int_equal(p.action, SLOT_RUN);
	assert_int_equal(p.slot_ms, ms("2024-05-01T03:00:00"));
	assert_int_equal(p.next_ms, ms("2024-05-02T03:00:00"));
	assert_int_equal(p.missed, 0);
	assert_int_equal(p.covers_from_ms, p.slot_ms);
	/* 2 ms early, by the server's clock: yesterday's slot, which the record holds. */
	slot_plan(&s, ms("2024-05-01T02:59:59") + 998, ms("2024-04-30T03:00:00"), CATCH_UP_SKIP,
	          0, &p);
	assert_int_equal(p.action, SLOT_DONE);
	assert_int_equal(p.slot_ms, ms("2024-04-30T03:00:00"));
	/* Minutes late, the slot done by another host: done. */
	slot_plan(&s, ms("2024-05-01T03:04:00"), ms("2024-05-01T03:00:00"), CATCH_UP_SKIP, 0,
	          &p);
	assert_int_equal(p.action, SLOT_DONE);
	/* Later than the next schedule time: the next slot. */
	slot_plan(&s, ms("2024-05-02T03:00:00"), ms("2024-05-01T03:00:00"), CATCH_UP_SKIP, 0,
	          &p);
	assert_int_equal(p.action, SLOT_RUN);
	assert_int_equal(p.slot_ms, ms("2024-05-02T03:00:00"));
	assert_int_equal(p.missed, 0);
}

/* Every host down for two nights: two slots missed. skip runs for tonight alone; once
 * stands for the missed nights too. */
static void test_missed_and_catch_up(void **state)
{
	(void)state;
	struct schedule s = nightly();
	struct slot_plan p;
	int64_t last = ms("2024-05-01T03:00:00"), arrival = ms("2024-05-04T03:00:05");
	slot_plan(&s, arrival, last, CATCH_UP_SKIP, 0, &p);
	assert_int_equal(p.action, SLOT_RUN);
	assert_int_equal(p.slot_ms, ms("2024-05-04T03:00:00"));
	assert_int_equal(p.missed, 2);
	assert_false(p.missed_more);
	assert_int_equal(p.first_missed_ms, ms("2024-05-02T03:00:00"));
	assert_int_equal(p.covers_from_ms, p.slot_ms);
	slot_plan(&s, arrival, last, CATCH_UP_ONCE, 0, &p);
	assert_int_equal(p.action, SLOT_RUN);
	assert_int_equal(p.missed, 2);
	assert_int_equal(p.covers_from_ms, ms("2024-05-02T03:00:00"));
	/* Between two slots, the hosts up again at noon: the run is for the morning's slot,
	 * and one slot before it was missed. */
	slot_plan(&s, ms("2024-05-03T12:00:00"), last, CATCH_UP_ONCE, 0, &p);
	assert_int_equal(p.slot_ms, ms("2024-05-03T03:00:00"));
	assert_int_equal(p.missed, 1);
	assert_int_equal(p.covers_from_ms, ms("2024-05-02T03:00:00"));
}

/* The start deadline: too late for this slot, which is missed as well; done first. */
static void test_start_deadline(void **state)
{
	(void)state;
	struct schedule s = nightly();
	struct slot_plan p;
	int64_t last = ms("2024-05-01T03:00:00");
	slot_plan(&s, ms("2024-05-02T03:09:59"), last, CATCH_UP_ONCE, 600000, &p);
	assert_int_equal(p.action, SLOT_RUN);
	slot_plan(&s, ms("2024-05-02T03:10:00"), last, CATCH_UP_ONCE, 600000, &p);
	assert_int_equal(p.action, SLOT_LATE);
	assert_int_equal(p.slot_ms, ms("2024-05-02T03:00:00"));
	assert_int_equal(p.missed, 0);
	slot_plan(&s, ms("2024-05-04T04:00:00"), last, CATCH_UP_ONCE, 600000, &p);
	assert_int_equal(p.action, SLOT_LATE);
	assert_int_equal(p.missed, 2);
	slot_plan(&s, ms("2024-05-01T04:00:00"), last, CATCH_UP_ONCE, 600000, &p);
	assert_int_equal(p.action, SLOT_DONE);
}

/* A record older than the count reaches, a schedule time not yet come, the names. */
static void test_bounds_and_names(void **state)
{
	(void)state;
	struct schedule s;
	char err[128];
	struct slot_plan p;
	assert_int_equal(schedule_parse(&s, "*/30 * * * *", err, sizeof err), 0);
	int64_t last = ms("2010-01-01T00:00:00"), arrival = ms("2024-05-01T00:10:00");
	slot_plan(&s, arrival, last, CATCH_UP_ONCE, 0, &p);
	assert_int_equal(p.action, SLOT_RUN);
	assert_true(p.missed_more);
	assert_int_equal(p.missed, (int64_t)SCHEDULE_SEARCH_DAYS * 48 - 1);
	assert_int_equal(p.first_missed_ms, ms("2010-01-01T00:30:00"));
	assert_int_equal(p.covers_from_ms, p.first_missed_ms);
	assert_int_equal(schedule_parse(&s, "0 0 2 1 *", err, sizeof err), 0);
	slot_plan(&s, 1000, 0, CATCH_UP_SKIP, 0, &p);
	assert_int_equal(p.action, SLOT_NONE);
	slot_plan(&s, -5, 0, CATCH_UP_SKIP, 0, &p);
	assert_int_equal(p.action, SLOT_NONE);
	enum catch_up c = CATCH_UP_ONCE;
	assert_true(slot_parse_catch_up("skip", &c) && c == CATCH_UP_SKIP);
	assert_true(slot_parse_catch_up("once", &c) && c == CATCH_UP_ONCE);
	assert_false(slot_parse_catch_up("Once", &c) || slot_parse_catch_up("", &c));
	assert_string_equal(slot_catch_up_name(CATCH_UP_ONCE), "once");
	assert_string_equal(slot_action_name(SLOT_LATE), "late");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_of_arrival),
		cmocka_unit_test(test_missed_and_catch_up),
		cmocka_unit_test(test_start_deadline),
		cmocka_unit_test(test_bounds_and_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
