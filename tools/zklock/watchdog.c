/* The watchdog between zklock and its command.
 *
 * Design notes.
 *
 * zklock holds the lock (the ZooKeeper session) and its command does the work; if zklock
 * is killed, stopped or stuck, the lock's loss cannot be acted on by zklock. The watchdog
 * is a second, small process that knows only the moment until which the lock is certainly
 * still ours (the session's loss deadline: the send time of the last answered request
 * plus loss_percent of the session timeout) and the moment the server may expire the
 * session. zklock renews both as heartbeats are answered. The watchdog ends the command's
 * process group:
 *
 *   - when the loss deadline passes without renewal: the kill signal (and SIGCONT, so that
 *     a stopped command acts on it), then SIGKILL at loss + grace, or halfway to the
 *     expiry if that is sooner, so that the group is gone before anyone else can hold;
 *   - when zklock goes away (the pipe's write end closes, which the kernel does however
 *     zklock dies): SIGKILL at once, since nothing tends the lock any more.
 *
 * It is forked from zklock, which has threads, and never execs: from the fork on it calls
 * only async-signal-safe functions and allocates nothing. It blocks every signal (SIGKILL
 * and SIGSTOP cannot be), closes every descriptor but its pipe (the ZooKeeper socket must
 * die with zklock), and leaves zklock's session and process group (setsid), so that a
 * signal or a hang-up meant for zklock's group does not reach it. If it is killed
 * itself, zklock sees it (SIGCHLD) and kills the group; the command's leader also dies
 * with zklock (PR_SET_PDEATHSIG in run_command). What is left unprotected is said in
 * zklock(1): every process killed at once, or the whole group stopped.
 *
 * The pipe (a socket pair) carries fixed-size records: {loss, expiry} renews; loss < 0
 * means stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "watchdog.h"

struct record {
	int64_t loss_ms;
	int64_t expiry_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* When SIGKILL follows the kill signal sent at loss. */
static int64_t kill_time(int64_t loss, int64_t expiry, int grace_ms)
{
	int64_t at = loss + grace_ms;
	int64_t half = loss + (expiry - loss) / 2;
	return half < at ? half : at;
}

/* The watchdog process. Async-signal-safe calls only. */
static void __attribute__((noreturn))
watchdog_main(int fd, pid_t pgid, int sig, int grace_ms, struct record r)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	(void)setsid();
	(void)prctl(PR_SET_PDEATHSIG, 0);
	(void)prctl(PR_SET_NAME, "zklock-watchdog");
	/* Keep the pipe as descriptor 0, /dev/null as 1 and 2, nothing else. */
	if (fd != 0) {
		if (dup2(fd, 0) < 0)
			_exit(WATCHDOG_QUIET);
	}
	(void)close_range(1, ~0U, 0);
	int null = open("/dev/null", O_WRONLY);
	if (null >= 0 && null != 1)
		(void)dup2(null, 1);
	(void)dup2(1, 2);

	bool sent = false, killed = false;
	int64_t kill_at = 0;
	for (;;) {
		int64_t now = now_ms();
		if (!sent && now >= r.loss_ms) {
			kill(-pgid, sig);
			kill(-pgid, SIGCONT);
			sent = true;
			kill_at = kill_time(r.loss_ms, r.expiry_ms, grace_ms);
		}
		if (sent && !killed && now >= kill_at) {
			kill(-pgid, SIGKILL);
			killed = true;
		}
		int timeout = -1;
		if (!killed) {
			int64_t next = sent ? kill_at : r.loss_ms;
			int64_t wait = next - now;
			timeout = wait > 60000 ? 60000 : wait < 0 ? 0 : (int)wait;
		}
		struct pollfd p = { .fd = 0, .events = POLLIN };
		int n = poll(&p, 1, timeout);
		if (n <= 0)
			continue;
		struct record in;
		ssize_t got = read(0, &in, sizeof in);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			/* zklock is gone: nothing tends the lock any more. */
			kill(-pgid, SIGKILL);
			_exit(WATCHDOG_ORPHANED);
		}
		if (got != (ssize_t)sizeof in)
			continue; /* records are written whole; never happens */
		if (in.loss_ms < 0)
			_exit(sent ? WATCHDOG_ENFORCED : WATCHDOG_QUIET);
		if (!sent)
			r = in;
	}
}

int watchdog_start(struct watchdog *wd, pid_t pgid, int kill_signal, int kill_grace_ms,
                   int64_t loss_ms, int64_t expiry_ms)
{
	wd->pid = 0;
	wd->fd = -1;
	/* A socket pair rather than a pipe: a record sent to a dead watchdog must fail with
	 * EPIPE (MSG_NOSIGNAL), not kill zklock with SIGPIPE; and its records keep their
	 * boundaries. */
	int p[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0)
		return errno;
	struct record r = { loss_ms, expiry_ms };
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (pid == 0) {
		close(p[1]);
		watchdog_main(p[0], pgid, kill_signal, kill_grace_ms, r);
	}
	close(p[0]);
	wd->pid = pid;
	wd->fd = p[1];
	return 0;
}

static void send_record(struct watchdog *wd, struct record r)
{
	if (wd->fd < 0)
		return;
	ssize_t w;
	do
		w = send(wd->fd, &r, sizeof r, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
}

void watchdog_renew(struct watchdog *wd, int64_t loss_ms, int64_t expiry_ms)
{
	send_record(wd, (struct record){ loss_ms, expiry_ms });
}

static int verdict_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WATCHDOG_DIED;
}

int watchdog_poll(struct watchdog *wd)
{
	if (wd->pid <= 0)
		return WATCHDOG_DIED;
	int status;
	pid_t r = waitpid(wd->pid, &status, WNOHANG);
	if (r == 0)
		return 1;
	wd->pid = 0;
	return r > 0 ? verdict_of(status) : WATCHDOG_DIED;
}

int watchdog_stop(struct watchdog *wd)
{
	int verdict = WATCHDOG_DIED;
	if (wd->pid > 0) {
		send_record(wd, (struct record){ -1, -1 });
		int status;
		pid_t r;
		do
			r = waitpid(wd->pid, &status, 0);
		while (r < 0 && errno == EINTR);
		verdict = r == wd->pid ? verdict_of(status) : WATCHDOG_DIED;
		wd->pid = 0;
	}
	if (wd->fd >= 0)
		close(wd->fd);
	wd->fd = -1;
	return verdict;
}
