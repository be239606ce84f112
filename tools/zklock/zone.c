/* Cron schedules' time zones (schedule.h, "The zones" in schedule.c): UTC, fixed
 * offsets, and the tz database's TZif files with their POSIX rule strings. */
#include "schedule.h"
#include "zone.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
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

int32_t zone_offset(const struct sched_zone *z, int64_t t)
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
