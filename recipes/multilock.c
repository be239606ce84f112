/* zkl_multilock: several locks held as one, all or nothing.
 *
 * Design notes
 * - Pure composition over the shared verbs of its members (zkl_lock_*): the multi-lock
 *   never touches ZooKeeper itself, so every member keeps its own queue, watch, lost
 *   reports and fencing token.
 * - Order. Members are kept in the order they will be taken. In canonical order an add
 *   inserts the member after every member that sorts before or equal to it (an insertion
 *   sort, hence stable): by path with strcmp, and for equal paths the read half of a
 *   read-write lock after anything else, so that a multi-lock over both halves of one
 *   rwlock takes the write half first and the read half as a downgrade (the other way
 *   round would be an upgrade, ZKL_EDEADLK). Two multi-locks over the same locks, built
 *   in any order, therefore take them in the same order and cannot deadlock.
 * - One deadline for the whole acquire: each member gets the time that is left (or -1,
 *   or 0 to try once); a member reached after the deadline is not tried. On any failure
 *   the members already taken are released in reverse order, so nothing stays held.
 * - Holds nest like Curator's InterProcessMultiLock: acquiring again re-enters the mutex
 *   members (a semaphore member is not reentrant: it takes one more lease, so a
 *   multi-lock with a semaphore-mutex times out instead), and each release undoes one acquire. The thread of the first level is the
 *   owner; only it may release, since its mutex members refuse anyone else.
 * - No internal lock: a multi-lock is used by one thread at a time (see the header). The
 *   members themselves are thread-safe. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/multilock.h>

#include "clock.h"
#include "errors_internal.h"
#include "common.h"

struct member {
	zkl_lock *l;
	int rank;        /* 1 for the read half of a read-write lock, else 0 */
};

struct zkl_multilock {
	enum zkl_multilock_order order;
	struct member *members;
	size_t n;
	size_t cap;
	int depth;       /* acquires not yet released */
	pthread_t owner; /* the thread of the outermost acquire, when depth > 0 */
};

/* The detail of a member's failure, with the member's own detail, which later calls
 * overwrite (so it is copied out first). */
#define DETAIL_MAX 512

static const char *member_path(const struct member *m)
{
	return zkl_lock_path(m->l);
}

/* Canonical comparison: path, then write (or anything else) before read. */
static int member_cmp(const struct member *a, const struct member *b)
{
	int c = strcmp(member_path(a), member_path(b));
	if (c)
		return c;
	return a->rank - b->rank;
}

int zkl_multilock_new(zkl_multilock **out, enum zkl_multilock_order order)
{
	zkl_clear_error();
	if (!out)
		return zkl_fail(ZKL_EINVAL, "out is NULL");
	*out = NULL;
	if (order != ZKL_MULTILOCK_CANONICAL && order != ZKL_MULTILOCK_AS_ADDED)
		return zkl_fail(ZKL_EINVAL, "unknown multilock order %d", (int)order);
	zkl_multilock *ml = calloc(1, sizeof *ml);
	if (!ml)
		return zkl_fail(ZKL_ENOMEM, "out of memory");
	ml->order = order;
	*out = ml;
	return 0;
}

/* Releases every member in reverse order, once. Returns the first error, with a detail
 * naming its member. */
static int release_all(zkl_multilock *ml)
{
	int first = 0;
	char detail[DETAIL_MAX] = "";
	for (size_t i = ml->n; i-- > 0;) {
		struct member *m = &ml->members[i];
		int rc = zkl_lock_release(m->l);
		if (rc && !first) {
			first = rc;
			snprintf(detail, sizeof detail, "releasing multilock member %zu of %zu (%s): %s",
			         i + 1, ml->n, member_path(m), zkl_last_error());
		}
	}
	if (ml->depth > 0)
		ml->depth--;
	if (first)
		return zkl_fail(first, "%s", detail);
	zkl_clear_error();
	return 0;
}

