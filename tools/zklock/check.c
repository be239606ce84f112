/* `zklock check PATH|PREFIX`: a monitoring plugin, by the conventions of Nagios and
 * Icinga: one status line on stdout ("ZKLOCK OK - ...", then "|" and the performance
 * data), exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; --json prints one JSON object
 * instead, with the same exit status.
 *
 * It reads every lock in use at or under the operand (zkl_inspect_prefix(), so every
 * layout the library knows: zklocks', Curator's, kazoo's) and compares:
 *   --held-longer   the age of each holder's node (a lock's holders, a semaphore's
 *                   leases, a latch's leader);
 *   --waiters-more  each lock's waiting nodes;
 *   --last-run-older the age of the --once-per records: "<PATH>.last-run" and every
 *                   "*.last-run" under PATH (zkl_record_find()), from when each run
 *                   finished (the record's mtime).
 *
 * Ages are on the server's clock alone: a node's creation time (ctime) or a record's
 * mtime against the server's time now, which check reads as the mtime of a node it
 * writes (--clock-node, default "<PATH>.clock": a small persistent record beside the
 * lock, as "<PATH>.last-run" is). The host's clock never enters, so a host whose clock
 * is off does not raise or hide an alarm. A hold's age counts from when its holder
 * queued (its node's creation), which is when it asked, not when it was granted: an
 * upper bound of the hold. */
#include "zklock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { CHECK_OK, CHECK_WARNING, CHECK_CRITICAL, CHECK_UNKNOWN };

static const char *const state_names[] = { "OK", "WARNING", "CRITICAL", "UNKNOWN" };

/* One threshold crossed. */
struct problem {
	int level;
	char text[600];
};

struct check {
	const struct opts *o;
	int64_t server_now;     /* ms, server time; 0 if not read */
	struct problem *v;
	size_t n, cap;
	int level;
};

/* Records a problem (the worst level wins). */
static void problem(struct check *k, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void problem(struct check *k, int level, const char *fmt, ...)
{
	if (level > k->level)
		k->level = level;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 8;
		struct problem *v = realloc(k->v, cap * sizeof *v);
		if (!v)
			return; /* the level counts still */
		k->v = v;
		k->cap = cap;
	}
	struct problem *p = &k->v[k->n++];
	p->level = level;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->text, sizeof p->text, fmt, ap);
	va_end(ap);
}

/* The level of value against t (which is set), and the threshold it crossed. */
static int level_of(const struct threshold *t, int64_t value, int64_t *crossed)
{
	if (t->crit >= 0 && value > t->crit) {
		*crossed = t->crit;
		return CHECK_CRITICAL;
	}
	if (t->warn >= 0 && value > t->warn) {
		*crossed = t->warn;
		return CHECK_WARNING;
	}
	return CHECK_OK;
}

static bool set(const struct threshold *t)
{
	return t->warn >= 0 || t->crit >= 0;
}

/* The server's time now: the mtime of the clock node, written now. */
static int server_time(zkl_client *c, const char *node, int64_t *out)
{
	static const char note[] = "zklock check reads the server's time here";
	int rc = zkl_record_set(c, node, note, sizeof note - 1);
	char *back = NULL;
	size_t len;
	if (rc == 0)
		rc = zkl_record_get(c, node, &back, &len, out);
	free(back);
	return rc;
}

/* A duration for the status line: "0.5 s", "90 s", then as format_age(). */
static void format_span(char *buf, size_t size, int64_t ms)
{
	if (ms < 120000)
		snprintf(buf, size, "%.3g s", ms / 1000.0);
	else
		format_age(buf, size, ms);
}

/* "5,10" (warn, crit) as the performance data shows a threshold; empty for unset. */
static void perf_thresholds(char *buf, size_t size, const struct threshold *t, double scale)
{
	char w[32] = "", cr[32] = "";
	if (t->warn >= 0)
		snprintf(w, sizeof w, "%g", (double)t->warn / scale);
	if (t->crit >= 0)
		snprintf(cr, sizeof cr, "%g", (double)t->crit / scale);
	snprintf(buf, size, "%s;%s", w, cr);
}

