/* The shared count: a 4-byte big-endian integer in a node, Curator's SharedCount
 * layout, which a semaphore may take its limit from (semaphore.c keeps a watch on it
 * through the client's count watch). */
#include <string.h>

#include <zklocks/semaphore.h>

#include "common.h"

int zkl_shared_count_get(zkl_client *c, const char *path, int32_t *value)
{
	zkl_clear_error();
	if (!c || !value)
		return zkl_fail(ZKL_EINVAL, "%s is NULL", c ? "value pointer" : "client");
	int rc = zkl_path_check(path, "count path");
	if (rc != 0)
		return rc;
	struct zkl_req r = {.kind = ZKL_OP_GET, .path = path};
	struct zkl_op *op = NULL;
	int zrc = zkl_request(c, &r, zkl_deadline(-1), &op);
	if (zrc != ZOK && op)
		zkl_op_release(c, op);
	if (zrc == ZNONODE)
		return zkl_fail(ZKL_ENOTHELD, "shared count %s does not exist", path);
	if (zrc < -1000)
		return zrc;
	if (zrc != ZOK)
		return zkl_fail_zk(zrc, "cannot read", path);
	rc = 0;
	if (op->value_len != 4) {
		rc = zkl_fail(ZKL_EZK, "shared count %s holds %d bytes, not a 4-byte integer",
		              path, op->value_len);
	} else {
		const unsigned char *b = (const unsigned char *)op->value;
		*value = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		                   (uint32_t)b[2] << 8 | (uint32_t)b[3]);
	}
	zkl_op_release(c, op);
	return rc;
}

int zkl_shared_count_set(zkl_client *c, const char *path, int32_t value)
{
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl_path_check(path, "count path");
	if (rc != 0)
		return rc;
	unsigned char b[4] = {(unsigned char)((uint32_t)value >> 24),
	                      (unsigned char)((uint32_t)value >> 16),
	                      (unsigned char)((uint32_t)value >> 8), (unsigned char)value};
	struct zkl_req set = {.kind = ZKL_OP_SET, .path = path, .data = b, .len = 4, .version = -1};
	for (int attempt = 0; attempt < 5; attempt++) {
		int zrc = zkl_request(c, &set, zkl_deadline(-1), NULL);
		if (zrc == ZOK)
			return 0;
		if (zrc != ZNONODE)
			return zrc < -1000 ? zrc : zkl_fail_zk(zrc, "cannot set", path);
		/* Create it, with its parents (containers would vanish: make them persistent). */
		struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = path, .data = b, .len = 4,
		                         .mode = ZOO_PERSISTENT};
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
	return zkl_fail(ZKL_EZK, "cannot set shared count %s: it keeps changing", path);
}
