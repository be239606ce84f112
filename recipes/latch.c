/* zkl_leader: Curator's LeaderLatch layout ("latch-" nodes), over the election that it
 * shares with zkl_selector (election.c); its zkl_lock view takes one leadership per
 * acquire. */
#include <stdlib.h>
#include <string.h>

#include "election.h"

struct zkl_leader {
	struct election e;
};

/* ---- zkl_leader ---- */

void zkl_leader_options_init(zkl_leader_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->lose_on_suspend = true;
}

int zkl_leader_new(zkl_leader **out, zkl_client *c, const char *path,
                   const zkl_leader_options *o)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	*out = NULL;
	zkl_leader_options defaults;
	if (!o) {
		zkl_leader_options_init(&defaults);
		o = &defaults;
	}
	zkl_leader *l = calloc(1, sizeof *l);
	if (!l)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	int rc = zkl__election_init(&l->e, c, path, o->id, ZKL_KIND_LATCH, l);
	if (rc != 0) {
		free(l);
		return rc;
	}
	l->e.on_gained = o->on_gained;
	l->e.on_lost = o->on_lost;
	l->e.on_revoke = o->on_revoke;
	l->e.data = o->data;
	l->e.lose_on_suspend = o->lose_on_suspend;
	l->e.notify_on_close = o->notify_on_close;
	if ((rc = zkl__election_attach(&l->e)) != 0) {
		free(l);
		return rc;
	}
	zkl__client_handle_add(c);
	*out = l;
	return 0;
}

int zkl_leader_start(zkl_leader *l)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return zkl__election_start(&l->e);
}

int zkl_leader_await(zkl_leader *l, int timeout_ms)
{
	ZKL_CHECK_HANDLE(l, "leader");
	int rc = zkl__check_timeout(timeout_ms);
	return rc ? rc : zkl__election_await(&l->e, true, timeout_ms);
}

int zkl_leader_close(zkl_leader *l)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return zkl__election_close(&l->e);
}

void zkl_leader_free(zkl_leader *l)
{
	if (!l)
		return;
	zkl_client *c = l->e.lock.c;
	zkl__client_handle_done(c, zkl__election_free(&l->e));
}

void zkl_leader_interrupt(zkl_leader *l)
{
	if (l)
		zkl__election_interrupt(&l->e);
}

int zkl_leader_leader_id(zkl_leader *l, char **id)
{
	ZKL_CHECK_HANDLE(l, "leader");
	return zkl__election_leader_id(&l->e, id);
}

zkl_lock *zkl_leader_lock(zkl_leader *l)
{
	return l ? &l->e.lock : NULL;
}
