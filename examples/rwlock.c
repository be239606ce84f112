/* rwlock: reads or writes under a zklocks read-write lock and says when it does.
 *
 *   rwlock [-s servers] [-n rounds] [-t hold_ms] [-w] NAME PATH
 *
 * Without -w it is a reader, with -w a writer. Run several readers and a writer with the
 * same PATH (on one machine or many): readers print "<NAME> reads <PATH> (token T) at
 * HH:MM:SS.mmm" and overlap each other; a writer prints "<NAME> writes ..." and is always
 * alone; a waiting writer keeps newer readers out, so writers are not starved. Each round
 * holds the lock for hold_ms, prints "<NAME> done", then releases it. The servers come
 * from -s, else $ZKLOCK_SERVERS, else 127.0.0.1:2181. Exits 0 when every round
 * succeeded, 1 on any failure, 2 on bad usage. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt, nanosleep, clock_gettime, localtime_r */
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

static const char *prog = "rwlock";

static void usage(void)
{
	fprintf(stderr, "usage: %s [-s servers] [-n rounds] [-t hold_ms] [-w] NAME PATH\n", prog);
	exit(2);
}

/* zkl_last_error() only lasts until the next zklocks call: copy it first. */
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

/* The wall-clock time as HH:MM:SS.mmm (local time). */
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

int main(int argc, char **argv)
{
	const char *servers = getenv("ZKLOCK_SERVERS");
	int rounds = 3, hold_ms = 1000, opt;
	bool writer = false;

	while ((opt = getopt(argc, argv, "s:n:t:wh")) != -1) {
		switch (opt) {
		case 's':
			servers = optarg;
			break;
		case 'n':
			if (parse_int(optarg, 1, &rounds) != 0)
				usage();
			break;
		case 't':
			if (parse_int(optarg, 0, &hold_ms) != 0)
				usage();
			break;
		case 'w':
			writer = true;
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

	zkl_rwlock *rw;
	rc = zkl_rwlock_new(&rw, c, path);
	if (rc != 0) {
		fail(path, rc);
		zkl_client_close(c);
		return 1;
	}
	/* The two halves are ordinary zkl_mutex handles that belong to rw: use them with
	 * the zkl_mutex_* functions, never free them. */
	zkl_mutex *m = writer ? zkl_rwlock_write(rw) : zkl_rwlock_read(rw);
	const char *verb = writer ? "writes" : "reads";

	int status = 0;
	for (int i = 0; i < rounds; i++) {
		rc = zkl_mutex_acquire(m, ZKL_WAIT_FOREVER);
		if (rc != 0) {
			fail("acquiring the lock", rc);
			status = 1;
			break;
		}
		char when[32];
		now_string(when, sizeof when);
		printf("%s %s %s (token %" PRId64 ") at %s\n", name, verb, path, zkl_mutex_token(m),
		       when);

		sleep_ms(hold_ms);

		/* Said before the release: once it is released, the next holder may print
		 * before this process gets to. */
		printf("%s done\n", name);
		rc = zkl_mutex_release(m);
		if (rc != 0) {
			/* ZKL_ELOST: the session ended while we held it. */
			fail("releasing the lock", rc);
			status = 1;
			break;
		}
	}

	zkl_rwlock_free(rw);
	zkl_client_close(c);
	return status;
}
