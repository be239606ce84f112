/* stress-worker: several threads, each with its own zkl_client (its own session), loop
 * acquire / critical section / release over a few lock paths until a deadline, and
 * write every critical section to the resource (stress-resource) with the hold's
 * fencing token.
 *
 *   stress-worker --servers S --socket SOCK --name W --until NS [options]
 *     --prefix P            lock paths are P/p0 .. P/p<N-1> (default /stress)
 *     --paths N             default 3
 *     --threads T           default 3
 *     --session-timeout MS  default 4000
 *     --acquire-timeout MS  default 20000
 *     --confirm-release M   off, on, or mixed (default: odd threads on, even off):
 *                           zkl_client_options.confirm_release of each thread's client
 *
 * Design notes
 *
 * A critical section is three writes to the resource: E (enter, stamped with the time
 * acquire returned), M (middle) and L (leave, stamped just before release), a few
 * milliseconds apart. Before each write the thread checks that the lock is still held
 * (zkl_lock_is_held turns false when the library reports the hold lost, at the same
 * time as it queues the lost callback) and that no lost callback came for this hold; if
 * either says lost, it stops writing: that is "honouring" a lost report.
 *
 * The resource accepts a write only if its token is not lower than the highest it has
 * accepted on that path. A rejected write means another client has since held the lock
 * and written with a newer token. That is legitimate only if this hold was really gone
 * (the process was stopped, or its session expired before the library could know):
 * then the library must report the loss soon after. So after a rejection the thread
 * waits (at most 2 x session timeout + 5 s) for the hold to be reported lost, and notes
 * "fenced ... reported" or "fenced ... unreported" (a violation: two holders at once
 * and the library never noticed). After a release that returns ZKL_ELOST, it waits for
 * the one lost callback the contract promises, and notes "nocallback" if none came,
 * unless the library still called the hold held when release was called (then the
 * release itself found the loss, and its ZKL_ELOST is the report: noted "in-release").
 *
 * SIGUSR1 asks for a session expiry from outside (the "expire" fault): a signal thread
 * picks a thread at random (one that holds a lock right now, if any), opens a second ZooKeeper handle with that session's id and
 * password and closes it, which ends the session on the servers. The public API does not
 * give out a session's password, so this program wraps zookeeper_init2/zookeeper_init/
 * zookeeper_close (its definitions come first in symbol lookup: the executable exports
 * them, see meson.build) to keep a list of the handles the library opens, and finds the
 * one whose session id zkl_client_session_id() reports. Nothing else is changed: every
 * call goes on to the real function.
 *
 * At exit, once every thread has released, the worker looks for lock nodes that still
 * belong to one of its own live sessions (a node the library forgot) and notes each as
 * "leak"; then it closes its clients. SIGTERM makes the threads stop early.
 */
#include <zklocks/zklocks.h>
#include <zookeeper/zookeeper.h>

#include <dlfcn.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common.h"

#define PROG "stress-worker"
#define MAX_PATHS 16
#define MAX_THREADS 64

/* ---- Handles the library opens (see the design notes) ---- */

typedef zhandle_t *(*init2_fn)(const char *, watcher_fn, int, const clientid_t *, void *, int,
                               log_callback_fn);
typedef zhandle_t *(*init_fn)(const char *, watcher_fn, int, const clientid_t *, void *, int);
typedef int (*close_fn)(zhandle_t *);

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static zhandle_t *reg[4 * MAX_THREADS];
static init2_fn real_init2;
static init_fn real_init;
static close_fn real_close;

static void resolve_real(void)
{
	pthread_mutex_lock(&reg_mu);
	if (!real_close) {
		real_init2 = (init2_fn)dlsym(RTLD_NEXT, "zookeeper_init2");
		real_init = (init_fn)dlsym(RTLD_NEXT, "zookeeper_init");
		real_close = (close_fn)dlsym(RTLD_NEXT, "zookeeper_close");
		if (!real_init2 || !real_init || !real_close)
			st_die(PROG, "cannot find the C client's functions: %s", dlerror());
	}
	pthread_mutex_unlock(&reg_mu);
}

