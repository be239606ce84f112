/* `zklock revoke PATH`: asks the holders of PATH to let go (Curator's revocation): every
 * revocable holder (each reader of a read lock, each lease of a semaphore). `zklock
 * revoke NODE`, with a node path as `zklock status` prints it, asks that one node only
 * (one lease of a semaphore, a waiter): a path with no queue of its own whose folder's
 * queue has it. A revocable node has no data: zklock
 * --revocable, or a zklocks handle made revocable, leaves it empty; a node with data is
 * not asked, since nobody would listen. The leader of an election (--leader, a latch) is
 * asked whatever its data (the participant's id): a zklock --leader stops its command and
 * hands leadership over (with --requeue it joins again at the back); a latch of another
 * library ignores it. With -w, waits until the asked nodes are gone. */
#include "zklock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether node n can be asked: a latch's leader, or a node without data of a layout that
 * has revocation. */
static bool revocable(const zkl_node_info *n)
{
	if (n->layout == ZKL_LAYOUT_LATCH)
		return n->role == ZKL_ROLE_LEADER;
	return n->data_len == 0;
}

/* Asks n's owner; returns the node's path (malloc'ed) if it was asked, else NULL after
 * reporting why, with *status set on a failure. */
static char *ask(zkl_client *c, const zkl_node_info *n, const char *what, int *status)
{
	if (!revocable(n)) {
		char data[256];
		printable(data, sizeof data, n->data, n->data_len);
		printf("%s: %s by %s, not revocable (revocable holders run with --revocable, "
		       "and their node has no data)\n", n->path, n->holds ? "held" : "queued",
		       n->data_len ? data : "a node without data of another layout");
		return NULL;
	}
	int rc = zkl_revoke(c, n->path);
	if (rc == ZKL_ENOTHELD) {
		printf("%s: released meanwhile\n", n->path);
		return NULL;
	}
	if (rc == ZKL_EINVAL) {
		/* A node of the queue that the server shows to be no lock node (a persistent
		 * one made by hand): not asked, for the library's reason. The command line was
		 * fine: no usage error. */
		const char *detail = zkl_last_error();
		printf("%s: not asked: %s\n", n->path, *detail ? detail : zkl_strerror(rc));
		return NULL;
	}
	if (rc != 0) {
		*status = report_failure("revoking", n->path, rc);
		return NULL;
	}
	if (n->layout == ZKL_LAYOUT_LATCH)
		printf("%s: asked the leader to hand over leadership of %s\n", n->path, what);
	else
		printf("%s: revocable; asked its %s to release %s\n", n->path,
		       n->holds ? "holder" : "waiter", what);
	char *copy = strdup(n->path);
	if (!copy) {
		msg("out of memory");
		*status = EXIT_SOFTWARE;
	}
	return copy;
}

/* -w: waits until none of the asked nodes is queued at lock. Returns 0 or 1. */
static int wait_gone(zkl_client *c, const struct opts *o, const char *lock, char **asked,
                     size_t nasked)
{
	struct timespec deadline = after_ms(o->wait_ms);
	bool gone = false;
	while (!gone) {
		zkl_inspection *in;
		if (inspect_path(c, lock, &in) != 0)
			break;
		gone = true;
		for (size_t i = 0; i < zkl_inspection_nodes(in); i++)
			for (size_t k = 0; k < nasked; k++)
				if (strcmp(zkl_inspection_node(in, i)->path, asked[k]) == 0)
					gone = false;
		zkl_inspection_free(in);
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

/* What to ask: a lock's holders, or one node of the lock that is path's folder (a node's
 * path names no lock of its own). Sets *in (the caller frees it), *li, and *node (NULL:
 * the holders of *li). Returns 0, or an exit code after reporting. */
static int find_target(zkl_client *c, const char *path, zkl_inspection **in,
                       const zkl_lock_info **li, const zkl_node_info **node)
{
	*node = NULL;
	int rc = inspect_path(c, path, in);
	if (rc != 0)
		return report_failure("listing", path, rc);
	*li = zkl_inspection_lock(*in, 0);
	const char *slash = strrchr(path, '/');
	if ((*li)->count > 0 || slash == path)
		return 0;
	char *folder = strndup(path, (size_t)(slash - path));
	zkl_inspection *up = NULL;
	rc = folder ? inspect_path(c, folder, &up) : ZKL_ENOMEM;
	free(folder);
	if (rc != 0)
		return 0; /* then it is a lock nobody holds */
	for (size_t i = 0; i < zkl_inspection_nodes(up) && !*node; i++)
		if (strcmp(zkl_inspection_node(up, i)->path, path) == 0)
			*node = zkl_inspection_node(up, i);
	if (*node || zkl_inspection_nodes(up) > 0) {
		/* A node of a lock in use (gone, if not found). */
		zkl_inspection_free(*in);
		*in = up;
		*li = zkl_inspection_lock(up, 0);
		if (!*node)
			*li = NULL;
		return 0;
	}
	zkl_inspection_free(up);
	return 0;
}

int run_revoke(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	zkl_inspection *in = NULL;
	const zkl_lock_info *li = NULL;
	const zkl_node_info *node = NULL;
	status = find_target(c, o->path, &in, &li, &node);
	if (status != 0) {
		zkl_client_close(c);
		return status;
	}
	char **asked = calloc(zkl_inspection_nodes(in) + 1, sizeof *asked);
	size_t nasked = 0, holders = 0;
	if (!asked) {
		msg("out of memory");
		status = EXIT_SOFTWARE;
	} else if (!li) {
		printf("%s: no such node (nothing to revoke)\n", o->path);
	} else if (node) {
		char *p = ask(c, node, "its place", &status);
		if (p)
			asked[nasked++] = p;
	} else {
		for (size_t k = 0; k < li->count; k++) {
			const zkl_node_info *n = lock_node(in, li, k);
			if (!n->holds)
				continue;
			holders++;
			char *p = ask(c, n, o->path, &status);
			if (p)
				asked[nasked++] = p;
		}
		if (holders == 0)
			printf("%s is free: nothing to revoke\n", o->path);
	}
	/* The lock to watch with -w: the one inspected. */
	char *lock = li ? strdup(li->path) : NULL;
	zkl_inspection_free(in);
	if (status == 0 && nasked == 0)
		status = 1;
	if (status == 0 && o->wait_ms != ZKL_WAIT_FOREVER && o->wait_s > 0)
		status = lock ? wait_gone(c, o, lock, asked, nasked) : EXIT_SOFTWARE;
	for (size_t k = 0; k < nasked; k++)
		free(asked[k]);
	free(asked);
	free(lock);
	zkl_client_close(c);
	if (fflush(stdout) != 0)
		status = EXIT_SOFTWARE;
	return status;
}
