/* zkl-bench: the zklocks benchmark. Runs one or more scenarios against a ZooKeeper server
 * and prints one line per scenario:
 *
 *   SCENARIO LIB cycles/s=N p50_us=N p99_us=N max_us=N rss_kib=N cycles=N [key=value...]
 *
 *   zkl-bench [options] SCENARIO...        (several: each runs in its own child process,
 *                                            so that rss_kib is that scenario's peak)
 *   zkl-bench [options] s7 [-- COMMAND...]  time a command from start to exit
 *
 * Scenarios (the latency columns measure what the comment says):
 *   s0a   raw C client, one session: create ephemeral-sequential + delete, one request at a
 *         time (latency: one create + delete)
 *   s0b   the same keeping -w cycles in flight (default 32): what the server can commit
 *   s0m   the limit of mem: raw C client, one session, -n paths (default 10000), each a
 *         new container folder and an ephemeral-sequential node in it (the two writes a
 *         first lock on a new path needs), -w paths in flight (default 32); latency: one
 *         path; cycles/s: paths per second
 *   s1    one client, acquire + release of one zkl_mutex (latency: one cycle)
 *   s2    -c clients (default 8), separate sessions, one thread each, on one mutex
 *         (latency: acquire wait; handoff_*: from one holder's release returning to the
 *         next holder's acquire returning, signed: negative when the next acquire returned
 *         before the previous release did; idle_*: from one holder calling release to the
 *         next holder's acquire returning)
 *   s3    -c clients (default 8), each on its own path (latency: one cycle); with another
 *         -c the scenario is named S3xN
 *   s4    -c sessions (default 200) queue on one lock behind a gate holder, then each takes
 *         it once (latency: from the gate's release to each acquire returning); prints
 *         drain_ms, fifo (acquisition order == node sequence order) and wakes/release
 *   s5    -c clients (default 8) on one zkl_rwlock, 90% reads (latency: acquire wait)
 *   s6    -c clients (default 16) on a 4-lease zkl_semaphore (latency: acquire wait)
 *   s7    cold start: runs `zklock -s SERVERS -n PATH -- true` (or the COMMAND after --)
 *         until -d seconds have passed (at least 5 times) or -n times (latency: process
 *         start to exit; rss_kib: the child's peak)
 *   mem   one client takes -n locks (default 10000) on distinct paths with -c threads
 *         (default 64, the in-flight count of s0b), holds them all, releases them
 *         (latency: one acquire; cycles/s: locks taken per second)
 *   mema  mem through the asynchronous API: one client, -n locks (default 10000) on
 *         distinct paths, -w in flight (default 64, as s0m in bench/run): the calling
 *         thread starts the first -w, each grant's callback starts the next path; all are
 *         held, then released by the calling thread (latency: start to grant; cycles/s:
 *         locks taken per second; rss_held_kib: peak RSS once all are held)
 *   s8    one thread starts -n asynchronous acquires (default 10000) at once on -c locks
 *         (default 100), one client; each callback releases at once (latency: start to
 *         grant; prints drain_ms, and from zkl_client_get_stats() wakes/release and
 *         listings/acq; fails if a lock was granted out of queue order, or if there were
 *         more wakes than releases)
 *   gs1   a guarded set (zkl_lock_guarded_set(): one multi, the check of the hold's node
 *         and the set) against a plain set (zkl_record_set()) of one node, on one session
 *         holding a lock, one write at a time; the two take turns in half-second rounds;
 *         a line for each (latency: one write; cpu_us/c: this process's CPU per write),
 *         then GS1-ratio (guarded/plain)
 *   gs64  the same with -w threads (default 64) writing at once (GS64xN with another -w)
 *   s9    the fleet, waiting idle: a holder holds one mutex, then -c sessions (default
 *         100), each a zkl_client of its own, start one asynchronous acquire of it; once
 *         every node is there and -W seconds (default 3) have passed, -d seconds are
 *         measured: the server's committed transactions (its zxid, from `srvr`), writes,
 *         requests (packets received, pings included) and bytes sent per second, and this
 *         process's CPU (its threads' schedstat) per second and per waiter, and its RSS
 *         per waiter (the growth of VmRSS since before the waiters' clients were opened).
 *         No line but the result: txn/s= wr/s= fsync/s= req/s= rd/s= wakes/s=
 *         srv_sent_B/s= srv_recv_B/s= srv_cpu_ms/s= cpu_ms/s= cpu_us/s/waiter=
 *         rss_kib/waiter= queue_ms= (from the first waiter's open to all nodes there)
 *   s9l   the same with leader election: a leader (zkl_leader), -c standby latches
 *   s9p   the same with -c `zklock` processes (default 300), as a fleet's hosts run them:
 *         `zklock -q PATH -- true` behind a holder `zklock -q PATH -- sleep 100000`; the
 *         CPU and memory are the waiters' (RSS and PSS summed from /proc, per waiter);
 *         they are stopped with SIGTERM at the end (and if this program dies)
 *   s9pl  s9p with `zklock --leader`
 *   s9a   a cron minute: -c sessions (default 1000), connected beforehand, start an
 *         asynchronous acquire of one free mutex at the same moment; the first holds.
 *         first_grant_ms, all_queued_ms (every node there: a probe session's exists on
 *         the lock's folder every 5 ms, numChildren), quiet_ms (the server sent less than
 *         32 KiB in 250 ms), and over that time the bytes the server sent and received
 *         (srv_sent_kib: the tcp_info byte counts of its client connections, from `ss`;
 *         mostly the waiters' listings of the queue), requests, reads, writes, the
 *         committed transactions, and listings (the clients' own count)
 *   all   s0a s0b s0m s1 s2 s3 s4 s5 s6 s7 mem
 *
 * Cycles of the first -W seconds (default: a fifth of -d, at most 1) are a warm-up and
 * not counted. When the (first) server answers the `mntr` four-letter word and
 * $ZKL_BENCH_MNTR is not "off", per-cycle server counters measured over the timed window
 * follow: fsync/c (fsyncs of the transaction log), wr/c and rd/c (write and read
 * requests), req/c (packets received, pings included), wakes/c (watches the server
 * triggered). Then cpu_us/c, the CPU time of this process (of the child in s7), and
 * srv_cpu_us/c, the server's, if $ZKL_BENCH_SERVER_PID names its process; then vcsw/c and
 * ivcsw/c, this process's context switches (all its threads, the C client's included),
 * voluntary (a thread waited, and was woken) and involuntary (not in s7).
 *
 * Options: -s SERVERS (default $ZKLOCK_SERVERS, else 127.0.0.1:2181), -d SECONDS (5),
 * -W SECONDS, -c N, -n N, -w N, -L LABEL (the library column, default zklocks),
 * -p PREFIX (lock paths go under it, default /bench), -z ZKLOCK (the zklock binary for
 * s7, default ../tools/zklock next to this program).
 *
 * TLS (bench/tls; a build on a C client with TLS): $ZKL_BENCH_TLS_CA, and optionally
 * $ZKL_BENCH_TLS_CERT and $ZKL_BENCH_TLS_KEY, make the zklocks clients of s1..s6 connect
 * over TLS (the servers then name a secureClientPort; set ZKL_BENCH_MNTR=off there).
 */
#include <zklocks/zklocks.h>
#include <zookeeper/zookeeper.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *prog = "zkl-bench";

/* ---- options ------------------------------------------------------------------------ */

static struct {
	const char *servers;
	double seconds;
	double warmup; /* < 0: default */
	int clients;   /* 0: the scenario's default */
	long count;    /* 0: the scenario's default */
	int window;
	bool window_set; /* -w given */
	const char *label;
	const char *prefix;
	const char *zklock;
	char **command; /* s7: the command after "--", or NULL */
} opt = {
	.seconds = 5,
	.warmup = -1,
	.window = 32,
	.label = "zklocks",
	.prefix = "/bench",
};

/* ---- small helpers ------------------------------------------------------------------ */

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* Exits with what a zklocks call said (zkl_last_error() is per thread, read it first). */
static void die_zkl(const char *what, int rc)
{
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());
	die("%s: %s%s%s", what, zkl_strerror(rc), detail[0] ? ": " : "", detail);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void sleep_ms(int ms)
{
	sleep_until(now_ns() + (int64_t)ms * 1000000);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die("out of memory");
	return p;
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* A growable array of int64 samples, one per thread (no locking). */
struct vec {
	int64_t *v;
	size_t n, cap;
};

static void vec_push(struct vec *a, int64_t x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 1024;
		int64_t *v = realloc(a->v, cap * sizeof *v);
		if (!v)
			die("out of memory");
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
}

static void vec_append(struct vec *dst, const struct vec *src)
{
	for (size_t i = 0; i < src->n; i++)
		vec_push(dst, src->v[i]);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank quantile of a sorted array, in microseconds. */
static double quantile_us(const struct vec *a, double q)
{
	if (a->n == 0)
		return 0;
	size_t rank = (size_t)(q * (double)a->n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > a->n)
		rank = a->n;
	return (double)a->v[rank - 1] / 1e3;
}

/* Random numbers for a thread (xorshift64*). */
static uint64_t rnd_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static pthread_t start_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t at;
	pthread_t t;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	int rc = pthread_create(&t, &at, fn, arg);
	pthread_attr_destroy(&at);
	if (rc != 0)
		die("pthread_create: %s", strerror(rc));
	return t;
}

/* A one-shot start line: every thread waits until main opens it. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ready;
	bool go;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

static void gate_wait(void)
{
	pthread_mutex_lock(&gate.mu);
	gate.ready++;
	pthread_cond_broadcast(&gate.cv);
	while (!gate.go)
		pthread_cond_wait(&gate.cv, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

static void gate_open_when(int n)
{
	pthread_mutex_lock(&gate.mu);
	while (gate.ready < n)
		pthread_cond_wait(&gate.cv, &gate.mu);
	gate.go = true;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
}

/* ---- server counters (mntr) --------------------------------------------------------- */

struct mstats {
	bool ok;
	double fsyncs, writes, reads, packets, wakes;
	double packets_sent;
	double cpu_self, cpu_server; /* CPU time in microseconds; cpu_server < 0: unknown */
	double vcsw, ivcsw;          /* this process's context switches, voluntary (a thread
	                              * waited: a wake of it follows) and not; < 0: unknown */
};

/* User + system CPU time of a process (all its threads) in microseconds, from
 * /proc/PID/stat; -1 if unreadable. */
static double proc_cpu_us(const char *pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* After ") ": state is field 3; utime and stime are fields 14 and 15. */
	unsigned long long ut = 0, st = 0;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* The first host:port of the server string, without a chroot. */
static void first_server(char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *s = opt.servers;
	size_t n = strcspn(s, ",/");
	char buf[256];
	snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), s);
	char *colon = strrchr(buf, ':');
	if (colon) {
		*colon = '\0';
		snprintf(port, portlen, "%s", colon + 1);
	} else {
		snprintf(port, portlen, "2181");
	}
	snprintf(host, hostlen, "%s", buf);
}

/* Sends a four-letter word to the first server and returns its whole answer (the
 * caller's, NUL-terminated), or NULL if the server does not answer. */
static char *four_letter(const char *word)
{
	char host[256], port[32];
	first_server(host, sizeof host, port, sizeof port);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return NULL;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return NULL;
	}
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	size_t wlen = strlen(word);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    write(fd, word, wlen) != (ssize_t)wlen) {
		close(fd);
		freeaddrinfo(ai);
		return NULL;
	}
	freeaddrinfo(ai);
	size_t cap = 64 * 1024, len = 0;
	char *buf = xcalloc(cap, 1);
	ssize_t r;
	while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	return buf;
}