static void json_threshold(FILE *f, const char *name, const struct threshold *t,
                           double scale)
{
	fprintf(f, ", \"%s\": ", name);
	if (!set(t)) {
		fputs("null", f);
		return;
	}
	fputs("{\"warning\": ", f);
	if (t->warn >= 0)
		fprintf(f, "%g", (double)t->warn / scale);
	else
		fputs("null", f);
	fputs(", \"critical\": ", f);
	if (t->crit >= 0)
		fprintf(f, "%g", (double)t->crit / scale);
	else
		fputs("null", f);
	fputc('}', f);
}

/* What check found, for its line. */
struct found {
	size_t locks;
	int64_t longest_ms;          /* the oldest holder's age, -1 if no holder */
	const zkl_lock_info *longest_li;
	const zkl_node_info *longest;
	size_t most_waiting;
	struct last_run *runs;       /* the --once-per records read */
	size_t nruns;
	size_t oldest;               /* the one that finished first (nruns: none) */
	bool last_run_read;
};

static void print_text(const struct check *k, const struct found *fd)
{
	const struct opts *o = k->o;
	printf("ZKLOCK %s - ", state_names[k->level]);
	if (k->n > 0) {
		for (size_t i = 0; i < k->n; i++)
			printf("%s%s", i ? "; " : "", k->v[i].text);
	} else {
		printf("%zu lock%s in use at %s", fd->locks, fd->locks == 1 ? "" : "s", o->path);
		char age[32];
		if (fd->longest_ms >= 0 && k->server_now > 0) {
			format_span(age, sizeof age, fd->longest_ms);
			printf(", longest hold %s", age);
		}
		printf(", most waiting %zu", fd->most_waiting);
		if (fd->oldest < fd->nruns) {
			format_span(age, sizeof age,
			            k->server_now - fd->runs[fd->oldest].finished_ms);
			if (fd->nruns == 1)
				printf(", last run finished %s ago", age);
			else
				printf(", %zu jobs, the oldest last run finished %s ago", fd->nruns, age);
		}
	}
	/* Performance data: label=value[UOM];warn;crit */
	char th[80];
	printf(" | locks=%zu", fd->locks);
	if (k->server_now > 0 && set(&o->held_longer)) {
		perf_thresholds(th, sizeof th, &o->held_longer, 1000.0);
		printf(" held=%.3fs;%s", fd->longest_ms > 0 ? fd->longest_ms / 1000.0 : 0.0, th);
	}
	perf_thresholds(th, sizeof th, &o->waiters_more, 1.0);
	printf(" waiting=%zu;%s", fd->most_waiting, set(&o->waiters_more) ? th : ";");
	if (fd->oldest < fd->nruns) {
		perf_thresholds(th, sizeof th, &o->last_run_older, 1000.0);
		printf(" last_run_age=%.3fs;%s",
		       (k->server_now - fd->runs[fd->oldest].finished_ms) / 1000.0, th);
	}
	putchar('\n');
}

