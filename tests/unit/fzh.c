/* Helpers for the unit tests on the in-memory ZooKeeper (fzh.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fzh.h"
#include "names.h"

static bool release_asked(void *arg)
{
	return atomic_load(&((struct fzh_acq *)arg)->release);
}

static void *acq_main(void *arg)
{
	struct fzh_acq *a = arg;
	int rc = zkl_lock_acquire(a->l, a->timeout_ms);
	if (a->session) {
		a->nodes = fz_ephemerals(a->z, a->session);
		a->creates = fz_queued(a->z, a->session, FZ_CREATE);
	}
	a->held = zkl_lock_is_held(a->l);
	a->token = zkl_lock_token(a->l);
	a->rc = rc;
	atomic_store(&a->done, true);
	fz_poke(a->z);
	if (rc == 0) {
		fz_wait(a->z, release_asked, a, "the test to ask for a release");
		a->release_rc = zkl_lock_release(a->l);
	}
	return NULL;
}

void fzh_acq_start(struct fzh_acq *a, struct fz *z, zkl_lock *l, int timeout_ms,
                   int64_t session)
{
	memset(a, 0, sizeof *a);
	a->session = session;
	a->z = z;
	a->l = l;
	a->timeout_ms = timeout_ms;
	atomic_init(&a->done, false);
	atomic_init(&a->release, false);
	assert_int_equal(pthread_create(&a->thread, NULL, acq_main, a), 0);
}

int fzh_acq_wait(struct fzh_acq *a)
{
	fzh_wait_done(a->z, a);
	return a->rc;
}

int fzh_acq_finish(struct fzh_acq *a)
{
	atomic_store(&a->release, true);
	fz_poke(a->z);
	pthread_join(a->thread, NULL);
	return a->release_rc;
}

struct cond {
	struct fz *z;
	const char *path;
	int n;
	struct fzh_acq *a;
	struct fzh_count *k;
};

int fzh_children(struct fz *z, const char *path)
{
	char buf[8192];
	return fz_children(z, path, buf, sizeof buf);
}

static bool has_children(void *arg)
{
	struct cond *c = arg;
	char buf[4096];
	return fz_children(c->z, c->path, buf, sizeof buf) == c->n;
}

void fzh_wait_children(struct fz *z, const char *path, int n)
{
	struct cond c = { .z = z, .path = path, .n = n };
	char what[256];
	snprintf(what, sizeof what, "%d children of %s", n, path);
	fz_wait(z, has_children, &c, what);
}

static bool is_watched(void *arg)
{
	struct cond *c = arg;
	return fz_watchers(c->z, c->path) >= c->n;
}

void fzh_wait_watched(struct fz *z, const char *path, int n)
{
	struct cond c = { .z = z, .path = path, .n = n };
	char what[256];
	snprintf(what, sizeof what, "%d watches of others on %s", n, path);
	fz_wait(z, is_watched, &c, what);
}

static bool is_done(void *arg)
{
	struct cond *c = arg;
	return atomic_load(&c->a->done);
}

void fzh_wait_done(struct fz *z, struct fzh_acq *a)
{
	struct cond c = { .z = z, .a = a };
	fz_wait(z, is_done, &c, "an acquire to return");
}

static bool done_or_watched(void *arg)
{
	struct cond *c = arg;
	return atomic_load(&c->a->done) || fz_watchers(c->z, c->path) > 0;
}

void fzh_wait_done_or_watched(struct fz *z, struct fzh_acq *a, const char *path)
{
	struct cond c = { .z = z, .path = path, .a = a };
	fz_wait(z, done_or_watched, &c, "an acquire to return or watch a node");
}

void fzh_queue_node(struct fz *z, const char *path, int i, char *buf, size_t size)
{
	char names[8192];
	int n = fz_children(z, path, names, sizeof names);
	assert_true(n > i);
	zkl_child q[64];
	char *save = NULL;
	size_t k = 0;
	for (char *tok = strtok_r(names, "\n", &save); tok && k < 64;
	     tok = strtok_r(NULL, "\n", &save))
		if (zkl__child_parse(tok, &q[k]))
			k++;
	zkl__children_sort(q, k);
	assert_true((size_t)i < k);
	snprintf(buf, size, "%s/%s", path, q[i].name);
}

void fzh_on_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	struct fzh_count *k = data;
	if (k->session && atomic_load(&k->n) == 0)
		k->nodes = fz_ephemerals(k->z, k->session);
	atomic_fetch_add(&k->n, 1);
	fz_poke(k->z);
}

static bool counted(void *arg)
{
	struct cond *c = arg;
	return atomic_load(&c->k->n) >= c->n;
}

void fzh_wait_count(struct fzh_count *k, int n)
{
	struct cond c = { .z = k->z, .n = n, .k = k };
	fz_wait(k->z, counted, &c, "a lost callback");
}
