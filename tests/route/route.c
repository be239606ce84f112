/* zkl-route: the route of one acquisition through the library's files, counted.
 *
 *   zkl-route [-v | -t]
 *
 * The library's sources are compiled into this program with -finstrument-functions
 * (tests/route/meson.build), on the in-memory ZooKeeper of the unit suite, so every
 * function entry and exit of src/ and recipes/ is seen, on every thread, in the order it
 * happens. Three routes are recorded: a blocking mutex acquire, its release, and an
 * asynchronous acquire up to its callback (which releases). Each runs until the loop
 * has done what the route set off (its answers, lazy ones too, its background delete),
 * so that this work counts in its own route and not in the next; the release is counted
 * a second time up to its return (its own thread's work, and whatever the loop did
 * meanwhile), the window issue 41's release figures have. Each is reduced to the
 * sequence of files that code ran in (an entry runs in the callee's file, an exit goes
 * back to the caller's; code outside src/ and recipes/ is left out), and counted:
 *
 *   stops  runs of consecutive events in one file (a route through 3 files, there and
 *          back, is 5 stops)
 *   back   stops in a file the route had already left before (re-entries)
 *   files  distinct files
 *
 * and, each thread's events taken alone (the route a reader follows, without the
 * interleaving of the threads), stops and back summed over the threads.
 *
 * The routes run 7 times over; each line is the run with the median stops, with
 * the range of the stops over the runs (the threads' interleaving moves them).
 * -v prints each route's sequence of files; -t prints that run's calls, as a tree per
 * thread (T0 is the caller's thread), with each function's file. The counts are
 * ARCHITECTURE.md's ("The route, counted"). Resolving addresses needs addr2line
 * (binutils) and debug info.
 *
 * zkl-route-o2 is this file built with ROUTE_ENTRIES, on the library and the in-memory
 * ZooKeeper compiled at -O2 with gcc's -pg -mfentry (fentry.S): it sees the entries of
 * the functions that survived inlining, and no exits. Its stops are the runs of those
 * entries in one file (the callee's), and tests/unit/fakezk.c counts as a file: the rule
 * that comes nearest issue 41's figures for older trees, and so the scale of its
 * targets (ARCHITECTURE.md).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

#include "fakezk.h"
#include "core.h" /* the loop's state, to wait until it has done a route's work */

#define NOI __attribute__((no_instrument_function))
#define MAXEV (1 << 20)

static atomic_bool recording;
static __thread bool muted; /* this tool's own calls into the library: not the route's */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t ev[MAXEV]; /* the address whose file the code is in after the event */
static uintptr_t evfn[MAXEV]; /* the function entered or left */
static unsigned long evtid[MAXEV]; /* the thread */
static bool evexit[MAXEV];
static size_t nev;
static bool overflow;

NOI static void note(void *addr, void *fn, bool exit)
{
	if (muted || !atomic_load_explicit(&recording, memory_order_relaxed))
		return;
	pthread_mutex_lock(&ev_mu);
	if (nev < MAXEV) {
		evfn[nev] = (uintptr_t)fn;
		evtid[nev] = (unsigned long)pthread_self();
		evexit[nev] = exit;
		ev[nev++] = (uintptr_t)addr;
	} else
		overflow = true;
	pthread_mutex_unlock(&ev_mu);
}

NOI void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	note(fn, fn, false);
}

NOI void __cyg_profile_func_exit(void *fn, void *site)
{
	note(site, fn, true); /* back in the caller */
}

/* ---- resolving addresses to files ---- */

struct addr_file {
	uintptr_t addr;
	const char *file; /* NULL: not the library's */
	char *fn;         /* the function's name (for -t) */
};
static struct addr_file *known;
static size_t nknown;

NOI static int by_addr(const void *a, const void *b)
{
	uintptr_t x = ((const struct addr_file *)a)->addr, y = ((const struct addr_file *)b)->addr;
	return x < y ? -1 : x > y;
}

/* The library's file a path names (src/... or recipes/..., and with ROUTE_ENTRIES
 * tests/unit/fakezk.c), interned; NULL otherwise. */
