/* The command line. Options come before PATH, between PATH and "--", or (for a
 * subcommand) before or after its operand; parse_args() checks how they combine. The
 * library checks paths fully once connected; here only what needs no round trip. */
#include "zklock.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
	OPT_TLS_CA,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_SASL_MECHANISM,
	OPT_SASL_USER,
	OPT_SASL_PASSWORD_FILE,
	OPT_MAX_RUNTIME,
	OPT_WARN_AFTER,
	OPT_METRICS_FILE,
	OPT_JOB_NAME,
	OPT_HELD_LONGER,
	OPT_WAITERS_MORE,
	OPT_LAST_RUN_OLDER,
	OPT_CLOCK_NODE,
	OPT_DRY_RUN,
	OPT_LOCK_FOLDERS,
	OPT_LOCK_DELAY,
	OPT_PREVIOUS,
	OPT_FOR,
	OPT_REASON,
	OPT_SCHEDULE_FIRST, /* scheduled.c's: OPT_SCHEDULE_FIRST + enum sched_opt */
	OPT_SCHEDULE_LAST = OPT_SCHEDULE_FIRST + 16,
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
	{ "tls-ca", required_argument, NULL, OPT_TLS_CA },
	{ "tls-cert", required_argument, NULL, OPT_TLS_CERT },
	{ "tls-key", required_argument, NULL, OPT_TLS_KEY },
	{ "sasl-mechanism", required_argument, NULL, OPT_SASL_MECHANISM },
	{ "sasl-user", required_argument, NULL, OPT_SASL_USER },
	{ "sasl-password-file", required_argument, NULL, OPT_SASL_PASSWORD_FILE },
	{ "max-runtime", required_argument, NULL, OPT_MAX_RUNTIME },
	{ "warn-after", required_argument, NULL, OPT_WARN_AFTER },
	{ "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
	{ "job-name", required_argument, NULL, OPT_JOB_NAME },
	{ "held-longer", required_argument, NULL, OPT_HELD_LONGER },
	{ "waiters-more", required_argument, NULL, OPT_WAITERS_MORE },
	{ "last-run-older", required_argument, NULL, OPT_LAST_RUN_OLDER },
	{ "clock-node", required_argument, NULL, OPT_CLOCK_NODE },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	{ "lock-folders", required_argument, NULL, OPT_LOCK_FOLDERS },
	{ "lock-delay", required_argument, NULL, OPT_LOCK_DELAY },
	{ "previous", no_argument, NULL, OPT_PREVIOUS },
	{ "for", required_argument, NULL, OPT_FOR },
	{ "reason", required_argument, NULL, OPT_REASON },
	{ "schedule", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_SCHEDULE },
	{ "tz", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_TZ },
	{ "catch-up", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_CATCH_UP },
	{ "start-deadline", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_START_DEADLINE },
	{ "splay", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_SPLAY },
	{ "last-failed", no_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_LAST_FAILED },
	{ "missed-slots", required_argument, NULL, OPT_SCHEDULE_FIRST + SCHED_OPT_MISSED_SLOTS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

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
			if (!parse_int(optarg, ZKL_SESSION_TIMEOUT_MIN, ZKL_SESSION_TIMEOUT_MAX,
			               &o->session_timeout_ms))
				return usage_error("invalid session timeout \"%s\": expected %d..%d "
				                   "milliseconds", optarg, ZKL_SESSION_TIMEOUT_MIN,
				                   ZKL_SESSION_TIMEOUT_MAX);
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
		case OPT_TLS_CA:
			o->tls_ca = optarg;
			break;
		case OPT_TLS_CERT:
			o->tls_cert = optarg;
			break;
		case OPT_TLS_KEY:
			o->tls_key = optarg;
			break;
		case OPT_SASL_MECHANISM:
			o->sasl_mechanism = optarg;
			break;
		case OPT_SASL_USER:
			o->sasl_user = optarg;
			break;
		case OPT_SASL_PASSWORD_FILE:
			o->sasl_password_file = optarg;
			break;
		case OPT_DATA:
			if (strlen(optarg) > 4096)
				return usage_error("--data is %zu bytes long: at most 4096", strlen(optarg));
			o->data = optarg;
			break;
		case OPT_MAX_RUNTIME:
		case OPT_WARN_AFTER:
			if (!parse_duration(optarg, c == OPT_MAX_RUNTIME ? &o->max_runtime_ms
			                                                 : &o->warn_after_ms))
				return usage_error("invalid %s \"%s\": expected seconds > 0, or a number "
				                   "with s, m, h or d (such as 90, 1.5h)",
				                   c == OPT_MAX_RUNTIME ? "--max-runtime" : "--warn-after",
				                   optarg);
			break;
		case OPT_LOCK_DELAY:
			if (!parse_duration(optarg, &o->lock_delay_ms))
				return usage_error("invalid --lock-delay \"%s\": expected seconds > 0, or a "
				                   "number with s, m, h or d (such as 30, 2m)", optarg);
			break;
		case OPT_PREVIOUS:
			o->previous = true;
			break;
		case OPT_METRICS_FILE:
			if (*optarg == '\0')
				return usage_error("empty --metrics-file");
			o->metrics_file = optarg;
			break;
		case OPT_JOB_NAME:
			if (*optarg == '\0' || strlen(optarg) > 200 || !valid_label(optarg))
				return usage_error("invalid --job-name \"%s\": expected 1 to 200 bytes of "
				                   "UTF-8 text without control characters", optarg);
			o->job_name = optarg;
			break;
		case OPT_HELD_LONGER:
		case OPT_LAST_RUN_OLDER:
			if (!parse_threshold(optarg, false, c == OPT_HELD_LONGER ? &o->held_longer
			                                                         : &o->last_run_older))
				return usage_error("invalid %s \"%s\": expected WARN, WARN,CRIT or ,CRIT, "
				                   "each seconds > 0 or a number with s, m, h or d (such "
				                   "as 1h,2h)", c == OPT_HELD_LONGER ? "--held-longer"
				                                                   : "--last-run-older",
				                   optarg);
			break;
		case OPT_WAITERS_MORE:
			if (!parse_threshold(optarg, true, &o->waiters_more))
				return usage_error("invalid --waiters-more \"%s\": expected WARN, WARN,CRIT "
				                   "or ,CRIT, each a number of waiters >= 0 (such as 5,10)",
				                   optarg);
			break;
		case OPT_CLOCK_NODE:
			o->clock_node = optarg;
			break;
		case OPT_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_LOCK_FOLDERS:
			if (!parse_lock_folders(optarg, &o->lock_folders))
				return usage_error("invalid --lock-folders \"%s\": expected auto, "
				                   "container or persistent", optarg);
			break;
		case OPT_FOR:
			if (!parse_duration(optarg, &o->hold_for_ms))
				return usage_error("invalid --for \"%s\": expected seconds > 0 or a "
				                   "number with s, m, h or d (such as 2h)", optarg);
			break;
		case OPT_REASON:
			if (!*optarg || strlen(optarg) > 400 || !valid_label(optarg))
				return usage_error("invalid --reason: expected 1 to 400 bytes of UTF-8 "
				                   "text without control characters");
			o->reason = optarg;
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
		default: /* '?', or one of scheduled.c's */
			if (c >= OPT_SCHEDULE_FIRST && c < OPT_SCHEDULE_LAST) {
				int rc = sched_option(c - OPT_SCHEDULE_FIRST, optarg, o);
				if (rc != 0)
					return rc;
				break;
			}
			if (optopt != 0 && optopt < 256)
				return usage_error("invalid option -- '%c'", optopt);
			return usage_error("unrecognized option '%s'", argv[optind - 1]);
		}
	}
	*next = optind;
	return 0;
}

