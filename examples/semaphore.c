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
 * failure, 2 on bad usage. Build it with common.c (usage, errors, options, connecting,
 * time of day). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt */
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "semaphore";
const char usage_args[] =
	"[-s servers] [-n jobs] [-w workers] [-m max_leases] [-t work_ms] NAME PATH";

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
		if (zkl_lock_participants(zkl_semaphore_lock(p->sem), &holders, &taken) == 0)
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
	const char *servers = NULL;
	int jobs = 8, workers = 4, max_leases = 2, work_ms = 1000, opt;

	while ((opt = getopt(argc, argv, "s:n:w:m:t:h")) != -1) {
		switch (opt) {
		case 's':
			servers = optarg;
			break;
		case 'n':
			jobs = int_arg(optarg, 1);
			break;
		case 'w':
			workers = int_arg(optarg, 1);
			if (workers > 256)
				usage();
			break;
		case 'm':
			max_leases = int_arg(optarg, 1);
			break;
		case 't':
			work_ms = int_arg(optarg, 0);
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	const char *name = argv[optind], *path = argv[optind + 1];
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client *c = connect_client(servers);
	if (c == NULL)
		return 1;

	/* Every process using PATH must pass the same max_leases. */
	struct pool p = { .name = name, .jobs = jobs, .work_ms = work_ms };
	int rc = zkl_semaphore_new(&p.sem, c, path, max_leases);
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