static void reg_add(zhandle_t *zh)
{
	if (!zh)
		return;
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++) {
		if (!reg[i]) {
			reg[i] = zh;
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
}

zhandle_t *zookeeper_init2(const char *host, watcher_fn fn, int recv_timeout,
                           const clientid_t *clientid, void *context, int flags,
                           log_callback_fn log_callback)
{
	resolve_real();
	zhandle_t *zh = real_init2(host, fn, recv_timeout, clientid, context, flags, log_callback);
	reg_add(zh);
	return zh;
}

zhandle_t *zookeeper_init(const char *host, watcher_fn fn, int recv_timeout,
                          const clientid_t *clientid, void *context, int flags)
{
	resolve_real();
	zhandle_t *zh = real_init(host, fn, recv_timeout, clientid, context, flags);
	reg_add(zh);
	return zh;
}

int zookeeper_close(zhandle_t *zh)
{
	resolve_real();
	/* Out of the list before it is freed, so that a reader holding reg_mu never sees a
	 * freed handle. */
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++)
		if (reg[i] == zh)
			reg[i] = NULL;
	pthread_mutex_unlock(&reg_mu);
	return real_close(zh);
}

/* Copies the id and password of the open handle whose session is sid. */
static bool find_session(int64_t sid, clientid_t *out)
{
	bool found = false;
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < sizeof reg / sizeof reg[0] && !found; i++) {
		if (reg[i]) {
			const clientid_t *id = zoo_client_id(reg[i]);
			if (id && id->client_id == sid) {
				*out = *id;
				found = true;
			}
		}
	}
	pthread_mutex_unlock(&reg_mu);
	return found;
}

/* ---- Options and shared state ---- */

static struct {
	const char *servers, *socket, *name, *prefix;
	int paths, threads, session_timeout_ms, acquire_timeout_ms;
	int confirm_release; /* 0 off, 1 on, 2 mixed */
	int64_t until_ns;
} opt = {.prefix = "/stress", .paths = 3, .threads = 3, .session_timeout_ms = 4000,
         .acquire_timeout_ms = 20000, .confirm_release = 2};

static atomic_bool stopping;

struct wthread {
	int idx;
	char id[96];
	pthread_t tid;
	int fd; /* connection to the resource */
	zkl_client *c;
	zkl_mutex *m[MAX_PATHS];
	char path[MAX_PATHS][256];
	uint64_t rng;
	bool confirm; /* its client's confirm_release */
	/* The view of the mutex being held right now (NULL outside a critical section), so
	 * that a lost callback is counted against the hold it is about. */
	_Atomic(zkl_lock *) holding;
	atomic_bool lost_flag;  /* a lost callback came for the current hold */
	atomic_int callbacks;   /* lost callbacks received, all holds */
	/* Counters, for the final note. */
	long cycles, lost, fenced, acq_timeouts, acq_errors, rel_errors, open_errors;
};

static struct wthread th[MAX_THREADS];
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static int note_fd = -1; /* a connection of its own for notes from main and the signal thread */

/* ---- The resource connection ---- */

static int connect_resource(const char *client)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		st_die(PROG, "socket: %s", strerror(errno));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(opt.socket) >= sizeof sa.sun_path)
		st_die(PROG, "socket path too long: %s", opt.socket);
	strcpy(sa.sun_path, opt.socket);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		st_die(PROG, "connect %s: %s", opt.socket, strerror(errno));
	char line[ST_LINE_MAX];
	int n = snprintf(line, sizeof line, "H %s %ld\n", client, (long)getpid());
	if (write(fd, line, (size_t)n) != n)
		st_die(PROG, "write to the resource: %s", strerror(errno));
	return fd;
}

static void send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			st_die(PROG, "write to the resource: %s", n < 0 ? strerror(errno) : "closed");
		buf += n;
		len -= (size_t)n;
	}
}

