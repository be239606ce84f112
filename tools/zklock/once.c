/* --once-per: the record beside the lock.
 *
 * It compares server times only: the creation time (ctime) of our lock node, which is
 * when our cron line fired as far as ZooKeeper is concerned, with the one recorded by the
 * last successful run. Host clocks never enter it.
 *
 * A successful run is recorded by the release itself: one transaction checks our node,
 * writes the record and deletes the node (zkl_lock_release_txn(); a lease or a
 * leadership writes it guarded by its node, zkl_record_set_guarded(), and then
 * releases). So the lock is never free while the record is older than the run that just
 * ended, and a holder whose node is gone (its session expired while it was stopped, an
 * operator deleted it) records nothing: the server refuses the whole transaction. */
#include "zklock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- --once-per: the record beside the lock ---- */

char *record_path(const char *path)
{
	size_t n = strlen(path) + sizeof ".last-run";
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s.last-run", path);
	return p;
}

/* The server time at which our node was created (when we asked for the lock), or 0. */
int64_t arrival_ms(struct lock *lk)
{
	int64_t token = zkl_lock_token(lk->l), t = 0;
	zkl_participant *list;
	size_t n;
	if (token <= 0 || zkl_lock_participants(lk->l, &list, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (list[i].czxid == token)
			t = list[i].ctime;
	zkl_participants_free(list, n);
	return t;
}

/* How much earlier than a full interval a later run still counts as the same one: cron
 * lines on different hosts fire seconds apart, and a run one interval later must not be
 * skipped for starting a moment early. */
static int64_t once_slack_ms(long interval_s)
{
	int64_t slack = (int64_t)interval_s * 1000 / 4;
	return slack > 300000 ? 300000 : slack;
}

/* Whether the last successful run is recent. Fills *last and *by (the record's data). */
int once_check(zkl_client *c, const char *rec, int64_t arrival, long interval_s,
               bool *recent, int64_t *last, char *by, size_t bysize, int64_t *mtime,
               bool *exists)
{
	*recent = false;
	*last = 0;
	*exists = false;
	by[0] = '\0';
	char *buf;
	size_t len;
	int rc = zkl_record_get(c, rec, &buf, &len, mtime);
	if (rc == ZKL_ENOTHELD)
		return 0;
	*exists = rc == 0;
	if (rc != 0) {
		const char *detail = zkl_last_error();
		msg("cannot read %s: %s", rec, *detail ? detail : zkl_strerror(rc));
		return EXIT_SOFTWARE;
	}
	char *end;
	errno = 0;
	long long v = strtoll(buf, &end, 10);
	const bool number = end != buf && errno == 0 && v > 0 && (*end == ' ' || *end == '\0');
	if (number) {
		while (*end == ' ')
			end++;
		printable(by, bysize, end, strcspn(end, "\n"));
	}
	if (number && v > arrival) {
		/* Written by no run before ours (its time is after we asked for the lock): a
		 * record from the future is no reason to skip, and trusting it would skip
		 * every run until then, silently. */
		char at[40];
		format_utc(at, sizeof at, v);
		msg("the record %s says a run asked for the lock at %s (by %s), after this one "
		    "did: not trusted; running", rec, at, *by ? by : "unknown");
		by[0] = '\0';
	} else if (number) {
		*last = v;
		*recent = arrival - v < (int64_t)interval_s * 1000 - once_slack_ms(interval_s);
	} else if (len > 0) {
		/* Not ours (an overflowing number, or no number): ran never, as far as we
		 * know. */
		char shown[64];
		printable(shown, sizeof shown, buf, len);
		msg("the record %s is not one of zklock's (\"%s\"): running", rec, shown);
	}
	free(buf);
	return 0;
}

/* Whether the record at rec says data (read back after a transaction whose answer was
 * lost with the connection); *mtime gets when it was written. */
static bool record_says(zkl_client *c, const char *rec, const char *data, size_t len,
                        int64_t *mtime)
{
	char *back = NULL;
	size_t blen = 0;
	int64_t m = 0;
	bool same = zkl_record_get(c, rec, &back, &blen, &m) == 0 && blen == len &&
	            memcmp(back, data, len) == 0;
	free(back);
	if (same && mtime)
		*mtime = m;
	return same;
}

int once_record(struct lock *lk, const char *rec, int64_t arrival, bool exists,
                int64_t *mtime, int *release)
{
	char buf[400];
	int len = snprintf(buf, sizeof buf, "%lld %s", (long long)arrival, lk->id);
	return record_release(lk, rec, buf, len, exists, mtime, release);
}

int record_release(struct lock *lk, const char *rec, const char *buf, size_t len,
                   bool exists, int64_t *mtime, int *release)
{
	int rc;
	if (lk->mode == MODE_MUTEX || lk->mode == MODE_READ || lk->mode == MODE_WRITE) {
		/* The record as the last reading found it: set if it was there, else created.
		 * Should that have changed meanwhile (zklock forget, a record made by hand),
		 * the transaction fails whole and the node is deleted alone: not recorded. */
		const zkl_txn_op op = { .kind = exists ? ZKL_TXN_SET : ZKL_TXN_CREATE,
		                        .path = rec, .data = buf, .len = len,
		                        .version = -1 };
		rc = zkl_lock_release_txn(lk->l, &op, 1, NULL);
	} else {
		/* A lease or leadership has no release with a transaction: the record is
		 * written while our node exists (a guarded write), then the lock is released.
		 * A reader may see the record before the release, never the lock free before
		 * the record; a holder whose node is gone records nothing here either. */
		rc = zkl_record_set_guarded(lk->l, rec, buf, len);
		if (rc == 0) {
			/* Recorded while ours: whatever the release says (a loss since) is its. */
			*release = zkl_lock_release(lk->l);
			if (mtime && !record_says(lk->c, rec, buf, len, mtime))
				*mtime = 0;
			return 0;
		}
	}
	const char *detail = zkl_last_error();
	char said[512];
	snprintf(said, sizeof said, "%s", *detail ? detail : zkl_strerror(rc));
	if (rc == ZKL_ECONNLOSS && record_says(lk->c, rec, buf, len, mtime)) {
		/* The answer was lost, not the transaction: it was applied. */
		*release = 0;
		return 0;
	}
	if (rc == 0) {
		*release = 0;
		/* When it was written, on the server's clock (for --metrics-file). */
		if (mtime && !record_says(lk->c, rec, buf, len, mtime))
			*mtime = 0;
		return 0;
	}
	if (rc == ZKL_ELOST) {
		/* Our node was gone: the server applied nothing, so no run of a holder that
		 * was not one is recorded, and the next holder runs the command again. */
		*release = ZKL_ELOST;
		msg("the run is not recorded in %s: the lock was lost before", rec);
		return EXIT_SOFTWARE;
	}
	/* Nothing recorded (or, after a lost connection, not as far as we can read). The
	 * transaction's release ends the hold whatever its answer; otherwise (the guarded
	 * write failed) give the lock back now. */
	int r = zkl_lock_release(lk->l);
	*release = r == ZKL_ENOTHELD ? 0 : r;
	msg("cannot record the run in %s: %s", rec, said);
	return EXIT_SOFTWARE;
}

/* ---- the record, as status and list show it; `zklock forget` ---- */

static bool is_record_path(const char *path)
{
	size_t n = strlen(path), k = strlen(".last-run");
	return n > k && strcmp(path + n - k, ".last-run") == 0;
}

int last_run_read(zkl_client *c, const char *path, struct last_run *r)
{
	memset(r, 0, sizeof *r);
	r->node = is_record_path(path) ? strdup(path) : record_path(path);
	if (!r->node) {
		msg("out of memory");
		return EXIT_SOFTWARE;
	}
	char *buf;
	size_t len;
	int64_t mtime = 0;
	int rc = zkl_record_get(c, r->node, &buf, &len, &mtime);
	if (rc == ZKL_ENOTHELD)
		return 0;
	if (rc != 0)
		return report_failure("reading", r->node, rc);
	/* "<ms> <host>:<pid>", as once_record() writes it, and a scheduled job's lines after
	 * it (slot_record_parse()); anything else: when it finished only, by whom unknown. A
	 * record of a scheduled job without a success yet ("-") says neither. */
	struct slot_record sr;
	slot_record_parse(buf, mtime, &sr);
	r->finished_ms = buf[0] == '-' ? 0 : sr.finished_ms;
	r->started_ms = sr.started_ms;
	snprintf(r->by, sizeof r->by, "%s", sr.by);
	r->slot_ms = sr.slot_ms;
	r->missed = sr.missed;
	r->missed_last_ms = sr.missed_last_ms;
	r->rec = sr;
	r->found = true;
	free(buf);
	return 0;
}

void last_run_free(struct last_run *r)
{
	free(r->node);
	r->node = NULL;
}

void print_last_run_text(FILE *f, const struct last_run *r)
{
	char started[40], finished[40], host[256];
	long pid = 0;
	format_utc(started, sizeof started, r->started_ms);
	format_utc(finished, sizeof finished, r->finished_ms);
	bool hp = host_pid(r->by, strlen(r->by), host, sizeof host, &pid);
	fprintf(f, "%s\t%s\tlast-run\trecord\t", r->node, *r->by ? r->by : "-");
	if (hp)
		fprintf(f, "%s\t%ld", host, pid);
	else
		fputs("-\t-", f);
	/* The columns of a node's since and token: when the run started and finished. */
	fprintf(f, "\t%s\t%s\t-\n", started, finished);
	/* A scheduled job's: a line per outcome kept (the last run of each), and the run
	 * going on, in the same columns; the last column is the run's slot. */
	for (int k = 0; k <= RUN_KINDS; k++) {
		const struct run_outcome *o = k < RUN_KINDS ? &r->rec.runs[k] : &r->rec.running;
		if (!o->set)
			continue;
		char what[40], slot[40];
		if (k == RUN_FAILED || k == RUN_SIGNAL)
			snprintf(what, sizeof what, "%s %d", run_kind_name((enum run_kind)k), o->n);
		else
			snprintf(what, sizeof what, "%s", k < RUN_KINDS ? run_kind_name((enum run_kind)k)
			                                                : "running");
		format_utc(started, sizeof started, o->started_ms);
		format_utc(finished, sizeof finished, k < RUN_KINDS ? o->finished_ms : 0);
		format_utc(slot, sizeof slot, o->slot_ms);
		hp = host_pid(o->by, strlen(o->by), host, sizeof host, &pid);
		fprintf(f, "%s\t%s\t%s\trecord\t", r->node, *o->by ? o->by : "-", what);
		if (hp)
			fprintf(f, "%s\t%ld", host, pid);
		else
			fputs("-\t-", f);
		fprintf(f, "\t%s\t%s\t%s\n", started, finished, slot);
	}
}

/* "failed 3", "signal 9", "max-runtime"... into buf. */
static void outcome_text(char *buf, size_t size, enum run_kind k, const struct run_outcome *o)
{
	if (k == RUN_FAILED || k == RUN_SIGNAL)
		snprintf(buf, size, "%s %d", run_kind_name(k), o->n);
	else
		snprintf(buf, size, "%s", run_kind_name(k));
}

void last_outcome_text(char *buf, size_t size, const struct last_run *r)
{
	enum run_kind k = slot_record_last(&r->rec);
	if (k < RUN_KINDS)
		outcome_text(buf, size, k, &r->rec.runs[k]);
	else
		snprintf(buf, size, "-");
}

/* A time of the record in JSON: "<name>": "<UTC>", "<name>_ms": ms (null for none). */
static void json_time(FILE *f, const char *name, int64_t ms)
{
	char at[40];
	format_utc(at, sizeof at, ms);
	if (ms > 0)
		fprintf(f, ", \"%s\": \"%s\", \"%s_ms\": %lld", name, at, name, (long long)ms);
	else
		fprintf(f, ", \"%s\": null, \"%s_ms\": null", name, name);
}

void print_last_run_json(FILE *f, const struct last_run *r)
{
	if (!r->found) {
		fputs("null", f);
		return;
	}
	char host[256];
	long pid = 0;
	bool hp = host_pid(r->by, strlen(r->by), host, sizeof host, &pid);
	fputs("{\"node\": ", f);
	print_json_cstr(f, r->node);
	fputs(", \"by\": ", f);
	print_json_cstr(f, *r->by ? r->by : NULL);
	fputs(", \"host\": ", f);
	print_json_cstr(f, hp ? host : NULL);
	if (hp)
		fprintf(f, ", \"pid\": %ld", pid);
	else
		fputs(", \"pid\": null", f);
	json_time(f, "started", r->started_ms);
	json_time(f, "finished", r->finished_ms);
	json_time(f, "slot", r->slot_ms);
	fprintf(f, ", \"missed\": %lld, \"missed_recent\": %lld", (long long)r->missed,
	        (long long)r->rec.missed_recent);
	json_time(f, "last_missed", r->missed_last_ms);
	/* A scheduled job's outcomes: the last run of each, and which was last. */
	enum run_kind last = slot_record_last(&r->rec);
	fputs(", \"last_outcome\": ", f);
	print_json_cstr(f, last < RUN_KINDS ? run_kind_name(last) : NULL);
	fputs(", \"outcomes\": {", f);
	bool first = true;
	for (int k = 0; k <= RUN_KINDS; k++) {
		const struct run_outcome *o = k < RUN_KINDS ? &r->rec.runs[k] : &r->rec.running;
		if (!o->set)
			continue;
		fprintf(f, "%s\"%s\": {\"by\": ", first ? "" : ", ",
		        k < RUN_KINDS ? run_kind_name((enum run_kind)k) : "running");
		first = false;
		print_json_cstr(f, o->by);
		char h[256];
		long p = 0;
		bool ok = host_pid(o->by, strlen(o->by), h, sizeof h, &p);
		fputs(", \"host\": ", f);
		print_json_cstr(f, ok ? h : NULL);
		if (k == RUN_FAILED)
			fprintf(f, ", \"status\": %d", o->n);
		if (k == RUN_SIGNAL)
			fprintf(f, ", \"signal\": %d", o->n);
		json_time(f, "slot", o->slot_ms);
		json_time(f, "started", o->started_ms);
		json_time(f, "finished", k < RUN_KINDS ? o->finished_ms : 0);
		fputc('}', f);
	}
	fputs("}}", f);
}

/* The node beside the lock whose record is rec named by suffix ("<path><suffix>"),
 * malloc'ed, or NULL: ".previous", the note of how the last holder left (--previous,
 * --lock-delay); ".clock", the node `zklock check` writes to read the server's time
 * (its default --clock-node). */
static char *beside(const char *rec, const char *suffix)
{
	size_t n = strlen(rec) - strlen(".last-run");
	size_t size = n + strlen(suffix) + 1;
	char *p = malloc(size);
	if (p)
		snprintf(p, size, "%.*s%s", (int)n, rec, suffix);
	return p;
}

/* Deletes the record, the note and check's clock node beside the lock, so that a
 * retired job leaves nothing (its folder then goes too). The note may be deleted while
 * a holder holds the lock: its release then goes without one, and the next holder hears
 * "vanished"; the clock node, while a check runs: it fails (UNKNOWN) or writes it again.
 * Exits 1 when there was none of them. */
int run_forget(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	char *rec = is_record_path(o->path) ? strdup(o->path) : record_path(o->path);
	char *note = rec ? beside(rec, ".previous") : NULL;
	char *clock = rec ? beside(rec, ".clock") : NULL;
	int rc = note && clock ? zkl_record_delete(c, rec) : ZKL_ENOMEM;
	int nrc = rc == 0 || rc == ZKL_ENOTHELD ? zkl_record_delete(c, note) : ZKL_ENOTHELD;
	int crc = (rc == 0 || rc == ZKL_ENOTHELD) && (nrc == 0 || nrc == ZKL_ENOTHELD)
	          ? zkl_record_delete(c, clock) : ZKL_ENOTHELD;
	if (rc != 0 && rc != ZKL_ENOTHELD)
		status = report_failure("forgetting", rec ? rec : o->path, rc);
	else if (nrc != 0 && nrc != ZKL_ENOTHELD)
		status = report_failure("forgetting", note, nrc);
	else if (crc != 0 && crc != ZKL_ENOTHELD)
		status = report_failure("forgetting", clock, crc);
	else if (rc == ZKL_ENOTHELD && nrc == ZKL_ENOTHELD && crc == ZKL_ENOTHELD)
		status = 1;
	if (!o->quiet && rc == 0)
		msg("forgot the last run of %s (%s)", o->path, rec);
	if (!o->quiet && nrc == 0)
		msg("forgot how the last holder of %s left (%s)", o->path, note);
	if (!o->quiet && crc == 0)
		msg("forgot the clock node of zklock check (%s)", clock);
	if (!o->quiet && status == 1)
		msg("%s has no record of a last run (%s)", o->path, rec);
	free(clock);
	free(note);
	free(rec);
	zkl_client_close(c);
	return status;
}
