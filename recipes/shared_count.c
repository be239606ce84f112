/* The shared count: a 4-byte big-endian integer in a node, Curator's SharedCount
 * layout, which a semaphore may take its limit from (semaphore.c keeps a watch on it
 * through the client's data watch, decoded here). */

#include <zklocks/semaphore.h>

#include "common.h"

enum zkl_data_read zkl__count_decode(const char *data, int len, int32_t *value)
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
	zkl_clear_error();
	if (!c || !value)
		return zkl_fail(ZKL_EINVAL, "%s is NULL", c ? "value pointer" : "client");
	int rc = zkl_path_check(path, "count path");
	if (rc != 0)
		return rc;
	struct zkl_op *op = NULL;
	if ((rc = zkl_node_get(c, path, "shared count", &op)) != 0)
		return rc;
	if (zkl__count_decode(op->value, op->value_len, value) != ZKL_DATA_VALUE)
		rc = zkl_fail(ZKL_EZK, "shared count %s holds %d bytes, not a 4-byte integer",
		              path, op->value_len);
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
	return zkl_node_put(c, path, b, 4, "shared count");
}
