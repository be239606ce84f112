/* What the examples share. See common.h. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* getopt, nanosleep, clock_gettime, localtime_r */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

void usage(void)
{
	fprintf(stderr, "usage: %s %s\n", prog, usage_args);
	exit(2);
}

/* zkl_last_error() only lasts until the next zklocks call on this thread, so it is copied
 * before zkl_strerror() is called. */
void fail(const char *what, int rc)
{
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());
	fprintf(stderr, "%s: %s: %s%s%s\n", prog, what, zkl_strerror(rc),
	        detail[0] ? ": " : "", detail);
}

int int_arg(const char *s, int min)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > 1000000000L)
		usage();
	return (int)v;
}

void parse_rounds_args(int argc, char **argv, char flag, int nargs, struct rounds_args *a)
{
	*a = (struct rounds_args){ .rounds = 3, .hold_ms = 1000 };
	char optstring[] = { 's', ':', 'n', ':', 't', ':', 'h', flag, '\0' };
	int opt;
	while ((opt = getopt(argc, argv, optstring)) != -1) {
		if (opt == 's')
			a->servers = optarg;
		else if (opt == 'n')
			a->rounds = int_arg(optarg, 1);
		else if (opt == 't')
			a->hold_ms = int_arg(optarg, 0);
		else if (opt == flag)
			a->flag = true;
		else
			usage();
	}
	if (argc - optind != nargs)
		usage();
	a->args = argv + optind;
}

zkl_client *connect_client(const char *servers)
{
	if (servers == NULL)
		servers = getenv("ZKLOCK_SERVERS");
	if (servers == NULL || servers[0] == '\0')
		servers = "127.0.0.1:2181";
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	zkl_client *c;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0) {
		fail("connecting", rc);
		return NULL;
	}
	return c;
}

void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void now_string(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	char hms[16];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(hms, sizeof hms, "%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%03ld", hms, ts.tv_nsec / 1000000L);
}
