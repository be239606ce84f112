/* What one request may carry: the servers' jute.maxbuffer.
 *
 * A ZooKeeper server reads a request only if its length (what follows the 4-byte length
 * field) is at most its jute.maxbuffer (1,048,575 bytes unless configured otherwise);
 * anything longer makes it close the connection. The C client then reconnects and sends
 * the same request again, and again: every hold of the client is suspended each time, and
 * the call never ends. So a create or a set is measured before it is sent, as the server
 * will read it, and refused here with a message that names the limit. */
#include <string.h>

#include "internal.h"

/* A string or a buffer: a 4-byte length, then its bytes. */
static int64_t field(int64_t len)
{
	return 4 + (len > 0 ? len : 0);
}

int64_t zkl__request_size(const zkl_client *c, enum zkl_op_kind kind, size_t path_len,
                         int data_len)
{
	/* The request header (xid, type), the path and the data. */
	int64_t n = 8 + field((int64_t)path_len) + field(data_len);
	if (kind == ZKL_OP_SET)
		return n + 4; /* the version */
	/* A create: the ACL (a count, then each entry's permissions, scheme and id), and the
	 * flags. */
	n += 4;
	const struct ACL_vector *acl = c->acl;
	for (int32_t i = 0; acl && i < acl->count; i++) {
		const struct Id *id = &acl->data[i].id;
		n += 4 + field(id->scheme ? (int64_t)strlen(id->scheme) : 0) +
		     field(id->id ? (int64_t)strlen(id->id) : 0);
	}
	return n + 4;
}

int zkl__request_fits(const zkl_client *c, enum zkl_op_kind kind, const char *name,
                     size_t path_len, int data_len)
{
	const int64_t n = zkl__request_size(c, kind, path_len, data_len);
	if (n <= c->max_request)
		return 0;
	return zkl__fail(ZKL_EINVAL, "a request of %lld bytes, more than the %d a server reads "
	                "in one request (its jute.maxbuffer; the client's max_request option), "
	                "refused before sending: %s %d bytes of data with a path of %zu bytes "
	                "under %.60s%s", (long long)n, c->max_request,
	                kind == ZKL_OP_SET ? "writing" : "creating", data_len > 0 ? data_len : 0,
	                path_len, name, strlen(name) > 60 ? "..." : "");
}
