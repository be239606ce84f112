/* zkl-cost: what each recipe costs a ZooKeeper ensemble, measured at the server.
 *
 *   zkl-cost -s HOST:PORT [-t SESSION_MS] [-n CYCLES] [-w SECONDS]
 *
 * The server must answer the mntr four-letter word (scripts/zk-server's do), and nothing
 * else may use it meanwhile: every number is a difference of its counters. For each
 * recipe, CYCLES uncontended acquire + release cycles on one path whose folder exists
 * (the first cycle, which makes it, is left out), and then the costs of time: what one
 * session adds per second while it holds, while it is next in line, while it waits far
 * back (20 such sessions, divided), and while it holds and awaits nothing, each over
 * SECONDS. Requests are what the server received (zk_packets_received, the C client's
 * pings included), committed transactions are zk_cnt_updatelatency, watches triggered
 * are the zk_sum_node_*_watch_count sums, and watches set are read from mntr's
 * zk_watch_count while the state lasts. Heartbeats of the cycling client, counted by the
 * library (zkl_client_stats' proof_writes and heartbeat_syncs), are taken out of the
 * per-cycle numbers: they are the costs of time. Prints Markdown tables.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

static const char *servers = "127.0.0.1:2181";
static int session_ms = 10000;
static int cycles = 200;
static int window_s = 10;

struct counters {
	double packets, commits, triggered, watches;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "zkl-cost: %s: %s (%s)\n", what, zkl_strerror(rc), zkl_last_error());
	exit(1);
}

#define OK(call)                                                                            \
	do {                                                                                \
		int rc_ = (call);                                                           \
		if (rc_ != 0)                                                               \
			die(#call, rc_);                                                    \
	} while (0)

static struct counters mntr(void)
{
	char host[256], port[32];
	size_t n = strcspn(servers, ",/");
	snprintf(host, sizeof host, "%.*s", (int)(n < 255 ? n : 255), servers);
	char *colon = strrchr(host, ':');
	snprintf(port, sizeof port, "%s", colon ? colon + 1 : "2181");
	if (colon)
		*colon = '\0';
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		fprintf(stderr, "zkl-cost: cannot resolve %s\n", host);
		exit(1);
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 || write(fd, "mntr", 4) != 4) {
		fprintf(stderr, "zkl-cost: mntr: the server does not answer\n");
		exit(1);
	}
	freeaddrinfo(ai);
	static char buf[64 * 1024];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	struct counters c = {0};
	bool seen = false;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		double v = strtod(tab + 1, NULL);
		if (strcmp(line, "zk_packets_received") == 0)
			c.packets = v, seen = true;
		else if (strcmp(line, "zk_cnt_updatelatency") == 0)
			c.commits = v;
		else if (strcmp(line, "zk_watch_count") == 0)
			c.watches = v;
		else if (strncmp(line, "zk_sum_node_", 12) == 0 && strstr(line, "_watch_count"))
			c.triggered += v;
	}
	if (!seen) {
		fprintf(stderr, "zkl-cost: mntr gave no zk_packets_received\n");
		exit(1);
	}
	return c;
}

static zkl_client *client(void)
{
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	o.session_timeout_ms = session_ms;
	zkl_client *c;
	OK(zkl_client_open(&c, &o));
	return c;
}

static zkl_client_stats stats(zkl_client *c)
{
	zkl_client_stats s;
	OK(zkl_client_get_stats(c, &s, sizeof s));
	return s;
}

static void pause_s(int s)
{
	struct timespec ts = {.tv_sec = s};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* ---- acquire + release cycles ---- */

enum kind { MUTEX, SEMMUTEX, SEM3, READ, WRITE, LEADER, MULTI2, NKINDS };
static const char *const kind_names[NKINDS] = {
	"mutex", "semaphore-mutex", "semaphore (3 leases), one lease", "read lock",
	"write lock", "leader latch (lock view)", "multi-lock of two mutexes",
};