NOI static const char *lib_file(const char *path)
{
	static char *names[512];
	static size_t n;
	const char *p = strstr(path, "/src/");
	if (!p)
		p = strstr(path, "/recipes/");
#ifdef ROUTE_ENTRIES
	if (!p)
		p = strstr(path, "/tests/unit/fakezk.c");
#endif
	if (!p)
		return NULL;
	p++;
	char clean[512];
	snprintf(clean, sizeof clean, "%s", p);
	clean[strcspn(clean, ": \n")] = '\0'; /* addr2line says FILE:LINE */
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], clean) == 0)
			return names[i];
	if (n == 512)
		return NULL;
	names[n] = strdup(clean);
	return names[n++];
}

/* Resolves every address recorded so far, the functions' too (one addr2line run). */
NOI static void resolve(void)
{
	Dl_info info;
	if (!dladdr((void *)resolve, &info)) {
		fprintf(stderr, "zkl-route: dladdr failed\n");
		exit(1);
	}
	const uintptr_t base = (uintptr_t)info.dli_fbase;
	struct addr_file *all = calloc(2 * nev + 1, sizeof *all);
	for (size_t i = 0; i < nev; i++) {
		all[2 * i].addr = ev[i];
		all[2 * i + 1].addr = evfn[i];
	}
	qsort(all, 2 * nev, sizeof *all, by_addr);
	size_t u = 0;
	for (size_t i = 0; i < 2 * nev; i++)
		if (u == 0 || all[u - 1].addr != all[i].addr)
			all[u++] = all[i];
	char in[] = "/tmp/zkl-route-XXXXXX";
	int fd = mkstemp(in);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		fprintf(stderr, "zkl-route: cannot write a temporary file\n");
		exit(1);
	}
	for (size_t i = 0; i < u; i++)
		fprintf(f, "0x%lx\n", (unsigned long)(all[i].addr - base));
	fclose(f);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "addr2line -f -e /proc/%d/exe < %s", (int)getpid(), in);
	FILE *p = popen(cmd, "r");
	char fn[1024], line[1024];
	for (size_t i = 0; p && i < u && fgets(fn, sizeof fn, p) && fgets(line, sizeof line, p);
	     i++) {
		fn[strcspn(fn, "\n")] = '\0';
		all[i].fn = strdup(fn);
		all[i].file = lib_file(line);
	}
	if (!p || pclose(p) != 0) {
		fprintf(stderr, "zkl-route: addr2line failed (binutils)\n");
		exit(1);
	}
	unlink(in);
	known = all;
	nknown = u;
}

NOI static const struct addr_file *known_of(uintptr_t a)
{
	struct addr_file key = {.addr = a};
	return bsearch(&key, known, nknown, sizeof *known, by_addr);
}

NOI static const char *file_of(uintptr_t a)
{
	const struct addr_file *k = known_of(a);
	return k ? k->file : NULL;
}

/* ---- counting ---- */

struct route {
	const char *name;
	size_t from, to; /* events [from, to) */
};

struct counted {
	size_t stops, back, files;
	size_t tstops, tback; /* the same counted on each thread alone, summed */
};

/* The stops and re-entries of the events [from, to) of thread tid (any thread: all) as
 * one sequence; the files in order into stops[], at most max. */
NOI static size_t run_of(const struct route *r, bool any, unsigned long tid,
                         const char **stops, size_t max, size_t *back)
{
	size_t n = 0;
	for (size_t i = r->from; i < r->to; i++) {
		if (!any && evtid[i] != tid)
			continue;
		const char *f = file_of(ev[i]);
		if (!f || (n && stops[n - 1] == f))
			continue;
		if (n < max)
			stops[n++] = f;
	}
	*back = 0;
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j + 1 < i; j++)
			seen |= stops[j] == stops[i];
		/* stops[i - 1] != stops[i] by construction: seen before means re-entered */
		*back += seen;
	}
	return n;
}

/* The route's stops (files, in order, every thread's events as they came) into stops[],
 * at most max; returns its counts, the per-thread ones too. */
