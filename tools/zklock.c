/* zklock: run a command while holding a ZooKeeper lock, flock(1) across machines.
 *
 *   zklock [options] PATH -- COMMAND [ARG...]
 *   zklock status [options] PATH
 *   zklock list [options] PREFIX
 *   zklock revoke [options] PATH
 *
 * Design notes
 *
 * Modes. The lock is a zkl_mutex (default), one half of a zkl_rwlock (--read, --write),
 * one lease of a zkl_semaphore (--semaphore N) or leadership of a zkl_leader (--leader,
 * Curator's LeaderLatch layout). `struct lock` hides which: the first three are used
 * through their zkl_lock view (acquire, cancel, release, token, participants, and a lost
 * callback that sets st.lost), the leader through zkl_leader_*.
 *
 * Threads. Before any other thread exists, main blocks SIGINT, SIGTERM, SIGHUP and
 * SIGCHLD (and SIGTTOU, see run_lock) and starts the signal thread, so every thread the
 * library starts later inherits the blocked mask and the signal thread is the only one
 * that ever takes those signals (with sigwaitinfo). There are no signal handlers. What
 * the signal thread does depends on the phase main has reached, which both read under
 * `st.mu`:
 *
 *   CONNECTING  nothing exists on the server yet: _exit(128+N) at once, so that Ctrl-C
 *               does not wait for the connect timeout.
 *   WAITING     record the signal and cancel the acquire (for a leader: close the latch);
 *               main's acquire returns with our node withdrawn, and main exits 128+N. The
 *               cancel is repeated every 50 ms until main leaves this phase, because a
 *               cancel that lands just before acquire starts waiting would be lost.
 *               `st.canceling` keeps main from freeing the handle meanwhile.
 *   HELD        acquired, command not started: record it; main releases and exits.
 *   RUNNING     pass the signal on to the command's process group.
 *   DONE        record it (a --requeue loop then stops), nothing else.
 *   EXIT        main wants the thread to return (it sends SIGCHLD to wake it).
 *
 * SIGCHLD only wakes main, which waits for the command on `st.cond` (not in waitpid) so
 * that the lost and revoke callbacks, which run on library threads, can wake it as well:
 * on loss or revocation main sends --kill-signal (SIGTERM) to the command's group and
 * SIGKILL --kill-grace seconds (10) later.
 *
 * The command runs in its own process group, so that one kill() reaches everything it
 * started. When zklock is in the foreground of a terminal, that group is made the
 * terminal's foreground group (otherwise an interactive command would be stopped by
 * SIGTTIN), and if the command is then stopped from the terminal (Ctrl-Z), zklock stops
 * itself too so that the shell sees the job stopped, and resumes the command when
 * continued. Between fork and exec the child calls only async-signal-safe functions
 * (the parent has threads), and gets back the signal mask and the ignored/default
 * dispositions that zklock started with; its environment (with the fencing token) is
 * built before the fork. (posix_spawn would be simpler, but glibc's leaves its two
 * internal signals ignored in the command.)
 *
 * Looking at the tree. `status` and `revoke` read queues through the library's
 * zkl_lock_participants(). `list` walks a folder, and `--once-per` keeps its record node,
 * with a plain ZooKeeper handle of their own (the library has no API for arbitrary nodes).
 *
 * --once-per compares server times only: the creation time (ctime) of our lock node, which
 * is when our cron line fired as far as ZooKeeper is concerned, with the one recorded by
 * the last successful run. Host clocks never enter it.
 */
#include <zklocks/zklocks.h>
#include <zookeeper/zookeeper.h>

#include "watchdog.h"

#include <ctype.h>
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Exit codes, as sysexits.h and a shell have them. */
enum {
	EXIT_USAGE = 64,       /* EX_USAGE */
	EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: no ZooKeeper server answered */
	EXIT_SOFTWARE = 70,    /* EX_SOFTWARE: ZooKeeper or internal failure, lock lost */
	EXIT_REVOKED = 71,     /* the lock was revoked (zklock revoke) */
	EXIT_NOEXEC = 126,     /* the command exists but cannot be executed */
	EXIT_NOTFOUND = 127,   /* the command was not found */
};

#define DEFAULT_SERVERS "127.0.0.1:2181"
#define DEFAULT_KILL_GRACE_MS 10000
#define DEFAULT_TOKEN_ENV "ZKLOCK_TOKEN"
#define SYSTEM_CONFIG "/etc/zklock.conf"

enum {
	OPT_SESSION_TIMEOUT = 256,
	OPT_LOSS_PERCENT,
	OPT_CONNECT_TIMEOUT,
	OPT_VERSION,
	OPT_READ,
	OPT_WRITE,
	OPT_SEMAPHORE,
	OPT_LEADER,
	OPT_REQUEUE,
	OPT_REVOCABLE,
	OPT_KILL_SIGNAL,
	OPT_KILL_GRACE,
	OPT_TOKEN_ENV,
	OPT_ONCE_PER,
	OPT_JSON,
	OPT_NAMING,
	OPT_DATA,
};

static const char short_opts[] = "+:s:w:nE:c:qvh";
static const struct option long_opts[] = {
	{ "servers", required_argument, NULL, 's' },
	{ "wait", required_argument, NULL, 'w' },
	{ "timeout", required_argument, NULL, 'w' }, /* flock(1)'s name for -w */
	{ "nonblock", no_argument, NULL, 'n' },
	{ "conflict-exit-code", required_argument, NULL, 'E' },
	{ "session-timeout", required_argument, NULL, OPT_SESSION_TIMEOUT },
	{ "loss-percent", required_argument, NULL, OPT_LOSS_PERCENT },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "read", no_argument, NULL, OPT_READ },
	{ "shared", no_argument, NULL, OPT_READ },      /* flock(1)'s name for --read */
	{ "write", no_argument, NULL, OPT_WRITE },
	{ "exclusive", no_argument, NULL, OPT_WRITE },  /* flock(1)'s name for --write */
	{ "command", required_argument, NULL, 'c' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "semaphore", required_argument, NULL, OPT_SEMAPHORE },
	{ "leader", no_argument, NULL, OPT_LEADER },
	{ "requeue", no_argument, NULL, OPT_REQUEUE },
	{ "revocable", no_argument, NULL, OPT_REVOCABLE },
	{ "kill-signal", required_argument, NULL, OPT_KILL_SIGNAL },
	{ "kill-grace", required_argument, NULL, OPT_KILL_GRACE },
	{ "token-env", required_argument, NULL, OPT_TOKEN_ENV },
	{ "once-per", required_argument, NULL, OPT_ONCE_PER },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "naming", required_argument, NULL, OPT_NAMING },
	{ "data", required_argument, NULL, OPT_DATA },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

enum mode { MODE_MUTEX, MODE_READ, MODE_WRITE, MODE_SEMAPHORE, MODE_LEADER };
enum command { CMD_RUN, CMD_STATUS, CMD_LIST, CMD_REVOKE };

struct opts {
	const char *servers;    /* as given (command line, environment, config, default) */
	char *servers_buf;      /* servers with the config's chroot appended, if any */
	const char *chroot;     /* from the config file */
	const char *auth;       /* "user:password", from the config file */
	int wait_ms;            /* ZKL_WAIT_FOREVER, 0 (try once) or a bound */
	double wait_s;          /* as given, for messages */
	int conflict_code;
	int session_timeout_ms; /* 0: the library's default */
	int loss_percent;       /* 0: the library's default */
	int connect_timeout_ms; /* 0: the library's default */
	int verbose;
	bool quiet;             /* -q: nothing on a busy lock or a run already done */
	const char *shell_cmd;  /* -c: the command, for /bin/sh -c */
	char *sh_argv[4];
	bool help, version, json;
	enum command command;
	enum mode mode;
	int modes;              /* how many mode options were given */
	int sem_max;
	bool requeue, revocable;
	zkl_naming naming;      /* node names: curator (default) or kazoo */
	const char *data;       /* --data: what our node says, or NULL ("<host>:<pid>") */
	int kill_signal;
	int kill_grace_ms;
	const char *token_env;
	long once_per_s;        /* 0: off */
	const char *path;
	char **cmd;             /* NULL-terminated, points into argv */
};

