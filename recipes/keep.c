/* A held lock handed to a TTL node (see <zklocks/keep.h>): a maintenance hold.
 *
 * The new node is made beside l's, named as l's but with a fresh uuid: the same marker
 * and sequence number, so it stands where l's node stood in every library's queue order
 * (by number; a tie between the two, for the moment both exist, is between our own two
 * nodes). Then l is released as usual. Contenders that watched l's node see it go, list
 * the queue again, and find the new node ahead of them: they wait for it. A process that
 * dies between the two steps loses l's node with its session, which leaves the same
 * queue. The create cannot be in one transaction with the release: the C client's multi
 * takes no TTL create. */
#include <stdio.h>
#include <string.h>

#include <zklocks/keep.h>

#include "lock_internal.h"
#include "names.h"

/* The name of the node that takes the place of name (l's): a fresh uuid, the rest
 * kept. Returns 0 or a ZKL_E* code. */
static int keeper_name(const char *name, char *out, size_t size)
{
	zkl_child ch;
	if (!zkl__child_parse(name, &ch) || !zkl__kind_is_writer(ch.kind) ||
	    ch.kind == ZKL_KIND_LATCH || ch.kind == ZKL_KIND_LEASE)
		return zkl__fail(ZKL_ENOTSUP, "node %s is not an exclusive lock's: its hold "
		                 "cannot be kept", name);
	const char *marker = strstr(name, zkl__kind_marker(ch.kind));
	/* The last occurrence: the uuid's own text never holds a marker, but be sure. */
	for (const char *m = marker; m; m = strstr(m + 1, zkl__kind_marker(ch.kind)))
		marker = m;
	char uuid[ZKL_UUID_LEN + 1];
	zkl__uuid(uuid);
	int n;
	if (strncmp(name, "_c_", 3) == 0) {
		n = snprintf(out, size, "_c_%s-%s", uuid, marker);
	} else {
		/* kazoo's names: the uuid in hex, without dashes. */
		char hex[ZKL_UUID_LEN + 1];
		size_t k = 0;
		for (const char *p = uuid; *p; p++) {
			if (*p != '-')
				hex[k++] = *p;
		}
		hex[k] = 0;
		n = snprintf(out, size, "%s%s", hex, marker);
	}
	if (n < 0 || (size_t)n >= size)
		return zkl__fail(ZKL_EINVAL, "node name %s is too long", name);
	return 0;
}

/* Makes the TTL node at path, once even across a lost connection. Returns a ZooKeeper
 * code or a ZKL_E* code. */
static int keeper_create(zkl_client *c, const char *path, const void *data, size_t len,
                         int64_t ttl_ms)
{
	struct zkl_req mk = {.kind = ZKL_OP_CREATE, .path = path, .data = data, .len = (int)len,
	                     .mode = ZOO_PERSISTENT_WITH_TTL, .ttl = ttl_ms};
	int zrc = ZCONNECTIONLOSS;
	for (int attempt = 0; attempt < 3 && zrc == ZCONNECTIONLOSS; attempt++) {
		if (attempt > 0) {
			/* Made before the connection went? */
			struct zkl_req ex = {.kind = ZKL_OP_EXISTS, .path = path};
			zrc = zkl__request(c, &ex, zkl__deadline(-1), NULL);
			if (zrc == ZOK)
				return ZOK;
			if (zrc != ZNONODE)
				continue;
		}
		zrc = zkl__request(c, &mk, zkl__deadline(-1), NULL);
		if (zrc == ZNODEEXISTS && attempt > 0)
			zrc = ZOK; /* ours: the name has a fresh uuid */
	}
	return zrc;
}

int zkl_lock_keep(zkl_lock *l, int64_t ttl_ms, const void *data, size_t len, char *node,
                  size_t size)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (ttl_ms < 1 || ttl_ms > ZKL_KEEP_TTL_MAX)
		return zkl__fail(ZKL_EINVAL, "time to live %lld ms is out of range 1..%lld",
		                 (long long)ttl_ms, (long long)ZKL_KEEP_TTL_MAX);
	if ((!data && len > 0) || len > ZKL_RECORD_MAX)
		return zkl__fail(ZKL_EINVAL, "data NULL with a length, or longer than %d bytes",
		                 ZKL_RECORD_MAX);
	if (!l->c || !l->ops->hold_node)
		return zkl__fail(ZKL_ENOTSUP, "a %s has no node of its own to keep", l->kind);
	char held[ZKL_PATH_MAX + 1];
	pthread_mutex_lock(l->mu);
	int h = l->ops->hold_node(l, held, sizeof held);
	pthread_mutex_unlock(l->mu);
	if (h < 0)
		return zkl__fail(ZKL_ELOST, "%s %s was lost: release it", l->kind, l->path);
	if (h == 0)
		return zkl__fail(ZKL_ENOTHELD, "%s %s is not held here", l->kind, l->path);
	const char *slash = strrchr(held, '/');
	char name[256], path[ZKL_PATH_MAX + 1];
	int rc = keeper_name(slash + 1, name, sizeof name);
	if (rc != 0)
		return rc;
	int n = snprintf(path, sizeof path, "%.*s/%s", (int)(slash - held), held, name);
	if (n < 0 || (size_t)n >= sizeof path)
		return zkl__fail(ZKL_EINVAL, "path of %s is too long", name);
	int zrc = keeper_create(l->c, path, data, len, ttl_ms);
	if (zrc == ZUNIMPLEMENTED)
		return zkl__fail(ZKL_ENOTSUP, "the server makes no TTL nodes: it needs "
		                 "extendedTypesEnabled=true (lock %s is still held)", l->path);
	if (zrc != ZOK)
		return zrc <= ZKL_EINVAL ? zrc : zkl__fail_zk(zrc, "create", path);
	if (node && size > 0)
		snprintf(node, size, "%s", path);
	/* The hold stands now whatever comes: a failed release leaves l's node to its
	 * session, which the caller closes. */
	(void)zkl_lock_release(l);
	zkl__clear_error();
	return 0;
}