/* ---- arguments ---- */

static int check_path(const char *what, const char *path)
{
	if (path[0] != '/')
		return usage_error("%s \"%s\" is not absolute: it must start with '/'", what, path);
	return 0;
}

static bool has_check_opts(const struct opts *o)
{
	return o->held_longer.warn >= 0 || o->held_longer.crit >= 0 ||
	       o->waiters_more.warn >= 0 || o->waiters_more.crit >= 0 ||
	       o->last_run_older.warn >= 0 || o->last_run_older.crit >= 0 || o->clock_node ||
	       o->last_failed || o->missed_slots.warn >= 0 || o->missed_slots.crit >= 0;
}

/* Options of a run that a subcommand does not take, and the reverse. */
static int check_subcommand_opts(const struct opts *o, const char *name)
{
	if (o->metrics_file || o->job_name || o->max_runtime_ms || o->warn_after_ms ||
	    o->lock_delay_ms || o->previous)
		return usage_error("--metrics-file, --job-name, --max-runtime, --warn-after, "
		                   "--previous and --lock-delay are options of a run, not of "
		                   "zklock %s", name);
	if (sched_opts_given(o))
		return usage_error("--schedule, --tz, --catch-up, --start-deadline and --splay are "
		                   "options of a run, not of zklock %s", name);
	if (o->command != CMD_CHECK && has_check_opts(o))
		return usage_error("--held-longer, --waiters-more, --last-run-older, --last-failed, "
		                   "--missed-slots and --clock-node are options of zklock check, "
		                   "not of zklock %s", name);
	if (o->clock_node)
		return check_path("clock node", o->clock_node);
	return 0;
}

