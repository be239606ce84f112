/* The command.
 *
 * It runs in its own process group, so that one kill() reaches everything it started.
 * When zklock is in the foreground of a terminal, that group is made the terminal's
 * foreground group (otherwise an interactive command would be stopped by SIGTTIN), and
 * if the command is then stopped from the terminal (Ctrl-Z), zklock stops itself too so
 * that the shell sees the job stopped, and resumes the command when continued. Between
 * fork and exec the child calls only async-signal-safe functions (the parent has
 * threads), and gets back the signal mask and the ignored/default dispositions that
 * zklock started with; its environment (with the fencing token) is built before the
 * fork. (posix_spawn would be simpler, but glibc's leaves its two internal signals
 * ignored in the command.)
 *
 * On loss the watchdog (watchdog.c) sends --kill-signal (SIGTERM) to the command's group
 * and SIGKILL --kill-grace seconds (10) later, before the server can expire the session;
 * a loss by a deleted node, which keeps nobody out, gets DELETED_KILL_GRACE_MS at most;
 * on revocation (zklock revoke, SIGUSR1) and past --max-runtime zklock does, with the
 * full grace. Past --warn-after it says so once. With systemd's NOTIFY_SOCKET, READY=1
 * goes out once the command's exec has succeeded. */
#include "zklock.h"
#include "watchdog.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- the command ---- */

/* A descriptor of the terminal whose foreground process group is ours, or -1. */
static int foreground_tty(void)
{
	pid_t pg = getpgrp();
	for (int fd = 0; fd <= 2; fd++)
		if (isatty(fd) && tcgetpgrp(fd) == pg)
			return fd;
	return -1;
}

static bool have_tty(void)
{
	return isatty(0) || isatty(1) || isatty(2);
}

/* Makes pgrp the foreground group of the terminal fd. SIGTTOU is blocked meanwhile:
 * a background group that calls tcsetpgrp() gets it otherwise. */
static void set_foreground(int fd, pid_t pgrp)
{
	sigset_t ttou, old;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &ttou, &old);
	(void)tcsetpgrp(fd, pgrp);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* If a terminal's foreground group is the command's, gives it back to ours. */
static void reclaim_tty(pid_t child)
{
	for (int fd = 0; fd <= 2; fd++)
		if (isatty(fd) && tcgetpgrp(fd) == child)
			set_foreground(fd, getpgrp());
}

/* What the child restores before exec: zklock's signal mask and which signals were
 * ignored when it started (ignored dispositions survive exec; the library may ignore
 * SIGPIPE, for example). Written before the first thread starts, read-only after. */
sigset_t orig_mask;
bool orig_ignored[NSIG];

/* In the child, between fork and exec: async-signal-safe calls only (the parent has
 * threads). Reports an exec error as its errno on err_fd. */
static void __attribute__((noreturn))
exec_child(char **cmd, char **envp, int tty_fd, int err_fd, pid_t parent)
{
	setpgid(0, 0);
	/* The command's leader dies with zklock, however zklock dies; the watchdog ends the
	 * rest of the group. If zklock died before this call, nothing would tell us. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(EXIT_SOFTWARE);
	if (tty_fd >= 0) {
		/* The group is in the background until this call, which would stop us. */
		sigset_t ttou;
		sigemptyset(&ttou);
		sigaddset(&ttou, SIGTTOU);
		sigprocmask(SIG_BLOCK, &ttou, NULL);
		(void)tcsetpgrp(tty_fd, getpid());
	}
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = orig_ignored[sig] ? SIG_IGN : SIG_DFL;
		sigemptyset(&sa.sa_mask);
		(void)sigaction(sig, &sa, NULL); /* fails harmlessly for reserved signals */
	}
	sigprocmask(SIG_SETMASK, &orig_mask, NULL);
	execvpe(cmd[0], cmd, envp);
	int e = errno;
	ssize_t w = write(err_fd, &e, sizeof e);
	(void)w;
	_exit(e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
}

/* The command was stopped (Ctrl-Z, or reading the terminal from the background): stop
 * zklock too, so that the shell sees its job stopped, and resume the command when
 * zklock is continued. Called without st.mu. */
static void relay_stop(pid_t child, int sig)
{
	if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
		return; /* a plain SIGSTOP from someone: leave it to them */
	if (!have_tty())
		return;
	reclaim_tty(child);
	kill(getpid(), SIGSTOP);
	/* Continued: by "fg" (the terminal is ours again) or "bg". */
	int fd = foreground_tty();
	if (fd >= 0)
		set_foreground(fd, child);
	kill(-child, SIGCONT);
}

