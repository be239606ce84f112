/* The record beside the lock (<path>.last-run) as text: its lines, read into a struct
 * slot_record (slot_record_parse()) and written from one (slot_record_format()).
 * --once-per's record is the first line alone; a scheduled run (scheduled.c) writes the
 * lines of a scheduled job after it (zklock.h has the format), and a reader that knows
 * the first line alone reads them as nothing. Reading the record from the server and
 * writing it there are once.c's and scheduled.c's; this file touches no server. */
#include "zklock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[RUN_KINDS] = {
	"succeeded", "failed", "max-runtime", "signal", "revoked", "lost", "vanished",
};

const char *run_kind_name(enum run_kind k)
{
	return k < RUN_KINDS ? kind_names[k] : "none";
}

/* n numbers >= 0 after a line's key ("slot 123", "missed 2 60000 120000 1"), each after
 * one space; then, if rest is not NULL, a space and the rest of the line (printable,
 * into rest), else the line's end. False if the line is not that. */
static bool line_fields(const char *line, const char *key, int64_t *out, int n, char *rest,
                        size_t restsz)
{
	size_t k = strlen(key);
	if (strncmp(line, key, k) != 0)
		return false;
	const char *p = line + k;
	for (int i = 0; i < n; i++) {
		if (*p != ' ' || p[1] < '0' || p[1] > '9')
			return false;
		char *end;
		errno = 0;
		long long v = strtoll(p + 1, &end, 10);
		if (errno != 0)
			return false;
		out[i] = v;
		p = end;
	}
	if (!rest)
		return *p == '\n' || *p == '\0';
	if (*p != ' ')
		return false;
	p++;
	printable(rest, restsz, p, strcspn(p, "\n"));
	return true;
}

/* "run <kind> <n> <slot> <started> <finished> <by>" into r->runs; false if not one. */
static bool run_line(const char *line, int64_t mtime, struct slot_record *r)
{
	if (strncmp(line, "run ", 4) != 0)
		return false;
	const char *kind = line + 4;
	for (int k = 0; k < RUN_KINDS; k++) {
		size_t kl = strlen(kind_names[k]);
		if (strncmp(kind, kind_names[k], kl) != 0 || kind[kl] != ' ')
			continue;
		int64_t v[4];
		struct run_outcome o = { .set = true };
		if (!line_fields(kind + kl, "", v, 4, o.by, sizeof o.by) || v[0] > 255)
			return false;
		o.n = (int)v[0];
		o.slot_ms = v[1];
		o.started_ms = v[2];
		o.finished_ms = v[3] ? v[3] : mtime;
		r->runs[k] = o;
		return true;
	}
	return false;
}

void slot_record_parse(const char *buf, int64_t mtime, struct slot_record *r)
{
	memset(r, 0, sizeof *r);
	r->found = true;
	r->mtime = mtime;
	r->finished_ms = mtime;
	char *end;
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	if (end != buf && errno == 0 && v > 0 && (*end == ' ' || *end == '\0' || *end == '\n')) {
		r->started_ms = v;
		while (*end == ' ')
			end++;
		printable(r->by, sizeof r->by, end, strcspn(end, "\n"));
	}
	for (const char *line = strchr(buf, '\n'); line; line = strchr(line, '\n')) {
		line++;
		int64_t n[4];
		if (line_fields(line, "slot", n, 1, NULL, 0))
			r->slot_ms = n[0];
		else if (line_fields(line, "missed", n, 4, NULL, 0) && n[2] >= n[1]) {
			r->missed = n[0];
			r->missed_first_ms = n[1];
			r->missed_last_ms = n[2];
			r->missed_recent = n[3];
		} else if (line_fields(line, "running", n, 3, r->running.by, sizeof r->running.by)) {
			r->running.set = true;
			r->running.slot_ms = n[0];
			r->running.started_ms = n[1];
			r->running_token = n[2];
		} else {
			(void)run_line(line, mtime, r);
		}
	}
	if (!r->started_ms)
		r->finished_ms = 0; /* no success: nothing finished */
	else if (r->runs[RUN_SUCCEEDED].set && r->runs[RUN_SUCCEEDED].started_ms == r->started_ms)
		r->finished_ms = r->runs[RUN_SUCCEEDED].finished_ms;
}

enum run_kind slot_record_last(const struct slot_record *r)
{
	enum run_kind last = RUN_KINDS;
	for (int k = 0; k < RUN_KINDS; k++)
		if (r->runs[k].set && (last == RUN_KINDS ||
		                       r->runs[k].finished_ms > r->runs[last].finished_ms))
			last = (enum run_kind)k;
	return last;
}

/* printf to the end of buf's len bytes, never past size (a cut record is refused by
 * no one, but a line cut short reads as nothing). */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	if (*len >= size - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

/* RECORD_DATA_MAX fits the lines: the longest of each, 8 of them, are under 3.7 KB. */
size_t slot_record_format(char *buf, size_t size, const struct slot_record *r)
{
	size_t len = 0;
	buf[0] = '\0';
	if (r->started_ms > 0)
		append(buf, size, &len, "%lld %s\nslot %lld\n", (long long)r->started_ms, r->by,
		       (long long)r->slot_ms);
	else
		append(buf, size, &len, "-\n");
	for (int k = 0; k < RUN_KINDS; k++) {
		const struct run_outcome *o = &r->runs[k];
		if (o->set)
			append(buf, size, &len, "run %s %d %lld %lld %lld %s\n", kind_names[k], o->n,
			       (long long)o->slot_ms, (long long)o->started_ms,
			       (long long)o->finished_ms, o->by);
	}
	if (r->running.set)
		append(buf, size, &len, "running %lld %lld %lld %s\n",
		       (long long)r->running.slot_ms, (long long)r->running.started_ms,
		       (long long)r->running_token, r->running.by);
	if (r->missed > 0 || r->missed_recent > 0)
		append(buf, size, &len, "missed %lld %lld %lld %lld\n", (long long)r->missed,
		       (long long)r->missed_first_ms, (long long)r->missed_last_ms,
		       (long long)r->missed_recent);
	return len;
}
