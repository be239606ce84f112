/* zklock: run a command while holding a zkl_mutex, flock(1) across machines.
 *
 *   zklock [options] PATH -- COMMAND [ARG...]
 *   zklock status [options] PATH
 *
 * Design notes
 *
 * Threads. Before any other thread exists, main blocks SIGINT, SIGTERM, SIGHUP and
 * SIGCHLD (and SIGTTOU, see run_lock) and starts the signal thread, so every thread the
 * library starts later inherits the blocked mask and the signal thread is the only one
 * that ever takes those signals (with sigwaitinfo). It never does real work in a signal handler: there are
 * none. What it does depends on the phase main has reached, which both read under
 * `st.lock`:
 *
 *   CONNECTING  nothing exists on the server yet: _exit(128+N) at once, so that Ctrl-C
 *               does not wait for the connect timeout.
 *   WAITING     record the signal and call zkl_mutex_cancel(); main's acquire returns
 *               ZKL_ECANCELED with our node withdrawn, and main exits 128+N. The cancel
 *               is repeated every 50 ms until main leaves this phase, because a cancel
 *               that lands just before acquire starts waiting would be lost.
 *   HELD        acquired, command not started: record it; main releases and exits.
 *   RUNNING     pass the signal on to the command's process group.
 *   DONE        ignore it: the command has finished and the lock is being released.
 *   EXIT        main wants the thread to return (it sends SIGCHLD to wake it).
 *
 * SIGCHLD only wakes main, which waits for the command on `st.cond` (not in waitpid) so
 * that the lost callback, which runs on the library's event thread, can wake it as well:
 * on loss main sends SIGTERM to the command's group and SIGKILL 10 s later.
 *
 * The command runs in its own process group, so that one kill() reaches everything it
 * started. When zklock is in the foreground of a terminal, that group is made the
 * terminal's foreground group (otherwise an interactive command would be stopped by
 * SIGTTIN), and if the command is then stopped from the terminal (Ctrl-Z), zklock stops
 * itself too so that the shell sees the job stopped, and resumes the command when
 * continued. Between fork and exec the child calls only async-signal-safe functions
 * (the parent has threads), and gets back the signal mask and the ignored/default
 * dispositions that zklock started with. (posix_spawn would be simpler, but glibc's
 * leaves its two internal signals ignored in the command.)
 */
#include <zklocks/zklocks.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Exit codes, as sysexits.h and a shell have them. */
enum {
	EXIT_USAGE = 64,       /* EX_USAGE */
	EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: no ZooKeeper server answered */
	EXIT_SOFTWARE = 70,    /* EX_SOFTWARE: ZooKeeper or internal failure, lock lost */
	EXIT_NOEXEC = 126,     /* the command exists but cannot be executed */
	EXIT_NOTFOUND = 127,   /* the command was not found */
};

#define DEFAULT_SERVERS "127.0.0.1:2181"
#define KILL_DELAY_S 10 /* SIGTERM, then SIGKILL this much later, when the lock is lost */

enum {
	OPT_SESSION_TIMEOUT = 256,
	OPT_CONNECT_TIMEOUT,
	OPT_VERSION,
};

