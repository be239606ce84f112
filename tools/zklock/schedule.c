/* Cron schedules: the parser, the time zones, the schedule times (schedule.h).
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
	DAY = 86400,
	MAX_OFFSET = 26 * 3600,    /* the largest |UTC offset| taken */
	CYCLE_DAYS = 146097,       /* 400 Gregorian years */
	PER_MINUTE = 4,            /* instants kept per wall time */
	DAY_SLOTS = 24 * 60 * PER_MINUTE,
	MAX_TRANSITIONS = 1 << 16,
	MAX_TYPES = 256,
	MAX_TZIF = 1 << 20,
};

/* A POSIX TZ rule's date: Jn (1-365, February 29 never counted), n (0-365), or
 * Mm.w.d (the d-th weekday of week w, 5 the last, of month m); time: seconds after local
 * midnight (may be negative or past 24 h). */
struct rule_date {
	char kind; /* 'J', 'N', 'M' */
	int n, m, w, d;
	int32_t time;
};

struct tz_rule {
	int32_t std_off, dst_off; /* UTC offsets, seconds east */
	bool has_dst;
	struct rule_date start, end;
};

struct sched_zone {
	size_t n;          /* transitions */
	int64_t *times;    /* ascending */
	int32_t *offs;     /* the offset from times[i] on */
	int32_t off0;      /* before the first (or always, with neither n nor a rule) */
	bool has_rule;     /* after the last: rule */
	struct tz_rule rule;
};

static void set_err(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errsz, const char *fmt, ...)
{
	if (!err || errsz == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
}

/* ---- the calendar ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d. Counted in years that start on March 1st, so that the
 * leap day is the last of its year: a 400-year era has 146097 days. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t yy = m <= 2 ? y - 1 : y;
	int64_t era = floor_div(yy, 400);
	int64_t yoe = yy - era * 400;                  /* 0..399 */
	int mp = m <= 2 ? m + 9 : m - 3;               /* March 0 .. February 11 */
	int64_t doy = (153 * mp + 2) / 5 + d - 1;      /* day of the March year */
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * CYCLE_DAYS + doe - 719468;        /* 719468: 0000-03-01 to 1970-01-01 */
}

struct civil {
	int64_t y;
	int m, d, wd; /* wd: 0 Sunday */
};

static struct civil civil_from_days(int64_t z)
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
static void shown(char *out, size_t size, const char *text, size_t len)
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

/* ---- time zones ---- */

void schedule_free(struct schedule *s)
{
	if (s->zone) {
		free(s->zone->times);
		free(s->zone->offs);
		free(s->zone);
		s->zone = NULL;
	}
}

/* The instant of date r in year y, whose local time is off seconds ahead of UTC. */
static int64_t rule_instant(const struct rule_date *r, int64_t y, int32_t off)
{
	int64_t day;
	if (r->kind == 'J') {
		day = days_from_civil(y, 1, 1) + r->n - 1 + (is_leap(y) && r->n >= 60);
	} else if (r->kind == 'N') {
		day = days_from_civil(y, 1, 1) + r->n;
	} else {
		int64_t first = days_from_civil(y, r->m, 1);
		int wd1 = civil_from_days(first).wd;
		int d = 1 + (r->d - wd1 + 7) % 7 + (r->w - 1) * 7;
		while (d > month_days(y, r->m))
			d -= 7;
		day = first + d - 1;
	}
	return day * DAY + r->time - off;
}

static int32_t rule_offset(const struct tz_rule *r, int64_t t)
{
	if (!r->has_dst)
		return r->std_off;
	int64_t y = civil_from_days(floor_div(t + r->std_off, DAY)).y;
	int64_t a = rule_instant(&r->start, y, r->std_off);
	int64_t b = rule_instant(&r->end, y, r->dst_off);
	bool dst = a < b ? (a <= t && t < b) : !(b <= t && t < a);
	return dst ? r->dst_off : r->std_off;
}

