/* multilock: locks two accounts together for a transfer, all or nothing.
 *
 *   multilock [-s servers] [-n rounds] [-t hold_ms] NAME FROM TO
 *
 * FROM and TO are the lock paths of two accounts, e.g. /bank/alice and /bank/bob. Each
 * round takes both locks as one (a zkl_multilock), prints "<NAME> moves 10 from <FROM>
 * to <TO> (tokens T1, T2) at HH:MM:SS.mmm", keeps them for hold_ms (where a real program
 * would update both balances, passing the fencing tokens to its store), prints "<NAME>
 * done" and releases both. Run one copy with "/bank/alice /bank/bob" and another with
 * "/bank/bob /bank/alice": the multi-lock takes its locks in the same (sorted) order in
 * both, so they take turns instead of deadlocking. The servers come from -s, else
 * $ZKLOCK_SERVERS, else 127.0.0.1:2181. Exits 0 when every round succeeded, 1 on any
 * failure, 2 on bad usage. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt, nanosleep, clock_gettime, localtime_r */
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

static const char *prog = "multilock";

static void usage(void)
{
	fprintf(stderr, "usage: %s [-s servers] [-n rounds] [-t hold_ms] NAME FROM TO\n", prog);
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

	while ((opt = getopt(argc, argv, "s:n:t:h")) != -1) {
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
		default:
			usage();
		}
	}
	if (argc - optind != 3)
		usage();
	const char *name = argv[optind], *from = argv[optind + 1], *to = argv[optind + 2];
	if (strcmp(from, to) == 0) {
		fprintf(stderr, "%s: FROM and TO must be different accounts\n", prog);
		return 2;
	}
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

	/* One mutex per account, and a multi-lock over both. The multi-lock borrows its
	 * members: they are freed after it. */
	zkl_mutex *a = NULL, *b = NULL;
	zkl_multilock *both = NULL;
	int status = 1;
	if ((rc = zkl_mutex_new(&a, c, from)) != 0) {
		fail(from, rc);
		goto out;
	}
	if ((rc = zkl_mutex_new(&b, c, to)) != 0) {
		fail(to, rc);
		goto out;
	}
	if ((rc = zkl_multilock_new(&both, ZKL_MULTILOCK_CANONICAL)) != 0 ||
	    (rc = zkl_multilock_add_mutex(both, a)) != 0 ||
	    (rc = zkl_multilock_add_mutex(both, b)) != 0) {
		fail("making the multi-lock", rc);
		goto out;
	}

	status = 0;
	for (int i = 0; i < rounds; i++) {
		/* Both or neither: on failure nothing is left held. */
		rc = zkl_multilock_acquire(both, ZKL_WAIT_FOREVER);
		if (rc != 0) {
			fail("locking both accounts", rc);
			status = 1;
			break;
		}
		char when[32];
		now_string(when, sizeof when);
		printf("%s moves 10 from %s to %s (tokens %" PRId64 ", %" PRId64 ") at %s\n", name,
		       from, to, zkl_mutex_token(a), zkl_mutex_token(b), when);

		sleep_ms(hold_ms);

		printf("%s done\n", name);
		rc = zkl_multilock_release(both);
		if (rc != 0) {
			/* ZKL_ELOST: the session ended while we held them. */
			fail("unlocking the accounts", rc);
			status = 1;
			break;
		}
	}

out:
	zkl_multilock_free(both);
	zkl_mutex_free(a);
	zkl_mutex_free(b);
	zkl_client_close(c);
	return status;
}
