/* --schedule: a run in its slot, on the server's clock.
 *
 * The slot of a run is the latest schedule time at or before its arrival: the creation
 * time (ctime) of its lock node, which is when its cron line fired as far as ZooKeeper
 * is concerned. Host clocks never enter it: hosts whose cron lines fire apart, or whose
 * clocks disagree, arrive in the same slot as long as they arrive before the next
 * schedule time. Under the lock, the run reads the record beside it (<path>.last-run)
 * and slot_plan() decides: the record holds this slot's success (done: skip, exit 0),
 * the run arrived --start-deadline or more after its slot began (late: skip, the slot
 * recorded missed), or run. A success is recorded by the release itself, in one
 * transaction that checks our node (once.c's record_release()), with its slot and the
 * slots it passed over (--catch-up skip) as missed; with --catch-up once the run stands
 * for those, and its command hears which in ZKLOCK_MISSED and ZKLOCK_MISSED_FROM.
 *
 * "Missed" slots are counted since the last success: a slot whose run failed is one
 * without a success too, so a run with --catch-up once after a failed slot stands for
 * it. The record's missed count adds up the slots recorded missed: those a run with
 * --catch-up skip passed over, and those that started too late.
 *
 * The record's lines, as text, are record.c's. */
#include "zklock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---- the options ---- */

int sched_option(int which, const char *arg, struct opts *o)
{
	switch (which) {
	case SCHED_OPT_SCHEDULE:
		if (!*arg)
			return usage_error("empty --schedule: expected a cron expression such as "
			                   "\"0 3 * * *\"");
		o->schedule_expr = arg;
		return 0;
	case SCHED_OPT_TZ:
		if (!*arg)
			return usage_error("empty --tz: expected UTC, an offset such as +05:30, or a "
			                   "zone name such as Europe/Berlin");
		o->tz = arg;
		return 0;
	case SCHED_OPT_CATCH_UP:
		if (!slot_parse_catch_up(arg, &o->catch_up))
			return usage_error("invalid --catch-up \"%s\": expected skip or once", arg);
		o->catch_up_given = true;
		return 0;
	case SCHED_OPT_LAST_FAILED:
		o->last_failed = true;
		return 0;
	case SCHED_OPT_MISSED_SLOTS:
		if (!parse_threshold(arg, true, &o->missed_slots))
			return usage_error("invalid --missed-slots \"%s\": expected WARN, WARN,CRIT or "
			                   ",CRIT, each a number of slots >= 0 (such as 0,2)", arg);
		return 0;
	case SCHED_OPT_SPLAY:
		if (!parse_duration(arg, &o->splay_ms))
			return usage_error("invalid --splay \"%s\": expected seconds > 0, or a number "
			                   "with s, m, h or d (such as 30, 2m)", arg);
		return 0;
	case SCHED_OPT_START_DEADLINE:
		if (!parse_duration(arg, &o->start_deadline_ms))
			return usage_error("invalid --start-deadline \"%s\": expected seconds > 0, or "
			                   "a number with s, m, h or d (such as 90, 10m)", arg);
		return 0;
	}
	return usage_error("unknown schedule option");
}

bool sched_opts_given(const struct opts *o)
{
	return o->schedule_expr || o->tz || o->catch_up_given || o->start_deadline_ms ||
	       o->splay_ms;
}