/* Whether the environment entry e sets the variable name. */
static bool sets(const char *e, const char *name)
{
	size_t nl = strlen(name);
	return strncmp(e, name, nl) == 0 && e[nl] == '=';
}

/* The command's environment: ours, with NAME=token and, if previous is not NULL,
 * ZKLOCK_PREVIOUS=previous (an inherited one is dropped either way: it would speak of
 * another lock), and the "NAME=value" strings of extra (--schedule's ZKLOCK_SLOT,
 * ZKLOCK_MISSED, ZKLOCK_MISSED_FROM, which replace inherited ones; without them, those
 * pass through, so that a zklock nested in a scheduled one hands its command the
 * slot). Freed with free()
 * (one block of pointers; the strings are environ's and extra's, but for the one added,
 * *added, which holds both added variables). */
static char **command_env(const char *name, int64_t token, const char *previous,
                          const char *const *extra, char **added)
{
	size_t n = 0, nl = strlen(name), ne = 0;
	while (environ[n])
		n++;
	while (extra && extra[ne])
		ne++;
	char **envp = malloc((n + 3 + ne) * sizeof *envp);
	size_t size = nl + 32 + sizeof PREVIOUS_ENV "=" + (previous ? strlen(previous) : 0);
	char *var = malloc(size);
	if (!envp || !var) {
		free(envp);
		free(var);
		return NULL;
	}
	int len = snprintf(var, size, "%s=%lld", name, (long long)token);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!sets(environ[i], name) && !sets(environ[i], PREVIOUS_ENV) &&
		    !(ne > 0 && (sets(environ[i], SLOT_ENV) || sets(environ[i], MISSED_ENV) ||
		                 sets(environ[i], MISSED_FROM_ENV))))
			envp[k++] = environ[i];
	envp[k++] = var;
	if (previous) {
		char *pv = var + len + 1;
		snprintf(pv, size - (size_t)len - 1, "%s=%s", PREVIOUS_ENV, previous);
		envp[k++] = pv;
	}
	for (size_t i = 0; i < ne; i++)
		envp[k++] = (char *)extra[i];
	envp[k] = NULL;
	*added = var;
	return envp;
}