static int32_t zone_offset(const struct sched_zone *z, int64_t t)
{
	if (!z)
		return 0;
	if (z->n == 0)
		return z->has_rule ? rule_offset(&z->rule, t) : z->off0;
	if (t < z->times[0])
		return z->off0;
	if (t >= z->times[z->n - 1] && z->has_rule)
		return rule_offset(&z->rule, t);
	size_t lo = 0, hi = z->n; /* times[lo] <= t < times[hi] */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->times[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return z->offs[lo];
}

int32_t schedule_offset(const struct schedule *s, int64_t t)
{
	return zone_offset(s->zone, t);
}

/* [+-]hh[:mm[:ss]], hh at most maxh: seconds into *out. */
static bool parse_hms(const char **p, int maxh, bool sign_ok, int32_t *out)
{
	const char *s = *p;
	int sign = 1;
	if (sign_ok && (*s == '+' || *s == '-')) {
		sign = *s == '-' ? -1 : 1;
		s++;
	}
	int part[3] = {0, 0, 0};
	for (int i = 0; i < 3; i++) {
		if (i > 0) {
			if (*s != ':')
				break;
			s++;
		}
		if (!isdigit((unsigned char)*s))
			return false;
		int v = 0, digits = 0;
		while (isdigit((unsigned char)*s) && digits < 3) {
			v = v * 10 + (*s - '0');
			s++;
			digits++;
		}
		if (isdigit((unsigned char)*s) || (i > 0 && (digits != 2 || v > 59)))
			return false;
		part[i] = v;
	}
	if (part[0] > maxh)
		return false;
	*out = sign * (part[0] * 3600 + part[1] * 60 + part[2]);
	*p = s;
	return true;
}

static bool parse_tz_name(const char **p)
{
	const char *s = *p;
	if (*s == '<') {
		const char *e = strchr(s, '>');
		if (!e || e - s < 2)
			return false;
		*p = e + 1;
		return true;
	}
	while (isalpha((unsigned char)*s))
		s++;
	if (s - *p < 3)
		return false;
	*p = s;
	return true;
}

static bool parse_rule_date(const char **p, struct rule_date *r)
{
	const char *s = *p;
	memset(r, 0, sizeof *r);
	r->time = 2 * 3600;
	int *vals[3] = {&r->m, &r->w, &r->d};
	if (*s == 'M') {
		r->kind = 'M';
		s++;
		for (int i = 0; i < 3; i++) {
			if (i > 0 && *s++ != '.')
				return false;
			if (!isdigit((unsigned char)*s))
				return false;
			int v = 0;
			while (isdigit((unsigned char)*s) && v < 100)
				v = v * 10 + (*s++ - '0');
			*vals[i] = v;
		}
		if (r->m < 1 || r->m > 12 || r->w < 1 || r->w > 5 || r->d > 6)
			return false;
	} else {
		r->kind = 'N';
		if (*s == 'J') {
			r->kind = 'J';
			s++;
		}
		if (!isdigit((unsigned char)*s))
			return false;
		int v = 0;
		while (isdigit((unsigned char)*s) && v < 1000)
			v = v * 10 + (*s++ - '0');
		r->n = v;
		if (r->kind == 'J' ? (v < 1 || v > 365) : v > 365)
			return false;
	}
	if (*s == '/') {
		s++;
		if (!parse_hms(&s, 167, true, &r->time))
			return false;
	}
	*p = s;
	return true;
}

/* A POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3", "JST-9", "<+0330>-3:30"). */
static bool parse_posix_tz(const char *s, struct tz_rule *r)
{
	memset(r, 0, sizeof *r);
	int32_t off;
	if (!parse_tz_name(&s) || !parse_hms(&s, 24, true, &off))
		return false;
	r->std_off = -off;
	if (*s == 0)
		return true;
	if (!parse_tz_name(&s))
		return false;
	r->has_dst = true;
	r->dst_off = r->std_off + 3600;
	if (*s && *s != ',') {
		if (!parse_hms(&s, 24, true, &off))
			return false;
		r->dst_off = -off;
	}
	if (*s == 0) { /* no rule given: the United States' since 2007 */
		r->start = (struct rule_date){'M', 0, 3, 2, 0, 7200};
		r->end = (struct rule_date){'M', 0, 11, 1, 0, 7200};
		return true;
	}
	if (*s++ != ',' || !parse_rule_date(&s, &r->start) || *s++ != ',' ||
	    !parse_rule_date(&s, &r->end))
		return false;
	return *s == 0;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

/* Reads a TZif file (RFC 8536, versions 1 to 4) into z. */
static int tzif_parse(struct sched_zone *z, const unsigned char *d, size_t len, char *err,
                      size_t errsz)
{
	const char *bad = NULL;
	size_t pos = 0;
	int version = 1;
	for (int pass = 0; pass < 2; pass++) {
		if (len - pos < 44 || memcmp(d + pos, "TZif", 4) != 0) {
			bad = "not a TZif file";
			goto fail;
		}
		if (pass == 0)
			version = d[pos + 4] >= '2' ? 2 : 1;
		uint32_t cnt[6];
		for (int i = 0; i < 6; i++)
			cnt[i] = be32(d + pos + 20 + 4 * i);
		uint32_t isut = cnt[0], isstd = cnt[1], leap = cnt[2], timecnt = cnt[3],
		         typecnt = cnt[4], charcnt = cnt[5];
		pos += 44;
		size_t tsize = pass == 0 && version >= 2 ? 4 : (version >= 2 ? 8 : 4);
		if (timecnt > MAX_TRANSITIONS || typecnt == 0 || typecnt > MAX_TYPES ||
		    charcnt > 65536 || leap > 65536 || (isut && isut != typecnt) ||
		    (isstd && isstd != typecnt)) {
			bad = "counts out of range";
			goto fail;
		}
		size_t body = timecnt * tsize + timecnt + typecnt * 6 + charcnt +
		              leap * (tsize + 4) + isstd + isut;
		if (len - pos < body) {
			bad = "truncated";
			goto fail;
		}
		if (pass == 0 && version >= 2) {
			pos += body; /* the 32-bit block: the 64-bit one follows */
			continue;
		}
		if (leap > 0) {
			bad = "a zone with leap seconds (a \"right/\" zone) is not taken";
			goto fail;
		}
		const unsigned char *times = d + pos, *idx = times + timecnt * tsize,
		                    *types = idx + timecnt;
		int32_t offs[MAX_TYPES];
		for (uint32_t i = 0; i < typecnt; i++) {
			offs[i] = (int32_t)be32(types + 6 * i);
			if (offs[i] < -MAX_OFFSET || offs[i] > MAX_OFFSET) {
				bad = "an offset beyond 26 hours";
				goto fail;
			}
		}
		z->off0 = offs[0];
		z->n = timecnt;
		if (timecnt > 0) {
			z->times = malloc(timecnt * sizeof *z->times);
			z->offs = malloc(timecnt * sizeof *z->offs);
			if (!z->times || !z->offs) {
				bad = "out of memory";
				goto fail;
			}
		}
		for (uint32_t i = 0; i < timecnt; i++) {
			int64_t t = tsize == 8 ? be64(times + 8 * i) : (int32_t)be32(times + 4 * i);
			if (idx[i] >= typecnt || (i > 0 && t <= z->times[i - 1])) {
				bad = idx[i] >= typecnt ? "a transition to an unknown type"
				                        : "transitions out of order";
				goto fail;
			}
			z->times[i] = t;
			z->offs[i] = offs[idx[i]];
		}
		pos += body;
		break;
	}
	if (version >= 2) {
		/* The footer: "\n" TZ-string "\n" (empty: no rule). */
		if (len - pos < 2 || d[pos] != '\n') {
			bad = "no footer";
			goto fail;
		}
		const unsigned char *nl = memchr(d + pos + 1, '\n', len - pos - 1);
		if (!nl) {
			bad = "the footer has no end";
			goto fail;
		}
		size_t flen = (size_t)(nl - (d + pos + 1));
		if (flen > 0) {
			char footer[256];
			if (flen >= sizeof footer || memchr(d + pos + 1, 0, flen)) {
				bad = "a malformed footer";
				goto fail;
			}
			memcpy(footer, d + pos + 1, flen);
			footer[flen] = 0;
			if (!parse_posix_tz(footer, &z->rule) || z->rule.std_off < -MAX_OFFSET ||
			    z->rule.std_off > MAX_OFFSET || z->rule.dst_off < -MAX_OFFSET ||
			    z->rule.dst_off > MAX_OFFSET) {
				bad = "a footer rule that does not parse";
				goto fail;
			}
			z->has_rule = true;
		}
	}
	return 0;
fail:
	set_err(err, errsz, "%s", bad);
	return -1;
}

int schedule_set_zone_tzif(struct schedule *s, const unsigned char *data, size_t len,
                           char *err, size_t errsz)
{
	struct sched_zone *z = calloc(1, sizeof *z);
	if (!z) {
		set_err(err, errsz, "out of memory");
		return -1;
	}
	if (tzif_parse(z, data, len, err, errsz) < 0) {
		free(z->times);
		free(z->offs);
		free(z);
		return -1;
	}
	schedule_free(s);
	s->zone = z;
	return 0;
}

/* "+HH:MM", "-HH", "+HHMM": seconds east of UTC. */
static bool parse_fixed(const char *name, int32_t *out)
{
	if (name[0] != '+' && name[0] != '-')
		return false;
	const char *p = name + 1;
	int v[2] = {0, 0}, digits = 0;
	for (int i = 0; i < 2; i++) {
		if (i == 1 && *p == ':')
			p++;
		if (i == 1 && *p == 0)
			break;
		if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]))
			return false;
		v[i] = (p[0] - '0') * 10 + (p[1] - '0');
		p += 2;
		digits += 2;
	}
	if (*p || v[0] > 23 || v[1] > 59)
		return false;
	*out = (name[0] == '-' ? -1 : 1) * (v[0] * 3600 + v[1] * 60);
	return true;
}

