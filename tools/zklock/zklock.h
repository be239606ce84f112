/* zklock: run a command while holding a ZooKeeper lock, flock(1) across machines.
 * What the files of tools/zklock/ share; each file opens with its own design notes.
 * zklock uses the public API of zklocks alone (no <zookeeper/zookeeper.h>), on one
 * ZooKeeper session.
 *
 *   main.c      what to do: run the command under the lock, or a subcommand
 *   options.c   the command line (values.c: its values); config.c the config files;
 *               usage.c --help
 *   session.c   the client
 *   lock.c      the lock, whichever kind, over the shared verbs of <zklocks/lock.h>
 *   run.c       acquire, hold through the command, release (--requeue, --once-per)
 *   signals.c   the phases, the signal thread
 *   child.c     the command: its process group, terminal, environment, kill on loss
 *   watchdog.c  the process that ends the command's group if zklock cannot
 *   deadline.c  the loss deadline a holder publishes for `status` on its host
 *   once.c      --once-per: the record of the last run; `zklock forget`; record.c
 *               that record's lines, read and written (pure)
 *   hold.c      `zklock hold` (a maintenance hold, kept by the server for a time) and
 *               `zklock release`
 *   schedule.c  cron expressions: the schedule times around an instant (schedule.h;
 *               self-contained, with zone.c, the time zones); slot.c what a scheduled
 *               run does in its slot: run, done, too late, and the slots missed
 *               (slot.h; pure); scheduled.c the options and records of --schedule
 *   metrics.c   --metrics-file: the run in Prometheus' text format
 *   notify.c    systemd's notification socket (READY=1, STATUS=, EXTEND_TIMEOUT_USEC=)
 *   output.c    messages, text and JSON
 *   status.c    `zklock status` and `zklock list`; revoke.c `zklock revoke`; check.c
 *               `zklock check` (all read the tree with zkl_inspect()); prune.c
 *               `zklock prune`
 */
#ifndef ZKLOCK_ZKLOCK_H
#define ZKLOCK_ZKLOCK_H

#include <zklocks/zklocks.h>

#include "slot.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

/* Exit codes, as sysexits.h and a shell have them. */
enum {
	EXIT_USAGE = 64,       /* EX_USAGE */
	EXIT_COUNT = 65,       /* EX_DATAERR: --semaphore N differs from the count recorded */
	EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: no ZooKeeper server answered */
	EXIT_SOFTWARE = 70,    /* EX_SOFTWARE: ZooKeeper or internal failure, lock lost */
	EXIT_REVOKED = 71,     /* the lock was revoked (zklock revoke, SIGUSR1) */
	EXIT_CONFIG = 78,      /* EX_CONFIG: the server cannot do what is asked (zklock hold
	                        * on a server without TTL nodes) */
	EXIT_MAX_RUNTIME = 124, /* the command ran past --max-runtime (as timeout(1)) */
	EXIT_NOEXEC = 126,     /* the command exists but cannot be executed */
	EXIT_NOTFOUND = 127,   /* the command was not found */
};

#define DEFAULT_SERVERS "127.0.0.1:2181"
#define DEFAULT_KILL_GRACE_MS 10000
/* The grace on a loss by a deleted node: SIGKILL follows the kill signal no later than
 * this (the next holder may run already; see run_command). */
#define DELETED_KILL_GRACE_MS 100
#define DEFAULT_TOKEN_ENV "ZKLOCK_TOKEN"
/* How the previous holder left, for the command of an exclusive lock: how its command
 * ended as its release said it ("exited N", "signal N", "max-runtime", "revoked"),
 * "released" (its release said nothing of it), "vanished" or "none". */
#define PREVIOUS_ENV "ZKLOCK_PREVIOUS"
#define SYSTEM_CONFIG "/etc/zklock.conf"

enum mode { MODE_MUTEX, MODE_READ, MODE_WRITE, MODE_SEMAPHORE, MODE_LEADER };
enum command { CMD_RUN, CMD_STATUS, CMD_LIST, CMD_REVOKE, CMD_FORGET, CMD_CHECK, CMD_COUNT, CMD_PRUNE,
               CMD_HOLD, CMD_RELEASE };

/* A check's thresholds (zklock check): warning and critical, each -1 when not set. */
struct threshold {
	int64_t warn, crit;
};