int sched_check_opts(struct opts *o)
{
	if (!o->schedule_expr) {
		if (o->tz || o->catch_up_given || o->start_deadline_ms)
			return usage_error("%s needs --schedule",
			                   o->tz ? "--tz" : o->catch_up_given ? "--catch-up"
			                                                      : "--start-deadline");
		return 0;
	}
	if (o->once_per_s)
		return usage_error("--schedule and --once-per exclude each other (both say when "
		                   "a run counts as done)");
	if (o->mode != MODE_MUTEX && o->mode != MODE_WRITE)
		return usage_error("--schedule works with a mutex or --write: a slot runs once, "
		                   "by one holder at a time");
	static struct schedule sched; /* zklock parses its arguments once; again: freed */
	schedule_free(&sched);
	char err[256];
	if (schedule_parse(&sched, o->schedule_expr, err, sizeof err) != 0)
		return usage_error("invalid --schedule \"%s\": %s", o->schedule_expr, err);
	if (o->tz && schedule_set_zone(&sched, o->tz, err, sizeof err) != 0) {
		schedule_free(&sched);
		return usage_error("invalid --tz \"%s\": %s", o->tz, err);
	}
	o->sched = &sched;
	/* The note of how the previous holder left tells a run whose predecessor did not
	 * end under the lock whether it lost the lock or vanished. */
	o->previous = true;
	return 0;
}

/* ---- the run ---- */

/* The test-only shift of the server's time as the schedule sees it (0 unless set). */
static int64_t test_shift_ms(void)
{
	const char *s = getenv(SHIFT_ENV);
	if (!s || !*s)
		return 0;
	char *end;
	long long v = strtoll(s, &end, 10);
	return *end == '\0' ? v : 0;
}

/* The slots in (from, to), from and to ms (schedule times), and the first of them. */
static int64_t slots_between(const struct schedule *s, int64_t from_ms, int64_t to_ms,
                             int64_t *first_ms)
{
	*first_ms = 0;
	if (from_ms <= 0 || from_ms >= to_ms)
		return 0;
	int64_t from = from_ms / 1000, to = to_ms / 1000, first;
	int64_t n = schedule_slots(s, from, to, NULL, 0);
	if (n < 0) /* more than schedule_slots() counts: as many as it does */
		n = schedule_slots(s, to - (int64_t)SCHEDULE_SEARCH_DAYS * 86400, to, NULL, 0);
	if (n > 0 && schedule_next(s, from, &first) && first < to)
		*first_ms = first * 1000;
	return n > 0 ? n - 1 : 0; /* (from, to] less "to" itself */
}

/* Where the slots not recorded yet begin: after the last success's slot, or the last
 * slot recorded missed, whichever is later (0: no run before, nothing missed). */
static int64_t missed_from(const struct sched_run *sr)
{
	return sr->last_slot_ms > sr->r.missed_last_ms ? sr->last_slot_ms : sr->r.missed_last_ms;
}

static void set_env(struct sched_run *sr, int i, const char *name, const char *value)
{
	snprintf(sr->env[i], sizeof sr->env[i], "%s=%s", name, value);
	sr->envp[i] = sr->env[i];
}

/* ISO 8601 UTC to the second: "2026-12-06T03:00:00Z". */
static void format_slot(char *buf, size_t size, int64_t ms)
{
	char at[40];
	format_utc(at, sizeof at, ms);
	char *dot = strchr(at, '.');
	if (dot)
		snprintf(dot, sizeof at - (size_t)(dot - at), "Z");
	snprintf(buf, size, "%s", at);
}

/* A "running" line that is not ours: that run did not end under the lock. Its zklock
 * said "lost" in the note if it could (its lock was lost while it ran), else it
 * vanished. Moves it to the outcome it was, found by this write. Returns whether r
 * changed. */
static bool settle_running(struct lock *lk, struct slot_record *r)
{
	if (!r->running.set || r->running_token == zkl_lock_token(lk->l))
		return false;
	enum run_kind k = strcmp(lk->passed_on, "lost") == 0 ? RUN_LOST : RUN_VANISHED;
	r->runs[k] = r->running;
	r->runs[k].set = true;
	r->runs[k].n = 0;
	r->runs[k].finished_ms = 0;
	r->running.set = false;
	return true;
}

/* Writes r in the release of the lock (record_release()), and keeps it as written (our
 * outcome finished at the write) for the metrics. *mtime (if not NULL) gets when it was
 * written, on the server's clock (0: unknown). */
