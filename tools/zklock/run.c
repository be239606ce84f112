/* Running the command under the lock: acquire (reporting the queue with -v), hold
 * through the command, release; again for --requeue. */
#include "zklock.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ---- -v and systemd: the queue while waiting ---- */

/* While zklock waits, systemd hears EXTEND_TIMEOUT_USEC every EXTEND_EVERY_MS, whatever
 * -v does: one datagram per waiting host every 10 s, and a listing of the queue (one
 * ZooKeeper read) with it, which a fleet of standbys that wait for days can afford. Each
 * extends the start by EXTEND_USEC, six passes' worth, so that late passes (a slow
 * listing, a loaded host) do not time the unit out. zklock(1) says the rate. */
#define EXTEND_EVERY_MS 10000
#define EXTEND_USEC 60000000LL

struct progress {
	struct lock *lk;
	bool verbose;
};

/* The last "waiting ..." line printed: a line is printed only when it differs. Written
 * before the progress thread starts, then by that thread alone. */
static char waiting_said[512];

/* What we wait for, as -v and STATUS= say it: "waiting for PATH: held by X, N ahead"
 * into line; false if nobody holds it. */
static bool waiting_line(struct lock *lk, char *line, size_t size)
{
	char holder[400];
	size_t ahead;
	bool held = describe_holder(lk, holder, sizeof holder, &ahead);
	if (held)
		snprintf(line, size, "waiting for %s%s: held by %s, %zu ahead", lock_what(lk),
		         lk->path, holder, ahead);
	else
		snprintf(line, size, "waiting for %s%s: %zu ahead", lock_what(lk), lk->path,
		         ahead);
	return held;
}

static void *progress_thread(void *arg)
{
	const struct progress *pr = arg;
	struct lock *lk = pr->lk;
	/* -v looks twice a second, for the terminal; systemd alone every EXTEND_EVERY_MS. A
	 * changed line goes to systemd at once (STATUS=, with no extension); the extension
	 * goes at its own rate. */
	const int period = pr->verbose ? 500 : EXTEND_EVERY_MS;
	struct timespec extend_at = after_ms(EXTEND_EVERY_MS);
	pthread_mutex_lock(&st.mu);
	while (st.phase == PH_WAITING || st.phase == PH_CONNECTING) {
		struct timespec t = after_ms(period);
		pthread_cond_timedwait(&st.cond, &st.mu, &t);
		if (st.phase != PH_WAITING)
			break;
		pthread_mutex_unlock(&st.mu);
		char line[512];
		waiting_line(lk, line, sizeof line);
		bool changed = strcmp(line, waiting_said) != 0;
		bool extend = reached(extend_at);
		if (extend)
			extend_at = after_ms(EXTEND_EVERY_MS);
		if (changed && extend)
			notify("STATUS=%s\nEXTEND_TIMEOUT_USEC=%lld", line, EXTEND_USEC);
		else if (changed)
			notify("STATUS=%s", line);
		else if (extend)
			notify("EXTEND_TIMEOUT_USEC=%lld", EXTEND_USEC);
		pthread_mutex_lock(&st.mu);
		if (st.phase == PH_WAITING && changed) {
			if (pr->verbose)
				msg("%s", line);
			snprintf(waiting_said, sizeof waiting_said, "%s", line);
		}
	}
	pthread_mutex_unlock(&st.mu);
	return NULL;
}

/* ---- running the command under the lock ---- */

/* Acquires the lock. Returns true when held; otherwise false with *status set to
 * zklock's exit status (which may be 0: -E 0), after reporting. */
static bool acquire(const struct opts *o, struct lock *lk, int *status, pthread_t *progress,
                    struct progress *pr, bool *progressing, struct report *rep)
{
	char holder[400];
	waiting_said[0] = '\0';
	if ((o->verbose || notify_enabled()) && o->wait_ms != 0) {
		char line[512];
		bool held = waiting_line(lk, line, sizeof line);
		if (o->verbose && held)
			msg("%s", line);
		if (held)
			snprintf(waiting_said, sizeof waiting_said, "%s", line);
		notify("STATUS=%s\nEXTEND_TIMEOUT_USEC=%lld", line, EXTEND_USEC);
	}

