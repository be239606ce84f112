/* Cron schedules: the parser and the schedule times (schedule.h); the time zones are
 * zone.c's.
 *
 * The search. A schedule time is found by walking local calendar days (the wall clock's
 * days, numbered from 1970-01-01), each day whose date matches the day fields giving
 * its times: every hour and minute of the fields, a wall time, turned into the instants
 * at which the zone's clock shows it (none, one, or two where the clocks go back). The
 * walk is bounded: 400 Gregorian years (146,097 days) repeat the calendar exactly, so an
 * expression that matches no day in that many never will (the parser refuses it), and
 * no search goes further.
 *
 * The zones. An offset from UTC at an instant comes from the zone's transitions (a
 * binary search), before the first from its first type, after the last from its POSIX
 * rule string (the TZif footer, e.g. "CET-1CEST,M3.5.0,M10.5.0/3"), if it has one.
 * Offsets are bounded to +-26 h, which the search relies on: the instants of a wall
 * time lie within 26 h of it. */
#include "schedule.h"
#include "zone.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	CYCLE_DAYS = 146097,       /* 400 Gregorian years */
	PER_MINUTE = 4,            /* instants kept per wall time */
	DAY_SLOTS = 24 * 60 * PER_MINUTE,
};


void set_err(char *err, size_t errsz, const char *fmt, ...)
{
	if (!err || errsz == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

/* ---- the calendar ---- */

int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int month_days(int64_t y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d. Counted in years that start on March 1st, so that the
 * leap day is the last of its year: a 400-year era has 146097 days. */
int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t yy = m <= 2 ? y - 1 : y;
	int64_t era = floor_div(yy, 400);
	int64_t yoe = yy - era * 400;                  /* 0..399 */
	int mp = m <= 2 ? m + 9 : m - 3;               /* March 0 .. February 11 */
	int64_t doy = (153 * mp + 2) / 5 + d - 1;      /* day of the March year */
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * CYCLE_DAYS + doe - 719468;        /* 719468: 0000-03-01 to 1970-01-01 */
}

struct civil civil_from_days(int64_t z)
{
	struct civil c;
	int64_t s = z + 719468;
	int64_t era = floor_div(s, CYCLE_DAYS);
	int64_t doe = s - era * CYCLE_DAYS;                           /* 0..146096 */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* 0..399 */
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);       /* 0..365 */
	int64_t mp = (5 * doy + 2) / 153;                             /* 0..11 */
	c.d = (int)(doy - (153 * mp + 2) / 5 + 1);
	c.m = (int)(mp < 10 ? mp + 3 : mp - 9);
	c.y = yoe + era * 400 + (c.m <= 2);
	c.wd = (int)(((z % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
	return c;
}

/* ---- the fields ---- */

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

struct field {
	const char *name; /* for messages */
	int lo, hi;       /* the values; day-of-week takes 7 for Sunday too */
	const char *const *names; /* names[i] is lo + i, or NULL */
	int nnames;
};

static const struct field fields[5] = {
	{"minute", 0, 59, NULL, 0},
	{"hour", 0, 23, NULL, 0},
	{"day-of-month", 1, 31, NULL, 0},
	{"month", 1, 12, month_names, 12},
	{"day-of-week", 0, 7, day_names, 7},
};

/* A field's text for a message: at most 40 bytes, anything unprintable as '?'. */
void shown(char *out, size_t size, const char *text, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 4 < size; i++) {
		if (n >= 40) {
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		unsigned char ch = (unsigned char)text[i];
		out[n++] = isprint(ch) ? (char)ch : '?';
	}
	out[n] = 0;
}

/* One value at *p: a number or (in a field with names) a name. Advances *p. */
static int parse_value(const struct field *f, const char **p, const char *end, int *out,
                       char *why, size_t whysz)
{
	const char *s = *p;
	if (s < end && isdigit((unsigned char)*s)) {
		long v = 0;
		while (s < end && isdigit((unsigned char)*s)) {
			v = v * 10 + (*s - '0');
			if (v > 9999) {
				snprintf(why, whysz, "a number is out of range %d-%d", f->lo, f->hi);
				return -1;
			}
			s++;
		}
		if (v < f->lo || v > f->hi) {
			snprintf(why, whysz, "%ld is out of range %d-%d", v, f->lo, f->hi);
			return -1;
		}
		*out = (int)v;
		*p = s;
		return 0;
	}
	if (f->names && end - s >= 3 && isalpha((unsigned char)s[0])) {
		for (int i = 0; i < f->nnames; i++) {
			if (strncasecmp(s, f->names[i], 3) == 0 &&
			    (end - s == 3 || !isalpha((unsigned char)s[3]))) {
				*out = f->names == month_names ? 1 + i : i;
				*p = s + 3;
				return 0;
			}
		}
	}
	if (s < end && isalpha((unsigned char)*s)) {
		if (f->names)
			snprintf(why, whysz, "unknown name (%s)",
			         f->names == month_names ? "JAN-DEC" : "SUN-SAT");
		else
			snprintf(why, whysz, "names are not taken here, only numbers %d-%d",
			         f->lo, f->hi);
		return -1;
	}
	snprintf(why, whysz, "a number%s was expected", f->names ? " or a name" : "");
	return -1;
}

/* Parses field text[0..len) into *bits (bit v for value v); *star: it starts with '*'. */
static int parse_field(int which, const char *text, size_t len, uint64_t *bits, bool *star,
                       char *err, size_t errsz)
{
	const struct field *f = &fields[which];
	const char *p = text, *end = text + len;
	char why[96] = "";
	*bits = 0;
	*star = len > 0 && text[0] == '*';
	for (;;) {
		int a, b, step = 1;
		bool range = false;
		if (p < end && *p == '*') {
			a = f->lo;
			b = which == 4 ? 6 : f->hi;
			range = true;
			p++;
		} else {
			if (parse_value(f, &p, end, &a, why, sizeof why) < 0)
				goto bad;
			b = a;
			if (p < end && *p == '-') {
				p++;
				if (parse_value(f, &p, end, &b, why, sizeof why) < 0)
					goto bad;
				if (which == 4 && b == 0 && a > 0)
					b = 7; /* FRI-SUN */
				if (b < a) {
					snprintf(why, sizeof why, "the range %d-%d runs backwards", a, b);
					goto bad;
				}
				range = true;
			}
		}
		if (p < end && *p == '/') {
			p++;
			if (p >= end || !isdigit((unsigned char)*p)) {
				snprintf(why, sizeof why, "a step must be a number");
				goto bad;
			}
			long v = 0;
			while (p < end && isdigit((unsigned char)*p)) {
				v = v * 10 + (*p - '0');
				if (v > 9999)
					break;
				p++;
			}
			if (v < 1 || v > f->hi + 1) {
				snprintf(why, sizeof why, "the step is out of range 1-%d", f->hi + 1);
				goto bad;
			}
			step = (int)v;
			if (!range)
				b = which == 4 ? 6 : f->hi; /* "a/n": from a to the end */
		}
		for (int v = a; v <= b; v += step)
			*bits |= UINT64_C(1) << (which == 4 && v == 7 ? 0 : v);
		if (p == end)
			break;
		if (*p != ',') {
			snprintf(why, sizeof why, "unexpected '%c'",
			         isprint((unsigned char)*p) ? *p : '?');
			goto bad;
		}
		p++;
		if (p == end) {
			snprintf(why, sizeof why, "a list ends with ','");
			goto bad;
		}
	}
	return 0;
bad:;
	char t[64];
	shown(t, sizeof t, text, len);
	set_err(err, errsz, "%s field \"%s\": %s", f->name, t, why);
	return -1;
}

static const struct {
	const char *name, *fields;
} macros[] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

static bool day_matches(const struct schedule *s, const struct civil *c)
{
	if (!(s->months & (1u << c->m)))
		return false;
	bool md = (s->mdays >> c->d) & 1u, wd = (s->wdays >> c->wd) & 1u;
	return (s->mday_star || s->wday_star) ? (md && wd) : (md || wd);
}

int schedule_parse(struct schedule *s, const char *expr, char *err, size_t errsz)
{
	memset(s, 0, sizeof *s);
	if (!expr) {
		set_err(err, errsz, "no schedule");
		return -1;
	}
	while (isspace((unsigned char)*expr))
		expr++;
	size_t elen = strlen(expr);
	while (elen > 0 && isspace((unsigned char)expr[elen - 1]))
		elen--;
	if (elen > 0 && expr[0] == '@') {
		for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++) {
			if (strlen(macros[i].name) == elen && strncasecmp(expr, macros[i].name, elen) == 0)
				return schedule_parse(s, macros[i].fields, err, errsz);
		}
		char t[64];
		shown(t, sizeof t, expr, elen);
		set_err(err, errsz, "unknown schedule \"%s\" (@yearly, @annually, @monthly, "
		        "@weekly, @daily, @midnight, @hourly; @reboot has no time)", t);
		return -1;
	}
	const char *start[6];
	size_t len[6];
	int n = 0;
	for (const char *p = expr, *end = expr + elen; p < end;) {
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p == end)
			break;
		const char *q = p;
		while (q < end && !isspace((unsigned char)*q))
			q++;
		if (n < 6) {
			start[n] = p;
			len[n] = (size_t)(q - p);
		}
		n++;
		p = q;
	}
	if (n != 5) {
		set_err(err, errsz, "a schedule has 5 fields (minute hour day-of-month month "
		        "day-of-week), not %d", n);
		return -1;
	}
	uint64_t bits[5];
	bool star[5];
	for (int i = 0; i < 5; i++) {
		if (parse_field(i, start[i], len[i], &bits[i], &star[i], err, errsz) < 0)
			return -1;
	}
	s->minutes = bits[0];
	s->hours = (uint32_t)bits[1];
	s->mdays = (uint32_t)bits[2];
	s->months = (uint16_t)bits[3];
	s->wdays = (uint8_t)bits[4];
	s->mday_star = star[2];
	s->wday_star = star[4];
	s->real_time = star[0] || star[1];
	/* A day that never comes: the calendar repeats every 400 years. */
	bool some = false;
	for (int64_t z = 0; z < CYCLE_DAYS && !some; z++) {
		struct civil c = civil_from_days(z);
		some = day_matches(s, &c);
	}
	if (!some) {
		char t[64];
		shown(t, sizeof t, start[2], len[2]);
		set_err(err, errsz, "day-of-month field \"%s\": no such day in the months "
		        "given (the schedule never runs)", t);
		return -1;
	}
	return 0;
}

/* ---- the schedule times ---- */

/* The first instant whose wall time is past c (c itself has none: a gap). */
static int64_t gap_end(const struct sched_zone *z, int64_t c)
{
	int64_t lo = c - MAX_OFFSET, hi = c + MAX_OFFSET; /* wall(lo) <= c < wall(hi) */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		if (mid + zone_offset(z, mid) > c)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/* The instants whose wall time is c, ascending, into out (at most PER_MINUTE). */
static int instants(const struct sched_zone *z, int64_t c, int64_t *out)
{
	if (!z) {
		out[0] = c;
		return 1;
	}
	int32_t cand[PER_MINUTE];
	cand[0] = zone_offset(z, c - MAX_OFFSET);
	cand[1] = zone_offset(z, c + MAX_OFFSET);
	cand[2] = zone_offset(z, c - cand[0]);
	cand[3] = zone_offset(z, c - cand[1]);
	int n = 0;
	for (int i = 0; i < PER_MINUTE; i++) {
		int64_t u = c - cand[i];
		if (zone_offset(z, u) != cand[i])
			continue;
		bool dup = false;
		for (int k = 0; k < n; k++)
			dup = dup || out[k] == u;
		if (dup)
			continue;
		int k = n++;
		for (; k > 0 && out[k - 1] > u; k--)
			out[k] = out[k - 1];
		out[k] = u;
	}
	return n;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The schedule times of local day z (days since 1970-01-01 on the wall clock),
 * ascending, into out (DAY_SLOTS). */
static size_t day_slots(const struct schedule *s, int64_t z, int64_t *out)
{
	struct civil c = civil_from_days(z);
	if (!day_matches(s, &c))
		return 0;
	size_t n = 0;
	bool sorted = true;
	for (int h = 0; h < 24; h++) {
		if (!((s->hours >> h) & 1u))
			continue;
		for (int m = 0; m < 60; m++) {
			if (!((s->minutes >> m) & 1u))
				continue;
			int64_t wall = z * DAY + h * 3600 + m * 60, u[PER_MINUTE];
			int k = instants(s->zone, wall, u);
			if (!s->real_time) {
				/* Once per wall time: its first occurrence, or the gap's end. */
				if (k == 0)
					u[0] = gap_end(s->zone, wall);
				k = 1;
			}
			for (int i = 0; i < k; i++) {
				if (n > 0 && u[i] <= out[n - 1])
					sorted = sorted && u[i] == out[n - 1];
				out[n++] = u[i];
			}
		}
	}
	if (!sorted)
		qsort(out, n, sizeof *out, cmp_i64);
	size_t w = 0; /* without repeats (a gap's wall times share its end) */
	for (size_t i = 0; i < n; i++) {
		if (w == 0 || out[i] != out[w - 1])
			out[w++] = out[i];
	}
	return w;
}

static int64_t local_day(const struct schedule *s, int64_t t)
{
	return floor_div(t + zone_offset(s->zone, t), DAY);
}

/* Days around a found slot still searched: a day's instants lie within 26 h of it, so
 * one three days off cannot beat it. */
enum { MARGIN = 3 };

bool schedule_prev(const struct schedule *s, int64_t t, int64_t *slot)
{
	if (t < 0 || t > SCHEDULE_TIME_MAX)
		return false;
	int64_t buf[DAY_SLOTS], top = local_day(s, t) + MARGIN, stop = top - CYCLE_DAYS;
	if (stop < -MARGIN)
		stop = -MARGIN; /* nothing before the epoch */
	bool found = false;
	int64_t best = 0;
	for (int64_t z = top; z >= stop; z--) {
		size_t n = day_slots(s, z, buf);
		for (size_t i = n; i-- > 0;) {
			if (buf[i] <= t && buf[i] >= 0) {
				if (!found || buf[i] > best)
					best = buf[i];
				if (!found)
					stop = z - MARGIN;
				found = true;
				break;
			}
		}
	}
	if (found)
		*slot = best;
	return found;
}

bool schedule_next(const struct schedule *s, int64_t t, int64_t *slot)
{
	if (t < 0 || t > SCHEDULE_TIME_MAX)
		return false;
	int64_t buf[DAY_SLOTS], first = local_day(s, t) - MARGIN, stop = first + CYCLE_DAYS;
	if (stop > SCHEDULE_TIME_MAX / DAY + MARGIN)
		stop = SCHEDULE_TIME_MAX / DAY + MARGIN; /* nothing after 9999 */
	bool found = false;
	int64_t best = 0;
	for (int64_t z = first; z <= stop; z++) {
		size_t n = day_slots(s, z, buf);
		for (size_t i = 0; i < n; i++) {
			if (buf[i] > t && buf[i] <= SCHEDULE_TIME_MAX) {
				if (!found || buf[i] < best)
					best = buf[i];
				if (!found)
					stop = z + MARGIN;
				found = true;
				break;
			}
		}
	}
	if (found)
		*slot = best;
	return found;
}

int64_t schedule_slots(const struct schedule *s, int64_t a, int64_t b, int64_t *out,
                       size_t max)
{
	if (a < 0 || b < 0 || a > SCHEDULE_TIME_MAX || b > SCHEDULE_TIME_MAX)
		return -1;
	if (b <= a)
		return 0;
	if ((b - a) / DAY > SCHEDULE_SEARCH_DAYS)
		return -1;
	int64_t buf[DAY_SLOTS], count = 0, last = a;
	for (int64_t z = local_day(s, a) - MARGIN, end = local_day(s, b) + MARGIN; z <= end; z++) {
		size_t n = day_slots(s, z, buf);
		for (size_t i = 0; i < n; i++) {
			if (buf[i] <= last || buf[i] > b)
				continue;
			if ((size_t)count < max)
				out[count] = buf[i];
			count++;
			last = buf[i];
		}
	}
	return count;
}