/* Storage for the config file's values (they outlive parsing). */
static char *config_strings[16];
static int nconfig_strings;

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
	    "       zklock [options] PATH -c STRING\n"
	    "       zklock status [options] PATH\n"
	    "       zklock list [options] PREFIX\n"
	    "       zklock revoke [options] PATH\n"
	    "\n"
	    "Runs COMMAND while holding the ZooKeeper lock PATH, shared across processes and\n"
	    "machines (waiters are served in arrival order), releases it when COMMAND exits,\n"
	    "and exits with COMMAND's status.\n"
	    "\n"
	    "What to hold (one of; default: a mutex):\n"
	    "      --read, --shared        the read half of a read-write lock (shared)\n"
	    "      --write, --exclusive    the write half of a read-write lock (exclusive)\n"
	    "      --semaphore N           one lease of a semaphore of N leases\n"
	    "      --leader                leadership of an election (Curator's LeaderLatch)\n"
	    "      --requeue               with --leader: join the election again each time\n"
	    "                              COMMAND exits (stop zklock with a signal)\n"
	    "\n"
	    "Options:\n"
	    "  -s, --servers HOSTS         ZooKeeper servers, host:port[,host:port...][/chroot]\n"
	    "                              (default: $ZKLOCK_SERVERS, else the config file,\n"
	    "                              else " DEFAULT_SERVERS ")\n"
	    "  -w, --wait, --timeout SECONDS\n"
	    "                              give up if the lock is not acquired within SECONDS\n"
	    "                              (decimals allowed; 0 tries once); default: wait\n"
	    "                              as long as it takes\n"
	    "  -n, --nonblock              do not wait if the lock is held; the same as -w 0\n"
	    "  -c, --command STRING        run STRING with /bin/sh -c (instead of -- COMMAND)\n"
	    "  -q, --quiet                 say nothing when the lock is busy or --once-per finds\n"
	    "                              the job done (the exit status still says it); errors\n"
	    "                              are still reported\n"
	    "  -E, --conflict-exit-code N  exit status when the lock was not acquired in time\n"
	    "                              (0..255, default 1)\n"
	    "      --once-per INTERVAL     run COMMAND at most once per INTERVAL (seconds, or\n"
	    "                              with a unit: 90s, 5m, 1h, 1d) across every host that\n"
	    "                              runs this line; the others exit 0\n"
	    "      --naming curator|kazoo  name our nodes as Curator (default) or kazoo does, to\n"
	    "                              join a path that kazoo's Lock / ReadLock use\n"
	    "      --data TEXT             what our node says, shown by `zklock status` (default\n"
	    "                              <host>:<pid>; not with --leader or --revocable)\n"
	    "      --revocable             let `zklock revoke PATH` ask for the lock: COMMAND\n"
	    "                              then gets --kill-signal and zklock exits 71\n"
	    "      --kill-signal SIG       sent to COMMAND when the lock is lost or revoked\n"
	    "                              (name or number; default TERM)\n"
	    "      --kill-grace SECONDS    then SIGKILL this much later (default 10; on loss,\n"
	    "                              no later than halfway to the session's expiry)\n"
	    "      --token-env NAME        the environment variable that gives COMMAND the\n"
	    "                              fencing token (default " DEFAULT_TOKEN_ENV ")\n"
	    "      --session-timeout MS    ZooKeeper session timeout (default 10000)\n"
	    "      --loss-percent N        give the lock up for lost after N% of the session\n"
	    "                              timeout without an answer (50..100, default 90)\n"
	    "      --connect-timeout MS    how long to try to connect (default 5000)\n"
	    "      --json                  status, list: print JSON\n"
	    "  -v, --verbose               report on stderr who holds the lock and our place in\n"
	    "                              the queue while waiting (again when it changes), and\n"
	    "                              when it is acquired (with its fencing token)\n"
	    "  -h, --help                  show this help and exit\n"
	    "      --version               show the version and exit\n"
	    "\n"
	    "zklock status PATH prints every node queued at PATH, in queue order, for every\n"
	    "layout found there (mutex, read-write lock, semaphore leases/ and locks/, leader\n"
	    "latch, kazoo's locks), one line per node with tab-separated fields: node path,\n"
	    "data, role (holder, waiting, leader, lease, gate), layout, host, pid, since (node\n"
	    "creation, UTC), fencing token, and for a holder that is a zklock of ours on this\n"
	    "host the time left to the deadline its watchdog enforces (e.g. 3412ms). A field\n"
	    "that does not apply is \"-\". In data a backslash is written \\\\ and other bytes\n"
	    "than printable ASCII \\xHH. No line: free.\n"
	    "zklock list PREFIX prints one line per lock in use under PREFIX: path, layout,\n"
	    "holders, waiting, the first holder's data.\n"
	    "zklock revoke PATH asks the holder of PATH to let go (Curator's revocation); it\n"
	    "exits 0 if the holder was revocable and was asked, 1 if it is not revocable or\n"
	    "nobody holds PATH; with -w it waits until the holder has let go.\n"
	    "\n"
	    "Configuration: $ZKLOCK_CONFIG, else " SYSTEM_CONFIG " and then\n"
	    "~/.config/zklock.conf, lines of \"key = value\" (servers, chroot, session_timeout,\n"
	    "loss_percent, connect_timeout, auth = user:password); $ZKLOCK_SERVERS beats them,\n"
	    "options beat all.\n"
	    "\n"
	    "SIGINT, SIGTERM or SIGHUP while waiting withdraws from the queue (exit 128+N);\n"
	    "while COMMAND runs they are passed on to its process group. If the lock is lost\n"
	    "while COMMAND runs (ZooKeeper answered nothing for 90% of the session timeout),\n"
	    "COMMAND's group gets --kill-signal, and SIGKILL --kill-grace seconds later but\n"
	    "before the server can expire the session, and zklock exits 70. A watchdog process\n"
	    "does the same if zklock is stopped or stuck, and kills the group at once if\n"
	    "zklock dies.\n"
	    "\n"
	    "Exit status:\n"
	    "  COMMAND's status, or 128+N if it was killed by signal N\n"
	    "  0            --once-per: it already ran in this interval\n"
	    "  1 (or -E N)  the lock was not acquired in time\n"
	    "  64           usage error (bad option, number or path)\n"
	    "  69           no ZooKeeper server could be reached\n"
	    "  70           ZooKeeper or internal failure, or the lock was lost\n"
	    "  71           the lock was revoked (--revocable)\n"
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

/* Full-length variant: writes straight to f. */
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

/* A JSON string: valid UTF-8 passes through (control characters escaped); any other byte
 * becomes \u00XX. */
static void print_json_string(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		unsigned char ch = p[i];
		if (ch == '"' || ch == '\\') {
			fputc('\\', f);
			fputc(ch, f);
			i++;
		} else if (ch < 0x20 || ch == 0x7f) {
			fprintf(f, "\\u%04x", ch);
			i++;
		} else if (ch < 0x80) {
			fputc(ch, f);
			i++;
		} else {
			/* A UTF-8 sequence: 2 to 4 bytes, the first one saying how many. */
			size_t n = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
			if (ch >= 0xf5)
				n = 0;
			bool ok = n > 0 && i + n <= len;
			for (size_t k = 1; ok && k < n; k++)
				ok = (p[i + k] & 0xc0) == 0x80;
			if (ok) {
				fwrite(p + i, 1, n, f);
				i += n;
			} else {
				fprintf(f, "\\u%04x", ch);
				i++;
			}
		}
	}
	fputc('"', f);
}

static void print_json_cstr(FILE *f, const char *s)
{
	if (s)
		print_json_string(f, s, strlen(s));
	else
		fputs("null", f);
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

/* An interval: a positive whole number of seconds, or of s, m, h or d. */
static bool parse_interval(const char *s, long *secs)
{
	if (!isdigit((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || v <= 0)
		return false;
	long long unit = 1;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		unit = 60, end++;
	else if (*end == 'h')
		unit = 3600, end++;
	else if (*end == 'd')
		unit = 86400, end++;
	if (*end != '\0' || v > 100LL * 365 * 86400 / unit)
		return false;
	*secs = (long)(v * unit);
	return true;
}

static const struct {
	const char *name;
	int sig;
} signal_names[] = {
	{ "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "PIPE", SIGPIPE },
};

/* A signal: a name with or without "SIG" (any case), or a number 1..NSIG-1. */
static bool parse_signal(const char *s, int *sig)
{
	if (isdigit((unsigned char)*s))
		return parse_int(s, 1, NSIG - 1, sig);
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++) {
		if (strcasecmp(s, signal_names[i].name) == 0) {
			*sig = signal_names[i].sig;
			return true;
		}
	}
	return false;
}

/* An environment variable name: a letter or '_', then letters, digits and '_'. */
static bool valid_env_name(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
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
		case OPT_LOSS_PERCENT:
			if (!parse_int(optarg, 50, 100, &o->loss_percent))
				return usage_error("invalid loss percent \"%s\": expected 50..100 (%% "
				                   "of the session timeout)", optarg);
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
		case OPT_READ:
		case OPT_WRITE:
		case OPT_LEADER:
			o->mode = c == OPT_READ ? MODE_READ : c == OPT_WRITE ? MODE_WRITE : MODE_LEADER;
			o->modes++;
			break;
		case OPT_SEMAPHORE:
			if (!parse_int(optarg, 1, INT_MAX, &o->sem_max))
				return usage_error("invalid semaphore size \"%s\": expected a number "
				                   "of leases >= 1", optarg);
			o->mode = MODE_SEMAPHORE;
			o->modes++;
			break;
		case OPT_REQUEUE:
			o->requeue = true;
			break;
		case OPT_REVOCABLE:
			o->revocable = true;
			break;
		case OPT_KILL_SIGNAL:
			if (!parse_signal(optarg, &o->kill_signal))
				return usage_error("invalid kill signal \"%s\": expected a name such "
				                   "as TERM or INT, or a number", optarg);
			break;
		case OPT_KILL_GRACE: {
			double s;
			if (!parse_seconds(optarg, &s, &o->kill_grace_ms))
				return usage_error("invalid kill grace \"%s\": expected seconds >= 0",
				                   optarg);
			break;
		}
		case OPT_TOKEN_ENV:
			if (!valid_env_name(optarg))
				return usage_error("invalid environment variable name \"%s\" for "
				                   "--token-env", optarg);
			o->token_env = optarg;
			break;
		case OPT_ONCE_PER:
			if (!parse_interval(optarg, &o->once_per_s))
				return usage_error("invalid interval \"%s\" for --once-per: expected "
				                   "seconds > 0, or a number with s, m, h or d "
				                   "(such as 1h)", optarg);
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_NAMING:
			if (strcmp(optarg, "curator") == 0)
				o->naming = ZKL_NAMING_CURATOR;
			else if (strcmp(optarg, "kazoo") == 0)
				o->naming = ZKL_NAMING_KAZOO;
			else
				return usage_error("invalid --naming \"%s\": expected curator or kazoo",
				                   optarg);
			break;
		case OPT_DATA:
			if (strlen(optarg) > 4096)
				return usage_error("--data is %zu bytes long: at most 4096", strlen(optarg));
			o->data = optarg;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'c':
			o->shell_cmd = optarg;
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

/* ---- the config file ---- */

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

static const char *keep_string(const char *s)
{
	if (nconfig_strings >= (int)(sizeof config_strings / sizeof config_strings[0]))
		return NULL;
	char *copy = strdup(s);
	if (copy)
		config_strings[nconfig_strings++] = copy;
	return copy;
}

/* Reads a config file into o. A missing file is fine unless `required`. Returns 0 or an
 * exit code after reporting. */
static int read_config(const char *file, bool required, struct opts *o)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		if (errno == ENOENT && !required)
			return 0;
		return usage_error("cannot read the config file %s: %s", file, strerror(errno));
	}
	char line[4096];
	int lineno = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		lineno++;
		char *s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = usage_error("%s:%d: expected \"key = value\"", file, lineno);
			break;
		}
		*eq = '\0';
		char *key = trim(s), *value = trim(eq + 1);
		size_t vl = strlen(value);
		if (vl >= 2 && (value[0] == '"' || value[0] == '\'') && value[vl - 1] == value[0]) {
			value[vl - 1] = '\0';
			value++;
		}
		for (char *k = key; *k; k++)
			if (*k == '-')
				*k = '_';
		if (strcmp(key, "servers") == 0) {
			if (!*value)
				rc = usage_error("%s:%d: empty server list", file, lineno);
			else
				o->servers = keep_string(value);
		} else if (strcmp(key, "chroot") == 0) {
			if (value[0] != '/' || (value[1] != '\0' && value[strlen(value) - 1] == '/'))
				rc = usage_error("%s:%d: chroot \"%s\" must be an absolute path", file,
				                 lineno, value);
			else
				o->chroot = keep_string(value);
		} else if (strcmp(key, "session_timeout") == 0) {
			if (!parse_int(value, 1, INT_MAX, &o->session_timeout_ms))
				rc = usage_error("%s:%d: invalid session timeout \"%s\": expected "
				                 "milliseconds > 0", file, lineno, value);
		} else if (strcmp(key, "loss_percent") == 0) {
			if (!parse_int(value, 50, 100, &o->loss_percent))
				rc = usage_error("%s:%d: invalid loss percent \"%s\": expected 50..100",
				                 file, lineno, value);
		} else if (strcmp(key, "connect_timeout") == 0) {
			if (!parse_int(value, 1, INT_MAX, &o->connect_timeout_ms))
				rc = usage_error("%s:%d: invalid connect timeout \"%s\": expected "
				                 "milliseconds > 0", file, lineno, value);
		} else if (strcmp(key, "auth") == 0) {
			if (strncmp(value, "digest:", 7) == 0)
				value += 7;
			if (!strchr(value, ':'))
				rc = usage_error("%s:%d: auth must be \"user:password\"", file, lineno);
			else
				o->auth = keep_string(value);
		} else {
			rc = usage_error("%s:%d: unknown key \"%s\" (known: servers, chroot, "
			                 "session_timeout, loss_percent, connect_timeout, auth)", file,
			                 lineno, key);
		}
	}
	fclose(f);
	return rc;
}

