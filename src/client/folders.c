/* Lock folders: what kind of node a client makes a missing folder with.
 *
 * A folder is a container where the server has them, so that the server removes it once
 * empty. A server without containers (ZooKeeper 3.4, and servers that speak ZooKeeper's
 * protocol without them) refuses the create with ZUNIMPLEMENTED or ZBADARGUMENTS; with
 * ZKL_FOLDERS_AUTO the client then makes it, and every folder after it, as a persistent
 * node, and says so once in its log. The decision is the client's, not a session's: a
 * server does not gain containers by a reconnection. The engine asks for the mode before
 * each folder create and tells the answer back (acquire.c). */
#include "internal.h"

int zkl__folders_check(const zkl_client_options *o)
{
	if (o->lock_folders != ZKL_FOLDERS_AUTO && o->lock_folders != ZKL_FOLDERS_CONTAINER &&
	    o->lock_folders != ZKL_FOLDERS_PERSISTENT)
		return zkl__fail(ZKL_EINVAL, "lock_folders %d is not a zkl_lock_folders value",
		                (int)o->lock_folders);
	return 0;
}

int zkl__folder_mode(zkl_client *c)
{
	if (c->lock_folders == ZKL_FOLDERS_PERSISTENT ||
	    (c->lock_folders == ZKL_FOLDERS_AUTO && atomic_load(&c->containers_refused)))
		return ZOO_PERSISTENT;
	return ZOO_CONTAINER;
}

int zkl__folder_refused(zkl_client *c, int mode, int zrc, const char *path)
{
	if (mode != ZOO_CONTAINER || (zrc != ZUNIMPLEMENTED && zrc != ZBADARGUMENTS))
		return 0;
	if (c->lock_folders == ZKL_FOLDERS_CONTAINER)
		return zkl__fail(ZKL_EZK, "cannot create the lock folder %s: the server refuses "
		                "container nodes (%s), and lock_folders is ZKL_FOLDERS_CONTAINER",
		                path, zerror(zrc));
	if (!atomic_exchange(&c->containers_refused, true))
		zkl__log(c, ZKL_LOG_WARN, "the server refuses container nodes (%s): this client "
		        "makes lock folders as persistent nodes, which stay when empty "
		        "(zkl_prune(), zklock prune)", zerror(zrc));
	return 1;
}