	set_phase(PH_WAITING);
	pr->lk = lk;
	pr->verbose = o->verbose;
	*progressing = (o->verbose || notify_enabled()) && o->wait_ms != 0 &&
	               pthread_create(progress, NULL, progress_thread, pr) == 0;

	struct timespec t0 = now();
	int rc = zkl_lock_acquire(lk->l, o->wait_ms);
	rep->wait_s = seconds_since(t0);
	char detail[512];
	snprintf(detail, sizeof detail, "%s", zkl_last_error());

	pthread_mutex_lock(&st.mu);
	st.phase = rc == 0 ? PH_HELD : PH_DONE;
	pthread_cond_broadcast(&st.cond);
	int sig = st.signal;
	bool revoked = st.revoked;
	pthread_mutex_unlock(&st.mu);
	/* The progress thread ends by itself now that the phase moved on; it is joined
	 * after the command, since a listing it is waiting for (the server may not hear
	 * us) must not hold the command back while the lock is ours. */

	if (rc == 0) {
		/* A lock lost at once has no token (a negative code): say nothing of one;
		 * run_command() reports the loss. */
		int64_t token = zkl_lock_token(lk->l);
		if (o->verbose && token > 0)
			msg("acquired %s%s (fencing token %lld) after %.3f s", lock_what(lk), o->path,
			    (long long)token, seconds_since(t0));
		return true; /* a signal meanwhile is handled by run_command() */
	}
	if (sig != 0) {
		if (o->verbose)
			msg("interrupted by signal %d; withdrew from the queue of %s", sig, o->path);
		*status = 128 + sig;
		return false;
	}
	if (revoked) {
		msg("revocation of %s asked while waiting; withdrew from the queue", o->path);
		*status = EXIT_REVOKED;
		rep->revoked = true;
		return false;
	}
	switch (rc) {
	case ZKL_ETIMEDOUT:
		*status = o->conflict_code;
		rep->busy = true;
		if (o->quiet)
			break; /* as flock(1): silent on conflict */
		if (o->verbose && *detail)
			msg("%s", detail);
		if (describe_holder(lk, holder, sizeof holder, NULL))
			msg("%s%s is held by %s; gave up after %g s", lock_what(lk), o->path, holder,
			    o->wait_s);
		else
			msg("%s%s is busy; gave up after %g s", lock_what(lk), o->path, o->wait_s);
		break;
	case ZKL_EINVAL:
		*status = usage_error("invalid lock path \"%s\": %s", o->path,
		                      *detail ? detail : zkl_strerror(rc));
		break;
	case ZKL_ECOUNT:
		/* The counts disagree (it names both): a runtime fact, not a usage error. */
		msg("%s", detail);
		*status = EXIT_COUNT;
		break;
	case ZKL_ECONNLOSS:
		msg("lost the connection to %s while waiting for %s", o->servers, o->path);
		*status = EXIT_UNAVAILABLE;
		break;
	default:
		msg("cannot acquire %s%s: %s%s%s", lock_what(lk), o->path, zkl_strerror(rc),
		    *detail ? ": " : "", detail);
		*status = EXIT_SOFTWARE;
		break;
	}
	return false;
}

/* Fills lk->previous and lk->passed_on from how the holder before left. */
static void previous_said(struct lock *lk, zkl_previous how)
{
	char end[ZKL_END_MAX] = "";
	if (how != ZKL_PREVIOUS_NONE && zkl_lock_previous_end(lk->l, end, sizeof end) != 0)
		end[0] = '\0';
	snprintf(lk->previous_buf, sizeof lk->previous_buf, "%s",
	         *end ? end : zkl_previous_name(how));
	lk->previous = lk->previous_buf;
	snprintf(lk->passed_on, sizeof lk->passed_on, "%s",
	         how == ZKL_PREVIOUS_VANISHED && !*end ? "vanished" : end);
}

