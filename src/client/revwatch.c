/* Data watches on single nodes, kept by the loop: revocation requests on our lock nodes
 * (Curator's protocol) and a semaphore's shared count. The watch is re-armed after each
 * event; a read's answer is decoded on the completion thread by the decoder of the recipe
 * that keeps the watch (the client knows no format) and applied on the loop.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

void zkl__revwatch_put(zkl_client *c, struct zkl_revwatch *rv)
{
	if (--rv->refs > 0)
		return;
	if (rv->prev)
		rv->prev->next = rv->next;
	else
		c->revwatches = rv->next;
	if (rv->next)
		rv->next->prev = rv->prev;
	free(rv->path);
	free(rv);
}

struct zkl_revwatch *zkl__revwatch_add(zkl_client *c, const char *path, uint64_t gen,
                                      zkl_data_decode_fn decode,
                                      void (*fn)(void *ctx, const char *path), void *ctx)
{
	struct zkl_revwatch *rv = calloc(1, sizeof *rv);
	if (!rv || !(rv->path = strdup(path))) {
		free(rv);
		return NULL;
	}
	rv->refs = 1;
	rv->gen = gen;
	rv->active = true;
	rv->want_read = true;
	rv->decode = decode;
	rv->fn = fn;
	rv->ctx = ctx;
	rv->next = c->revwatches;
	if (c->revwatches)
		c->revwatches->prev = rv;
	c->revwatches = rv;
	zkl__loop_wake(c);
	return rv;
}

struct zkl_revwatch *zkl__countwatch_add(zkl_client *c, const char *path,
                                        zkl_data_decode_fn decode, int32_t *value,
                                        unsigned *epoch)
{
	struct zkl_revwatch *rv = zkl__revwatch_add(c, path, c->gen, decode, NULL, NULL);
	if (rv) {
		rv->value = value;
		rv->epoch = epoch;
	}
	return rv;
}

void zkl__revwatch_remove(zkl_client *c, struct zkl_revwatch *rv)
{
	if (!rv)
		return;
	rv->active = false;
	while (rv->dispatching && !zkl__on_event_thread(c))
		pthread_cond_wait(&c->cv, &c->mu);
	zkl__revwatch_put(c, rv);
}

/* A revocation watch's event (mu held). */
void zkl__revwatch_event_apply(zkl_client *c, struct zkl_revwatch *rv, int type)
{
	rv->registered = false;
	if (type == ZOO_CHANGED_EVENT)
		rv->want_read = true;
	zkl__loop_wake(c);
	zkl__revwatch_put(c, rv);
}

void zkl__revwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	struct zkl_revwatch *rv = ctx;
	if (type == ZOO_SESSION_EVENT)
		return;
	struct watch_msg m = {.m.kind = MSG_REVWATCH, .obj = rv, .type = type};
	zkl__post_copy(rv->s->c, &m.m, sizeof m);
}

static void revwatch_read_done(int rc, const char *value, int len, const struct Stat *stat,
                               const void *data)
{
	(void)stat;
	struct zkl_revwatch *rv = (struct zkl_revwatch *)data;
	zkl_client *c = rv->s->c;
	struct revread_msg one = {.m.kind = MSG_REVREAD, .rv = rv, .rc = rc};
	if (rc == ZOK)
		one.read = rv->decode(value, len, &one.value);
	zkl__post_copy(c, &one.m, sizeof one);
}

/* A revocation watch's read answered (mu held). */
void zkl__revread_apply(zkl_client *c, const struct revread_msg *m)
{
	struct zkl_revwatch *rv = m->rv;
	int rc = m->rc;
	rv->inflight = false;
	if (rc != ZOK && rv->registered) {
		/* No watch was left with the C client. */
		rv->registered = false;
		rv->refs--;
	}
	if (zkl__zk_transient(rc))
		rv->want_read = true;
	if (m->read == ZKL_DATA_REQUEST && rv->fn)
		rv->requests++;
	if (rv->value && rv->active && m->read == ZKL_DATA_VALUE) {
		*rv->value = m->value;
		++*rv->epoch;
		zkl__wake_all(c);
	}
	if (--rv->s->inflight == 0)
		zkl__loop_wake(c);
	zkl__loop_wake(c);
	zkl__revwatch_put(c, rv);
}

/* Arms watches and dispatches requests (event thread, mu held). */
void zkl__revwatches_run(zkl_client *c)
{
	for (struct zkl_revwatch *rv = c->revwatches; rv;) {
		if (rv->active && rv->requests > 0 && !rv->dispatching) {
			rv->requests = 0;
			rv->dispatching = true;
			rv->refs++;
			for (struct zkl_hold *h = c->holds; h; h = h->next)
				if (strcmp(h->path, rv->path) == 0)
					zkl__hold_observe(c, h, ZKL_EVENT_REVOKED);
			pthread_mutex_unlock(&c->mu);
			rv->fn(rv->ctx, rv->path);
			pthread_mutex_lock(&c->mu);
			rv->dispatching = false;
			pthread_cond_broadcast(&c->cv);
			zkl__revwatch_put(c, rv);
			rv = c->revwatches; /* the list may have changed */
			continue;
		}
		if (rv->value && rv->active && rv->gen != c->gen) {
			/* A shared count is watched on whatever session the client has. */
			rv->gen = c->gen;
			rv->want_read = true;
		}
		if (rv->active && rv->want_read && !rv->inflight && !rv->registered &&
		    rv->gen == c->gen && c->sess->connected) {
			rv->want_read = false;
			rv->inflight = true;
			rv->registered = true; /* assumed until the answer says otherwise */
			rv->refs += 2;
			rv->s = c->sess;
			rv->s->inflight++;
			zhandle_t *zh = rv->s->zh;
			char *path = strdup(rv->path);
			pthread_mutex_unlock(&c->mu);
			int rc = path ? c->zk->get(zh, path, zkl__revwatch_watcher, rv, revwatch_read_done, rv)
			              : ZSYSTEMERROR;
			free(path);
			if (rc != ZOK)
				revwatch_read_done(rc, NULL, 0, NULL, rv);
			pthread_mutex_lock(&c->mu);
			rv = c->revwatches;
			continue;
		}
		rv = rv->next;
	}
}

