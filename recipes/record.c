/* Records: persistent nodes of the application's own, read and written on the client's
 * session (see <zklocks/record.h>). zkl_node_put() is also how a shared count is set. */
#include <stdlib.h>
#include <string.h>

#include <zklocks/record.h>

#include "common.h"

int zkl_node_put(zkl_client *c, const char *path, const void *data, int len, const char *what)
{
	struct zkl_req set = {.kind = ZKL_OP_SET, .path = path, .data = data, .len = len,
	                      .version = -1};
	for (int attempt = 0; attempt < 5; attempt++) {
		int zrc = zkl_request(c, &set, zkl_deadline(-1), NULL);
		if (zrc == ZOK)
			return 0;
		if (zrc != ZNONODE)
			return zrc < -1000 ? zrc : zkl_fail_zk(zrc, "cannot set", path);
		/* Create it, with its parents (containers would vanish: make them persistent). */
		struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = path, .data = data,
		                         .len = len, .mode = ZOO_PERSISTENT};
		zrc = zkl_request(c, &create, zkl_deadline(-1), NULL);
		if (zrc == ZOK)
			return 0;
		if (zrc == ZNONODE) {
			size_t p = zkl_path_parent_len(path);
			char *parent = strndup(path, p);
			if (!parent)
				return zkl_fail(ZKL_ENOMEM, "out of memory");
			struct zkl_req mk = {.kind = ZKL_OP_CREATE, .path = parent, .mode = ZOO_PERSISTENT};
			/* Walk up until a create works, then come back down on the next attempts. */
			while ((zrc = zkl_request(c, &mk, zkl_deadline(-1), NULL)) == ZNONODE) {
				size_t pp = zkl_path_parent_len(parent);
				if (pp == 0)
					break;
				parent[pp] = 0;
			}
			free(parent);
			if (zrc != ZOK && zrc != ZNODEEXISTS)
				return zrc < -1000 ? zrc : zkl_fail_zk(zrc, "cannot create", path);
			continue;
		}
		if (zrc != ZNODEEXISTS)
			return zrc < -1000 ? zrc : zkl_fail_zk(zrc, "cannot create", path);
	}
	return zkl_fail(ZKL_EZK, "cannot set %s %s: it keeps changing", what, path);
}

/* The checks both functions make. */
static int record_check(zkl_client *c, const char *path)
{
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl_path_check(path, "record path");
	if (rc != 0)
		return rc;
	if (zkl_is_loop_thread(c))
		return zkl_fail(ZKL_EDEADLK, "a record is read or written on a thread that runs "
		                "the client's loop, which never waits for the server");
	return 0;
}

int zkl_record_get(zkl_client *c, const char *path, char **data, size_t *len,
                   int64_t *mtime_ms)
{
	if (data)
		*data = NULL;
	if (len)
		*len = 0;
	int rc = record_check(c, path);
	if (rc != 0)
		return rc;
	if (!data || !len)
		return zkl_fail(ZKL_EINVAL, "%s pointer is NULL", data ? "length" : "data");
	struct zkl_req r = {.kind = ZKL_OP_GET, .path = path};
	struct zkl_op *op = NULL;
	int zrc = zkl_request(c, &r, zkl_deadline(-1), &op);
	if (zrc != ZOK && op)
		zkl_op_release(c, op);
	if (zrc == ZNONODE)
		return zkl_fail(ZKL_ENOTHELD, "record %s does not exist", path);
	if (zrc < -1000)
		return zrc;
	if (zrc != ZOK)
		return zkl_fail_zk(zrc, "cannot read", path);
	size_t n = op->value_len > 0 ? (size_t)op->value_len : 0;
	char *copy = malloc(n + 1);
	if (copy) {
		if (n)
			memcpy(copy, op->value, n);
		copy[n] = '\0';
		*data = copy;
		*len = n;
		if (mtime_ms)
			*mtime_ms = op->stat.mtime;
	}
	zkl_op_release(c, op);
	return copy ? 0 : zkl_fail(ZKL_ENOMEM, "out of memory");
}

int zkl_record_set(zkl_client *c, const char *path, const void *data, size_t len)
{
	int rc = record_check(c, path);
	if (rc != 0)
		return rc;
	if (len > ZKL_RECORD_MAX)
		return zkl_fail(ZKL_EINVAL, "record of %zu bytes: at most %d", len, ZKL_RECORD_MAX);
	if (!data && len > 0)
		return zkl_fail(ZKL_EINVAL, "record data is NULL with a length of %zu", len);
	return zkl_node_put(c, path, data, (int)len, "record");
}