NOI static struct counted count(const struct route *r, const char **stops, size_t max)
{
	struct counted k = {0};
	k.stops = run_of(r, true, 0, stops, max, &k.back);
	for (size_t i = 0; i < k.stops; i++) {
		bool first = true;
		for (size_t j = 0; j < i; j++)
			first &= stops[j] != stops[i];
		k.files += first;
	}
	static const char *own[4096];
	unsigned long seen[16];
	size_t nseen = 0;
	for (size_t i = r->from; i < r->to; i++) {
		size_t t = 0;
		while (t < nseen && seen[t] != evtid[i])
			t++;
		if (t < nseen || nseen == 16)
			continue;
		seen[nseen++] = evtid[i];
		size_t back;
		k.tstops += run_of(r, false, evtid[i], own, 4096, &back);
		k.tback += back;
	}
	return k;
}

/* Prints a route's calls as a tree per thread: each entry of a library function, indented
 * by its depth on its thread, with the thread (T0 first seen) and the function's file. */
NOI static void trace(const struct route *r)
{
	unsigned long tids[16];
	int depth[16], ntids = 0;
	for (size_t i = r->from; i < r->to; i++) {
		int t = 0;
		while (t < ntids && tids[t] != evtid[i])
			t++;
		if (t == ntids) {
			if (ntids == 16)
				continue;
			tids[ntids] = evtid[i];
			depth[ntids++] = 0;
		}
		if (evexit[i]) {
			depth[t] -= depth[t] > 0;
			continue;
		}
		const struct addr_file *k = known_of(evfn[i]);
		if (k && k->file)
			printf("    T%d %*s%s  [%s]\n", t, 2 * depth[t], "", k->fn, k->file);
#ifndef ROUTE_ENTRIES
		depth[t]++; /* with entries alone, no exit says how deep: a flat list */
#endif
	}
}

NOI static int by_stops(const void *a, const void *b)
{
	size_t x = ((const struct counted *)a)->stops, y = ((const struct counted *)b)->stops;
	return x < y ? -1 : x > y;
}

/* Prints one route's line: the run with the median stops of the runs made (its back and
 * files), and the range of the stops; with verbose, that run's files in order. Returns
 * the median stops. */
NOI static size_t report(struct route *runs, int nruns, bool verbose, bool calls)
{
	static const char *stops[4096];
	struct counted k[64];
	for (int i = 0; i < nruns; i++) {
		k[i] = count(&runs[i], stops, 4096);
		k[i].files = k[i].files * 64 + (size_t)i; /* which run, kept through the sort */
	}
	qsort(k, (size_t)nruns, sizeof *k, by_stops);
	const struct counted med = k[nruns / 2];
	const int run = (int)(med.files % 64);
	printf("| %s | %zu | %zu | %zu | %zu–%zu | %zu | %zu |\n", runs[0].name, med.stops,
	       med.back, med.files / 64, k[0].stops, k[nruns - 1].stops, med.tstops, med.tback);
	if (verbose) {
		const struct counted again = count(&runs[run], stops, 4096);
		for (size_t i = 0; i < again.stops; i++)
			printf("%s%s", i ? " > " : "    ", stops[i]);
		printf("\n");
	}
	if (calls)
		trace(&runs[run]);
	return med.stops;
}

/* ---- the routes ---- */

struct async_done {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int rc;
	size_t at;
};