static struct mstats mntr_read(void)
{
	struct mstats m = {0};
	const char *off = getenv("ZKL_BENCH_MNTR");
	if (off && strcmp(off, "off") == 0)
		return m;
	char *buf = four_letter("mntr");
	if (!buf)
		return m;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		double v = strtod(tab + 1, NULL);
		if (strcmp(line, "zk_cnt_fsynctime") == 0)
			m.fsyncs = v, m.ok = true;
		else if (strcmp(line, "zk_cnt_updatelatency") == 0)
			m.writes = v;
		else if (strcmp(line, "zk_cnt_readlatency") == 0)
			m.reads = v;
		else if (strcmp(line, "zk_packets_received") == 0)
			m.packets = v;
		else if (strcmp(line, "zk_packets_sent") == 0)
			m.packets_sent = v;
		else if (strcmp(line, "zk_sum_node_created_watch_count") == 0 ||
		         strcmp(line, "zk_sum_node_deleted_watch_count") == 0 ||
		         strcmp(line, "zk_sum_node_changed_watch_count") == 0 ||
		         strcmp(line, "zk_sum_node_children_watch_count") == 0)
			m.wakes += v;
	}
	free(buf);
	return m;
}

/* The server's counters and the CPU time used so far by this process and by the server
 * (whose pid bench/run passes in $ZKL_BENCH_SERVER_PID). */
static struct mstats mntr(void)
{
	struct mstats m = mntr_read();
	m.cpu_self = proc_cpu_us("self");
	/* Linux counts every thread of the process, the C client's two included. */
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		m.vcsw = (double)ru.ru_nvcsw;
		m.ivcsw = (double)ru.ru_nivcsw;
	} else {
		m.vcsw = m.ivcsw = -1;
	}
	const char *pid = getenv("ZKL_BENCH_SERVER_PID");
	m.cpu_server = pid && *pid ? proc_cpu_us(pid) : -1;
	return m;
}

/* ---- the result line ---------------------------------------------------------------- */

struct result {
	const char *scenario;
	double rate;      /* cycles/s */
	struct vec *lat;  /* sorted here */
	long cycles;      /* counted cycles, the unit of the per-cycle server counters */
	struct mstats m0, m1;
	const char *per;  /* the unit name of the server counters ("c" = per cycle) */
	double per_n;     /* how many units the window had (0: cycles) */
	long rss;         /* 0: this process's peak */
	char extra[1024];
};

static void report(struct result *r)
{
	if (r->cycles == 0 || !(r->rate > 0))
		die("%s: no cycle completed in the timed window", r->scenario);
	qsort(r->lat->v, r->lat->n, sizeof *r->lat->v, cmp_i64);
	printf("%s %s cycles/s=%.1f p50_us=%.0f p99_us=%.0f max_us=%.0f rss_kib=%ld cycles=%ld",
	       r->scenario, opt.label, r->rate, quantile_us(r->lat, 0.50),
	       quantile_us(r->lat, 0.99), quantile_us(r->lat, 1.0),
	       r->rss ? r->rss : peak_rss_kib(), r->cycles);
	double n = r->per_n > 0 ? r->per_n : (double)r->cycles;
	const char *u = r->per ? r->per : "c";
	if (r->m0.ok && r->m1.ok && n > 0)
		printf(" fsync/%s=%.2f wr/%s=%.2f rd/%s=%.2f req/%s=%.2f wakes/%s=%.2f", u,
		       (r->m1.fsyncs - r->m0.fsyncs) / n, u, (r->m1.writes - r->m0.writes) / n, u,
		       (r->m1.reads - r->m0.reads) / n, u, (r->m1.packets - r->m0.packets) / n, u,
		       (r->m1.wakes - r->m0.wakes) / n);
	if (n > 0 && r->m0.cpu_self >= 0 && r->m1.cpu_self >= 0)
		printf(" cpu_us/%s=%.0f", u, (r->m1.cpu_self - r->m0.cpu_self) / n);
	if (n > 0 && r->m0.cpu_server >= 0 && r->m1.cpu_server >= 0)
		printf(" srv_cpu_us/%s=%.0f", u, (r->m1.cpu_server - r->m0.cpu_server) / n);
	if (n > 0 && r->m0.vcsw >= 0 && r->m1.vcsw > 0 && r->m1.vcsw >= r->m0.vcsw)
		printf(" vcsw/%s=%.2f ivcsw/%s=%.2f", u, (r->m1.vcsw - r->m0.vcsw) / n, u,
		       (r->m1.ivcsw - r->m0.ivcsw) / n);
	if (r->extra[0])
		printf(" %s", r->extra);
	putchar('\n');
	fflush(stdout);
}

static void xappend(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* ---- timing of a run ---------------------------------------------------------------- */

static struct {
	int64_t start, warm_end, end;
	_Atomic int64_t last_done;
} run;

static void run_begin(void)
{
	double w = opt.warmup;
	if (w < 0)
		w = opt.seconds / 5 < 1 ? opt.seconds / 5 : 1;
	run.start = now_ns();
	run.warm_end = run.start + (int64_t)(w * 1e9);
	run.end = run.warm_end + (int64_t)(opt.seconds * 1e9);
	atomic_store(&run.last_done, run.warm_end);
}

static void note_done(int64_t t)
{
	int64_t prev = atomic_load(&run.last_done);
	while (t > prev && !atomic_compare_exchange_weak(&run.last_done, &prev, t))
		;
}

static double run_elapsed_s(void)
{
	return (double)(atomic_load(&run.last_done) - run.warm_end) / 1e9;
}

/* The scenario's name: its own, or NAMExCLIENTS when -c changed the client count. */
static const char *scenario_name(const char *base, int clients, int def)
{
	static char name[64];
	if (clients == def)
		return base;
	snprintf(name, sizeof name, "%sx%d", base, clients);
	return name;
}

/* ---- zklocks clients ---------------------------------------------------------------- */

static zkl_client *open_client(void)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = opt.servers;
	o.connect_timeout_ms = 20000;
	const char *ca = getenv("ZKL_BENCH_TLS_CA");
	if (ca && *ca) {
		o.tls_ca = ca;
		o.tls_cert = getenv("ZKL_BENCH_TLS_CERT");
		o.tls_key = getenv("ZKL_BENCH_TLS_KEY");
	}
	zkl_client *c;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0)
		die_zkl("connecting", rc);
	return c;
}

static char base_path[512];

/* Lock paths of this process: PREFIX/LABEL-PID-SCENARIO. */
static void set_base(const char *scenario)
{
	snprintf(base_path, sizeof base_path, "%s/%s-%ld-%s", opt.prefix, opt.label,
	         (long)getpid(), scenario);
}

/* ---- S0: the raw C client ----------------------------------------------------------- */

struct raw {
	zhandle_t *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool connected;
	int inflight;
	int error;
	long cycles;
	struct vec lat;
	char node[600];
};

static void raw_log_discard(const char *message)
{
	(void)message;
}

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct raw *r = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&r->mu);
	r->connected = state == ZOO_CONNECTED_STATE;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* How raw_open creates the run's folder: persistent (raw_close deletes it), or a container
 * that the server reaps once what is under it has gone. */
static int raw_base_mode;

/* Connects r's session and nothing more. */
static void raw_connect(struct raw *r)
{
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->zh = zookeeper_init2(opt.servers, raw_watcher, 10000, NULL, r, ZOO_NO_LOG_CLIENTENV,
	                        raw_log_discard);
	if (!r->zh)
		die("zookeeper_init: %s", strerror(errno));
	zoo_set_servers_resolution_delay(r->zh, -1);
	int64_t deadline = now_ns() + 20 * (int64_t)1000000000;
	pthread_mutex_lock(&r->mu);
	while (!r->connected && now_ns() < deadline) {
		pthread_mutex_unlock(&r->mu);
		sleep_ms(2);
		pthread_mutex_lock(&r->mu);
	}
	bool ok = r->connected;
	pthread_mutex_unlock(&r->mu);
	if (!ok)
		die("raw client: no connection to %s", opt.servers);
}