/* The options of a subcommand (status, list, revoke, forget, check, count) come before
 * or after its operands: a path, and for count the count. */
static int parse_subcommand(int argc, char **argv, int next, struct opts *o, const char *what)
{
	int sub_argc = argc - next, sub_next;
	char **sub_argv = argv + next;
	/* A negative count after an operand ("zklock count PATH -1") would be taken for an
	 * option ("invalid option -- '1'"): say what it is. An option's value ("-w -1")
	 * follows the option, not an operand. */
	for (int i = 2; o->command == CMD_COUNT && i < sub_argc; i++) {
		const char *a = sub_argv[i], *prev = sub_argv[i - 1];
		if (strcmp(prev, "--") == 0)
			break;
		if (a[0] == '-' && a[1] && strspn(a + 1, "0123456789") == strlen(a + 1) &&
		    prev[0] != '-')
			return usage_error("count \"%s\" is not a whole number from 0 up", a);
	}
	int rc = parse_opts(sub_argc, sub_argv, true, o, &sub_next);
	if (rc != 0 || o->help || o->version)
		return rc;
	if (sub_next >= sub_argc)
		return usage_error("missing %s", what);
	int operands = o->command == CMD_COUNT ? 2 : 1;
	if (o->command == CMD_COUNT) {
		if (sub_next + 1 >= sub_argc)
			return usage_error("missing count after the %s (zklock count PATH N; 0 "
			                   "clears it)", what);
		char *end = NULL;
		long n = strtol(sub_argv[sub_next + 1], &end, 10);
		if (!*sub_argv[sub_next + 1] || *end || n < 0 || n > INT32_MAX)
			return usage_error("count \"%s\" is not a whole number from 0 up",
			                   sub_argv[sub_next + 1]);
		o->count = (int)n;
	}
	if (sub_next + operands < sub_argc)
		return usage_error("unexpected argument \"%s\" after the %s",
		                   sub_argv[sub_next + operands], what);
	o->path = sub_argv[sub_next];
	return check_path(what, o->path);
}

/* Fills o from the config files, the environment and argv. Returns 0, or an exit code
 * after reporting a usage error. */