static void print_json(const struct check *k, const struct found *fd,
                       const zkl_inspection *in)
{
	const struct opts *o = k->o;
	FILE *f = stdout;
	fprintf(f, "{\"status\": \"%s\", \"code\": %d, \"path\": ", state_names[k->level],
	        k->level);
	print_json_cstr(f, o->path);
	if (k->server_now > 0)
		fprintf(f, ", \"server_time_ms\": %lld", (long long)k->server_now);
	else
		fputs(", \"server_time_ms\": null", f);
	json_threshold(f, "held_longer_s", &o->held_longer, 1000.0);
	json_threshold(f, "waiters_more", &o->waiters_more, 1.0);
	json_threshold(f, "last_run_older_s", &o->last_run_older, 1000.0);
	json_threshold(f, "missed_slots", &o->missed_slots, 1.0);
	fprintf(f, ", \"last_failed\": %s", o->last_failed ? "true" : "false");
	fputs(", \"problems\": [", f);
	for (size_t i = 0; i < k->n; i++) {
		fprintf(f, "%s{\"level\": \"%s\", \"text\": ", i ? ", " : "",
		        state_names[k->v[i].level]);
		print_json_cstr(f, k->v[i].text);
		fputc('}', f);
	}
	fputs("], \"locks\": [", f);
	size_t shown = 0;
	for (size_t i = 0; in && i < zkl_inspection_locks(in); i++) {
		const zkl_lock_info *li = zkl_inspection_lock(in, i);
		if (li->count == 0)
			continue;
		int64_t oldest = -1;
		for (size_t j = 0; j < li->count; j++) {
			const zkl_node_info *n = lock_node(in, li, j);
			if (n->holds && k->server_now > 0 && k->server_now - n->ctime > oldest)
				oldest = k->server_now - n->ctime;
		}
		fputs(shown++ ? ", {\"path\": " : "{\"path\": ", f);
		print_json_cstr(f, li->path);
		fprintf(f, ", \"holders\": %zu, \"waiting\": %zu, \"held_ms\": ", li->holders,
		        li->waiting);
		if (oldest >= 0)
			fprintf(f, "%lld}", (long long)oldest);
		else
			fputs("null}", f);
	}
	/* The records read: when each last run started and finished (server's clock). */
	fputs("], \"last_runs\": ", f);
	if (fd->last_run_read) {
		fputc('[', f);
		for (size_t i = 0; i < fd->nruns; i++) {
			fputs(i ? ", " : "", f);
			print_last_run_json(f, &fd->runs[i]);
		}
		fputc(']', f);
	} else {
		fputs("null", f);
	}
	fputs("}\n", f);
}