/* One write of a critical section; returns true if the resource accepted it. */
static bool resource_write(struct wthread *t, int p, int64_t token, long sec, char kind,
                           int64_t at_ns)
{
	char line[ST_LINE_MAX];
	int n = snprintf(line, sizeof line, "W %s %lld %s %ld %c %lld\n", t->path[p],
	                 (long long)token, t->id, sec, kind, (long long)at_ns);
	send_all(t->fd, line, (size_t)n);
	char reply[2];
	size_t got = 0;
	while (got < 2) {
		ssize_t r = read(t->fd, reply + got, 2 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			st_die(PROG, "read from the resource: %s", r < 0 ? strerror(errno) : "closed");
		got += (size_t)r;
	}
	return reply[0] == 'A';
}

/* A note for the log ("N <text>"); no answer. */
static void note_on(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_on(int fd, const char *fmt, ...)
{
	char line[ST_LINE_MAX] = "N ";
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + 2, sizeof line - 3, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t len = strlen(line);
	line[len++] = '\n';
	send_all(fd, line, len);
}

/* ---- Worker threads ---- */

static void on_lost(zkl_lock *l, int reason, void *data)
{
	(void)reason;
	struct wthread *t = data;
	atomic_fetch_add(&t->callbacks, 1);
	if (atomic_load(&t->holding) == l)
		atomic_store(&t->lost_flag, true);
}

static int64_t remaining_ms(void)
{
	int64_t left = (opt.until_ns - st_now_ns()) / 1000000;
	return left > 0 ? left : 0;
}

static bool still_held(struct wthread *t, zkl_lock *l)
{
	return !atomic_load(&t->lost_flag) && zkl_lock_is_held(l);
}

/* Waits until the lost callbacks received reach want, at most ms. */
static bool wait_callbacks(struct wthread *t, int want, int64_t ms)
{
	int64_t end = st_now_ns() + ms * 1000000;
	while (atomic_load(&t->callbacks) < want && st_now_ns() < end)
		st_sleep_ms(5);
	return atomic_load(&t->callbacks) >= want;
}

static void open_client(struct wthread *t)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = opt.servers;
	o.session_timeout_ms = opt.session_timeout_ms;
	o.connect_timeout_ms = 5000;
	t->confirm = opt.confirm_release == 2 ? t->idx % 2 == 1 : opt.confirm_release == 1;
	o.confirm_release = t->confirm;
	for (;;) {
		int rc = zkl_client_open(&t->c, &o);
		if (rc == 0)
			break;
		t->open_errors++;
		if (atomic_load(&stopping) || remaining_ms() == 0)
			st_die(PROG, "%s: cannot connect before the deadline: %s: %s", t->id,
			       zkl_strerror(rc), zkl_last_error());
		st_sleep_ms(500);
	}
	for (int p = 0; p < opt.paths; p++) {
		snprintf(t->path[p], sizeof t->path[p], "%s/p%d", opt.prefix, p);
		int rc = zkl_mutex_new(&t->m[p], t->c, t->path[p]);
		if (rc == 0)
			rc = zkl_lock_on_lost(zkl_mutex_lock(t->m[p]), on_lost, t);
		if (rc != 0)
			st_die(PROG, "zkl_mutex_new: %s: %s", zkl_strerror(rc), zkl_last_error());
	}
}

/* One acquire / critical section / release. */
static void cycle(struct wthread *t, long *sec)
{
	int p = (int)(st_rand(&t->rng) % (uint64_t)opt.paths);
	zkl_lock *l = zkl_mutex_lock(t->m[p]);
	int64_t wait = remaining_ms();
	if (wait > opt.acquire_timeout_ms)
		wait = opt.acquire_timeout_ms;
	if (wait == 0)
		return;
	/* Counted before acquiring, so that a callback that comes at once is not missed. */
	int callbacks_before = atomic_load(&t->callbacks);
	int rc = zkl_lock_acquire(l, (int)wait);
	if (rc != 0) {
		if (rc == ZKL_ETIMEDOUT) {
			if (remaining_ms() > 0)
				t->acq_timeouts++;
		} else {
			t->acq_errors++;
			note_on(t->fd, "%s acquire-error %s %s %s", t->id, zkl_errname(rc),
			        t->path[p], zkl_last_error());
			st_sleep_ms(100);
		}
		return;
	}
	int64_t enter = st_now_ns();
	atomic_store(&t->lost_flag, false);
	atomic_store(&t->holding, l);
	int64_t token = zkl_lock_token(l);
	long s = ++*sec;

	/* E, M, L, each only while the hold is still ours. */
	static const char kinds[] = "EML";
	bool told_lost = false, fenced = false;
	for (int k = 0; k < 3; k++) {
		if (token < 0 || !still_held(t, l)) {
			told_lost = true;
			break;
		}
		int64_t at = k == 0 ? enter : st_now_ns();
		if (!resource_write(t, p, token, s, kinds[k], at)) {
			fenced = true;
			break;
		}
		if (k < 2)
			st_sleep_us(500 + (int64_t)(st_rand(&t->rng) % 4000));
	}

	int64_t wait_ms = 0;
	if (fenced) {
		/* Someone with a newer token has written: our hold must be reported lost. */
		int64_t fenced_at = st_now_ns();
		int64_t bound = 2 * (int64_t)opt.session_timeout_ms + 5000;
		while (still_held(t, l) && (st_now_ns() - fenced_at) / 1000000 < bound)
			st_sleep_ms(5);
		wait_ms = (st_now_ns() - fenced_at) / 1000000;
	}
	bool held_after = zkl_lock_is_held(l);
	rc = zkl_lock_release(l);
	atomic_store(&t->holding, NULL);
	if (fenced) {
		t->fenced++;
		if (held_after || rc == 0)
			note_on(t->fd, "%s fenced %s %lld %ld unreported %lld ms release=%s", t->id,
			        t->path[p], (long long)token, s, (long long)wait_ms, zkl_errname(rc));
		else
			note_on(t->fd, "%s fenced %s %lld %ld reported %lld ms", t->id, t->path[p],
			        (long long)token, s, (long long)wait_ms);
	}
	if (rc == ZKL_ELOST) {
		t->lost++;
		note_on(t->fd, "%s lost %s %lld %ld %s%s", t->id, t->path[p], (long long)token, s,
		        told_lost ? "stopped" : fenced ? "fenced" : "after-leave",
		        held_after ? " in-release" : "");
		/* The contract: one lost callback per hold lost while held. A loss that the
		 * release itself discovered (the library still called it held when release was
		 * called: the session was ended from outside, and the delete found out) ends a
		 * hold that was already being given up; release's ZKL_ELOST is its report, and
		 * the library sends no callback for it (the hold is forgotten before the delete
		 * is sent). */
		if (!held_after && !wait_callbacks(t, callbacks_before + 1, 10000))
			note_on(t->fd, "%s nocallback %s %lld %ld", t->id, t->path[p],
			        (long long)token, s);
	} else if (rc != 0) {
		t->rel_errors++;
		note_on(t->fd, "%s release-error %s %s %lld %ld %s", t->id, zkl_errname(rc),
		        t->path[p], (long long)token, s, zkl_last_error());
	} else if (told_lost) {
		/* We stopped because the hold looked lost, yet release says it was not. */
		note_on(t->fd, "%s lost-mismatch %s %lld %ld", t->id, t->path[p],
		        (long long)token, s);
	} else if (!fenced) {
		t->cycles++;
	}
}

static void *thread_main(void *arg)
{
	struct wthread *t = arg;
	long sec = 0;
	while (!atomic_load(&stopping) && remaining_ms() > 0)
		cycle(t, &sec);
	return NULL;
}

/* ---- Expiry from outside (SIGUSR1) ---- */

static void thief_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

static void quiet_log(const char *message)
{
	(void)message;
}

static void expire_one(uint64_t *rng)
{
	/* A thread in its critical section if there is one: that is where an expiry tests
	 * something (a waiter only re-queues). */
	int holders[MAX_THREADS], n = 0;
	for (int i = 0; i < opt.threads; i++)
		if (atomic_load(&th[i].holding))
			holders[n++] = i;
	struct wthread *t = n > 0 ? &th[holders[st_rand(rng) % (uint64_t)n]]
	                          : &th[st_rand(rng) % (uint64_t)opt.threads];
	int64_t sid = t->c ? zkl_client_session_id(t->c) : 0;
	clientid_t cid;
	if (sid == 0 || !find_session(sid, &cid)) {
		pthread_mutex_lock(&note_mu);
		note_on(note_fd, "%s expire-failed no-session", t->id);
		pthread_mutex_unlock(&note_mu);
		return;
	}
	int64_t at = st_now_ns();
	/* Attach a second handle to the session, then close it: the servers end the session
	 * and delete its ephemeral nodes; the worker's own handle learns it on its next
	 * contact. */
	zhandle_t *zh = real_init2(opt.servers, thief_watcher, opt.session_timeout_ms, &cid,
	                           NULL, 0, quiet_log);
	bool ok = false;
	if (zh) {
		for (int i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
			st_sleep_ms(5);
		ok = zoo_state(zh) == ZOO_CONNECTED_STATE;
		real_close(zh);
	}
	int64_t done = st_now_ns();
	pthread_mutex_lock(&note_mu);
	note_on(note_fd, "%s expire %lld %lld %s %llx", t->id, (long long)at, (long long)done,
	        ok ? "ok" : "failed", (unsigned long long)sid);
	pthread_mutex_unlock(&note_mu);
}

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	uint64_t rng = (uint64_t)st_now_ns() ^ ((uint64_t)getpid() << 32);
	struct timespec tick = {0, 200 * 1000000};
	while (!atomic_load(&stopping) && remaining_ms() > 0) {
		int sig = sigtimedwait(set, NULL, &tick);
		if (sig == SIGUSR1)
			expire_one(&rng);
		else if (sig == SIGTERM || sig == SIGINT)
			atomic_store(&stopping, true);
	}
	return NULL;
}

/* ---- Leftover nodes of our own sessions ---- */

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* Counts (and with report, notes) the nodes under our lock paths owned by one of our
 * sessions. -1 if the servers could not be asked. */
static int own_nodes(zhandle_t *zh, bool report)
{
	int found = 0;
	for (int p = 0; p < opt.paths; p++) {
		struct String_vector kids = {0};
		int rc = zoo_get_children(zh, th[0].path[p], 0, &kids);
		if (rc == ZNONODE)
			continue;
		if (rc != ZOK)
			return -1;
		for (int i = 0; i < kids.count; i++) {
			char full[600];
			snprintf(full, sizeof full, "%s/%s", th[0].path[p], kids.data[i]);
			struct Stat st;
			if (zoo_exists(zh, full, 0, &st) != ZOK)
				continue;
			for (int k = 0; k < opt.threads; k++) {
				if (th[k].c && st.ephemeralOwner == zkl_client_session_id(th[k].c)) {
					found++;
					if (report) {
						pthread_mutex_lock(&note_mu);
						note_on(note_fd, "%s leak %s", th[k].id, full);
						pthread_mutex_unlock(&note_mu);
					}
				}
			}
		}
		deallocate_String_vector(&kids);
	}
	return found;
}

/* Every thread has released: wait (the background delete queue may still be at work
 * after a connection loss) and note whatever stays. */
static void check_own_leftovers(void)
{
	zhandle_t *zh = real_init2(opt.servers, raw_watcher, 10000, NULL, NULL, 0, quiet_log);
	if (!zh)
		return;
	for (int i = 0; i < 1000 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		st_sleep_ms(10);
	int64_t end = st_now_ns() + (2 * (int64_t)opt.session_timeout_ms + 2000) * 1000000;
	int n;
	while ((n = own_nodes(zh, false)) != 0 && st_now_ns() < end)
		st_sleep_ms(100);
	if (n > 0)
		own_nodes(zh, true);
	else if (n < 0) {
		pthread_mutex_lock(&note_mu);
		note_on(note_fd, "%s leak-check-failed", opt.name);
		pthread_mutex_unlock(&note_mu);
	}
	real_close(zh);
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr, "usage: " PROG " --servers S --socket SOCK --name W --until NS\n"
	                "       [--prefix P] [--paths N] [--threads T] [--session-timeout MS]\n"
	                "       [--acquire-timeout MS] [--confirm-release off|on|mixed]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"servers", required_argument, NULL, 's'},
		{"socket", required_argument, NULL, 'S'},
		{"name", required_argument, NULL, 'n'},
		{"until", required_argument, NULL, 'u'},
		{"prefix", required_argument, NULL, 'P'},
		{"paths", required_argument, NULL, 'p'},
		{"threads", required_argument, NULL, 't'},
		{"session-timeout", required_argument, NULL, 'T'},
		{"acquire-timeout", required_argument, NULL, 'a'},
		{"confirm-release", required_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': opt.servers = optarg; break;
		case 'S': opt.socket = optarg; break;
		case 'n': opt.name = optarg; break;
		case 'u': opt.until_ns = st_parse_int(PROG, "--until", optarg); break;
		case 'P': opt.prefix = optarg; break;
		case 'p': opt.paths = (int)st_parse_int(PROG, "--paths", optarg); break;
		case 't': opt.threads = (int)st_parse_int(PROG, "--threads", optarg); break;
		case 'T': opt.session_timeout_ms = (int)st_parse_int(PROG, "--session-timeout", optarg); break;
		case 'a': opt.acquire_timeout_ms = (int)st_parse_int(PROG, "--acquire-timeout", optarg); break;
		case 'c':
			if (strcmp(optarg, "off") == 0)
				opt.confirm_release = 0;
			else if (strcmp(optarg, "on") == 0)
				opt.confirm_release = 1;
			else if (strcmp(optarg, "mixed") == 0)
				opt.confirm_release = 2;
			else
				usage();
			break;
		default: usage();
		}
	}
	if (optind != argc || !opt.servers || !opt.socket || !opt.name || !opt.until_ns)
		usage();
	if (opt.paths < 1 || opt.paths > MAX_PATHS || opt.threads < 1 || opt.threads > MAX_THREADS)
		st_die(PROG, "--paths must be 1..%d and --threads 1..%d", MAX_PATHS, MAX_THREADS);
	resolve_real();

	/* Every thread, including the library's, inherits this mask: only the signal thread
	 * takes these signals. */
	static sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	char notes_id[128];
	snprintf(notes_id, sizeof notes_id, "%s.%ld", opt.name, (long)getpid());
	note_fd = connect_resource(notes_id);
	pthread_t sig_tid;
	pthread_create(&sig_tid, NULL, signal_main, &set);

	for (int i = 0; i < opt.threads; i++) {
		struct wthread *t = &th[i];
		t->idx = i;
		snprintf(t->id, sizeof t->id, "%s.%ld.t%d", opt.name, (long)getpid(), i);
		t->rng = (uint64_t)st_now_ns() ^ ((uint64_t)getpid() << 20) ^ (uint64_t)(i + 1) * 7919;
		t->fd = connect_resource(t->id);
		open_client(t);
	}
	for (int i = 0; i < opt.threads; i++)
		pthread_create(&th[i].tid, NULL, thread_main, &th[i]);
	for (int i = 0; i < opt.threads; i++)
		pthread_join(th[i].tid, NULL);

	check_own_leftovers();
	for (int i = 0; i < opt.threads; i++) {
		struct wthread *t = &th[i];
		note_on(t->fd, "%s stats confirm-release %d cycles %ld lost %ld fenced %ld callbacks %d "
		        "acquire-timeouts %ld acquire-errors %ld release-errors %ld open-errors %ld",
		        t->id, (int)t->confirm, t->cycles, t->lost, t->fenced, atomic_load(&t->callbacks),
		        t->acq_timeouts, t->acq_errors, t->rel_errors, t->open_errors);
		for (int p = 0; p < opt.paths; p++)
			zkl_mutex_free(t->m[p]);
		zkl_client_close(t->c);
		close(t->fd);
	}
	atomic_store(&stopping, true);
	pthread_join(sig_tid, NULL);
	pthread_mutex_lock(&note_mu);
	note_on(note_fd, "%s exit", notes_id);
	pthread_mutex_unlock(&note_mu);
	close(note_fd);
	return 0;
}
