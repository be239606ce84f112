/* zkl_selector: Curator's LeaderSelector (a mutex, "lock-" nodes) that runs the
 * application's function while it leads, over the election it shares with zkl_leader
 * (election.c). */
#include <stdlib.h>
#include <string.h>

#include "election.h"

struct zkl_selector {
	struct election e;
};

/* ---- zkl_selector ---- */

void zkl_selector_options_init(zkl_selector_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->lose_on_suspend = true;
}

int zkl_selector_new(zkl_selector **out, zkl_client *c, const char *path, zkl_selector_fn fn,
                     void *data, const zkl_selector_options *o)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	if (!fn)
		return zkl__fail(ZKL_EINVAL, "leader function is NULL");
	zkl_selector_options defaults;
	if (!o) {
		zkl_selector_options_init(&defaults);
		o = &defaults;
	}
	zkl_selector *s = calloc(1, sizeof *s);
	if (!s)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl__election_init(&s->e, c, path, o->id, ZKL_KIND_LOCK, s);
	if (rc != 0) {
		free(s);
		return rc;
	}
	s->e.fn = fn;
	s->e.fn_data = data;
	s->e.requeue = o->requeue;
	s->e.lose_on_suspend = o->lose_on_suspend;
	if ((rc = zkl__election_attach(&s->e)) != 0) {
		free(s);
		return rc;
	}
	zkl__client_handle_add(c);
	*out = s;
	return 0;
}

zkl_lock *zkl_selector_lock(zkl_selector *s)
{
	return s ? &s->e.lock : NULL;
}

int zkl_selector_start(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return zkl__election_start(&s->e);
}

int zkl_selector_requeue(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return zkl__election_requeue(&s->e);
}

int zkl_selector_wait(zkl_selector *s, int timeout_ms)
{
	ZKL_CHECK_HANDLE(s, "selector");
	int rc = zkl__check_timeout(timeout_ms);
	return rc ? rc : zkl__election_await(&s->e, false, timeout_ms);
}

void zkl_selector_interrupt(zkl_selector *s)
{
	if (s)
		zkl__election_interrupt(&s->e);
}

int zkl_selector_close(zkl_selector *s)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return zkl__election_close(&s->e);
}

void zkl_selector_free(zkl_selector *s)
{
	if (!s)
		return;
	zkl_client *c = s->e.lock.c;
	zkl__client_handle_done(c, zkl__election_free(&s->e));
}

int zkl_selector_leader_id(zkl_selector *s, char **id)
{
	ZKL_CHECK_HANDLE(s, "selector");
	return zkl__election_leader_id(&s->e, id);
}
