/* --metrics-file: what a run did, in Prometheus' text format, for node_exporter's
 * textfile collector (or anything that reads the format).
 *
 * The file is written after each run (each turn of a --requeue loop), whole: into a
 * temporary file beside it, whose name does not end in ".prom" (the collector reads only
 * those), then renamed over it, so that a reader sees the old file or the new one, never
 * a part. The folder is often shared (node_exporter's textfile folder), so the temporary
 * file gets a random name and is created exclusively (O_EXCL, O_NOFOLLOW): a symlink or
 * file planted there is never followed, truncated or removed, and a failure removes only
 * the file zklock created. The file itself must be a regular file (or not exist): the
 * old one is read with O_NONBLOCK and checked with fstat(), so that a FIFO planted there
 * is refused rather than blocking zklock. Every sample has the labels lock (the lock path) and job_name (--job-name, else
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
#include <sys/random.h>
#include <sys/stat.h>
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

/* What a file of mode m is, when it is not a regular file. */
static const char *not_regular(mode_t m)
{
	return S_ISDIR(m)    ? "a folder, not a regular file"
	       : S_ISLNK(m)  ? "a symbolic link, not a regular file"
	       : S_ISFIFO(m) ? "a FIFO, not a regular file"
	       : S_ISSOCK(m) ? "a socket, not a regular file"
	       : S_ISCHR(m) || S_ISBLK(m) ? "a device, not a regular file"
	                                  : "not a regular file";
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
	struct stat sb;
	int e = 0;
	if (stat(dir, &sb) != 0)
		e = errno;
	else if (!S_ISDIR(sb.st_mode))
		e = ENOTDIR;
	else if (access(dir, W_OK | X_OK) != 0)
		e = errno;
	if (e != 0)
		return usage_error("cannot write --metrics-file \"%s\": folder %s: %s", file, dir,
		                   strerror(e));
	if (lstat(file, &sb) == 0 && !S_ISREG(sb.st_mode))
		return usage_error("cannot write --metrics-file \"%s\": %s", file,
		                   not_regular(sb.st_mode));
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

/* A scheduled job's record, as this run read or wrote it: the same on every host. */
static void job_outcomes(FILE *f, const struct opts *o, const struct slot_record *rec)
{
	const char *names[RUN_KINDS];
	double at[RUN_KINDS], last[RUN_KINDS];
	enum run_kind l = slot_record_last(rec);
	for (int k = 0; k < RUN_KINDS; k++) {
		names[k] = run_kind_name((enum run_kind)k);
		at[k] = rec->runs[k].set ? (double)rec->runs[k].finished_ms / 1000.0 : 0.0;
		last[k] = k == (int)l;
	}
	gauge(f, o, "zklock_job_last_run_timestamp_seconds",
	      "Server time at which the job's last run of each outcome ended (lost, vanished: "
	      "when the next run found it so), as the record beside the lock says, in seconds "
	      "since the epoch (0: none).", "outcome", names, at, RUN_KINDS);
	gauge(f, o, "zklock_job_last_outcome",
	      "The outcome of the job's last run as the record beside the lock says (1), on "
	      "any host.", "outcome", names, last, RUN_KINDS);
	gauge1(f, o, "zklock_job_missed_slots",
	       "Slots the job missed lately: since the success before its last one.",
	       (double)rec->missed_recent);
	gauge1(f, o, "zklock_job_missed_slots_recorded",
	       "Slots the job's record counts as missed in all.", (double)rec->missed);
}

/* The last success recorded in the file being replaced, in ms, or 0 (none, or no file).
 * Returns false, with *why, if file is there but not a regular file: it is opened
 * without following a link and without blocking (a FIFO), then checked. */
static bool previous_success(const char *file, int64_t *out, const char **why)
{
	*out = 0;
	int fd = open(file, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		struct stat sb;
		if (errno == ELOOP && lstat(file, &sb) == 0 && !S_ISREG(sb.st_mode)) {
			*why = not_regular(sb.st_mode);
			return false;
		}
		return true; /* none, or unreadable: nothing to carry over */
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		close(fd);
		return true;
	}
	if (!S_ISREG(sb.st_mode)) {
		*why = not_regular(sb.st_mode);
		close(fd);
		return false;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return true;
	}
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
	*out = ms;
	return true;
}

/* Creates a temporary file beside file, named into tmp, exclusively and without
 * following a link: a random name, tried again if taken. Returns its descriptor, or -1
 * with errno (nothing is created then). */
static int create_temp(const char *file, char *tmp, size_t size)
{
	for (int i = 0; i < 16; i++) {
		uint64_t r = 0;
		if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
			r ^= (uint64_t)zkl_monotonic_ms() * 0x9e3779b97f4a7c15ull + (uint64_t)i;
		snprintf(tmp, size, "%s.%ld.%016llx.tmp", file, (long)getpid(),
		         (unsigned long long)r);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
		              0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

bool metrics_write(const struct opts *o, const struct report *r)
{
	const char *file = o->metrics_file;
	char tmp[4200];
	int64_t success = r->success_ms;
	const char *why = NULL;
	int64_t before = 0;
	if (!previous_success(file, &before, &why)) {
		msg("cannot write the metrics to %s: %s", file, why);
		return false;
	}
	if (success <= 0)
		success = before;
	int fd = create_temp(file, tmp, sizeof tmp);
	if (fd < 0) {
		msg("cannot write the metrics to %s: creating a temporary file beside it: %s", file,
		    strerror(errno));
		return false;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		msg("cannot write the metrics to %s: %s", tmp, strerror(errno));
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
	if (r->record.found)
		job_outcomes(f, o, &r->record);
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
