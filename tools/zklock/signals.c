/* The phases and the signal thread.
 *
 * Before any other thread exists, run_lock() blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD
 * (and SIGTTOU, see there) and starts the signal thread, so every thread the library
 * starts later inherits the blocked mask and the signal thread is the only one that ever
 * takes those signals (with sigwaitinfo). There are no signal handlers. What the signal
 * thread does depends on the phase main has reached, which both read under `st.mu`:
 *
 *   CONNECTING  nothing exists on the server yet: _exit(128+N) at once, so that Ctrl-C
 *               does not wait for the connect timeout.
 *   WAITING     record the signal and cancel the acquire; main's acquire returns with
 *               our node withdrawn, and main exits 128+N. The cancel is repeated every
 *               50 ms until main leaves this phase, because a cancel that lands just
 *               before acquire starts waiting would be lost.
 *   HELD        acquired, command not started: record it; main releases and exits.
 *   RUNNING     pass the signal on to the command's process group; SIGUSR1 instead
 *               gives the lock up as a revocation does (the command gets --kill-signal,
 *               zklock releases, and exits 71 or with --requeue joins again at the
 *               back). SIGUSR1 in any other phase is ignored.
 *   DONE        record it (a --requeue loop then stops), nothing else.
 *   EXIT        main wants the thread to return (it sends SIGCHLD to wake it).
 *
 * SIGCHLD only wakes main, which waits for the command on `st.cond` (not in waitpid) so
 * that the lost and revoke callbacks, which run on the library's event thread, can wake
 * it as well. */
#include "zklock.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

struct state st = { .mu = PTHREAD_MUTEX_INITIALIZER };

void set_phase(enum phase ph)
{
	pthread_mutex_lock(&st.mu);
	st.phase = ph;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
}

void note_lost(bool node_gone)
{
	pthread_mutex_lock(&st.mu);
	if (!st.lost)
		st.node_gone = node_gone;
	st.lost = st.lib_lost = true;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
}

bool note_revoked(void)
{
	pthread_mutex_lock(&st.mu);
	st.revoked = true;
	bool waiting = st.phase == PH_WAITING;
	pthread_cond_broadcast(&st.cond);
	pthread_mutex_unlock(&st.mu);
	return waiting;
}

/* ---- the signal thread ---- */

void *signal_thread(void *arg)
{
	const sigset_t *set = arg;
	bool retry = false;
	for (;;) {
		int sig;
		if (retry) {
			struct timespec ts = { 0, 50 * 1000 * 1000 };
			sig = sigtimedwait(set, NULL, &ts);
			if (sig < 0 && errno == EAGAIN)
				sig = 0;
		} else {
			sig = sigwaitinfo(set, NULL);
		}
		if (sig < 0)
			continue; /* EINTR */

		struct lock *cancel = NULL;
		pthread_mutex_lock(&st.mu);
		if (st.phase == PH_EXIT) {
			pthread_mutex_unlock(&st.mu);
			return NULL;
		}
		if (sig == SIGCHLD) {
			pthread_cond_broadcast(&st.cond);
		} else if (sig == SIGUSR1) {
			/* Planned failover: give the lock up, like a revocation. */
			if (st.phase == PH_RUNNING) {
				st.revoked = true;
				pthread_cond_broadcast(&st.cond);
			}
		} else if (sig != 0) {
			if (st.any_signal == 0)
				st.any_signal = sig;
			switch (st.phase) {
			case PH_CONNECTING:
				/* No lock node exists yet; nothing to withdraw. */
				_exit(128 + sig);
			case PH_WAITING:
			case PH_HELD:
				if (st.signal == 0)
					st.signal = sig;
				break;
			case PH_RUNNING:
				kill(-st.child, sig);
				break;
			case PH_DONE:
			case PH_EXIT:
				break;
			}
			pthread_cond_broadcast(&st.cond);
		}
		retry = st.phase == PH_WAITING && (st.signal != 0 || st.revoked);
		if (retry)
			cancel = st.lk;
		pthread_mutex_unlock(&st.mu);
		/* Outside our lock: the library may take its own. The handle lives until this
		 * thread has been joined. */
		if (cancel)
			zkl_lock_cancel(cancel->l);
	}
}