static int read_configs(struct opts *o)
{
	const char *env = getenv("ZKLOCK_CONFIG");
	if (env && *env)
		return read_config(env, true, o);
	int rc = read_config(SYSTEM_CONFIG, false, o);
	if (rc != 0)
		return rc;
	char file[PATH_MAX];
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		snprintf(file, sizeof file, "%s/zklock.conf", xdg);
	else if (home && *home)
		snprintf(file, sizeof file, "%s/.config/zklock.conf", home);
	else
		return 0;
	return read_config(file, false, o);
}

/* ---- arguments ---- */

static int check_path(const char *what, const char *path)
{
	if (path[0] != '/')
		return usage_error("%s \"%s\" is not absolute: it must start with '/'", what, path);
	return 0;
}

/* The options of a subcommand (status, list, revoke) come before or after its operand. */
static int parse_subcommand(int argc, char **argv, int next, struct opts *o, const char *what)
{
	int sub_argc = argc - next, sub_next;
	char **sub_argv = argv + next;
	int rc = parse_opts(sub_argc, sub_argv, true, o, &sub_next);
	if (rc != 0 || o->help || o->version)
		return rc;
	if (sub_next >= sub_argc)
		return usage_error("missing %s", what);
	if (sub_next + 1 < sub_argc)
		return usage_error("unexpected argument \"%s\" after the %s", sub_argv[sub_next + 1],
		                   what);
	o->path = sub_argv[sub_next];
	return check_path(what, o->path);
}

/* Fills o from the config files, the environment and argv. Returns 0, or an exit code
 * after reporting a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	o->servers = DEFAULT_SERVERS;
	o->wait_ms = ZKL_WAIT_FOREVER;
	o->wait_s = -1;
	o->conflict_code = 1;
	o->kill_signal = SIGTERM;
	o->kill_grace_ms = DEFAULT_KILL_GRACE_MS;
	o->token_env = DEFAULT_TOKEN_ENV;

	int rc = read_configs(o);
	if (rc != 0)
		return rc;
	const char *env = getenv("ZKLOCK_SERVERS");
	if (env != NULL && *env != '\0')
		o->servers = env;

	int next;
	rc = parse_opts(argc, argv, false, o, &next);
	if (rc != 0)
		return rc;
	if (o->help || o->version)
		return 0;

	/* Subcommands are never lock paths (those are absolute). */
	static const struct {
		const char *name;
		enum command cmd;
		const char *what;
	} subs[] = {
		{ "status", CMD_STATUS, "lock path" },
		{ "list", CMD_LIST, "prefix" },
		{ "revoke", CMD_REVOKE, "lock path" },
	};
	for (size_t i = 0; next < argc && i < sizeof subs / sizeof subs[0]; i++) {
		if (strcmp(argv[next], subs[i].name) == 0) {
			o->command = subs[i].cmd;
			return parse_subcommand(argc, argv, next, o, subs[i].what);
		}
	}

	if (next >= argc)
		return usage_error("missing lock path");
	o->path = argv[next++];

	/* flock(1)'s form: "zklock PATH -c STRING". */
	if (next + 2 == argc &&
	    (strcmp(argv[next], "-c") == 0 || strcmp(argv[next], "--command") == 0)) {
		o->shell_cmd = argv[next + 1];
		next = argc;
	}
	/* Options between PATH and "--" ("zklock /locks/x -w 5 -- cmd") are taken too. */
	if (next < argc && argv[next][0] == '-' && strcmp(argv[next], "--") != 0) {
		int dash = -1;
		for (int i = next + 1; i < argc; i++) {
			if (strcmp(argv[i], "--") == 0) {
				dash = i;
				break;
			}
		}
		if (dash < 0)
			return usage_error("\"%s\" after the lock path: put options before PATH, or "
			                   "end them with \"--\" before the command", argv[next]);
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
	if (next < argc && strcmp(argv[next], "--") == 0) {
		next++;
		if (next >= argc && !o->shell_cmd)
			return usage_error("missing command to run after \"--\"");
	}
	if (o->shell_cmd) {
		/* As flock(1): -c STRING runs STRING with the shell. */
		if (next < argc)
			return usage_error("-c gives the command already: unexpected \"%s\" after the "
			                   "lock path", argv[next]);
		o->sh_argv[0] = "/bin/sh";
		o->sh_argv[1] = "-c";
		o->sh_argv[2] = (char *)o->shell_cmd;
		o->sh_argv[3] = NULL;
		o->cmd = o->sh_argv;
	} else {
		if (next >= argc)
			return usage_error("missing command to run after the lock path (zklock PATH -- "
			                   "COMMAND, or zklock PATH -c STRING)");
		o->cmd = argv + next;
	}

	/* The library checks paths fully, but only once connected: catch the most likely
	 * slip ("zklock cmd ...") without a round trip. */
	rc = check_path("lock path", o->path);
	if (rc != 0)
		return rc;
	if (o->modes > 1)
		return usage_error("--read, --write, --semaphore and --leader exclude each other");
	if (o->requeue && o->mode != MODE_LEADER)
		return usage_error("--requeue needs --leader");
	if (o->revocable && (o->mode == MODE_SEMAPHORE || o->mode == MODE_LEADER))
		return usage_error("--revocable works with a mutex, --read or --write only "
		                   "(Curator's revocation)");
	if (o->data && o->mode == MODE_LEADER)
		return usage_error("--data does not work with --leader: a participant's node "
		                   "says who it is (\"<host>:<pid>\")");
	if (o->data && o->revocable)
		return usage_error("--data does not work with --revocable: revocable nodes carry "
		                   "no data, as Curator's do");
	if (o->naming == ZKL_NAMING_KAZOO && (o->mode == MODE_SEMAPHORE || o->mode == MODE_LEADER))
		return usage_error("--naming kazoo works with a mutex, --read or --write only "
		                   "(kazoo's semaphore and election use other layouts)");
	return 0;
}

/* The servers string to connect to: the config's chroot goes after servers that have
 * none. Returns 0 or an exit code. */
static int resolve_servers(struct opts *o)
{
	if (!o->chroot || strchr(o->servers, '/'))
		return 0;
	size_t n = strlen(o->servers) + strlen(o->chroot) + 1;
	o->servers_buf = malloc(n);
	if (!o->servers_buf) {
		msg("out of memory");
		return EXIT_SOFTWARE;
	}
	snprintf(o->servers_buf, n, "%s%s", o->servers, strcmp(o->chroot, "/") == 0 ? "" : o->chroot);
	o->servers = o->servers_buf;
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

static struct timespec after_ms(int ms)
{
	struct timespec t = now();
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* "2024-05-01T12:00:03.123Z" for ms since the epoch. */
static void format_utc(char *buf, size_t size, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms <= 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, size, "-");
		return;
	}
	char tmp[32];
	strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03dZ", tmp, (int)(ms % 1000));
}

