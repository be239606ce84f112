/* --metrics-file: what a run did, in Prometheus' text format, for node_exporter's
 * textfile collector (or anything that reads the format).
 *
 * The file is written after each run (each turn of a --requeue loop), whole: into a
 * temporary file beside it, whose name does not end in ".prom" (the collector reads only
 * those), then renamed over it, so that a reader sees the old file or the new one, never
 * a part. Every sample has the labels lock (the lock path) and job_name (--job-name, else
 * the command's name). Every gauge is written every time, with 0 for what did not happen,
 * so that an alert on a value never sees a series vanish.
 *
 * The last successful run's time is when it finished, on the server's clock: with
 * --once-per the mtime of its record (written by the release, by whichever host ran
 * it), else the creation time of our lock node plus the run's wait and hold as this
 * host measured them. A run that did not succeed carries the previous value over from
 * the file it replaces; 0 until a run has succeeded (the series is always there). */
#include "zklock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LAST_SUCCESS "zklock_last_success_timestamp_seconds"

/* The folder of file, into buf. */
static void folder_of(const char *file, char *buf, size_t size)
{
	const char *slash = strrchr(file, '/');
	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == file)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - file), file);
}

int metrics_check(const char *file)
{
	char dir[4096];
	if (strlen(file) >= sizeof dir - 32)
		return usage_error("--metrics-file \"%s\" is too long", file);
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (*base == '\0')
		return usage_error("--metrics-file \"%s\" names a folder, not a file", file);
	folder_of(file, dir, sizeof dir);
	if (access(dir, W_OK | X_OK) != 0)
		return usage_error("cannot write --metrics-file \"%s\": folder %s: %s", file, dir,
		                   strerror(errno));
	return 0;
}

/* A label value: backslash, double quote and newline escaped (the format's rules). */
static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fputc('\\', f);
		if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* One gauge: its HELP and TYPE lines, then its samples (extra: a third label, or NULL). */
static void gauge(FILE *f, const struct opts *o, const char *name, const char *help,
                  const char *extra_name, const char *const *extra, const double *v, int n)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s{", name);
		put_label(f, "lock", o->path);
		fputc(',', f);
		put_label(f, "job_name", o->job_name);
		if (extra_name) {
			fputc(',', f);
			put_label(f, extra_name, extra[i]);
		}
		fprintf(f, "} %.15g\n", v[i]);
	}
}

static void gauge1(FILE *f, const struct opts *o, const char *name, const char *help, double v)
{
	gauge(f, o, name, help, NULL, NULL, &v, 1);
}

/* The last success recorded in the file being replaced, in ms, or 0. */
static int64_t previous_success(const char *file)
{
	FILE *f = fopen(file, "r");
	if (!f)
		return 0;
	char line[8192];
	int64_t ms = 0;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, LAST_SUCCESS "{", sizeof LAST_SUCCESS) != 0)
			continue;
		const char *sp = strrchr(line, ' ');
		double v = sp ? strtod(sp + 1, NULL) : 0;
		if (v > 0)
			ms = (int64_t)(v * 1000.0 + 0.5);
	}
	fclose(f);
	return ms;
}

bool metrics_write(const struct opts *o, const struct report *r)
{
	const char *file = o->metrics_file;
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file, (long)getpid());
	int64_t success = r->success_ms > 0 ? r->success_ms : previous_success(file);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		msg("cannot write the metrics to %s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		return false;
	}
	gauge1(f, o, "zklock_wait_seconds", "Seconds the last run waited for the lock.",
	       r->wait_s);
	gauge1(f, o, "zklock_hold_seconds", "Seconds the last run held the lock.", r->hold_s);
	gauge1(f, o, "zklock_exit_status", "Exit status of zklock for the last run.",
	       r->status);
	gauge1(f, o, "zklock_ran", "Whether the last run started the command (1) or not (0).",
	       r->ran);
	static const char *const reasons[] = { "busy", "once_per", "slot_done", "late" };
	const double skipped[] = { r->busy, r->once, r->slot_done, r->slot_late };
	gauge(f, o, "zklock_skipped",
	      "Whether the last run was skipped: busy (not acquired in time, -w, -n), "
	      "once_per (--once-per found it done), slot_done (--schedule found its slot "
	      "done) or late (--schedule: past --start-deadline).", "reason", reasons, skipped,
	      4);
	gauge1(f, o, "zklock_lost", "Whether the lock was lost during the last run.", r->lost);
	gauge1(f, o, "zklock_revoked", "Whether the lock was revoked during the last run.",
	       r->revoked);
	gauge1(f, o, "zklock_max_runtime_exceeded",
	       "Whether the last run's command ran past --max-runtime and was stopped.",
	       r->max_runtime);
	gauge1(f, o, "zklock_warn_after_exceeded",
	       "Whether the last run's command ran past --warn-after.", r->warned);
	gauge1(f, o, LAST_SUCCESS,
	       "Server time at which the last successful run finished, in seconds since the "
	       "epoch (0: none yet).", success > 0 ? (double)success / 1000.0 : 0.0);
	bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
	int e = errno;
	if (fclose(f) != 0 && ok) {
		ok = false;
		e = errno;
	}
	if (ok && rename(tmp, file) != 0) {
		ok = false;
		e = errno;
	}
	if (!ok) {
		msg("cannot write the metrics to %s: %s", file, strerror(e));
		unlink(tmp);
	}
	return ok;
}
