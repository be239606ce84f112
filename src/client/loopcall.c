/* Crossing between the loop and other code: an application thread that has the loop run
 * something for it and waits until it has (zkl__loop_run), and a step of the loop that
 * runs code of the application's (zkl__loop_callout).
 *
 * A recipe whose state only the loop touches answers its public calls so: the call runs
 * on the loop, in order with everything handed to the loop before it, and the calling
 * thread waits on a semaphore of its own, never on the client's mutex. On a thread that
 * runs the loop, and with external_loop on any thread, zkl__call() runs it at once, so
 * that nothing there waits for the loop; the semaphore is then posted already. */
#include <semaphore.h>
#include <stddef.h>

#include "core.h"

struct loop_run {
	struct zkl__call call;      /* first */
	void (*fn)(zkl_client *c, void *arg);
	void *arg;
	sem_t done;
};

static void loop_run_call(zkl_client *c, struct zkl__call *call)
{
	struct loop_run *r = (struct loop_run *)(void *)call;
	r->fn(c, r->arg);
	sem_post(&r->done);
}

void zkl__call_wait(zkl_client *c, struct zkl__call *call, sem_t *done)
{
	if (zkl__call(c, call)) {
		while (sem_wait(done) != 0)
			; /* EINTR: a signal handler ran */
	} else {
		/* The loop runs no more (closing): nothing else touches what it touches. */
		pthread_mutex_lock(&c->mu);
		zkl__inbox_drain(c);
		call->fn(c, call);
		pthread_mutex_unlock(&c->mu);
	}
}

void zkl__loop_run(zkl_client *c, void (*fn)(zkl_client *c, void *arg), void *arg)
{
	struct loop_run r = {.call.fn = loop_run_call, .fn = fn, .arg = arg};
	sem_init(&r.done, 0, 0);
	zkl__call_wait(c, &r.call, &r.done);
	sem_destroy(&r.done);
}

void zkl__loop_callout(zkl_client *c, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_unlock(&c->mu);
	fn(arg);
	pthread_mutex_lock(&c->mu);
}
