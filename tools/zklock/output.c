/* What zklock writes: messages on stderr (a line at once, whatever thread), and a
 * queue as text (tab-separated, data made printable) or JSON (valid UTF-8 kept). */
#include "zklock.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- messages ---- */

void msg(const char *fmt, ...)
{
	/* One write for the whole line: the command shares stderr, and its own lines (a
	 * shell's "Terminated") must not land inside ours. */
	char line[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + 8, sizeof line - 9, fmt, ap);
	va_end(ap);
	memcpy(line, "zklock: ", 8);
	size_t len = n < 0 ? 8 : (size_t)n < sizeof line - 9 ? 8 + (size_t)n : sizeof line - 2;
	line[len++] = '\n';
	fwrite(line, 1, len, stderr);
}

int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	flockfile(stderr);
	fputs("zklock: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\nTry 'zklock --help' for more information.\n", stderr);
	funlockfile(stderr);
	va_end(ap);
	return EXIT_USAGE;
}

/* Writes up to outsz-1 bytes of a printable form of data into out: printable ASCII as
 * is, a backslash as "\\", anything else as "\xHH"; "..." marks a cut. */
void printable(char *out, size_t outsz, const char *data, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];
		char tmp[5];
		int n;
		if (ch == '\\')
			n = snprintf(tmp, sizeof tmp, "\\\\");
		else if (ch >= 0x20 && ch < 0x7f)
			n = snprintf(tmp, sizeof tmp, "%c", ch);
		else
			n = snprintf(tmp, sizeof tmp, "\\x%02x", ch);
		if (o + (size_t)n + 4 > outsz) {
			if (o + 4 <= outsz) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, tmp, (size_t)n);
		o += (size_t)n;
	}
	out[o] = '\0';
}

/* Full-length variant: writes straight to f. */
void print_printable(FILE *f, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];
		if (ch == '\\')
			fputs("\\\\", f);
		else if (ch >= 0x20 && ch < 0x7f)
			fputc(ch, f);
		else
			fprintf(f, "\\x%02x", ch);
	}
}

/* A JSON string: valid UTF-8 passes through (control characters escaped); any other byte
 * becomes \u00XX. */
void print_json_string(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		unsigned char ch = p[i];
		if (ch == '"' || ch == '\\') {
			fputc('\\', f);
			fputc(ch, f);
			i++;
		} else if (ch < 0x20 || ch == 0x7f) {
			fprintf(f, "\\u%04x", ch);
			i++;
		} else if (ch < 0x80) {
			fputc(ch, f);
			i++;
		} else {
			/* A UTF-8 sequence: 2 to 4 bytes, the first one saying how many. */
			size_t n = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
			if (ch >= 0xf5)
				n = 0;
			bool ok = n > 0 && i + n <= len;
			for (size_t k = 1; ok && k < n; k++)
				ok = (p[i + k] & 0xc0) == 0x80;
			if (ok) {
				fwrite(p + i, 1, n, f);
				i += n;
			} else {
				fprintf(f, "\\u%04x", ch);
				i++;
			}
		}
	}
	fputc('"', f);
}

void print_json_cstr(FILE *f, const char *s)
{
	if (s)
		print_json_string(f, s, strlen(s));
	else
		fputs("null", f);
}

/* "2024-05-01T12:00:03.123Z" for ms since the epoch. */
void format_utc(char *buf, size_t size, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms <= 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, size, "-");
		return;
	}
	char tmp[32];
	strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03dZ", tmp, (int)(ms % 1000));
}