/* "3 s", "5 min", "2 h", "1 d" */
static void format_age(char *buf, size_t size, int64_t ms)
{
	int64_t s = ms / 1000;
	if (s < 120)
		snprintf(buf, size, "%lld s", (long long)s);
	else if (s < 7200)
		snprintf(buf, size, "%lld min", (long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, size, "%lld h", (long long)(s / 3600));
	else
		snprintf(buf, size, "%lld d", (long long)(s / 86400));
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

/* Opens the client. Returns 0 or an exit code after reporting. */
static int open_client(const struct opts *o, zkl_client **out)
{
	zkl_client_options co;
	zkl_client_options_init(&co);
	co.servers = o->servers;
	if (o->session_timeout_ms > 0)
		co.session_timeout_ms = o->session_timeout_ms;
	if (o->loss_percent > 0)
		co.loss_percent = o->loss_percent;
	if (o->connect_timeout_ms > 0)
		co.connect_timeout_ms = o->connect_timeout_ms;
	co.digest_auth = o->auth;
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

/* A plain ZooKeeper handle, for what the library has no API for. */
struct raw {
	zhandle_t *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;
};

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct raw *r = ctx;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&r->mu);
	r->state = state;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void raw_log_discard(const char *message)
{
	(void)message;
}

/* Opens r and waits until it is connected. Returns 0 or an exit code after reporting. */
static int raw_open(const struct opts *o, struct raw *r)
{
	memset(r, 0, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	int timeout = o->session_timeout_ms > 0 ? o->session_timeout_ms : 10000;
	r->zh = zookeeper_init2(o->servers, raw_watcher, timeout, NULL, r, ZOO_NO_LOG_CLIENTENV,
	                        raw_log_discard);
	if (!r->zh) {
		msg("cannot start a ZooKeeper client for %s: %s", o->servers, strerror(errno));
		return EXIT_SOFTWARE;
	}
	zoo_set_servers_resolution_delay(r->zh, -1);
	if (o->auth)
		zoo_add_auth(r->zh, "digest", o->auth, (int)strlen(o->auth), NULL, NULL);
	struct timespec deadline = after_ms(o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000);
	pthread_mutex_lock(&r->mu);
	while (r->state != ZOO_CONNECTED_STATE && r->state != ZOO_AUTH_FAILED_STATE &&
	       pthread_cond_timedwait(&r->cv, &r->mu, &deadline) != ETIMEDOUT)
		;
	bool ok = r->state == ZOO_CONNECTED_STATE;
	pthread_mutex_unlock(&r->mu);
	if (!ok) {
		zookeeper_close(r->zh);
		r->zh = NULL;
		msg("cannot connect to ZooKeeper at %s", o->servers);
		return EXIT_UNAVAILABLE;
	}
	return 0;
}

static void raw_close(struct raw *r)
{
	if (r->zh)
		zookeeper_close(r->zh);
	r->zh = NULL;
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
}

/* ---- what a queue looks like ---- */

/* A node's kind, from the marker before its sequence number (Curator's and kazoo's). */
static const struct {
	const char *marker;
	const char *layout;
	bool reader;
} kinds[] = {
	{ "__READ__", "read", true },
	{ "__WRIT__", "write", false },
	{ "__rlock__", "kazoo-read", true },
	{ "__lock__", "kazoo-lock", false },
	{ "lease-", "lease", false },
	{ "latch-", "latch", false },
	{ "lock-", "mutex", false },
};

static int kind_of(const char *node)
{
	const char *name = strrchr(node, '/');
	name = name ? name + 1 : node;
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		size_t ml = strlen(kinds[k].marker);
		const char *last = NULL;
		for (const char *p = strstr(name, kinds[k].marker); p; p = strstr(p + 1, kinds[k].marker))
			last = p;
		if (!last)
			continue;
		const char *seq = last + ml;
		size_t n = strlen(seq);
		if (n != 10 && !(n == 11 && seq[0] == '-') && !(n == 10 && seq[0] == '-'))
			continue;
		bool digits = true;
		for (size_t i = seq[0] == '-'; i < n; i++)
			digits = digits && isdigit((unsigned char)seq[i]);
		if (digits)
			return (int)k;
	}
	return -1;
}

struct qnode {
	zkl_participant p;  /* owns path and data */
	const char *layout; /* "mutex", "read", ..., "semaphore" */
	const char *role;   /* "holder", "waiting", "leader", "lease", "gate" */
};

struct queue_view {
	struct qnode *nodes;
	size_t n;
	size_t holders;
	size_t waiting;
};

static void view_free(struct queue_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->nodes[i].p.path);
		free(v->nodes[i].p.data);
	}
	free(v->nodes);
	memset(v, 0, sizeof *v);
}

/* Appends the participants of folder to v, with roles. part: 0 the lock path itself,
 * 1 a semaphore's leases/, 2 a semaphore's locks/. Returns 0 or a ZKL_E* code. */
static int view_add(zkl_client *c, const char *folder, int part, struct queue_view *v)
{
	zkl_mutex *m;
	int rc = zkl_mutex_new(&m, c, folder);
	if (rc != 0)
		return rc;
	zkl_participant *list;
	size_t n;
	rc = zkl_lock_participants(zkl_mutex_lock(m), &list, &n);
	zkl_mutex_free(m);
	if (rc != 0)
		return rc;
	struct qnode *grown = n ? realloc(v->nodes, (v->n + n) * sizeof *grown) : v->nodes;
	if (n && !grown) {
		zkl_participants_free(list, n);
		return ZKL_ENOMEM;
	}
	v->nodes = grown;
	/* Holders of the lock path's queue: the readers before the first writer, or else the
	 * first node (a writer, a mutex, the leader). */
	size_t readers = 0;
	while (readers < n && kind_of(list[readers].path) >= 0 &&
	       kinds[kind_of(list[readers].path)].reader)
		readers++;
	for (size_t i = 0; i < n; i++) {
		struct qnode *q = &v->nodes[v->n++];
		q->p = list[i];
		int k = kind_of(list[i].path);
		q->layout = k >= 0 ? kinds[k].layout : "unknown";
		bool holds;
		if (part == 1) {
			q->layout = "semaphore";
			q->role = "lease";
			holds = true;
		} else if (part == 2) {
			q->layout = "semaphore";
			q->role = i == 0 ? "gate" : "waiting";
			holds = false;
		} else {
			holds = readers > 0 ? i < readers : i == 0;
			bool latch = k >= 0 && strcmp(kinds[k].layout, "latch") == 0;
			q->role = holds ? (latch ? "leader" : "holder") : "waiting";
		}
		q->p.holder = holds;
		if (holds)
			v->holders++;
		else
			v->waiting++;
	}
	/* The array's strings now belong to v. */
	free(list);
	return 0;
}

/* Everything queued at path: its own queue, then a semaphore's leases and its gate. */
static int view_collect(zkl_client *c, const char *path, struct queue_view *v)
{
	memset(v, 0, sizeof *v);
	char sub[ZKL_PATH_MAX + 16];
	int rc = view_add(c, path, 0, v);
	snprintf(sub, sizeof sub, "%s/leases", path);
	if (rc == 0 && strlen(path) + 7 < ZKL_PATH_MAX)
		rc = view_add(c, sub, 1, v);
	size_t gate = v->n;
	snprintf(sub, sizeof sub, "%s/locks", path);
	if (rc == 0 && strlen(path) + 6 < ZKL_PATH_MAX)
		rc = view_add(c, sub, 2, v);
	if (rc != 0) {
		view_free(v);
		return rc;
	}
	/* The taker at a semaphore's gate creates its lease and waits there until the leases
	 * are few enough: its lease (the newest, with the same data) is not held yet. The
	 * limit itself is not in ZooKeeper, so this is how a waiting lease is told apart. */
	if (gate < v->n && v->nodes[gate].p.data_len > 0) {
		const zkl_participant *g = &v->nodes[gate].p;
		for (size_t i = gate; i-- > 0;) {
			struct qnode *q = &v->nodes[i];
			if (strcmp(q->role, "lease") != 0)
				break;
			if (q->p.data_len == g->data_len &&
			    memcmp(q->p.data, g->data, (size_t)g->data_len) == 0) {
				q->role = "waiting";
				q->p.holder = false;
				v->holders--;
				v->waiting++;
			}
			break; /* only the newest lease can be the gate holder's */
		}
	}
	return 0;
}

/* Splits "<host>:<pid>" data (zklock's, zklocks'); false for anything else. */
static bool host_pid(const zkl_participant *p, char *host, size_t size, long *pid)
{
	const char *colon = p->data_len > 0 ? memrchr(p->data, ':', (size_t)p->data_len) : NULL;
	if (!colon || colon == p->data)
		return false;
	const char *digits = colon + 1, *end = p->data + p->data_len;
	if (digits == end)
		return false;
	for (const char *d = digits; d < end; d++)
		if (!isdigit((unsigned char)*d))
			return false;
	for (const char *h = p->data; h < colon; h++)
		if (!isgraph((unsigned char)*h))
			return false;
	size_t hl = (size_t)(colon - p->data);
	if (hl >= size)
		return false;
	memcpy(host, p->data, hl);
	host[hl] = '\0';
	*pid = strtol(digits, NULL, 10);
	return true;
}

/* ---- the deadline a holder's watchdog enforces, for `status` on the same host ----
 *
 * A holder writes "<path>\n<loss_ms> <expiry_ms>\n" (CLOCK_MONOTONIC, the same for every
 * process of the host) to <dir>/<pid> while its command runs, and rewrites it as the
 * deadlines move; `status`, run by the same user on the same host, reads it for the
 * holders whose node data names this host. <dir> is $XDG_RUNTIME_DIR/zklock, else
 * /tmp/zklock-<uid>: a folder of the user's own, never followed through a link. */
static bool deadline_dir(char *buf, size_t size, bool create)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n = xdg && *xdg ? snprintf(buf, size, "%s/zklock", xdg)
	                    : snprintf(buf, size, "/tmp/zklock-%ld", (long)getuid());
	if (n < 0 || (size_t)n >= size)
		return false;
	if (create && mkdir(buf, 0700) != 0 && errno != EEXIST)
		return false;
	struct stat sb;
	return lstat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == getuid();
}

static void deadline_publish(const char *path, const zkl_deadlines *d)
{
	char dir[4096], file[4200], tmpf[4300];
	if (!deadline_dir(dir, sizeof dir, true))
		return;
	snprintf(file, sizeof file, "%s/%ld", dir, (long)getpid());
	snprintf(tmpf, sizeof tmpf, "%s.tmp", file);
	FILE *f = fopen(tmpf, "w");
	if (!f)
		return;
	fprintf(f, "%s\n%lld %lld\n", path, (long long)d->loss_ms, (long long)d->expiry_ms);
	if (fclose(f) != 0 || rename(tmpf, file) != 0)
		unlink(tmpf);
}