static void raw_open(struct raw *r)
{
	raw_connect(r);
	/* PREFIX and the folder of this run, persistent (the prefix may be a container that
	 * the server reaps meanwhile: try again). */
	for (int attempt = 0;; attempt++) {
		int rc = zoo_create(r->zh, opt.prefix, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
		if (rc != ZOK && rc != ZNODEEXISTS)
			die("creating %s: %s", opt.prefix, zerror(rc));
		rc = zoo_create(r->zh, base_path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, raw_base_mode,
		                NULL, 0);
		if (rc == ZOK || rc == ZNODEEXISTS)
			break;
		if (rc != ZNONODE || attempt == 5)
			die("creating %s: %s", base_path, zerror(rc));
	}
	snprintf(r->node, sizeof r->node, "%s/n-", base_path);
}

static void raw_close(struct raw *r)
{
	zoo_delete(r->zh, base_path, -1);
	zookeeper_close(r->zh);
}

/* Node data the size of zklocks' default "<hostname>:<pid>". */
static char node_data[300];
static int node_data_len;

static void make_node_data(void)
{
	char host[256] = "localhost";
	gethostname(host, sizeof host - 1);
	node_data_len = snprintf(node_data, sizeof node_data, "%s:%ld", host, (long)getpid());
}

static struct result *new_result(const char *scenario)
{
	struct result *r = xcalloc(1, sizeof *r);
	r->scenario = scenario;
	r->lat = xcalloc(1, sizeof *r->lat);
	return r;
}

static void s0a(void)
{
	struct raw r = {0};
	set_base("s0a");
	make_node_data();
	raw_open(&r);
	struct result *res = new_result("S0a");
	char created[700];
	run_begin();
	bool warm = true;
	for (;;) {
		int64_t t0 = now_ns();
		if (t0 >= run.end)
			break;
		if (warm && t0 >= run.warm_end) {
			warm = false;
			res->m0 = mntr();
			t0 = now_ns();
		}
		int rc = zoo_create(r.zh, r.node, node_data, node_data_len, &ZOO_OPEN_ACL_UNSAFE,
		                    ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created);
		if (rc != ZOK)
			die("create: %s", zerror(rc));
		rc = zoo_delete(r.zh, created, -1);
		if (rc != ZOK)
			die("delete: %s", zerror(rc));
		int64_t t1 = now_ns();
		if (!warm) {
			vec_push(res->lat, t1 - t0);
			res->cycles++;
			note_done(t1);
		}
	}
	res->m1 = mntr();
	res->rate = (double)res->cycles / run_elapsed_s();
	raw_close(&r);
	report(res);
}

struct raw_slot {
	struct raw *r;
	int64_t t0;
};

/* A slot of a raw run ends: its run is over, or a request failed (rc), which fails it. */
static void raw_end(struct raw *r, int rc)
{
	pthread_mutex_lock(&r->mu);
	if (rc != ZOK)
		r->error = rc;
	r->inflight--;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* Waits until at most `most` slots of a raw run are left; returns the run's error. */
static int raw_wait(struct raw *r, int most)
{
	pthread_mutex_lock(&r->mu);
	while (r->inflight > most)
		pthread_cond_wait(&r->cv, &r->mu);
	int err = r->error;
	pthread_mutex_unlock(&r->mu);
	return err;
}

static void raw_start(struct raw_slot *s);

static void raw_deleted(int rc, const void *data)
{
	struct raw_slot *s = (struct raw_slot *)data;
	struct raw *r = s->r;
	int64_t t = now_ns();
	if (rc != ZOK) {
		raw_end(r, rc);
		return;
	}
	/* Completions run one at a time, on the C client's completion thread. */
	if (s->t0 >= run.warm_end) {
		vec_push(&r->lat, t - s->t0);
		r->cycles++;
		note_done(t);
	}
	if (t < run.end) {
		raw_start(s);
		return;
	}
	raw_end(r, ZOK);
}

static void raw_created(int rc, const char *value, const void *data)
{
	struct raw_slot *s = (struct raw_slot *)data;
	struct raw *r = s->r;
	if (rc == ZOK)
		rc = zoo_adelete(r->zh, value, -1, raw_deleted, s);
	if (rc != ZOK)
		raw_end(r, rc);
}

static void raw_start(struct raw_slot *s)
{
	struct raw *r = s->r;
	s->t0 = now_ns();
	int rc = zoo_acreate(r->zh, r->node, node_data, node_data_len, &ZOO_OPEN_ACL_UNSAFE,
	                     ZOO_EPHEMERAL_SEQUENTIAL, raw_created, s);
	if (rc != ZOK)
		raw_end(r, rc);
}

static void s0b(void)
{
	struct raw r = {0};
	set_base("s0b");
	make_node_data();
	raw_open(&r);
	int w = opt.window;
	struct raw_slot *slots = xcalloc((size_t)w, sizeof *slots);
	struct result *res = new_result("S0b");
	run_begin();
	pthread_mutex_lock(&r.mu);
	r.inflight = w;
	pthread_mutex_unlock(&r.mu);
	for (int i = 0; i < w; i++) {
		slots[i].r = &r;
		raw_start(&slots[i]);
	}
	sleep_until(run.warm_end);
	res->m0 = mntr();
	int err = raw_wait(&r, 0);
	if (err != ZOK)
		die("create/delete: %s", zerror(err));
	res->m1 = mntr();
	res->cycles = r.cycles;
	res->rate = (double)r.cycles / run_elapsed_s();
	vec_append(res->lat, &r.lat);
	snprintf(res->extra, sizeof res->extra, "in_flight=%d", w);
	raw_close(&r);
	free(slots);
	report(res);
}

/* Deletes the (empty) folders under the run's folder, and that folder, many in flight:
 * left to the server's container reaper (10,000 a minute by default), they would load
 * the server during the scenarios that follow. */
static void sweep_done(int rc, const void *data)
{
	(void)rc; /* gone already (the reaper was quicker) is as good */
	raw_end((struct raw *)data, ZOK);
}

static void sweep_folders(void)
{
	struct raw r = {0};
	raw_open(&r); /* the run's folder exists: that create fails harmlessly */
	struct String_vector kids = {0};
	if (zoo_get_children(r.zh, base_path, 0, &kids) == ZOK) {
		char path[1200];
		for (int i = 0; i < kids.count; i++) {
			raw_wait(&r, 255);
			pthread_mutex_lock(&r.mu);
			r.inflight++;
			pthread_mutex_unlock(&r.mu);
			snprintf(path, sizeof path, "%s/%s", base_path, kids.data[i]);
			if (zoo_adelete(r.zh, path, -1, sweep_done, &r) != ZOK)
				sweep_done(0, &r);
		}
		raw_wait(&r, 0);
		deallocate_String_vector(&kids);
	}
	raw_close(&r);
}

/* s0m: a container folder and a node in it, per path, -w paths in flight. Completions run
 * one at a time on the C client's completion thread, which starts the next path. */
struct s0m_state {
	struct raw *r;
	long next, total;
	struct vec *lat;
};

struct s0m_slot {
	struct s0m_state *st;
	long index;
	int64_t t0;
	char path[700];
};

static void s0m_start(struct s0m_slot *s);

static void s0m_node_done(int rc, const char *value, const void *data)
{
	(void)value;
	struct s0m_slot *s = (struct s0m_slot *)data;
	struct raw *r = s->st->r;
	if (rc != ZOK) {
		raw_end(r, rc);
		return;
	}
	vec_push(s->st->lat, now_ns() - s->t0);
	r->cycles++;
	s0m_start(s);
}

static void s0m_folder_done(int rc, const char *value, const void *data)
{
	(void)value;
	struct s0m_slot *s = (struct s0m_slot *)data;
	if (rc != ZOK)
		raw_end(s->st->r, rc);
}

static void s0m_start(struct s0m_slot *s)
{
	struct s0m_state *st = s->st;
	struct raw *r = st->r;
	if (st->next >= st->total) {
		raw_end(r, ZOK);
		return;
	}
	s->index = st->next++;
	s->t0 = now_ns();
	/* Both sent at once, as zklocks sends a first lock's folder and node. */
	snprintf(s->path, sizeof s->path, "%s/l%ld", base_path, s->index);
	int rc = zoo_acreate(r->zh, s->path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER,
	                     s0m_folder_done, s);
	char node[760];
	snprintf(node, sizeof node, "%s/n-", s->path);
	if (rc == ZOK)
		rc = zoo_acreate(r->zh, node, node_data, node_data_len, &ZOO_OPEN_ACL_UNSAFE,
		                 ZOO_EPHEMERAL_SEQUENTIAL, s0m_node_done, s);
	if (rc != ZOK)
		raw_end(r, rc);
}

static void s0m(void)
{
	struct raw r = {0};
	set_base("s0m");
	make_node_data();
	raw_base_mode = ZOO_CONTAINER;
	raw_open(&r);
	int w = opt.window;
	struct s0m_state st = {.r = &r, .total = opt.count ? opt.count : 10000};
	struct s0m_slot *slots = xcalloc((size_t)w, sizeof *slots);
	struct result *res = new_result("S0m");
	st.lat = res->lat;
	res->m0 = mntr();
	int64_t t0 = now_ns();
	pthread_mutex_lock(&r.mu);
	r.inflight = w;
	pthread_mutex_unlock(&r.mu);
	for (int i = 0; i < w; i++) {
		slots[i].st = &st;
		s0m_start(&slots[i]);
	}
	int err = raw_wait(&r, 0);
	int64_t t1 = now_ns();
	if (err != ZOK)
		die("s0m create: %s", zerror(err));
	res->m1 = mntr();
	res->cycles = r.cycles;
	res->rate = (double)r.cycles / ((double)(t1 - t0) / 1e9);
	res->per = "path";
	snprintf(res->extra, sizeof res->extra, "paths=%ld in_flight=%d", st.total, w);
	/* The session's end takes the nodes; then the folders go. */
	zookeeper_close(r.zh);
	free(slots);
	report(res);
	sweep_folders();
}

/* ---- S1, S2, S3, S5, S6: timed loops ------------------------------------------------ */

enum loop_kind { LOOP_MUTEX, LOOP_RWLOCK, LOOP_SEMAPHORE };

/* Acquire/release records of a contended lock, indexed by hold number (assigned while
 * holding, so in hold order), in chunks so that no holder ever moves another's slots. */
#define HOLD_CHUNK 4096
#define HOLD_CHUNKS 4096
struct holds {
	_Atomic long next;
	_Atomic(int64_t *) acq[HOLD_CHUNKS], call[HOLD_CHUNKS], rel[HOLD_CHUNKS];
};

static int64_t *hold_slot(_Atomic(int64_t *) *chunks, long k)
{
	long c = k / HOLD_CHUNK;
	if (c >= HOLD_CHUNKS)
		return NULL;
	int64_t *p = atomic_load(&chunks[c]);
	if (!p) {
		int64_t *fresh = xcalloc(HOLD_CHUNK, sizeof *fresh);
		if (atomic_compare_exchange_strong(&chunks[c], &p, fresh))
			p = fresh;
		else
			free(fresh);
	}
	return &p[k % HOLD_CHUNK];
}

struct worker {
	int index;
	enum loop_kind kind;
	zkl_client *c;
	zkl_mutex *m;
	zkl_rwlock *rw;
	zkl_semaphore *sem;
	struct holds *holds;       /* S2: record hand-offs */
	_Atomic int *holders;      /* how many hold its lock right now (checks exclusion) */
	_Atomic int own_holders;   /* the counter of a lock of its own */
	_Atomic int *overlaps;     /* times more than `limit` held at once */
	int limit;
	bool wait_latency;         /* record the acquire wait, not the whole cycle */
	struct vec lat;
	long cycles, reads, writes;
	uint64_t rnd;
};

static void *loop_thread(void *arg)
{
	struct worker *w = arg;
	gate_wait();
	for (;;) {
		int64_t t0 = now_ns();
		if (t0 >= run.end)
			break;
		zkl_mutex *m = w->m;
		zkl_lease *lease = NULL;
		bool is_write = false;
		int rc;
		if (w->kind == LOOP_RWLOCK) {
			is_write = rnd_next(&w->rnd) % 10 == 0;
			m = is_write ? zkl_rwlock_write(w->rw) : zkl_rwlock_read(w->rw);
		}
		zkl_lock *l = zkl_mutex_lock(m); /* NULL for a semaphore: its leases instead */
		if (w->kind == LOOP_SEMAPHORE)
			rc = zkl_semaphore_acquire(w->sem, 1, ZKL_WAIT_FOREVER, &lease);
		else
			rc = zkl_lock_acquire(l, ZKL_WAIT_FOREVER);
		if (rc != 0)
			die_zkl("acquire", rc);
		int64_t t1 = now_ns();
		int h = atomic_fetch_add(w->holders, 1) + 1;
		int limit = w->kind == LOOP_RWLOCK && !is_write ? INT_MAX : w->limit;
		if (h > limit)
			atomic_fetch_add(w->overlaps, 1);
		long k = -1;
		if (w->holds)
			k = atomic_fetch_add(&w->holds->next, 1);
		int64_t *acq = k >= 0 ? hold_slot(w->holds->acq, k) : NULL;
		if (acq)
			*acq = t1;
		atomic_fetch_sub(w->holders, 1);
		int64_t *call = k >= 0 ? hold_slot(w->holds->call, k) : NULL;
		if (call)
			*call = now_ns();
		if (w->kind == LOOP_SEMAPHORE) {
			rc = zkl_lease_release(lease);
			zkl_lease_free(lease);
		} else {
			rc = zkl_lock_release(l);
		}
		if (rc != 0)
			die_zkl("release", rc);
		int64_t t2 = now_ns();
		int64_t *rel = k >= 0 ? hold_slot(w->holds->rel, k) : NULL;
		if (rel)
			*rel = t2;
		if (t0 >= run.warm_end) {
			vec_push(&w->lat, w->wait_latency ? t1 - t0 : t2 - t0);
			w->cycles++;
			if (is_write)
				w->writes++;
			else
				w->reads++;
			note_done(t2);
		} else if (acq) {
			*acq = 0; /* a warm-up hold: no hand-off sample */
		}
	}
	return NULL;
}

static void timed_loop(const char *scenario, enum loop_kind kind, int nclients, bool shared,
                       bool wait_latency, bool handoffs)
{
	set_base(scenario);
	struct worker *ws = xcalloc((size_t)nclients, sizeof *ws);
	pthread_t *ts = xcalloc((size_t)nclients, sizeof *ts);
	_Atomic int holders = 0, overlaps = 0;
	struct holds *holds = handoffs ? xcalloc(1, sizeof *holds) : NULL;
	char path[700];
	for (int i = 0; i < nclients; i++) {
		struct worker *w = &ws[i];
		w->index = i;
		w->kind = kind;
		w->c = open_client();
		w->holders = shared ? &holders : &w->own_holders;
		w->overlaps = &overlaps;
		w->limit = kind == LOOP_SEMAPHORE ? 4 : 1;
		w->holds = holds;
		w->wait_latency = wait_latency;
		w->rnd = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
		if (shared)
			snprintf(path, sizeof path, "%s/lock", base_path);
		else
			snprintf(path, sizeof path, "%s/lock-%d", base_path, i);
		int rc;
		if (kind == LOOP_MUTEX)
			rc = zkl_mutex_new(&w->m, w->c, path);
		else if (kind == LOOP_RWLOCK)
			rc = zkl_rwlock_new(&w->rw, w->c, path);
		else
			rc = zkl_semaphore_new(&w->sem, w->c, path, 4);
		if (rc != 0)
			die_zkl(path, rc);
	}
	for (int i = 0; i < nclients; i++)
		ts[i] = start_thread(loop_thread, &ws[i]);
	struct result *res = new_result(scenario);
	run_begin(); /* before the threads go: they read run.end */
	gate_open_when(nclients);
	sleep_until(run.warm_end);
	res->m0 = mntr();
	for (int i = 0; i < nclients; i++)
		pthread_join(ts[i], NULL);
	res->m1 = mntr();
	long reads = 0, writes = 0;
	for (int i = 0; i < nclients; i++) {
		res->cycles += ws[i].cycles;
		reads += ws[i].reads;
		writes += ws[i].writes;
		vec_append(res->lat, &ws[i].lat);
	}
	res->rate = (double)res->cycles / run_elapsed_s();
	if (nclients > 1)
		xappend(res->extra, sizeof res->extra, "clients=%d ", nclients);
	if (kind == LOOP_RWLOCK)
		xappend(res->extra, sizeof res->extra, "reads=%ld writes=%ld ", reads, writes);
	if (holds) {
		/* gaps: previous release returned -> acquire returned; idle: previous release
		 * called -> acquire returned (the time nobody could use the lock). */
		struct vec gaps = {0}, idle = {0};
		long n = atomic_load(&holds->next);
		for (long k = 1; k < n && k / HOLD_CHUNK < HOLD_CHUNKS; k++) {
			int64_t a = *hold_slot(holds->acq, k), r = *hold_slot(holds->rel, k - 1);
			int64_t c = *hold_slot(holds->call, k - 1);
			if (a != 0 && r != 0 && c != 0 && *hold_slot(holds->acq, k - 1) != 0) {
				vec_push(&gaps, a - r);
				vec_push(&idle, a - c);
			}
		}
		qsort(gaps.v, gaps.n, sizeof *gaps.v, cmp_i64);
		qsort(idle.v, idle.n, sizeof *idle.v, cmp_i64);
		xappend(res->extra, sizeof res->extra,
		        "handoff_p50_us=%.0f handoff_p99_us=%.0f handoff_min_us=%.0f "
		        "idle_p50_us=%.0f idle_p99_us=%.0f ",
		        quantile_us(&gaps, 0.5), quantile_us(&gaps, 0.99),
		        gaps.n ? (double)gaps.v[0] / 1e3 : 0.0, quantile_us(&idle, 0.5),
		        quantile_us(&idle, 0.99));
		free(gaps.v);
		free(idle.v);
		for (int c = 0; c < HOLD_CHUNKS; c++) {
			free(atomic_load(&holds->acq[c]));
			free(atomic_load(&holds->call[c]));
			free(atomic_load(&holds->rel[c]));
		}
		free(holds);
	}
	if (atomic_load(&overlaps))
		xappend(res->extra, sizeof res->extra, "EXCLUSION_VIOLATED=%d ",
		        atomic_load(&overlaps));
	size_t len = strlen(res->extra);
	if (len && res->extra[len - 1] == ' ')
		res->extra[len - 1] = '\0';
	long rss = peak_rss_kib();
	for (int i = 0; i < nclients; i++) {
		zkl_mutex_free(ws[i].m);
		zkl_rwlock_free(ws[i].rw);
		zkl_semaphore_free(ws[i].sem);
		zkl_client_close(ws[i].c);
		free(ws[i].lat.v);
	}
	res->rss = rss;
	report(res);
	free(ws);
	free(ts);
}

/* ---- S4: a queue of sessions drains ------------------------------------------------- */

struct s4_waiter {
	int index;
	zkl_client *c;
	zkl_mutex *m;
	int64_t acquired, released;
	struct s4_shared *sh;
};

struct s4_shared {
	_Atomic long next;
	int *order; /* order[k]: the index of the k-th holder */
	_Atomic int holders, overlaps;
};

static void *s4_thread(void *arg)
{
	struct s4_waiter *w = arg;
	zkl_lock *l = zkl_mutex_lock(w->m);
	int rc = zkl_lock_acquire(l, 120000);
	if (rc != 0)
		die_zkl("acquire", rc);
	w->acquired = now_ns();
	if (atomic_fetch_add(&w->sh->holders, 1) != 0)
		atomic_fetch_add(&w->sh->overlaps, 1);
	long k = atomic_fetch_add(&w->sh->next, 1);
	w->sh->order[k] = w->index;
	atomic_fetch_sub(&w->sh->holders, 1);
	rc = zkl_lock_release(l);
	if (rc != 0)
		die_zkl("release", rc);
	w->released = now_ns();
	return NULL;
}

static void s4(void)
{
	int n = opt.clients ? opt.clients : 200;
	const char *name = scenario_name("S4", n, 200);
	set_base("s4");
	char path[700];
	snprintf(path, sizeof path, "%s/lock", base_path);
	struct s4_shared sh = {.order = xcalloc((size_t)n, sizeof(int))};
	struct s4_waiter *ws = xcalloc((size_t)n, sizeof *ws);
	pthread_t *ts = xcalloc((size_t)n, sizeof *ts);

	zkl_client *gc = open_client();
	zkl_mutex *gm;
	int rc = zkl_mutex_new(&gm, gc, path);
	if (rc != 0)
		die_zkl(path, rc);
	zkl_lock *gate = zkl_mutex_lock(gm);
	zkl_lock_set_data(gate, "gate", 4);
	rc = zkl_lock_acquire(gate, 20000);
	if (rc != 0)
		die_zkl("gate acquire", rc);

	for (int i = 0; i < n; i++) {
		ws[i].index = i;
		ws[i].sh = &sh;
		ws[i].c = open_client();
		rc = zkl_mutex_new(&ws[i].m, ws[i].c, path);
		if (rc != 0)
			die_zkl(path, rc);
		char data[32];
		int len = snprintf(data, sizeof data, "w%d", i);
		zkl_lock_set_data(zkl_mutex_lock(ws[i].m), data, (size_t)len);
	}
	for (int i = 0; i < n; i++)
		ts[i] = start_thread(s4_thread, &ws[i]);

	/* Wait until every waiter has queued, then note the queue (node sequence order). */
	zkl_participant *ps = NULL;
	size_t np = 0;
	int64_t deadline = now_ns() + 120 * (int64_t)1000000000;
	for (;;) {
		rc = zkl_lock_participants(gate, &ps, &np);
		if (rc != 0)
			die_zkl("participants", rc);
		if (np >= (size_t)n + 1)
			break;
		zkl_participants_free(ps, np);
		if (now_ns() > deadline)
			die("only %zu of %d waiters queued", np - 1, n);
		sleep_ms(10);
	}
	int *queue = xcalloc((size_t)n, sizeof(int));
	int nq = 0;
	for (size_t i = 0; i < np; i++) {
		if (ps[i].data[0] == 'w' && nq < n)
			queue[nq++] = atoi(ps[i].data + 1);
	}
	zkl_participants_free(ps, np);

	struct result *res = new_result(name);
	res->m0 = mntr();
	int64_t t0 = now_ns();
	rc = zkl_lock_release(gate);
	if (rc != 0)
		die_zkl("gate release", rc);
	for (int i = 0; i < n; i++)
		pthread_join(ts[i], NULL);
	res->m1 = mntr();
	int64_t t_end = t0;
	for (int i = 0; i < n; i++) {
		vec_push(res->lat, ws[i].acquired - t0);
		if (ws[i].released > t_end)
			t_end = ws[i].released;
	}
	double drain_s = (double)(t_end - t0) / 1e9;
	int mismatches = 0;
	for (int k = 0; k < n; k++)
		if (k >= nq || sh.order[k] != queue[k])
			mismatches++;
	res->cycles = n;
	res->rate = n / drain_s;
	res->per = "release";
	res->per_n = n; /* the gate's release and n-1 waiters' releases each had a waiter */
	snprintf(res->extra, sizeof res->extra, "clients=%d drain_ms=%.1f fifo=%s mismatches=%d",
	         n, drain_s * 1e3, mismatches == 0 ? "yes" : "no", mismatches);
	if (atomic_load(&sh.overlaps))
		xappend(res->extra, sizeof res->extra, " EXCLUSION_VIOLATED=%d",
		        atomic_load(&sh.overlaps));
	res->rss = peak_rss_kib();
	for (int i = 0; i < n; i++) {
		zkl_mutex_free(ws[i].m);
		zkl_client_close(ws[i].c);
	}
	zkl_mutex_free(gm);
	zkl_client_close(gc);
	report(res);
	free(queue);
	free(sh.order);
	free(ws);
	free(ts);
}

/* ---- S7: cold start ----------------------------------------------------------------- */

static char *default_zklock(void)
{
	static char path[PATH_MAX + 32];
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return "zklock";
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof path, "%s/../tools/zklock", self);
	return path;
}

static void s7(void)
{
	set_base("s7");
	char lockpath[700];
	snprintf(lockpath, sizeof lockpath, "%s/lock", base_path);
	char *zk_argv[] = {(char *)(opt.zklock ? opt.zklock : default_zklock()), "-s",
	                   (char *)opt.servers, "-n", lockpath, "--", "true", NULL};
	char **argv = opt.command ? opt.command : zk_argv;

	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);

	struct result *res = new_result("S7");
	long max_rss = 0;
	int runs = 0;
	double child_cpu_us = 0;
	int64_t start = now_ns(), end = start + (int64_t)(opt.seconds * 1e9);
	res->m0 = mntr();
	for (;;) {
		int64_t t0 = now_ns();
		if (opt.count > 0 ? runs >= opt.count : (runs >= 5 && t0 >= end))
			break;
		pid_t pid;
		int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
		if (rc != 0)
			die("cannot run %s: %s", argv[0], strerror(rc));
		int status;
		struct rusage ru;
		while (wait4(pid, &status, 0, &ru) < 0) {
			if (errno != EINTR)
				die("wait4: %s", strerror(errno));
		}
		int64_t t1 = now_ns();
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			die("%s exited with status %d", argv[0],
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		vec_push(res->lat, t1 - t0);
		if (ru.ru_maxrss > max_rss)
			max_rss = ru.ru_maxrss;
		child_cpu_us += (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
		                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
		runs++;
	}
	res->m1 = mntr();
	/* The client CPU of a cold start is the child's, not ours. */
	res->m0.cpu_self = 0;
	res->m1.cpu_self = child_cpu_us;
	res->m0.vcsw = res->m1.vcsw = -1; /* the child's are not counted */
	posix_spawn_file_actions_destroy(&fa);
	res->cycles = runs;
	res->rate = runs / ((double)(now_ns() - start) / 1e9);
	res->rss = max_rss;
	snprintf(res->extra, sizeof res->extra, "runs=%d", runs);
	report(res);
}

/* ---- memory: one client holding many locks ------------------------------------------ */

struct mem_worker {
	int index, nthreads;
	long nlocks;
	zkl_client *c;
	zkl_mutex **ms;
	struct vec lat;
	pthread_barrier_t *held, *go_release;
};

static void *mem_thread(void *arg)
{
	struct mem_worker *w = arg;
	char path[700];
	gate_wait();
	for (long j = w->index; j < w->nlocks; j += w->nthreads) {
		snprintf(path, sizeof path, "%s/l%ld", base_path, j);
		int rc = zkl_mutex_new(&w->ms[j], w->c, path);
		if (rc != 0)
			die_zkl(path, rc);
		int64_t t0 = now_ns();
		rc = zkl_lock_acquire(zkl_mutex_lock(w->ms[j]), 60000);
		if (rc != 0)
			die_zkl("acquire", rc);
		vec_push(&w->lat, now_ns() - t0);
	}
	pthread_barrier_wait(w->held);
	pthread_barrier_wait(w->go_release);
	for (long j = w->index; j < w->nlocks; j += w->nthreads) {
		int rc = zkl_lock_release(zkl_mutex_lock(w->ms[j]));
		if (rc != 0)
			die_zkl("release", rc);
	}
	return NULL;
}

static void mem(void)
{
	long n = opt.count ? opt.count : 10000;
	int nt = opt.clients ? opt.clients : 64;
	set_base("mem");
	zkl_client *c = open_client();
	zkl_mutex **ms = xcalloc((size_t)n, sizeof *ms);
	struct mem_worker *ws = xcalloc((size_t)nt, sizeof *ws);
	pthread_t *ts = xcalloc((size_t)nt, sizeof *ts);
	pthread_barrier_t held, go_release;
	pthread_barrier_init(&held, NULL, (unsigned)nt + 1);
	pthread_barrier_init(&go_release, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++) {
		ws[i] = (struct mem_worker){.index = i, .nthreads = nt, .nlocks = n, .c = c,
		                            .ms = ms, .held = &held, .go_release = &go_release};
		ts[i] = start_thread(mem_thread, &ws[i]);
	}
	char name[32] = "MEM";
	if (n != 10000)
		snprintf(name, sizeof name, "MEMx%ld", n);
	struct result *res = new_result(name);
	long rss_before = peak_rss_kib();
	res->m0 = mntr();
	int64_t t0 = now_ns();
	gate_open_when(nt);
	pthread_barrier_wait(&held);
	int64_t t1 = now_ns();
	res->m1 = mntr();
	long rss_held = peak_rss_kib();
	pthread_barrier_wait(&go_release);
	for (int i = 0; i < nt; i++)
		pthread_join(ts[i], NULL);
	int64_t t2 = now_ns();
	for (int i = 0; i < nt; i++) {
		vec_append(res->lat, &ws[i].lat);
		free(ws[i].lat.v);
	}
	for (long j = 0; j < n; j++)
		zkl_mutex_free(ms[j]);
	zkl_client_close(c);
	sweep_folders();
	res->cycles = n;
	res->rate = (double)n / ((double)(t1 - t0) / 1e9);
	res->per = "lock";
	res->rss = peak_rss_kib();
	snprintf(res->extra, sizeof res->extra,
	         "locks=%ld threads=%d take_ms=%.0f release_ms=%.0f rss_start_kib=%ld "
	         "rss_held_kib=%ld",
	         n, nt, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, rss_before, rss_held);
	report(res);
	pthread_barrier_destroy(&held);
	pthread_barrier_destroy(&go_release);
	free(ms);
	free(ws);
	free(ts);
}

/* ---- MEMa: one thread, asynchronous acquires, holding many locks ---------------------- */

/* MEM through the asynchronous API: one client, -n locks (default 10000) on distinct new
 * paths, -w in flight (default 64, S0m's window in bench/run and MEM's thread count). The
 * calling thread starts the first -w acquires; as in S0m, each grant starts the next path
 * from its callback (on the client's event thread), so no other thread takes part. Every
 * lock stays held until all are; then the calling thread releases them all. */
struct mema {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	zkl_client *c;
	zkl_mutex **ms;
	int64_t *t0;       /* per lock: when its acquire started */
	long next, total;  /* the next path to start; how many */
	long held, failed; /* granted; failed (a start or a grant) */
	int inflight;
	int64_t last;      /* when the last grant came */
	struct vec lat;    /* start to grant, per lock */
};

static struct mema mema_st;

static void mema_granted(zkl_lock *l, int rc, void *data);

/* Starts the next path's acquire, or ends a slot when there is none left (or on error).
 * Called with mema_st.mu held; drops it around the library's calls. */
static void mema_start_locked(void)
{
	struct mema *st = &mema_st;
	for (;;) {
		if (st->next >= st->total || st->failed) {
			if (--st->inflight == 0)
				pthread_cond_signal(&st->cv);
			return;
		}
		long j = st->next++;
		pthread_mutex_unlock(&st->mu);
		char path[700];
		snprintf(path, sizeof path, "%s/l%ld", base_path, j);
		int rc = zkl_mutex_new(&st->ms[j], st->c, path);
		st->t0[j] = now_ns();
		if (rc == 0)
			rc = zkl_lock_acquire_async(zkl_mutex_lock(st->ms[j]), 60000, mema_granted,
			                            (void *)(intptr_t)j);
		pthread_mutex_lock(&st->mu);
		if (rc == 0)
			return;
		if (st->failed++ == 0)
			fprintf(stderr, "%s: MEMa: starting %s: %s: %s\n", prog, path, zkl_strerror(rc),
			        zkl_last_error());
	}
}

static void mema_granted(zkl_lock *l, int rc, void *data)
{
	struct mema *st = &mema_st;
	long j = (long)(intptr_t)data;
	int64_t t = now_ns();
	if (rc == 0 && zkl_lock_token(l) <= 0)
		rc = ZKL_ENOTHELD; /* granted, yet no hold: the scenario fails */
	pthread_mutex_lock(&st->mu);
	if (rc != 0) {
		if (st->failed++ == 0)
			fprintf(stderr, "%s: MEMa: acquiring l%ld: %s: %s\n", prog, j, zkl_strerror(rc),
			        zkl_last_error());
	} else {
		st->held++;
		st->last = t;
		vec_push(&st->lat, t - st->t0[j]);
	}
	mema_start_locked();
	pthread_mutex_unlock(&st->mu);
}

static void mema(void)
{
	struct mema *st = &mema_st;
	long n = opt.count ? opt.count : 10000;
	int w = opt.window_set ? opt.window : 64;
	if (w > n)
		w = (int)n;
	set_base("mema");
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	st->c = open_client();
	st->ms = xcalloc((size_t)n, sizeof *st->ms);
	st->t0 = xcalloc((size_t)n, sizeof *st->t0);
	st->total = n;
	char name[32] = "MEMa";
	if (n != 10000)
		snprintf(name, sizeof name, "MEMax%ld", n);
	struct result *res = new_result(name);
	long rss_before = peak_rss_kib();
	res->m0 = mntr();
	int64_t t0 = now_ns();
	pthread_mutex_lock(&st->mu);
	st->inflight = w;
	for (int i = 0; i < w; i++)
		mema_start_locked();
	int64_t started = now_ns();
	while (st->inflight > 0)
		pthread_cond_wait(&st->cv, &st->mu);
	int64_t t1 = st->last;
	pthread_mutex_unlock(&st->mu);
	res->m1 = mntr();
	long rss_held = peak_rss_kib();
	if (st->failed || st->held != n)
		die("MEMa: %ld of %ld locks held, %ld failed", st->held, n, st->failed);
	int64_t r0 = now_ns();
	for (long j = 0; j < n; j++) {
		int rc = zkl_lock_release(zkl_mutex_lock(st->ms[j]));
		if (rc != 0)
			die_zkl("release", rc);
	}
	int64_t t2 = now_ns();
	for (long j = 0; j < n; j++)
		zkl_mutex_free(st->ms[j]);
	zkl_client_close(st->c);
	sweep_folders();
	vec_append(res->lat, &st->lat);
	free(st->lat.v);
	res->cycles = n;
	res->rate = (double)n / ((double)(t1 - t0) / 1e9);
	res->per = "lock";
	res->rss = peak_rss_kib();
	snprintf(res->extra, sizeof res->extra,
	         "locks=%ld threads=1 in_flight=%d start_us=%.0f take_ms=%.0f release_ms=%.0f "
	         "rss_start_kib=%ld rss_held_kib=%ld",
	         n, w, (double)(started - t0) / 1e3, (double)(t1 - t0) / 1e6,
	         (double)(t2 - r0) / 1e6, rss_before, rss_held);
	report(res);
	free(st->ms);
	free(st->t0);
}

/* ---- S8: one thread, many asynchronous acquires ---------------------------------------- */

/* 10,000 acquires (-n) started at once from one thread on one client, 100 per lock
 * (-c locks): each callback checks that its lock's fencing token grew (the queue is
 * served in order), and releases at once, which hands the lock to the next in line. */
struct s8 {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long done, out_of_order, failed;
	int64_t *last_token;   /* per lock */
	int64_t t0;
	struct vec lat;        /* start to grant, per acquire */
};

struct s8_acq {
	struct s8 *st;
	int lock;
};

static void s8_granted(zkl_lock *l, int rc, void *data)
{
	struct s8_acq *a = data;
	struct s8 *st = a->st;
	int64_t token = rc == 0 ? zkl_lock_token(l) : 0;
	if (rc == 0)
		rc = zkl_lock_release(l);
	pthread_mutex_lock(&st->mu);
	if (rc != 0) {
		if (st->failed++ == 0)
			fprintf(stderr, "zkl-bench: S8: the first failure: %s: %s\n", zkl_strerror(rc),
			        zkl_last_error());
	} else {
		if (token <= st->last_token[a->lock])
			st->out_of_order++;
		st->last_token[a->lock] = token;
	}
	vec_push(&st->lat, now_ns() - st->t0);
	if (++st->done == opt.count)
		pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->mu);
}

static void s8(void)
{
	if (!opt.count)
		opt.count = 10000;
	long n = opt.count;
	int nlocks = opt.clients ? opt.clients : 100;
	set_base("s8");
	zkl_client *c = open_client();
	struct s8 st = {.last_token = xcalloc((size_t)nlocks, sizeof(int64_t))};
	pthread_mutex_init(&st.mu, NULL);
	pthread_cond_init(&st.cv, NULL);
	zkl_mutex **ms = xcalloc((size_t)n, sizeof *ms);
	struct s8_acq *as = xcalloc((size_t)n, sizeof *as);
	char path[700];
	for (long i = 0; i < n; i++) {
		as[i] = (struct s8_acq){.st = &st, .lock = (int)(i % nlocks)};
		snprintf(path, sizeof path, "%s/l%d", base_path, as[i].lock);
		int rc = zkl_mutex_new(&ms[i], c, path);
		if (rc != 0)
			die_zkl(path, rc);
	}
	char name[32] = "S8";
	if (n != 10000 || nlocks != 100)
		snprintf(name, sizeof name, "S8x%ldx%d", n, nlocks);
	struct result *res = new_result(name);
	long rss_before = peak_rss_kib();
	res->m0 = mntr();
	st.t0 = now_ns();
	for (long i = 0; i < n; i++) {
		int rc = zkl_lock_acquire_async(zkl_mutex_lock(ms[i]), -1, s8_granted, &as[i]);
		if (rc != 0)
			die_zkl("acquire_async", rc);
	}
	int64_t started = now_ns();
	pthread_mutex_lock(&st.mu);
	while (st.done < n)
		pthread_cond_wait(&st.cv, &st.mu);
	pthread_mutex_unlock(&st.mu);
	int64_t t1 = now_ns();
	res->m1 = mntr();
	if (st.failed || st.out_of_order)
		die("S8: %ld acquires failed, %ld granted out of queue order", st.failed,
		    st.out_of_order);
	/* Each release may wake the one waiter behind it, no more: more wakes than
	 * releases would be a herd. (A waiter granted from a listing that shows the nodes
	 * ahead already leaving needs no wake at all.) */
	zkl_client_stats cs;
	int src = zkl_client_get_stats(c, &cs, sizeof cs);
	if (src != 0)
		die_zkl("zkl_client_get_stats", src);
	if (cs.wakes > (uint64_t)n)
		die("S8: %llu wakes for %ld releases: a release woke more than one waiter",
		    (unsigned long long)cs.wakes, n);
	for (long i = 0; i < n; i++)
		zkl_mutex_free(ms[i]);
	zkl_client_close(c);
	sweep_folders();
	vec_append(res->lat, &st.lat);
	free(st.lat.v);
	res->cycles = n;
	res->rate = (double)n / ((double)(t1 - st.t0) / 1e9);
	res->per = "acq";
	res->rss = peak_rss_kib();
	snprintf(res->extra, sizeof res->extra,
	         "acquires=%ld locks=%d threads=1 start_ms=%.0f drain_ms=%.0f rss_start_kib=%ld "
	         "fifo=yes wakes/release=%.2f listings/acq=%.2f",
	         n, nlocks, (double)(started - st.t0) / 1e6, (double)(t1 - st.t0) / 1e6,
	         rss_before, (double)cs.wakes / (double)n, (double)cs.listings / (double)n);
	report(res);
	free(ms);
	free(as);
	free(st.last_token);
}

/* ---- S9: a fleet, many sessions on one lock ------------------------------------------ */

/* What the server did, read from the server: its last committed transaction id (`srvr`),
 * `mntr`'s counters, and the bytes of the established connections to its client port
 * (each socket's tcp_info, from `ss`: bytes_sent is what the server sent its clients,
 * bytes_received what they sent it); with the CPU time of this process and the server's. */
struct fleet_sample {
	int64_t t;
	double zxid;           /* < 0: unknown */
	double sent, received; /* < 0: unknown */
	struct mstats m;
};

/* The server's last committed zxid, from `srvr` ("Zxid: 0x..."), or -1. */
static double srvr_zxid(void)
{
	char *buf = four_letter("srvr");
	if (!buf)
		return -1;
	double z = -1;
	char *p = strstr(buf, "Zxid: ");
	if (p)
		z = (double)strtoull(p + 6, NULL, 16);
	free(buf);
	return z;
}

/* The bytes the server has sent to and received from the clients of its port, summed over
 * the connections established now (a connection closed meanwhile takes its counts with
 * it: S9 keeps every session open over its windows). false if `ss` gave nothing. */
static bool server_bytes(double *sent, double *received)
{
	char host[256], port[32];
	first_server(host, sizeof host, port, sizeof port);
	*sent = *received = -1;
	if (port[0] == '\0' || port[strspn(port, "0123456789")] != '\0')
		return false;
	char cmd[160];
	snprintf(cmd, sizeof cmd, "ss -tinH state established '( sport = :%s )' 2>/dev/null",
	         port);
	FILE *f = popen(cmd, "re");
	if (!f)
		return false;
	double s = 0, r = 0;
	bool any = false;
	char word[256];
	while (fscanf(f, "%255s", word) == 1) {
		if (strncmp(word, "bytes_sent:", 11) == 0) {
			s += strtod(word + 11, NULL);
			any = true;
		} else if (strncmp(word, "bytes_received:", 15) == 0) {
			r += strtod(word + 15, NULL);
		}
	}
	pclose(f);
	if (any) {
		*sent = s;
		*received = r;
	}
	return any;
}

/* The CPU time of a process in microseconds, summed over its threads' run time in
 * /proc/PID/task/TID/schedstat (nanoseconds: /proc/PID/stat counts 10 ms ticks, too coarse
 * for a process that wakes for a millisecond a second); /proc/PID/stat's if unreadable. */
static double proc_cpu_us_fine(const char *pid)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%s/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return proc_cpu_us(pid);
	double ns = 0;
	bool any = false;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char f[400];
		snprintf(f, sizeof f, "/proc/%s/task/%s/schedstat", pid, e->d_name);
		FILE *fp = fopen(f, "re");
		if (!fp)
			continue;
		unsigned long long run;
		if (fscanf(fp, "%llu", &run) == 1) {
			ns += (double)run;
			any = true;
		}
		fclose(fp);
	}
	closedir(d);
	return any ? ns / 1e3 : proc_cpu_us(pid);
}

