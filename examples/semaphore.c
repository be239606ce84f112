/* semaphore: a pool of workers that never runs more than N jobs at once, across every
 * process that uses the same PATH.
 *
 *   semaphore [-s servers] [-n jobs] [-w workers] [-m max_leases] [-t work_ms] NAME PATH
 *
 * Starts `workers` threads (default 4) that share one client and one semaphore of
 * max_leases leases (default 2). Each thread takes a job number, waits for a lease, prints
 * "<NAME> job J runs (lease token T, K of M leases taken) at HH:MM:SS.mmm", works for
 * work_ms, prints "<NAME> job J done" and gives the lease back, until the `jobs` jobs
 * (default 8) are done. Run it in several terminals with the same PATH and -m: no more
 * than max_leases jobs run at once in all of them together. The servers come from -s,
 * else $ZKLOCK_SERVERS, else 127.0.0.1:2181. Exits 0 when every job ran, 1 on any
 * failure, 2 on bad usage. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt, nanosleep, clock_gettime, localtime_r */
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

static const char *prog = "semaphore";

static void usage(void)
{
	fprintf(stderr,
	        "usage: %s [-s servers] [-n jobs] [-w workers] [-m max_leases] [-t work_ms] "
	        "NAME PATH\n",
	        prog);
	exit(2);
}

/* zkl_last_error() only lasts until the next zklocks call on this thread: copy it first. */
static void fail(const char *what, int rc)
{
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());
	fprintf(stderr, "%s: %s: %s%s%s\n", prog, what, zkl_strerror(rc),
	        detail[0] ? ": " : "", detail);
}

static int parse_int(const char *s, int min, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > 1000000000L)
		return -1;
	*out = (int)v;
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void now_string(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	char hms[16];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(hms, sizeof hms, "%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03ld", hms, ts.tv_nsec / 1000000L);
}

/* What the workers share. The semaphore handle is thread-safe: one is enough. */
struct pool {
	zkl_semaphore *sem;
	const char *name;
	int jobs, work_ms;
	pthread_mutex_t mu; /* guards next_job and failed */
	int next_job;
	int failed;
};

/* The next job number, or -1 when there is none left (or a worker failed). */
static int take_job(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	int j = p->failed || p->next_job >= p->jobs ? -1 : p->next_job++;
	pthread_mutex_unlock(&p->mu);
	return j;
}

static void *worker(void *arg)
{
	struct pool *p = arg;
	for (int j; (j = take_job(p)) >= 0;) {
		zkl_lease *lease;
		int rc = zkl_semaphore_acquire(p->sem, 1, ZKL_WAIT_FOREVER, &lease);
		if (rc != 0) {
			fail("taking a lease", rc);
			goto failed;
		}
		/* How many leases are taken right now, by every process (one round trip). */
		zkl_participant *holders;
		size_t taken = 0;
		if (zkl_semaphore_participants(p->sem, &holders, &taken) == 0)
			zkl_participants_free(holders, taken);
		char when[32];
		now_string(when, sizeof when);
		printf("%s job %d runs (lease token %" PRId64 ", %zu of %d leases taken) at %s\n",
		       p->name, j, zkl_lease_token(lease), taken, zkl_semaphore_max(p->sem), when);

		sleep_ms(p->work_ms); /* the work */

		printf("%s job %d done\n", p->name, j);
		rc = zkl_lease_release(lease);
		zkl_lease_free(lease);
		if (rc != 0) {
			/* ZKL_ELOST: the session ended while the job ran. */
			fail("giving the lease back", rc);
			goto failed;
		}
	}
	return NULL;
failed:
	pthread_mutex_lock(&p->mu);
	p->failed = 1;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *servers = getenv("ZKLOCK_SERVERS");
	int jobs = 8, workers = 4, max_leases = 2, work_ms = 1000, opt;

	while ((opt = getopt(argc, argv, "s:n:w:m:t:h")) != -1) {
		switch (opt) {
		case 's':
			servers = optarg;
			break;
		case 'n':
			if (parse_int(optarg, 1, &jobs) != 0)
				usage();
			break;
		case 'w':
			if (parse_int(optarg, 1, &workers) != 0 || workers > 256)
				usage();
			break;
		case 'm':
			if (parse_int(optarg, 1, &max_leases) != 0)
				usage();
			break;
		case 't':
			if (parse_int(optarg, 0, &work_ms) != 0)
				usage();
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	const char *name = argv[optind], *path = argv[optind + 1];
	if (servers == NULL || servers[0] == '\0')
		servers = "127.0.0.1:2181";
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	zkl_client *c;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0) {
		fail("connecting", rc);
		return 1;
	}

	/* Every process using PATH must pass the same max_leases. */
	struct pool p = { .name = name, .jobs = jobs, .work_ms = work_ms };
	rc = zkl_semaphore_new(&p.sem, c, path, max_leases);
	if (rc != 0) {
		fail(path, rc);
		zkl_client_close(c);
		return 1;
	}
	pthread_mutex_init(&p.mu, NULL);

	pthread_t *threads = calloc((size_t)workers, sizeof *threads);
	int started = 0;
	for (; threads && started < workers; started++)
		if (pthread_create(&threads[started], NULL, worker, &p) != 0)
			break;
	if (started == 0) {
		fprintf(stderr, "%s: cannot start a worker thread\n", prog);
		p.failed = 1;
	}
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);

	pthread_mutex_destroy(&p.mu);
	zkl_semaphore_free(p.sem);
	zkl_client_close(c);
	return p.failed ? 1 : 0;
}