void zkl_multilock_free(zkl_multilock *ml)
{
	if (!ml)
		return;
	while (ml->depth > 0)
		release_all(ml);
	free(ml->members);
	free(ml);
}

static int add_member(zkl_multilock *ml, struct member m)
{
	if (ml->depth > 0)
		return zkl_fail(ZKL_EBUSY, "cannot add %s to a multilock that is held",
		                member_path(&m));
	for (size_t i = 0; i < ml->n; i++)
		if (ml->members[i].l == m.l)
			return zkl_fail(ZKL_EINVAL, "%s is already a member of this multilock",
			                member_path(&m));
	if (ml->n == ml->cap) {
		size_t cap = ml->cap ? ml->cap * 2 : 4;
		struct member *p = realloc(ml->members, cap * sizeof *p);
		if (!p)
			return zkl_fail(ZKL_ENOMEM, "out of memory");
		ml->members = p;
		ml->cap = cap;
	}
	/* Insert after every member that sorts before or equal to it (stable). */
	size_t at = ml->n;
	if (ml->order == ZKL_MULTILOCK_CANONICAL)
		while (at > 0 && member_cmp(&ml->members[at - 1], &m) > 0)
			at--;
	memmove(&ml->members[at + 1], &ml->members[at], (ml->n - at) * sizeof m);
	ml->members[at] = m;
	ml->n++;
	return 0;
}

int zkl_multilock_add(zkl_multilock *ml, zkl_lock *l)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	if (!l)
		return zkl_fail(ZKL_EINVAL, "lock is NULL");
	struct member mb = { .l = l, .rank = strcmp(zkl_lock_kind(l), "read") == 0 ? 1 : 0 };
	return add_member(ml, mb);
}

int zkl_multilock_acquire(zkl_multilock *ml, int timeout_ms)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	int rc = zkl_check_timeout(timeout_ms);
	if (rc)
		return rc;
	if (ml->n == 0)
		return zkl_fail(ZKL_EINVAL, "the multilock has no members");
	int64_t deadline = zkl_deadline(timeout_ms);
	char detail[DETAIL_MAX];
	size_t taken = 0;
	for (; taken < ml->n; taken++) {
		struct member *m = &ml->members[taken];
		int t = timeout_ms;
		if (timeout_ms > 0) {
			int64_t left = deadline - zkl_now_ms();
			if (left <= 0) {
				rc = ZKL_ETIMEDOUT;
				snprintf(detail, sizeof detail, "the deadline of %d ms passed before "
				         "multilock member %zu of %zu (%s)", timeout_ms, taken + 1,
				         ml->n, member_path(m));
				break;
			}
			t = (int)left;
		}
		rc = zkl_lock_acquire(m->l, t);
		if (rc) {
			snprintf(detail, sizeof detail, "acquiring multilock member %zu of %zu (%s): %s",
			         taken + 1, ml->n, member_path(m), zkl_last_error());
			break;
		}
	}
	if (taken < ml->n) {
		/* All or nothing: give back what was taken, newest first. */
		while (taken-- > 0)
			(void)zkl_lock_release(ml->members[taken].l);
		return zkl_fail(rc, "%s", detail);
	}
	if (ml->depth++ == 0)
		ml->owner = pthread_self();
	zkl_clear_error();
	return 0;
}

int zkl_multilock_release(zkl_multilock *ml)
{
	ZKL_CHECK_HANDLE(ml, "multilock");
	if (ml->depth == 0)
		return zkl_fail(ZKL_ENOTHELD, "the multilock is not held");
	if (!pthread_equal(ml->owner, pthread_self()))
		return zkl_fail(ZKL_ENOTOWNER, "the multilock is held by another thread");
	return release_all(ml);
}

bool zkl_multilock_is_held(zkl_multilock *ml)
{
	if (!ml || ml->depth == 0 || ml->n == 0)
		return false;
	for (size_t i = 0; i < ml->n; i++)
		if (!zkl_lock_is_held(ml->members[i].l))
			return false;
	return true;
}
