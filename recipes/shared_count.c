/* The shared count: a 4-byte big-endian integer in a node, Curator's SharedCount
 * layout, which a semaphore may take its limit from (semaphore.c keeps a watch on it
 * through the client's data watch, decoded here). And the count an operator sets for a
 * semaphore of fixed limit: its path's record, kept from the server's reaping. */

#include <stdio.h>
#include <stdlib.h>

#include <zklocks/semaphore.h>

#include "common.h"

enum zkl__data_read zkl__count_decode(const char *data, int len, int32_t *value)
{
	if (!data || len != 4)
		return ZKL_DATA_NOTHING;
	const unsigned char *b = (const unsigned char *)data;
	*value = (int32_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
	                   (uint32_t)b[3]);
	return ZKL_DATA_VALUE;
}

int zkl_shared_count_get(zkl_client *c, const char *path, int32_t *value)
{
	zkl__clear_error();
	if (!c || !value)
		return zkl__fail(ZKL_EINVAL, "%s is NULL", c ? "value pointer" : "client");
	int rc = zkl__path_check(path, "count path");
	if (rc != 0)
		return rc;
	struct zkl_op *op = NULL;
	if ((rc = zkl__node_get(c, path, "shared count", &op)) != 0)
		return rc;
	if (zkl__count_decode(op->value, op->value_len, value) != ZKL_DATA_VALUE)
		rc = zkl__fail(ZKL_EZK, "shared count %s holds %d bytes, not a 4-byte integer",
		              path, op->value_len);
	zkl__op_release(c, op);
	return rc;
}

int zkl_shared_count_set(zkl_client *c, const char *path, int32_t value)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(path, "count path");
	if (rc != 0)
		return rc;
	unsigned char b[4] = {(unsigned char)((uint32_t)value >> 24),
	                      (unsigned char)((uint32_t)value >> 16),
	                      (unsigned char)((uint32_t)value >> 8), (unsigned char)value};
	return zkl__node_put(c, path, b, 4, "shared count");
}

/* The count is the record every handle compares its own with: the path node's data in
 * decimal (semaphore.c). The folder is a container the server reaps once it is empty, and
 * the record with it; a persistent child, "<path>/count", keeps it (and says the count
 * in decimal for whoever looks). Clearing removes that child and empties the record: the
 * next handle records its own, and a folder the engine made goes when idle. */
int zkl_semaphore_set_count(zkl_client *c, const char *path, int count)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(path, "semaphore path");
	if (rc != 0)
		return rc;
	if (count < 0)
		return zkl__fail(ZKL_EINVAL, "count %d must be at least 1 (or 0 to clear it)", count);
	char *pin = zkl__path_join(path, ZKL_SEMAPHORE_COUNT_NODE);
	if (!pin)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	if (count == 0) {
		/* The record empties too: the next handle to arrive records its own. */
		struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = pin};
		struct zkl_req empty = {.kind = ZKL_OP_SET, .path = path, .data = "", .version = -1};
		int zrc = zkl__request(c, &del, zkl__deadline(-1), NULL);
		if (zrc == ZOK || zrc == ZNONODE)
			zrc = zkl__request(c, &empty, zkl__deadline(-1), NULL);
		rc = zrc == ZOK || zrc == ZNONODE ? 0 : zrc < -1000 ? zrc
		                                               : zkl__fail_zk(zrc, "cannot clear", path);
		free(pin);
		return rc;
	}
	char digits[16];
	int len = snprintf(digits, sizeof digits, "%d", count);
	/* The child first: it makes the folder if need be, and keeps it from then on. */
	rc = zkl__node_put(c, pin, digits, len, "semaphore count");
	if (rc == 0)
		rc = zkl__node_put(c, path, digits, len, "semaphore count");
	free(pin);
	return rc;
}