static bool before(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* Runs the command while the lock is held. */
struct outcome run_command(const struct opts *o, struct lock *lk)
{
	struct outcome out = { .status = EXIT_SOFTWARE, .code = -1 };
	char *var = NULL;
	/* The command starts only with a real fencing token, on a session short of its loss
	 * deadline; the watchdog enforces that deadline from then on. */
	const int64_t token = zkl_lock_token(lk->l);
	zkl_deadlines dl;
	zkl_client_deadlines(lk->c, &dl);
	const bool alive = token > 0 && dl.session_id != 0 && zkl_monotonic_ms() < dl.loss_ms;
	char **envp = command_env(o->token_env, token, lk->previous, lk->extra_env, &var);
	int errpipe[2];
	if (!envp) {
		msg("out of memory");
		set_phase(PH_DONE);
		return out;
	}
	if (pipe2(errpipe, O_CLOEXEC) != 0) {
		msg("pipe: %s", strerror(errno));
		free(envp);
		free(var);
		set_phase(PH_DONE);
		return out;
	}
	int tty_fd = foreground_tty();

	/* Under st.mu from fork until the group exists and the phase says so, so that
	 * every signal either comes before (and stops us here) or goes to the group. */
	pthread_mutex_lock(&st.mu);
	if (!alive)
		st.lost = true;
	if (st.lost || st.signal != 0 || st.revoked) {
		out.lost = st.lost;
		out.revoked = st.revoked;
		int sig = st.signal;
		st.phase = PH_DONE;
		pthread_mutex_unlock(&st.mu);
		close(errpipe[0]);
		close(errpipe[1]);
		free(envp);
		free(var);
		out.status = out.lost ? EXIT_SOFTWARE : out.revoked ? EXIT_REVOKED : 128 + sig;
		if (out.lost)
			msg("lock on %s lost", o->path);
		return out;
	}
	const pid_t self = getpid();
	pid_t pid = fork();
	if (pid == 0)
		exec_child(o->cmd, envp, tty_fd, errpipe[1], self);
	if (pid < 0) {
		int e = errno;
		st.phase = PH_DONE;
		pthread_mutex_unlock(&st.mu);
		close(errpipe[0]);
		close(errpipe[1]);
		free(envp);
		free(var);
		msg("fork: %s", strerror(e));
		return out;
	}
	(void)setpgid(pid, pid); /* the child does it too; whichever comes first */
	st.child = pid;
	st.phase = PH_RUNNING;
	struct watchdog wd;
	int wd_err = watchdog_start(&wd, pid, o->kill_signal, o->kill_grace_ms, dl.loss_ms,
	                            dl.expiry_ms);
	if (wd_err != 0)
		kill(-pid, SIGKILL); /* no command runs unwatched */
	pthread_mutex_unlock(&st.mu);
	free(envp);
	free(var);
	out.ran = true;
	if (wd_err != 0)
		msg("cannot start the watchdog of %s: %s; %s killed", o->cmd[0], strerror(wd_err),
		    o->cmd[0]);
	else if (o->verbose)
		msg("watchdog %ld: %s's group ends at the loss deadline, in %lld ms unless renewed",
		    (long)wd.pid, o->cmd[0], (long long)(dl.loss_ms - zkl_monotonic_ms()));
	if (wd_err == 0)
		deadline_publish(o->path, &dl);
	/* How often the deadlines are passed on: heartbeats move them every sixth of the
	 * session timeout. */
	int renew_ms = zkl_client_session_timeout(lk->c) / 20;
	renew_ms = renew_ms < 20 ? 20 : renew_ms > 200 ? 200 : renew_ms;

	/* The pipe closes on exec; an errno on it means exec failed (the child then exits
	 * 126 or 127, as a shell would). */
	close(errpipe[1]);
	int child_errno;
	ssize_t r;
	do
		r = read(errpipe[0], &child_errno, sizeof child_errno);
	while (r < 0 && errno == EINTR);
	close(errpipe[0]);
	if (r == (ssize_t)sizeof child_errno) {
		msg("cannot run %s: %s", o->cmd[0], strerror(child_errno));
	} else if (notify_enabled()) {
		char since[40];
		struct timespec wall;
		clock_gettime(CLOCK_REALTIME, &wall);
		format_utc(since, sizeof since, (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000);
		notify("READY=1\nSTATUS=holding %s%s since %s, fencing token %lld; running %s "
		       "(pid %ld)", lock_what(lk), o->path, since, (long long)token, o->cmd[0],
		       (long)pid);
	}
	const struct timespec started = now();
	const struct timespec warn_at = plus_ms(started, o->warn_after_ms);
	const struct timespec max_at = plus_ms(started, o->max_runtime_ms);

	/* Wait for the command; SIGCHLD (via the signal thread), loss and revocation wake us,
	 * and the deadlines are passed on to the watchdog as they move. On loss the watchdog
	 * stops the group (kill signal, then SIGKILL before the server can expire the
	 * session); on revocation (the lock is still ours) zklock does, with the full grace. */
	int wst = 0;
	bool exited = false, term_sent = false, kill_sent = false, loss_told = false;
	bool wd_dead = wd_err != 0;
	struct timespec kill_at = { 0, 0 };
	pthread_mutex_lock(&st.mu);
	for (;;) {
		pid_t w = waitpid(pid, &wst, WNOHANG | WUNTRACED);
		if (w == pid && WIFSTOPPED(wst)) {
			pthread_mutex_unlock(&st.mu);
			relay_stop(pid, WSTOPSIG(wst));
			pthread_mutex_lock(&st.mu);
			continue;
		}
		if (w == pid) {
			exited = true;
			break;
		}
		if (w < 0 && errno != EINTR) {
			msg("waitpid: %s", strerror(errno));
			break;
		}
		if (!wd_dead && watchdog_poll(&wd) != 1) {
			/* Someone killed the watchdog: the group must not run on unwatched. Its
			 * socket goes too (a --requeue loop would gather them). */
			wd_dead = true;
			watchdog_stop(&wd);
			msg("the watchdog of %s died: killing %s", o->path, o->cmd[0]);
			kill(-pid, SIGKILL);
			kill_sent = true;
		}
		if (st.lost && !loss_told) {
			msg("lock on %s lost", o->path);
			loss_told = true;
			int64_t now = zkl_monotonic_ms();
			/* A silence or an expiry: the session keeps everyone else out until the
			 * server expires it, and SIGKILL comes halfway there at the latest. A
			 * deleted node keeps nobody out (the next holder heard of it as we did, and
			 * may run already): SIGKILL comes DELETED_KILL_GRACE_MS after the signal at
			 * the latest, time for a command that acts on it to end. The watchdog takes
			 * SIGKILL halfway to the expiry it is given. */
			int64_t expiry = dl.expiry_ms;
			if (st.node_gone) {
				int g = o->kill_grace_ms < DELETED_KILL_GRACE_MS ? o->kill_grace_ms
				                                                 : DELETED_KILL_GRACE_MS;
				expiry = now + 2 * (int64_t)g;
				msg("its node was deleted while held, and the next holder may run already: "
				    "SIGKILL follows signal %d in %d ms at the latest", o->kill_signal, g);
			}
			if (o->verbose) {
				/* The watchdog's schedule; an expiry already past means at once. */
				int64_t k = now + o->kill_grace_ms, half = now + (expiry - now) / 2;
				int64_t at = half < k ? half : k;
				if (at < now)
					at = now;
				if (st.node_gone)
					msg("sending signal %d to process group %ld; SIGKILL in %lld ms",
					    o->kill_signal, (long)pid, (long long)(at - now));
				else
					msg("sending signal %d to process group %ld; SIGKILL in %lld ms, "
					    "%lld ms before the server may expire the session", o->kill_signal,
					    (long)pid, (long long)(at - now), (long long)(dl.expiry_ms - at));
			}
			if (!wd_dead) {
				watchdog_renew(&wd, now, expiry);
			} else if (!kill_sent) {
				kill(-pid, SIGKILL);
				kill_sent = true;
			}
		}
		if (st.revoked && !st.lost && !term_sent) {
			msg("revocation of %s asked: stopping %s", o->path, o->cmd[0]);
			if (o->verbose)
				msg("sending signal %d to process group %ld; SIGKILL in %.3g s",
				    o->kill_signal, (long)pid, o->kill_grace_ms / 1000.0);
			kill(-pid, o->kill_signal);
			term_sent = true;
			kill_at = after_ms(o->kill_grace_ms);
			/* A stopped command would not act on it. */
			kill(-pid, SIGCONT);
		}
		if (o->warn_after_ms && !out.warned && reached(warn_at)) {
			out.warned = true;
			msg("%s has run for more than %.3g s (--warn-after), holding %s", o->cmd[0],
			    o->warn_after_ms / 1000.0, o->path);
		}
		if (o->max_runtime_ms && !out.max_runtime && !st.lost && reached(max_at)) {
			out.max_runtime = true;
			if (!term_sent) {
				msg("%s ran past --max-runtime (%.3g s): stopping it", o->cmd[0],
				    o->max_runtime_ms / 1000.0);
				if (o->verbose)
					msg("sending signal %d to process group %ld; SIGKILL in %.3g s",
					    o->kill_signal, (long)pid, o->kill_grace_ms / 1000.0);
				kill(-pid, o->kill_signal);
				kill(-pid, SIGCONT);
				term_sent = true;
				kill_at = after_ms(o->kill_grace_ms);
			}
		}
		if (term_sent && !kill_sent && reached(kill_at)) {
			kill(-pid, SIGKILL);
			kill_sent = true;
		}
		struct timespec until = after_ms(renew_ms);
		if (term_sent && !kill_sent && before(kill_at, until))
			until = kill_at;
		if (o->warn_after_ms && !out.warned && before(warn_at, until))
			until = warn_at;
		if (o->max_runtime_ms && !out.max_runtime && before(max_at, until))
			until = max_at;
		pthread_cond_timedwait(&st.cond, &st.mu, &until);
		if (!st.lost && !wd_dead) {
			pthread_mutex_unlock(&st.mu);
			zkl_deadlines nd;
			zkl_client_deadlines(lk->c, &nd);
			if (nd.session_id == dl.session_id && nd.loss_ms > dl.loss_ms) {
				dl = nd;
				watchdog_renew(&wd, dl.loss_ms, dl.expiry_ms);
				deadline_publish(o->path, &dl);
			}
			pthread_mutex_lock(&st.mu);
		}
	}
	deadline_unpublish();
	if (!wd_dead && watchdog_stop(&wd) == WATCHDOG_ENFORCED && !st.lost) {
		/* The deadline passed before zklock could act (it was stopped or stuck, or the
		 * library's report is still on its way): the lock is not ours any more. */
		st.lost = true;
		if (o->verbose)
			msg("the watchdog ended %s at the loss deadline", o->cmd[0]);
	}
	if (wd_dead && !st.lost)
		out.status = EXIT_SOFTWARE;
	out.lost = st.lost;
	out.revoked = st.revoked && !st.lost;
	if (out.lost && !loss_told)
		msg("lock on %s lost", o->path);
	st.phase = PH_DONE;
	pthread_mutex_unlock(&st.mu);
	reclaim_tty(pid);

	if (wd_dead && !out.lost)
		return out; /* EXIT_SOFTWARE: the command was killed for want of a watchdog */
	if (exited && WIFEXITED(wst))
		out.status = out.code = WEXITSTATUS(wst);
	else if (exited && WIFSIGNALED(wst))
		out.status = 128 + (out.sig = WTERMSIG(wst));
	return out;
}

