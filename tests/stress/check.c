/* stress-check: the verdict of a stress run, from the resource's log, the fault
 * injector's log and the servers themselves.
 *
 *   stress-check now                      print CLOCK_MONOTONIC in ns (for scripts)
 *   stress-check report --log FILE --faults FILE --servers S --prefix P --paths N
 *                --session-timeout MS --start NS --end NS [--stall-limit MS]
 *                [--leak-wait MS] [--meta TEXT]
 *
 * report prints one summary line on stdout, details of anything wrong on stderr, and
 * exits 0 only if there was no violation and no leaked node (1 otherwise, 2 on usage or
 * input errors).
 *
 * Design notes
 *
 * A critical section (one hold: client + section number) is rebuilt from the resource's
 * log: its accepted writes give its interval [time of the first, time of the last], in
 * the workers' CLOCK_MONOTONIC (E carries the moment acquire returned, L the moment just
 * before release). Violations:
 *   overlap    two sections on one path whose intervals intersect. The resource orders
 *              writes by token, so its own order can never show an overlap; client time
 *              can: it shows a holder that got the lock while the previous one was still
 *              writing. Only the part of a section after a fault that took the hold
 *              away without the library being able to know is excused: after its session
 *              was expired from outside (the worker notes when), or after its process was
 *              stopped (the injector logs when; a stop during its acquire counts too).
 *   tokens     accepted tokens on a path that go down, the same token for two sections,
 *              or a section that writes again after another section has written.
 *   unreported a write rejected as stale, yet the library never reported the hold lost
 *              (the worker waits 2 x session timeout + 5 s for it).
 *   nocallback a release returned ZKL_ELOST for a hold the library had already called
 *              lost (is_held false), but no lost callback came. (When the release itself
 *              finds the loss, its ZKL_ELOST is the report: counted, not a violation.)
 *   mismatch   the hold looked lost (is_held false or a lost callback) but release
 *              returned 0.
 *   stall      no section began on a path for longer than --stall-limit (default
 *              60 s): a node left behind by a live session blocks its path this way.
 *   crash      a worker process that was not killed by the injector and did not say
 *              "exit" at the end.
 * Leaked nodes: nodes the workers found still owned by their own live sessions once
 * all their threads had released ("leak" notes), plus the children left under the lock
 * paths once every worker has exited and every session could have expired (waited for
 * up to --leak-wait ms, default 2 x session timeout + 5 s; --servers - skips this, for
 * the checker's own tests).
 *
 * Errors a fault is expected to cause (an acquire that fails while the ensemble has no
 * quorum, a failed expiry attempt) are listed on stderr but are not violations.
 */
#include <zookeeper/zookeeper.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>

#include "common.h"

#define PROG "stress-check"
#define MAX_PATHS 16

static struct {
	const char *log, *faults, *servers, *prefix, *meta;
	int paths, session_timeout_ms;
	int64_t start_ns, end_ns, stall_limit_ms, leak_wait_ms;
} opt = {.stall_limit_ms = 60000, .leak_wait_ms = -1};

static long violations;

__attribute__((format(printf, 1, 2)))
static void violation(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "VIOLATION: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	violations++;
}

/* ---- Sections ---- */

struct section {
	char key[160];       /* "CLIENT SECTION" */
	char client[128];
	long pid;
	int path;
	long long token;
	int64_t first_t, last_t; /* client times of the accepted writes */
	int accepted;
	bool has_leave;      /* L accepted */
	bool rejected;
	int64_t cut;         /* where an excused part begins, or INT64_MAX */
	struct section *next_in_bucket;
};

#define NBUCKETS 65536
static struct section *buckets[NBUCKETS];
static struct section **all;
static size_t nall, capall;

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % NBUCKETS;
}

static struct section *section_get(const char *client, long sec, bool create)
{
	char key[160];
	snprintf(key, sizeof key, "%s %ld", client, sec);
	unsigned h = hash(key);
	for (struct section *s = buckets[h]; s; s = s->next_in_bucket)
		if (strcmp(s->key, key) == 0)
			return s;
	if (!create)
		return NULL;
	struct section *s = calloc(1, sizeof *s);
	if (!s)
		st_die(PROG, "out of memory");
	snprintf(s->key, sizeof s->key, "%s", key);
	snprintf(s->client, sizeof s->client, "%s", client);
	/* Client ids are NAME.PID.tN. */
	const char *dot = strchr(client, '.');
	s->pid = dot ? strtol(dot + 1, NULL, 10) : 0;
	s->path = -1;
	s->cut = INT64_MAX;
	s->next_in_bucket = buckets[h];
	buckets[h] = s;
	if (nall == capall) {
		capall = capall ? 2 * capall : 4096;
		all = realloc(all, capall * sizeof *all);
		if (!all)
			st_die(PROG, "out of memory");
	}
	all[nall++] = s;
	return s;
}