static struct fleet_sample fleet_sample(void)
{
	struct fleet_sample f;
	/* ss first: the 4lw connections below are closed by the next sample. */
	server_bytes(&f.sent, &f.received);
	f.zxid = srvr_zxid();
	f.m = mntr();
	f.m.cpu_self = proc_cpu_us_fine("self");
	f.t = now_ns();
	return f;
}

/* A "Key:  N kB" line of a /proc file of a process, in KiB; 0 if unreadable. */
static long proc_kib(const char *pid, const char *file, const char *key)
{
	char path[96], line[256];
	snprintf(path, sizeof path, "/proc/%s/%s", pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	long kib = 0;
	size_t klen = strlen(key);
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, key, klen) == 0) {
			kib = strtol(line + klen, NULL, 10);
			break;
		}
	}
	fclose(f);
	return kib;
}

/* The resident set of a process now (VmRSS), in KiB; 0 if unreadable. */
static long rss_now_kib(const char *pid)
{
	return proc_kib(pid, "status", "VmRSS:");
}

/* How many children path has now, from a plain exists on the probe's session (its stat:
 * a small answer, so that polling it costs the server next to nothing); 0 while path does
 * not exist. */
static int probe_children(struct raw *probe, const char *path)
{
	struct Stat st;
	int rc = zoo_exists(probe->zh, path, 0, &st);
	if (rc == ZNONODE)
		return 0;
	if (rc != ZOK)
		die("exists %s: %s", path, zerror(rc));
	return st.numChildren;
}