/* A hold that ends before its command runs (--once-per skipped it, it could not tell
 * when the lock was asked for): its release passes on what the holder before said. */
static void pass_on(struct lock *lk)
{
	zkl_previous how;
	char node[ZKL_NODE_MAX];
	if (!lk->tracked || zkl_lock_previous(lk->l, &how, node, sizeof node) != 0)
		return;
	previous_said(lk, how);
	(void)zkl_lock_set_end(lk->l, lk->passed_on);
}

/* How the previous holder left, for the command (ZKLOCK_PREVIOUS), and --lock-delay:
 * after a holder that vanished, whatever it had sent may still be on its way to the
 * systems it wrote to, so the command starts T later. The wait ends early on a signal, a
 * loss or a revocation, on which run_command() then acts without starting the command;
 * it is the lock's, not the command's, so --max-runtime starts after it. Returns 0 or an
 * exit code after reporting. */
static int previous_holder(const struct opts *o, struct lock *lk)
{
	lk->previous = NULL;
	lk->passed_on[0] = '\0';
	if (!lk->tracked)
		return 0;
	zkl_previous how;
	char node[ZKL_NODE_MAX];
	int rc = zkl_lock_previous(lk->l, &how, node, sizeof node);
	if (rc == ZKL_ELOST || rc == ZKL_ENOTHELD) {
		msg("lock on %s lost", o->path); /* between the grant and now */
		return EXIT_SOFTWARE;
	}
	if (rc != 0) {
		const char *detail = zkl_last_error();
		msg("cannot tell how the previous holder of %s left: %s", o->path,
		    *detail ? detail : zkl_strerror(rc));
		return EXIT_SOFTWARE;
	}
	previous_said(lk, how);
	/* The node's name comes from the note, which any session may have written. */
	char shown[4 * ZKL_NODE_MAX];
	printable(shown, sizeof shown, node, strlen(node));
	if (o->verbose)
		msg("the previous holder of %s%s: %s%s%s%s", lock_what(lk), o->path, lk->previous,
		    *node ? " (" : "", shown, *node ? ")" : "");
	if (how != ZKL_PREVIOUS_VANISHED || o->lock_delay_ms == 0)
		return 0;
	msg("the previous holder of %s%s vanished (%s left no release note): starting %s in "
	    "%g s (--lock-delay)", lock_what(lk), o->path, *node ? shown : "its node", o->cmd[0],
	    o->lock_delay_ms / 1000.0);
	notify("STATUS=holding %s%s; starting %s in %g s, after a holder that vanished "
	       "(--lock-delay)\nEXTEND_TIMEOUT_USEC=%lld", lock_what(lk), o->path, o->cmd[0],
	       o->lock_delay_ms / 1000.0, o->lock_delay_ms * 1000LL + EXTEND_USEC);
	const struct timespec until = plus_ms(now(), o->lock_delay_ms);
	pthread_mutex_lock(&st.mu);
	while (!st.lost && !st.revoked && st.signal == 0 && !reached(until))
		pthread_cond_timedwait(&st.cond, &st.mu, &until);
	pthread_mutex_unlock(&st.mu);
	return 0;
}

/* How the command ended, for the note our release leaves (--previous): "exited N",
 * "signal N", "max-runtime" or "revoked"; if it never ran, what the holder before said
 * (its end, or "vanished"), so that a run that skipped or stopped early hides nothing. A
 * lock lost leaves no release note (its node went without one): tell_lost() says
 * "lost" if it still can, else the next holder hears "vanished". */
static void tell_end(struct lock *lk, const struct outcome *out)
{
	if (!lk->tracked)
		return;
	char end[ZKL_END_MAX];
	if (!out->ran)
		snprintf(end, sizeof end, "%s", lk->passed_on);
	else if (out->max_runtime)
		snprintf(end, sizeof end, "max-runtime");
	else if (out->revoked)
		snprintf(end, sizeof end, "revoked");
	else if (out->sig > 0)
		snprintf(end, sizeof end, "signal %d", out->sig);
	else if (out->code >= 0)
		snprintf(end, sizeof end, "exited %d", out->code);
	else
		end[0] = '\0'; /* not known (the watchdog could not be started) */
	(void)zkl_lock_set_end(lk->l, end); /* ZKL_ENOTHELD once lost: no note then */
}

