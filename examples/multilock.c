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
 * failure, 2 on bad usage. Build it with common.c (usage, errors, options, connecting,
 * time of day). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "multilock";
const char usage_args[] = "[-s servers] [-n rounds] [-t hold_ms] NAME FROM TO";

int main(int argc, char **argv)
{
	struct rounds_args opt;
	parse_rounds_args(argc, argv, 0, 3, &opt);
	const char *name = opt.args[0], *from = opt.args[1], *to = opt.args[2];
	if (strcmp(from, to) == 0) {
		fprintf(stderr, "%s: FROM and TO must be different accounts\n", prog);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client *c = connect_client(opt.servers);
	if (c == NULL)
		return 1;

	/* One mutex per account, and a multi-lock over both. The multi-lock borrows its
	 * members: they are freed after it. */
	zkl_mutex *a = NULL, *b = NULL;
	zkl_multilock *both = NULL;
	int rc, status = 1;
	if ((rc = zkl_mutex_new(&a, c, from)) != 0) {
		fail(from, rc);
		goto out;
	}
	if ((rc = zkl_mutex_new(&b, c, to)) != 0) {
		fail(to, rc);
		goto out;
	}
	if ((rc = zkl_multilock_new(&both, ZKL_MULTILOCK_CANONICAL)) != 0 ||
	    (rc = zkl_multilock_add(both, zkl_mutex_lock(a))) != 0 ||
	    (rc = zkl_multilock_add(both, zkl_mutex_lock(b))) != 0) {
		fail("making the multi-lock", rc);
		goto out;
	}

	status = 0;
	for (int i = 0; i < opt.rounds; i++) {
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
		       from, to, zkl_lock_token(zkl_mutex_lock(a)), zkl_lock_token(zkl_mutex_lock(b)),
		       when);

		sleep_ms(opt.hold_ms);

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