/* Waits until path has at least want children, polling every poll_ms; returns when it
 * saw them. Fails after limit_s seconds. */
static int64_t wait_children(struct raw *probe, const char *path, int want, int poll_ms,
                             int limit_s, long *polls)
{
	int64_t deadline = now_ns() + (int64_t)limit_s * 1000000000;
	int have;
	while ((have = probe_children(probe, path)) < want) {
		if (polls)
			(*polls)++;
		if (now_ns() > deadline)
			die("only %d of %d nodes under %s after %d s", have, want, path, limit_s);
		sleep_ms(poll_ms);
	}
	return now_ns();
}

/* The settling time before an idle window (-W; default 3 s): the queueing's last answers
 * and watches are done, and the window sees only what waiting costs. */
static double fleet_settle_s(void)
{
	return opt.warmup >= 0 ? opt.warmup : 3;
}

/* The per-second rates of the server over an idle window, as key=value pairs. */
static void fleet_rates(char *buf, size_t size, const struct fleet_sample *a,
                        const struct fleet_sample *b)
{
	double s = (double)(b->t - a->t) / 1e9;
	xappend(buf, size, " window_s=%.1f", s);
	if (a->zxid >= 0 && b->zxid >= 0)
		xappend(buf, size, " txn/s=%.2f", (b->zxid - a->zxid) / s);
	if (a->m.ok && b->m.ok)
		xappend(buf, size, " wr/s=%.2f fsync/s=%.2f req/s=%.2f rd/s=%.2f wakes/s=%.2f",
		        (b->m.writes - a->m.writes) / s, (b->m.fsyncs - a->m.fsyncs) / s,
		        (b->m.packets - a->m.packets) / s, (b->m.reads - a->m.reads) / s,
		        (b->m.wakes - a->m.wakes) / s);
	if (a->sent >= 0 && b->sent >= 0)
		xappend(buf, size, " srv_sent_B/s=%.0f srv_recv_B/s=%.0f", (b->sent - a->sent) / s,
		        (b->received - a->received) / s);
	if (a->m.cpu_server >= 0 && b->m.cpu_server >= 0)
		xappend(buf, size, " srv_cpu_ms/s=%.2f", (b->m.cpu_server - a->m.cpu_server) / 1e3 / s);
}

