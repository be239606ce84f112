/* systemd's service notification (sd_notify(3)), spoken directly: one datagram of
 * newline-separated "KEY=value" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a
 * path, or "@name" for an abstract socket). No library.
 *
 * What zklock sends (run.c, child.c): STATUS= while waiting (the holder, how many are
 * ahead) with EXTEND_TIMEOUT_USEC= every few seconds, so that a standby of a Type=notify
 * unit does not time out its start while it waits for the lock; READY=1 once the lock is
 * held and the command has been started (its exec succeeded), with STATUS= saying since
 * when and with which fencing token; STOPPING=1 before it exits. The variable is taken
 * out of the environment, so the command does not inherit it: only zklock, the unit's
 * main process, speaks for the unit. */
#include "zklock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int notify_fd = -1;
static struct sockaddr_un notify_addr;
static socklen_t notify_len;

bool notify_init(void)
{
	const char *e = getenv("NOTIFY_SOCKET");
	if (!e || !*e)
		return false;
	size_t n = strlen(e);
	memset(&notify_addr, 0, sizeof notify_addr);
	notify_addr.sun_family = AF_UNIX;
	if ((e[0] != '/' && e[0] != '@') || n >= sizeof notify_addr.sun_path) {
		msg("ignoring NOTIFY_SOCKET \"%s\": expected an absolute path or @name", e);
		unsetenv("NOTIFY_SOCKET");
		return false;
	}
	memcpy(notify_addr.sun_path, e, n);
	if (e[0] == '@')
		notify_addr.sun_path[0] = '\0'; /* abstract: no NUL at the end counts */
	notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	                         (e[0] == '@' ? 0 : 1));
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (notify_fd < 0)
		msg("cannot open a socket for NOTIFY_SOCKET: %s", strerror(errno));
	unsetenv("NOTIFY_SOCKET");
	return notify_fd >= 0;
}

bool notify_enabled(void)
{
	return notify_fd >= 0;
}

void notify(const char *fmt, ...)
{
	if (notify_fd < 0)
		return;
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof buf)
		n = sizeof buf - 1;
	ssize_t w;
	do
		w = sendto(notify_fd, buf, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&notify_addr,
		           notify_len);
	while (w < 0 && errno == EINTR);
}

void notify_close(void)
{
	if (notify_fd >= 0)
		close(notify_fd);
	notify_fd = -1;
}
