/* Revocation, Curator's cooperative protocol: a revoker writes "__REVOKE__" into a
 * holder's node; the holder's revocation watch (a data watch of src/client, decoded
 * here) calls its recipe, which asks the application to release. This file is the
 * protocol's format and the revoker's side.
 *
 * Only a lock node is written: an ephemeral node whose name is a contender's (a marker
 * and a sequence number). Anything else (a record, a shared count, a lock's folder)
 * would lose its data to the marker, and nobody would be listening. The write is made
 * on the version read, so a node that changes meanwhile is looked at again. */
#include <string.h>

#include <zklocks/mutex.h>

#include "common.h"

enum zkl__data_read zkl__revoke_decode(const char *data, int len, int32_t *value)
{
	(void)value;
	const size_t n = strlen(ZKL_REVOKE_DATA);
	return data && len == (int)n && memcmp(data, ZKL_REVOKE_DATA, n) == 0 ? ZKL_DATA_REQUEST
	                                                                       : ZKL_DATA_NOTHING;
}

/* Reads node_path's stat and checks that it is a lock node: 0 and its version, or a
 * ZKL_E* code. */
static int lock_node_version(zkl_client *c, const char *node_path, int *version)
{
	struct zkl_op *op = NULL;
	int rc = zkl__node_get(c, node_path, "nothing to revoke: node", &op);
	if (rc != 0)
		return rc;
	bool ephemeral = op->stat.ephemeralOwner != 0;
	*version = op->stat.version;
	zkl__op_release(c, op);
	zkl_child ch;
	if (!ephemeral || !zkl__child_parse(strrchr(node_path, '/') + 1, &ch))
		return zkl__fail(ZKL_EINVAL, "%s is not a lock node (an ephemeral node of a lock's "
		                "queue, named like \"...-lock-0000000042\"): only a lock's "
		                "holder or waiter can be asked to let go", node_path);
	return 0;
}

int zkl_revoke(zkl_client *c, const char *node_path)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(node_path, "node path");
	if (rc != 0)
		return rc;
	for (int attempt = 0; attempt < 5; attempt++) {
		int version = 0;
		if ((rc = lock_node_version(c, node_path, &version)) != 0)
			return rc;
		struct zkl_req r = {
			.kind = ZKL_OP_SET,
			.path = node_path,
			.data = ZKL_REVOKE_DATA,
			.len = (int)strlen(ZKL_REVOKE_DATA),
			.version = version,
		};
		int zrc = zkl__request(c, &r, zkl__deadline(-1), NULL);
		if (zrc == ZBADVERSION)
			continue; /* written meanwhile (another revoker): look again */
		if (zrc == ZNONODE)
			return zkl__fail(ZKL_ENOTHELD, "%s does not exist: nothing to revoke",
			                node_path);
		if (zrc < -1000)
			return zrc;
		if (zrc != ZOK)
			return zkl__fail_zk(zrc, "cannot ask for revocation of", node_path);
		return 0;
	}
	return zkl__fail(ZKL_EZK, "cannot ask for revocation of %s: its data keeps changing",
	                node_path);
}
