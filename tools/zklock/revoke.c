/* `zklock revoke PATH`: asks the holders of PATH to let go (Curator's revocation): every
 * revocable holder (each reader of a read lock, each lease of a semaphore). `zklock
 * revoke NODE`, with a node path as `zklock status` prints it, asks that one node only
 * (one lease of a semaphore, a waiter). A revocable node has no data: zklock
 * --revocable, or a zklocks handle made revocable, leaves it empty; a node with data is
 * not asked, since nobody would listen. With -w, waits until the asked nodes are gone. */
#include "zklock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether node q can be asked: no data, of a layout that has revocation. */
static bool revocable(const struct qnode *q)
{
	return q->p.data_len == 0 && strcmp(q->layout, "latch") != 0;
}

/* Asks q's owner; returns the node's path (malloc'ed) if it was asked, else NULL after
 * reporting why, with *status set on a failure. */
static char *ask(zkl_client *c, const struct qnode *q, const char *what, int *status)
{
	if (!revocable(q)) {
		char data[256];
		printable(data, sizeof data, q->p.data, (size_t)q->p.data_len);
		printf("%s: %s by %s, not revocable (revocable holders run with --revocable, "
		       "and their node has no data)\n", q->p.path, q->p.holder ? "held" : "queued",
		       q->p.data_len ? data : "a node without data of another layout");
		return NULL;
	}
	int rc = zkl_revoke(c, q->p.path);
	if (rc == ZKL_ENOTHELD) {
		printf("%s: released meanwhile\n", q->p.path);
		return NULL;
	}
	if (rc != 0) {
		*status = report_failure("revoking", q->p.path, rc);
		return NULL;
	}
	printf("%s: revocable; asked its %s to release %s\n", q->p.path,
	       q->p.holder ? "holder" : "waiter", what);
	char *copy = strdup(q->p.path);
	if (!copy) {
		msg("out of memory");
		*status = EXIT_SOFTWARE;
	}
	return copy;
}

/* -w: waits until none of the asked nodes is queued at folder. Returns 0 or 1. */
static int wait_gone(zkl_client *c, const struct opts *o, const char *folder, char **asked,
                     size_t nasked)
{
	struct timespec deadline = after_ms(o->wait_ms);
	bool gone = false;
	while (!gone) {
		struct queue_view v;
		if (view_collect(c, folder, &v) != 0)
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
		return 0;
	}
	printf("%s: still held after %g s\n", o->path, o->wait_s);
	return 1;
}

int run_revoke(const struct opts *o)
{
	/* A node's path names the node; any other path, a lock. */
	bool one = kind_of(o->path) >= 0;
	char *folder = strdup(o->path);
	if (!folder) {
		msg("out of memory");
		return EXIT_SOFTWARE;
	}
	if (one)
		*strrchr(folder, '/') = '\0';
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0) {
		free(folder);
		return status;
	}
	struct queue_view v;
	int rc = view_collect(c, *folder ? folder : "/", &v);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(c);
		free(folder);
		return status;
	}
	char **asked = calloc(v.n ? v.n : 1, sizeof *asked);
	size_t nasked = 0, holders = 0;
	bool found = false;
	for (size_t i = 0; i < v.n && asked; i++) {
		const struct qnode *q = &v.nodes[i];
		if (one ? strcmp(q->p.path, o->path) != 0 : !q->p.holder)
			continue;
		holders++;
		found = true;
		char *node = ask(c, q, one ? "its place" : o->path, &status);
		if (node)
			asked[nasked++] = node;
	}
	if (!asked) {
		msg("out of memory");
		status = EXIT_SOFTWARE;
	} else if (one && !found) {
		printf("%s: no such node (nothing to revoke)\n", o->path);
	} else if (holders == 0) {
		printf("%s is free: nothing to revoke\n", o->path);
	}
	view_free(&v);
	if (status == 0 && nasked == 0)
		status = 1;
	if (status == 0 && o->wait_ms != ZKL_WAIT_FOREVER && o->wait_s > 0)
		status = wait_gone(c, o, *folder ? folder : "/", asked, nasked);
	for (size_t k = 0; k < nasked; k++)
		free(asked[k]);
	free(asked);
	free(folder);
	zkl_client_close(c);
	if (fflush(stdout) != 0)
		status = EXIT_SOFTWARE;
	return status;
}
