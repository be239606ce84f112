/* How the holder before this one left (zkl_lock_track_previous(), zkl_lock_previous()).
 *
 * A tracking handle keeps a note in "<path>.previous", a persistent node beside the lock:
 * "held <node>" written by each acquire that takes the lock, once it has read the note
 * its predecessor left, and "released <node>" written by the release in the same
 * transaction as the delete of the node (the engine's release, node->note), with a
 * second line saying how the hold ended if the holder said it (zkl_lock_set_end():
 * "released <node>\n<end>"; a note without one is read as before). The note is
 * beside the lock and not in the lock folder's data: a folder is a container, which the
 * server reaps once it is empty, and the note must outlive the gap between two runs of
 * a job. Only locks with one holder at a time keep one: readers would overwrite each
 * other's.
 *
 * What the next holder can tell from the note and from the node its acquire last waited
 * behind (node->pred, written by the engine):
 * - it waited behind a node: that node's holder released if the note says "released"
 *   and names it; else it vanished (its session ended, or it left no note: another
 *   library, a handle not tracking, a waiter that gave up just as its turn came);
 * - it waited behind none: the note says who held last: "released X" or, still, "held X"
 *   (X never released: vanished); no note, no predecessor.
 * A holder that leaves no note and was gone before this acquire queued is not seen.
 *
 * A holder that lost its lock (its node went without its release) may say so
 * afterwards (zkl_lock_tell_lost()): "lost <node>", written only while the note still
 * says "held <node>" (a versioned set), so never over a later holder's note. A holder
 * that reads it is told VANISHED (no release note) with the end "lost"; one that took
 * the lock before it was written is told VANISHED alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/lock.h>

#include "common.h"
#include "lock_internal.h"

#define NOTE_SUFFIX ".previous"

_Static_assert(sizeof ((struct zkl_node *)0)->note_end == ZKL_END_MAX,
               "the engine's room for an end is ZKL_END_MAX");

static const char held_word[] = "held ";
static const char released_word[] = "released ";
static const char lost_word[] = "lost ";

/* Whether the note (data, len) is word followed by a node name, which it copies to who,
 * and, after a "released" name, optionally a newline and how the hold ended (printable
 * ASCII), which it copies to end ("" if none; end may be NULL). */
static bool note_says(const char *data, size_t len, const char *word, char *who, size_t size,
                      char *end, size_t endsize)
{
	size_t w = strlen(word);
	if (end && endsize)
		end[0] = '\0';
	if (len <= w || memcmp(data, word, w) != 0)
		return false;
	const char *name = data + w;
	size_t n = len - w;
	if (n > 0 && name[n - 1] == '\n')
		n--;
	const char *nl = memchr(name, '\n', n);
	const char *tail = NULL;
	size_t tn = 0;
	if (nl && word == released_word) {
		tail = nl + 1;
		tn = n - (size_t)(tail - name);
		n = (size_t)(nl - name);
		if (tn == 0 || tn >= ZKL_END_MAX)
			return false;
		for (size_t i = 0; i < tn; i++)
			if (tail[i] < 0x20 || tail[i] > 0x7e)
				return false;
	}
	if (n == 0 || memchr(name, '/', n) || memchr(name, '\n', n) || memchr(name, '\0', n))
		return false;
	if (size) {
		size_t k = n < size - 1 ? n : size - 1;
		memcpy(who, name, k);
		who[k] = '\0';
	}
	if (tail && end && endsize) {
		size_t k = tn < endsize - 1 ? tn : endsize - 1;
		memcpy(end, tail, k);
		end[k] = '\0';
	}
	return true;
}

static void copy_name(char *who, size_t size, const char *name)
{
	if (size)
		snprintf(who, size, "%s", name);
}

/* A read node is never a predecessor whose leaving the note tells: readers keep none. */
static bool is_reader(const char *name)
{
	zkl_child child;
	return zkl__child_parse(name, &child) && !zkl__kind_is_writer(child.kind);
}