int schedule_set_zone(struct schedule *s, const char *name, char *err, size_t errsz)
{
	if (!name || !*name) {
		set_err(err, errsz, "an empty time zone");
		return -1;
	}
	char t[64];
	shown(t, sizeof t, name, strlen(name));
	if (strcmp(name, "UTC") == 0 || strcmp(name, "Z") == 0) {
		schedule_free(s);
		return 0;
	}
	int32_t off;
	if (name[0] == '+' || name[0] == '-') {
		if (!parse_fixed(name, &off)) {
			set_err(err, errsz, "time zone \"%s\": an offset is +HH:MM or -HH:MM, "
			        "at most 23:59", t);
			return -1;
		}
		struct sched_zone *z = calloc(1, sizeof *z);
		if (!z) {
			set_err(err, errsz, "out of memory");
			return -1;
		}
		z->off0 = off;
		schedule_free(s);
		s->zone = z;
		return 0;
	}
	/* A name of the tz database: letters, digits, "/", "_", "-", "+"; no "..". */
	bool ok = isalpha((unsigned char)name[0]) && strlen(name) < 128 && !strstr(name, "..");
	for (const char *p = name; ok && *p; p++)
		ok = isalnum((unsigned char)*p) || strchr("/_-+", *p);
	if (!ok) {
		set_err(err, errsz, "time zone \"%s\": not a zone name (e.g. Europe/Berlin), "
		        "UTC or an offset (+HH:MM)", t);
		return -1;
	}
	const char *dir = getenv("TZDIR");
	if (!dir || !*dir)
		dir = "/usr/share/zoneinfo";
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > MAX_TZIF) {
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		set_err(err, errsz, "time zone \"%s\": %s (%s)", t,
		        e == ENOENT ? "no such zone" : e ? strerror(e) : "not a zone file", path);
		return -1;
	}
	unsigned char *buf = malloc((size_t)sb.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!buf) {
		set_err(err, errsz, "out of memory");
		return -1;
	}
	char why[128];
	int rc = schedule_set_zone_tzif(s, buf, got, why, sizeof why);
	free(buf);
	if (rc < 0)
		set_err(err, errsz, "time zone \"%s\": %s: %s", t, path, why);
	return rc;
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
