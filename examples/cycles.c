/* cycles: how many uncontended acquire + release cycles of one zklocks mutex a single
 * thread gets through per second, and how long one cycle takes.
 *
 *   cycles [-s servers] [-d seconds] PATH
 *
 * Prints "cycles/s: N, p50 X us, p99 Y us" after running for the given duration
 * (default 5 s). Each cycle costs a few round trips to ZooKeeper (create, list, delete),
 * so the numbers mostly measure the network and the server's disk. The servers come from
 * -s, else $ZKLOCK_SERVERS, else 127.0.0.1:2181. Build it with common.c (usage, errors,
 * connecting). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt, clock_gettime */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "cycles";
const char usage_args[] = "[-s servers] [-d seconds] PATH";

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The q-th quantile (0..1) of n sorted values, nearest rank. */
static int64_t quantile(const int64_t *v, size_t n, double q)
{
	size_t rank = (size_t)(q * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

int main(int argc, char **argv)
{
	const char *servers = NULL;
	double seconds = 5;
	int opt;

	while ((opt = getopt(argc, argv, "s:d:h")) != -1) {
		switch (opt) {
		case 's':
			servers = optarg;
			break;
		case 'd': {
			char *end;
			errno = 0;
			seconds = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' || !(seconds > 0) ||
			    seconds > 86400)
				usage();
			break;
		}
		default:
			usage();
		}
	}
	if (argc - optind != 1)
		usage();
	const char *path = argv[optind];

	zkl_client *c = connect_client(servers);
	if (c == NULL)
		return 1;
	zkl_mutex *m;
	int rc = zkl_mutex_new(&m, c, path);
	if (rc != 0) {
		fail(path, rc);
		zkl_client_close(c);
		return 1;
	}
	zkl_lock *l = zkl_mutex_lock(m);

	size_t n = 0, cap = 4096;
	int64_t *lat = malloc(cap * sizeof *lat);
	if (lat == NULL) {
		fprintf(stderr, "%s: out of memory\n", prog);
		zkl_mutex_free(m);
		zkl_client_close(c);
		return 1;
	}

	int status = 0;
	const int64_t start = now_ns(), end = start + (int64_t)(seconds * 1e9);
	int64_t t = start;
	while (t < end) {
		int64_t t0 = t;
		rc = zkl_lock_acquire(l, ZKL_WAIT_FOREVER);
		if (rc != 0) {
			fail("acquiring the lock", rc);
			status = 1;
			break;
		}
		rc = zkl_lock_release(l);
		if (rc != 0) {
			fail("releasing the lock", rc);
			status = 1;
			break;
		}
		t = now_ns();
		if (n == cap) {
			int64_t *bigger = realloc(lat, 2 * cap * sizeof *lat);
			if (bigger == NULL) {
				fprintf(stderr, "%s: out of memory\n", prog);
				status = 1;
				break;
			}
			lat = bigger;
			cap *= 2;
		}
		lat[n++] = t - t0;
	}

	if (status == 0 && n > 0) {
		double elapsed = (double)(t - start) / 1e9;
		qsort(lat, n, sizeof *lat, cmp_i64);
		printf("cycles/s: %.0f, p50 %.0f us, p99 %.0f us\n", (double)n / elapsed,
		       (double)quantile(lat, n, 0.50) / 1e3, (double)quantile(lat, n, 0.99) / 1e3);
	}

	free(lat);
	zkl_mutex_free(m);
	zkl_client_close(c);
	return status;
}