/* ---- Per path state, in log order ---- */

static struct {
	char name[256];
	long long last_token;
	struct section *owner;
} pathv[MAX_PATHS];
static int npathv;

static int path_index(const char *name)
{
	for (int i = 0; i < npathv; i++)
		if (strcmp(pathv[i].name, name) == 0)
			return i;
	if (npathv == MAX_PATHS)
		st_die(PROG, "more than %d paths in the log", MAX_PATHS);
	snprintf(pathv[npathv].name, sizeof pathv[0].name, "%s", name);
	pathv[npathv].last_token = -1;
	return npathv++;
}

/* ---- Faults and fault-like events ---- */

struct window {
	long pid;           /* worker-stop: the stopped process */
	char client[128];   /* expire: the expired client */
	int64_t t0, t1;
};
static struct window *windows;
static size_t nwindows, capwindows;

/* Worker processes (their notes connection says hello as NAME.PID), whether each said
 * "exit", and the pids the injector killed. */
struct proc {
	char name[128];
	long pid;
	bool exited, killed;
};
static struct proc *procs;
static size_t nprocs, capprocs;

static struct proc *proc_get(long pid, const char *name)
{
	for (size_t i = 0; i < nprocs; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	if (nprocs == capprocs) {
		capprocs = capprocs ? 2 * capprocs : 64;
		procs = realloc(procs, capprocs * sizeof *procs);
		if (!procs)
			st_die(PROG, "out of memory");
	}
	struct proc *p = &procs[nprocs++];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	snprintf(p->name, sizeof p->name, "%s", name ? name : "?");
	return p;
}

static void add_window(long pid, const char *client, int64_t t0, int64_t t1)
{
	if (nwindows == capwindows) {
		capwindows = capwindows ? 2 * capwindows : 64;
		windows = realloc(windows, capwindows * sizeof *windows);
		if (!windows)
			st_die(PROG, "out of memory");
	}
	struct window *w = &windows[nwindows++];
	w->pid = pid;
	snprintf(w->client, sizeof w->client, "%s", client ? client : "");
	w->t0 = t0;
	w->t1 = t1;
}

static const char *fault_kinds[] = {"leader-kill", "pause-short", "pause-long",
                                    "worker-kill", "worker-stop", "expire", "partition"};
#define NKINDS (sizeof fault_kinds / sizeof fault_kinds[0])
static long fault_count[NKINDS];

static void read_faults(void)
{
	FILE *f = fopen(opt.faults, "r");
	if (!f)
		st_die(PROG, "%s: %s", opt.faults, strerror(errno));
	char line[ST_LINE_MAX];
	while (fgets(line, sizeof line, f)) {
		char kind[64], detail[ST_LINE_MAX] = "";
		long long t0, t1;
		if (sscanf(line, "FAULT %63s %lld %lld %1023[^\n]", kind, &t0, &t1, detail) < 3)
			continue;
		for (size_t k = 0; k < NKINDS; k++)
			if (strcmp(kind, fault_kinds[k]) == 0)
				fault_count[k]++;
		if (strcmp(kind, "worker-kill") == 0) {
			const char *p = strstr(detail, "pid=");
			if (p)
				proc_get(strtol(p + 4, NULL, 10), NULL)->killed = true;
		}
		if (strcmp(kind, "worker-stop") == 0) {
			const char *p = strstr(detail, "pid=");
			if (p)
				add_window(strtol(p + 4, NULL, 10), NULL, t0, t1);
		}
	}
	fclose(f);
}

/* ---- The resource's log ---- */

static long rejected_stale, fenced_reported, lost_holds, lost_in_release, leaked_by_workers,
	cycles;
static long expire_ok, expire_failed, errors_seen;

static void on_write(char type, char *rest, long lineno)
{
	char path[256], client[128], kind[8], why[32] = "";
	long long token, at;
	long sec;
	if (sscanf(rest, "%255s %lld %127s %ld %7s %lld %31s", path, &token, client, &sec, kind,
	           &at, why) < 6) {
		violation("log line %ld: cannot parse a write", lineno);
		return;
	}
	int pi = path_index(path);
	struct section *s = section_get(client, sec, true);
	if (s->path < 0) {
		s->path = pi;
		s->token = token;
	} else if (s->path != pi || s->token != token) {
		violation("section %s wrote to %s with token %lld after %s with %lld", s->key, path,
		          token, pathv[s->path].name, s->token);
	}
	if (type == 'R') {
		s->rejected = true;
		if (strcmp(why, "stale") == 0)
			rejected_stale++;
		else
			violation("log line %ld: write of section %s rejected: %s (token %lld)", lineno,
			          s->key, why, token);
		return;
	}
	/* Accepted: tokens only grow on a path, and a section never comes back once another
	 * one has written. */
	if (pathv[pi].owner != s) {
		if (token <= pathv[pi].last_token)
			violation("tokens: %s accepted token %lld of %s after %lld of %s", path, token,
			          s->key, pathv[pi].last_token,
			          pathv[pi].owner ? pathv[pi].owner->key : "?");
		if (s->accepted > 0)
			violation("tokens: section %s wrote on %s again after %s", s->key, path,
			          pathv[pi].owner ? pathv[pi].owner->key : "?");
		pathv[pi].owner = s;
		pathv[pi].last_token = token;
	}
	if (s->accepted == 0 || at < s->first_t)
		s->first_t = at;
	if (s->accepted == 0 || at > s->last_t)
		s->last_t = at;
	s->accepted++;
	if (kind[0] == 'L')
		s->has_leave = true;
}

static void on_note(char *rest, long lineno)
{
	char client[128], what[64];
	int off = 0;
	if (sscanf(rest, "%127s %63s %n", client, what, &off) < 2) {
		violation("log line %ld: cannot parse a note", lineno);
		return;
	}
	const char *args = rest + off;
	if (strcmp(what, "fenced") == 0) {
		if (strstr(args, " unreported "))
			violation("unreported: %s %s (the write was rejected for a newer token, yet "
			          "the library still reported the hold as held)", client, args);
		else
			fenced_reported++;
	} else if (strcmp(what, "lost") == 0) {
		lost_holds++;
		if (strstr(args, " in-release"))
			lost_in_release++;
	} else if (strcmp(what, "nocallback") == 0) {
		violation("nocallback: %s %s (release returned ZKL_ELOST, no lost callback in 10 s)",
		          client, args);
	} else if (strcmp(what, "lost-mismatch") == 0) {
		violation("mismatch: %s %s (stopped on a lost report, yet release returned 0)",
		          client, args);
	} else if (strcmp(what, "leak") == 0) {
		leaked_by_workers++;
		fprintf(stderr, "LEAK: %s: node %s still owned by the worker's live session after "
		                "every thread released\n", client, args);
	} else if (strcmp(what, "expire") == 0) {
		long long t0, t1;
		char ok[16];
		if (sscanf(args, "%lld %lld %15s", &t0, &t1, ok) == 3 && strcmp(ok, "ok") == 0) {
			expire_ok++;
			add_window(0, client, t0, t1);
		} else {
			expire_failed++;
			fprintf(stderr, "note: expiry of %s failed: %s\n", client, args);
		}
	} else if (strcmp(what, "expire-failed") == 0) {
		expire_failed++;
		fprintf(stderr, "note: expiry of %s failed: %s\n", client, args);
	} else if (strcmp(what, "acquire-error") == 0 || strcmp(what, "release-error") == 0 ||
	           strcmp(what, "leak-check-failed") == 0 || strcmp(client, "resource") == 0) {
		errors_seen++;
		fprintf(stderr, "error: %s %s %s\n", client, what, args);
	} else if (strcmp(what, "exit") == 0) {
		const char *dot = strchr(client, '.');
		if (dot)
			proc_get(strtol(dot + 1, NULL, 10), client)->exited = true;
	}
	/* "stats" are for people reading the log. */
}

/* A hello: the notes connection of a worker process is named NAME.PID (its threads'
 * are NAME.PID.tN). */
static void on_hello(char *rest)
{
	char client[128];
	long pid;
	if (sscanf(rest, "%127s %ld", client, &pid) != 2)
		return;
	const char *dot = strchr(client, '.');
	if (dot && !strchr(dot + 1, '.')) {
		struct proc *p = proc_get(pid, client);
		snprintf(p->name, sizeof p->name, "%s", client);
	}
}

static void read_log(void)
{
	FILE *f = fopen(opt.log, "r");
	if (!f)
		st_die(PROG, "%s: %s", opt.log, strerror(errno));
	char line[ST_LINE_MAX * 2];
	long lineno = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		line[strcspn(line, "\n")] = 0;
		if (strlen(line) < 3 || line[1] != ' ')
			continue;
		char *rest = strchr(line + 2, ' '); /* past the resource time */
		if (!rest)
			continue;
		rest++;
		switch (line[0]) {
		case 'A':
		case 'R': on_write(line[0], rest, lineno); break;
		case 'N': on_note(rest, lineno); break;
		case 'H': on_hello(rest); break;
		default: break;
		}
	}
	fclose(f);
}