/* "3 s", "5 min", "2 h", "1 d" */
void format_age(char *buf, size_t size, int64_t ms)
{
	int64_t s = ms / 1000;
	if (s < 120)
		snprintf(buf, size, "%lld s", (long long)s);
	else if (s < 7200)
		snprintf(buf, size, "%lld min", (long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, size, "%lld h", (long long)(s / 3600));
	else
		snprintf(buf, size, "%lld d", (long long)(s / 86400));
}

/* Splits "<host>:<pid>" data (zklock's, zklocks'); false for anything else. */
bool host_pid(const char *data, size_t len, char *host, size_t size, long *pid)
{
	const char *colon = len > 0 ? memrchr(data, ':', len) : NULL;
	if (!colon || colon == data)
		return false;
	const char *digits = colon + 1, *end = data + len;
	if (digits == end)
		return false;
	/* Read within len (data need not end in a NUL), and only a pid a process may have:
	 * a larger number cut down to a pid_t would name another process. */
	long v = 0;
	for (const char *d = digits; d < end; d++) {
		if (!isdigit((unsigned char)*d) || v > (INT_MAX - (*d - '0')) / 10)
			return false;
		v = v * 10 + (*d - '0');
	}
	for (const char *h = data; h < colon; h++)
		if (!isgraph((unsigned char)*h))
			return false;
	size_t hl = (size_t)(colon - data);
	if (hl >= size)
		return false;
	memcpy(host, data, hl);
	host[hl] = '\0';
	*pid = v;
	return true;
}

/* What status prints of a node besides its own fields: host and pid from its data, and
 * for our own holder on this host the time left to its watchdog's deadline. */
struct who {
	bool hp;
	char host[256];
	long pid;
	int64_t left; /* INT64_MIN: unknown */
	char since[40];
};

static void who_of(const zkl_lock_info *li, const zkl_node_info *n, struct who *w)
{
	w->pid = 0;
	w->hp = host_pid(n->data, n->data_len, w->host, sizeof w->host, &w->pid);
	w->left = w->hp ? deadline_left(li->path, w->host, w->pid) : INT64_MIN;
	format_utc(w->since, sizeof w->since, n->ctime);
}

void print_lock_text(FILE *f, const zkl_inspection *in, const zkl_lock_info *li)
{
	for (size_t k = 0; k < li->count; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		struct who w;
		who_of(li, n, &w);
		fprintf(f, "%s\t", n->path);
		print_printable(f, n->data, n->data_len);
		fprintf(f, "\t%s\t%s\t", zkl_role_name(n->role), zkl_layout_name(n->layout));
		if (w.hp)
			fprintf(f, "%s\t%ld", w.host, w.pid);
		else
			fputs("-\t-", f);
		fprintf(f, "\t%s\t%lld", w.since, (long long)n->token);
		if (w.left != INT64_MIN)
			fprintf(f, "\t%lldms\n", (long long)w.left);
		else
			fputs("\t-\n", f);
	}
}

void print_lock_json(FILE *f, const zkl_inspection *in, const zkl_lock_info *li,
                     const struct last_run *r)
{
	fputs("{\"path\": ", f);
	print_json_cstr(f, li->path);
	fprintf(f, ", \"holders\": %zu, \"waiting\": %zu, \"nodes\": [", li->holders,
	        li->waiting);
	for (size_t k = 0; k < li->count; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		struct who w;
		who_of(li, n, &w);
		fputs(k ? ", {" : "{", f);
		fputs("\"node\": ", f);
		print_json_cstr(f, n->path);
		fprintf(f, ", \"role\": \"%s\", \"layout\": \"%s\", \"data\": ",
		        zkl_role_name(n->role), zkl_layout_name(n->layout));
		print_json_string(f, n->data, n->data_len);
		fputs(", \"host\": ", f);
		print_json_cstr(f, w.hp ? w.host : NULL);
		if (w.hp)
			fprintf(f, ", \"pid\": %ld", w.pid);
		else
			fputs(", \"pid\": null", f);
		fprintf(f, ", \"since\": \"%s\", \"ctime_ms\": %lld, \"token\": %lld, \"sequence\": %lld",
		        w.since, (long long)n->ctime, (long long)n->token, (long long)n->sequence);
		if (w.left != INT64_MIN)
			fprintf(f, ", \"deadline_ms\": %lld}", (long long)w.left);
		else
			fputs(", \"deadline_ms\": null}", f);
	}
	fputs("]", f);
	if (r) {
		fputs(", \"last_run\": ", f);
		print_last_run_json(f, r);
	}
	fputs("}", f);
}

/* ---- the subcommands ---- */

int report_failure(const char *what, const char *path, int rc)
{
	const char *detail = zkl_last_error();
	msg("%s %s: %s%s%s", what, path, zkl_strerror(rc), *detail ? ": " : "", detail);
	return rc == ZKL_EINVAL ? EXIT_USAGE : EXIT_SOFTWARE;
}