zkl_previous zkl__previous_decide_end(const char *note, size_t len, const char *pred,
                                      const char *self, char *who, size_t size, char *end,
                                      size_t endsize)
{
	char named[96];
	copy_name(who, size, "");
	copy_name(end, endsize, "");
	if (pred && *pred && !is_reader(pred)) {
		if (note && note_says(note, len, released_word, named, sizeof named, end, endsize) &&
		    strcmp(named, pred) == 0) {
			copy_name(who, size, pred);
			return ZKL_PREVIOUS_RELEASED;
		}
		const bool lost = note && note_says(note, len, lost_word, named, sizeof named,
		                                    NULL, 0) && strcmp(named, pred) == 0;
		copy_name(end, endsize, lost ? "lost" : "");
		copy_name(who, size, pred);
		return ZKL_PREVIOUS_VANISHED;
	}
	if (!note)
		return ZKL_PREVIOUS_NONE;
	if (note_says(note, len, released_word, named, sizeof named, end, endsize)) {
		copy_name(who, size, named);
		return ZKL_PREVIOUS_RELEASED;
	}
	if (note_says(note, len, held_word, named, sizeof named, NULL, 0) &&
	    strcmp(named, self) != 0) {
		copy_name(who, size, named);
		return ZKL_PREVIOUS_VANISHED;
	}
	if (note_says(note, len, lost_word, named, sizeof named, NULL, 0) &&
	    strcmp(named, self) != 0) {
		copy_name(who, size, named);
		copy_name(end, endsize, "lost");
		return ZKL_PREVIOUS_VANISHED;
	}
	/* Unreadable (not written by zklocks), or our own: it proves nothing. */
	return ZKL_PREVIOUS_NONE;
}

zkl_previous zkl__previous_decide(const char *note, size_t len, const char *pred,
                                  const char *self, char *who, size_t size)
{
	return zkl__previous_decide_end(note, len, pred, self, who, size, NULL, 0);
}

static char *note_path(const char *path)
{
	size_t n = strlen(path) + sizeof NOTE_SUFFIX;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s", path, NOTE_SUFFIX);
	return p;
}

/* Reads the note and writes ours; fills how and who. Returns 0 or ZKL_E* with its
 * detail. */
static int note_exchange(zkl_client *c, const char *note, const char *pred, const char *self,
                         zkl_previous *how, char *who, size_t size, char *end, size_t endsize)
{
	struct zkl_req get = {.kind = ZKL_OP_GET, .path = note};
	struct zkl_op *op = NULL;
	int zrc = zkl__request(c, &get, zkl__deadline(-1), &op);
	if (zrc == ZOK) {
		*how = zkl__previous_decide_end(op->value,
		                                op->value_len > 0 ? (size_t)op->value_len : 0,
		                                pred, self, who, size, end, endsize);
	} else if (zrc == ZNONODE) {
		*how = zkl__previous_decide_end(NULL, 0, pred, self, who, size, end, endsize);
	}
	if (op)
		zkl__op_release(c, op);
	if (zrc < -1000)
		return zrc;
	if (zrc != ZOK && zrc != ZNONODE)
		return zkl__fail_zk(zrc, "cannot read the note", note);
	char mine[128];
	int n = snprintf(mine, sizeof mine, "%s%s", held_word, self);
	if (n < 0 || (size_t)n >= sizeof mine)
		return zkl__fail(ZKL_EINVAL, "node name %s is too long for a note", self);
	return zkl__node_put(c, note, mine, n, "note");
}

int zkl__previous_note(zkl_lock *l)
{
	pthread_mutex_lock(l->mu);
	struct zkl_acq *a = l->track && l->ops->own ? l->ops->own(l) : NULL;
	if (!a || a->count > 1 || a->prev_known || !a->node.path) {
		pthread_mutex_unlock(l->mu);
		return 0;
	}
	char self[96], pred[96];
	const char *slash = strrchr(a->node.path, '/');
	snprintf(self, sizeof self, "%s", slash ? slash + 1 : a->node.path);
	snprintf(pred, sizeof pred, "%s", a->node.pred);
	pthread_mutex_unlock(l->mu);

	zkl_previous how = ZKL_PREVIOUS_NONE;
	char who[96] = "", end[ZKL_END_MAX] = "";
	char *note = note_path(l->path);
	int rc = note ? note_exchange(l->c, note, pred, self, &how, who, sizeof who, end,
	                              sizeof end)
	              : zkl__fail(ZKL_ENOMEM, "out of memory");
	if (rc == 0) {
		pthread_mutex_lock(l->mu);
		a = l->ops->own(l);
		if (a && a->node.path && !a->node.note) {
			a->prev_known = true;
			a->prev = how;
			memcpy(a->prev_node, who, sizeof a->prev_node);
			memcpy(a->prev_end, end, sizeof a->prev_end);
			a->node.note_end[0] = '\0';
			a->node.note = note; /* the release's transaction writes it */
			note = NULL;
		}
		pthread_mutex_unlock(l->mu);
		free(note);
		return 0;
	}
	free(note);
	/* Held, but its predecessor's leaving is unknown and the next holder could not tell
	 * ours: give it back. */
	char saved[256];
	snprintf(saved, sizeof saved, "%s", zkl_last_error());
	zkl_lock_release(l);
	return zkl__fail(rc, "%s (the lock was taken and given back)", saved);
}