/* ---- Overlaps ---- */

/* Applies the excused windows: the part of s from the start of a fault that took its
 * hold away is not its own. A stop that began during the acquire (up to a minute
 * before the section's first write) excuses the whole section. */
static void apply_cuts(struct section *s)
{
	for (size_t i = 0; i < nwindows; i++) {
		const struct window *w = &windows[i];
		bool mine = w->client[0] ? strcmp(w->client, s->client) == 0 : w->pid == s->pid;
		if (!mine)
			continue;
		if (w->t0 > s->last_t || w->t1 < s->first_t - 60 * (int64_t)1000000000)
			continue;
		int64_t cut = w->t0 > s->first_t ? w->t0 : s->first_t;
		if (cut < s->cut)
			s->cut = cut;
	}
}

static int by_start(const void *a, const void *b)
{
	const struct section *x = *(struct section *const *)a, *y = *(struct section *const *)b;
	return x->first_t < y->first_t ? -1 : x->first_t > y->first_t;
}

static int64_t longest_gap[MAX_PATHS];
static long stalls;

static void check_overlaps(void)
{
	struct section **v = malloc((nall ? nall : 1) * sizeof *v);
	if (!v)
		st_die(PROG, "out of memory");
	for (int pi = 0; pi < npathv; pi++) {
		size_t n = 0;
		for (size_t i = 0; i < nall; i++) {
			if (all[i]->path == pi && all[i]->accepted > 0) {
				apply_cuts(all[i]);
				v[n++] = all[i];
			}
		}
		qsort(v, n, sizeof *v, by_start);
		struct section *prev = NULL;
		int64_t prev_end = INT64_MIN;
		int64_t last_start = opt.start_ns;
		for (size_t i = 0; i < n; i++) {
			struct section *s = v[i];
			if (prev && s->first_t < prev_end)
				violation("overlap on %s: %s (token %lld) entered %.3f ms before %s "
				          "(token %lld) left", pathv[pi].name, s->key, s->token,
				          (double)(prev_end - s->first_t) / 1e6, prev->key, prev->token);
			int64_t end = s->last_t < s->cut ? s->last_t : s->cut;
			if (end > prev_end) {
				prev_end = end;
				prev = s;
			}
			if (s->first_t - last_start > longest_gap[pi])
				longest_gap[pi] = s->first_t - last_start;
			last_start = s->first_t;
		}
		if (opt.end_ns > last_start && opt.end_ns - last_start > longest_gap[pi])
			longest_gap[pi] = opt.end_ns - last_start;
		if (longest_gap[pi] > opt.stall_limit_ms * 1000000) {
			stalls++;
			violation("stall on %s: no section began for %.1f s", pathv[pi].name,
			          (double)longest_gap[pi] / 1e9);
		}
	}
	free(v);
	for (size_t i = 0; i < nall; i++)
		if (all[i]->has_leave)
			cycles++;
}

