/* What the fuzz targets on the in-memory ZooKeeper share: one fake server and one client
 * on it for the whole run (a client per input would cost threads per input), and a hook
 * that makes chosen nodes vanish between a listing and the read that follows it. */
#ifndef FUZZ_TREE_H
#define FUZZ_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakezk.h"
#include "fuzz.h"

/* A zklocks call that must return 0; on failure, its code and detail. */
#define CHECK_OK(expr)                                                                    \
	do {                                                                              \
		int rc_ = (expr);                                                         \
		if (rc_ != 0) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #expr,   \
			        zkl_errname(rc_), zkl_last_error());                      \
			abort();                                                          \
		}                                                                         \
	} while (0)

struct fuzz_tree {
	struct fz *z;
	zkl_client *c;
	int64_t peer;            /* the owner of ephemeral nodes */
	char vanish[64][640];    /* nodes deleted as a read of them arrives */
	int nvanish;
};

static struct fuzz_tree ft;

static inline enum fz_action fuzz_hook(void *arg, const struct fz_request *r, int *rc)
{
	(void)arg;
	(void)rc;
	if (r->op == FZ_GET || r->op == FZ_EXISTS) {
		for (int i = 0; i < ft.nvanish; i++) {
			if (strcmp(ft.vanish[i], r->path) == 0) {
				fz_delete(ft.z, r->path);
				break;
			}
		}
	}
	return FZ_APPLY;
}

static inline void fuzz_tree_open(void)
{
	ft.z = fz_new();
	fz_set_hook(ft.z, fuzz_hook, NULL);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.session_timeout_ms = 600000;
	if (fz_client_open(ft.z, &ft.c, &o) != 0)
		abort();
	ft.peer = fz_peer(ft.z);
}

/* Deletes path and everything under it. */
static inline void fuzz_tree_clear(const char *path)
{
	static char buf[1 << 16];
	int n = fz_children(ft.z, path, buf, sizeof buf);
	if (n > 0) {
		char *names = strdup(buf);
		CHECK(names);
		for (char *p = names, *nl; *p && (nl = strchr(p, '\n')); p = nl + 1) {
			*nl = 0;
			char *child = malloc(strlen(path) + strlen(p) + 2);
			CHECK(child);
			sprintf(child, "%s/%s", path, p);
			fuzz_tree_clear(child);
			free(child);
		}
		free(names);
	}
	if (n >= 0 && strcmp(path, "/") != 0)
		fz_delete(ft.z, path);
	ft.nvanish = 0;
}

#endif
