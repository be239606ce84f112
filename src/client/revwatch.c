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

static struct zkl_waiter *revwatch_ev_apply(zkl_client *c, struct zkl_msg *m);
static struct zkl_waiter *revread_apply(zkl_client *c, struct zkl_msg *m);

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
	rv->ev.kind = MSG_REVWATCH;
	rv->ev.apply = revwatch_ev_apply;
	rv->read.kind = MSG_REVREAD;
	rv->read.apply = revread_apply;
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

/* A revocation watch's event, on the loop. */
static struct zkl_waiter *revwatch_ev_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_revwatch *rv = (struct zkl_revwatch *)((char *)m -
	                                                  offsetof(struct zkl_revwatch, ev));
	rv->registered = false;
	if (rv->ev_type == ZOO_CHANGED_EVENT)
		rv->want_read = true;
	zkl__loop_wake(c);
	zkl__revwatch_put(c, rv);
	return NULL;
}

/* Completion thread: the event is posted in rv (one per watch set); session events are
 * the session's to tell. */
void zkl__revwatch_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)state;
	(void)path;
	struct zkl_revwatch *rv = ctx;
	if (type == ZOO_SESSION_EVENT)
		return;
	rv->ev_type = type;
	zkl__inbox_put(rv->s->c, &rv->ev, false);
}

/* Completion thread: what the read found is decoded here and posted in rv (one read out
 * at a time). */
static void revwatch_read_done(int rc, const char *value, int len, const struct Stat *stat,
                               const void *data)
{
	(void)stat;
	struct zkl_revwatch *rv = (struct zkl_revwatch *)data;
	rv->read_rc = rc;
	rv->read_kind = rc == ZOK ? rv->decode(value, len, &rv->read_value) : ZKL_DATA_NOTHING;
	zkl__inbox_put(rv->s->c, &rv->read, false);
}

/* A revocation watch's read answered, on the loop. */
static struct zkl_waiter *revread_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_revwatch *rv = (struct zkl_revwatch *)((char *)m -
	                                                  offsetof(struct zkl_revwatch, read));
	int rc = rv->read_rc;
	rv->inflight = false;
	if (rc != ZOK && rv->registered) {
		/* No watch was left with the C client. */
		rv->registered = false;
		rv->refs--;
	}
	if (zkl__zk_transient(rc))
		rv->want_read = true;
	if (rv->read_kind == ZKL_DATA_REQUEST && rv->fn)
		rv->requests++;
	if (rv->value && rv->active && rv->read_kind == ZKL_DATA_VALUE) {
		*rv->value = rv->read_value;
		++*rv->epoch;
		zkl__wake_all(c);
	}
	rv->s->inflight--;
	zkl__loop_wake(c);
	zkl__revwatch_put(c, rv);
	return NULL;
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
			int rc = c->zk->get(rv->s->zh, rv->path, zkl__revwatch_watcher, rv,
			                    revwatch_read_done, rv);
			if (rc != ZOK)
				revwatch_read_done(rc, NULL, 0, NULL, rv);
		}
		rv = rv->next;
	}
}

