/* Pruning: deleting the empty lock folders under a prefix (zkl_prune(), <zklocks/inspect.h>).
 *
 * Folders made persistent (a server without containers, or lock_folders) stay when
 * empty. A folder here is a node with no data that no session owns; it goes once it has
 * no child. The walk is depth first, so that a folder whose folders all went goes too.
 *
 * Why it never takes a lock from anyone, nor fails an acquirer: a folder is deleted with
 * the version it was seen at, and ZooKeeper refuses to delete a node that has a child
 * (ZNOTEMPTY). A contender's node created before the delete makes it fail, and the
 * folder stays; one created after it finds no folder (ZNONODE), and its acquire makes
 * the folder again, as it does for any folder that is missing (the engine, acquire.c).
 * Data written to the folder meanwhile makes the delete fail too (ZBADVERSION). */
#include <stdlib.h>
#include <string.h>

#include <zklocks/inspect.h>

#include "common.h"

struct prune {
	zkl_client *c;
	bool dry_run;
	int64_t deadline;
	zkl_prune_fn fn;
	void *data;
	int count;
};

/* Runs r to its answer, again after a lost connection (a delete that was applied then
 * answers ZNONODE the second time). Returns the ZooKeeper code, with *out the op on ZOK
 * if out is not NULL; or a ZKL_E* code with its detail. */
static int ask(struct prune *p, const struct zkl_req *r, struct zkl_op **out)
{
	for (;;) {
		struct zkl_op *op = NULL;
		int zrc = zkl__request(p->c, r, p->deadline, &op);
		if (zrc == ZOK && out) {
			*out = op;
			return zrc;
		}
		if (op)
			zkl__op_release(p->c, op);
		if (zrc == ZKL_ETIMEDOUT)
			return zkl__fail(ZKL_ETIMEDOUT, "no answer from ZooKeeper for %s in time",
			                r->path);
		if (zrc < -1000)
			return zrc;
		const enum zkl__zk_class k = zkl__zk_class(zrc);
		if (k != ZKL_ZK_UNKNOWN && k != ZKL_ZK_EXPIRED)
			return zrc;
		int rc = zkl__await_connection(p->c, 0, zkl__now_ms() + 100, p->deadline);
		if (rc == ZKL_ETIMEDOUT)
			return zkl__fail(ZKL_ETIMEDOUT, "the connection to ZooKeeper did not come "
			                "back in time");
		if (rc != 0)
			return rc;
	}
}

static int zk_error(int zrc, const char *what, const char *path)
{
	return zrc < -1000 ? zrc : zkl__fail_zk(zrc, what, path);
}

/* Prunes path and what is under it. Returns 1 if path is gone (or, dry, would be), 0 if
 * it stays, or a ZKL_E* code. */
static int walk(struct prune *p, const char *path)
{
	struct zkl_op *op = NULL;
	struct zkl_req list = {.kind = ZKL_OP_CHILDREN, .path = path};
	int zrc = ask(p, &list, &op);
	if (zrc == ZNONODE)
		return 1;
	if (zrc == ZNOAUTH)
		return 0; /* not ours to read, so not ours to prune */
	if (zrc != ZOK)
		return zk_error(zrc, "cannot list", path);
	bool all_gone = true;
	int rc = 0;
	for (int i = 0; i < op->count && rc >= 0; i++) {
		const char *name = op->names[i];
		if (strcmp(path, "/") == 0 && strcmp(name, "zookeeper") == 0) {
			all_gone = false;
			continue;
		}
		char *child = zkl__path_join(path, name);
		if (!child) {
			rc = zkl__fail(ZKL_ENOMEM, "out of memory");
			break;
		}
		rc = walk(p, child);
		free(child);
		all_gone &= rc == 1;
	}
	zkl__op_release(p->c, op);
	if (rc < 0)
		return rc;
	if (!all_gone || strcmp(path, "/") == 0)
		return 0;
	struct zkl_req ex = {.kind = ZKL_OP_EXISTS, .path = path};
	if ((zrc = ask(p, &ex, &op)) == ZNONODE)
		return 1;
	if (zrc != ZOK)
		return zk_error(zrc, "cannot read", path);
	const struct Stat st = op->stat;
	zkl__op_release(p->c, op);
	if (st.dataLength != 0 || st.ephemeralOwner != 0)
		return 0;
	if (p->dry_run) {
		p->count++;
		if (p->fn)
			p->fn(path, p->data);
		return 1;
	}
	if (st.numChildren != 0)
		return 0;
	struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = path, .version = st.version,
	                      .check_version = true};
	zrc = ask(p, &del, NULL);
	if (zrc == ZNOTEMPTY || zrc == ZBADVERSION || zrc == ZNOAUTH)
		return 0; /* in use again, written to, or not ours: it stays */
	if (zrc == ZNONODE)
		return 1;
	if (zrc != ZOK)
		return zk_error(zrc, "cannot delete", path);
	p->count++;
	if (p->fn)
		p->fn(path, p->data);
	return 1;
}

int zkl_prune(zkl_client *c, const char *prefix, bool dry_run, int timeout_ms,
              zkl_prune_fn fn, void *data)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__check_timeout(timeout_ms);
	if (rc == 0 && (!prefix || strcmp(prefix, "/") != 0))
		rc = zkl__path_check(prefix, "prefix");
	if (rc != 0)
		return rc;
	if (timeout_ms == 0)
		timeout_ms = zkl_client_session_timeout(c);
	struct prune p = {.c = c, .dry_run = dry_run, .fn = fn, .data = data,
	                  .deadline = zkl__deadline(timeout_ms > 0 ? timeout_ms : -1)};
	rc = walk(&p, prefix);
	return rc < 0 ? rc : p.count;
}