int zkl_lock_track_previous(zkl_lock *l, bool on)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (!l->ops->own || strcmp(l->kind, "read") == 0)
		return zkl__fail(ZKL_EINVAL, "a %s does not track how its holders leave: only a "
		                "mutex and the write half of a read-write lock do", l->kind);
	pthread_mutex_lock(l->mu);
	l->track = on;
	pthread_mutex_unlock(l->mu);
	return 0;
}

int zkl_lock_previous(zkl_lock *l, zkl_previous *how, char *node, size_t size)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (!how || !node || size == 0)
		return zkl__fail(ZKL_EINVAL, "%s", !how ? "how is NULL" : !node ? "node is NULL"
		                                           : "node's size is 0");
	pthread_mutex_lock(l->mu);
	const bool track = l->track && l->ops->own;
	struct zkl_acq *a = track ? l->ops->own(l) : NULL;
	int rc = 0;
	if (!track)
		rc = ZKL_EINVAL;
	else if (!a || zkl__node_lost(&a->node))
		rc = ZKL_ENOTHELD;
	else if (!a->prev_known)
		rc = ZKL_ENOTHELD; /* held from before the handle tracked */
	else {
		*how = a->prev;
		snprintf(node, size, "%s", a->prev_node);
	}
	pthread_mutex_unlock(l->mu);
	if (rc == ZKL_EINVAL)
		return zkl__fail(rc, "%s %s does not track how its holders leave "
		                "(zkl_lock_track_previous())", l->kind, l->path);
	if (rc == ZKL_ENOTHELD)
		return zkl__fail(rc, "%s %s is not held by the calling thread since it tracks its "
		                "holders", l->kind, l->path);
	return 0;
}

/* The calling thread's tracking hold of l, for the two functions below (l->mu held), or
 * NULL with the reason in *rc. */
static struct zkl_acq *tracked_hold(zkl_lock *l, int *rc)
{
	const bool track = l->track && l->ops->own;
	struct zkl_acq *a = track ? l->ops->own(l) : NULL;
	*rc = !track ? ZKL_EINVAL
	      : !a || zkl__node_lost(&a->node) ? ZKL_ENOTHELD
	      : !a->prev_known ? ZKL_ENOTHELD : 0;
	return *rc == 0 ? a : NULL;
}

static int tracked_fail(zkl_lock *l, int rc)
{
	if (rc == ZKL_EINVAL)
		return zkl__fail(rc, "%s %s does not track how its holders leave "
		                "(zkl_lock_track_previous())", l->kind, l->path);
	return zkl__fail(rc, "%s %s is not held by the calling thread since it tracks its "
	                "holders", l->kind, l->path);
}

int zkl_lock_previous_end(zkl_lock *l, char *end, size_t size)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	if (!end || size == 0)
		return zkl__fail(ZKL_EINVAL, "%s", !end ? "end is NULL" : "end's size is 0");
	int rc;
	pthread_mutex_lock(l->mu);
	struct zkl_acq *a = tracked_hold(l, &rc);
	if (a)
		snprintf(end, size, "%s", a->prev_end);
	pthread_mutex_unlock(l->mu);
	return rc == 0 ? 0 : tracked_fail(l, rc);
}

int zkl_lock_set_end(zkl_lock *l, const char *end)
{
	zkl__clear_error();
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	const char *e = end ? end : "";
	size_t n = strlen(e);
	if (n >= ZKL_END_MAX)
		return zkl__fail(ZKL_EINVAL, "an end of %zu bytes: at most %d", n, ZKL_END_MAX - 1);
	for (size_t i = 0; i < n; i++)
		if (e[i] < 0x20 || e[i] > 0x7e)
			return zkl__fail(ZKL_EINVAL, "the end has a byte 0x%02x at %zu: printable "
			                "ASCII only", (unsigned)(unsigned char)e[i], i);
	int rc;
	pthread_mutex_lock(l->mu);
	struct zkl_acq *a = tracked_hold(l, &rc);
	if (a)
		snprintf(a->node.note_end, sizeof a->node.note_end, "%s", e);
	pthread_mutex_unlock(l->mu);
	return rc == 0 ? 0 : tracked_fail(l, rc);
}

