/* Revocation, Curator's cooperative protocol: a revoker writes "__REVOKE__" into a
 * holder's node; the holder's revocation watch (a data watch of src/client, decoded
 * here) calls its recipe, which asks the application to release. This file is the
 * protocol's format and the revoker's side. */
#include <string.h>

#include <zklocks/mutex.h>

#include "common.h"

enum zkl_data_read zkl__revoke_decode(const char *data, int len, int32_t *value)
{
	(void)value;
	const size_t n = strlen(ZKL_REVOKE_DATA);
	return data && len == (int)n && memcmp(data, ZKL_REVOKE_DATA, n) == 0 ? ZKL_DATA_REQUEST
	                                                                       : ZKL_DATA_NOTHING;
}

int zkl_revoke(zkl_client *c, const char *node_path)
{
	zkl_clear_error();
	if (!c)
		return zkl_fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl_path_check(node_path, "node path");
	if (rc != 0)
		return rc;
	struct zkl_req r = {
		.kind = ZKL_OP_SET,
		.path = node_path,
		.data = ZKL_REVOKE_DATA,
		.len = (int)strlen(ZKL_REVOKE_DATA),
		.version = -1,
	};
	int zrc = zkl_request(c, &r, zkl_deadline(-1), NULL);
	if (zrc == ZNONODE)
		return zkl_fail(ZKL_ENOTHELD, "%s does not exist: nothing to revoke", node_path);
	if (zrc < -1000)
		return zrc;
	if (zrc != ZOK)
		return zkl_fail_zk(zrc, "cannot ask for revocation of", node_path);
	return 0;
}
