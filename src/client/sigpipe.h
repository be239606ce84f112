/* SIGPIPE and the C client's connections.
 *
 * A write to a connection the server has closed raises SIGPIPE in the writing thread,
 * and SIGPIPE's default action ends the whole process. The C client's plaintext sends
 * pass MSG_NOSIGNAL (on Linux), but OpenSSL, under the TLS build, writes with write():
 * a TLS alert or request written to a dropped connection would kill the application.
 * So every call into the C client that starts its threads or writes from the calling
 * thread (zookeeper_init*, zookeeper_close) runs inside a guard:
 *
 *   - the calling thread's mask blocks SIGPIPE for the call, so the two threads that
 *     zookeeper_init* starts (I/O and completion) inherit a mask that blocks it, for
 *     their whole life: a write of theirs to a dropped connection fails with EPIPE, the
 *     C client handles it as a lost connection, and the signal stays pending on that
 *     thread, where nothing ever takes it;
 *   - a SIGPIPE the call itself raised in the calling thread (zookeeper_close writes its
 *     close request there) is taken off before the mask is given back, unless one was
 *     already pending when the call began (signals of a kind do not queue: that one and
 *     ours are one);
 *   - the calling thread's mask is then exactly what it was.
 *
 * Dispositions are never changed, and the application's threads (and the library's
 * event thread, which runs the application's callbacks) keep their masks. */
#ifndef ZKL_SIGPIPE_H
#define ZKL_SIGPIPE_H

#include <signal.h>
#include <stdbool.h>

struct zkl_sigpipe_guard {
	sigset_t old;  /* the calling thread's mask before */
	bool pending;  /* SIGPIPE was pending (thread or process) before */
};

/* Blocks SIGPIPE in the calling thread and notes what was pending. */
void zkl__sigpipe_block(struct zkl_sigpipe_guard *g);
/* Takes off a SIGPIPE raised since zkl__sigpipe_block() (if none was pending before) and
 * gives the calling thread its mask back. Keeps errno. */
void zkl__sigpipe_restore(struct zkl_sigpipe_guard *g);

#endif
