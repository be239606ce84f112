/* Background deletes: our nodes that must go (a release's delete, a node left by an
 * acquisition that gave up, a create whose answer was lost), retried until they succeed
 * or their session is gone, and indexed by folder so that a listing does not count our
 * own nodes on their way out as contenders.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

/* The pending deletes of one folder. */
struct zkl_task_folder {
	struct zkl_task_folder *next;      /* in its bucket */
	uint64_t hash;
	size_t len;
	struct zkl_task *tasks;
	char path[];                       /* the folder, len bytes, NUL-terminated */
};

static uint64_t folder_hash(const char *path, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)path[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static struct zkl_task_folder **folder_slot(zkl_client *c, const char *path, size_t len,
                                            uint64_t h)
{
	struct zkl_task_folder **fp = &c->task_folders[h & (c->task_nbuckets - 1)];
	while (*fp && ((*fp)->hash != h || (*fp)->len != len || memcmp((*fp)->path, path, len)))
		fp = &(*fp)->next;
	return fp;
}

static struct zkl_task_folder *folder_find(zkl_client *c, const char *path, size_t len)
{
	if (c->task_nfolders == 0)
		return NULL;
	return *folder_slot(c, path, len, folder_hash(path, len));
}

/* Doubles the buckets once there are more folders than buckets (a table that cannot
 * grow for want of memory only gets slower). */
static void folders_grow(zkl_client *c)
{
	if (c->task_nfolders < c->task_nbuckets)
		return;
	size_t n = c->task_nbuckets ? c->task_nbuckets * 2 : 64;
	struct zkl_task_folder **b = calloc(n, sizeof *b);
	if (!b)
		return;
	for (size_t i = 0; i < c->task_nbuckets; i++) {
		for (struct zkl_task_folder *f = c->task_folders[i], *next; f; f = next) {
			next = f->next;
			f->next = b[f->hash & (n - 1)];
			b[f->hash & (n - 1)] = f;
		}
	}
	free(c->task_folders);
	c->task_folders = b;
	c->task_nbuckets = n;
}

/* Puts a pending delete in its folder's index (mu held). Without memory it stays out of
 * it: a listing then counts that node of ours as a contender until its delete is
 * answered, which costs time, never exclusion. */
static void task_index(zkl_client *c, struct zkl_task *t)
{
	const char *slash = strrchr(t->path, '/');
	size_t len = slash ? (size_t)(slash - t->path) : 0;
	folders_grow(c);
	if (c->task_nbuckets == 0)
		return;
	uint64_t h = folder_hash(t->path, len);
	struct zkl_task_folder **fp = folder_slot(c, t->path, len, h);
	struct zkl_task_folder *f = *fp;
	if (!f) {
		f = malloc(sizeof *f + len + 1);
		if (!f)
			return;
		f->next = NULL;
		f->hash = h;
		f->len = len;
		f->tasks = NULL;
		memcpy(f->path, t->path, len);
		f->path[len] = 0;
		*fp = f;
		c->task_nfolders++;
	}
	t->folder = f;
	t->fprev = NULL;
	t->fnext = f->tasks;
	if (f->tasks)
		f->tasks->fprev = t;
	f->tasks = t;
}

static void task_unindex(zkl_client *c, struct zkl_task *t)
{
	struct zkl_task_folder *f = t->folder;
	if (!f)
		return;
	if (t->fprev)
		t->fprev->fnext = t->fnext;
	else
		f->tasks = t->fnext;
	if (t->fnext)
		t->fnext->fprev = t->fprev;
	t->folder = NULL;
	if (f->tasks)
		return;
	struct zkl_task_folder **fp = folder_slot(c, f->path, f->len, f->hash);
	*fp = f->next;
	c->task_nfolders--;
	free(f);
}

static void task_link(zkl_client *c, struct zkl_task *t, bool out)
{
	struct zkl_task **head = out ? &c->tasks_out : &c->tasks;
	t->out = out;
	t->prev = NULL;
	t->next = *head;
	if (*head)
		(*head)->prev = t;
	*head = t;
}

static void task_unlink(zkl_client *c, struct zkl_task *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else if (t->out)
		c->tasks_out = t->next;
	else
		c->tasks = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->next = t->prev = NULL;
}

/* Moves t to the list of tasks with a request out, or back (mu held). */
static void task_move(zkl_client *c, struct zkl_task *t, bool out)
{
	task_unlink(c, t);
	task_link(c, t, out);
}

static void task_free(struct zkl_task *t);

/* Ends a task (mu held). */
void zkl__task_drop(zkl_client *c, struct zkl_task *t)
{
	task_unlink(c, t);
	task_unindex(c, t);
	c->ntasks--;
	task_free(t);
}

static struct zkl_waiter *task_answer_apply(zkl_client *c, struct zkl_msg *m);
static struct zkl_waiter *task_take_over(zkl_client *c, struct zkl_msg *m);

/* A new task of kind on path (taken) in session generation gen, or NULL (no memory). */
static struct zkl_task *task_new(enum task_kind kind, char *path, uint64_t gen)
{
	struct zkl_task *t = calloc(1, sizeof *t);
	if (t) {
		t->kind = kind;
		t->path = path;
		t->gen = gen;
		t->msg.kind = MSG_TASK;
		t->msg.apply = task_answer_apply;
	}
	return t;
}

/* Adds a task (mu held); the event thread is woken to send it if `wake`. */
static void task_add(zkl_client *c, enum task_kind kind, const char *path, const char *uuid,
                     uint64_t gen, bool wake)
{
	char *p = strdup(path);
	struct zkl_task *t = p ? task_new(kind, p, gen) : NULL;
	if (!t) {
		/* Nothing more can be done without memory; the node goes with the session. */
		free(p);
		return;
	}
	if (uuid)
		memcpy(t->uuid, uuid, ZKL_UUID_LEN + 1);
	task_link(c, t, false);
	c->ntasks++;
	if (kind == TASK_DELETE)
		task_index(c, t);
	if (wake)
		zkl__loop_wake(c);
}

void zkl__task_delete(zkl_client *c, const char *path, uint64_t gen)
{
	task_add(c, TASK_DELETE, path, NULL, gen, true);
}

void zkl__task_find_delete(zkl_client *c, const char *parent, const char *uuid, uint64_t gen)
{
	task_add(c, TASK_FIND_DELETE, parent, uuid, gen, true);
}

static void task_void_done(int rc, const void *data);
static void task_strings_done(int rc, const struct String_vector *sv, const void *data);

/* Sends t's request now. A request refused is looked at again on the loop's next
 * turn. */
static void task_send(zkl_client *c, struct zkl_task *t)
{
	t->s = c->sess;
	t->inflight = true;
	t->s->inflight++;
	task_move(c, t, true);
	int rc = t->kind == TASK_DELETE
	                 ? c->zk->remove(t->s->zh, t->path, -1, task_void_done, t)
	                 : c->zk->children(t->s->zh, t->path, NULL, NULL, task_strings_done, t);
	if (rc != ZOK) {
		/* Refused: no completion will come. */
		t->rc = rc;
		t->done = true;
		t->s->inflight--;
		task_move(c, t, false);
		zkl__loop_wake(c);
	}
}

/* Whether t can be sent at once: its session is the current one, and connected. */
static bool task_sendable(const zkl_client *c, const struct zkl_task *t)
{
	return t->gen == c->gen && c->sess->connected;
}

bool zkl__task_delete_now(zkl_client *c, const char *path, uint64_t gen)
{
	task_add(c, TASK_DELETE, path, NULL, gen, false);
	struct zkl_task *t = c->tasks;
	if (!t || strcmp(t->path, path) != 0 || t->inflight || !task_sendable(c, t)) {
		zkl__loop_wake(c); /* the loop sends it when it can */
		return false;
	}
	/* Sent from here, on any thread, at once: it travels ahead of whatever this thread
	 * sends next, and a release costs no thread switch (handing it to the loop made a
	 * lock-and-release cycle about 6% dearer). Its answer goes to the loop. */
	task_send(c, t);
	return true;
}

/* One release's delete fewer under way (zkl__task_delete_sent). */
static void unpin(zkl_client *c)
{
	if (atomic_fetch_sub(&c->pins, 1) == 1)
		zkl__kick(c); /* a close may wait for it */
}

bool zkl__task_delete_sent(zkl_client *c, char *path, uint64_t gen)
{
	/* Pinned from here until the loop takes the task over: meanwhile it closes no
	 * session's handle, so the one read below stays open. The pin is counted before
	 * the session is read, and the loop publishes a new session before it looks at the
	 * pins: one of the two sees the other. */
	atomic_fetch_add(&c->pins, 1);
	struct zkl_session *s = atomic_load(&c->sess_pub);
	struct zkl_task *t = NULL;
	if (!s || s->gen != gen || !s->connected || !(t = task_new(TASK_DELETE, path, gen))) {
		unpin(c);
		return false;
	}
	t->s = s;
	t->inflight = true;
	t->rel.kind = MSG_RELEASE;
	t->rel.apply = task_take_over;
	/* Handed over before it is sent, so that the loop knows the task before its answer,
	 * and without a wake: it has nothing to do with it until the answer comes. */
	zkl__inbox_put(c, &t->rel, true);
	/* Sent from here, at once, for the reasons zkl__task_delete_now() gives. Once sent,
	 * t is the loop's. */
	int rc = c->zk->remove(s->zh, path, -1, task_void_done, t);
	if (rc != ZOK) {
		/* Refused: no completion will come; the loop sends it again when it can. */
		t->zrc = rc;
		zkl__inbox_put(c, &t->msg, false);
	}
	return true;
}

/* The loop takes over a release's delete sent by its releasing thread. */
static struct zkl_waiter *task_take_over(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_task *t = (struct zkl_task *)((char *)m - offsetof(struct zkl_task, rel));
	t->s->inflight++; /* its answer, or its refusal, comes after this */
	task_link(c, t, true);
	c->ntasks++;
	task_index(c, t);
	unpin(c);
	return NULL;
}

bool zkl__task_pending(zkl_client *c, const char *parent, size_t parent_len, const char *name)
{
	struct zkl_task_folder *f = folder_find(c, parent, parent_len);
	for (struct zkl_task *t = f ? f->tasks : NULL; t; t = t->fnext)
		if (strcmp(t->path + parent_len + 1, name) == 0)
			return true;
	return false;
}

size_t zkl__tasks_pending_in(zkl_client *c, const char *parent, size_t parent_len,
                            const char **names, size_t max)
{
	size_t n = 0;
	struct zkl_task_folder *f = folder_find(c, parent, parent_len);
	for (struct zkl_task *t = f ? f->tasks : NULL; t; t = t->fnext) {
		if (n < max)
			names[n] = t->path + parent_len + 1;
		n++;
	}
	return n;
}

static void task_free(struct zkl_task *t)
{
	free(t->path);
	free(t->found);
	free(t);
}

/* A task's request answered, on the loop: a delete, or the search of a FIND_DELETE,
 * whose find is in t->found. */
static struct zkl_waiter *task_answer_apply(zkl_client *c, struct zkl_msg *m)
{
	struct zkl_task *t = (struct zkl_task *)((char *)m - offsetof(struct zkl_task, msg));
	const int rc = t->zrc;
	if (--t->s->inflight == 0)
		zkl__loop_wake(c);
	if (t->kind == TASK_DELETE && (rc == ZOK || rc == ZNONODE)) {
		/* Done: the usual end of a release. */
		zkl__task_drop(c, t);
		return NULL;
	}
	t->rc = rc;
	t->done = true;
	task_move(c, t, false);
	zkl__loop_wake(c);
	return NULL;
}

static void task_void_done(int rc, const void *data)
{
	struct zkl_task *t = (struct zkl_task *)data;
	t->zrc = rc;
	/* A delete done is the usual end of a release: nothing to do but forget the task,
	 * on the loop's next turn. */
	zkl__inbox_put(t->s->c, &t->msg, rc == ZOK || rc == ZNONODE);
}

static void task_strings_done(int rc, const struct String_vector *sv, const void *data)
{
	struct zkl_task *t = (struct zkl_task *)data;
	char *found = NULL;
	if (rc == ZOK && sv) {
		for (int i = 0; i < sv->count; i++) {
			if (zkl__name_has_uuid(sv->data[i], t->uuid)) {
				found = zkl__path_join(t->path, sv->data[i]);
				break;
			}
		}
	}
	t->found = found;
	t->zrc = rc;
	zkl__inbox_put(t->s->c, &t->msg, false);
}

/* One pass over the tasks (event thread, mu held). Returns the earliest time a task
 * wants another look, or INT64_MAX. */
int64_t zkl__tasks_run(zkl_client *c)
{
	int64_t next_at = INT64_MAX;
	int64_t now = zkl__now_ms();
	/* A send moves its task off this list, a refused one back to its head: next is read
	 * before. */
	struct zkl_task *t = c->tasks;
	while (t) {
		struct zkl_task *next = t->next;
		if (t->done) {
			t->inflight = t->done = false;
			int rc = t->rc;
			if (rc == ZOK && t->kind == TASK_FIND_DELETE) {
				if (t->found) {
					free(t->path);
					t->path = t->found;
					t->found = NULL;
					t->kind = TASK_DELETE;
					task_index(c, t);
					continue; /* delete it on this pass */
				}
				rc = ZNONODE; /* the create never happened */
			}
			if (rc == ZOK || rc == ZNONODE) {
				zkl__log(c, ZKL_LOG_DEBUG, "background delete of %s done", t->path);
				zkl__task_drop(c, t);
				t = next;
				continue;
			}
			const enum zkl__zk_class k = zkl__zk_class(rc);
			if (k != ZKL_ZK_UNKNOWN && k != ZKL_ZK_EXPIRED && k != ZKL_ZK_CLOSING) {
				zkl__log(c, ZKL_LOG_ERROR, "cannot delete %s: %s; it stays until its "
				        "session ends", t->path, zerror(rc));
				zkl__task_drop(c, t);
				t = next;
				continue;
			}
			t->not_before = now + 100;
		}
		if (t->gen != c->gen) {
			/* Its session is gone, and the ephemeral node with it. */
			zkl__task_drop(c, t);
			t = next;
			continue;
		}
		if (!c->sess->connected || t->not_before > now) {
			if (c->sess->connected && t->not_before < next_at)
				next_at = t->not_before;
			t = next;
			continue;
		}
		task_send(c, t);
		t = next;
	}
	return next_at;
}