/* The lock was lost while the command ran (and it is stopped): if no holder has taken
 * the lock since, the note says so, and the next holder hears "lost" rather than
 * "vanished". At most a session timeout: the next run must not wait for it. */
static void tell_lost(const struct opts *o, struct lock *lk)
{
	/* The watchdog may have ended the command at the loss deadline a moment before the
	 * library's loop found the hold lost (a loaded host): the note is only written for
	 * a hold the library has found lost, so its report is awaited first, within the
	 * same bound. */
	const int bound_ms = zkl_client_session_timeout(lk->c);
	const struct timespec start = now(), until = plus_ms(start, bound_ms);
	pthread_mutex_lock(&st.mu);
	while (!st.lib_lost && !reached(until))
		pthread_cond_timedwait(&st.cond, &st.mu, &until);
	pthread_mutex_unlock(&st.mu);
	const int left_ms = bound_ms - (int)(seconds_since(start) * 1000.0);
	bool told = false;
	int rc = zkl_lock_tell_lost(lk->l, left_ms > 0 ? left_ms : 0, &told);
	if (rc != 0 && o->verbose)
		msg("cannot tell the next holder of %s that the lock was lost: %s", o->path,
		    zkl_last_error());
	else if (o->verbose)
		msg("%s the next holder of %s that the lock was lost", told ? "told" : "did not "
		    "tell (another holder took it meanwhile)", o->path);
}

/* Holds the lock (acquired) through the command; releases it. Sets *again for a
 * --requeue loop that should go on. */
