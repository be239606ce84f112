/* What the examples share: their usage line and error messages, the options of the ones
 * that take a lock a few rounds, the connection to ZooKeeper, sleeping and the time of
 * day. Built into every example from common.c: copy both files along with the example. */
#ifndef ZKL_EXAMPLES_COMMON_H
#define ZKL_EXAMPLES_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <zklocks/zklocks.h>

/* Each example defines these two: its name, which starts every message, and the
 * arguments its usage line shows after the name. */
extern const char prog[];
extern const char usage_args[];

/* Prints "usage: <prog> <usage_args>" on stderr and exits 2. */
_Noreturn void usage(void);

/* Prints "<prog>: <what>: <what rc means>: <the library's detail>" on stderr. */
void fail(const char *what, int rc);

/* The decimal number in s, at least min and at most 1000000000; anything else is a usage
 * error. */
int int_arg(const char *s, int min);

/* The command line of an example that takes a lock a few rounds:
 *   [-s servers] [-n rounds] [-t hold_ms] [-FLAG] ARG...
 * FLAG is the example's own option without an argument (0 for none); -h or anything
 * amiss is a usage error, as is a number of arguments other than nargs. */
struct rounds_args {
	const char *servers; /* -s, or NULL (see connect_client) */
	int rounds;          /* -n, 3 by default */
	int hold_ms;         /* -t, 1000 by default */
	bool flag;           /* whether -FLAG was given */
	char **args;         /* the nargs arguments */
};
void parse_rounds_args(int argc, char **argv, char flag, int nargs, struct rounds_args *a);

/* Opens a client on servers: those of -s, else $ZKLOCK_SERVERS, else 127.0.0.1:2181.
 * Says why on failure and returns NULL. */
zkl_client *connect_client(const char *servers);

/* Sleeps for ms milliseconds. */
void sleep_ms(int ms);

/* The wall-clock time as HH:MM:SS.mmm (local time). */
void now_string(char *buf, size_t size);

#endif
