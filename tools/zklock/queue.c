/* What a queue looks like, for status, list, revoke and -v: every layout found at a
 * path (its own queue, a semaphore's leases/ and locks/), each node with its role. */
#include "zklock.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- what a queue looks like ---- */

/* A node's kind, from the marker before its sequence number (Curator's and kazoo's). */
static const struct {
	const char *marker;
	const char *layout;
	bool reader;
} kinds[] = {
	{ "__READ__", "read", true },
	{ "__WRIT__", "write", false },
	{ "__rlock__", "kazoo-read", true },
	{ "__lock__", "kazoo-lock", false },
	{ "lease-", "lease", false },
	{ "latch-", "latch", false },
	{ "lock-", "mutex", false },
};

int kind_of(const char *node)
{
	const char *name = strrchr(node, '/');
	name = name ? name + 1 : node;
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		size_t ml = strlen(kinds[k].marker);
		const char *last = NULL;
		for (const char *p = strstr(name, kinds[k].marker); p; p = strstr(p + 1, kinds[k].marker))
			last = p;
		if (!last)
			continue;
		const char *seq = last + ml;
		size_t n = strlen(seq);
		if (n != 10 && !(n == 11 && seq[0] == '-') && !(n == 10 && seq[0] == '-'))
			continue;
		bool digits = true;
		for (size_t i = seq[0] == '-'; i < n; i++)
			digits = digits && isdigit((unsigned char)seq[i]);
		if (digits)
			return (int)k;
	}
	return -1;
}

void view_free(struct queue_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->nodes[i].p.path);
		free(v->nodes[i].p.data);
	}
	free(v->nodes);
	memset(v, 0, sizeof *v);
}

/* Appends the participants of folder to v, with roles. part: 0 the lock path itself,
 * 1 a semaphore's leases/, 2 a semaphore's locks/. Returns 0 or a ZKL_E* code. */
static int view_add(zkl_client *c, const char *folder, int part, struct queue_view *v)
{
	zkl_mutex *m;
	int rc = zkl_mutex_new(&m, c, folder);
	if (rc != 0)
		return rc;
	zkl_participant *list;
	size_t n;
	rc = zkl_lock_participants(zkl_mutex_lock(m), &list, &n);
	zkl_mutex_free(m);
	if (rc != 0)
		return rc;
	struct qnode *grown = n ? realloc(v->nodes, (v->n + n) * sizeof *grown) : v->nodes;
	if (n && !grown) {
		zkl_participants_free(list, n);
		return ZKL_ENOMEM;
	}
	v->nodes = grown;
	/* Holders of the lock path's queue: the readers before the first writer, or else the
	 * first node (a writer, a mutex, the leader). */
	size_t readers = 0;
	while (readers < n && kind_of(list[readers].path) >= 0 &&
	       kinds[kind_of(list[readers].path)].reader)
		readers++;
	for (size_t i = 0; i < n; i++) {
		struct qnode *q = &v->nodes[v->n++];
		q->p = list[i];
		int k = kind_of(list[i].path);
		q->layout = k >= 0 ? kinds[k].layout : "unknown";
		bool holds;
		if (part == 1) {
			q->layout = "semaphore";
			q->role = "lease";
			holds = true;
		} else if (part == 2) {
			q->layout = "semaphore";
			q->role = i == 0 ? "gate" : "waiting";
			holds = false;
		} else {
			holds = readers > 0 ? i < readers : i == 0;
			bool latch = k >= 0 && strcmp(kinds[k].layout, "latch") == 0;
			q->role = holds ? (latch ? "leader" : "holder") : "waiting";
		}
		q->p.holder = holds;
		if (holds)
			v->holders++;
		else
			v->waiting++;
	}
	/* The array's strings now belong to v. */
	free(list);
	return 0;
}

/* Everything queued at path: its own queue, then a semaphore's leases and its gate. */
int view_collect(zkl_client *c, const char *path, struct queue_view *v)
{
	memset(v, 0, sizeof *v);
	char sub[ZKL_PATH_MAX + 16];
	int rc = view_add(c, path, 0, v);
	snprintf(sub, sizeof sub, "%s/leases", path);
	if (rc == 0 && strlen(path) + 7 < ZKL_PATH_MAX)
		rc = view_add(c, sub, 1, v);
	size_t gate = v->n;
	snprintf(sub, sizeof sub, "%s/locks", path);
	if (rc == 0 && strlen(path) + 6 < ZKL_PATH_MAX)
		rc = view_add(c, sub, 2, v);
	if (rc != 0) {
		view_free(v);
		return rc;
	}
	/* The taker at a semaphore's gate creates its lease and waits there until the leases
	 * are few enough: its lease (the newest, with the same data) is not held yet. The
	 * limit itself is not in ZooKeeper, so this is how a waiting lease is told apart. */
	if (gate < v->n && v->nodes[gate].p.data_len > 0) {
		const zkl_participant *g = &v->nodes[gate].p;
		for (size_t i = gate; i-- > 0;) {
			struct qnode *q = &v->nodes[i];
			if (strcmp(q->role, "lease") != 0)
				break;
			if (q->p.data_len == g->data_len &&
			    memcmp(q->p.data, g->data, (size_t)g->data_len) == 0) {
				q->role = "waiting";
				q->p.holder = false;
				v->holders--;
				v->waiting++;
			}
			break; /* only the newest lease can be the gate holder's */
		}
	}
	return 0;
}

