/* Fault test helpers. See faults.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"

extern char **environ;

int64_t f_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the ensemble ---- */

static const char *env_or_skip(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		const char *ci = getenv("CI");
		fprintf(stderr, "%s is not set: run through tests/with-ensemble\n", name);
		exit(ci && strcmp(ci, "true") == 0 ? 1 : 77);
	}
	return v;
}

/* The script's command line for cmd and node n (n <= 0: none), in buf. */
static void ctl_line(char *buf, size_t size, const char *cmd, int n)
{
	const char *script = env_or_skip("ZKL_TEST_ENSEMBLE_SCRIPT");
	const char *dir = env_or_skip("ZKL_TEST_ENSEMBLE_DIR");
	if (n > 0)
		snprintf(buf, size, "'%s' %s '%s' %d", script, cmd, dir, n);
	else
		snprintf(buf, size, "'%s' %s '%s'", script, cmd, dir);
}

void f_ctl(const char *cmd, int n)
{
	char line[2048];
	ctl_line(line, sizeof line - 16, cmd, n);
	strcat(line, " >/dev/null");
	int st = system(line);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("zk-ensemble %s %d failed (status %d)", cmd, n, st);
}

/* Runs the script and returns the first line of its output (static storage). */
static const char *ctl_output(const char *cmd, int n)
{
	static char out[256];
	char line[2048];
	ctl_line(line, sizeof line, cmd, n);
	FILE *p = popen(line, "r");
	if (!p)
		fail_msg("popen %s: %s", line, strerror(errno));
	out[0] = '\0';
	if (!fgets(out, sizeof out, p))
		out[0] = '\0';
	int st = pclose(p);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("zk-ensemble %s %d failed (status %d)", cmd, n, st);
	out[strcspn(out, "\n")] = '\0';
	return out;
}

int f_leader(void)
{
	int n = atoi(ctl_output("leader", 0));
	if (n < 1 || n > 3)
		fail_msg("zk-ensemble leader said '%d'", n);
	return n;
}

int f_follower(int except)
{
	int leader = f_leader();
	for (int n = 1; n <= 3; n++)
		if (n != leader && n != except)
			return n;
	fail_msg("no follower other than %d (leader %d)", except, leader);
	return 0;
}

const char *f_server(int n)
{
	static char servers[4][64];
	if (n < 1 || n > 3)
		fail_msg("no node %d", n);
	if (!servers[n][0])
		snprintf(servers[n], sizeof servers[n], "%s", ctl_output("server", n));
	return servers[n];
}

const char *f_servers_except(int n)
{
	static char buf[4][160];
	int a = n == 1 ? 2 : 1, b = n == 3 ? 2 : 3;
	snprintf(buf[n], sizeof buf[n], "%s,%s", f_server(a), f_server(b));
	return buf[n];
}

void f_heal(void)
{
	f_ctl("heal", 0);
}

/* ---- clients ---- */

zkl_client *f_client(const char *servers, int session_timeout_ms, bool confirm_release)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers ? servers : h_servers();
	o.session_timeout_ms = session_timeout_ms;
	o.connect_timeout_ms = 20000;
	o.confirm_release = confirm_release;
	zkl_client *c = NULL;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0)
		fail_msg("zkl_client_open(%s): %s: %s", o.servers, zkl_strerror(rc),
		         zkl_last_error());
	if (zkl_client_session_timeout(c) != session_timeout_ms)
		fail_msg("asked for a %d ms session, got %d ms (check ZKL_TICK_MS)",
		         session_timeout_ms, zkl_client_session_timeout(c));
	return c;
}

/* ---- raw handles ---- */

static void no_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