static struct {
	pthread_mutex_t mu;
	long granted, failed;
	bool closing;
	int64_t t0, first_grant;
} s9st = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A waiter's acquire ended: in S9 the holder never lets go, so a grant (or a failure)
 * before the end is the scenario's failure; in S9A the first grant is timed. */
static void s9_acquired(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)data;
	int64_t t = now_ns();
	pthread_mutex_lock(&s9st.mu);
	if (!s9st.closing) {
		if (rc == 0) {
			if (s9st.granted++ == 0)
				s9st.first_grant = t;
		} else if (s9st.failed++ == 0) {
			fprintf(stderr, "%s: S9: a waiter's acquire failed: %s: %s\n", prog,
			        zkl_strerror(rc), zkl_last_error());
		}
	}
	pthread_mutex_unlock(&s9st.mu);
}

static void s9_gained(zkl_leader *l, void *data)
{
	s9_acquired(NULL, 0, data);
	(void)l;
}

static char s9_name[64];

static const char *s9_scenario(const char *b, int n, int def)
{
	snprintf(s9_name, sizeof s9_name, "%s", scenario_name(b, n, def));
	return s9_name;
}

/* s9 / s9l: -c sessions (default 100), each of its own zkl_client, wait idle behind a
 * holder (a mutex with one asynchronous acquire each, or a started leader latch each);
 * once all nodes are there and the settling time has passed, the server's committed
 * transactions, requests and bytes per second and this process's CPU are measured over
 * -d seconds. */
static void s9_idle(bool leader)
{
	int n = opt.clients ? opt.clients : 100;
	const char *name = s9_scenario(leader ? "S9L" : "S9", n, 100);
	set_base(leader ? "s9l" : "s9");
	char path[700];
	snprintf(path, sizeof path, "%s/lock", base_path);
	struct raw probe = {0};
	raw_connect(&probe);

	zkl_client *hc = open_client();
	zkl_mutex *hm = NULL;
	zkl_leader *hl = NULL;
	int rc;
	if (leader) {
		if ((rc = zkl_leader_new(&hl, hc, path, NULL)) != 0 ||
		    (rc = zkl_leader_start(hl)) != 0 || (rc = zkl_leader_await(hl, 20000)) != 0)
			die_zkl("the leader", rc);
	} else {
		if ((rc = zkl_mutex_new(&hm, hc, path)) != 0 ||
		    (rc = zkl_lock_acquire(zkl_mutex_lock(hm), 20000)) != 0)
			die_zkl("the holder", rc);
	}
	long rss0 = rss_now_kib("self");
	zkl_client **cs = xcalloc((size_t)n, sizeof *cs);
	zkl_mutex **ms = xcalloc((size_t)n, sizeof *ms);
	zkl_leader **ls = xcalloc((size_t)n, sizeof *ls);
	int64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		cs[i] = open_client();
		if (leader) {
			zkl_leader_options lo;
			zkl_leader_options_init(&lo);
			lo.on_gained = s9_gained;
			if ((rc = zkl_leader_new(&ls[i], cs[i], path, &lo)) != 0 ||
			    (rc = zkl_leader_start(ls[i])) != 0)
				die_zkl("a standby", rc);
		} else {
			if ((rc = zkl_mutex_new(&ms[i], cs[i], path)) != 0 ||
			    (rc = zkl_lock_acquire_async(zkl_mutex_lock(ms[i]), ZKL_WAIT_FOREVER,
			                                 s9_acquired, NULL)) != 0)
				die_zkl("a waiter", rc);
		}
	}
	int64_t t_queued = wait_children(&probe, path, n + 1, 10, 300, NULL);
	sleep_ms((int)(fleet_settle_s() * 1000));
	struct fleet_sample a = fleet_sample();
	sleep_until(a.t + (int64_t)(opt.seconds * 1e9));
	struct fleet_sample b = fleet_sample();
	long rss1 = rss_now_kib("self");
	int still = probe_children(&probe, path);
	pthread_mutex_lock(&s9st.mu);
	long granted = s9st.granted, failed = s9st.failed;
	s9st.closing = true;
	pthread_mutex_unlock(&s9st.mu);
	if (granted || failed || still != n + 1)
		die("%s: %ld waiters granted and %ld failed while the holder held; %d of %d nodes "
		    "left",
		    name, granted, failed, still, n + 1);

	double s = (double)(b.t - a.t) / 1e9;
	char line[1024];
	snprintf(line, sizeof line, "%s %s waiters=%d sessions=%d queue_ms=%.0f", name,
	         opt.label, n, n + 1, (double)(t_queued - t0) / 1e6);
	fleet_rates(line, sizeof line, &a, &b);
	xappend(line, sizeof line,
	        " cpu_ms/s=%.2f cpu_us/s/waiter=%.1f rss_kib=%ld rss_kib/waiter=%.1f settle_s=%.1f",
	        (b.m.cpu_self - a.m.cpu_self) / 1e3 / s, (b.m.cpu_self - a.m.cpu_self) / s / n,
	        rss1, (double)(rss1 - rss0) / n, fleet_settle_s());
	puts(line);
	fflush(stdout);

	for (int i = 0; i < n; i++) {
		if (leader)
			zkl_leader_free(ls[i]);
		else
			zkl_mutex_free(ms[i]);
	}
	for (int i = 0; i < n; i++)
		zkl_client_close(cs[i]);
	if (leader)
		zkl_leader_free(hl);
	else
		zkl_mutex_free(hm);
	zkl_client_close(hc);
	zookeeper_close(probe.zh);
	sweep_folders();
	free(cs);
	free(ms);
	free(ls);
}