struct handle {
	zkl_mutex *m, *m2;
	zkl_semaphore_mutex *sm;
	zkl_semaphore *s;
	zkl_rwlock *rw;
	zkl_leader *ld;
	zkl_multilock *ml;
	zkl_lock *l;
};

static void handle_new(struct handle *h, zkl_client *c, enum kind k, const char *path)
{
	memset(h, 0, sizeof *h);
	char p2[300];
	switch (k) {
	case MUTEX:
		OK(zkl_mutex_new(&h->m, c, path));
		h->l = zkl_mutex_lock(h->m);
		break;
	case SEMMUTEX:
		OK(zkl_semaphore_mutex_new(&h->sm, c, path));
		h->l = zkl_semaphore_mutex_lock(h->sm);
		break;
	case SEM3:
		OK(zkl_semaphore_new(&h->s, c, path, 3));
		h->l = zkl_semaphore_lock(h->s);
		break;
	case READ:
	case WRITE:
		OK(zkl_rwlock_new(&h->rw, c, path));
		h->l = zkl_mutex_lock(k == READ ? zkl_rwlock_read(h->rw) : zkl_rwlock_write(h->rw));
		break;
	case LEADER:
		OK(zkl_leader_new(&h->ld, c, path, NULL));
		h->l = zkl_leader_lock(h->ld);
		break;
	case MULTI2:
		OK(zkl_mutex_new(&h->m, c, path));
		snprintf(p2, sizeof p2, "%s-2", path);
		OK(zkl_mutex_new(&h->m2, c, p2));
		OK(zkl_multilock_new(&h->ml, ZKL_MULTILOCK_AS_ADDED));
		OK(zkl_multilock_add(h->ml, zkl_mutex_lock(h->m)));
		OK(zkl_multilock_add(h->ml, zkl_mutex_lock(h->m2)));
		h->l = zkl_multilock_lock(h->ml);
		break;
	case NKINDS:
		break;
	}
}

static void handle_free(struct handle *h)
{
	zkl_multilock_free(h->ml);
	zkl_mutex_free(h->m);
	zkl_mutex_free(h->m2);
	zkl_semaphore_mutex_free(h->sm);
	zkl_semaphore_free(h->s);
	zkl_rwlock_free(h->rw);
	zkl_leader_free(h->ld);
}

static void cycle_row(enum kind k, const char *path)
{
	zkl_client *c = client();
	struct handle h;
	handle_new(&h, c, k, path);
	OK(zkl_lock_acquire(h.l, 10000)); /* makes the folders */
	OK(zkl_lock_release(h.l));
	zkl_client_stats s0 = stats(c);
	struct counters a = mntr();
	for (int i = 0; i < cycles; i++) {
		OK(zkl_lock_acquire(h.l, 10000));
		OK(zkl_lock_release(h.l));
	}
	/* A release returns before its delete's answer: wait for it to be counted. */
	zkl_client_stats s1 = stats(c);
	handle_free(&h);
	zkl_client_close(c);
	struct counters b = mntr();
	const double beats = (double)(s1.proof_writes - s0.proof_writes) +
	                     (double)(s1.heartbeat_syncs - s0.heartbeat_syncs);
	/* The close's request is the one other packet. */
	printf("| %s | %.2f | %.2f | %.2f |\n", kind_names[k],
	       (b.packets - a.packets - beats - 1) / cycles,
	       (b.commits - a.commits - (double)(s1.proof_writes - s0.proof_writes) - 1) / cycles,
	       (b.triggered - a.triggered) / cycles);
}

/* ---- costs of time ---- */

struct waiter {
	zkl_client *c;
	zkl_mutex *m;
};

static void waiter_cb(zkl_lock *l, int rc, void *data)
{
	(void)l;
	(void)rc;
	(void)data;
}