static void deadline_unpublish(void)
{
	char dir[4096], file[4200];
	if (deadline_dir(dir, sizeof dir, false)) {
		snprintf(file, sizeof file, "%s/%ld", dir, (long)getpid());
		unlink(file);
	}
}

/* The loss deadline published by our own holder pid of the lock at path on this host,
 * or 0. */
static int64_t deadline_of(const char *host, long pid, const char *path)
{
	char me[256], dir[4096], file[4200], line[4200];
	if (gethostname(me, sizeof me) != 0 || strcmp(me, host) != 0 || pid <= 0 ||
	    kill((pid_t)pid, 0) != 0 || !deadline_dir(dir, sizeof dir, false))
		return 0;
	snprintf(file, sizeof file, "%s/%ld", dir, pid);
	FILE *f = fopen(file, "r");
	if (!f)
		return 0;
	long long loss = 0, expiry = 0;
	bool ok = fgets(line, sizeof line, f) && (line[strcspn(line, "\n")] = 0, true) &&
	          strcmp(line, path) == 0 && fscanf(f, "%lld %lld", &loss, &expiry) == 2;
	fclose(f);
	return ok ? loss : 0;
}

/* For our own holder on this host: ms until the deadline its watchdog enforces (which
 * may be past, as a negative number), else INT64_MIN. */
static int64_t deadline_left(const char *path, const char *host, long pid)
{
	int64_t at = deadline_of(host, pid, path);
	return at > 0 ? at - zkl_monotonic_ms() : INT64_MIN;
}

static void print_view_text(FILE *f, const char *path, const struct queue_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct qnode *q = &v->nodes[i];
		char host[256], since[40];
		long pid = 0;
		bool hp = host_pid(&q->p, host, sizeof host, &pid);
		format_utc(since, sizeof since, q->p.ctime);
		fprintf(f, "%s\t", q->p.path);
		print_printable(f, q->p.data, (size_t)q->p.data_len);
		fprintf(f, "\t%s\t%s\t", q->role, q->layout);
		if (hp)
			fprintf(f, "%s\t%ld", host, pid);
		else
			fputs("-\t-", f);
		fprintf(f, "\t%s\t%lld", since, (long long)q->p.czxid);
		int64_t left = hp ? deadline_left(path, host, pid) : INT64_MIN;
		if (left != INT64_MIN)
			fprintf(f, "\t%lldms\n", (long long)left);
		else
			fputs("\t-\n", f);
	}
}

static void print_view_json(FILE *f, const char *path, const struct queue_view *v)
{
	fputs("{\"path\": ", f);
	print_json_cstr(f, path);
	fprintf(f, ", \"holders\": %zu, \"waiting\": %zu, \"nodes\": [", v->holders, v->waiting);
	for (size_t i = 0; i < v->n; i++) {
		const struct qnode *q = &v->nodes[i];
		char host[256], since[40];
		long pid = 0;
		bool hp = host_pid(&q->p, host, sizeof host, &pid);
		format_utc(since, sizeof since, q->p.ctime);
		fputs(i ? ", {" : "{", f);
		fputs("\"node\": ", f);
		print_json_cstr(f, q->p.path);
		fprintf(f, ", \"role\": \"%s\", \"layout\": \"%s\", \"data\": ", q->role, q->layout);
		print_json_string(f, q->p.data, (size_t)q->p.data_len);
		fputs(", \"host\": ", f);
		print_json_cstr(f, hp ? host : NULL);
		if (hp)
			fprintf(f, ", \"pid\": %ld", pid);
		else
			fputs(", \"pid\": null", f);
		fprintf(f, ", \"since\": \"%s\", \"ctime_ms\": %lld, \"token\": %lld, \"sequence\": %lld",
		        since, (long long)q->p.ctime, (long long)q->p.czxid,
		        (long long)q->p.sequence);
		int64_t left = hp ? deadline_left(path, host, pid) : INT64_MIN;
		if (left != INT64_MIN)
			fprintf(f, ", \"deadline_ms\": %lld}", (long long)left);
		else
			fputs(", \"deadline_ms\": null}", f);
	}
	fputs("]}", f);
}

/* ---- the lock, whichever kind ---- */

struct lock {
	enum mode mode;
	zkl_client *c;
	const char *path;
	zkl_lock *l;           /* the view of m or sem; NULL for a leader */
	zkl_mutex *m;          /* mutex, or the half of rw */
	zkl_rwlock *rw;
	zkl_semaphore *sem;    /* one lease per acquire of its view */
	zkl_leader *leader;
	char id[300];          /* our node data: "<host>:<pid>" */
};

enum phase { PH_CONNECTING, PH_WAITING, PH_HELD, PH_RUNNING, PH_DONE, PH_EXIT };

/* Shared between main, the signal thread, the progress thread and the library's
 * callbacks; all under `mu`. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* SIGCHLD arrived, the lock was lost or revoked, phase changed */
	enum phase phase;
	int signal;     /* first SIGINT/SIGTERM/SIGHUP received before the command ran */
	int any_signal; /* first one ever (stops a --requeue loop) */
	bool lost;      /* the lock was lost */
	bool revoked;   /* revocation was asked */
	bool canceling; /* the signal thread is cancelling through st.lk */
	pid_t child;    /* the command, leader of its own process group (RUNNING) */
	struct lock *lk;
} st = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void set_phase(enum phase ph)
{
	pthread_mutex_lock(&st.mu);
	st.phase = ph;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
}

static void note_lost(void)
{
	pthread_mutex_lock(&st.mu);
	st.lost = true;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
}

static void on_lock_lost(zkl_lock *l, int reason, void *data)
{
	(void)l;
	(void)reason;
	(void)data;
	note_lost();
}

static void on_leadership_lost(zkl_leader *l, int reason, void *data)
{
	(void)l;
	(void)data;
	if (reason != ZKL_ECLOSED)
		note_lost();
}

static void on_revoke(zkl_mutex *m, void *data)
{
	(void)data;
	pthread_mutex_lock(&st.mu);
	st.revoked = true;
	bool cancel = st.phase == PH_WAITING;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
	/* On the event thread: m outlives the callbacks. */
	if (cancel)
		zkl_lock_cancel(zkl_mutex_lock(m));
}

/* Makes a new latch for lk (the old one, if any, is freed). */
static int leader_new(struct lock *lk)
{
	zkl_leader_free(lk->leader);
	lk->leader = NULL;
	zkl_leader_options lo;
	zkl_leader_options_init(&lo);
	lo.id = lk->id;
	lo.on_lost = on_leadership_lost;
	/* Like the other modes: lost when the session may be gone, not on every blip. */
	lo.lose_on_suspend = false;
	return zkl_leader_new(&lk->leader, lk->c, lk->path, &lo);
}

/* Makes the handle. Returns 0 or an exit code after reporting. */
static int lock_new(const struct opts *o, zkl_client *c, struct lock *lk)
{
	memset(lk, 0, sizeof *lk);
	lk->mode = o->mode;
	lk->c = c;
	lk->path = o->path;
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		strcpy(host, "unknown");
	host[sizeof host - 1] = '\0';
	snprintf(lk->id, sizeof lk->id, "%s:%ld", host, (long)getpid());

	int rc;
	switch (o->mode) {
	case MODE_MUTEX:
		rc = zkl_mutex_new(&lk->m, c, o->path);
		break;
	case MODE_READ:
	case MODE_WRITE:
		rc = zkl_rwlock_new(&lk->rw, c, o->path);
		if (rc == 0)
			lk->m = o->mode == MODE_READ ? zkl_rwlock_read(lk->rw) : zkl_rwlock_write(lk->rw);
		break;
	case MODE_SEMAPHORE:
		rc = zkl_semaphore_new(&lk->sem, c, o->path, o->sem_max);
		if (rc == 0)
			lk->l = zkl_semaphore_lock(lk->sem);
		break;
	case MODE_LEADER:
	default:
		rc = leader_new(lk);
		break;
	}
	if (rc == 0 && lk->m) {
		lk->l = zkl_mutex_lock(lk->m);
		rc = zkl_mutex_set_naming(lk->m, o->naming);
		if (rc == 0 && o->revocable)
			rc = zkl_mutex_make_revocable(lk->m, on_revoke, NULL);
	}
	if (rc == 0 && lk->l)
		rc = zkl_lock_on_lost(lk->l, on_lock_lost, NULL);
	if (rc == 0 && lk->l && o->data)
		rc = zkl_lock_set_data(lk->l, o->data, strlen(o->data));
	if (rc == 0)
		return 0;
	const char *detail = zkl_last_error();
	if (rc == ZKL_EINVAL)
		return usage_error("invalid lock path \"%s\": %s", o->path,
		                   *detail ? detail : zkl_strerror(rc));
	msg("%s: %s", o->path, *detail ? detail : zkl_strerror(rc));
	return EXIT_SOFTWARE;
}

static void lock_free(struct lock *lk)
{
	zkl_semaphore_free(lk->sem); /* and the lease its view holds */
	zkl_leader_free(lk->leader);
	if (lk->rw)
		zkl_rwlock_free(lk->rw);
	else
		zkl_mutex_free(lk->m);
	memset(lk, 0, sizeof *lk);
}

/* From the signal thread: ends a wait in lock_acquire. */
static void lock_cancel(struct lock *lk)
{
	if (lk->l)
		zkl_lock_cancel(lk->l);
	else if (lk->leader)
		zkl_leader_close(lk->leader);
}

/* The participants of our queue (the folder our node lives in). */
static int lock_participants(struct lock *lk, zkl_participant **list, size_t *n)
{
	if (lk->l)
		return zkl_lock_participants(lk->l, list, n);
	return zkl_leader_participants(lk->leader, list, n);
}