struct opts {
	const char *servers;    /* as given (command line, environment, config, default) */
	int count;              /* zklock count PATH N: N */
	char *servers_buf;      /* servers with the config's chroot appended, if any */
	const char *chroot;     /* from the config file */
	const char *auth;       /* "user:password", from the config file */
	/* TLS and SASL (options or config file; zkl_client(3), SECURE CONNECTIONS) */
	const char *tls_ca, *tls_cert, *tls_key;
	const char *sasl_mechanism, *sasl_user, *sasl_password_file;
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
	bool dry_run;           /* prune --dry-run */
	zkl_lock_folders lock_folders; /* --lock-folders, lock_folders in a config file */
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
	int64_t max_runtime_ms; /* 0: off */
	int64_t warn_after_ms;  /* 0: off */
	int64_t lock_delay_ms;  /* --lock-delay: wait after a vanished holder; 0: off */
	bool previous;          /* --previous: ZKLOCK_PREVIOUS (--lock-delay implies it) */
	const char *metrics_file; /* --metrics-file, or NULL */
	const char *job_name;   /* --job-name, else the command's name */
	/* zklock check: ms for the ages, a count for the waiters */
	struct threshold held_longer, waiters_more, last_run_older;
	const char *clock_node; /* the node check writes to read the server's time */
	bool last_failed;       /* check --last-failed */
	struct threshold missed_slots; /* check --missed-slots */
	/* --schedule (scheduled.c): the expression as given, its zone, the parsed schedule
	 * (NULL: not scheduled), --catch-up, --start-deadline (ms; 0: none) */
	const char *schedule_expr, *tz;
	struct schedule *sched;
	enum catch_up catch_up;
	bool catch_up_given;
	int64_t start_deadline_ms;
	int64_t splay_ms;       /* --splay: at most this long a random wait first; 0: none */
	int64_t hold_for_ms;    /* zklock hold --for; 0: not given */
	const char *reason;     /* zklock hold --reason */
	const char *path;
	char **cmd;             /* NULL-terminated, points into argv */
};

/* ---- options.c, config.c, usage.c ---- */

/* Fills o from the config files, the environment and argv. Returns 0, or an exit code
 * after reporting a usage error. */
int parse_args(int argc, char **argv, struct opts *o);
/* The servers string to connect to: the config's chroot goes after servers that have
 * none. Returns 0 or an exit code. */
int resolve_servers(struct opts *o);
/* A decimal integer in [min, max], nothing else. */
bool parse_int(const char *s, long min, long max, int *out);
/* A duration: seconds > 0 (decimals allowed), or with a unit s, m, h or d, to whole ms. */
bool parse_duration(const char *s, int64_t *ms);
/* A check's threshold "WARN", "WARN,CRIT" or ",CRIT": durations to ms, or with count
 * numbers >= 0. */
bool parse_threshold(const char *s, bool count, struct threshold *t);
/* values.c, the other values of options: a decimal number (digits, at most one '.');
 * seconds >= 0 to whole ms; an interval (a positive whole number of seconds, or of s,
 * m, h or d); a Prometheus label value (valid UTF-8, no control characters); a signal
 * (a name with or without SIG, any case, or a number); an environment variable name. */
bool decimal(const char *s);
bool parse_seconds(const char *s, double *secs, int *ms);
bool parse_interval(const char *s, long *secs);
bool valid_label(const char *s);
bool parse_signal(const char *s, int *sig);
bool valid_env_name(const char *s);
/* Reads the config files into o. Returns 0 or an exit code after reporting. */
int read_configs(struct opts *o);
/* Frees what the config files left (strings o points to). */
void config_free(void);
void print_usage(void);

/* ---- output.c ---- */

/* "zklock: <message>" on stderr, a line at once. */
void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, with a hint to --help; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reports a failed library call on path; returns the exit code for it. */
int report_failure(const char *what, const char *path, int rc);
/* Writes up to outsz-1 bytes of a printable form of data into out: printable ASCII as
 * is, a backslash as "\\", anything else as "\xHH"; "..." marks a cut. */
void printable(char *out, size_t outsz, const char *data, size_t len);
/* The same, full length, to f. */
void print_printable(FILE *f, const char *data, size_t len);
/* A JSON string (NULL: null). */
void print_json_string(FILE *f, const char *s, size_t len);
void print_json_cstr(FILE *f, const char *s);
/* "2024-05-01T12:00:03.123Z" for ms since the epoch ("-" for none). */
void format_utc(char *buf, size_t size, int64_t ms);
/* "3 s", "5 min", "2 h", "1 d" */
void format_age(char *buf, size_t size, int64_t ms);
/* Splits "<host>:<pid>" data (zklock's, zklocks'); false for anything else. */
bool host_pid(const char *data, size_t len, char *host, size_t size, long *pid);

