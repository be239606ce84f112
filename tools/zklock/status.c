/* `zklock status PATH`: every node queued at PATH, and its --once-per record; `zklock
 * list PREFIX`: the locks in use under PREFIX, and their records. Both read the tree
 * through the library's inspection (zkl_inspect(), zkl_inspect_prefix()), on zklock's
 * one session. `zklock count PATH N`: the count of the semaphore at PATH, set for good
 * (zkl_semaphore_set_count()). */
#include "zklock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int run_status(const struct opts *o)
{
	zkl_client *c;
	zkl_inspection *in;
	int status = open_inspected(o, &c, &in);
	if (status != 0)
		return status;
	struct last_run r;
	status = last_run_read(c, o->path, &r);
	if (status == 0) {
		const zkl_lock_info *li = zkl_inspection_lock(in, 0);
		if (o->json) {
			print_lock_json(stdout, in, li, &r);
			fputc('\n', stdout);
		} else {
			print_lock_text(stdout, in, li);
			print_holds_text(stdout, in, li);
			if (r.found)
				print_last_run_text(stdout, &r);
		}
		if (fflush(stdout) != 0) {
			msg("writing the queue: %s", strerror(errno));
			status = EXIT_SOFTWARE;
		}
	}
	last_run_free(&r);
	zkl_inspection_free(in);
	zkl_client_close(c);
	return status;
}

/* A line of `list`: path, the layouts present, holders, waiting, the first holder's
 * data. */
static void print_list_line(FILE *f, const zkl_inspection *in, const zkl_lock_info *li)
{
	char layouts[128] = "";
	const zkl_node_info *first = NULL;
	for (size_t k = 0; k < li->count; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		const char *l = zkl_layout_name(n->layout);
		if (!strstr(layouts, l) && strlen(layouts) + strlen(l) + 2 < sizeof layouts) {
			if (*layouts)
				strcat(layouts, ",");
			strcat(layouts, l);
		}
		if (!first && n->holds)
			first = n;
	}
	fprintf(f, "%s\t%s\t%zu\t%zu\t", li->path, layouts, li->holders, li->waiting);
	if (first)
		print_printable(f, first->data, first->data_len);
	else
		fputc('-', f);
	fputc('\n', f);
}

/* A record's line of `list`: its node, "record", -, -, who ran it, when it started and
 * when it finished. */
static void print_list_record(FILE *f, const struct last_run *r)
{
	char started[40], finished[40];
	format_utc(started, sizeof started, r->started_ms);
	format_utc(finished, sizeof finished, r->finished_ms);
	fprintf(f, "%s\trecord\t-\t-\t%s, started %s, finished %s", r->node,
	        *r->by ? r->by : "-", started, finished);
	/* A scheduled job's: its last run's outcome, if not that success, and the slots
	 * missed lately. */
	enum run_kind k = slot_record_last(&r->rec);
	if (k < RUN_KINDS && k != RUN_SUCCEEDED) {
		char what[40], at[40];
		last_outcome_text(what, sizeof what, r);
		format_utc(at, sizeof at, r->rec.runs[k].finished_ms);
		fprintf(f, "; last run %s (%s, by %s)", what, at,
		        *r->rec.runs[k].by ? r->rec.runs[k].by : "-");
	}
	if (r->rec.missed_recent > 0)
		fprintf(f, "; %lld slot%s missed lately", (long long)r->rec.missed_recent,
		        r->rec.missed_recent == 1 ? "" : "s");
	fputc('\n', f);
}

/* A lock of `list`: one in use (li, of the inspection), or one whose --once-per record
 * stays between runs (li NULL). */
struct listed {
	const char *path;
	const zkl_lock_info *li;
};

static int listed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->path, ((const struct listed *)b)->path);
}

/* The locks in use and, for the records found under the prefix, their locks not in use,
 * sorted by path, into *out (the caller frees it; the paths point into in and recs). */
static int list_entries(const zkl_inspection *in, char **recs, size_t nrecs,
                        struct listed **out, size_t *n)
{
	size_t nlocks = zkl_inspection_locks(in);
	struct listed *v = calloc(nlocks + nrecs + 1, sizeof *v);
	if (!v) {
		msg("out of memory");
		return EXIT_SOFTWARE;
	}
	size_t k = 0;
	for (size_t i = 0; i < nlocks; i++) {
		const zkl_lock_info *li = zkl_inspection_lock(in, i);
		if (li->count > 0)
			v[k++] = (struct listed){ .path = li->path, .li = li };
	}
	size_t inuse = k;
	qsort(v, inuse, sizeof *v, listed_cmp);
	for (size_t i = 0; i < nrecs; i++) {
		/* The record's lock path: recs[i] without ".last-run", cut in place. */
		recs[i][strlen(recs[i]) - strlen(".last-run")] = '\0';
		struct listed key = { .path = recs[i] };
		if (!bsearch(&key, v, inuse, sizeof *v, listed_cmp))
			v[k++] = key;
	}
	qsort(v, k, sizeof *v, listed_cmp);
	*out = v;
	*n = k;
	return 0;
}

int run_list(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	zkl_inspection *in;
	int rc = inspect_prefix(c, o->path, &in);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(c);
		return status;
	}
	char **recs = NULL;
	size_t nrecs = 0;
	rc = find_records(c, o->path, &recs, &nrecs);
	struct listed *v = NULL;
	size_t n = 0;
	if (rc != 0)
		status = report_failure("finding the records under", o->path, rc);
	else
		status = list_entries(in, recs, nrecs, &v, &n);
	if (status == 0 && o->json) {
		fputs("{\"prefix\": ", stdout);
		print_json_cstr(stdout, o->path);
		fputs(", \"locks\": [", stdout);
	}
	for (size_t i = 0; status == 0 && i < n; i++) {
		struct last_run r;
		status = last_run_read(c, v[i].path, &r);
		if (status != 0) {
			last_run_free(&r);
			break;
		}
		/* A lock not in use: no node, and its record. */
		const zkl_lock_info idle = { .path = v[i].path };
		const zkl_lock_info *li = v[i].li ? v[i].li : &idle;
		if (o->json) {
			fputs(i ? ", " : "", stdout);
			print_lock_json(stdout, in, li, &r);
		} else {
			if (v[i].li)
				print_list_line(stdout, in, li);
			if (r.found)
				print_list_record(stdout, &r);
		}
		last_run_free(&r);
	}
	if (o->json && (status == 0 || n > 0))
		fputs("]}\n", stdout);
	free(v);
	free(recs);
	if (zkl_inspection_skipped(in) > 0)
		msg("%zu folder%s under %s could not be read (ACL) and %s left out",
		    zkl_inspection_skipped(in), zkl_inspection_skipped(in) == 1 ? "" : "s",
		    o->path, zkl_inspection_skipped(in) == 1 ? "was" : "were");
	zkl_inspection_free(in);
	zkl_client_close(c);
	if (fflush(stdout) != 0) {
		msg("writing the list: %s", strerror(errno));
		status = EXIT_SOFTWARE;
	}
	return status;
}

int run_count(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	int rc = zkl_semaphore_set_count(c, o->path, o->count);
	if (rc != 0)
		status = report_failure("setting the count of", o->path, rc);
	else if (o->count > 0)
		printf("%s: %d leases; --semaphore with another count is refused (exit %d)\n",
		       o->path, o->count, EXIT_COUNT);
	else
		printf("%s: count cleared; the first semaphore to arrive records its own\n",
		       o->path);
	zkl_client_close(c);
	return status;
}