NOI static void acquired(zkl_lock *l, int rc, void *data)
{
	struct async_done *d = data;
	if (rc == 0)
		zkl_lock_release(l);
	pthread_mutex_lock(&ev_mu);
	d->at = nev;
	pthread_mutex_unlock(&ev_mu);
	atomic_store(&recording, false);
	pthread_mutex_lock(&d->mu);
	d->done = true;
	d->rc = rc;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

NOI static size_t mark(bool on)
{
	pthread_mutex_lock(&ev_mu);
	size_t at = nev;
	atomic_store(&recording, on);
	pthread_mutex_unlock(&ev_mu);
	return at;
}

/* Whether the client's loop has work left: a message in its inbox (an answer applied
 * lazily, on its next turn, too), a waiter ready, a request or a release's delete out,
 * a background task. */
NOI static bool busy(zkl_client *c)
{
	pthread_mutex_lock(&c->mu);
	pthread_mutex_lock(&c->inbox_mu);
	bool b = c->inbox || c->ready || c->sess->inflight > 0 || c->tasks || c->tasks_out ||
	         atomic_load(&c->pins) > 0;
	pthread_mutex_unlock(&c->inbox_mu);
	pthread_mutex_unlock(&c->mu);
	return b;
}

/* Waits until what a route set off on the loop is done, so that it counts in that route
 * and not in the next one. The loop is given 20 ms to get there by itself; then it is
 * woken (a call of this tool's, not counted) for what waits for its next turn (a lazy
 * answer), every 20 ms. */
NOI static void settle(zkl_client *c)
{
	for (int i = 1; i <= 5000 && busy(c); i++) {
		if (i % 20 == 0) {
			muted = true;
			zkl__loop_wake(c);
			muted = false;
		}
		usleep(1000);
	}
	if (busy(c)) {
		fprintf(stderr, "zkl-route: the loop still has work after 5 s\n");
		exit(1);
	}
}

NOI static void check(int rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "zkl-route: %s: %s (%s)\n", what, zkl_strerror(rc), zkl_last_error());
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const bool verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
	const bool calls = argc > 1 && strcmp(argv[1], "-t") == 0;
	struct fz *z = fz_new();
	zkl_client_options o;
	zkl_client_options_init(&o);
	zkl_client *c;
	check(fz_client_open(z, &c, &o), "open");
	zkl_mutex *m;
	check(zkl_mutex_new(&m, c, "/locks/route"), "mutex");
	zkl_lock *l = zkl_mutex_lock(m);
	/* Once unrecorded: the folder is made, and every lazy first use is past. */
	check(zkl_lock_acquire(l, 5000), "warm-up acquire");
	check(zkl_lock_release(l), "warm-up release");

	settle(c);
	enum { RUNS = 7 };
	struct route r[4][RUNS];
	for (int k = 0; k < RUNS; k++) {
		r[0][k] = (struct route){.name = "blocking acquire"};
		r[1][k] = (struct route){.name = "its release"};
		r[2][k] = (struct route){.name = "asynchronous acquire to its callback"};
		r[3][k] = (struct route){.name = "its release, to its return"};
		/* Each route runs until the loop has done what it set off. */
		r[0][k].from = mark(true);
		check(zkl_lock_acquire(l, 5000), "acquire");
		settle(c);
		r[0][k].to = mark(false);
		r[1][k].from = r[3][k].from = mark(true);
		check(zkl_lock_release(l), "release");
		r[3][k].to = mark(true); /* the release's own thread is done; its loop work goes on */
		settle(c);
		r[1][k].to = mark(false);
		struct async_done d = {.mu = PTHREAD_MUTEX_INITIALIZER,
		                       .cv = PTHREAD_COND_INITIALIZER};
		r[2][k].from = mark(true);
		check(zkl_lock_acquire_async(l, 5000, acquired, &d), "acquire_async");
		pthread_mutex_lock(&d.mu);
		while (!d.done)
			pthread_cond_wait(&d.cv, &d.mu);
		pthread_mutex_unlock(&d.mu);
		check(d.rc, "the asynchronous acquire");
		r[2][k].to = d.at;
		settle(c);
	}
	zkl_mutex_free(m);
	zkl_client_close(c);
	fz_free(z);
	if (overflow) {
		fprintf(stderr, "zkl-route: more than %d events\n", MAXEV);
		return 1;
	}
	resolve();
	printf("| route | stops | back | files | stops, %d runs | stops, each thread alone | back, each "
	       "thread alone |\n|---|---|---|---|---|---|---|\n", RUNS);
	int empty = 0;
	for (int i = 0; i < 4; i++)
		empty += report(r[i], RUNS, verbose, calls) == 0;
	if (empty) {
		fprintf(stderr, "zkl-route: %d route(s) ran through no file of the library: "
		        "instrumentation or addr2line failed\n", empty);
		return 1;
	}
	return 0;
}