/* ---- time (CLOCK_MONOTONIC) ---- */

static inline struct timespec now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static inline double seconds_since(struct timespec t0)
{
	struct timespec t = now();
	return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

static inline bool reached(struct timespec deadline)
{
	struct timespec t = now();
	return t.tv_sec > deadline.tv_sec ||
	       (t.tv_sec == deadline.tv_sec && t.tv_nsec >= deadline.tv_nsec);
}

/* t plus ms (which may be more than an int holds). */
static inline struct timespec plus_ms(struct timespec t, int64_t ms)
{
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static inline struct timespec after_ms(int ms)
{
	return plus_ms(now(), ms);
}

/* ---- session.c ---- */

/* "auto", "container" or "persistent": false for anything else. */
bool parse_lock_folders(const char *s, zkl_lock_folders *out);
/* Opens the client. Returns 0 or an exit code after reporting. */
int open_client(const struct opts *o, zkl_client **out);
/* -v: reports the connection's state changes. */
void on_state(zkl_client *c, zkl_state state, void *data);

/* Who is queued at path, for every layout (zkl_inspect()), waiting at most a session
 * timeout for the answers. *in is the caller's: zkl_inspection_free(). */
int inspect_path(zkl_client *c, const char *path, zkl_inspection **in);
/* Connects (open_client()) and inspects o->path: 0 with *c and *in the caller's, or an
 * exit status after reporting, with nothing left open. */
int open_inspected(const struct opts *o, zkl_client **c, zkl_inspection **in);
/* The same for every lock in use under prefix (zkl_inspect_prefix()). */
int inspect_prefix(zkl_client *c, const char *prefix, zkl_inspection **in);
/* The --once-per records under prefix, whether their locks are in use or not
 * (zkl_record_find(): *paths is the caller's to free()). */
int find_records(zkl_client *c, const char *prefix, char ***paths, size_t *n);

/* The k-th node of lock li of in (k < li->count). */
static inline const zkl_node_info *lock_node(const zkl_inspection *in,
                                             const zkl_lock_info *li, size_t k)
{
	return zkl_inspection_node(in, li->first + k);
}

/* ---- deadline.c ---- */

void deadline_publish(const char *path, const zkl_deadlines *d);
void deadline_unpublish(void);
/* For our own holder on this host: ms until the deadline its watchdog enforces (which
 * may be past, as a negative number), else INT64_MIN. */
int64_t deadline_left(const char *path, const char *host, long pid);

/* ---- output of a queue (output.c) ---- */

/* One lock of an inspection: a line per node (status), or a JSON object (with its
 * --once-per record as "last_run" if r is not NULL). */
struct last_run;
void print_lock_text(FILE *f, const zkl_inspection *in, const zkl_lock_info *li);
void print_lock_json(FILE *f, const zkl_inspection *in, const zkl_lock_info *li,
                     const struct last_run *r);

/* ---- lock.c ---- */

struct lock {
	enum mode mode;
	zkl_client *c;
	const char *path;
	zkl_lock *l;           /* the view of handle, which the shared verbs take */
	void *handle;          /* the mutex, read-write lock, semaphore or latch */
	void (*handle_free)(void *handle);
	char id[300];          /* our node data: "<host>:<pid>" */
	bool tracked;          /* how the previous holder left is told (exclusive kinds) */
	const char *previous;  /* for the command: previous_buf, or NULL (untracked) */
	char previous_buf[ZKL_END_MAX];
	/* How the last command that ran under the lock ended, as the holder before said
	 * (its end, or "vanished"): what our release passes on if our command never ran. */
	char passed_on[ZKL_END_MAX];
	/* More variables for the command ("NAME=value", NULL-terminated; --schedule's
	 * ZKLOCK_SLOT and the rest), or NULL. */
	const char *const *extra_env;
};

/* Makes the handle. Returns 0 or an exit code after reporting. */
int lock_new(const struct opts *o, zkl_client *c, struct lock *lk);
/* Frees it, releasing what it holds. */
void lock_free(struct lock *lk);
/* "leadership of " or "", for messages. */
const char *lock_what(const struct lock *lk);
/* Who holds lk's path, in printable form, into buf; false if nobody (or unknown). Sets
 * *ahead to the number of nodes before ours, if ahead is not NULL. */
bool describe_holder(struct lock *lk, char *buf, size_t bufsz, size_t *ahead);

/* ---- signals.c ---- */

enum phase { PH_CONNECTING, PH_WAITING, PH_HELD, PH_RUNNING, PH_DONE, PH_EXIT };

/* Shared between main, the signal thread, the progress thread and the library's
 * callbacks; all under `mu`. */
struct state {
	pthread_mutex_t mu;
	pthread_cond_t cond; /* SIGCHLD arrived, the lock was lost or revoked, phase changed */
	enum phase phase;
	int signal;     /* first SIGINT/SIGTERM/SIGHUP received before the command ran */
	int any_signal; /* first one ever (stops a --requeue loop) */
	bool lost;      /* the lock was lost */
	bool lib_lost;  /* ... and the library has said so (its lost callback) */
	bool node_gone; /* ... because its node was deleted (not by silence or expiry) */
	bool revoked;   /* revocation was asked (zklock revoke, SIGUSR1 while running) */
	pid_t child;    /* the command, leader of its own process group (RUNNING) */
	struct lock *lk;
};
extern struct state st;

void set_phase(enum phase ph);
/* From the library's callbacks: the lock was lost (node_gone: its node was deleted,
 * so that the next holder may run already); revocation was asked (returns whether the
 * lock was still being waited for). */
void note_lost(bool node_gone);
bool note_revoked(void);
/* The thread that takes every signal zklock handles; arg is the sigset_t. */
void *signal_thread(void *arg);

/* ---- child.c ---- */

/* What the child restores before exec: zklock's signal mask and which signals were
 * ignored when it started. Written before the first thread starts, read-only after. */
extern sigset_t orig_mask;
extern bool orig_ignored[NSIG];

/* How the command ended. */
struct outcome {
	int status;   /* zklock's exit status so far */
	bool ran;     /* the command was started */
	bool lost;    /* the lock was lost meanwhile */
	bool revoked; /* revocation was asked */
	bool max_runtime; /* it ran past --max-runtime and was stopped */
	int code;     /* the command's exit status, or -1 */
	int sig;      /* the signal that ended the command, or 0 */
	bool warned;  /* it ran past --warn-after */
};

/* Runs the command while the lock is held. */
struct outcome run_command(const struct opts *o, struct lock *lk);

/* ---- the record beside the lock (record.c) ---- */

/* How a run ended, as the record keeps the last of each. */
enum run_kind { RUN_SUCCEEDED, RUN_FAILED, RUN_MAX_RUNTIME, RUN_SIGNAL, RUN_REVOKED,
                RUN_LOST, RUN_VANISHED, RUN_KINDS };
/* "succeeded", "failed", "max-runtime", "signal", "revoked", "lost", "vanished" */
const char *run_kind_name(enum run_kind k);

/* The last run of one outcome. */
struct run_outcome {
	bool set;
	int n;               /* failed: its exit status; signal: the signal; else 0 */
	int64_t slot_ms;     /* 0: not scheduled */
	int64_t started_ms;  /* it asked for the lock (its node's creation) */
	int64_t finished_ms; /* its release wrote the record; lost and vanished: when the
	                      * successor that found it so wrote it */
	char by[300];        /* "<host>:<pid>", printable */
};

/* The record beside the lock as a scheduled run reads and writes it: the first line as
 * --once-per's ("<started ms> <host>:<pid>", the last success; "-" for none), then
 * lines of a scheduled job:
 *   slot <ms>                              the last success's slot
 *   run <kind> <n> <slot> <started> <finished> <by>
 *                                          the last run of each outcome (finished 0:
 *                                          the record's own write)
 *   running <slot> <started> <token> <by>  a run started its command and has not ended
 *                                          under the lock (yet)
 *   missed <total> <first> <last> <recent> slots recorded missed in all, the first and
 *                                          last of the latest, and how many were missed
 *                                          since the success before the last one
 * A reader that knows the first line alone reads the rest as nothing. */
struct slot_record {
	bool found;
	int64_t started_ms;  /* 0: no success */
	char by[300];
	int64_t finished_ms; /* the succeeded line's, else the record's write (mtime) */
	int64_t slot_ms;     /* 0: not said */
	int64_t missed, missed_first_ms, missed_last_ms, missed_recent;
	struct run_outcome runs[RUN_KINDS];
	struct run_outcome running; /* n: the low bits of no use; token in running_token */
	int64_t running_token;
	int64_t mtime;
};
/* The outcome whose run finished last (RUN_KINDS: none). */
enum run_kind slot_record_last(const struct slot_record *r);
/* Parses buf (NUL-terminated) written at mtime into *r. */
void slot_record_parse(const char *buf, int64_t mtime, struct slot_record *r);
/* The record's data for r, into buf (size: RECORD_DATA_MAX); outcomes whose finished_ms
 * is 0 are this write's. Returns its length. */
#define RECORD_DATA_MAX 4096
size_t slot_record_format(char *buf, size_t size, const struct slot_record *r);

/* ---- once.c ---- */

/* <path>.last-run, malloc'ed (the caller frees it), or NULL. */
char *record_path(const char *path);
/* The server time at which our node was created (when we asked for the lock), or 0. */
int64_t arrival_ms(struct lock *lk);
/* Whether the last successful run is recent. Fills *last and *by (the record's data),
 * *mtime (if not NULL) with when the record was written (server time, 0: none), and
 * *exists with whether there is a record. */
int once_check(zkl_client *c, const char *rec, int64_t arrival, long interval_s,
               bool *recent, int64_t *last, char *by, size_t bysize, int64_t *mtime,
               bool *exists);
/* Records a successful run and releases the lock, in one transaction that also checks
 * our node (exists: whether once_check() found a record). *mtime (if not NULL) gets when
 * it was written, on the server's clock; *release the release's code, as
 * zkl_lock_release() returns it (ZKL_ELOST: our node was gone, nothing recorded).
 * Returns 0 or an exit code after reporting. */
int once_record(struct lock *lk, const char *rec, int64_t arrival, bool exists,
                int64_t *mtime, int *release);
/* The same with the record's data given (--schedule's). */
int record_release(struct lock *lk, const char *rec, const char *data, size_t len,
                   bool exists, int64_t *mtime, int *release);

/* The --once-per record of a lock path, as status and list show it. */
struct last_run {
	char *node;     /* the record's path (malloc'ed) */
	/* The last successful run, on the server's clock: when it started (asked for the
	 * lock: its lock node's creation, as the record says; 0 if the record does not
	 * say) and when it finished (released the lock: the record's write). */
	int64_t started_ms, finished_ms;
	char by[300];   /* who ran it: zklock's "<host>:<pid>" */
	bool found;
	/* A scheduled job's (0 when the record does not say): the last success's slot,
	 * how many slots were recorded missed, and the latest of them. */
	int64_t slot_ms, missed, missed_last_ms;
	struct slot_record rec; /* all the record says */
};
/* Reads the record of path (path itself if it ends in ".last-run"); r->found is false
 * when there is none. Returns 0 or an exit code after reporting. Free with
 * last_run_free(). */
int last_run_read(zkl_client *c, const char *path, struct last_run *r);
void last_run_free(struct last_run *r);
/* A record's line of `zklock status`: the nine columns of a node's line. */
void print_last_run_text(FILE *f, const struct last_run *r);
/* Its JSON object ("null" when there is none). */
void print_last_run_json(FILE *f, const struct last_run *r);
/* A scheduled job's last outcome ("failed 3", "succeeded"...; "-": none) into buf. */
void last_outcome_text(char *buf, size_t size, const struct last_run *r);

/* ---- metrics.c ---- */

/* What one run did, for --metrics-file. */
struct report {
	double wait_s;           /* waiting for the lock (also when it was not acquired) */
	double hold_s;           /* from the grant to the release */
	int status;              /* zklock's exit status for the run */
	bool ran;                /* the command was started */
	bool busy;               /* skipped: not acquired in time (-w, -n) */
	bool once;               /* skipped: --once-per found it done */
	bool slot_done;          /* skipped: --schedule found its slot done */
	bool slot_late;          /* skipped: --schedule arrived past --start-deadline */
	bool lost, revoked, max_runtime, warned;
	int64_t success_ms;      /* server time of the last successful run, 0 if unknown */
	struct slot_record record; /* --schedule: the record as read or written (.found) */
};

/* Checks that FILE's folder can take the file. Returns 0 or an exit code after
 * reporting. */
int metrics_check(const char *file);
/* Writes r to o->metrics_file (temporary file and rename). Reports a failure on stderr;
 * returns whether it was written. */
bool metrics_write(const struct opts *o, const struct report *r);

/* ---- notify.c: systemd (Type=notify) ---- */

/* Takes NOTIFY_SOCKET from the environment (and removes it there, so that the command
 * does not inherit it). Before any thread starts. Returns whether it is set. */
bool notify_init(void);
/* Whether NOTIFY_SOCKET was set. */
bool notify_enabled(void);
/* Sends one datagram of "KEY=value" lines (printf format); nothing without a socket. */
void notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void notify_close(void);

/* ---- the subcommands and the run (status.c, revoke.c, check.c, once.c, run.c) ---- */

int run_status(const struct opts *o);
int run_count(const struct opts *o);
int run_list(const struct opts *o);
int run_revoke(const struct opts *o);
int run_forget(const struct opts *o);
int run_check(const struct opts *o);
int run_prune(const struct opts *o);
int run_lock(const struct opts *o);

/* ---- scheduled.c: --schedule, --tz, --catch-up, --start-deadline ---- */

/* The options scheduled.c parses, as sched_option() takes them. */
enum sched_opt { SCHED_OPT_SCHEDULE, SCHED_OPT_TZ, SCHED_OPT_CATCH_UP,
                 SCHED_OPT_START_DEADLINE, SCHED_OPT_LAST_FAILED, SCHED_OPT_MISSED_SLOTS,
                 SCHED_OPT_SPLAY };
/* The variables a scheduled run's command gets. */
#define SLOT_ENV "ZKLOCK_SLOT"
#define MISSED_ENV "ZKLOCK_MISSED"
#define MISSED_FROM_ENV "ZKLOCK_MISSED_FROM"
/* Test only: ms added to the server's time as the schedule sees a run's arrival, so that
 * a test puts a slot's start where it wants it (every host of a test the same). */
#define SHIFT_ENV "ZKLOCK_TEST_SLOT_SHIFT_MS"

/* Takes one option's argument into o. Returns 0 or an exit code after reporting. */
int sched_option(int which, const char *arg, struct opts *o);
/* Whether any of a run's (--schedule, --tz, --catch-up, --start-deadline, --splay) was given
 * (--last-failed and --missed-slots are zklock check's). */
bool sched_opts_given(const struct opts *o);
/* How they combine with the rest of a run's options; parses the schedule in its zone.
 * Returns 0 or an exit code after reporting. */
int sched_check_opts(struct opts *o);


/* A scheduled run between its grant and its release. */
struct sched_run {
	char *rec;              /* the record's path */
	struct slot_record r;   /* as read under the lock */
	struct slot_plan plan;
	int64_t arrival_ms;     /* our node's creation, the server's clock */
	int64_t last_slot_ms;   /* the last success's slot (0: none) */
	char env[3][64];
	const char *envp[4];
};
/* Reads the record under the lock and plans the run (run.c acts on sr->plan.action;
 * with SLOT_RUN, lk->extra_env is set). Returns 0 or an exit code after reporting. */
int sched_begin(const struct opts *o, struct lock *lk, struct sched_run *sr);
/* A run that does not start its command (done, late, no slot): says why (but with -q),
 * records a late slot as missed, and releases the lock (in one transaction when it
 * records). Returns zklock's exit status. */
int sched_skip(const struct opts *o, struct lock *lk, struct sched_run *sr, struct report *rep);
/* The command succeeded: records the slot's success and releases the lock in one
 * transaction, as once_record(). */
int sched_record(const struct opts *o, struct lock *lk, struct sched_run *sr, int64_t *mtime,
                 int *release, struct report *rep);
/* Before the command starts: records that it runs (the "running" line, guarded by our
 * node), and the run before it that did not end under the lock as lost or vanished.
 * Returns 0 or an exit code after reporting. */
int sched_start(struct lock *lk, struct sched_run *sr);
/* The command did not succeed and the lock is still ours: records how it ended and
 * releases the lock in one transaction. */
int sched_record_end(struct lock *lk, struct sched_run *sr, const struct outcome *out,
                     int *release, struct report *rep);
void sched_run_free(struct sched_run *sr);
/* --splay: waits a random time in [0, T) before the lock is asked for. */
void splay_wait(const struct opts *o);

/* ---- hold.c ---- */

/* --for and --reason: with hold only, and hold needs both. Returns 0 or an exit code
 * after reporting a usage error. */
int check_hold_opts(const struct opts *o);
int run_hold(const struct opts *o);
int run_release(const struct opts *o);
/* A line per maintenance hold queued in lock li, for `zklock status`, of the nine
 * fields of a node's line: "<path>.hold", why, "hold", holding or waiting, who
 * (user@host), "-", until when (UTC, the server's clock), "-", its node's name. */
void print_holds_text(FILE *f, const zkl_inspection *in, const zkl_lock_info *li);

#endif