/* The zklock processes of s9p, stopped however this program ends (die() exits, a
 * timeout's SIGTERM): a fleet left behind would wait on the server for ever. */
static pid_t *s9_kids;
static volatile sig_atomic_t s9_nkids;

static void s9_kill_kids(void)
{
	for (sig_atomic_t i = 0; i < s9_nkids; i++)
		if (s9_kids[i] > 0)
			kill(s9_kids[i], SIGTERM);
}

static void s9_on_signal(int sig)
{
	s9_kill_kids();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* s9p / s9pl: the same with `zklock` processes, as a fleet's hosts would run them: a
 * holder `zklock [--leader] PATH -- sleep 100000`, then -c waiters (default 300)
 * `zklock [--leader] PATH -- true`; the CPU and memory are the waiters' (their
 * /proc/PID/stat and VmRSS). The waiters, then the holder, are stopped with SIGTERM. */
static void s9_procs(bool leader)
{
	int n = opt.clients ? opt.clients : 300;
	const char *name = s9_scenario(leader ? "S9PL" : "S9P", n, 300);
	set_base(leader ? "s9pl" : "s9p");
	char path[700];
	snprintf(path, sizeof path, "%s/lock", base_path);
	struct raw probe = {0};
	raw_connect(&probe);
	char *zl = (char *)(opt.zklock ? opt.zklock : default_zklock());
	/* zklock -s SERVERS -q [--leader] PATH -- COMMAND: the holder's command sleeps, the
	 * waiters' is true. */
	char *hold_argv[10], *wait_argv[10];
	int k = 0;
	char *head[] = {zl, "-s", (char *)opt.servers, "-q"};
	for (size_t j = 0; j < sizeof head / sizeof *head; j++)
		hold_argv[k] = wait_argv[k] = head[j], k++;
	if (leader)
		hold_argv[k] = wait_argv[k] = "--leader", k++;
	hold_argv[k] = wait_argv[k] = path, k++;
	hold_argv[k] = wait_argv[k] = "--", k++;
	hold_argv[k] = "sleep";
	hold_argv[k + 1] = "100000";
	hold_argv[k + 2] = NULL;
	wait_argv[k] = "true";
	wait_argv[k + 1] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);

	/* Slot 0 is the holder, 1..n the waiters. */
	s9_kids = xcalloc((size_t)n + 1, sizeof *s9_kids);
	atexit(s9_kill_kids);
	signal(SIGTERM, s9_on_signal);
	signal(SIGINT, s9_on_signal);
	pid_t holder;
	int rc = posix_spawnp(&holder, zl, &fa, NULL, hold_argv, environ);
	if (rc != 0)
		die("cannot run %s: %s", zl, strerror(rc));
	s9_kids[0] = holder;
	s9_nkids = 1;
	wait_children(&probe, path, 1, 10, 60, NULL);
	sleep_ms(500); /* its grant (a first node is granted at once) */
	pid_t *pids = s9_kids + 1;
	int64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		rc = posix_spawnp(&pids[i], zl, &fa, NULL, wait_argv, environ);
		if (rc != 0)
			die("cannot run %s: %s", zl, strerror(rc));
		s9_nkids = i + 2;
	}
	int64_t t_queued = wait_children(&probe, path, n + 1, 10, 300, NULL);
	sleep_ms((int)(fleet_settle_s() * 1000));
	char pid_s[32];
	double cpu_a = 0, cpu_b = 0;
	for (int i = 0; i < n; i++) {
		snprintf(pid_s, sizeof pid_s, "%ld", (long)pids[i]);
		cpu_a += proc_cpu_us_fine(pid_s);
	}
	struct fleet_sample a = fleet_sample();
	sleep_until(a.t + (int64_t)(opt.seconds * 1e9));
	struct fleet_sample b = fleet_sample();
	long rss = 0, pss = 0;
	for (int i = 0; i < n; i++) {
		snprintf(pid_s, sizeof pid_s, "%ld", (long)pids[i]);
		cpu_b += proc_cpu_us_fine(pid_s);
		rss += rss_now_kib(pid_s);
		/* The proportional set: the pages the processes share (libc, the C client)
		 * counted once in all, not once per process. */
		pss += proc_kib(pid_s, "smaps_rollup", "Pss:");
	}
	int still = probe_children(&probe, path);
	int gone = 0;
	for (int i = 0; i < n; i++) {
		int st;
		if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
			pids[i] = 0;
			gone++;
		}
	}
	/* Stop the waiters, then the holder (zklock passes the signal on to its command). */
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	int64_t deadline = now_ns() + 30 * (int64_t)1000000000;
	for (int i = 0; i < n; i++) {
		while (pids[i] > 0) {
			int st;
			pid_t p = waitpid(pids[i], &st, WNOHANG);
			if (p == pids[i] || (p < 0 && errno != EINTR))
				break;
			if (now_ns() > deadline)
				kill(pids[i], SIGKILL);
			sleep_ms(5);
		}
	}
	kill(holder, SIGTERM);
	int hst;
	while (waitpid(holder, &hst, 0) < 0 && errno == EINTR)
		;
	s9_nkids = 0;
	posix_spawn_file_actions_destroy(&fa);
	if (gone || still != n + 1)
		die("%s: %d waiters exited while the holder held; %d of %d nodes left", name, gone,
		    still, n + 1);

	double s = (double)(b.t - a.t) / 1e9;
	char line[1024];
	snprintf(line, sizeof line, "%s %s waiters=%d processes=%d queue_ms=%.0f", name,
	         opt.label, n, n + 1, (double)(t_queued - t0) / 1e6);
	fleet_rates(line, sizeof line, &a, &b);
	xappend(line, sizeof line,
	        " cpu_ms/s=%.2f cpu_us/s/waiter=%.1f rss_kib=%ld rss_kib/waiter=%.1f "
	        "pss_kib/waiter=%.1f settle_s=%.1f",
	        (cpu_b - cpu_a) / 1e3 / s, (cpu_b - cpu_a) / s / n, rss, (double)rss / n,
	        (double)pss / n, fleet_settle_s());
	puts(line);
	fflush(stdout);
	zookeeper_close(probe.zh);
	sweep_folders();
}

/* The wall clock in ms (the server's node times are on it: one machine, one clock). */
static double wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The latest creation time (ctime, the server's wall clock in ms) of path's children: one
 * exists each, after the measured time. -1 if none. */
static double last_ctime_ms(struct raw *probe, const char *path)
{
	struct String_vector kids = {0};
	if (zoo_get_children(probe->zh, path, 0, &kids) != ZOK)
		return -1;
	double last = -1;
	char child[1200];
	for (int i = 0; i < kids.count; i++) {
		struct Stat st;
		snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
		if (zoo_exists(probe->zh, child, 0, &st) == ZOK && (double)st.ctime > last)
			last = (double)st.ctime;
	}
	deallocate_String_vector(&kids);
	return last;
}

/* s9a: a cron minute. -c sessions (default 1000), connected beforehand, start an
 * asynchronous acquire of one free lock at the same moment; the first to queue is granted
 * and holds. Times, from that moment: the first grant (its callback); all nodes present
 * (all_queued_ms: the latest ctime of the queue's nodes, on the server's clock, which is
 * this machine's; probe_ms: when a probe's exists on the lock's folder, every 5 ms, saw
 * numChildren reach -c); and the server quiet again (what it sent in 250 ms under 32 KiB);
 * and what the server sent and received meanwhile (its sockets' byte counts: mostly the
 * waiters' listings of the queue). */
static void s9_arrival(void)
{
	int n = opt.clients ? opt.clients : 1000;
	const char *name = s9_scenario("S9A", n, 1000);
	set_base("s9a");
	char path[700];
	snprintf(path, sizeof path, "%s/lock", base_path);
	struct raw probe = {0};
	raw_connect(&probe);
	long rss0 = rss_now_kib("self");
	zkl_client **cs = xcalloc((size_t)n, sizeof *cs);
	zkl_mutex **ms = xcalloc((size_t)n, sizeof *ms);
	int rc;
	for (int i = 0; i < n; i++) {
		cs[i] = open_client();
		if ((rc = zkl_mutex_new(&ms[i], cs[i], path)) != 0)
			die_zkl(path, rc);
	}
	sleep_ms((int)(fleet_settle_s() * 1000));
	struct fleet_sample a = fleet_sample();
	double t0_wall = wall_ms();
	int64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		rc = zkl_lock_acquire_async(zkl_mutex_lock(ms[i]), ZKL_WAIT_FOREVER, s9_acquired,
		                            NULL);
		if (rc != 0)
			die_zkl("acquire_async", rc);
	}
	int64_t started = now_ns();
	long polls = 0;
	int64_t t_all = wait_children(&probe, path, n, 5, 300, &polls);
	/* Quiet: what the server sent in the last 250 ms is under 32 KiB (a thousand idle
	 * sessions' pings and heartbeats send a few KiB). */
	double prev = a.sent, sent, recv;
	int64_t t_quiet = t_all, limit = t_all + 60 * (int64_t)1000000000;
	for (;;) {
		server_bytes(&sent, &recv);
		if (sent >= 0 && prev >= 0 && sent - prev < 32 * 1024 && now_ns() > t_all)
			break;
		if (now_ns() > limit)
			die("%s: the server did not quieten within 60 s of the last node", name);
		prev = sent;
		t_quiet = now_ns();
		sleep_ms(250);
	}
	struct fleet_sample b = fleet_sample();
	long rss1 = rss_now_kib("self");
	pthread_mutex_lock(&s9st.mu);
	long granted = s9st.granted, failed = s9st.failed;
	int64_t first = s9st.first_grant;
	s9st.closing = true;
	pthread_mutex_unlock(&s9st.mu);
	if (granted != 1 || failed)
		die("%s: %ld granted (1 expected: nobody releases) and %ld failed", name, granted,
		    failed);
	double last = last_ctime_ms(&probe, path);
	uint64_t listings = 0;
	for (int i = 0; i < n; i++) {
		zkl_client_stats st;
		if (zkl_client_get_stats(cs[i], &st, sizeof st) == 0)
			listings += st.listings;
	}
	char line[1024];
	snprintf(line, sizeof line,
	         "%s %s arrivals=%d start_ms=%.1f first_grant_ms=%.1f all_queued_ms=%.0f "
	         "probe_ms=%.1f quiet_ms=%.0f",
	         name, opt.label, n, (double)(started - t0) / 1e6, (double)(first - t0) / 1e6,
	         last - t0_wall, (double)(t_all - t0) / 1e6, (double)(t_quiet - t0) / 1e6);
	if (a.sent >= 0 && b.sent >= 0)
		xappend(line, sizeof line, " srv_sent_kib=%.0f srv_recv_kib=%.0f srv_sent_B/arrival=%.0f",
		        (b.sent - a.sent) / 1024, (b.received - a.received) / 1024,
		        (b.sent - a.sent) / n);
	if (a.m.ok && b.m.ok)
		xappend(line, sizeof line, " req=%.0f rd=%.0f wr=%.0f wakes=%.0f",
		        b.m.packets - a.m.packets, b.m.reads - a.m.reads, b.m.writes - a.m.writes,
		        b.m.wakes - a.m.wakes);
	if (a.zxid >= 0 && b.zxid >= 0)
		xappend(line, sizeof line, " txn=%.0f", b.zxid - a.zxid);
	xappend(line, sizeof line, " listings=%llu probe_polls=%ld cpu_ms=%.0f",
	        (unsigned long long)listings, polls, (b.m.cpu_self - a.m.cpu_self) / 1e3);
	if (a.m.cpu_server >= 0 && b.m.cpu_server >= 0)
		xappend(line, sizeof line, " srv_cpu_ms=%.0f", (b.m.cpu_server - a.m.cpu_server) / 1e3);
	xappend(line, sizeof line, " rss_kib=%ld rss_kib/session=%.1f", rss1,
	        (double)(rss1 - rss0) / n);
	puts(line);
	fflush(stdout);

	for (int i = 0; i < n; i++)
		zkl_mutex_free(ms[i]);
	for (int i = 0; i < n; i++)
		zkl_client_close(cs[i]);
	zookeeper_close(probe.zh);
	sweep_folders();
	free(cs);
	free(ms);
}

