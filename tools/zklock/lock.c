/* The lock, whichever kind: a mutex (default), one half of a zkl_rwlock (--read,
 * --write), one lease of a zkl_semaphore (--semaphore N) or leadership of a zkl_leader
 * (--leader, Curator's LeaderLatch layout; a release leaves the election, and with
 * --requeue the next acquire joins it again at the back). All are used through their
 * zkl_lock view, with the shared verbs of <zklocks/lock.h>, so they differ only in how
 * the handle is made. The lost and revoke callbacks tell signals.c's state. */
#include "zklock.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The node gone while held (ZKL_EDELETED; a leader's view: ZKL_ENOTHELD) is a loss
 * that nothing covers: the next holder may run already. */
static void on_lock_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)data;
	note_lost(reason == ZKL_EDELETED || reason == ZKL_ENOTHELD);
}

/* Revocation asked (on the event thread, where the handle outlives the callback): a
 * waiter withdraws; a holder's command is stopped by run_command(). */
static void on_revoke(zkl_mutex *m, void *data)
{
	(void)m;
	struct lock *lk = data;
	if (note_revoked())
		zkl_lock_cancel(lk->l);
}

/* The same for a lease of a semaphore (NULL: our lease node still waits for a turn). */
static void on_lease_revoke(zkl_semaphore *s, zkl_lease *lease, void *data)
{
	(void)s;
	(void)lease;
	struct lock *lk = data;
	if (note_revoked())
		zkl_lock_cancel(lk->l);
}

/* The same for leadership (zklock revoke of the leader's node): the command is stopped
 * and leadership released; with --requeue zklock joins again at the back. */
static void on_leader_revoke(zkl_leader *l, void *data)
{
	(void)l;
	struct lock *lk = data;
	if (note_revoked())
		zkl_lock_cancel(lk->l);
}

static void free_mutex(void *h)
{
	zkl_mutex_free(h);
}

static void free_rwlock(void *h)
{
	zkl_rwlock_free(h);
}

static void free_semaphore(void *h)
{
	zkl_semaphore_free(h); /* and the lease its view holds */
}

static void free_leader(void *h)
{
	zkl_leader_free(h); /* and leaves the election */
}

/* The handle of a mutex or a half: the naming, and revocation. */
static int mutex_setup(const struct opts *o, struct lock *lk, zkl_mutex *m)
{
	lk->l = zkl_mutex_lock(m);
	int rc = zkl_mutex_set_naming(m, o->naming);
	if (rc == 0 && o->revocable)
		rc = zkl_mutex_make_revocable(m, on_revoke, lk);
	return rc;
}

/* The handle of the mode and its view: what the kinds differ in. */
static int handle_new(const struct opts *o, struct lock *lk)
{
	int rc;
	switch (o->mode) {
	case MODE_MUTEX: {
		zkl_mutex *m;
		rc = zkl_mutex_new(&m, lk->c, o->path);
		if (rc != 0)
			return rc;
		lk->handle = m;
		lk->handle_free = free_mutex;
		return mutex_setup(o, lk, m);
	}
	case MODE_READ:
	case MODE_WRITE: {
		zkl_rwlock *rw;
		rc = zkl_rwlock_new(&rw, lk->c, o->path);
		if (rc != 0)
			return rc;
		lk->handle = rw;
		lk->handle_free = free_rwlock;
		return mutex_setup(o, lk, o->mode == MODE_READ ? zkl_rwlock_read(rw)
		                                               : zkl_rwlock_write(rw));
	}
	case MODE_SEMAPHORE: {
		zkl_semaphore *s;
		rc = zkl_semaphore_new(&s, lk->c, o->path, o->sem_max);
		if (rc != 0)
			return rc;
		lk->handle = s;
		lk->handle_free = free_semaphore;
		lk->l = zkl_semaphore_lock(s);
		return o->revocable ? zkl_semaphore_make_revocable(s, on_lease_revoke, lk) : 0;
	}
	case MODE_LEADER:
	default: {
		zkl_leader_options lo;
		zkl_leader_options_init(&lo);
		lo.id = lk->id;
		/* Like the other modes: lost when the session may be gone, not on every blip. */
		lo.lose_on_suspend = false;
		lo.on_revoke = on_leader_revoke;
		lo.data = lk;
		zkl_leader *l;
		rc = zkl_leader_new(&l, lk->c, o->path, &lo);
		if (rc != 0)
			return rc;
		lk->handle = l;
		lk->handle_free = free_leader;
		lk->l = zkl_leader_lock(l);
		return 0;
	}
	}
}

