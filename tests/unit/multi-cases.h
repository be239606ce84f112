/* Multis and what ZooKeeper answers them: the same table runs on the in-memory ZooKeeper
 * (tests/unit/test-multi.c) and on a real server (tests/zk/test-multi.c), so the fake's
 * multi is held to what the server does. A driver gives the three calls the table needs;
 * run_multi_cases() runs every case under its own folder of base and asserts the answer,
 * each op's result, and the tree after (nothing of a failed multi applied). */
#ifndef ZKL_MULTI_CASES_H
#define ZKL_MULTI_CASES_H

#include <stdio.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

struct multi_driver {
	/* A persistent node with data "v0" (the folder of a case, and its setup). */
	void (*create)(void *ctx, const char *path);
	/* Whether path exists; if so, its data version in *version. */
	int (*exists)(void *ctx, const char *path, int *version);
	int (*multi)(void *ctx, int count, const zoo_op_t *ops, zoo_op_result_t *results);
	void *ctx;
};

struct multi_op {
	int type;          /* ZOO_CREATE_OP ... ZOO_CHECK_OP */
	const char *leaf;  /* under the case's folder */
	int version;       /* delete, set, check (-1: any) */
	int flags;         /* create */
};

#define MULTI_MAX 5

struct multi_case {
	const char *name;
	const char *setup[MULTI_MAX];    /* leaves made first */
	struct multi_op ops[MULTI_MAX];
	int n;
	int rc;
	int err[MULTI_MAX];
	const char *present[MULTI_MAX];  /* leaves there after */
	const char *absent[MULTI_MAX];   /* leaves not there after */
	int x_version;                   /* the version leaf "x" has after (-1: none) */
};

#define C_ ZOO_CREATE_OP
#define D_ ZOO_DELETE_OP
#define S_ ZOO_SETDATA_OP
#define K_ ZOO_CHECK_OP
#define RI_ ZRUNTIMEINCONSISTENCY
/* ZOO_EPHEMERAL and ZOO_SEQUENCE are variables: their values, for the table. */
#define EPH_ 1
#define SEQ_ 2

static const struct multi_case multi_cases[] = {
	{ "all-ok", { "x", "y" },
	  { { C_, "a", -1, 0 }, { S_, "x", 0, 0 }, { K_, "x", 1, 0 }, { D_, "y", -1, 0 } }, 4,
	  ZOK, { ZOK, ZOK, ZOK, ZOK }, { "a", "x" }, { "y" }, 1 },
	{ "middle-fails", { "x" },
	  { { C_, "a", -1, 0 }, { S_, "nope", -1, 0 }, { C_, "b", -1, 0 } }, 3,
	  ZNONODE, { ZOK, ZNONODE, RI_ }, { "x" }, { "a", "b" }, 0 },
	{ "first-check-fails", { "x" },
	  { { K_, "nope", -1, 0 }, { S_, "x", -1, 0 }, { D_, "x", -1, 0 } }, 3,
	  ZNONODE, { ZNONODE, RI_, RI_ }, { "x" }, { NULL }, 0 },
	{ "last-bad-version", { "x" },
	  { { C_, "a", -1, 0 }, { S_, "x", -1, 0 }, { K_, "x", 5, 0 } }, 3,
	  ZBADVERSION, { ZOK, ZOK, ZBADVERSION }, { "x" }, { "a" }, 0 },
	{ "create-twice", { "x" },
	  { { C_, "a", -1, 0 }, { C_, "a", -1, 0 } }, 2,
	  ZNODEEXISTS, { ZOK, ZNODEEXISTS }, { "x" }, { "a" }, 0 },
	{ "delete-not-empty", { "x", "x/c" },
	  { { S_, "x", 0, 0 }, { D_, "x", -1, 0 } }, 2,
	  ZNOTEMPTY, { ZOK, ZNOTEMPTY }, { "x", "x/c" }, { NULL }, 0 },
	{ "made-and-gone", { "x" },
	  { { C_, "a", -1, 0 }, { C_, "a/b", -1, 0 }, { D_, "a/b", -1, 0 }, { D_, "a", -1, 0 },
	    { D_, "x", 0, 0 } }, 5,
	  ZOK, { ZOK, ZOK, ZOK, ZOK, ZOK }, { NULL }, { "a", "x" }, -1 },
	{ "check-then-set-twice", { "x" },
	  { { K_, "x", 0, 0 }, { S_, "x", 0, 0 }, { S_, "x", 1, 0 }, { K_, "x", 2, 0 } }, 4,
	  ZOK, { ZOK, ZOK, ZOK, ZOK }, { "x" }, { NULL }, 2 },
	{ "sequential", { "x" },
	  { { C_, "s-", -1, SEQ_ }, { C_, "s-", -1, SEQ_ } }, 2,
	  ZOK, { ZOK, ZOK }, { "x", "s-0000000001", "s-0000000002" }, { NULL }, 0 },
	{ "ephemeral-then-child", { "x" },
	  { { C_, "e", -1, EPH_ }, { C_, "e/c", -1, 0 } }, 2,
	  ZNOCHILDRENFOREPHEMERALS, { ZOK, ZNOCHILDRENFOREPHEMERALS }, { "x" }, { "e" }, 0 },
};

