/* `zklock prune PREFIX [--dry-run]`: deletes the empty lock folders at and under PREFIX
 * with the library's zkl_prune(), which never takes a lock from anyone nor fails an
 * acquire (<zklocks/inspect.h>). A line per folder deleted (or, --dry-run, that would
 * be), deepest first; --json prints one object at the end instead. */
#include "zklock.h"

#include <errno.h>
#include <string.h>

struct pruned {
	bool json;
	int n;
};

static void on_pruned(const char *path, void *data)
{
	struct pruned *p = data;
	if (p->json) {
		fputs(p->n ? ", " : "", stdout);
		print_json_cstr(stdout, path);
	} else {
		printf("%s\n", path);
	}
	p->n++;
}

int run_prune(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	struct pruned p = {.json = o->json};
	if (o->json) {
		fputs("{\"prefix\": ", stdout);
		print_json_cstr(stdout, o->path);
		printf(", \"dry_run\": %s, \"folders\": [", o->dry_run ? "true" : "false");
	}
	/* A level of the tree costs a round trip or two: a deep one may take a few. */
	int t = zkl_client_session_timeout(c);
	int rc = zkl_prune(c, o->path, o->dry_run, 4 * (t > 1000 ? t : 1000), on_pruned, &p);
	if (o->json)
		fputs("]}\n", stdout);
	if (rc < 0)
		status = report_failure(o->dry_run ? "looking for empty folders under" :
		                        "pruning", o->path, rc);
	else if (o->verbose)
		msg("%s %d empty folder%s under %s", o->dry_run ? "would delete" : "deleted", rc,
		    rc == 1 ? "" : "s", o->path);
	if (fflush(stdout) != 0) {
		msg("writing the folders: %s", strerror(errno));
		status = EXIT_SOFTWARE;
	}
	zkl_client_close(c);
	return status;
}