static int release_recording(struct lock *lk, const struct sched_run *sr,
                             const struct slot_record *r, int64_t *mtime, int *release,
                             struct report *rep)
{
	char buf[RECORD_DATA_MAX];
	size_t len = slot_record_format(buf, sizeof buf, r);
	int64_t at = 0;
	int status = record_release(lk, sr->rec, buf, len, sr->r.found, &at, release);
	if (mtime)
		*mtime = at;
	if (status != 0)
		return status;
	rep->record = *r;
	rep->record.found = true;
	for (int k = 0; k < RUN_KINDS; k++)
		if (rep->record.runs[k].set && rep->record.runs[k].finished_ms == 0)
			rep->record.runs[k].finished_ms = at;
	return 0;
}

int sched_begin(const struct opts *o, struct lock *lk, struct sched_run *sr)
{
	memset(sr, 0, sizeof *sr);
	sr->rec = record_path(o->path);
	sr->arrival_ms = arrival_ms(lk);
	if (!sr->rec || sr->arrival_ms <= 0) {
		msg("cannot tell when %s was asked for", o->path);
		return EXIT_SOFTWARE;
	}
	char *buf;
	size_t len;
	int64_t mtime = 0;
	int rc = zkl_record_get(lk->c, sr->rec, &buf, &len, &mtime);
	if (rc == 0) {
		slot_record_parse(buf, mtime, &sr->r);
		free(buf);
	} else if (rc != ZKL_ENOTHELD) {
		const char *detail = zkl_last_error();
		msg("cannot read %s: %s", sr->rec, *detail ? detail : zkl_strerror(rc));
		return EXIT_SOFTWARE;
	}
	const int64_t shift = test_shift_ms();
	int64_t last_slot = sr->r.slot_ms, t;
	if (!last_slot && sr->r.started_ms > 0) {
		/* Written by --once-per or an older zklock: the slot its start fell in. */
		if (schedule_prev(o->sched, (sr->r.started_ms + shift) / 1000, &t))
			last_slot = t * 1000;
	}
	int64_t mine = schedule_prev(o->sched, (sr->arrival_ms + shift) / 1000, &t) ? t * 1000 : 0;
	if (sr->r.started_ms > sr->arrival_ms || last_slot > mine) {
		/* Written by no run before ours (it asked for the lock after we did, or its
		 * slot is after ours): a record from the future is no reason to skip, and
		 * trusting it would skip every slot until then, silently. */
		char at[40], slot[40];
		format_utc(at, sizeof at, sr->r.started_ms);
		format_utc(slot, sizeof slot, last_slot);
		msg("the record %s says a run for the slot of %s asked for the lock at %s (by %s), "
		    "after this one did: not trusted; running", sr->rec, slot, at,
		    *sr->r.by ? sr->r.by : "unknown");
		last_slot = 0;
		sr->r.started_ms = sr->r.finished_ms = sr->r.slot_ms = 0;
		sr->r.by[0] = '\0';
		if (sr->r.missed_last_ms > mine)
			sr->r.missed = sr->r.missed_first_ms = sr->r.missed_last_ms = 0;
	}
	sr->last_slot_ms = last_slot;
	slot_plan(o->sched, sr->arrival_ms + shift, last_slot, o->catch_up, o->start_deadline_ms,
	          &sr->plan);
	if (sr->plan.action != SLOT_RUN)
		return 0;
	char at[40], n[24];
	format_slot(at, sizeof at, sr->plan.slot_ms);
	set_env(sr, 0, SLOT_ENV, at);
	bool covers = sr->plan.covers_from_ms < sr->plan.slot_ms;
	snprintf(n, sizeof n, "%lld", covers ? (long long)sr->plan.missed : 0LL);
	set_env(sr, 1, MISSED_ENV, n);
	if (covers) {
		format_slot(at, sizeof at, sr->plan.covers_from_ms);
		set_env(sr, 2, MISSED_FROM_ENV, at);
	}
	lk->extra_env = sr->envp;
	if (o->verbose) {
		format_slot(at, sizeof at, sr->plan.slot_ms);
		if (sr->plan.missed > 0)
			msg("%s: running for the slot of %s; %lld%s slot%s missed before it %s", o->path,
			    at, (long long)sr->plan.missed, sr->plan.missed_more ? " or more" : "",
			    sr->plan.missed == 1 ? "" : "s",
			    covers ? "(this run stands for them: --catch-up once)"
			           : "(recorded missed: --catch-up skip)");
		else
			msg("%s: running for the slot of %s", o->path, at);
	}
	return 0;
}

