/* Maintenance holds: `zklock hold PATH --for DUR --reason TEXT` queues for the lock at
 * PATH like any contender (a mutex, in the naming given), and once it holds, hands the
 * hold to a node that no session owns and that the server deletes DUR later
 * (zkl_lock_keep(): a TTL node in its place in the queue), then exits: the lock stays
 * held after zklock, and the operator's shell, are gone. `zklock release PATH` deletes
 * such nodes at PATH; `zklock status` says who holds, why and until when.
 *
 * The hold's node data, one line that status reads, and that every library's participant
 * list and zklock's "is held by" message show as it is:
 *
 *     zklock-hold by=<user>@<host> for=<ms> reason=<text to the end>
 *
 * Its end is the node's creation (the server's clock) plus "for"; the server deletes it
 * within its container manager's check interval after that. */
#include "zklock.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOLD_MAGIC "zklock-hold "

int check_hold_opts(const struct opts *o)
{
	bool hold = o->command == CMD_HOLD;
	if (!hold && (o->hold_for_ms || o->reason))
		return usage_error("--for and --reason are options of zklock hold");
	if (!hold)
		return 0;
	if (!o->hold_for_ms)
		return usage_error("zklock hold needs --for DUR (such as 2h): a hold never lasts "
		                   "forever; zklock release ends it sooner");
	if (!o->reason)
		return usage_error("zklock hold needs --reason TEXT: status shows it to whoever "
		                   "finds the job held");
	if (o->mode != MODE_MUTEX || o->modes > 0)
		return usage_error("zklock hold holds a mutex (in either --naming); --read, "
		                   "--write, --semaphore and --leader do not apply");
	if (o->revocable || o->data)
		return usage_error("--revocable and --data do not apply to zklock hold (its node "
		                   "says who holds and why)");
	return 0;
}

/* Whether n is a hold's node; fills the fields of its data if so. */
struct hold_info {
	char by[256], reason[512];
	int64_t for_ms;
};

static bool hold_parse(const zkl_node_info *n, struct hold_info *h)
{
	size_t magic = strlen(HOLD_MAGIC);
	if (n->data_len < magic || memcmp(n->data, HOLD_MAGIC, magic) != 0)
		return false;
	memset(h, 0, sizeof *h);
	const char *p = n->data + magic, *end = n->data + n->data_len;
	while (p < end) {
		if ((size_t)(end - p) > 7 && memcmp(p, "reason=", 7) == 0) {
			printable(h->reason, sizeof h->reason, p + 7, (size_t)(end - p) - 7);
			break; /* the reason runs to the end */
		}
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		size_t len = sp ? (size_t)(sp - p) : (size_t)(end - p);
		if (len > 3 && memcmp(p, "by=", 3) == 0)
			printable(h->by, sizeof h->by, p + 3, len - 3);
		else if (len > 4 && memcmp(p, "for=", 4) == 0)
			h->for_ms = strtoll(p + 4, NULL, 10);
		p += len + 1;
	}
	return true;
}

void print_holds_text(FILE *f, const zkl_inspection *in, const zkl_lock_info *li)
{
	for (size_t k = 0; k < li->count; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		struct hold_info h;
		if (!hold_parse(n, &h))
			continue;
		char until[40];
		format_utc(until, sizeof until, h.for_ms > 0 ? n->ctime + h.for_ms : 0);
		/* The nine fields of a node's line, as the --once-per record's. */
		fprintf(f, "%s.hold\t%s\thold\t%s\t%s\t-\t%s\t-\t%s\n", li->path,
		        *h.reason ? h.reason : "-", n->holds ? "holding" : "waiting",
		        *h.by ? h.by : "-", until, n->name);
	}
}

static void who(char *out, size_t size)
{
	char host[256];
	if (gethostname(host, sizeof host) != 0)
		strcpy(host, "unknown");
	host[sizeof host - 1] = '\0';
	const char *user = getenv("SUDO_USER");
	if (!user || !*user)
		user = getenv("USER");
	char uid[32];
	if (!user || !*user) {
		struct passwd pw, *res = NULL;
		char buf[1024];
		if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res)
			snprintf(uid, sizeof uid, "%s", res->pw_name);
		else
			snprintf(uid, sizeof uid, "uid %ld", (long)getuid());
		user = uid;
	}
	snprintf(out, size, "%s@%s", user, host);
	for (char *p = out; *p; p++) {
		if (*p == ' ')
			*p = '_'; /* one word in the data */
	}
}

/* SIGINT, SIGTERM and SIGHUP while hold connects end it (nothing is queued yet); while
 * it waits, withdraw from the queue (exit 128+N); once it holds, they wait for the hand
 * over to end, which takes two round trips. */
static struct {
	pthread_mutex_t mu;
	enum { HS_CONNECTING, HS_WAITING, HS_HOLDING, HS_EXIT } phase;
	zkl_lock *l;
	int sig;
} hs = { PTHREAD_MUTEX_INITIALIZER, HS_CONNECTING, NULL, 0 };

static void *hold_signals(void *arg)
{
	const sigset_t *set = arg;
	for (;;) {
		int sig = sigwaitinfo(set, NULL);
		if (sig < 0)
			continue; /* EINTR */
		pthread_mutex_lock(&hs.mu);
		if (hs.phase == HS_EXIT) {
			pthread_mutex_unlock(&hs.mu);
			return NULL;
		}
		if (hs.phase == HS_CONNECTING)
			_exit(128 + sig);
		if (hs.sig == 0)
			hs.sig = sig;
		if (hs.phase == HS_WAITING)
			zkl_lock_cancel(hs.l);
		pthread_mutex_unlock(&hs.mu);
	}
}

