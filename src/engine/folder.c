/* Lock folders an acquisition makes: when its create finds the folder missing, one
 * acquisition makes the folder and its missing ancestors, and the others that found it
 * missing meanwhile wait for it (one chain of creates instead of one per acquisition).
 * Part of the acquisition's machine (acquire.c), run by the loop. */
#include <stdlib.h>
#include <string.h>

#include "acquisition.h"
#include "engine_internal.h"

/* A folder one acquisition makes while the others that found it missing wait: with many
 * acquisitions started at once on a new path, one chain of creates instead of one per
 * acquisition. */
struct zkl_folder {
	struct zkl_folder *next;            /* in c->folders */
	char *path;
	struct zkl_acquisition *maker;
	struct zkl_acquisition *waiting;    /* linked by folder_next */
};

static struct zkl_folder *folder_find(zkl_client *c, const char *path)
{
	for (struct zkl_folder *f = c->folders; f; f = f->next)
		if (strcmp(f->path, path) == 0)
			return f;
	return NULL;
}

/* The maker is done with the folder (made, or given up): its waiters look again, and
 * take it as there if it was made. */
static void folder_done(zkl_client *c, struct zkl_folder *f, bool made)
{
	for (struct zkl_folder **pp = &c->folders; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	while (f->waiting) {
		struct zkl_acquisition *w = f->waiting;
		f->waiting = w->folder_next;
		w->folder_made = NULL;
		w->folder_next = NULL;
		if (made && w->q->folder_seen)
			*w->q->folder_seen = true;
		zkl__waiter_wake(c, &w->job.w);
	}
	free(f->path);
	free(f);
}

/* a lets go of the folder it makes or waits for. */
void zkl__acq_folder_leave(zkl_client *c, struct zkl_acquisition *a, bool made)
{
	struct zkl_folder *f = a->folder_made;
	if (!f)
		return;
	a->folder_made = NULL;
	if (f->maker == a) {
		folder_done(c, f, made);
		return;
	}
	for (struct zkl_acquisition **pp = &f->waiting; *pp; pp = &(*pp)->folder_next) {
		if (*pp == a) {
			*pp = a->folder_next;
			break;
		}
	}
	a->folder_next = NULL;
}

/* Our create found the folder missing (NONODE): make it, or wait for the acquisition
 * that makes it. */
int zkl__acq_folder_missing(zkl_client *c, struct zkl_acquisition *a)
{
	const struct zkl_queue *q = a->q;
	/* The folder was missing: the next first acquire bets on a new one. Making
	 * the folder is part of trying once, not waiting. */
	c->folders_new = true;
	a->until = a->deadline;
	struct zkl_folder *f = folder_find(c, q->path);
	if (f) {
		a->folder_made = f;
		a->folder_next = f->waiting;
		f->waiting = a;
		a->st = A_FOLDER;
		return GO_ON;
	}
	if ((f = calloc(1, sizeof *f)) && (f->path = strdup(q->path))) {
		f->maker = a;
		f->next = c->folders;
		c->folders = f;
		a->folder_made = f;
	} else {
		free(f); /* then this acquisition makes it for itself */
	}
	a->ensure = strdup(q->path);
	if (!a->ensure)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	a->ensure_full = a->ensure_len = strlen(a->ensure);
	a->st = A_ENSURE;
	return GO_ON;
}

/* Creates the folder and its missing ancestors (of zkl__folder_mode()): try the path, on
 * NONODE its parent, and so on up, then create back down. a->op is the create out. */
int zkl__acq_on_ensure(zkl_client *c, struct zkl_acquisition *a)
{
	char *buf = a->ensure;
	if (!a->op) {
		buf[a->ensure_len] = 0;
		int err = 0;
		a->ensure_mode = zkl__folder_mode(c);
		const struct zkl_req create = {.kind = ZKL_OP_CREATE, .path = buf, .len = 0,
		                               .mode = a->ensure_mode};
		struct zkl_op *op = zkl__op_send(c, &a->job.w, &create, &err);
		if (!op)
			return err;
		a->op = op;
	}
	int rc = zkl__acq_await(a, a->op, a->until);
	if (rc == WAIT)
		return WAIT;
	if (rc < 0)
		return zkl__fail(rc, "gave up creating %s", buf);
	const int zrc = a->op->rc;
	zkl__acq_put_op(c, &a->op);
	if ((rc = zkl__folder_refused(c, a->ensure_mode, zrc, buf)) != 0)
		return rc > 0 ? GO_ON : rc;
	if (zrc == ZOK || zrc == ZNODEEXISTS) {
		if (a->ensure_len == a->ensure_full) {
			free(a->ensure);
			a->ensure = NULL;
			zkl__acq_folder_leave(c, a, true);
			if (a->q->folder_seen)
				*a->q->folder_seen = true;
			a->st = A_TOP;
			return GO_ON;
		}
		buf[a->ensure_len] = '/';
		a->ensure_len += strcspn(buf + a->ensure_len + 1, "/") + 1;
		return GO_ON;
	}
	if (zrc == ZNONODE) {
		size_t p = zkl__path_parent_len(buf);
		if (p == 0)
			return zkl__fail(ZKL_EZK, "cannot create %s: the root of the client's chroot "
			                "does not exist", a->q->path);
		a->ensure_len = p;
		return GO_ON;
	}
	if (zkl__zk_transient(zrc) || zkl__zk_session_gone(zrc)) {
		free(a->ensure);
		a->ensure = NULL;
		zkl__acq_folder_leave(c, a, false);
		return zkl__acq_start_recover(a);
	}
	return zkl__fail_zk(zrc, "cannot create", buf);
}

/* Another acquisition makes the folder: wait until it is done with it, then look again. */
int zkl__acq_on_folder(zkl_client *c, struct zkl_acquisition *a)
{
	if (!a->folder_made) {
		a->st = A_TOP;
		return GO_ON;
	}
	if (a->job.w.canceled)
		return zkl__acq_gave_up(a, ZKL_ECANCELED);
	if (zkl__now_ms() >= a->until)
		return zkl__acq_gave_up(a, ZKL_ETIMEDOUT);
	zkl__waiter_wake_at(c, &a->job.w, a->until);
	return WAIT;
}