/* With --previous or --lock-delay, an exclusive lock (a mutex, --write) tells
 * its command how the previous holder left: it released (its release left a note), it
 * vanished (its node went without one: its session ended, or a library that leaves no
 * note released it), or there was none. Not by default: the note is a persistent node
 * beside the lock (PATH.previous), which stays after the lock is free, and a write more
 * for every acquire; a job that does not read it would pay for nothing, and jobs on
 * paths made up as they go would leave a node each behind. Returns 0 or an exit code
 * after reporting. */
static int track_previous(const struct opts *o, struct lock *lk)
{
	if (!o->previous && !o->lock_delay_ms)
		return 0;
	int rc = zkl_lock_track_previous(lk->l, true);
	if (rc == 0) {
		lk->tracked = true;
		return 0;
	}
	const char *detail = *zkl_last_error() ? zkl_last_error() : zkl_strerror(rc);
	const char *opt = o->lock_delay_ms ? "--lock-delay" : "--previous";
	if (rc == ZKL_EINVAL)
		return usage_error("%s: how the previous holder of %s left cannot be told: %s", opt,
		                   o->path, detail);
	msg("%s: how the previous holder of %s left cannot be told: %s", opt, o->path, detail);
	return EXIT_SOFTWARE;
}

/* Makes the handle. Returns 0 or an exit code after reporting. */
int lock_new(const struct opts *o, zkl_client *c, struct lock *lk)
{
	memset(lk, 0, sizeof *lk);
	lk->mode = o->mode;
	lk->c = c;
	lk->path = o->path;
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		strcpy(host, "unknown");
	host[sizeof host - 1] = '\0';
	snprintf(lk->id, sizeof lk->id, "%s:%ld", host, (long)getpid());

	int rc = handle_new(o, lk);
	if (rc == 0)
		rc = zkl_lock_on_lost(lk->l, on_lock_lost, NULL);
	if (rc == 0 && o->data)
		rc = zkl_lock_set_data(lk->l, o->data, strlen(o->data));
	if (rc == 0)
		return track_previous(o, lk);
	const char *detail = zkl_last_error();
	if (rc == ZKL_EINVAL)
		return usage_error("invalid lock path \"%s\": %s", o->path,
		                   *detail ? detail : zkl_strerror(rc));
	msg("%s: %s", o->path, *detail ? detail : zkl_strerror(rc));
	return EXIT_SOFTWARE;
}

void lock_free(struct lock *lk)
{
	if (lk->handle_free)
		lk->handle_free(lk->handle);
	memset(lk, 0, sizeof *lk);
}

const char *lock_what(const struct lock *lk)
{
	return lk->mode == MODE_LEADER ? "leadership of " : "";
}

/* Who holds lk's path, in printable form, into buf; false if nobody (or unknown). Sets
 * *ahead to the number of nodes before ours (the queue's length when ours is not found
 * yet), if ahead is not NULL. */
bool describe_holder(struct lock *lk, char *buf, size_t bufsz, size_t *ahead)
{
	zkl_inspection *in;
	if (ahead)
		*ahead = 0;
	if (inspect_path(lk->c, lk->path, &in) != 0)
		return false;
	const zkl_lock_info *li = zkl_inspection_lock(in, 0);
	size_t len = 0, holders = 0, mine = li->count, queued = 0;
	buf[0] = '\0';
	/* Our node, as the library knows it (queued or held). */
	char own[ZKL_NODE_MAX];
	bool have_own = zkl_lock_node(lk->l, own, sizeof own) > 0;
	for (size_t k = 0; k < li->count; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		bool ours = have_own && strcmp(n->path, own) == 0;
		if (ours && mine == li->count)
			mine = queued;
		if (!n->holds) {
			queued++;
			continue;
		}
		if (ours)
			continue;
		holders++;
		if (holders <= 3 && len + 8 < bufsz) {
			if (holders > 1) {
				memcpy(buf + len, ", ", 3);
				len += 2;
			}
			printable(buf + len, bufsz - len, n->data, n->data_len);
			len = strlen(buf);
		}
	}
	if (holders > 3 && len + 16 < bufsz)
		snprintf(buf + len, bufsz - len, " and %zu more", holders - 3);
	if (lk->mode == MODE_SEMAPHORE && holders > 0) {
		len = strlen(buf);
		snprintf(buf + len, bufsz - len, " (%zu lease%s taken)", holders, holders == 1 ? "" : "s");
	}
	if (ahead) {
		/* Waiters ahead of us; the holders count for a mutex, whose queue has one line. */
		size_t q = mine < li->count ? mine : queued;
		*ahead = lk->mode == MODE_SEMAPHORE ? q : q + holders;
		if (lk->mode != MODE_SEMAPHORE && mine >= li->count)
			*ahead = li->count;
	}
	zkl_inspection_free(in);
	return holders > 0;
}
