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
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	zkl_inspection *in;
	int rc = inspect_path(c, o->path, &in);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(c);
		return status;
	}
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
	if (o->json) {
		fputs("{\"prefix\": ", stdout);
		print_json_cstr(stdout, o->path);
		fputs(", \"locks\": [", stdout);
	}
	size_t shown = 0;
	for (size_t i = 0; i < zkl_inspection_locks(in); i++) {
		const zkl_lock_info *li = zkl_inspection_lock(in, i);
		if (li->count == 0)
			continue;
		struct last_run r;
		status = last_run_read(c, li->path, &r);
		if (status != 0) {
			last_run_free(&r);
			break;
		}
		if (o->json) {
			fputs(shown ? ", " : "", stdout);
			print_lock_json(stdout, in, li, &r);
		} else {
			print_list_line(stdout, in, li);
			if (r.found) {
				char at[40];
				format_utc(at, sizeof at, r.at_ms);
				printf("%s\trecord\t-\t-\t%s at %s\n", r.node, *r.by ? r.by : "-", at);
			}
		}
		last_run_free(&r);
		shown++;
	}
	if (o->json)
		fputs("]}\n", stdout);
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
