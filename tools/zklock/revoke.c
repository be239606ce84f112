/* `zklock revoke PATH`: asks the holders of PATH to let go (Curator's revocation). */
#include "zklock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int run_revoke(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	struct queue_view v;
	int rc = view_collect(c, o->path, &v);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(c);
		return status;
	}
	char **asked = calloc(v.n ? v.n : 1, sizeof *asked);
	size_t nasked = 0, holders = 0;
	for (size_t i = 0; i < v.n && asked; i++) {
		const struct qnode *q = &v.nodes[i];
		if (!q->p.holder)
			continue;
		holders++;
		bool revocable = q->p.data_len == 0 && strcmp(q->layout, "semaphore") != 0 &&
		                 strcmp(q->layout, "latch") != 0;
		if (!revocable) {
			char data[256];
			printable(data, sizeof data, q->p.data, (size_t)q->p.data_len);
			printf("%s: held by %s, not revocable (revocable holders run with "
			       "--revocable, and their node has no data)\n", q->p.path,
			       q->p.data_len ? data : "a node without data of another layout");
			continue;
		}
		rc = zkl_revoke(c, q->p.path);
		if (rc == ZKL_ENOTHELD) {
			printf("%s: released meanwhile\n", q->p.path);
			continue;
		}
		if (rc != 0) {
			status = report_failure("revoking", q->p.path, rc);
			continue;
		}
		printf("%s: revocable; asked its holder to release %s\n", q->p.path, o->path);
		asked[nasked++] = strdup(q->p.path);
	}
	if (holders == 0)
		printf("%s is free: nothing to revoke\n", o->path);
	view_free(&v);
	if (status == 0 && nasked == 0)
		status = 1;
	/* -w: wait until the asked holders have let go. */
	if (status == 0 && o->wait_ms != ZKL_WAIT_FOREVER && o->wait_s > 0) {
		struct timespec deadline = after_ms(o->wait_ms);
		bool gone = false;
		while (!gone) {
			if (view_collect(c, o->path, &v) != 0)
				break;
			gone = true;
			for (size_t i = 0; i < v.n; i++)
				for (size_t k = 0; k < nasked; k++)
					if (asked[k] && strcmp(v.nodes[i].p.path, asked[k]) == 0)
						gone = false;
			view_free(&v);
			if (gone || reached(deadline))
				break;
			usleep(100000);
		}
		if (gone) {
			printf("%s: released\n", o->path);
		} else {
			printf("%s: still held after %g s\n", o->path, o->wait_s);
			status = 1;
		}
	}
	for (size_t k = 0; k < nasked; k++)
		free(asked[k]);
	free(asked);
	zkl_client_close(c);
	if (fflush(stdout) != 0)
		status = EXIT_SOFTWARE;
	return status;
}

