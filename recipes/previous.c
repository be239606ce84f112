/* How the holder before this one left (zkl_lock_track_previous(), zkl_lock_previous()).
 *
 * A tracking handle keeps a note in "<path>.previous", a persistent node beside the lock:
 * "held <node>" written by each acquire that takes the lock, once it has read the note
 * its predecessor left, and "released <node>" written by the release in the same
 * transaction as the delete of the node (the engine's release, node->note). The note is
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
 * A holder that leaves no note and was gone before this acquire queued is not seen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/lock.h>

#include "common.h"
#include "lock_internal.h"

#define NOTE_SUFFIX ".previous"

static const char held_word[] = "held ";
static const char released_word[] = "released ";

/* Whether the note (data, len) is word followed by a node name, which it copies to who. */
static bool note_says(const char *data, size_t len, const char *word, char *who, size_t size)
{
	size_t w = strlen(word);
	if (len <= w || memcmp(data, word, w) != 0)
		return false;
	const char *name = data + w;
	size_t n = len - w;
	if (n > 0 && name[n - 1] == '\n')
		n--;
	if (n == 0 || memchr(name, '/', n) || memchr(name, '\n', n) || memchr(name, '\0', n))
		return false;
	if (size) {
		size_t k = n < size - 1 ? n : size - 1;
		memcpy(who, name, k);
		who[k] = '\0';
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

zkl_previous zkl__previous_decide(const char *note, size_t len, const char *pred,
                                  const char *self, char *who, size_t size)
{
	char named[96];
	copy_name(who, size, "");
	if (pred && *pred && !is_reader(pred)) {
		if (note && note_says(note, len, released_word, named, sizeof named) &&
		    strcmp(named, pred) == 0) {
			copy_name(who, size, pred);
			return ZKL_PREVIOUS_RELEASED;
		}
		copy_name(who, size, pred);
		return ZKL_PREVIOUS_VANISHED;
	}
	if (!note)
		return ZKL_PREVIOUS_NONE;
	if (note_says(note, len, released_word, named, sizeof named)) {
		copy_name(who, size, named);
		return ZKL_PREVIOUS_RELEASED;
	}
	if (note_says(note, len, held_word, named, sizeof named) && strcmp(named, self) != 0) {
		copy_name(who, size, named);
		return ZKL_PREVIOUS_VANISHED;
	}
	/* Unreadable (not written by zklocks), or our own: it proves nothing. */
	return ZKL_PREVIOUS_NONE;
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
                         zkl_previous *how, char *who, size_t size)
{
	struct zkl_req get = {.kind = ZKL_OP_GET, .path = note};
	struct zkl_op *op = NULL;
	int zrc = zkl__request(c, &get, zkl__deadline(-1), &op);
	if (zrc == ZOK) {
		*how = zkl__previous_decide(op->value, op->value_len > 0 ? (size_t)op->value_len : 0,
		                            pred, self, who, size);
	} else if (zrc == ZNONODE) {
		*how = zkl__previous_decide(NULL, 0, pred, self, who, size);
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

int zkl__previous_at_grant(zkl_lock *l)
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
	char who[96] = "";
	char *note = note_path(l->path);
	int rc = note ? note_exchange(l->c, note, pred, self, &how, who, sizeof who)
	              : zkl__fail(ZKL_ENOMEM, "out of memory");
	if (rc == 0) {
		pthread_mutex_lock(l->mu);
		a = l->ops->own(l);
		if (a && a->node.path && !a->node.note) {
			a->prev_known = true;
			a->prev = how;
			memcpy(a->prev_node, who, sizeof a->prev_node);
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
	else if (!a || zkl__hold_lost(a->node.hold))
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

const char *zkl_previous_name(zkl_previous how)
{
	switch (how) {
	case ZKL_PREVIOUS_NONE: return "none";
	case ZKL_PREVIOUS_RELEASED: return "released";
	case ZKL_PREVIOUS_VANISHED: return "vanished";
	}
	return NULL;
}