int zkl_lock_tell_lost(zkl_lock *l, int timeout_ms, bool *told)
{
	zkl__clear_error();
	if (told)
		*told = false;
	if (!l)
		return zkl__fail(ZKL_EINVAL, "lock is NULL");
	int rc = zkl__check_timeout(timeout_ms);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(l->mu);
	const bool track = l->track && l->ops->own;
	struct zkl_acq *a = track ? l->ops->own(l) : NULL;
	rc = !track ? ZKL_EINVAL
	         : !a || !a->prev_known || !a->node.path || !a->node.note ? ZKL_ENOTHELD
	         : !zkl__node_lost(&a->node) ? ZKL_EBUSY : 0;
	char self[96] = "", *note = NULL;
	if (rc == 0) {
		const char *slash = strrchr(a->node.path, '/');
		snprintf(self, sizeof self, "%s", slash ? slash + 1 : a->node.path);
		if (!(note = strdup(a->node.note)))
			rc = ZKL_ENOMEM;
	}
	pthread_mutex_unlock(l->mu);
	if (rc == ZKL_EINVAL)
		return tracked_fail(l, rc);
	if (rc == ZKL_ENOTHELD)
		return zkl__fail(rc, "%s %s has no hold of the calling thread that tracks its "
		                "holders", l->kind, l->path);
	if (rc == ZKL_EBUSY)
		return zkl__fail(rc, "%s %s is still held: a hold that is not lost is released "
		                "(its release leaves the note)", l->kind, l->path);
	if (rc == ZKL_ENOMEM)
		return zkl__fail(rc, "out of memory");
	if (zkl__is_loop_thread(l->c)) {
		free(note);
		return zkl__fail(ZKL_EDEADLK, "a note is written on a thread that runs the "
		                "client's loop, which never waits for the server");
	}
	/* Only over our own "held": read it with its version, set it at that version. A
	 * connection lost on the way (the session's new connection may be coming up) is
	 * waited out and the note read again, until the deadline: a set that was applied
	 * then reads back as our "lost". */
	const int64_t deadline = zkl__deadline(timeout_ms);
	int zrc;
	for (;;) {
		struct zkl_req get = {.kind = ZKL_OP_GET, .path = note};
		struct zkl_op *op = NULL;
		zrc = zkl__request(l->c, &get, deadline, &op);
		char named[96];
		const size_t len = zrc == ZOK && op->value_len > 0 ? (size_t)op->value_len : 0;
		bool ours = zrc == ZOK && note_says(op->value, len, held_word, named, sizeof named,
		                                    NULL, 0) && strcmp(named, self) == 0;
		const bool said = zrc == ZOK && note_says(op->value, len, lost_word, named,
		                                          sizeof named, NULL, 0) &&
		                  strcmp(named, self) == 0;
		int32_t version = zrc == ZOK ? op->stat.version : -1;
		if (op)
			zkl__op_release(l->c, op);
		if (said && told)
			*told = true;
		if (ours) {
			char text[128];
			int n = snprintf(text, sizeof text, "%s%s", lost_word, self);
			struct zkl_req set = {.kind = ZKL_OP_SET, .path = note, .data = text, .len = n,
			                      .version = version};
			zrc = zkl__request(l->c, &set, deadline, NULL);
			if (zrc == ZOK && told)
				*told = true;
		}
		if (zrc < -1000 || !zkl__zk_transient(zrc))
			break; /* an answer, or a zklocks error (ZKL_ETIMEDOUT: the deadline) */
		int wait = zkl__await_connection(l->c, 0, zkl__now_ms() + 100, deadline);
		if (wait != 0) {
			zrc = wait;
			break;
		}
	}
	rc = 0;
	/* Moved on (another holder's note, a newer version) or deleted: nothing to say. */
	if (zrc != ZOK && zrc != ZNONODE && zrc != ZBADVERSION)
		rc = zrc < -1000 ? zkl__fail(zrc, "cannot write the note %s", note)
		                 : zkl__fail_zk(zrc, "cannot write the note", note);
	free(note);
	return rc;
}

const char *zkl_previous_name(zkl_previous how)
{
	switch (how) {
	case ZKL_PREVIOUS_NONE: return "none";
	case ZKL_PREVIOUS_RELEASED: return "released";
	case ZKL_PREVIOUS_VANISHED: return "vanished";
	}
	return NULL;
}