static int hold_and_run(const struct opts *o, struct lock *lk, bool *again, struct report *rep)
{
	*again = false;
	int status = 0;
	char *rec = NULL;
	int64_t arrival = 0;
	bool rec_exists = false;
	struct timespec held_at = now();

	struct sched_run sr;
	bool scheduled = o->sched != NULL;
	if (scheduled) {
		/* Read the record while holding the lock, as --once-per below. */
		status = sched_begin(o, lk, &sr);
		if (status != 0 || sr.plan.action != SLOT_RUN) {
			set_phase(PH_DONE);
			pass_on(lk);
			if (status != 0)
				zkl_lock_release(lk->l);
			else
				status = sched_skip(o, lk, &sr, rep);
			rep->hold_s = seconds_since(held_at);
			sched_run_free(&sr);
			return status;
		}
		rec = sr.rec; /* freed with sr */
		arrival = sr.arrival_ms;
	}

	if (o->once_per_s > 0) {
		/* Read the record while holding the lock: a run in progress elsewhere has
		 * finished (and recorded) before we get here. */
		rec = record_path(o->path);
		arrival = arrival_ms(lk);
		if (!rec || arrival <= 0) {
			msg("cannot tell when %s was asked for", o->path);
			status = EXIT_SOFTWARE;
		}
		bool recent = false;
		int64_t last = 0, finished = 0;
		char by[300];
		if (status == 0)
			status = once_check(lk->c, rec, arrival, o->once_per_s, &recent, &last, by,
			                    sizeof by, &finished, &rec_exists);
		if (status == 0 && recent) {
			rep->once = true;
			rep->success_ms = finished; /* the run that did it, whichever host ran it */
			char started_at[40], finished_at[40];
			format_utc(started_at, sizeof started_at, last);
			format_utc(finished_at, sizeof finished_at, finished);
			if (!o->quiet)
				msg("%s already ran (started %s, finished %s, by %s): not again within "
				    "%ld s", o->path, started_at, finished_at, *by ? by : "unknown",
				    o->once_per_s);
			set_phase(PH_DONE);
			pass_on(lk);
			zkl_lock_release(lk->l);
			rep->hold_s = seconds_since(held_at);
			free(rec);
			return 0;
		}
		rep->success_ms = 0; /* a record too old to skip for is not this run's success */
		if (status != 0) {
			set_phase(PH_DONE);
			pass_on(lk);
			zkl_lock_release(lk->l);
			rep->hold_s = seconds_since(held_at);
			free(rec);
			return status;
		}
	}

	status = previous_holder(o, lk);
	if (status != 0) {
		set_phase(PH_DONE);
		zkl_lock_release(lk->l);
		rep->hold_s = seconds_since(held_at);
		if (scheduled)
			sched_run_free(&sr);
		else
			free(rec);
		return status;
	}

	if (scheduled && (status = sched_start(lk, &sr)) != 0) {
		set_phase(PH_DONE);
		zkl_lock_release(lk->l);
		rep->hold_s = seconds_since(held_at);
		sched_run_free(&sr);
		return status;
	}

	struct outcome out = run_command(o, lk);
	tell_end(lk, &out);
	status = out.status;
	rep->ran = out.ran;
	rep->max_runtime = out.max_runtime;
	rep->warned = out.warned;
	int rc = 0;
	bool released = false, succeeded = false;
	if (out.ran && status == 0 && !out.lost && !out.revoked) {
		/* Only while the lock is still ours: the record's transaction checks that our
		 * node exists, whatever we know here. */
		pthread_mutex_lock(&st.mu);
		bool lost = st.lost;
		pthread_mutex_unlock(&st.mu);
		if (scheduled && !lost && zkl_lock_token(lk->l) > 0) {
			status = sched_record(o, lk, &sr, o->metrics_file ? &rep->success_ms : NULL,
			                      &rc, rep);
			released = true;
		} else if (rec && !lost && zkl_lock_token(lk->l) > 0) {
			status = once_record(lk, rec, arrival, rec_exists,
			                     o->metrics_file ? &rep->success_ms : NULL, &rc);
			released = true;
		} else if (!rec && !lost && o->metrics_file) {
			succeeded = true;
			arrival = arrival_ms(lk);
		}
	}
	if (scheduled && !released && !out.lost) {
		/* It did not succeed (or never started): how it ended goes in the record with
		 * the release, while the lock is ours (a lost lock records nothing: the next
		 * holder finds the run lost or vanished). */
		pthread_mutex_lock(&st.mu);
		bool lost = st.lost;
		pthread_mutex_unlock(&st.mu);
		if (!lost && zkl_lock_token(lk->l) > 0) {
			int rs = sched_record_end(lk, &sr, &out, &rc, rep);
			released = true;
			if (status == 0)
				status = rs;
		}
	}
	lk->extra_env = NULL;
	if (scheduled)
		sched_run_free(&sr);
	else
		free(rec);

	if (!released && lk->tracked) {
		pthread_mutex_lock(&st.mu);
		bool was_lost = st.lost || out.lost;
		pthread_mutex_unlock(&st.mu);
		if (was_lost)
			tell_lost(o, lk);
	}
	if (!released)
		rc = zkl_lock_release(lk->l);
	rep->hold_s = seconds_since(held_at);
	/* Without --once-per no record says when the run finished: the server's time when
	 * it asked for the lock, plus how long it waited and held it (this host's monotonic
	 * clock), is when it released it, on the server's clock all the same. */
	if (succeeded && arrival > 0)
		rep->success_ms = arrival + (int64_t)((rep->wait_s + rep->hold_s) * 1000.0);
	pthread_mutex_lock(&st.mu);
	bool lost = st.lost || out.lost;
	int any_signal = st.any_signal;
	pthread_mutex_unlock(&st.mu);
	rep->lost = lost;
	rep->revoked = out.revoked && !lost;
	if (o->requeue && any_signal == 0 && (out.ran || out.revoked)) {
		/* --requeue: leadership was given up (or lost, or revoked, and the command
		 * stopped): join the election again, at the back. */
		if (lost)
			msg("leadership of %s lost; joining the election again", o->path);
		else if (out.revoked)
			msg("leadership of %s handed over; joining the election again", o->path);
		else if (o->verbose)
			msg("%s exited with status %d; joining the election of %s again", o->cmd[0],
			    status, o->path);
		*again = true;
		return status;
	}
	if (rc == ZKL_ELOST || lost) {
		if (!out.lost)
			msg("lock on %s lost", o->path);
		return EXIT_SOFTWARE;
	}
	if (out.revoked) {
		msg("%s revoked: %s stopped and the lock released", o->path, o->cmd[0]);
		return EXIT_REVOKED;
	}
	if (out.max_runtime)
		return EXIT_MAX_RUNTIME; /* the command's status says how it was stopped */
	if (rc != 0) {
		/* The node goes with the session when the client closes. */
		const char *detail = zkl_last_error();
		msg("releasing %s: %s%s%s", o->path, zkl_strerror(rc), *detail ? ": " : "", detail);
	} else if (o->verbose) {
		msg("released %s%s", lock_what(lk), o->path);
	}
	return status;
}