int sched_skip(const struct opts *o, struct lock *lk, struct sched_run *sr, struct report *rep)
{
	char slot[40], started[40], finished[40];
	format_slot(slot, sizeof slot, sr->plan.slot_ms);
	format_utc(started, sizeof started, sr->r.started_ms);
	format_utc(finished, sizeof finished, sr->r.finished_ms);
	if (sr->plan.action == SLOT_DONE) {
		rep->slot_done = true;
		rep->success_ms = sr->r.finished_ms;
		if (!o->quiet)
			msg("%s already ran in the slot of %s (started %s, finished %s, by %s)", o->path,
			    slot, started, finished, *sr->r.by ? sr->r.by : "unknown");
		zkl_lock_release(lk->l);
		rep->record = sr->r;
		return 0;
	}
	if (sr->plan.action == SLOT_NONE) {
		if (!o->quiet)
			msg("%s: no time of the schedule \"%s\" at or before this run: nothing to run",
			    o->path, o->schedule_expr);
		zkl_lock_release(lk->l);
		return 0;
	}
	/* Late: this slot, and those before it since the last success or the last recorded
	 * missed (whichever is later) that are not recorded yet, are recorded missed. */
	rep->slot_late = true;
	rep->success_ms = sr->r.finished_ms;
	int64_t late_s = (sr->arrival_ms + test_shift_ms() - sr->plan.slot_ms) / 1000;
	if (!o->quiet)
		msg("%s: too late to start for the slot of %s (%lld s after it; --start-deadline "
		    "%g s): not run, recorded missed", o->path, slot, (long long)late_s,
		    o->start_deadline_ms / 1000.0);
	struct slot_record r = sr->r;
	bool changed = settle_running(lk, &r);
	if (sr->r.missed_last_ms < sr->plan.slot_ms) {
		int64_t first, n = slots_between(o->sched, missed_from(sr), sr->plan.slot_ms,
		                                  &first) + 1;
		r.missed += n;
		r.missed_recent += n;
		r.missed_first_ms = first > 0 ? first : sr->plan.slot_ms;
		r.missed_last_ms = sr->plan.slot_ms;
		changed = true;
	} /* else recorded missed already (another late host) */
	if (!changed) {
		zkl_lock_release(lk->l);
		rep->record = sr->r;
		return 0;
	}
	int release = 0;
	return release_recording(lk, sr, &r, NULL, &release, rep);
}

/* Our run's outcome in r: the last of its kind, finished by this write. */
static void set_run(struct lock *lk, const struct sched_run *sr, struct slot_record *r,
                    enum run_kind k, int n)
{
	r->running.set = false;
	if (k >= RUN_KINDS)
		return;
	struct run_outcome *o = &r->runs[k];
	memset(o, 0, sizeof *o);
	o->set = true;
	o->n = n;
	o->slot_ms = sr->plan.slot_ms;
	o->started_ms = sr->arrival_ms;
	printable(o->by, sizeof o->by, lk->id, strlen(lk->id));
}

