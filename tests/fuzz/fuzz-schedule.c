/* zklock's cron schedules (tools/zklock/schedule.c): the expression and the time zone
 * file, both from outside. The input is an expression, a '\n', and, if anything follows,
 * the bytes of a TZif file for its zone (else UTC).
 *
 * What must hold, besides no crash, leak, hang or undefined behaviour: a refusal has a
 * message; a schedule's latest time at or before t is at or before t, its next after t
 * after it, both within [0, SCHEDULE_TIME_MAX]; a zone file refused leaves the zone UTC.
 * In UTC, moreover: the next time is its own latest, and the times in (t, t + 2 days]
 * are those that schedule_next() steps through, on whole minutes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "fuzz.h"

static const int64_t instants[] = {0, 59, 951782400 /* 2000-02-29 */,
                                   1711846800 /* a DST change */, 4102444799,
                                   SCHEDULE_TIME_MAX - 86400, SCHEDULE_TIME_MAX};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t elen = nl ? (size_t)(nl - data) : size;
	if (elen > 4096)
		return 0;
	char expr[4097];
	memcpy(expr, data, elen);
	expr[elen] = 0;
	if (memchr(expr, 0, elen))
		return 0; /* an argument holds no NUL */
	struct schedule s;
	char err[256] = "";
	if (schedule_parse(&s, expr, err, sizeof err) != 0) {
		CHECK(err[0] != 0 && memchr(err, 0, sizeof err));
		return 0;
	}
	if (nl && (size_t)(nl + 1 - data) < size) {
		err[0] = 0;
		if (schedule_set_zone_tzif(&s, nl + 1, size - (size_t)(nl + 1 - data), err,
		                           sizeof err) != 0) {
			CHECK(err[0] != 0);
			CHECK(s.zone == NULL);
		}
	}
	for (size_t i = 0; i < sizeof instants / sizeof instants[0]; i++) {
		int64_t t = instants[i], p, n;
		if (schedule_prev(&s, t, &p))
			CHECK(p <= t && p >= 0);
		if (!schedule_next(&s, t, &n))
			continue;
		CHECK(n > t && n <= SCHEDULE_TIME_MAX);
		if (s.zone || n > SCHEDULE_TIME_MAX - 3 * 86400)
			continue;
		CHECK(n % 60 == 0);
		CHECK(schedule_prev(&s, n, &p) && p == n);
		int64_t out[64];
		int64_t count = schedule_slots(&s, t, t + 2 * 86400, out, 64);
		CHECK(count >= 0 && count <= 2 * 1440);
		CHECK((count == 0) == (n > t + 2 * 86400));
		int64_t step = t;
		for (int64_t k = 0; k < count && k < 64; k++) {
			CHECK(schedule_next(&s, step, &step) && step == out[k]);
		}
		if (count <= 64)
			CHECK(!schedule_next(&s, step, &step) || step > t + 2 * 86400);
	}
	schedule_free(&s);
	return 0;
}
