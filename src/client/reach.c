/* Why no session comes up: while zkl_client_open() waits for its first session, it looks
 * at the servers itself now and then, with a TCP connect of its own to every address of
 * every server. A server whose every address refuses the connection has nothing listening:
 * open gives up at once and says so, instead of waiting out the connect timeout. A port
 * that accepts the connection but never answers the C client is told apart from one that
 * could not be reached at all, so that the message names what happened. */
#include "reach.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

/* At most this many addresses are looked at in one round. */
#define REACH_MAX_FDS 16
/* The first look comes this long after open starts (a healthy server has answered by
 * then), the next ones this far apart. */
#define REACH_FIRST_MS 100
#define REACH_EVERY_MS 100
/* How long one round waits for its connects. */
#define REACH_ROUND_MS 100
/* Refused this many rounds in a row: nothing listens (a server in the middle of a
 * restart gets a moment to come back). */
#define REACH_REFUSED_ROUNDS 3

enum conn { PENDING, CONNECTED, REFUSED, FAILED };

struct round {
	struct pollfd pfd[REACH_MAX_FDS]; /* fd -1 once its connect has ended */
	int fd[REACH_MAX_FDS];
	enum conn st[REACH_MAX_FDS];
	int n;
};

static void ended(struct round *r, int i, int err)
{
	r->st[i] = err == 0 ? CONNECTED : err == ECONNREFUSED ? REFUSED : FAILED;
	r->pfd[i].fd = -1;
}

/* Starts a non-blocking connect to every address of "host:port"; false if the name does
 * not resolve or has no address to try. */
static bool start_server(struct round *r, const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
		return false;
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	char *h = host;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') { /* [::1]:2181 */
		h[strlen(h) - 1] = '\0';
		h++;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	if (getaddrinfo(h, colon + 1, &hints, &res) != 0)
		return false;
	bool any = false;
	for (struct addrinfo *a = res; a && r->n < REACH_MAX_FDS; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		                a->ai_protocol);
		if (fd < 0)
			continue;
		int i = r->n++;
		any = true;
		r->fd[i] = fd;
		r->pfd[i] = (struct pollfd){.fd = fd, .events = POLLOUT};
		r->st[i] = PENDING;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			ended(r, i, 0);
		else if (errno != EINPROGRESS)
			ended(r, i, errno);
	}
	freeaddrinfo(res);
	return any;
}

/* One round: every address of every server. */
static enum zkl_reach_result look(const char *servers)
{
	struct round r = {.n = 0};
	bool unresolved = false;
	char *list = strdup(servers);
	if (!list)
		return ZKL_REACH_UNKNOWN;
	list[strcspn(list, "/")] = '\0'; /* the chroot */
	char *save = NULL;
	for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save))
		unresolved |= !start_server(&r, s);
	free(list);

	/* Wait for every connect to end, or for the round's time. */
	int64_t until = zkl__now_ms() + REACH_ROUND_MS;
	for (;;) {
		int pending = 0;
		for (int i = 0; i < r.n; i++)
			pending += r.st[i] == PENDING;
		int64_t left = until - zkl__now_ms();
		if (pending == 0 || left <= 0)
			break;
		if (poll(r.pfd, (nfds_t)r.n, (int)left) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < r.n; i++) {
			if (r.st[i] != PENDING || !r.pfd[i].revents)
				continue;
			int err = 0;
			socklen_t len = sizeof err;
			if (getsockopt(r.fd[i], SOL_SOCKET, SO_ERROR, &err, &len) != 0)
				err = errno;
			ended(&r, i, err);
		}
	}
	int accepted = 0, refused = 0;
	for (int i = 0; i < r.n; i++) {
		accepted += r.st[i] == CONNECTED;
		refused += r.st[i] == REFUSED;
		close(r.fd[i]);
	}
	if (accepted > 0)
		return ZKL_REACH_ACCEPTED;
	if (r.n > 0 && refused == r.n && !unresolved)
		return ZKL_REACH_REFUSED;
	return ZKL_REACH_UNKNOWN;
}

void zkl__reach_init(struct zkl_reach *r)
{
	memset(r, 0, sizeof *r);
	r->next_ms = zkl__now_ms() + REACH_FIRST_MS;
}

bool zkl__reach_step(struct zkl_reach *r, const char *servers)
{
	if (zkl__now_ms() < r->next_ms)
		return false;
	enum zkl_reach_result res = look(servers);
	if (res == ZKL_REACH_ACCEPTED)
		r->accepted = true;
	r->refused_rounds = res == ZKL_REACH_REFUSED ? r->refused_rounds + 1 : 0;
	r->next_ms = zkl__now_ms() + REACH_EVERY_MS;
	return r->refused_rounds >= REACH_REFUSED_ROUNDS;
}