/* UNKNOWN, with the reason, in the form asked for. */
static int unknown(const struct opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int unknown(const struct opts *o, const char *fmt, ...)
{
	char text[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (o->json) {
		fputs("{\"status\": \"UNKNOWN\", \"code\": 3, \"path\": ", stdout);
		print_json_cstr(stdout, o->path);
		fputs(", \"problems\": [{\"level\": \"UNKNOWN\", \"text\": ", stdout);
		print_json_cstr(stdout, text);
		fputs("}]}\n", stdout);
	} else {
		printf("ZKLOCK UNKNOWN - %s\n", text);
	}
	fflush(stdout);
	return CHECK_UNKNOWN;
}

/* The failure of a library call, as UNKNOWN. */
static int unknown_rc(const struct opts *o, const char *what, const char *path, int rc)
{
	const char *detail = zkl_last_error();
	return unknown(o, "%s %s: %s%s%s", what, path, zkl_strerror(rc), *detail ? ": " : "",
	               detail);
}

static void check_locks(struct check *k, const zkl_inspection *in, struct found *fd)
{
	const struct opts *o = k->o;
	for (size_t i = 0; i < zkl_inspection_locks(in); i++) {
		const zkl_lock_info *li = zkl_inspection_lock(in, i);
		if (li->count == 0)
			continue;
		fd->locks++;
		if (li->waiting > fd->most_waiting)
			fd->most_waiting = li->waiting;
		int64_t crossed;
		if (set(&o->waiters_more)) {
			int lv = level_of(&o->waiters_more, (int64_t)li->waiting, &crossed);
			if (lv != CHECK_OK)
				problem(k, lv, "%s has %zu waiting (more than %lld)", li->path, li->waiting,
				        (long long)crossed);
		}
		for (size_t j = 0; j < li->count && k->server_now > 0; j++) {
			const zkl_node_info *n = lock_node(in, li, j);
			if (!n->holds)
				continue;
			int64_t age = k->server_now - n->ctime;
			if (age > fd->longest_ms) {
				fd->longest_ms = age;
				fd->longest_li = li;
				fd->longest = n;
			}
			if (!set(&o->held_longer))
				continue;
			int lv = level_of(&o->held_longer, age, &crossed);
			if (lv == CHECK_OK)
				continue;
			char who[200], a[32], t[32];
			printable(who, sizeof who, n->data, n->data_len);
			format_span(a, sizeof a, age);
			format_span(t, sizeof t, crossed);
			problem(k, lv, "%s held for %s by %s (%s, %s; longer than %s)", li->path, a,
			        n->data_len ? who : "a node without data", zkl_layout_name(n->layout),
			        n->name, t);
		}
	}
}

/* Reads the record at path into fd->runs. Returns false after reporting (UNKNOWN). */
static bool read_run(struct check *k, zkl_client *c, struct found *fd, const char *path)
{
	struct last_run *v = realloc(fd->runs, (fd->nruns + 1) * sizeof *v);
	if (!v) {
		problem(k, CHECK_UNKNOWN, "out of memory");
		return false;
	}
	fd->runs = v;
	struct last_run *r = &fd->runs[fd->nruns];
	/* last_run_read() reports a failure on stderr; the line says UNKNOWN. */
	if (last_run_read(c, path, r) != 0) {
		const char *detail = zkl_last_error();
		problem(k, CHECK_UNKNOWN, "cannot read %s: %s", r->node ? r->node : path,
		        *detail ? detail : "see stderr");
		last_run_free(r);
		return false;
	}
	if (!r->found) {
		last_run_free(r);
		return true;
	}
	fd->nruns++;
	return true;
}

/* --last-failed: a scheduled job whose last run (the outcome of its record that finished
 * last) did not succeed is CRITICAL; --missed-slots: the slots it missed lately (since
 * the success before its last one, and since its last), against the thresholds. */
static void check_outcomes(struct check *k, const struct found *fd)
{
	const struct opts *o = k->o;
	for (size_t i = 0; i < fd->nruns; i++) {
		const struct last_run *r = &fd->runs[i];
		int n = (int)(strlen(r->node) - strlen(".last-run"));
		enum run_kind last = slot_record_last(&r->rec);
		if (o->last_failed && last < RUN_KINDS && last != RUN_SUCCEEDED) {
			const struct run_outcome *ro = &r->rec.runs[last];
			char what[40], at[40], slot[40];
			last_outcome_text(what, sizeof what, r);
			format_utc(at, sizeof at, ro->finished_ms);
			format_utc(slot, sizeof slot, ro->slot_ms);
			problem(k, CHECK_CRITICAL, "%.*s last run %s%s on %s (slot %s, %s %s)", n,
			        r->node, last == RUN_FAILED ? "failed with status " : "",
			        last == RUN_FAILED ? what + strlen("failed ") : what,
			        *ro->by ? ro->by : "an unknown host", slot,
			        last == RUN_LOST || last == RUN_VANISHED ? "found so at" : "ended at",
			        at);
		}
		int64_t crossed;
		int lv = set(&o->missed_slots)
		         ? level_of(&o->missed_slots, r->rec.missed_recent, &crossed) : CHECK_OK;
		if (lv != CHECK_OK) {
			char at[40];
			format_utc(at, sizeof at, r->rec.missed_last_ms);
			problem(k, lv, "%.*s missed %lld slot%s lately (the last %s; more than %lld)", n,
			        r->node, (long long)r->rec.missed_recent,
			        r->rec.missed_recent == 1 ? "" : "s", at, (long long)crossed);
		}
	}
}

/* --last-run-older: PATH's record and every record under PATH, by when each last run
 * finished (the record's mtime, on the server's clock). */
static void check_last_run(struct check *k, zkl_client *c, struct found *fd)
{
	const struct opts *o = k->o;
	fd->oldest = 0;
	char **under = NULL;
	size_t nunder = 0;
	int rc = find_records(c, o->path, &under, &nunder);
	if (rc != 0) {
		const char *detail = zkl_last_error();
		problem(k, CHECK_UNKNOWN, "cannot find the records under %s: %s", o->path,
		        *detail ? detail : zkl_strerror(rc));
		return;
	}
	bool ok = strcmp(o->path, "/") == 0 || read_run(k, c, fd, o->path);
	for (size_t i = 0; ok && i < nunder; i++)
		ok = read_run(k, c, fd, under[i]);
	free(under);
	if (!ok)
		return;
	fd->last_run_read = true;
	check_outcomes(k, fd);
	if (fd->nruns == 0 && set(&o->last_run_older)) {
		char *rec = record_path(o->path);
		problem(k, o->last_run_older.crit >= 0 ? CHECK_CRITICAL : CHECK_WARNING,
		        "no record of a run of %s (neither %s nor a record under %s exists)",
		        o->path, rec ? rec : o->path, o->path);
		free(rec);
		fd->oldest = 0;
		return;
	}
	for (size_t i = 0; i < fd->nruns; i++) {
		const struct last_run *r = &fd->runs[i];
		if (r->finished_ms < fd->runs[fd->oldest].finished_ms)
			fd->oldest = i;
		int64_t crossed;
		int64_t age = k->server_now - r->finished_ms;
		int lv = set(&o->last_run_older) ? level_of(&o->last_run_older, age, &crossed)
		                                 : CHECK_OK;
		if (lv == CHECK_OK)
			continue;
		size_t n = strlen(r->node) - strlen(".last-run");
		char a[32], t[32], at[40];
		format_span(a, sizeof a, age);
		format_span(t, sizeof t, crossed);
		format_utc(at, sizeof at, r->finished_ms);
		problem(k, lv, "%.*s last run finished %s ago (at %s; older than %s)", (int)n,
		        r->node, a, at, t);
	}
}

int run_check(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return unknown(o, "cannot reach ZooKeeper at %s (zklock exit status %d)",
		               o->servers, status);
	struct check k = { .o = o };
	struct found fd = { .longest_ms = -1 };
	fd.oldest = 0;
	zkl_inspection *in = NULL;
	int rc = inspect_prefix(c, o->path, &in);
	if (rc != 0) {
		status = unknown_rc(o, "listing", o->path, rc);
		zkl_client_close(c);
		return status;
	}
	const bool records = set(&o->last_run_older) || o->last_failed || set(&o->missed_slots);
	if (set(&o->held_longer) || records || o->clock_node) {
		char *clock = NULL;
		if (!o->clock_node) {
			size_t n = strlen(o->path) + sizeof "zklock.clock";
			if ((clock = malloc(n)) != NULL)
				snprintf(clock, n, "%s%s.clock", o->path, strcmp(o->path, "/") ? "" : "zklock");
		}
		const char *node = o->clock_node ? o->clock_node : clock;
		rc = node ? server_time(c, node, &k.server_now) : ZKL_ENOMEM;
		if (rc != 0) {
			const char *detail = zkl_last_error();
			status = unknown(o, "cannot read the server's time by writing %s (choose a "
			                 "writable node with --clock-node): %s", node ? node : "",
			                 *detail ? detail : zkl_strerror(rc));
			free(clock);
			zkl_inspection_free(in);
			zkl_client_close(c);
			return status;
		}
		free(clock);
	}
	check_locks(&k, in, &fd);
	if (records)
		check_last_run(&k, c, &fd);
	if (zkl_inspection_skipped(in) > 0)
		problem(&k, CHECK_UNKNOWN, "%zu folder%s under %s could not be read (ACL)",
		        zkl_inspection_skipped(in), zkl_inspection_skipped(in) == 1 ? "" : "s",
		        o->path);
	if (o->json)
		print_json(&k, &fd, in);
	else
		print_text(&k, &fd);
	zkl_inspection_free(in);
	zkl_client_close(c);
	free(k.v);
	for (size_t i = 0; i < fd.nruns; i++)
		last_run_free(&fd.runs[i]);
	free(fd.runs);
	if (fflush(stdout) != 0) {
		msg("writing the status: %s", strerror(errno));
		return CHECK_UNKNOWN;
	}
	return k.level;
}