static void hold_phase(int phase, zkl_lock *l)
{
	pthread_mutex_lock(&hs.mu);
	hs.phase = phase;
	hs.l = l;
	pthread_mutex_unlock(&hs.mu);
}

static int hold_acquire_keep(const struct opts *o, zkl_client *c);

int run_hold(const struct opts *o)
{
	static sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	/* Blocked before the client's threads start, which inherit it. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_t tid;
	bool threaded = pthread_create(&tid, NULL, hold_signals, &set) == 0;
	if (!threaded)
		pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* then they end it as by default */
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status == 0) {
		status = hold_acquire_keep(o, c);
		zkl_client_close(c);
	}
	hold_phase(HS_EXIT, NULL);
	if (threaded) {
		pthread_kill(tid, SIGHUP); /* wakes it to see HS_EXIT */
		pthread_join(tid, NULL);
	}
	return status;
}

static int hold_acquire_keep(const struct opts *o, zkl_client *c)
{
	struct lock lk;
	int status = lock_new(o, c, &lk);
	if (status != 0)
		return status;
	hold_phase(HS_WAITING, lk.l);
	int rc = zkl_lock_acquire(lk.l, o->wait_ms);
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());
	pthread_mutex_lock(&hs.mu);
	hs.phase = HS_HOLDING;
	int sig = hs.sig;
	pthread_mutex_unlock(&hs.mu);
	if (rc != 0 && sig != 0) {
		if (o->verbose)
			msg("interrupted by signal %d; withdrew from the queue of %s", sig, o->path);
		status = 128 + sig;
	} else if (rc == ZKL_ETIMEDOUT) {
		char holder[300];
		status = o->conflict_code;
		if (o->quiet) {
			/* as a run: silent on conflict */
		} else if (describe_holder(&lk, holder, sizeof holder, NULL))
			msg("%s is held by %s; no hold taken (gave up after %g s)", o->path, holder,
			    o->wait_s < 0 ? 0.0 : o->wait_s);
		else
			msg("%s is busy; no hold taken (gave up after %g s)", o->path,
			    o->wait_s < 0 ? 0.0 : o->wait_s);
	} else if (rc != 0) {
		msg("cannot acquire %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "",
		    detail);
		status = rc == ZKL_ECONNLOSS ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
	}
	if (status != 0) {
		lock_free(&lk);
		return status;
	}
	char by[300], data[1200], node[ZKL_PATH_MAX + 1];
	who(by, sizeof by);
	int len = snprintf(data, sizeof data, HOLD_MAGIC "by=%s for=%lld reason=%s", by,
	                   (long long)o->hold_for_ms, o->reason);
	if (len < 0 || (size_t)len >= sizeof data)
		len = (int)sizeof data - 1;
	rc = zkl_lock_keep(lk.l, o->hold_for_ms, data, (size_t)len, node, sizeof node);
	snprintf(detail, sizeof detail, "%s", zkl_last_error());
	if (rc == ZKL_ENOTSUP) {
		msg("%s: the server makes no TTL nodes, which a hold needs to outlive zklock: "
		    "set extendedTypesEnabled=true on every server (ZooKeeper 3.5.3 or later); "
		    "nothing is held", o->path);
		status = EXIT_CONFIG;
	} else if (rc != 0) {
		msg("cannot hold %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "",
		    detail);
		status = rc == ZKL_ECONNLOSS ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
	}
	lock_free(&lk);
	if (status == 0 && !o->quiet) {
		/* When it ends, on the server's clock: its creation plus its time. */
		zkl_inspection *in = NULL;
		int64_t until = 0;
		if (inspect_path(c, o->path, &in) == 0) {
			const zkl_lock_info *li = zkl_inspection_lock(in, 0);
			for (size_t k = 0; li && k < li->count; k++) {
				const zkl_node_info *n = lock_node(in, li, k);
				if (strcmp(n->path, node) == 0)
					until = n->ctime + o->hold_for_ms;
			}
			zkl_inspection_free(in);
		}
		char at[40];
		format_utc(at, sizeof at, until);
		msg("holding %s until %s (server time): %s", o->path, at, node);
	}
	return status;
}

int run_release(const struct opts *o)
{
	zkl_client *c;
	zkl_inspection *in;
	int status = open_inspected(o, &c, &in);
	if (status != 0)
		return status;
	const zkl_lock_info *li = zkl_inspection_lock(in, 0);
	size_t released = 0;
	for (size_t k = 0; li && k < li->count && status == 0; k++) {
		const zkl_node_info *n = lock_node(in, li, k);
		struct hold_info h;
		if (!hold_parse(n, &h))
			continue;
		const int rc = zkl_record_delete(c, n->path);
		if (rc == 0) {
			released++;
			if (!o->quiet)
				msg("released the hold of %s by %s (%s)", o->path, *h.by ? h.by : "-",
				    h.reason);
		} else if (rc != ZKL_ENOTHELD) { /* ENOTHELD: ended meanwhile */
			status = report_failure("releasing the hold", n->path, rc);
		}
	}
	if (status == 0 && released == 0) {
		if (!o->quiet)
			msg("%s has no maintenance hold", o->path);
		status = 1;
	}
	zkl_inspection_free(in);
	zkl_client_close(c);
	return status;
}