/* Leadership, tried once: queue, look where our node landed, and lead only if first. */
static int leader_try_once(struct lock *lk)
{
	int rc = zkl_leader_start(lk->leader);
	if (rc != 0)
		return rc;
	struct timespec t0 = now();
	for (;;) {
		zkl_participant *list;
		size_t n;
		rc = zkl_leader_participants(lk->leader, &list, &n);
		if (rc != 0)
			return rc;
		size_t pos = n;
		for (size_t i = 0; i < n; i++)
			if ((size_t)list[i].data_len == strlen(lk->id) && strcmp(list[i].data, lk->id) == 0)
				pos = i;
		zkl_participants_free(list, n);
		if (pos == 0)
			return zkl_leader_await(lk->leader, 10000); /* the latch checks the node */
		if (pos < n)
			return ZKL_ETIMEDOUT;
		/* Not queued yet: a round trip away (or closed by a signal: await says so). */
		if (seconds_since(t0) > 10)
			return ZKL_ETIMEDOUT;
		rc = zkl_leader_await(lk->leader, 20);
		if (rc != ZKL_ETIMEDOUT)
			return rc;
	}
}

static int lock_acquire(struct lock *lk, int wait_ms)
{
	if (lk->l)
		return zkl_lock_acquire(lk->l, wait_ms);
	if (wait_ms == 0)
		return leader_try_once(lk);
	int rc = zkl_leader_start(lk->leader);
	if (rc == 0)
		rc = zkl_leader_await(lk->leader, wait_ms);
	return rc;
}

static int64_t lock_token(struct lock *lk)
{
	if (lk->l)
		return zkl_lock_token(lk->l);
	return zkl_leader_token(lk->leader);
}

/* Releases (a semaphore: gives its lease back; a leader: leaves the election). Returns
 * 0, ZKL_ELOST or another code. */
static int lock_release(struct lock *lk)
{
	if (lk->l)
		return zkl_lock_release(lk->l);
	zkl_leader_close(lk->leader);
	return 0;
}

static const char *lock_what(const struct lock *lk)
{
	return lk->mode == MODE_LEADER ? "leadership of " : "";
}

/* Who holds lk's path, in printable form, into buf; false if nobody (or unknown). Sets
 * *ahead to the number of nodes before ours (the queue's length when ours is not found
 * yet), if ahead is not NULL. */
static bool describe_holder(struct lock *lk, char *buf, size_t bufsz, size_t *ahead)
{
	struct queue_view v;
	if (ahead)
		*ahead = 0;
	if (view_collect(lk->c, lk->path, &v) != 0)
		return false;
	size_t len = 0, holders = 0, mine = v.n, queued = 0;
	buf[0] = '\0';
	/* Our node, as the library knows it (queued or held); a leader's, by its id. */
	char own[ZKL_NODE_MAX];
	bool have_own = lk->l && zkl_lock_node(lk->l, own, sizeof own) > 0;
	for (size_t i = 0; i < v.n; i++) {
		const struct qnode *q = &v.nodes[i];
		bool ours = lk->l ? have_own && strcmp(q->p.path, own) == 0
		                  : (size_t)q->p.data_len == strlen(lk->id) &&
		                            strcmp(q->p.data, lk->id) == 0;
		if (ours && mine == v.n)
			mine = queued;
		if (!q->p.holder) {
			queued++;
			continue;
		}
		if (ours)
			continue;
		holders++;
		if (holders <= 3 && len + 8 < bufsz) {
			if (holders > 1) {
				memcpy(buf + len, ", ", 3);
				len += 2;
			}
			printable(buf + len, bufsz - len, q->p.data, (size_t)q->p.data_len);
			len = strlen(buf);
		}
	}
	if (holders > 3 && len + 16 < bufsz)
		snprintf(buf + len, bufsz - len, " and %zu more", holders - 3);
	if (lk->mode == MODE_SEMAPHORE && holders > 0) {
		len = strlen(buf);
		snprintf(buf + len, bufsz - len, " (%zu lease%s taken)", holders, holders == 1 ? "" : "s");
	}
	if (ahead) {
		/* Waiters ahead of us; the holders count for a mutex, whose queue has one line. */
		size_t q = mine < v.n ? mine : queued;
		*ahead = lk->mode == MODE_SEMAPHORE ? q : q + holders;
		if (lk->mode != MODE_SEMAPHORE && mine >= v.n)
			*ahead = v.n;
	}
	view_free(&v);
	return holders > 0;
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

		struct lock *cancel = NULL;
		pthread_mutex_lock(&st.mu);
		if (st.phase == PH_EXIT) {
			pthread_mutex_unlock(&st.mu);
			return NULL;
		}
		if (sig == SIGCHLD) {
			pthread_cond_broadcast(&st.cond);
		} else if (sig != 0) {
			if (st.any_signal == 0)
				st.any_signal = sig;
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
			pthread_cond_broadcast(&st.cond);
		}
		retry = st.phase == PH_WAITING && (st.signal != 0 || st.revoked);
		if (retry && st.lk) {
			cancel = st.lk;
			st.canceling = true;
		}
		pthread_mutex_unlock(&st.mu);
		/* Outside our lock: the library may take its own. */
		if (cancel) {
			lock_cancel(cancel);
			pthread_mutex_lock(&st.mu);
			st.canceling = false;
			pthread_cond_broadcast(&st.cond);
			pthread_mutex_unlock(&st.mu);
		}
	}
}

/* Main: let go of the handle the signal thread may be cancelling through. */
static void detach_lock(void)
{
	pthread_mutex_lock(&st.mu);
	st.lk = NULL;
	while (st.canceling)
		pthread_cond_wait(&st.cond, &st.mu);
	pthread_mutex_unlock(&st.mu);
}

/* ---- -v: the queue while waiting ---- */

static void *progress_thread(void *arg)
{
	struct lock *lk = arg;
	char last[512] = "";
	pthread_mutex_lock(&st.mu);
	while (st.phase == PH_WAITING || st.phase == PH_CONNECTING) {
		struct timespec t = after_ms(500);
		pthread_cond_timedwait(&st.cond, &st.mu, &t);
		if (st.phase != PH_WAITING)
			break;
		pthread_mutex_unlock(&st.mu);
		char holder[400], line[512];
		size_t ahead;
		bool held = describe_holder(lk, holder, sizeof holder, &ahead);
		if (held)
			snprintf(line, sizeof line, "waiting for %s%s: held by %s, %zu ahead",
			         lock_what(lk), lk->path, holder, ahead);
		else
			snprintf(line, sizeof line, "waiting for %s%s: %zu ahead", lock_what(lk),
			         lk->path, ahead);
		pthread_mutex_lock(&st.mu);
		if (st.phase == PH_WAITING && strcmp(line, last) != 0) {
			msg("%s", line);
			snprintf(last, sizeof last, "%s", line);
		}
	}
	pthread_mutex_unlock(&st.mu);
	return NULL;
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

/* What the child restores before exec: zklock's signal mask and which signals were
 * ignored when it started (ignored dispositions survive exec; the library may ignore
 * SIGPIPE, for example). Written before the first thread starts, read-only after. */
static sigset_t orig_mask;
static bool orig_ignored[NSIG];

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

/* The command's environment: ours, with NAME=token. Freed with free() (one block of
 * pointers; the strings are environ's, but for the one added). */
static char **command_env(const char *name, int64_t token, char **added)
{
	size_t n = 0, nl = strlen(name);
	while (environ[n])
		n++;
	char **envp = malloc((n + 2) * sizeof *envp);
	char *var = malloc(nl + 32);
	if (!envp || !var) {
		free(envp);
		free(var);
		return NULL;
	}
	snprintf(var, nl + 32, "%s=%lld", name, (long long)token);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!(strncmp(environ[i], name, nl) == 0 && environ[i][nl] == '='))
			envp[k++] = environ[i];
	envp[k++] = var;
	envp[k] = NULL;
	*added = var;
	return envp;
}

/* How the command ended. */
struct outcome {
	int status;   /* zklock's exit status so far */
	bool ran;     /* the command was started */
	bool lost;    /* the lock was lost meanwhile */
	bool revoked; /* revocation was asked */
};

