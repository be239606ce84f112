/* Records: persistent nodes of the application's own, read and written on the client's
 * session (see <zklocks/record.h>). zkl__node_put() is also how a shared count is set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/record.h>

#include "common.h"

/* Deletes the folders made[0..n) in reverse (the deepest first), best effort: one that
 * has gained children meanwhile is someone else's now, and stays. */
static void folders_undo(zkl_client *c, char **made, size_t n)
{
	while (n-- > 0) {
		struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = made[n], .version = -1};
		zkl__request(c, &del, zkl__deadline(-1), NULL);
		free(made[n]);
	}
}

/* Creates the missing folders above path, the shallowest first, and adds the paths of
 * those it made to made[*n]. Containers: once the record is deleted and nothing else is
 * in them, the server removes them (a server without containers: persistent). Returns
 * ZOK or a ZooKeeper or ZKL_E* code. */
static int folders_make(zkl_client *c, const char *path, char **made, size_t *n)
{
	size_t parent = zkl__path_parent_len(path);
	for (size_t i = 1; i <= parent; i++) {
		if (i < parent && path[i] != '/')
			continue;
		char *folder = strndup(path, i);
		if (!folder)
			return zkl__fail(ZKL_ENOMEM, "out of memory");
		struct zkl_req mk = {.kind = ZKL_OP_CREATE, .path = folder, .mode = ZOO_CONTAINER};
		int zrc = zkl__request(c, &mk, zkl__deadline(-1), NULL);
		if (zrc == ZUNIMPLEMENTED) {
			mk.mode = ZOO_PERSISTENT;
			zrc = zkl__request(c, &mk, zkl__deadline(-1), NULL);
		}
		if (zrc == ZOK) {
			made[(*n)++] = folder;
			continue;
		}
		free(folder);
		if (zrc != ZNODEEXISTS)
			return zrc;
	}
	return ZOK;
}

int zkl__node_put(zkl_client *c, const char *path, const void *data, int len, const char *what)
{
	struct zkl_req set = {.kind = ZKL_OP_SET, .path = path, .data = data, .len = len,
	                      .version = -1};
	/* At most one folder per level of the path is made. */
	size_t levels = 0;
	for (const char *p = path; *p; p++)
		levels += *p == '/';
	char **made = calloc(levels, sizeof *made);
	if (!made)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	size_t nmade = 0;
	int zrc = ZOK;
	for (int attempt = 0; attempt < 5; attempt++) {
		zrc = zkl__request(c, &set, zkl__deadline(-1), NULL);
		if (zrc != ZNONODE)
			break;
		/* Create it, with its parents. */
		struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = path, .data = data,
		                         .len = len, .mode = ZOO_PERSISTENT};
		zrc = zkl__request(c, &create, zkl__deadline(-1), NULL);
		if (zrc == ZNONODE && nmade == 0) {
			zrc = folders_make(c, path, made, &nmade);
			if (zrc == ZOK)
				zrc = zkl__request(c, &create, zkl__deadline(-1), NULL);
		}
		if (zrc != ZNODEEXISTS && zrc != ZNONODE)
			break; /* made, or failed; else it came or its folder went: again */
	}
	if (zrc == ZOK) {
		for (size_t i = 0; i < nmade; i++)
			free(made[i]);
		free(made);
		return 0;
	}
	/* Leave nothing behind: the folders made for it go again. */
	int rc = zrc < -1000 ? zrc
	         : zrc == ZNONODE || zrc == ZNODEEXISTS
	         ? zkl__fail(ZKL_EZK, "cannot set %s %s: it keeps changing", what, path)
	         : zkl__fail_zk(zrc, "cannot set", path);
	char saved[512];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	folders_undo(c, made, nmade);
	free(made);
	return zkl__fail(rc, "%s", saved);
}

int zkl__record_folders(zkl_client *c, const char *path)
{
	size_t levels = 0;
	for (const char *p = path; *p; p++)
		levels += *p == '/';
	char **made = calloc(levels, sizeof *made);
	if (!made)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	size_t nmade = 0;
	int zrc = folders_make(c, path, made, &nmade);
	for (size_t i = 0; i < nmade; i++)
		free(made[i]);
	free(made);
	if (zrc == ZOK)
		return 0;
	return zrc < -1000 ? zrc : zkl__fail_zk(zrc, "cannot make the folders of", path);
}

int zkl__node_get(zkl_client *c, const char *path, const char *what, struct zkl_op **op)
{
	struct zkl_req r = {.kind = ZKL_OP_GET, .path = path};
	*op = NULL;
	int zrc = zkl__request(c, &r, zkl__deadline(-1), op);
	if (zrc != ZOK && *op) {
		zkl__op_release(c, *op);
		*op = NULL;
	}
	if (zrc == ZNONODE)
		return zkl__fail(ZKL_ENOTHELD, "%s %s does not exist", what, path);
	if (zrc < -1000)
		return zrc;
	if (zrc != ZOK)
		return zkl__fail_zk(zrc, "cannot read", path);
	return 0;
}

/* The checks both functions make. */
static int record_check(zkl_client *c, const char *path)
{
	zkl__clear_error();
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	int rc = zkl__path_check(path, "record path");
	if (rc != 0)
		return rc;
	if (zkl__is_loop_thread(c))
		return zkl__fail(ZKL_EDEADLK, "a record is read or written on a thread that runs "
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
		return zkl__fail(ZKL_EINVAL, "%s pointer is NULL", data ? "length" : "data");
	struct zkl_op *op = NULL;
	if ((rc = zkl__node_get(c, path, "record", &op)) != 0)
		return rc;
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
	zkl__op_release(c, op);
	return copy ? 0 : zkl__fail(ZKL_ENOMEM, "out of memory");
}

int zkl_record_set(zkl_client *c, const char *path, const void *data, size_t len)
{
	int rc = record_check(c, path);
	if (rc != 0)
		return rc;
	if (len > ZKL_RECORD_MAX)
		return zkl__fail(ZKL_EINVAL, "record of %zu bytes: at most %d", len, ZKL_RECORD_MAX);
	if (!data && len > 0)
		return zkl__fail(ZKL_EINVAL, "record data is NULL with a length of %zu", len);
	/* A create is the longer request: check it before any parent is made. */
	if ((rc = zkl__request_fits(c, ZKL_OP_CREATE, path, strlen(path), (int)len)) != 0)
		return rc;
	return zkl__node_put(c, path, data, (int)len, "record");
}

int zkl_record_delete(zkl_client *c, const char *path)
{
	int rc = record_check(c, path);
	if (rc != 0)
		return rc;
	struct zkl_req del = {.kind = ZKL_OP_DELETE, .path = path, .version = -1};
	int zrc = zkl__request(c, &del, zkl__deadline(-1), NULL);
	if (zrc == ZOK)
		return 0;
	if (zrc == ZNONODE)
		return zkl__fail(ZKL_ENOTHELD, "record %s does not exist", path);
	if (zrc == ZNOTEMPTY)
		return zkl__fail(ZKL_EINVAL, "%s has children: it is not a record", path);
	return zrc < -1000 ? zrc : zkl__fail_zk(zrc, "cannot delete", path);
}