int sched_start(struct lock *lk, struct sched_run *sr)
{
	struct slot_record r = sr->r;
	(void)settle_running(lk, &r);
	r.running.set = true;
	r.running.slot_ms = sr->plan.slot_ms;
	r.running.started_ms = sr->arrival_ms;
	r.running_token = zkl_lock_token(lk->l);
	printable(r.running.by, sizeof r.running.by, lk->id, strlen(lk->id));
	char buf[RECORD_DATA_MAX];
	size_t len = slot_record_format(buf, sizeof buf, &r);
	int rc = zkl_record_set_guarded(lk->l, sr->rec, buf, len);
	if (rc == ZKL_ELOST || rc == ZKL_ENOTHELD) {
		msg("lock on %s lost", lk->path);
		return EXIT_SOFTWARE;
	}
	if (rc != 0) {
		const char *detail = zkl_last_error();
		msg("cannot record in %s that the run started: %s", sr->rec,
		    *detail ? detail : zkl_strerror(rc));
		return EXIT_SOFTWARE;
	}
	sr->r = r;
	sr->r.found = true;
	return 0;
}

int sched_record(const struct opts *o, struct lock *lk, struct sched_run *sr, int64_t *mtime,
                 int *release, struct report *rep)
{
	struct slot_record r = sr->r;
	r.started_ms = sr->arrival_ms;
	printable(r.by, sizeof r.by, lk->id, strlen(lk->id));
	r.slot_ms = sr->plan.slot_ms;
	set_run(lk, sr, &r, RUN_SUCCEEDED, 0);
	if (sr->plan.covers_from_ms >= sr->plan.slot_ms) {
		/* --catch-up skip: the slots passed over since the last success, less those
		 * recorded missed already (too late to start), are recorded missed now; the
		 * recent count is all of them. */
		int64_t first, last, n = slots_between(o->sched, missed_from(sr), sr->plan.slot_ms,
		                                       &first);
		if (n > 0 && schedule_prev(o->sched, sr->plan.slot_ms / 1000 - 1, &last)) {
			r.missed += n;
			r.missed_first_ms = first;
			r.missed_last_ms = last * 1000;
		}
		r.missed_recent = sr->plan.missed;
	} else {
		r.missed_recent = 0; /* --catch-up once: this run stood for them */
	}
	return release_recording(lk, sr, &r, mtime, release, rep);
}

int sched_record_end(struct lock *lk, struct sched_run *sr, const struct outcome *out,
                     int *release, struct report *rep)
{
	struct slot_record r = sr->r;
	enum run_kind k = RUN_KINDS;
	int n = 0;
	if (!out->ran)
		k = RUN_KINDS; /* no command: no outcome, the run is just not running */
	else if (out->max_runtime)
		k = RUN_MAX_RUNTIME;
	else if (out->revoked)
		k = RUN_REVOKED;
	else if (out->sig > 0) {
		k = RUN_SIGNAL;
		n = out->sig;
	} else {
		k = RUN_FAILED;
		n = out->code > 0 && out->code <= 255 ? out->code : 0;
	}
	set_run(lk, sr, &r, k, n);
	return release_recording(lk, sr, &r, NULL, release, rep);
}

/* ---- --splay ---- */

void splay_wait(const struct opts *o)
{
	if (o->splay_ms <= 0)
		return;
	uint64_t r = 0;
	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		r = (uint64_t)t.tv_nsec * 2654435761u ^ (uint64_t)getpid();
	}
	int64_t ms = (int64_t)(r % (uint64_t)o->splay_ms);
	if (o->verbose)
		msg("--splay: asking for %s in %.3f s", o->path, ms / 1000.0);
	notify("STATUS=--splay: asking for %s in %.3f s\nEXTEND_TIMEOUT_USEC=%lld", o->path,
	       ms / 1000.0, (long long)ms * 1000LL + 60000000LL);
	/* A signal meanwhile ends zklock at once (nothing is queued yet: the signal thread
	 * exits 128+N while connecting). */
	struct timespec until = plus_ms(now(), ms);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

void sched_run_free(struct sched_run *sr)
{
	free(sr->rec);
	sr->rec = NULL;
}