static const char short_opts[] = "+:s:w:nE:vh";
static const struct option long_opts[] = {
	{ "servers", required_argument, NULL, 's' },
	{ "wait", required_argument, NULL, 'w' },
	{ "timeout", required_argument, NULL, 'w' }, /* flock(1)'s name for -w */
	{ "nonblock", no_argument, NULL, 'n' },
	{ "conflict-exit-code", required_argument, NULL, 'E' },
	{ "session-timeout", required_argument, NULL, OPT_SESSION_TIMEOUT },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

struct opts {
	const char *servers;
	int wait_ms;            /* ZKL_WAIT_FOREVER, 0 (try once) or a bound */
	double wait_s;          /* as given, for messages */
	int conflict_code;
	int session_timeout_ms; /* 0: the library's default */
	int connect_timeout_ms; /* 0: the library's default */
	int verbose;
	bool help, version, status;
	const char *path;
	char **cmd; /* NULL-terminated, points into argv */
};

enum phase { PH_CONNECTING, PH_WAITING, PH_HELD, PH_RUNNING, PH_DONE, PH_EXIT };

/* Shared between main, the signal thread and the lost callback; all under `lock`. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* SIGCHLD arrived, or the lock was lost */
	enum phase phase;
	int signal;  /* first SIGINT/SIGTERM/SIGHUP received before the command ran */
	bool lost;   /* the lost callback fired */
	pid_t child; /* the command, leader of its own process group (RUNNING) */
	zkl_mutex *m;
} st = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* What the child restores before exec: zklock's signal mask and which signals were
 * ignored when it started (ignored dispositions survive exec; the library may ignore
 * SIGPIPE, for example). Written before the first thread starts, read-only after. */
static sigset_t orig_mask;
static bool orig_ignored[NSIG];

/* ---- messages ---- */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	flockfile(stderr);
	fputs("zklock: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
	va_end(ap);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	flockfile(stderr);
	fputs("zklock: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\nTry 'zklock --help' for more information.\n", stderr);
	funlockfile(stderr);
	va_end(ap);
	return EXIT_USAGE;
}

static void print_usage(void)
{
	fputs(
	    "Usage: zklock [options] PATH -- COMMAND [ARG...]\n"
	    "       zklock status [options] PATH\n"
	    "\n"
	    "Runs COMMAND while holding the ZooKeeper lock PATH, a fair mutex shared across\n"
	    "processes and machines (waiters are served in arrival order), releases it when\n"
	    "COMMAND exits, and exits with COMMAND's status.\n"
	    "\n"
	    "Options:\n"
	    "  -s, --servers HOSTS         ZooKeeper servers, host:port[,host:port...][/chroot]\n"
	    "                              (default: $ZKLOCK_SERVERS, else " DEFAULT_SERVERS ")\n"
	    "  -w, --wait, --timeout SECONDS\n"
	    "                              give up if the lock is not acquired within SECONDS\n"
	    "                              (decimals allowed; 0 tries once); default: wait\n"
	    "                              as long as it takes\n"
	    "  -n, --nonblock              do not wait if the lock is held; the same as -w 0\n"
	    "  -E, --conflict-exit-code N  exit status when the lock was not acquired in time\n"
	    "                              (0..255, default 1)\n"
	    "      --session-timeout MS    ZooKeeper session timeout (default 10000)\n"
	    "      --connect-timeout MS    how long to try to connect (default 5000)\n"
	    "  -v, --verbose               report on stderr who holds the lock while waiting,\n"
	    "                              and when it is acquired (with its fencing token)\n"
	    "  -h, --help                  show this help and exit\n"
	    "      --version               show the version and exit\n"
	    "\n"
	    "zklock status PATH prints the queue of the lock PATH, holder first, one line per\n"
	    "node: the node's path, a tab, and its data (\"<hostname>:<pid>\" for zklock and\n"
	    "zklocks; a backslash is written \\\\ and other bytes than printable ASCII \\xHH).\n"
	    "No line: the lock is free.\n"
	    "\n"
	    "SIGINT, SIGTERM or SIGHUP while waiting withdraws from the queue (exit 128+N);\n"
	    "while COMMAND runs they are passed on to its process group. If the lock is lost\n"
	    "while COMMAND runs (the ZooKeeper session expired), COMMAND's group gets SIGTERM,\n"
	    "and SIGKILL 10 s later, and zklock exits 70.\n"
	    "\n"
	    "Exit status:\n"
	    "  COMMAND's status, or 128+N if it was killed by signal N\n"
	    "  1 (or -E N)  the lock was not acquired in time\n"
	    "  64           usage error (bad option, number or path)\n"
	    "  69           no ZooKeeper server could be reached\n"
	    "  70           ZooKeeper or internal failure, or the lock was lost\n"
	    "  126, 127     COMMAND could not be executed / was not found\n"
	    "  128+N        zklock got signal N while waiting for the lock\n",
	    stdout);
}