/* ---- guarded writes ----------------------------------------------------------------- */

/* gs1 / gs64: a guarded set (zkl_lock_guarded_set(), a multi of a check of the hold's
 * node and the set) against a plain set (zkl_record_set(): one set) of the same node on
 * the same session, with 1 or -w (default 64) threads writing at once. The two kinds
 * take turns in rounds of half a second over the timed window, so that both see the same
 * machine; each gets its own line (latency of one write, writes per second, and cpu_us/c,
 * this process's CPU time per write), then a line of the guarded/plain ratios. */
static struct {
	zkl_client *c;
	zkl_lock *l;
	char path[600];
	atomic_int mode;        /* 0 plain, 1 guarded, 2 warm-up (plain), -1 stop */
	struct vec lat[2];      /* by mode, merged from the threads */
	long cycles[2];
	pthread_mutex_t mu;
} gs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *gs_thread(void *arg)
{
	(void)arg;
	struct vec lat[2] = {{0}, {0}};
	long cycles[2] = {0, 0};
	gate_wait();
	for (;;) {
		const int mode = atomic_load(&gs.mode);
		if (mode < 0)
			break;
		const int64_t t0 = now_ns();
		int rc = mode == 1 ? zkl_lock_guarded_set(gs.l, gs.path, node_data,
		                                          (size_t)node_data_len)
		                   : zkl_record_set(gs.c, gs.path, node_data, (size_t)node_data_len);
		if (rc != 0)
			die_zkl(mode == 1 ? "guarded set" : "set", rc);
		const int64_t t1 = now_ns();
		if (mode < 2 && atomic_load(&gs.mode) == mode) {
			vec_push(&lat[mode], t1 - t0);
			cycles[mode]++;
		}
	}
	pthread_mutex_lock(&gs.mu);
	for (int m = 0; m < 2; m++) {
		vec_append(&gs.lat[m], &lat[m]);
		gs.cycles[m] += cycles[m];
		free(lat[m].v);
	}
	pthread_mutex_unlock(&gs.mu);
	return NULL;
}

static void gs_run(const char *name, int threads)
{
	set_base(name);
	make_node_data();
	gs.c = open_client();
	zkl_semaphore *sem;
	char lock[700];
	snprintf(lock, sizeof lock, "%s/lock", base_path);
	int rc = zkl_semaphore_new(&sem, gs.c, lock, 1);
	if (rc != 0)
		die_zkl("semaphore", rc);
	gs.l = zkl_semaphore_lock(sem); /* held by the view: any thread's writes are its */
	if ((rc = zkl_lock_acquire(gs.l, 20000)) != 0)
		die_zkl("acquire", rc);
	snprintf(gs.path, sizeof gs.path, "%s/record", base_path);
	if ((rc = zkl_record_set(gs.c, gs.path, node_data, (size_t)node_data_len)) != 0)
		die_zkl("set", rc);
	atomic_store(&gs.mode, 2);
	pthread_t *th = xcalloc((size_t)threads, sizeof *th);
	for (int i = 0; i < threads; i++)
		th[i] = start_thread(gs_thread, NULL);
	gate_open_when(threads);
	run_begin();
	sleep_until(run.warm_end);
	double cpu[2] = {0, 0}, secs[2] = {0, 0};
	const int64_t round = 500 * 1000 * 1000;
	for (int k = 0; now_ns() < run.end; k++) {
		const int m = k % 2;
		atomic_store(&gs.mode, m);
		const double c0 = proc_cpu_us("self");
		const int64_t t0 = now_ns();
		sleep_until(t0 + round);
		const int64_t t1 = now_ns();
		cpu[m] += proc_cpu_us("self") - c0;
		secs[m] += (double)(t1 - t0) / 1e9;
	}
	atomic_store(&gs.mode, -1);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	free(th);
	zkl_lock_release(gs.l);
	zkl_semaphore_free(sem);
	zkl_client_close(gs.c);
	static const char *const kind[2] = {"plain", "guarded"};
	double p50[2], p99[2], rate[2], cpc[2];
	for (int m = 0; m < 2; m++) {
		char sname[64];
		snprintf(sname, sizeof sname, "%s-%s", name, kind[m]);
		struct result *r = new_result(sname);
		vec_append(r->lat, &gs.lat[m]);
		r->cycles = gs.cycles[m];
		r->rate = (double)r->cycles / secs[m];
		r->m0.cpu_self = r->m1.cpu_self = r->m0.cpu_server = r->m1.cpu_server = -1;
		r->m0.vcsw = r->m1.vcsw = -1;
		cpc[m] = r->cycles ? cpu[m] / (double)r->cycles : 0;
		snprintf(r->extra, sizeof r->extra, "threads=%d cpu_us/c=%.1f", threads, cpc[m]);
		report(r); /* sorts the samples */
		p50[m] = quantile_us(r->lat, 0.50);
		p99[m] = quantile_us(r->lat, 0.99);
		rate[m] = r->rate;
	}
	printf("%s-ratio %s p50=%.3f p99=%.3f rate=%.3f cpu=%.3f (guarded/plain)\n", name,
	       opt.label, p50[1] / p50[0], p99[1] / p99[0], rate[1] / rate[0], cpc[1] / cpc[0]);
	fflush(stdout);
}

/* ---- main --------------------------------------------------------------------------- */

static void run_scenario(const char *s)
{
	int c = opt.clients;
	if (strcmp(s, "s0a") == 0)
		s0a();
	else if (strcmp(s, "s0b") == 0)
		s0b();
	else if (strcmp(s, "s0m") == 0)
		s0m();
	else if (strcmp(s, "s1") == 0)
		timed_loop("S1", LOOP_MUTEX, 1, true, false, false);
	else if (strcmp(s, "s2") == 0)
		timed_loop(scenario_name("S2", c ? c : 8, 8), LOOP_MUTEX, c ? c : 8, true, true, true);
	else if (strcmp(s, "s3") == 0)
		timed_loop(scenario_name("S3", c ? c : 8, 8), LOOP_MUTEX, c ? c : 8, false, false,
		           false);
	else if (strcmp(s, "s4") == 0)
		s4();
	else if (strcmp(s, "s5") == 0)
		timed_loop(scenario_name("S5", c ? c : 8, 8), LOOP_RWLOCK, c ? c : 8, true, true,
		           false);
	else if (strcmp(s, "s6") == 0)
		timed_loop(scenario_name("S6", c ? c : 16, 16), LOOP_SEMAPHORE, c ? c : 16, true,
		           true, false);
	else if (strcmp(s, "s7") == 0)
		s7();
	else if (strcmp(s, "mem") == 0)
		mem();
	else if (strcmp(s, "mema") == 0)
		mema();
	else if (strcmp(s, "s8") == 0)
		s8();
	else if (strcmp(s, "s9") == 0)
		s9_idle(false);
	else if (strcmp(s, "s9l") == 0)
		s9_idle(true);
	else if (strcmp(s, "s9p") == 0)
		s9_procs(false);
	else if (strcmp(s, "s9pl") == 0)
		s9_procs(true);
	else if (strcmp(s, "s9a") == 0)
		s9_arrival();
	else if (strcmp(s, "gs1") == 0)
		gs_run("GS1", 1);
	else if (strcmp(s, "gs64") == 0)
		gs_run(scenario_name("GS64", opt.window_set ? opt.window : 64, 64),
		       opt.window_set ? opt.window : 64);
}

static bool known(const char *s)
{
	static const char *names[] = {"s0a", "s0b", "s0m", "s1", "s2", "s3",
	                              "s4",  "s5",  "s6",  "s7", "s8",  "mem", "mema", "gs1",
	                              "gs64", "s9", "s9l", "s9p", "s9pl", "s9a", "all"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: %s [-s servers] [-d seconds] [-W warmup] [-c clients] [-n count]\n"
	        "          [-w window] [-L label] [-p prefix] [-z zklock] SCENARIO...\n"
	        "       %s [options] s7 [-- COMMAND [ARG...]]\n"
	        "scenarios: s0a s0b s0m s1 s2 s3 s4 s5 s6 s7 s8 mem mema gs1 gs64\n"
	        "           s9 s9l s9p s9pl s9a all\n",
	        prog, prog);
	exit(2);
}

static double num_arg(const char *s, double lo, double hi)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	int o;
	opt.servers = getenv("ZKLOCK_SERVERS");
	while ((o = getopt(argc, argv, "+s:d:W:c:n:w:L:p:z:h")) != -1) {
		switch (o) {
		case 's': opt.servers = optarg; break;
		case 'd': opt.seconds = num_arg(optarg, 0.01, 86400); break;
		case 'W': opt.warmup = num_arg(optarg, 0, 86400); break;
		case 'c': opt.clients = (int)num_arg(optarg, 1, 100000); break;
		case 'n': opt.count = (long)num_arg(optarg, 1, 1e9); break;
		case 'w':
			opt.window = (int)num_arg(optarg, 1, 100000);
			opt.window_set = true;
			break;
		case 'L': opt.label = optarg; break;
		case 'p': opt.prefix = optarg; break;
		case 'z': opt.zklock = optarg; break;
		default: usage();
		}
	}
	if (!opt.servers || !opt.servers[0])
		opt.servers = "127.0.0.1:2181";
	if (opt.prefix[0] != '/' || strlen(opt.prefix) < 2)
		usage();

	/* Scenario names, then an optional "-- COMMAND" for s7. */
	const char *list[32];
	int n = 0;
	for (int i = optind; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			if (i + 1 >= argc)
				usage();
			opt.command = &argv[i + 1];
			break;
		}
		if (!known(argv[i]))
			usage();
		if (strcmp(argv[i], "all") == 0) {
			static const char *all[] = {"s0a", "s0b", "s0m", "s1", "s2", "s3",
			                            "s4",  "s5",  "s6",  "s7", "mem"};
			for (size_t k = 0; k < sizeof all / sizeof *all && n < 32; k++)
				list[n++] = all[k];
		} else if (n < 32) {
			list[n++] = argv[i];
		}
	}
	if (n == 0)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (n == 1) {
		run_scenario(list[0]);
		return 0;
	}
	/* One child per scenario: its peak RSS is that scenario's alone. */
	int status = 0;
	for (int i = 0; i < n; i++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (pid == 0) {
			run_scenario(list[i]);
			fflush(stdout);
			_exit(0);
		}
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "%s: scenario %s failed\n", prog, list[i]);
			status = 1;
		}
	}
	return status;
}
