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
 * succeeded, 1 on any failure, 2 on bad usage. Build it with common.c (usage, errors,
 * options, connecting, time of day). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "rwlock";
const char usage_args[] = "[-s servers] [-n rounds] [-t hold_ms] [-w] NAME PATH";

int main(int argc, char **argv)
{
	struct rounds_args opt;
	parse_rounds_args(argc, argv, 'w', 2, &opt);
	const char *name = opt.args[0], *path = opt.args[1];
	bool writer = opt.flag;
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client *c = connect_client(opt.servers);
	if (c == NULL)
		return 1;

	zkl_rwlock *rw;
	int rc = zkl_rwlock_new(&rw, c, path);
	if (rc != 0) {
		fail(path, rc);
		zkl_client_close(c);
		return 1;
	}
	/* The two halves are ordinary zkl_mutex handles that belong to rw: use them through
	 * their view with the zkl_lock_* functions, never free them. */
	zkl_lock *l = zkl_mutex_lock(writer ? zkl_rwlock_write(rw) : zkl_rwlock_read(rw));
	const char *verb = writer ? "writes" : "reads";

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
		printf("%s %s %s (token %" PRId64 ") at %s\n", name, verb, path, zkl_lock_token(l),
		       when);

		sleep_ms(opt.hold_ms);

		/* Said before the release: once it is released, the next holder may print
		 * before this process gets to. */
		printf("%s done\n", name);
		rc = zkl_lock_release(l);
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