#undef C_
#undef D_
#undef S_
#undef K_
#undef RI_
#undef EPH_
#undef SEQ_

/* Runs every case under base (which must not exist), reporting through fail() on the
 * first that does not answer as the table says. */
static void run_multi_cases(const struct multi_driver *d, const char *base)
{
	char paths[MULTI_MAX][256], bufs[MULTI_MAX][256], folder[200];
	d->create(d->ctx, base);
	for (size_t k = 0; k < sizeof multi_cases / sizeof *multi_cases; k++) {
		const struct multi_case *c = &multi_cases[k];
		snprintf(folder, sizeof folder, "%s/%s", base, c->name);
		d->create(d->ctx, folder);
		for (int i = 0; i < MULTI_MAX && c->setup[i]; i++) {
			snprintf(paths[0], sizeof paths[0], "%s/%s", folder, c->setup[i]);
			d->create(d->ctx, paths[0]);
		}
		zoo_op_t ops[MULTI_MAX];
		zoo_op_result_t res[MULTI_MAX];
		struct Stat st[MULTI_MAX];
		memset(res, 0x5a, sizeof res);
		memset(st, 0x5a, sizeof st);
		for (int i = 0; i < c->n; i++) {
			const struct multi_op *o = &c->ops[i];
			snprintf(paths[i], sizeof paths[i], "%s/%s", folder, o->leaf);
			switch (o->type) {
			case ZOO_CREATE_OP:
				zoo_create_op_init(&ops[i], paths[i], "new", 3, &ZOO_OPEN_ACL_UNSAFE,
				                   o->flags, bufs[i], sizeof bufs[i]);
				break;
			case ZOO_DELETE_OP:
				zoo_delete_op_init(&ops[i], paths[i], o->version);
				break;
			case ZOO_SETDATA_OP:
				zoo_set_op_init(&ops[i], paths[i], "set", 3, o->version, &st[i]);
				break;
			default:
				zoo_check_op_init(&ops[i], paths[i], o->version);
				break;
			}
		}
		int rc = d->multi(d->ctx, c->n, ops, res);
		if (rc != c->rc)
			fail_msg("%s: the multi answered %s, not %s", c->name, zerror(rc), zerror(c->rc));
		for (int i = 0; i < c->n; i++) {
			if (res[i].err != c->err[i])
				fail_msg("%s: op %d's result is %d (%s), not %d (%s)", c->name, i,
				         res[i].err, zerror(res[i].err), c->err[i], zerror(c->err[i]));
			/* Of a multi that failed, a create has no name, and a set that failed
			 * no stat; the stat of a set that passed before the failing op is not
			 * to be read (the C client may leave something there). */
			if (rc != ZOK && c->ops[i].type == ZOO_CREATE_OP && res[i].value)
				fail_msg("%s: op %d of a failed multi has a name", c->name, i);
			if (c->ops[i].type == ZOO_SETDATA_OP && res[i].err != ZOK && res[i].stat)
				fail_msg("%s: op %d failed and has a stat", c->name, i);
			if (rc == ZOK && c->ops[i].type == ZOO_CREATE_OP) {
				/* The name made, in the op's buffer. */
				if (res[i].value != bufs[i] ||
				    strncmp(bufs[i], paths[i], strlen(paths[i])) != 0)
					fail_msg("%s: op %d made %s, not a node of %s", c->name, i,
					         res[i].value ? res[i].value : "(none)", paths[i]);
			}
			if (rc == ZOK && c->ops[i].type == ZOO_SETDATA_OP &&
			    (res[i].stat != &st[i] || st[i].dataLength != 3))
				fail_msg("%s: op %d's stat is not the node's new one", c->name, i);
		}
		for (int i = 0; i < MULTI_MAX && c->present[i]; i++) {
			snprintf(paths[0], sizeof paths[0], "%s/%s", folder, c->present[i]);
			int v;
			if (!d->exists(d->ctx, paths[0], &v))
				fail_msg("%s: %s is not there after", c->name, paths[0]);
		}
		for (int i = 0; i < MULTI_MAX && c->absent[i]; i++) {
			snprintf(paths[0], sizeof paths[0], "%s/%s", folder, c->absent[i]);
			int v;
			if (d->exists(d->ctx, paths[0], &v))
				fail_msg("%s: %s is there after", c->name, paths[0]);
		}
		snprintf(paths[0], sizeof paths[0], "%s/x", folder);
		int v = -1;
		if (!d->exists(d->ctx, paths[0], &v))
			v = -1;
		if (v != c->x_version)
			fail_msg("%s: x's version is %d after, not %d", c->name, v, c->x_version);
	}
}

#endif