int parse_args(int argc, char **argv, struct opts *o)
{
	o->servers = DEFAULT_SERVERS;
	o->wait_ms = ZKL_WAIT_FOREVER;
	o->wait_s = -1;
	o->conflict_code = 1;
	o->kill_signal = SIGTERM;
	o->kill_grace_ms = DEFAULT_KILL_GRACE_MS;
	o->token_env = DEFAULT_TOKEN_ENV;
	o->held_longer = o->waiters_more = o->last_run_older = (struct threshold){ -1, -1 };
	o->missed_slots = (struct threshold){ -1, -1 };

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
		{ "forget", CMD_FORGET, "lock path" },
		{ "check", CMD_CHECK, "lock path or prefix" },
		{ "count", CMD_COUNT, "semaphore path" },
		{ "prune", CMD_PRUNE, "prefix" },
		{ "hold", CMD_HOLD, "lock path" },
		{ "release", CMD_RELEASE, "lock path" },
	};
	for (size_t i = 0; next < argc && i < sizeof subs / sizeof subs[0]; i++) {
		if (strcmp(argv[next], subs[i].name) == 0) {
			o->command = subs[i].cmd;
			rc = parse_subcommand(argc, argv, next, o, subs[i].what);
			if (rc == 0 && !o->help && !o->version)
				rc = check_subcommand_opts(o, subs[i].name);
			if (rc == 0 && o->dry_run && o->command != CMD_PRUNE)
				return usage_error("--dry-run works with prune only");
			if (rc == 0 && !o->help && !o->version)
				rc = check_hold_opts(o);
			return rc;
		}
	}
	if (has_check_opts(o))
		return usage_error("--held-longer, --waiters-more, --last-run-older, --last-failed, "
		                   "--missed-slots and --clock-node are options of zklock check");

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
	if (o->dry_run)
		return usage_error("--dry-run works with prune only");
	if ((rc = check_hold_opts(o)) != 0)
		return rc;
	if (o->modes > 1)
		return usage_error("--read, --write, --semaphore and --leader exclude each other");
	if (o->requeue && o->mode != MODE_LEADER)
		return usage_error("--requeue needs --leader");
	if (o->revocable && o->mode == MODE_LEADER)
		return usage_error("--revocable works with a mutex, --read, --write or "
		                   "--semaphore, not --leader (leadership is given up by "
		                   "stopping the leader)");
	if (o->data && o->revocable)
		return usage_error("--data does not work with --revocable: revocable nodes carry "
		                   "no data, as Curator's do");
	if ((o->lock_delay_ms || o->previous) &&
	    (o->mode == MODE_READ || o->mode == MODE_SEMAPHORE))
		return usage_error("%s works with a mutex or --write, not %s: its holders "
		                   "overlap, so no holder has one previous holder",
		                   o->lock_delay_ms ? "--lock-delay" : "--previous",
		                   o->mode == MODE_READ ? "--read" : "--semaphore");
	if ((o->lock_delay_ms || o->previous) && o->mode == MODE_LEADER)
		return usage_error("%s works with a mutex or --write, not --leader: an election "
		                   "keeps no note of how its leaders leave",
		                   o->lock_delay_ms ? "--lock-delay" : "--previous");
	if (o->naming == ZKL_NAMING_KAZOO && (o->mode == MODE_SEMAPHORE || o->mode == MODE_LEADER))
		return usage_error("--naming kazoo works with a mutex, --read or --write only "
		                   "(kazoo's semaphore and election use other layouts)");
	if (o->warn_after_ms && o->max_runtime_ms && o->warn_after_ms >= o->max_runtime_ms)
		return usage_error("--warn-after must be shorter than --max-runtime");
	if ((rc = sched_check_opts(o)) != 0)
		return rc;
	if (!o->job_name) {
		const char *base = strrchr(o->cmd[0], '/');
		o->job_name = base && base[1] ? base + 1 : o->cmd[0];
		if (!valid_label(o->job_name) || *o->job_name == '\0')
			o->job_name = "zklock";
	}
	return o->metrics_file ? metrics_check(o->metrics_file) : 0;
}

/* The servers string to connect to: the config's chroot goes after servers that have
 * none. Returns 0 or an exit code. */
int resolve_servers(struct opts *o)
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
