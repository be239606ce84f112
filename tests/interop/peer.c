/* Spawning and driving the interop peers. See peer.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "harness.h"
#include "peer.h"

extern char **environ;

struct line {
	struct line *next;
	char *slot;
	char *text; /* after "<slot> " */
};

struct peer {
	pid_t pid;
	int in_fd;   /* the peer's stdin */
	int out_fd;  /* the peer's stdout */
	pthread_t reader;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct line *head, **tail; /* lines not yet taken, oldest first (under mu) */
	bool eof;                  /* under mu */
	char session[64];
	char data[512];
	const char *name;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* pthread_cond_timedwait takes CLOCK_REALTIME unless told otherwise: build the absolute
 * time from the remaining milliseconds each time. */
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
	int64_t left = deadline - now_ms();
	if (left <= 0)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += left / 1000;
	ts.tv_nsec += (left % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}

static void wait_ms(struct peer *p, int64_t deadline)
{
	cond_wait_until(&p->cv, &p->mu, deadline);
}

static void *reader_main(void *arg)
{
	struct peer *p = arg;
	FILE *f = fdopen(p->out_fd, "r");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;
	while (f && (n = getline(&buf, &cap, f)) >= 0) {
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
			buf[--n] = 0;
		if (getenv("ZKL_INTEROP_TRACE"))
			fprintf(stderr, "[%s] %s\n", p->name, buf);
		char *sp = strchr(buf, ' ');
		struct line *l = calloc(1, sizeof *l);
		l->slot = strndup(buf, sp ? (size_t)(sp - buf) : strlen(buf));
		l->text = strdup(sp ? sp + 1 : "");
		pthread_mutex_lock(&p->mu);
		*p->tail = l;
		p->tail = &l->next;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	free(buf);
	if (f)
		fclose(f);
	pthread_mutex_lock(&p->mu);
	p->eof = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Takes the oldest line of slot, if any (under mu). */
static char *take(struct peer *p, const char *slot)
{
	for (struct line **pl = &p->head; *pl; pl = &(*pl)->next) {
		struct line *l = *pl;
		if (strcmp(l->slot, slot) != 0)
			continue;
		*pl = l->next;
		if (p->tail == &l->next)
			p->tail = pl;
		char *t = l->text;
		free(l->slot);
		free(l);
		return t;
	}
	return NULL;
}

char *peer_next(peer *p, const char *slot, int ms)
{
	int64_t deadline = now_ms() + ms;
	pthread_mutex_lock(&p->mu);
	char *t;
	while (!(t = take(p, slot)) && !p->eof && now_ms() < deadline)
		wait_ms(p, deadline);
	pthread_mutex_unlock(&p->mu);
	return t;
}

bool peer_quiet(peer *p, const char *slot, int ms)
{
	int64_t deadline = now_ms() + ms;
	bool quiet = true;
	pthread_mutex_lock(&p->mu);
	/* Looks at least once, so that ms 0 checks what has arrived already. */
	for (;;) {
		for (struct line *l = p->head; l; l = l->next)
			if (strcmp(l->slot, slot) == 0)
				quiet = false;
		if (!quiet || p->eof || now_ms() >= deadline)
			break;
		wait_ms(p, deadline);
	}
	pthread_mutex_unlock(&p->mu);
	return quiet;
}

void peer_send(peer *p, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof buf - 1)
		fail_msg("peer command too long");
	buf[n++] = '\n';
	/* One write per line (shorter than PIPE_BUF), so lines of threads never mix. */
	if (write(p->in_fd, buf, (size_t)n) != n)
		fail_msg("%s peer: cannot send \"%.*s\": %s", p->name, n - 1, buf, strerror(errno));
}

void peer_expect(peer *p, const char *slot, const char *want, int ms)
{
	char *t = peer_next(p, slot, ms);
	if (!t)
		fail_msg("%s peer, slot %s: expected \"%s\" within %d ms, got nothing%s", p->name,
		         slot, want, ms, p->eof ? " (the peer has exited)" : "");
	if (strncmp(t, want, strlen(want)) != 0) {
		char copy[512];
		snprintf(copy, sizeof copy, "%s", t);
		free(t);
		fail_msg("%s peer, slot %s: expected \"%s\", got \"%s\"", p->name, slot, want, copy);
	}
	free(t);
}

void peer_do(peer *p, const char *slot, const char *want, int ms, const char *fmt, ...)
{
	char cmd[4000];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	peer_send(p, "%s %s", slot, cmd);
	peer_expect(p, slot, want, ms);
}

/* The peer cannot run here: skip, or fail under CI, which must run these tests. */
static void unavailable(const char *what, const char *why)
{
	const char *ci = getenv("CI");
	bool in_ci = ci && strcmp(ci, "true") == 0;
	fprintf(stderr, "interop: the %s peer cannot run: %s\n%s\n", what, why,
	        in_ci ? "CI=true: failing (scripts/deps installs the peers)"
	              : "skipping (scripts/deps installs the peers; CI=true makes this a failure)");
	fflush(stderr);
	exit(in_ci ? 1 : 77);
}

peer *peer_start(enum peer_kind kind, int session_timeout_ms)
{
	const char *servers = h_servers();
	char timeout[32];
	snprintf(timeout, sizeof timeout, "%d", session_timeout_ms);
	const char *name = kind == PEER_CURATOR ? "Curator" : "kazoo";
	const char *argv[16];
	int argc = 0;
	if (kind == PEER_CURATOR) {
		const char *java = getenv("ZKL_INTEROP_JAVA");
		const char *cp = getenv("ZKL_INTEROP_CLASSPATH");
		if (!java || !*java || !cp || !*cp)
			unavailable(name, "java, javac or Curator's jars were not found when the build "
			                  "was configured (see the meson summary)");
		argv[argc++] = java;
		/* A short-lived helper: skip the optimising compiler and the parallel GC. */
		argv[argc++] = "-XX:+UseSerialGC";
		argv[argc++] = "-XX:TieredStopAtLevel=1";
		argv[argc++] = "-Xshare:auto";
		argv[argc++] = "-cp";
		argv[argc++] = cp;
		argv[argc++] = "Peer";
	} else {
		const char *python = getenv("ZKL_INTEROP_PYTHON");
		const char *script = getenv("ZKL_INTEROP_PEER_PY");
		if (!python || !*python || !script || !*script)
			unavailable(name, "python3 was not found when the build was configured");
		argv[argc++] = python;
		argv[argc++] = script;
	}
	argv[argc++] = servers;
	argv[argc++] = timeout;
	argv[argc] = NULL;

	/* A peer that dies must fail the test, not kill it with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		fail_msg("pipe2: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	struct peer *p = calloc(1, sizeof *p);
	p->name = name;
	int rc = posix_spawn(&p->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	if (rc != 0) {
		char why[512];
		snprintf(why, sizeof why, "cannot run %s: %s", argv[0], strerror(rc));
		unavailable(name, why);
	}
	p->in_fd = in[1];
	p->out_fd = out[0];
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->tail = &p->head;
	pthread_create(&p->reader, NULL, reader_main, p);

	int64_t start = now_ms();
	for (;;) {
		char *t = peer_next(p, "*", 60000);
		if (!t) {
			int status = 0;
			waitpid(p->pid, &status, 0);
			char why[256];
			snprintf(why, sizeof why, "%s exited (status %d) before it was ready; its "
			                          "error output is above", argv[0], status);
			unavailable(name, why);
		}
		if (strncmp(t, "fatal ", 6) == 0) {
			if (kind == PEER_KAZOO && strstr(t, "kazoo is not installed"))
				unavailable(name, t);
			fail_msg("%s peer: %s", name, t);
		}
		if (strncmp(t, "ready ", 6) == 0) {
			char sess[64] = "", data[512] = "";
			sscanf(t + 6, "%63s %511s", sess, data);
			snprintf(p->session, sizeof p->session, "%s", sess);
			snprintf(p->data, sizeof p->data, "%s", data);
			free(t);
			break;
		}
		free(t);
	}
	fprintf(stderr, "interop: %s peer ready in %lld ms (session 0x%s, node data \"%s\")\n",
	        name, (long long)(now_ms() - start), p->session, p->data);
	return p;
}

const char *peer_session(const peer *p)
{
	return p->session;
}

const char *peer_data(const peer *p)
{
	return p->data;
}

static void quiet_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The next "*" line that begins with want (other "*" lines, such as state changes, are
 * dropped). NULL after ms. */
static char *next_global(peer *p, const char *want, int ms)
{
	int64_t deadline = now_ms() + ms;
	for (;;) {
		int64_t left = deadline - now_ms();
		char *t = peer_next(p, "*", left > 0 ? (int)left : 0);
		if (!t || strncmp(t, want, strlen(want)) == 0)
			return t;
		free(t);
	}
}

void peer_expire(peer *p)
{
	peer_send(p, "* info");
	char *t = next_global(p, "info ", 10000);
	if (!t)
		fail_msg("%s peer did not answer \"* info\"", p->name);
	char sid[64] = "", pass[128] = "";
	sscanf(t + 5, "%63s %127s", sid, pass);
	free(t);
	clientid_t cid;
	memset(&cid, 0, sizeof cid);
	cid.client_id = (int64_t)strtoull(sid, NULL, 16);
	if (strlen(pass) != 2 * sizeof cid.passwd)
		fail_msg("%s peer: unexpected session password \"%s\"", p->name, pass);
	for (size_t i = 0; i < sizeof cid.passwd; i++)
		cid.passwd[i] = (char)(hexval(pass[2 * i]) * 16 + hexval(pass[2 * i + 1]));

	/* Join the session from a second handle, then close it: the server ends the session
	 * (its ephemeral nodes go) and the peer learns on reconnecting that it expired. */
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	zhandle_t *zh = zookeeper_init2(h_servers(), quiet_watcher, 10000, &cid, NULL, 0, NULL);
	if (!zh)
		fail_msg("zookeeper_init2: %s", strerror(errno));
	for (int i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		usleep(5000);
	if (zoo_state(zh) != ZOO_CONNECTED_STATE)
		fail_msg("could not join the %s peer's session 0x%s", p->name, sid);
	zookeeper_close(zh);
	t = next_global(p, "state LOST", 30000);
	if (!t)
		fail_msg("the %s peer never reported its session lost", p->name);
	free(t);
}

void peer_stop(peer *p)
{
	if (!p)
		return;
	/* Not peer_send(): a peer that has died already must not fail the teardown. */
	static const char quit[] = "* quit\n";
	if (write(p->in_fd, quit, sizeof quit - 1) < 0)
		fprintf(stderr, "interop: the %s peer had exited already\n", p->name);
	close(p->in_fd);
	int status;
	int64_t deadline = now_ms() + 10000;
	while (waitpid(p->pid, &status, WNOHANG) == 0) {
		if (now_ms() > deadline) {
			fprintf(stderr, "interop: the %s peer did not quit: killing it\n", p->name);
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			break;
		}
		usleep(10000);
	}
	pthread_join(p->reader, NULL);
	while (p->head) {
		struct line *l = p->head;
		p->head = l->next;
		free(l->slot);
		free(l->text);
		free(l);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}


/* ---- zklocks contenders ---- */

enum zh_cmd { ZH_NONE, ZH_ACQUIRE, ZH_RELEASE, ZH_QUIT };

struct zh {
	enum zh_kind kind;
	zkl_client *c;
	zkl_mutex *m;             /* ZH_MUTEX */
	zkl_rwlock *rw;           /* ZH_READ, ZH_WRITE */
	zkl_semaphore_mutex *sm;  /* ZH_SEMMUTEX */
	zkl_semaphore *s;         /* ZH_SEM: one lease per acquire of its view */
	zkl_lock *l;              /* the view of whichever it is */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum zh_cmd cmd; /* under mu: the command being run, ZH_NONE when idle */
	int arg;         /* under mu */
	int rc;          /* under mu: the result of the last command */
	zkl_previous prev;   /* under mu: after an acquire of a tracking contender */
	char prev_node[128];
};

static int zh_run(zh *z, enum zh_cmd cmd, int arg)
{
	if (cmd != ZH_ACQUIRE)
		return zkl_lock_release(z->l);
	int rc = zkl_lock_acquire(z->l, arg);
	zkl_previous how = ZKL_PREVIOUS_NONE;
	char node[128] = "";
	if (rc == 0 && zkl_lock_previous(z->l, &how, node, sizeof node) == 0) {
		pthread_mutex_lock(&z->mu);
		z->prev = how;
		memcpy(z->prev_node, node, sizeof node);
		pthread_mutex_unlock(&z->mu);
	}
	return rc;
}

static void *zh_main(void *arg)
{
	zh *z = arg;
	pthread_mutex_lock(&z->mu);
	for (;;) {
		while (z->cmd == ZH_NONE)
			pthread_cond_wait(&z->cv, &z->mu);
		enum zh_cmd cmd = z->cmd;
		if (cmd == ZH_QUIT)
			break;
		int a = z->arg;
		pthread_mutex_unlock(&z->mu);
		int rc = zh_run(z, cmd, a);
		pthread_mutex_lock(&z->mu);
		z->rc = rc;
		z->cmd = ZH_NONE;
		pthread_cond_broadcast(&z->cv);
	}
	/* Leave nothing held: a mutex hold can only be released by this thread. */
	pthread_mutex_unlock(&z->mu);
	if (zkl_lock_is_held(z->l))
		zh_run(z, ZH_RELEASE, 0);
	return NULL;
}

zh *zh_new(enum zh_kind kind, const char *path, zkl_naming naming, int max_leases,
           const char *data)
{
	zh *z = calloc(1, sizeof *z);
	z->kind = kind;
	z->c = h_client(0);
	size_t len = data ? strlen(data) : 0;
	switch (kind) {
	case ZH_MUTEX:
		CHECK_OK(zkl_mutex_new(&z->m, z->c, path));
		CHECK_OK(zkl_mutex_set_naming(z->m, naming));
		z->l = zkl_mutex_lock(z->m);
		break;
	case ZH_READ:
	case ZH_WRITE:
		CHECK_OK(zkl_rwlock_new(&z->rw, z->c, path));
		CHECK_OK(zkl_rwlock_set_naming(z->rw, naming));
		z->l = zkl_mutex_lock(kind == ZH_READ ? zkl_rwlock_read(z->rw)
		                                      : zkl_rwlock_write(z->rw));
		break;
	case ZH_SEMMUTEX:
		CHECK_OK(zkl_semaphore_mutex_new(&z->sm, z->c, path));
		z->l = zkl_semaphore_mutex_lock(z->sm);
		break;
	case ZH_SEM:
		CHECK_OK(zkl_semaphore_new(&z->s, z->c, path, max_leases));
		z->l = zkl_semaphore_lock(z->s);
		break;
	}
	if (data)
		CHECK_OK(zkl_lock_set_data(z->l, data, len));
	pthread_mutex_init(&z->mu, NULL);
	pthread_cond_init(&z->cv, NULL);
	pthread_create(&z->th, NULL, zh_main, z);
	return z;
}

static void zh_post(zh *z, enum zh_cmd cmd, int arg)
{
	pthread_mutex_lock(&z->mu);
	bool busy = z->cmd != ZH_NONE;
	if (!busy) {
		z->cmd = cmd;
		z->arg = arg;
		pthread_cond_broadcast(&z->cv);
	}
	pthread_mutex_unlock(&z->mu);
	if (busy)
		fail_msg("zklocks contender: a command is still running");
}

void zh_start_acquire(zh *z, int timeout_ms)
{
	zh_post(z, ZH_ACQUIRE, timeout_ms);
}

int zh_wait(zh *z, int ms)
{
	int64_t deadline = now_ms() + ms;
	pthread_mutex_lock(&z->mu);
	while (z->cmd != ZH_NONE && now_ms() < deadline)
		cond_wait_until(&z->cv, &z->mu, deadline);
	int rc = z->cmd != ZH_NONE ? ZH_PENDING : z->rc;
	pthread_mutex_unlock(&z->mu);
	return rc;
}

int zh_acquire(zh *z, int timeout_ms)
{
	zh_post(z, ZH_ACQUIRE, timeout_ms);
	int rc = zh_wait(z, (timeout_ms < 0 ? 60000 : timeout_ms) + 30000);
	if (rc == ZH_PENDING)
		fail_msg("zklocks acquire(%d) did not return", timeout_ms);
	return rc;
}

int zh_release(zh *z)
{
	zh_post(z, ZH_RELEASE, 0);
	int rc = zh_wait(z, 30000);
	if (rc == ZH_PENDING)
		fail_msg("zklocks release did not return");
	return rc;
}

int zh_participants(zh *z, zkl_participant **out, size_t *count)
{
	return zkl_lock_participants(z->l, out, count);
}

void zh_free(zh *z)
{
	if (!z)
		return;
	for (int i = 0; i < 100 && zh_wait(z, 0) == ZH_PENDING; i++) {
		zkl_lock_cancel(z->l);
		zh_wait(z, 100);
	}
	if (zh_wait(z, 10000) == ZH_PENDING)
		fail_msg("zklocks contender: a pending acquire did not end when cancelled");
	zh_post(z, ZH_QUIT, 0);
	pthread_join(z->th, NULL);
	zkl_mutex_free(z->m);
	zkl_rwlock_free(z->rw);
	zkl_semaphore_mutex_free(z->sm);
	zkl_semaphore_free(z->s);
	zkl_client_close(z->c);
	pthread_mutex_destroy(&z->mu);
	pthread_cond_destroy(&z->cv);
	free(z);
}

void zh_track(zh *z)
{
	CHECK_OK(zkl_lock_track_previous(z->l, true));
}

zkl_previous zh_previous(zh *z, char *node, size_t size)
{
	pthread_mutex_lock(&z->mu);
	zkl_previous how = z->prev;
	snprintf(node, size, "%s", z->prev_node);
	pthread_mutex_unlock(&z->mu);
	return how;
}

/* ---- scenarios that both the Curator and the kazoo tests run ---- */

void peer_check_peer_holds(peer *p, const char *path, zkl_naming naming, const char *verb)
{
	peer_do(p, "a", "acquired", PEER_SOON, "acquire %s %s -1", verb, path);
	zh *z = zh_new(ZH_MUTEX, path, naming, 0, NULL);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, PEER_TRY));
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(z, 0));
	zh_start_acquire(z, 30000);
	h_wait_children(path, 2);
	assert_int_equal(zh_wait(z, 300), ZH_PENDING);
	peer_do(p, "a", "released", PEER_SOON, "release");
	CHECK_OK(zh_wait(z, PEER_SOON));
	peer_do(p, "b", "timeout", PEER_SOON, "acquire %s %s %d", verb, path, PEER_TRY);
	CHECK_OK(zh_release(z));
	peer_do(p, "b", "acquired", PEER_SOON, "acquire %s %s %d", verb, path, PEER_SOON);
	peer_do(p, "b", "released", PEER_SOON, "release");
	zh_free(z);
}

void peer_check_fifo_alternating(peer *p, const char *path, zkl_naming naming,
                                 const char *verb)
{
	zh *h = zh_new(ZH_MUTEX, path, naming, 0, NULL);
	zh *c = zh_new(ZH_MUTEX, path, naming, 0, NULL);
	zh *e = zh_new(ZH_MUTEX, path, naming, 0, NULL);
	CHECK_OK(zh_acquire(h, -1));
	peer_send(p, "b acquire %s %s -1", verb, path);
	h_wait_children(path, 2);
	zh_start_acquire(c, -1);
	h_wait_children(path, 3);
	peer_send(p, "d acquire %s %s -1", verb, path);
	h_wait_children(path, 4);
	zh_start_acquire(e, -1);
	h_wait_children(path, 5);

	CHECK_OK(zh_release(h));
	peer_expect(p, "b", "acquired", PEER_SOON);
	assert_int_equal(zh_wait(c, 300), ZH_PENDING);
	assert_true(peer_quiet(p, "d", 0));
	peer_do(p, "b", "released", PEER_SOON, "release");
	CHECK_OK(zh_wait(c, PEER_SOON));
	assert_true(peer_quiet(p, "d", 300));
	assert_int_equal(zh_wait(e, 0), ZH_PENDING);
	CHECK_OK(zh_release(c));
	peer_expect(p, "d", "acquired", PEER_SOON);
	assert_int_equal(zh_wait(e, 300), ZH_PENDING);
	peer_do(p, "d", "released", PEER_SOON, "release");
	CHECK_OK(zh_wait(e, PEER_SOON));
	CHECK_OK(zh_release(e));
	h_wait_children(path, 0);
	zh_free(h);
	zh_free(c);
	zh_free(e);
}

void peer_check_peer_writer_blocks_readers(peer *p, const char *path, zkl_naming naming)
{
	peer_do(p, "w", "acquired", PEER_SOON, "acquire write %s -1", path);
	zh *r1 = zh_new(ZH_READ, path, naming, 0, NULL);
	zh *r2 = zh_new(ZH_READ, path, naming, 0, NULL);
	CHECK_RC(ZKL_ETIMEDOUT, zh_acquire(r1, PEER_TRY));
	zh_start_acquire(r1, 30000);
	zh_start_acquire(r2, 30000);
	h_wait_children(path, 3);
	assert_int_equal(zh_wait(r1, 300), ZH_PENDING);
	assert_int_equal(zh_wait(r2, 0), ZH_PENDING);
	peer_do(p, "w", "released", PEER_SOON, "release");
	/* Both readers get in together. */
	CHECK_OK(zh_wait(r1, PEER_SOON));
	CHECK_OK(zh_wait(r2, PEER_SOON));
	/* And they keep the peer's writer out: it sees our read nodes. */
	peer_do(p, "w", "timeout", PEER_SOON, "acquire write %s %d", path, PEER_TRY);
	CHECK_OK(zh_release(r1));
	peer_do(p, "w", "timeout", PEER_SOON, "acquire write %s %d", path, PEER_TRY);
	CHECK_OK(zh_release(r2));
	peer_do(p, "w", "acquired", PEER_SOON, "acquire write %s %d", path, PEER_SOON);
	peer_do(p, "w", "released", PEER_SOON, "release");
	zh_free(r1);
	zh_free(r2);
}

void peer_check_note(peer *p, const char *path, zkl_naming naming, const char *verb)
{
	char note[512], peer_node[256], node[128];
	snprintf(note, sizeof note, "%s.previous", path);
	zh *z = zh_new(ZH_MUTEX, path, naming, 0, NULL);
	zh_track(z);
	CHECK_OK(zh_acquire(z, -1));
	assert_int_equal(zh_previous(z, node, sizeof node), ZKL_PREVIOUS_NONE);
	/* The peer waits behind a tracking holder, and takes the lock once it released with
	 * its note: the note beside the lock is nothing to it. */
	peer_send(p, "a acquire %s %s -1", verb, path);
	h_wait_children(path, 2);
	CHECK_OK(zh_release(z));
	peer_expect(p, "a", "acquired", PEER_SOON);
	assert_int_equal(h_exists(note), 1);
	/* Behind the peer, which leaves no note: vanished, naming the peer's node. */
	h_child_except(path, "", peer_node, sizeof peer_node);
	zh_start_acquire(z, 30000);
	h_wait_children(path, 2);
	assert_int_equal(zh_wait(z, 300), ZH_PENDING);
	peer_do(p, "a", "released", PEER_SOON, "release");
	CHECK_OK(zh_wait(z, PEER_SOON));
	assert_int_equal(zh_previous(z, node, sizeof node), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(node, strrchr(peer_node, '/') + 1);
	CHECK_OK(zh_release(z));
	/* The peer comes after the note and takes the lock as before. */
	peer_do(p, "b", "acquired", PEER_SOON, "acquire %s %s %d", verb, path, PEER_SOON);
	peer_do(p, "b", "released", PEER_SOON, "release");
	zh_free(z);
	h_delete(note);
}