/* Runs the command while the lock is held. */
static struct outcome run_command(const struct opts *o, struct lock *lk)
{
	struct outcome out = { EXIT_SOFTWARE, false, false, false };
	char *var = NULL;
	/* The command starts only with a real fencing token, on a session short of its loss
	 * deadline; the watchdog enforces that deadline from then on. */
	const int64_t token = lock_token(lk);
	zkl_deadlines dl;
	zkl_client_deadlines(lk->c, &dl);
	const bool alive = token > 0 && dl.session_id != 0 && zkl_monotonic_ms() < dl.loss_ms;
	char **envp = command_env(o->token_env, token, &var);
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
	if (r == (ssize_t)sizeof child_errno)
		msg("cannot run %s: %s", o->cmd[0], strerror(child_errno));

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
			if (o->verbose) {
				/* The watchdog's schedule; an expiry already past means at once. */
				int64_t k = now + o->kill_grace_ms, half = now + (dl.expiry_ms - now) / 2;
				int64_t at = half < k ? half : k;
				if (at < now)
					at = now;
				msg("sending signal %d to process group %ld; SIGKILL in %lld ms, %lld ms "
				    "before the server may expire the session", o->kill_signal, (long)pid,
				    (long long)(at - now), (long long)(dl.expiry_ms - at));
			}
			if (!wd_dead) {
				watchdog_renew(&wd, now, dl.expiry_ms);
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
		if (term_sent && !kill_sent && reached(kill_at)) {
			kill(-pid, SIGKILL);
			kill_sent = true;
		}
		struct timespec until = after_ms(renew_ms);
		if (term_sent && !kill_sent && kill_at.tv_sec * 1000000000LL + kill_at.tv_nsec <
		                                   until.tv_sec * 1000000000LL + until.tv_nsec)
			until = kill_at;
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
		out.status = WEXITSTATUS(wst);
	else if (exited && WIFSIGNALED(wst))
		out.status = 128 + WTERMSIG(wst);
	return out;
}

/* ---- --once-per: the record beside the lock ---- */

static char *record_path(const char *path)
{
	size_t n = strlen(path) + sizeof ".last-run";
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s.last-run", path);
	return p;
}

/* The server time at which our node was created (when we asked for the lock), or 0. */
static int64_t arrival_ms(struct lock *lk)
{
	int64_t token = lock_token(lk), t = 0;
	zkl_participant *list;
	size_t n;
	if (token <= 0 || lock_participants(lk, &list, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (list[i].czxid == token)
			t = list[i].ctime;
	zkl_participants_free(list, n);
	return t;
}

/* How much earlier than a full interval a later run still counts as the same one: cron
 * lines on different hosts fire seconds apart, and a run one interval later must not be
 * skipped for starting a moment early. */
static int64_t once_slack_ms(long interval_s)
{
	int64_t slack = (int64_t)interval_s * 1000 / 4;
	return slack > 300000 ? 300000 : slack;
}

/* Whether the last successful run is recent. Fills *last and *by (the record's data). */
static int once_check(struct raw *r, const char *rec, int64_t arrival, long interval_s,
                      bool *recent, int64_t *last, char *by, size_t bysize)
{
	char buf[512];
	int len = sizeof buf - 1;
	struct Stat stat;
	*recent = false;
	*last = 0;
	by[0] = '\0';
	int zrc = zoo_get(r->zh, rec, 0, buf, &len, &stat);
	if (zrc == ZNONODE)
		return 0;
	if (zrc != ZOK) {
		msg("cannot read %s: %s", rec, zerror(zrc));
		return EXIT_SOFTWARE;
	}
	buf[len > 0 ? len : 0] = '\0';
	char *end;
	long long v = strtoll(buf, &end, 10);
	if (end == buf || v <= 0)
		return 0; /* not ours: ran never, as far as we know */
	while (*end == ' ')
		end++;
	snprintf(by, bysize, "%s", end);
	by[strcspn(by, "\n")] = '\0';
	*last = v;
	*recent = arrival - v < (int64_t)interval_s * 1000 - once_slack_ms(interval_s);
	return 0;
}

static int once_record(struct raw *r, const char *rec, int64_t arrival, const char *id)
{
	char buf[400];
	int len = snprintf(buf, sizeof buf, "%lld %s", (long long)arrival, id);
	int zrc = zoo_set(r->zh, rec, buf, len, -1);
	if (zrc == ZNONODE)
		zrc = zoo_create(r->zh, rec, buf, len, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
	if (zrc == ZNODEEXISTS)
		zrc = zoo_set(r->zh, rec, buf, len, -1);
	if (zrc != ZOK) {
		msg("cannot record the run in %s: %s", rec, zerror(zrc));
		return EXIT_SOFTWARE;
	}
	return 0;
}

/* ---- the subcommands ---- */

static int report_failure(const char *what, const char *path, int rc)
{
	const char *detail = zkl_last_error();
	msg("%s %s: %s%s%s", what, path, zkl_strerror(rc), *detail ? ": " : "", detail);
	return rc == ZKL_EINVAL ? EXIT_USAGE : EXIT_SOFTWARE;
}

static int run_status(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	struct queue_view v;
	int rc = view_collect(c, o->path, &v);
	if (rc == 0) {
		if (o->json) {
			print_view_json(stdout, o->path, &v);
			fputc('\n', stdout);
		} else {
			print_view_text(stdout, o->path, &v);
		}
		view_free(&v);
		if (fflush(stdout) != 0) {
			msg("writing the queue: %s", strerror(errno));
			status = EXIT_SOFTWARE;
		}
	} else {
		status = report_failure("listing", o->path, rc);
	}
	zkl_client_close(c);
	return status;
}

/* Collects, under prefix, every folder with lock nodes (a semaphore's leases/ and locks/
 * count for the semaphore). Breadth first, at most `budget` folders looked at. */
static int walk(struct raw *r, const char *prefix, char ***out, size_t *nout)
{
	size_t cap = 64, head = 0, tail = 0, budget = 20000;
	char **todo = malloc(cap * sizeof *todo);
	*out = NULL;
	*nout = 0;
	if (!todo || !(todo[tail++] = strdup(prefix))) {
		free(todo);
		return EXIT_SOFTWARE;
	}
	int status = 0;
	while (head < tail && budget-- > 0) {
		char *dir = todo[head++];
		struct String_vector sv = { 0, NULL };
		int zrc = zoo_get_children(r->zh, dir, 0, &sv);
		if (zrc == ZNONODE || zrc == ZNOAUTH) {
			free(dir);
			continue;
		}
		if (zrc != ZOK) {
			msg("cannot list %s: %s", dir, zerror(zrc));
			free(dir);
			status = EXIT_SOFTWARE;
			break;
		}
		bool locks = false;
		for (int i = 0; i < sv.count; i++)
			if (kind_of(sv.data[i]) >= 0)
				locks = true;
		if (locks) {
			/* A semaphore's parts stand for the semaphore. */
			const char *base = strrchr(dir, '/');
			base = base ? base + 1 : dir;
			char *lock = strdup(dir);
			if (lock && (strcmp(base, "leases") == 0 || strcmp(base, "locks") == 0)) {
				char *slash = strrchr(lock, '/');
				if (slash && slash != lock)
					*slash = '\0';
			}
			bool dup = false;
			for (size_t i = 0; lock && i < *nout; i++)
				dup = dup || strcmp((*out)[i], lock) == 0;
			if (lock && !dup) {
				char **grown = realloc(*out, (*nout + 1) * sizeof *grown);
				if (grown) {
					*out = grown;
					(*out)[(*nout)++] = lock;
					lock = NULL;
				}
			}
			free(lock);
		}
		for (int i = 0; i < sv.count; i++) {
			if (kind_of(sv.data[i]) >= 0)
				continue; /* a lock node, not a folder */
			if (strcmp(dir, "/") == 0 && strcmp(sv.data[i], "zookeeper") == 0)
				continue;
			size_t n = strlen(dir) + strlen(sv.data[i]) + 2;
			char *child = malloc(n);
			if (!child)
				continue;
			snprintf(child, n, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", sv.data[i]);
			if (tail == cap) {
				char **grown = realloc(todo, cap * 2 * sizeof *grown);
				if (!grown) {
					free(child);
					continue;
				}
				todo = grown;
				cap *= 2;
			}
			todo[tail++] = child;
		}
		deallocate_String_vector(&sv);
		free(dir);
	}
	while (head < tail)
		free(todo[head++]);
	free(todo);
	return status;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_list(const struct opts *o)
{
	struct raw r;
	int status = raw_open(o, &r);
	if (status != 0)
		return status;
	char **paths;
	size_t n;
	status = walk(&r, o->path, &paths, &n);
	raw_close(&r);
	if (status != 0)
		return status;
	qsort(paths, n, sizeof *paths, cmp_str);
	zkl_client *c = NULL;
	if (n > 0 && (status = open_client(o, &c)) != 0)
		n = 0;
	if (o->json) {
		fputs("{\"prefix\": ", stdout);
		print_json_cstr(stdout, o->path);
		fputs(", \"locks\": [", stdout);
	}
	size_t shown = 0;
	for (size_t i = 0; i < n; i++) {
		struct queue_view v;
		int rc = view_collect(c, paths[i], &v);
		if (rc != 0) {
			status = report_failure("listing", paths[i], rc);
			continue;
		}
		if (v.n == 0) {
			view_free(&v);
			continue;
		}
		if (o->json) {
			fputs(shown ? ", " : "", stdout);
			print_view_json(stdout, paths[i], &v);
		} else {
			/* The layouts present, the first holder. */
			char layouts[128] = "";
			const struct qnode *first = NULL;
			for (size_t k = 0; k < v.n; k++) {
				const char *l = v.nodes[k].layout;
				if (!strstr(layouts, l) && strlen(layouts) + strlen(l) + 2 < sizeof layouts) {
					if (*layouts)
						strcat(layouts, ",");
					strcat(layouts, l);
				}
				if (!first && v.nodes[k].p.holder)
					first = &v.nodes[k];
			}
			printf("%s\t%s\t%zu\t%zu\t", paths[i], layouts, v.holders, v.waiting);
			if (first)
				print_printable(stdout, first->p.data, (size_t)first->p.data_len);
			else
				fputc('-', stdout);
			fputc('\n', stdout);
		}
		shown++;
		view_free(&v);
	}
	if (o->json)
		fputs("]}\n", stdout);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	zkl_client_close(c);
	if (fflush(stdout) != 0) {
		msg("writing the list: %s", strerror(errno));
		status = EXIT_SOFTWARE;
	}
	return status;
}

static int run_revoke(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	struct queue_view v;
	int rc = view_collect(c, o->path, &v);
	if (rc != 0) {
		status = report_failure("listing", o->path, rc);
		zkl_client_close(c);
		return status;
	}
	char **asked = calloc(v.n ? v.n : 1, sizeof *asked);
	size_t nasked = 0, holders = 0;
	for (size_t i = 0; i < v.n && asked; i++) {
		const struct qnode *q = &v.nodes[i];
		if (!q->p.holder)
			continue;
		holders++;
		bool revocable = q->p.data_len == 0 && strcmp(q->layout, "semaphore") != 0 &&
		                 strcmp(q->layout, "latch") != 0;
		if (!revocable) {
			char data[256];
			printable(data, sizeof data, q->p.data, (size_t)q->p.data_len);
			printf("%s: held by %s, not revocable (revocable holders run with "
			       "--revocable, and their node has no data)\n", q->p.path,
			       q->p.data_len ? data : "a node without data of another layout");
			continue;
		}
		rc = zkl_revoke(c, q->p.path);
		if (rc == ZKL_ENOTHELD) {
			printf("%s: released meanwhile\n", q->p.path);
			continue;
		}
		if (rc != 0) {
			status = report_failure("revoking", q->p.path, rc);
			continue;
		}
		printf("%s: revocable; asked its holder to release %s\n", q->p.path, o->path);
		asked[nasked++] = strdup(q->p.path);
	}
	if (holders == 0)
		printf("%s is free: nothing to revoke\n", o->path);
	view_free(&v);
	if (status == 0 && nasked == 0)
		status = 1;
	/* -w: wait until the asked holders have let go. */
	if (status == 0 && o->wait_ms != ZKL_WAIT_FOREVER && o->wait_s > 0) {
		struct timespec deadline = after_ms(o->wait_ms);
		bool gone = false;
		while (!gone) {
			if (view_collect(c, o->path, &v) != 0)
				break;
			gone = true;
			for (size_t i = 0; i < v.n; i++)
				for (size_t k = 0; k < nasked; k++)
					if (asked[k] && strcmp(v.nodes[i].p.path, asked[k]) == 0)
						gone = false;
			view_free(&v);
			if (gone || reached(deadline))
				break;
			usleep(100000);
		}
		if (gone) {
			printf("%s: released\n", o->path);
		} else {
			printf("%s: still held after %g s\n", o->path, o->wait_s);
			status = 1;
		}
	}
	for (size_t k = 0; k < nasked; k++)
		free(asked[k]);
	free(asked);
	zkl_client_close(c);
	if (fflush(stdout) != 0)
		status = EXIT_SOFTWARE;
	return status;
}

/* ---- running the command under the lock ---- */

/* Acquires the lock. Returns true when held; otherwise false with *status set to
 * zklock's exit status (which may be 0: -E 0), after reporting. */
static bool acquire(const struct opts *o, struct lock *lk, int *status, pthread_t *progress,
                    bool *progressing)
{
	char holder[400];
	if (o->verbose && o->wait_ms != 0) {
		size_t ahead;
		if (describe_holder(lk, holder, sizeof holder, &ahead))
			msg("waiting for %s%s: held by %s, %zu ahead", lock_what(lk), o->path, holder,
			    ahead);
	}

	set_phase(PH_WAITING);
	*progressing = o->verbose && o->wait_ms != 0 &&
	               pthread_create(progress, NULL, progress_thread, lk) == 0;

	struct timespec t0 = now();
	int rc = lock_acquire(lk, o->wait_ms);
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());

	pthread_mutex_lock(&st.mu);
	st.phase = rc == 0 ? PH_HELD : PH_DONE;
	pthread_cond_broadcast(&st.cond);
	int sig = st.signal;
	bool revoked = st.revoked;
	pthread_mutex_unlock(&st.mu);
	/* The progress thread ends by itself now that the phase moved on; it is joined
	 * after the command, since a listing it is waiting for (the server may not hear
	 * us) must not hold the command back while the lock is ours. */

	if (rc == 0) {
		/* A lock lost at once has no token (a negative code): say nothing of one;
		 * run_command() reports the loss. */
		int64_t token = lock_token(lk);
		if (o->verbose && token > 0)
			msg("acquired %s%s (fencing token %lld) after %.3f s", lock_what(lk), o->path,
			    (long long)token, seconds_since(t0));
		return true; /* a signal meanwhile is handled by run_command() */
	}
	if (sig != 0) {
		if (o->verbose)
			msg("interrupted by signal %d; withdrew from the queue of %s", sig, o->path);
		*status = 128 + sig;
		return false;
	}
	if (revoked) {
		msg("revocation of %s asked while waiting; withdrew from the queue", o->path);
		*status = EXIT_REVOKED;
		return false;
	}
	switch (rc) {
	case ZKL_ETIMEDOUT:
		*status = o->conflict_code;
		if (o->quiet)
			break; /* as flock(1): silent on conflict */
		if (o->verbose && *detail)
			msg("%s", detail);
		if (describe_holder(lk, holder, sizeof holder, NULL))
			msg("%s%s is held by %s; gave up after %g s", lock_what(lk), o->path, holder,
			    o->wait_s);
		else
			msg("%s%s is busy; gave up after %g s", lock_what(lk), o->path, o->wait_s);
		break;
	case ZKL_EINVAL:
		if (lk->mode == MODE_SEMAPHORE && strncmp(detail, "semaphore ", 10) == 0)
			*status = usage_error("%s", detail); /* the counts disagree: it names both */
		else
			*status = usage_error("invalid lock path \"%s\": %s", o->path,
			                      *detail ? detail : zkl_strerror(rc));
		break;
	case ZKL_ECONNLOSS:
		msg("lost the connection to %s while waiting for %s", o->servers, o->path);
		*status = EXIT_UNAVAILABLE;
		break;
	default:
		msg("cannot acquire %s%s: %s%s%s", lock_what(lk), o->path, zkl_strerror(rc),
		    *detail ? ": " : "", detail);
		*status = EXIT_SOFTWARE;
		break;
	}
	return false;
}

/* Holds the lock (acquired) through the command; releases it. Sets *again for a
 * --requeue loop that should go on. */
static int hold_and_run(const struct opts *o, struct lock *lk, struct raw *raw, bool *again)
{
	*again = false;
	int status = 0;
	char *rec = NULL;
	int64_t arrival = 0;

	if (o->once_per_s > 0) {
		/* Read the record while holding the lock: a run in progress elsewhere has
		 * finished (and recorded) before we get here. */
		rec = record_path(o->path);
		arrival = arrival_ms(lk);
		if (!rec || arrival <= 0) {
			msg("cannot tell when %s was asked for", o->path);
			status = EXIT_SOFTWARE;
		}
		if (status == 0 && !raw->zh)
			status = raw_open(o, raw);
		bool recent = false;
		int64_t last = 0;
		char by[300];
		if (status == 0)
			status = once_check(raw, rec, arrival, o->once_per_s, &recent, &last, by,
			                    sizeof by);
		if (status == 0 && recent) {
			char ago[32], at[40];
			format_age(ago, sizeof ago, arrival - last);
			format_utc(at, sizeof at, last);
			if (!o->quiet)
				msg("%s already ran %s ago (at %s, by %s): not again within %ld s",
				    o->path, ago, at, *by ? by : "unknown", o->once_per_s);
			set_phase(PH_DONE);
			lock_release(lk);
			free(rec);
			return 0;
		}
		if (status != 0) {
			set_phase(PH_DONE);
			lock_release(lk);
			free(rec);
			return status;
		}
	}

	struct outcome out = run_command(o, lk);
	status = out.status;
	if (rec && out.ran && status == 0 && !out.lost && !out.revoked) {
		/* Only while the lock is still ours. */
		pthread_mutex_lock(&st.mu);
		bool lost = st.lost;
		pthread_mutex_unlock(&st.mu);
		if (!lost && lock_token(lk) > 0)
			status = once_record(raw, rec, arrival, lk->id);
	}
	free(rec);

	int rc = lock_release(lk);
	pthread_mutex_lock(&st.mu);
	bool lost = st.lost || out.lost;
	int any_signal = st.any_signal;
	pthread_mutex_unlock(&st.mu);
	if (o->requeue && any_signal == 0 && out.ran) {
		/* --requeue: leadership was given up (or lost, and the command stopped): join
		 * the election again, at the back. */
		if (lost)
			msg("leadership of %s lost; joining the election again", o->path);
		else if (o->verbose)
			msg("%s exited with status %d; joining the election of %s again", o->cmd[0],
			    status, o->path);
		*again = true;
		return status;
	}
	if (rc == ZKL_ELOST || lost) {
		if (!out.lost)
			msg("lock on %s lost", o->path);
		return EXIT_SOFTWARE;
	}
	if (out.revoked) {
		msg("%s revoked: %s stopped and the lock released", o->path, o->cmd[0]);
		return EXIT_REVOKED;
	}
	if (rc != 0) {
		/* The node goes with the session when the client closes. */
		const char *detail = zkl_last_error();
		msg("releasing %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "", detail);
	} else if (o->verbose) {
		msg("released %s%s", lock_what(lk), o->path);
	}
	return status;
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
	struct lock lk;
	struct raw raw;
	memset(&lk, 0, sizeof lk);
	memset(&raw, 0, sizeof raw);
	int status = open_client(o, &c);
	if (status == 0 && o->verbose)
		zkl_client_add_listener(c, on_state, NULL);
	if (status == 0)
		status = lock_new(o, c, &lk);
	for (bool again = status == 0; again;) {
		pthread_mutex_lock(&st.mu);
		st.lk = &lk;
		st.lost = false;
		pthread_mutex_unlock(&st.mu);
		again = false;
		pthread_t progress;
		bool progressing = false;
		if (acquire(o, &lk, &status, &progress, &progressing))
			status = hold_and_run(o, &lk, &raw, &again);
		if (progressing)
			pthread_join(progress, NULL);
		if (again) {
			/* --requeue: a fresh latch, at the back of the election. */
			detach_lock();
			if (leader_new(&lk) != 0) {
				msg("%s: %s", o->path, zkl_last_error());
				status = EXIT_SOFTWARE;
				again = false;
			}
		}
	}

	/* Stop the signal thread before freeing what it may touch (st.lk). */
	pthread_mutex_lock(&st.mu);
	st.phase = PH_EXIT;
	pthread_mutex_unlock(&st.mu);
	pthread_kill(sig_tid, SIGCHLD);
	pthread_join(sig_tid, NULL);

	lock_free(&lk); /* releases it if still held (a signal before the command ran) */
	if (raw.zh)
		raw_close(&raw);
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
	if (status == 0 && o.help) {
		print_usage();
		status = fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	} else if (status == 0 && o.version) {
		printf("zklock (zklocks) %s\n", zkl_version());
		status = fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	} else if (status == 0 && (status = resolve_servers(&o)) == 0) {
		switch (o.command) {
		case CMD_STATUS:
			status = run_status(&o);
			break;
		case CMD_LIST:
			status = run_list(&o);
			break;
		case CMD_REVOKE:
			status = run_revoke(&o);
			break;
		case CMD_RUN:
		default:
			status = run_lock(&o);
			break;
		}
	}
	free(o.servers_buf);
	for (int i = 0; i < nconfig_strings; i++)
		free(config_strings[i]);
	return status;
}