int run_lock(const struct opts *o)
{
	/* Before any thread exists: every later thread inherits this mask. */
	sigset_t handled;
	sigemptyset(&handled);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGCHLD);
	sigaddset(&handled, SIGUSR1);
	notify_init(); /* before any thread: it changes the environment */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0)
			orig_ignored[sig] = sa.sa_handler == SIG_IGN;
	}
	/* SIGTTOU is blocked too (but not waited for): a message that zklock writes while
	 * the command has the terminal must not stop zklock under "stty tostop". */
	sigset_t blocked = handled;
	sigaddset(&blocked, SIGTTOU);
	pthread_sigmask(SIG_BLOCK, &blocked, &orig_mask);

	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st.cond, &ca);
	pthread_condattr_destroy(&ca);
	st.phase = PH_CONNECTING;

	pthread_t sig_tid;
	int e = pthread_create(&sig_tid, NULL, signal_thread, &handled);
	if (e != 0) {
		msg("pthread_create: %s", strerror(e));
		pthread_cond_destroy(&st.cond);
		return EXIT_SOFTWARE;
	}

	splay_wait(o); /* before the session: a fleet does not arrive in one millisecond */
	zkl_client *c = NULL;
	struct lock lk;
	memset(&lk, 0, sizeof lk);
	int status = open_client(o, &c);
	if (status == 0 && o->verbose)
		zkl_client_add_listener(c, on_state, NULL);
	if (status == 0)
		status = lock_new(o, c, &lk);
	bool reported = false;
	for (bool again = status == 0; again;) {
		pthread_mutex_lock(&st.mu);
		st.lk = &lk;
		st.lost = st.lib_lost = false;
		st.node_gone = false;
		st.revoked = false;
		pthread_mutex_unlock(&st.mu);
		again = false;
		pthread_t progress;
		struct progress pr;
		bool progressing = false;
		struct report rep;
		memset(&rep, 0, sizeof rep);
		if (acquire(o, &lk, &status, &progress, &pr, &progressing, &rep))
			status = hold_and_run(o, &lk, &again, &rep);
		if (progressing)
			pthread_join(progress, NULL);
		rep.status = status;
		if (o->metrics_file)
			metrics_write(o, &rep);
		reported = true;
		/* --requeue: the release left the election; the next acquire joins it again,
		 * at the back. */
	}
	if (!reported && o->metrics_file) {
		/* No run: the exit status (no server, a bad path) is worth an alert too. */
		struct report rep;
		memset(&rep, 0, sizeof rep);
		rep.status = status;
		metrics_write(o, &rep);
	}
	notify("STOPPING=1");
	notify_close();

	/* Stop the signal thread before freeing what it may touch (st.lk). */
	pthread_mutex_lock(&st.mu);
	st.phase = PH_EXIT;
	pthread_mutex_unlock(&st.mu);
	pthread_kill(sig_tid, SIGCHLD);
	pthread_join(sig_tid, NULL);

	lock_free(&lk); /* releases it if still held (a signal before the command ran) */
	if (c && o->verbose)
		zkl_client_remove_listener(c, on_state, NULL);
	zkl_client_close(c);
	pthread_cond_destroy(&st.cond);
	return status;
}

