/* stress-resource: the shared resource that the stress workers write their critical
 * sections to, independent of zklocks. A single-threaded server on a Unix socket:
 *
 *   stress-resource --socket SOCK --log FILE
 *
 * It plays a storage system that honours fencing tokens. For each lock path it keeps the
 * highest token it has accepted, and the section (client, section number) that brought
 * it; a write is
 *   accepted  if its token is higher, or equal and from that same section;
 *   rejected  otherwise ("stale": a lower token; "reuse": the same token from another
 *             section, which no correct lock can produce).
 * Clients wait for the answer ("A" or "R") before going on, so the resource decides in
 * the order it receives, and that order is the order of its log.
 *
 * Protocol (one line each, fields separated by single spaces):
 *   H CLIENT PID                              hello, first line of a connection
 *   W PATH TOKEN CLIENT SECTION KIND TIME_NS  a write; answered "A\n" or "R\n"
 *   N TEXT...                                 a note for the log; no answer
 * Log lines (TIME_NS of the client, RT_NS the resource's own CLOCK_MONOTONIC on receipt):
 *   H RT_NS CLIENT PID
 *   A RT_NS PATH TOKEN CLIENT SECTION KIND TIME_NS
 *   R RT_NS PATH TOKEN CLIENT SECTION KIND TIME_NS stale|reuse
 *   N RT_NS TEXT...
 * The log is flushed line by line, so a killed run still leaves what it saw. SIGTERM or
 * SIGINT ends it: it prints "resource: N accepted, N rejected" on stderr and exits 0.
 */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common.h"

#define PROG "stress-resource"
#define MAX_CONNS 256
#define MAX_PATHS 64

struct conn {
	int fd;
	char buf[ST_LINE_MAX * 4];
	size_t len;
};

struct path_state {
	char path[256];
	long long max_token;
	char owner[160]; /* "CLIENT SECTION" of the section that brought max_token */
};

static struct conn conns[MAX_CONNS];
static int nconns;
static struct path_state paths[MAX_PATHS];
static int npaths;
static FILE *logf;
static long accepted, rejected;
static volatile sig_atomic_t done;

static void on_signal(int sig)
{
	(void)sig;
	done = 1;
}

static struct path_state *path_state(const char *path)
{
	for (int i = 0; i < npaths; i++)
		if (strcmp(paths[i].path, path) == 0)
			return &paths[i];
	if (npaths == MAX_PATHS || strlen(path) >= sizeof paths[0].path)
		return NULL;
	struct path_state *p = &paths[npaths++];
	snprintf(p->path, sizeof p->path, "%s", path);
	p->max_token = -1;
	p->owner[0] = 0;
	return p;
}

static void send_reply(struct conn *c, char r)
{
	char out[2] = {r, '\n'};
	/* Two bytes on a blocking Unix socket whose peer waits for them: no short write. */
	if (write(c->fd, out, 2) != 2) {
		/* The peer is gone (killed worker); its connection closes on the next poll. */
	}
}

/* Handles one complete line (without its newline). */
static void handle(struct conn *c, char *line)
{
	int64_t rt = st_now_ns();
	if (line[0] == 'W' && line[1] == ' ') {
		char path[256], client[128], kind[8];
		long long token, at;
		long sec;
		if (sscanf(line + 2, "%255s %lld %127s %ld %7s %lld", path, &token, client, &sec,
		           kind, &at) != 6) {
			fprintf(logf, "N %" PRId64 " resource bad-line %s\n", rt, line);
			send_reply(c, 'R');
			return;
		}
		struct path_state *p = path_state(path);
		char owner[160];
		snprintf(owner, sizeof owner, "%s %ld", client, sec);
		const char *why = NULL;
		if (!p)
			why = "too-many-paths";
		else if (token > p->max_token) {
			p->max_token = token;
			snprintf(p->owner, sizeof p->owner, "%s", owner);
		} else if (token == p->max_token) {
			if (strcmp(p->owner, owner) != 0)
				why = "reuse";
		} else {
			why = "stale";
		}
		if (why) {
			rejected++;
			fprintf(logf, "R %" PRId64 " %s %lld %s %ld %s %lld %s\n", rt, path, token, client,
			        sec, kind, at, why);
			send_reply(c, 'R');
		} else {
			accepted++;
			fprintf(logf, "A %" PRId64 " %s %lld %s %ld %s %lld\n", rt, path, token, client,
			        sec, kind, at);
			send_reply(c, 'A');
		}
	} else if ((line[0] == 'N' || line[0] == 'H') && line[1] == ' ') {
		fprintf(logf, "%c %" PRId64 " %s\n", line[0], rt, line + 2);
	} else {
		fprintf(logf, "N %" PRId64 " resource bad-line %s\n", rt, line);
	}
}

static void drop(int i)
{
	close(conns[i].fd);
	conns[i] = conns[--nconns];
}

static void usage(void)
{
	fprintf(stderr, "usage: " PROG " --socket SOCK --log FILE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"log", required_argument, NULL, 'l'},
		{NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *log = NULL;
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': sock = optarg; break;
		case 'l': log = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || !sock || !log)
		usage();

	logf = fopen(log, "a");
	if (!logf)
		st_die(PROG, "%s: %s", log, strerror(errno));
	setvbuf(logf, NULL, _IOLBF, 0);

	/* No SA_RESTART: a signal makes poll() return, and the loop sees `done`. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		st_die(PROG, "socket: %s", strerror(errno));
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(sock) >= sizeof addr.sun_path)
		st_die(PROG, "socket path too long: %s", sock);
	strcpy(addr.sun_path, sock);
	unlink(sock);
	if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 64) != 0)
		st_die(PROG, "bind/listen %s: %s", sock, strerror(errno));

	struct pollfd pfd[MAX_CONNS + 1];
	while (!done) {
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < nconns; i++)
			pfd[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
		int n = poll(pfd, (nfds_t)nconns + 1, 1000);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			st_die(PROG, "poll: %s", strerror(errno));
		}
		/* Connections first, in index order; a dropped one swaps the last into its slot,
		 * so walk backwards to keep pfd[] and conns[] in step. */
		for (int i = nconns - 1; i >= 0; i--) {
			if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct conn *c = &conns[i];
			ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1);
			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				drop(i);
				continue;
			}
			c->len += (size_t)r;
			char *start = c->buf, *nl;
			while ((nl = memchr(start, '\n', c->len - (size_t)(start - c->buf)))) {
				*nl = 0;
				handle(c, start);
				start = nl + 1;
			}
			c->len -= (size_t)(start - c->buf);
			memmove(c->buf, start, c->len);
			if (c->len == sizeof c->buf - 1) {
				fprintf(logf, "N %" PRId64 " resource line-too-long\n", st_now_ns());
				drop(i);
			}
		}
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				if (nconns == MAX_CONNS) {
					close(fd);
				} else {
					conns[nconns].fd = fd;
					conns[nconns].len = 0;
					nconns++;
				}
			}
		}
	}
	fclose(logf);
	unlink(sock);
	fprintf(stderr, "resource: %ld accepted, %ld rejected\n", accepted, rejected);
	return 0;
}