/* Writes up to outsz-1 bytes of a printable form of data into out: printable ASCII as
 * is, a backslash as "\\", anything else as "\xHH"; "..." marks a cut. */
static void printable(char *out, size_t outsz, const char *data, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];
		char tmp[5];
		int n;
		if (ch == '\\')
			n = snprintf(tmp, sizeof tmp, "\\\\");
		else if (ch >= 0x20 && ch < 0x7f)
			n = snprintf(tmp, sizeof tmp, "%c", ch);
		else
			n = snprintf(tmp, sizeof tmp, "\\x%02x", ch);
		if (o + (size_t)n + 4 > outsz) {
			if (o + 4 <= outsz) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, tmp, (size_t)n);
		o += (size_t)n;
	}
	out[o] = '\0';
}

/* Full-length variant for `zklock status`: writes straight to f. */
static void print_printable(FILE *f, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)data[i];
		if (ch == '\\')
			fputs("\\\\", f);
		else if (ch >= 0x20 && ch < 0x7f)
			fputc(ch, f);
		else
			fprintf(f, "\\x%02x", ch);
	}
}

/* ---- option parsing ---- */

/* A decimal integer in [min, max], nothing else. */
static bool parse_int(const char *s, long min, long max, int *out)
{
	if (*s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
		return false;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

/* Non-negative seconds, digits with at most one '.', to whole milliseconds (rounded
 * up, so that 0.0001 waits rather than tries once). */
static bool parse_seconds(const char *s, double *secs, int *ms)
{
	int digits = 0, dots = 0;
	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			dots++;
		else
			return false;
	}
	if (digits == 0 || dots > 1)
		return false;
	double v = strtod(s, NULL);
	if (!(v >= 0.0) || v > (double)(INT_MAX / 1000))
		return false;
	double msd = v * 1000.0;
	int m = (int)msd;
	if ((double)m < msd)
		m++;
	*secs = v;
	*ms = m;
	return true;
}

/* Parses options of argv[1..argc-1] with getopt_long, from scratch (optind = 0). In
 * `permute` mode options and operands may be mixed; otherwise parsing stops at the
 * first operand. Sets *next to the index of the first operand left. Returns 0 or an
 * exit code (usage error already reported). */
static int parse_opts(int argc, char **argv, bool permute, struct opts *o, int *next)
{
	optind = 0; /* glibc: start over, also resetting the state of a previous scan */
	opterr = 0;
	const char *shorts = permute ? short_opts + 1 : short_opts;
	int c;
	while ((c = getopt_long(argc, argv, shorts, long_opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (*optarg == '\0')
				return usage_error("empty server list");
			o->servers = optarg;
			break;
		case 'w':
			if (!parse_seconds(optarg, &o->wait_s, &o->wait_ms))
				return usage_error("invalid wait \"%s\": expected seconds >= 0, "
				                   "such as 10 or 0.5", optarg);
			break;
		case 'n':
			o->wait_s = 0;
			o->wait_ms = 0;
			break;
		case 'E':
			if (!parse_int(optarg, 0, 255, &o->conflict_code))
				return usage_error("invalid conflict exit code \"%s\": expected "
				                   "0..255", optarg);
			break;
		case OPT_SESSION_TIMEOUT:
			if (!parse_int(optarg, 1, INT_MAX, &o->session_timeout_ms))
				return usage_error("invalid session timeout \"%s\": expected "
				                   "milliseconds > 0", optarg);
			break;
		case OPT_CONNECT_TIMEOUT:
			if (!parse_int(optarg, 1, INT_MAX, &o->connect_timeout_ms))
				return usage_error("invalid connect timeout \"%s\": expected "
				                   "milliseconds > 0", optarg);
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			o->help = true;
			break;
		case OPT_VERSION:
			o->version = true;
			break;
		case ':':
			return usage_error("option '%s' requires an argument", argv[optind - 1]);
		default: /* '?' */
			if (optopt != 0 && optopt < 256)
				return usage_error("invalid option -- '%c'", optopt);
			return usage_error("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	*next = optind;
	return 0;
}

/* Fills o from argv. Returns 0, or an exit code after reporting a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	const char *env = getenv("ZKLOCK_SERVERS");
	o->servers = env != NULL && *env != '\0' ? env : DEFAULT_SERVERS;
	o->wait_ms = ZKL_WAIT_FOREVER;
	o->wait_s = -1;
	o->conflict_code = 1;

	int next, rc = parse_opts(argc, argv, false, o, &next);
	if (rc != 0)
		return rc;
	if (o->help || o->version)
		return 0;

	if (next < argc && strcmp(argv[next], "status") == 0) {
		/* "status" is never a lock path (those are absolute). Its own options may come
		 * before or after PATH; argv[next] stands in for argv[0]. */
		o->status = true;
		int sub_argc = argc - next, sub_next;
		char **sub_argv = argv + next;
		rc = parse_opts(sub_argc, sub_argv, true, o, &sub_next);
		if (rc != 0)
			return rc;
		if (o->help || o->version)
			return 0;
		if (sub_next >= sub_argc)
			return usage_error("missing lock path");
		if (sub_next + 1 < sub_argc)
			return usage_error("unexpected argument \"%s\" after the lock path",
			                   sub_argv[sub_next + 1]);
		o->path = sub_argv[sub_next];
		if (o->path[0] != '/')
			return usage_error("lock path \"%s\" is not absolute: it must start "
			                   "with '/'", o->path);
		return 0;
	}

	if (next >= argc)
		return usage_error("missing lock path");
	o->path = argv[next++];

	/* Options between PATH and "--" ("zklock /locks/x -w 5 -- cmd") are taken too. Only
	 * when a "--" follows: without it everything after PATH is the command, as in flock. */
	if (next < argc && argv[next][0] == '-' && strcmp(argv[next], "--") != 0) {
		int dash = -1;
		for (int i = next + 1; i < argc; i++) {
			if (strcmp(argv[i], "--") == 0) {
				dash = i;
				break;
			}
		}
		if (dash > 0) {
			/* argv[next-1] (PATH) stands in for argv[0]. */
			int sub_argc = dash - next + 1, sub_next;
			rc = parse_opts(sub_argc, argv + next - 1, false, o, &sub_next);
			if (rc != 0)
				return rc;
			if (o->help || o->version)
				return 0;
			if (sub_next < sub_argc)
				return usage_error("unexpected argument \"%s\" before \"--\"",
				                   argv[next - 1 + sub_next]);
			next = dash;
		}
	}
	if (next < argc && strcmp(argv[next], "--") == 0)
		next++;
	if (next >= argc)
		return usage_error("missing command to run after the lock path");
	o->cmd = argv + next;

	/* The library checks paths fully, but only once connected: catch the most likely
	 * slip ("zklock cmd ...") without a round trip. */
	if (o->path[0] != '/')
		return usage_error("lock path \"%s\" is not absolute: it must start with '/'",
		                   o->path);
	return 0;
}

/* ---- time ---- */

static struct timespec now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static double seconds_since(struct timespec t0)
{
	struct timespec t = now();
	return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

static bool reached(struct timespec deadline)
{
	struct timespec t = now();
	return t.tv_sec > deadline.tv_sec ||
	       (t.tv_sec == deadline.tv_sec && t.tv_nsec >= deadline.tv_nsec);
}

/* ---- the ZooKeeper side ---- */

static void log_to_stderr(zkl_log_level level, const char *message, void *data)
{
	(void)level;
	(void)data;
	msg("%s", message);
}

static void on_state(zkl_client *c, zkl_state state, void *data)
{
	(void)c;
	(void)data;
	msg("ZooKeeper connection %s", zkl_state_name(state));
}

static void on_lost(zkl_mutex *m, int reason, void *data)
{
	(void)m;
	(void)reason;
	(void)data;
	pthread_mutex_lock(&st.lock);
	st.lost = true;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.lock);
}

/* Opens the client. Returns 0 or an exit code after reporting. */
static int open_client(const struct opts *o, zkl_client **out)
{
	zkl_client_options co;
	zkl_client_options_init(&co);
	co.servers = o->servers;
	if (o->session_timeout_ms > 0)
		co.session_timeout_ms = o->session_timeout_ms;
	if (o->connect_timeout_ms > 0)
		co.connect_timeout_ms = o->connect_timeout_ms;
	co.log = log_to_stderr;
	co.log_level = o->verbose >= 2 ? ZKL_LOG_DEBUG : ZKL_LOG_WARN;

	int rc = zkl_client_open(out, &co);
	if (rc == 0) {
		if (o->verbose)
			msg("connected to %s (session 0x%llx, timeout %d ms)", o->servers,
			    (unsigned long long)zkl_client_session_id(*out),
			    zkl_client_session_timeout(*out));
		return 0;
	}
	*out = NULL;
	const char *detail = zkl_last_error();
	if (rc == ZKL_ECONNECT) {
		msg("cannot connect to ZooKeeper at %s: %s", o->servers,
		    *detail ? detail : zkl_strerror(rc));
		return EXIT_UNAVAILABLE;
	}
	if (rc == ZKL_EINVAL)
		return usage_error("invalid server list \"%s\": %s", o->servers,
		                   *detail ? detail : zkl_strerror(rc));
	msg("cannot open a ZooKeeper session with %s: %s%s%s", o->servers, zkl_strerror(rc),
	    *detail ? ": " : "", detail);
	return rc == ZKL_EAUTH ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
}

/* Makes the mutex. Returns 0 or an exit code after reporting. */
static int new_mutex(const struct opts *o, zkl_client *c, zkl_mutex **out)
{
	int rc = zkl_mutex_new(out, c, o->path);
	if (rc == 0)
		return 0;
	*out = NULL;
	const char *detail = zkl_last_error();
	if (rc == ZKL_EINVAL)
		return usage_error("invalid lock path \"%s\": %s", o->path,
		                   *detail ? detail : zkl_strerror(rc));
	msg("%s: %s", o->path, *detail ? detail : zkl_strerror(rc));
	return EXIT_SOFTWARE;
}

/* Who holds m, in printable form, into buf; false if nobody (or unknown). Sets *queued
 * to the number of nodes in the queue if queued is not NULL. */
static bool describe_holder(zkl_mutex *m, char *buf, size_t bufsz, size_t *queued)
{
	zkl_participant *list;
	size_t n;
	if (queued)
		*queued = 0;
	if (zkl_mutex_participants(m, &list, &n) != 0)
		return false;
	if (queued)
		*queued = n;
	/* The first holder; failing that (a race), the first in the queue. */
	size_t k = 0;
	while (k < n && !list[k].holder)
		k++;
	if (k == n)
		k = 0;
	if (n > 0)
		printable(buf, bufsz, list[k].data, (size_t)list[k].data_len);
	zkl_participants_free(list, n);
	return n > 0;
}

/* ---- the signal thread ---- */

static void *signal_thread(void *arg)
{
	const sigset_t *set = arg;
	bool retry = false;
	for (;;) {
		int sig;
		if (retry) {
			struct timespec ts = { 0, 50 * 1000 * 1000 };
			sig = sigtimedwait(set, NULL, &ts);
			if (sig < 0 && errno == EAGAIN)
				sig = 0;
		} else {
			sig = sigwaitinfo(set, NULL);
		}
		if (sig < 0)
			continue; /* EINTR */

		zkl_mutex *cancel = NULL;
		pthread_mutex_lock(&st.lock);
		if (st.phase == PH_EXIT) {
			pthread_mutex_unlock(&st.lock);
			return NULL;
		}
		if (sig == SIGCHLD) {
			pthread_cond_broadcast(&st.cond);
		} else if (sig != 0) {
			switch (st.phase) {
			case PH_CONNECTING:
				/* No lock node exists yet; nothing to withdraw. */
				_exit(128 + sig);
			case PH_WAITING:
			case PH_HELD:
				if (st.signal == 0)
					st.signal = sig;
				break;
			case PH_RUNNING:
				kill(-st.child, sig);
				break;
			case PH_DONE:
			case PH_EXIT:
				break;
			}
		}
		retry = st.phase == PH_WAITING && st.signal != 0;
		if (retry)
			cancel = st.m;
		pthread_mutex_unlock(&st.lock);
		/* Outside our lock: the library may take its own. st.m outlives this thread. */
		if (cancel)
			zkl_mutex_cancel(cancel);
	}
}

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

/* In the child, between fork and exec: async-signal-safe calls only (the parent has
 * threads). Reports an exec error as its errno on err_fd. */
static void __attribute__((noreturn)) exec_child(char **cmd, int tty_fd, int err_fd)
{
	setpgid(0, 0);
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
	execvp(cmd[0], cmd);
	int e = errno;
	ssize_t w = write(err_fd, &e, sizeof e);
	(void)w;
	_exit(e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC);
}

/* The command was stopped (Ctrl-Z, or reading the terminal from the background): stop
 * zklock too, so that the shell sees its job stopped, and resume the command when
 * zklock is continued. Called without st.lock. */
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

/* Runs the command while the lock is held. Returns zklock's exit status. */
static int run_command(const struct opts *o)
{
	int errpipe[2];
	if (pipe2(errpipe, O_CLOEXEC) != 0) {
		msg("pipe: %s", strerror(errno));
		return EXIT_SOFTWARE;
	}
	int tty_fd = foreground_tty();

	/* Under st.lock from fork until the group exists and the phase says so, so that
	 * every signal either comes before (and stops us here) or goes to the group. */
	pthread_mutex_lock(&st.lock);
	if (st.lost || st.signal != 0) {
		bool lost = st.lost;
		int sig = st.signal;
		st.phase = PH_DONE;
		pthread_mutex_unlock(&st.lock);
		close(errpipe[0]);
		close(errpipe[1]);
		if (lost) {
			msg("lock on %s lost", o->path);
			return EXIT_SOFTWARE;
		}
		return 128 + sig;
	}
	pid_t pid = fork();
	if (pid == 0)
		exec_child(o->cmd, tty_fd, errpipe[1]);
	if (pid < 0) {
		int e = errno;
		st.phase = PH_DONE;
		pthread_mutex_unlock(&st.lock);
		close(errpipe[0]);
		close(errpipe[1]);
		msg("fork: %s", strerror(e));
		return EXIT_SOFTWARE;
	}
	(void)setpgid(pid, pid); /* the child does it too; whichever comes first */
	st.child = pid;
	st.phase = PH_RUNNING;
	pthread_mutex_unlock(&st.lock);

	/* The pipe closes on exec; an errno on it means exec failed (the child then exits
	 * 126 or 127, as a shell would). */
	close(errpipe[1]);
	int child_errno;
	ssize_t r;
	do
		r = read(errpipe[0], &child_errno, sizeof child_errno);
	while (r < 0 && errno == EINTR);
	close(errpipe[0]);
	if (r == (ssize_t)sizeof child_errno)
		msg("cannot run %s: %s", o->cmd[0], strerror(child_errno));

	/* Wait for the command; SIGCHLD (via the signal thread) and loss wake us. */
	int wst = 0;
	bool exited = false, term_sent = false, kill_sent = false;
	struct timespec kill_at = { 0, 0 };
	pthread_mutex_lock(&st.lock);
	for (;;) {
		pid_t w = waitpid(pid, &wst, WNOHANG | WUNTRACED);
		if (w == pid && WIFSTOPPED(wst)) {
			pthread_mutex_unlock(&st.lock);
			relay_stop(pid, WSTOPSIG(wst));
			pthread_mutex_lock(&st.lock);
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
		if (st.lost && !term_sent) {
			msg("lock on %s lost", o->path);
			kill(-pid, SIGTERM);
			term_sent = true;
			kill_at = now();
			kill_at.tv_sec += KILL_DELAY_S;
			/* A stopped command would not act on SIGTERM. */
			kill(-pid, SIGCONT);
		}
		if (term_sent && !kill_sent && reached(kill_at)) {
			kill(-pid, SIGKILL);
			kill_sent = true;
		}
		if (term_sent && !kill_sent)
			pthread_cond_timedwait(&st.cond, &st.lock, &kill_at);
		else
			pthread_cond_wait(&st.cond, &st.lock);
	}
	bool lost = st.lost, lost_reported = term_sent;
	st.phase = PH_DONE;
	pthread_mutex_unlock(&st.lock);
	reclaim_tty(pid);

	int status = EXIT_SOFTWARE;
	if (exited && WIFEXITED(wst))
		status = WEXITSTATUS(wst);
	else if (exited && WIFSIGNALED(wst))
		status = 128 + WTERMSIG(wst);

	int rc = zkl_mutex_release(st.m);
	if (rc == ZKL_ELOST || lost) {
		if (!lost_reported)
			msg("lock on %s lost", o->path);
		return EXIT_SOFTWARE;
	}
	if (rc != 0) {
		/* The node goes with the session when the client closes. */
		const char *detail = zkl_last_error();
		msg("releasing %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "",
		    detail);
	} else if (o->verbose) {
		msg("released %s", o->path);
	}
	return status;
}

/* ---- the two modes ---- */

static int run_status(const struct opts *o)
{
	zkl_client *c = NULL;
	zkl_mutex *m = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	status = new_mutex(o, c, &m);
	if (status == 0) {
		zkl_participant *list;
		size_t n;
		int rc = zkl_mutex_participants(m, &list, &n);
		if (rc == 0) {
			for (size_t i = 0; i < n; i++) {
				fputs(list[i].path, stdout);
				fputc('\t', stdout);
				print_printable(stdout, list[i].data, (size_t)list[i].data_len);
				fputc('\n', stdout);
			}
			zkl_participants_free(list, n);
			if (fflush(stdout) != 0) {
				msg("writing the queue: %s", strerror(errno));
				status = EXIT_SOFTWARE;
			}
		} else {
			const char *detail = zkl_last_error();
			msg("listing %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "",
			    detail);
			status = rc == ZKL_EINVAL ? EXIT_USAGE : EXIT_SOFTWARE;
		}
	}
	zkl_mutex_free(m);
	zkl_client_close(c);
	return status;
}

/* Acquires the lock. Returns true when held; otherwise false with *status set to
 * zklock's exit status (which may be 0: -E 0), after reporting. */
static bool acquire(const struct opts *o, zkl_mutex *m, int *status)
{
	char holder[256];
	if (o->verbose && o->wait_ms != 0) {
		size_t queued;
		if (describe_holder(m, holder, sizeof holder, &queued))
			msg("waiting for %s: held by %s, %zu ahead", o->path, holder, queued);
	}

	pthread_mutex_lock(&st.lock);
	st.phase = PH_WAITING;
	pthread_mutex_unlock(&st.lock);

	struct timespec t0 = now();
	int rc = zkl_mutex_acquire(m, o->wait_ms);
	const char *detail = zkl_last_error();
	char detail_copy[512];
	snprintf(detail_copy, sizeof detail_copy, "%s", detail);

	pthread_mutex_lock(&st.lock);
	st.phase = rc == 0 ? PH_HELD : PH_DONE;
	int sig = st.signal;
	pthread_mutex_unlock(&st.lock);

	if (rc == 0) {
		if (o->verbose)
			msg("acquired %s (fencing token %lld) after %.3f s", o->path,
			    (long long)zkl_mutex_token(m), seconds_since(t0));
		return true; /* a signal meanwhile is handled by run_command() */
	}
	if (sig != 0) {
		if (o->verbose)
			msg("interrupted by signal %d; withdrew from the queue of %s", sig,
			    o->path);
		*status = 128 + sig;
		return false;
	}
	switch (rc) {
	case ZKL_ETIMEDOUT:
		if (o->verbose && *detail_copy)
			msg("%s", detail_copy);
		if (describe_holder(m, holder, sizeof holder, NULL))
			msg("%s is held by %s; gave up after %g s", o->path, holder, o->wait_s);
		else
			msg("%s is busy; gave up after %g s", o->path, o->wait_s);
		*status = o->conflict_code;
		break;
	case ZKL_EINVAL:
		*status = usage_error("invalid lock path \"%s\": %s", o->path,
		                      *detail_copy ? detail_copy : zkl_strerror(rc));
		break;
	case ZKL_ECONNLOSS:
		msg("lost the connection to %s while waiting for %s", o->servers, o->path);
		*status = EXIT_UNAVAILABLE;
		break;
	default:
		msg("cannot acquire %s: %s%s%s", o->path, zkl_strerror(rc),
		    *detail_copy ? ": " : "", detail_copy);
		*status = EXIT_SOFTWARE;
		break;
	}
	return false;
}

static int run_lock(const struct opts *o)
{
	/* Before any thread exists: every later thread inherits this mask. */
	sigset_t handled;
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGCHLD);
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0)
			orig_ignored[sig] = sa.sa_handler == SIG_IGN;
	}
	/* SIGTTOU is blocked too (but not waited for): a message that zklock writes while
	 * the command has the terminal must not stop zklock under "stty tostop". */
	sigset_t blocked = handled;
	sigaddset(&blocked, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &blocked, &orig_mask);

	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st.cond, &ca);
	pthread_condattr_destroy(&ca);
	st.phase = PH_CONNECTING;

	pthread_t sig_tid;
	int e = pthread_create(&sig_tid, NULL, signal_thread, &handled);
	if (e != 0) {
		msg("pthread_create: %s", strerror(e));
		pthread_cond_destroy(&st.cond);
		return EXIT_SOFTWARE;
	}

	zkl_client *c = NULL;
	zkl_mutex *m = NULL;
	int status = open_client(o, &c);
	if (status == 0 && o->verbose)
		zkl_client_add_listener(c, on_state, NULL);
	if (status == 0)
		status = new_mutex(o, c, &m);
	if (status == 0) {
		int rc = zkl_mutex_on_lost(m, on_lost, NULL);
		if (rc != 0) {
			msg("setting the lost callback: %s", zkl_strerror(rc));
			status = EXIT_SOFTWARE;
		}
	}
	if (status == 0) {
		pthread_mutex_lock(&st.lock);
		st.m = m;
		pthread_mutex_unlock(&st.lock);
		if (acquire(o, m, &status))
			status = run_command(o);
	}

	/* Stop the signal thread before freeing what it may touch (st.m). */
	pthread_mutex_lock(&st.lock);
	st.phase = PH_EXIT;
	pthread_mutex_unlock(&st.lock);
	pthread_kill(sig_tid, SIGCHLD);
	pthread_join(sig_tid, NULL);

	zkl_mutex_free(m); /* releases it if still held (a signal before the command ran) */
	if (c && o->verbose)
		zkl_client_remove_listener(c, on_state, NULL);
	zkl_client_close(c);
	pthread_cond_destroy(&st.cond);
	return status;
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	int status = parse_args(argc, argv, &o);
	if (status != 0)
		return status;
	if (o.help) {
		print_usage();
		return fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	}
	if (o.version) {
		printf("zklock (zklocks) %s\n", zkl_version());
		return fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	}
	return o.status ? run_status(&o) : run_lock(&o);
}