/* ---- Nodes left on the servers ---- */

static void raw_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh; (void)type; (void)state; (void)path; (void)ctx;
}

/* Children left under the lock paths; -1 if the servers cannot be asked. With show,
 * names them on stderr. */
static long count_nodes(zhandle_t *zh, bool show)
{
	long n = 0;
	for (int p = 0; p < opt.paths; p++) {
		char path[512];
		snprintf(path, sizeof path, "%s/p%d", opt.prefix, p);
		struct String_vector kids = {0};
		int rc = zoo_get_children(zh, path, 0, &kids);
		if (rc == ZNONODE)
			continue;
		if (rc != ZOK)
			return -1;
		n += kids.count;
		for (int i = 0; show && i < kids.count; i++) {
			char full[800];
			snprintf(full, sizeof full, "%s/%s", path, kids.data[i]);
			struct Stat st = {0};
			zoo_exists(zh, full, 0, &st);
			fprintf(stderr, "LEAK: %s (session 0x%llx) left after every worker exited\n",
			        full, (unsigned long long)st.ephemeralOwner);
		}
		deallocate_String_vector(&kids);
	}
	return n;
}

static long leftover_nodes(void)
{
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	zhandle_t *zh = zookeeper_init(opt.servers, raw_watcher, 10000, NULL, NULL, 0);
	if (!zh)
		st_die(PROG, "zookeeper_init: %s", strerror(errno));
	for (int i = 0; i < 1500 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
		st_sleep_ms(10);
	int64_t wait = opt.leak_wait_ms >= 0 ? opt.leak_wait_ms
	                                     : 2 * (int64_t)opt.session_timeout_ms + 5000;
	int64_t end = st_now_ns() + wait * 1000000;
	long n;
	for (;;) {
		n = count_nodes(zh, false);
		if (n == 0 || st_now_ns() >= end)
			break;
		st_sleep_ms(200);
	}
	if (n > 0)
		count_nodes(zh, true);
	zookeeper_close(zh);
	if (n < 0) {
		fprintf(stderr, "error: could not list the lock paths on %s\n", opt.servers);
		errors_seen++;
		return 0;
	}
	return n;
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr,
	        "usage: " PROG " now\n"
	        "       " PROG " report --log FILE --faults FILE --servers S --prefix P --paths N\n"
	        "              --session-timeout MS --start NS --end NS [--stall-limit MS]\n"
	        "              [--leak-wait MS] [--meta TEXT]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "now") == 0) {
		printf("%" PRId64 "\n", st_now_ns());
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "report") != 0)
		usage();
	static const struct option longopts[] = {
		{"log", required_argument, NULL, 'l'},
		{"faults", required_argument, NULL, 'f'},
		{"servers", required_argument, NULL, 's'},
		{"prefix", required_argument, NULL, 'P'},
		{"paths", required_argument, NULL, 'p'},
		{"session-timeout", required_argument, NULL, 'T'},
		{"start", required_argument, NULL, 'b'},
		{"end", required_argument, NULL, 'e'},
		{"stall-limit", required_argument, NULL, 'L'},
		{"leak-wait", required_argument, NULL, 'w'},
		{"meta", required_argument, NULL, 'm'},
		{NULL, 0, NULL, 0},
	};
	optind = 2;
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'l': opt.log = optarg; break;
		case 'f': opt.faults = optarg; break;
		case 's': opt.servers = optarg; break;
		case 'P': opt.prefix = optarg; break;
		case 'p': opt.paths = (int)st_parse_int(PROG, "--paths", optarg); break;
		case 'T': opt.session_timeout_ms = (int)st_parse_int(PROG, "--session-timeout", optarg); break;
		case 'b': opt.start_ns = st_parse_int(PROG, "--start", optarg); break;
		case 'e': opt.end_ns = st_parse_int(PROG, "--end", optarg); break;
		case 'L': opt.stall_limit_ms = st_parse_int(PROG, "--stall-limit", optarg); break;
		case 'w': opt.leak_wait_ms = st_parse_int(PROG, "--leak-wait", optarg); break;
		case 'm': opt.meta = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || !opt.log || !opt.faults || !opt.servers || !opt.prefix ||
	    opt.paths < 1 || opt.paths > MAX_PATHS || !opt.session_timeout_ms || !opt.start_ns ||
	    !opt.end_ns)
		usage();

	read_faults();
	read_log();
	check_overlaps();
	long leaked = leaked_by_workers + (strcmp(opt.servers, "-") == 0 ? 0 : leftover_nodes());
	if (cycles == 0)
		violation("no critical section completed: nothing was tested");
	for (size_t i = 0; i < nprocs; i++)
		if (!procs[i].exited && !procs[i].killed)
			violation("worker %s (pid %ld) ended without finishing its run (crashed? see "
			          "its log)", procs[i].name, procs[i].pid);

	for (int pi = 0; pi < npathv; pi++)
		fprintf(stderr, "path %s: longest wait for a new holder %.1f s\n", pathv[pi].name,
		        (double)longest_gap[pi] / 1e9);
	fprintf(stderr, "expiries done %ld (failed %ld), lost holds %ld (found by release itself "
	                "%ld), fenced and reported %ld, unexpected errors %ld, sections %zu\n",
	        expire_ok, expire_failed, lost_holds, lost_in_release, fenced_reported, errors_seen,
	        nall);

	printf("stress: %ld cycles", cycles);
	if (opt.meta)
		printf(" (%s)", opt.meta);
	printf(", faults:");
	for (size_t k = 0; k < NKINDS; k++)
		printf("%s %s %ld", k ? "," : "", fault_kinds[k], fault_count[k]);
	printf("; lost %ld, rejected-stale %ld; violations %ld; leaked nodes %ld\n", lost_holds,
	       rejected_stale, violations, leaked);
	return violations == 0 && leaked == 0 ? 0 : 1;
}