static void window(const char *what, int sessions)
{
	struct counters a = mntr();
	pause_s(window_s);
	struct counters b = mntr();
	printf("| %s | %.3f | %.3f | %.0f |\n", what,
	       (b.packets - a.packets) / window_s / sessions,
	       (b.commits - a.commits) / window_s / sessions, b.watches);
}

static void time_rows(const char *base)
{
	enum { FAR = 20 };
	char path[256];
	snprintf(path, sizeof path, "%s/time", base);
	/* Nothing at all: the server's own baseline, and then one idle client. */
	window("no session (the server alone)", 1);
	zkl_client *idle = client();
	window("a session that holds and awaits nothing", 1);
	zkl_client_close(idle);
	struct waiter w[2 + FAR];
	for (int i = 0; i < 2; i++) {
		w[i].c = client();
		OK(zkl_mutex_new(&w[i].m, w[i].c, path));
	}
	OK(zkl_lock_acquire(zkl_mutex_lock(w[0].m), 10000));
	zkl_client_close(w[1].c); /* opened again below: idle meanwhile */
	zkl_mutex_free(w[1].m);
	w[1].c = NULL;
	window("a session that holds one lock (its watch on its own node)", 1);
	w[1].c = client();
	OK(zkl_mutex_new(&w[1].m, w[1].c, path));
	OK(zkl_lock_acquire_async(zkl_mutex_lock(w[1].m), -1, waiter_cb, NULL));
	pause_s(2); /* queued and watching */
	struct counters a = mntr();
	pause_s(window_s);
	struct counters b = mntr();
	const double two = (b.packets - a.packets) / window_s;
	const double two_c = (b.commits - a.commits) / window_s;
	for (int i = 2; i < 2 + FAR; i++) {
		w[i].c = client();
		OK(zkl_mutex_new(&w[i].m, w[i].c, path));
		OK(zkl_lock_acquire_async(zkl_mutex_lock(w[i].m), -1, waiter_cb, NULL));
	}
	pause_s(2); /* every waiter queued and watching */
	struct counters c = mntr();
	pause_s(window_s);
	struct counters d = mntr();
	const double all = (d.packets - c.packets) / window_s;
	const double all_c = (d.commits - c.commits) / window_s;
	printf("| holder and the next in line, together | %.3f | %.3f | %.0f |\n", two, two_c,
	       b.watches);
	printf("| each of %d waiters further back | %.3f | %.3f | %.0f |\n", FAR,
	       (all - two) / FAR, (all_c - two_c) / FAR, d.watches);
	for (int i = 2 + FAR; i-- > 0;) {
		zkl_mutex_free(w[i].m);
		zkl_client_close(w[i].c);
	}
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "s:t:n:w:h")) != -1) {
		switch (opt) {
		case 's': servers = optarg; break;
		case 't': session_ms = atoi(optarg); break;
		case 'n': cycles = atoi(optarg); break;
		case 'w': window_s = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: zkl-cost -s HOST:PORT [-t SESSION_MS] [-n CYCLES] "
			        "[-w SECONDS]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (session_ms <= 0 || cycles <= 0 || window_s <= 0) {
		fprintf(stderr, "zkl-cost: -t, -n and -w must be positive\n");
		return 2;
	}
	char base[128];
	snprintf(base, sizeof base, "/zkl-cost-%ld", (long)getpid());
	printf("Per uncontended acquire + release (%d cycles, heartbeats taken out):\n\n",
	       cycles);
	printf("| recipe | requests | committed transactions | watches triggered |\n");
	printf("|---|---|---|---|\n");
	for (int k = 0; k < NKINDS; k++) {
		char path[256];
		snprintf(path, sizeof path, "%s/k%d", base, k);
		cycle_row((enum kind)k, path);
	}
	printf("\nPer second, per session (session timeout %d ms, %d s windows):\n\n",
	       session_ms, window_s);
	printf("| state | requests/s | committed transactions/s | watches set (server) |\n");
	printf("|---|---|---|---|\n");
	time_rows(base);
	return 0;
}
