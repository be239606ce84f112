/* contend: takes a zklocks mutex a few times and says when it holds it.
 *
 *   contend [-s servers] [-n rounds] [-t hold_ms] NAME PATH
 *
 * Run several at once with the same PATH (on one machine or many) and watch them take
 * turns: each round it waits for the lock, prints "<NAME> holds <PATH> (token T) at
 * HH:MM:SS.mmm", keeps it for hold_ms, prints "<NAME> releasing", releases it and prints
 * "<NAME> released". The servers come from -s, else $ZKLOCK_SERVERS, else
 * 127.0.0.1:2181. Exits 0 when every round succeeded, 1 on any failure, 2 on bad usage.
 * Build it with common.c (usage, errors, options, connecting, time of day). */
#include <inttypes.h>
#include <stdio.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "contend";
const char usage_args[] = "[-s servers] [-n rounds] [-t hold_ms] NAME PATH";

int main(int argc, char **argv)
{
	struct rounds_args opt;
	parse_rounds_args(argc, argv, 0, 2, &opt);
	const char *name = opt.args[0], *path = opt.args[1];

	/* Line-buffered even into a pipe, so that lines of several processes interleave in
	 * the order they happened. */
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client *c = connect_client(opt.servers);
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

	int status = 0;
	for (int i = 0; i < opt.rounds; i++) {
		rc = zkl_lock_acquire(l, ZKL_WAIT_FOREVER);
		if (rc != 0) {
			fail("acquiring the lock", rc);
			status = 1;
			break;
		}
		char when[32];
		now_string(when, sizeof when);
		printf("%s holds %s (token %" PRId64 ") at %s\n", name, path, zkl_lock_token(l),
		       when);

		sleep_ms(opt.hold_ms);

		/* Said before the release: once it is released, the next holder may print
		 * before this process gets to. */
		printf("%s releasing\n", name);
		rc = zkl_lock_release(l);
		if (rc != 0) {
			/* ZKL_ELOST: the session ended while we held it. */
			fail("releasing the lock", rc);
			status = 1;
			break;
		}
		printf("%s released\n", name);
	}

	zkl_mutex_free(m);
	zkl_client_close(c);
	return status;
}
