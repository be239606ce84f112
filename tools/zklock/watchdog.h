/* The watchdog between zklock and its command: a small process that ends the command's
 * process group when the lock may be gone and zklock cannot act (it died, is stopped or
 * is stuck). See watchdog.c. */
#ifndef ZKLOCK_WATCHDOG_H
#define ZKLOCK_WATCHDOG_H

#include <stdint.h>
#include <sys/types.h>

/* How a watchdog ended (its exit status). */
enum watchdog_verdict {
	WATCHDOG_QUIET = 0,    /* told to stop; it did nothing */
	WATCHDOG_ENFORCED = 3, /* the loss deadline passed: it killed the group */
	WATCHDOG_ORPHANED = 4, /* zklock went away: it killed the group */
	WATCHDOG_DIED = -1,    /* it was killed itself (watchdog_stop's answer only) */
};

struct watchdog {
	pid_t pid; /* the watchdog process, or 0 */
	int fd;    /* the write end of its pipe, or -1 */
};

/* Starts the watchdog of process group pgid. Until told otherwise it enforces loss_ms:
 * then it sends kill_signal (and SIGCONT) to the group, and SIGKILL at loss_ms +
 * kill_grace_ms, or halfway from loss_ms to expiry_ms if that comes first, so that the
 * group is gone before the server can expire the session. If zklock dies (its end of the
 * pipe closes), it SIGKILLs the group at once. Times are zkl_monotonic_ms(). Returns 0,
 * or an errno value. */
int watchdog_start(struct watchdog *wd, pid_t pgid, int kill_signal, int kill_grace_ms,
                   int64_t loss_ms, int64_t expiry_ms);

/* Moves the deadlines (later when heartbeats are answered; loss_ms = now to end the group
 * at once with the same schedule). Ignored once the watchdog has acted. */
void watchdog_renew(struct watchdog *wd, int64_t loss_ms, int64_t expiry_ms);

/* If the watchdog has died (without waiting): its verdict, else 1 (still running). */
int watchdog_poll(struct watchdog *wd);

/* Tells the watchdog to stop, waits for it, and returns its verdict. */
int watchdog_stop(struct watchdog *wd);

#endif