zhandle_t *f_raw(const char *servers)
{
	zoo_set_debug_level(0);
	zhandle_t *zh = zookeeper_init(servers, no_watcher, 4000, NULL, NULL, 0);
	if (!zh)
		fail_msg("zookeeper_init(%s): %s", servers, strerror(errno));
	for (int i = 0; i < 2000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		usleep(10000);
	if (zoo_state(zh) != ZOO_CONNECTED_STATE) {
		zookeeper_close(zh);
		fail_msg("a raw handle cannot connect to %s", servers);
	}
	return zh;
}

/* Raw handles by connect string, kept until the test's teardown. */
static struct {
	char servers[256];
	zhandle_t *zh;
} raws[8];

static zhandle_t *raw_for(const char *servers)
{
	if (!servers)
		servers = h_servers();
	int free_slot = -1;
	for (int i = 0; i < 8; i++) {
		if (raws[i].zh && strcmp(raws[i].servers, servers) == 0)
			return raws[i].zh;
		if (!raws[i].zh && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		fail_msg("too many raw handles");
	raws[free_slot].zh = f_raw(servers);
	snprintf(raws[free_slot].servers, sizeof raws[free_slot].servers, "%s", servers);
	return raws[free_slot].zh;
}

static void raws_close(void)
{
	for (int i = 0; i < 8; i++) {
		if (raws[i].zh)
			zookeeper_close(raws[i].zh);
		raws[i].zh = NULL;
	}
}

static bool transient(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED;
}

/* Lock nodes of one recipe end in "-<10-digit sequence>": sort by that, then by name. */
static int cmp_names(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	const char *sx = strrchr(x, '-'), *sy = strrchr(y, '-');
	int c = sx && sy ? strcmp(sx, sy) : 0;
	return c ? c : strcmp(x, y);
}

int f_children(const char *servers, const char *path, char ***names)
{
	zhandle_t *zh = raw_for(servers);
	struct String_vector sv = {0};
	int rc = ZCONNECTIONLOSS;
	int64_t until = f_now() + 20000;
	while ((rc = zoo_get_children(zh, path, 0, &sv)) != ZOK && transient(rc) &&
	       f_now() < until)
		usleep(50000);
	if (names)
		*names = NULL;
	if (rc == ZNONODE)
		return -1;
	if (rc != ZOK)
		fail_msg("get_children %s from %s: %s", path, servers ? servers : "all",
		         zerror(rc));
	int n = sv.count;
	if (names) {
		char **out = calloc((size_t)n + 1, sizeof *out);
		for (int i = 0; i < n; i++)
			out[i] = strdup(sv.data[i]);
		qsort(out, (size_t)n, sizeof *out, cmp_names);
		*names = out;
	}
	deallocate_String_vector(&sv);
	return n;
}

void f_names_free(char **names, int n)
{
	if (!names)
		return;
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int f_wait_children(const char *servers, const char *path, int n, int ms)
{
	int64_t until = f_now() + ms;
	for (;;) {
		int have = f_children(servers, path, NULL);
		if (have == n || (n == 0 && have < 0))
			return 1;
		if (f_now() >= until)
			return 0;
		usleep(20000);
	}
}

bool f_exists(const char *servers, const char *path)
{
	zhandle_t *zh = raw_for(servers);
	struct Stat st;
	int rc;
	int64_t until = f_now() + 20000;
	while ((rc = zoo_exists(zh, path, 0, &st)) != ZOK && transient(rc) && f_now() < until)
		usleep(50000);
	if (rc != ZOK && rc != ZNONODE)
		fail_msg("exists %s: %s", path, zerror(rc));
	return rc == ZOK;
}

struct f_deletion {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t at;
	zhandle_t *zh;
};

static void deletion_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)state; (void)path;
	f_deletion *d = ctx;
	if (type != ZOO_DELETED_EVENT)
		return;
	pthread_mutex_lock(&d->mu);
	if (!d->at)
		d->at = f_now();
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

f_deletion *f_watch_deletion(const char *servers, const char *path)
{
	f_deletion *d = calloc(1, sizeof *d);
	pthread_mutex_init(&d->mu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv, &a);
	pthread_condattr_destroy(&a);
	d->zh = f_raw(servers);
	struct Stat st;
	int rc = zoo_wexists(d->zh, path, deletion_watcher, d, &st);
	if (rc == ZNONODE)
		fail_msg("%s is already gone", path);
	if (rc != ZOK)
		fail_msg("exists %s: %s", path, zerror(rc));
	return d;
}

int64_t f_deletion_time(f_deletion *d, int ms)
{
	int64_t until = f_now() + ms;
	struct timespec ts = { .tv_sec = until / 1000, .tv_nsec = (until % 1000) * 1000000 };
	pthread_mutex_lock(&d->mu);
	while (!d->at && pthread_cond_timedwait(&d->cv, &d->mu, &ts) == 0)
		;
	int64_t at = d->at;
	pthread_mutex_unlock(&d->mu);
	return at;
}

void f_deletion_free(f_deletion *d)
{
	if (!d)
		return;
	zookeeper_close(d->zh); /* no watcher runs after this */
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d);
}

/* ---- client processes ---- */

static pid_t children[16];

void f_child_spawn(f_child *ch, const char *servers, const char *path, int session_timeout_ms)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		fail_msg("pipe: %s", strerror(errno));
	char timeout[32];
	snprintf(timeout, sizeof timeout, "%d", session_timeout_ms);
	char *argv[] = { "/proc/self/exe", "--fault-child", (char *)servers, (char *)path,
	                 timeout, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	pid_t pid;
	int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		fail_msg("posix_spawn: %s", strerror(rc));
	}
	for (int i = 0; i < 16; i++)
		if (!children[i]) {
			children[i] = pid;
			break;
		}
	memset(ch, 0, sizeof *ch);
	ch->pid = pid;
	ch->fd = p[0];
}

void f_child_line(f_child *ch, char *line, size_t size, int ms)
{
	int64_t until = f_now() + ms;
	for (;;) {
		char *nl = memchr(ch->buf, '\n', ch->len);
		if (nl) {
			size_t n = (size_t)(nl - ch->buf);
			snprintf(line, size, "%.*s", (int)n, ch->buf);
			memmove(ch->buf, nl + 1, ch->len - n - 1);
			ch->len -= n + 1;
			return;
		}
		int64_t left = until - f_now();
		if (left <= 0)
			fail_msg("child %d said nothing within %d ms", (int)ch->pid, ms);
		struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		ssize_t got = read(ch->fd, ch->buf + ch->len, sizeof ch->buf - 1 - ch->len);
		if (got <= 0)
			fail_msg("child %d ended its output", (int)ch->pid);
		ch->len += (size_t)got;
	}
}

static void reap(pid_t pid)
{
	for (int i = 0; i < 16; i++)
		if (children[i] == pid)
			children[i] = 0;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int64_t f_child_kill(f_child *ch)
{
	int64_t at = f_now();
	kill(ch->pid, SIGKILL);
	reap(ch->pid);
	/* The pipe ends once what the child wrote has been read. */
	for (;;) {
		char *nl;
		while ((nl = memchr(ch->buf, '\n', ch->len))) {
			long long sent;
			*nl = '\0';
			if (sscanf(ch->buf, "ok %lld", &sent) == 1)
				ch->last_ok = sent;
			size_t n = (size_t)(nl + 1 - ch->buf);
			memmove(ch->buf, nl + 1, ch->len - n);
			ch->len -= n;
		}
		if (ch->len == sizeof ch->buf - 1)
			ch->len = 0; /* a line too long to be ours */
		ssize_t got = read(ch->fd, ch->buf + ch->len, sizeof ch->buf - 1 - ch->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		ch->len += (size_t)got;
	}
	close(ch->fd);
	ch->fd = -1;
	ch->pid = 0;
	return at;
}

static void children_kill(void)
{
	for (int i = 0; i < 16; i++)
		if (children[i]) {
			kill(children[i], SIGKILL);
			reap(children[i]);
		}
}

void f_child_main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--fault-child") != 0)
		return;
	if (argc != 5) {
		fprintf(stderr, "usage: %s --fault-child SERVERS PATH TIMEOUT_MS\n", argv[0]);
		exit(2);
	}
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = argv[2];
	o.session_timeout_ms = atoi(argv[4]);
	o.connect_timeout_ms = 20000;
	zkl_client *c;
	zkl_mutex *m;
	zkl_lock *l = NULL;
	int rc = zkl_client_open(&c, &o);
	if (rc == 0)
		rc = zkl_mutex_new(&m, c, argv[3]);
	if (rc == 0) {
		l = zkl_mutex_lock(m);
		rc = zkl_lock_acquire(l, ZKL_WAIT_FOREVER);
	}
	if (rc != 0) {
		printf("error %s %s\n", zkl_errname(rc), zkl_last_error());
		fflush(stdout);
		exit(1);
	}
	printf("held %lld %d\n", (long long)zkl_lock_token(l), zkl_client_session_timeout(c));
	fflush(stdout);
	/* Keep the session busy until killed, so that the server last heard from it at the
	 * moment of the kill. */
	for (;;) {
		zkl_participant *ps;
		size_t n;
		int64_t sent = f_now();
		if (zkl_lock_participants(l, &ps, &n) == 0) {
			zkl_participants_free(ps, n);
			printf("ok %lld\n", (long long)sent);
			fflush(stdout);
		}
		usleep(20000);
	}
}

/* ---- cmocka ---- */

int f_setup(void **state)
{
	(void)state;
	h_servers();
	f_heal();
	return 0;
}

int f_teardown(void **state)
{
	(void)state;
	children_kill();
	raws_close();
	f_heal();
	return 0;
}

static void *waiter_thread(void *arg)
{
	f_waiter *a = arg;
	zkl_lock *l = zkl_mutex_lock(a->m);
	a->started = f_now();
	a->rc = zkl_lock_acquire(l, a->timeout_ms);
	a->returned = f_now();
	a->held = zkl_lock_is_held(l);
	a->token = zkl_lock_token(l);
	h_latch_set(a->done);
	if (a->rc == 0) {
		h_latch_wait(a->release, 120000);
		a->release_rc = zkl_lock_release(l);
	}
	return NULL;
}

void f_waiter_start(f_waiter *a, zkl_mutex *m, int timeout_ms)
{
	a->m = m;
	a->timeout_ms = timeout_ms;
	a->done = h_latch_new();
	a->release = h_latch_new();
	pthread_create(&a->th, NULL, waiter_thread, a);
}

void f_waiter_join(f_waiter *a)
{
	h_latch_set(a->release);
	pthread_join(a->th, NULL);
	h_latch_free(a->done);
	h_latch_free(a->release);
}
