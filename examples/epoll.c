/* epoll: takes a zklocks mutex from an epoll loop, with no thread of zklocks' own.
 *
 *   epoll [-s servers] [-t hold_ms] PATH
 *
 * The client is opened with external_loop: the program polls its descriptor along with a
 * timerfd of its own (a tick every 100 ms, standing for the rest of a service's work),
 * and zklocks runs inside zkl_client_process(), on this thread. It asks for PATH
 * asynchronously, prints "holds PATH (token T) after N ticks" once it holds it, keeps it
 * hold_ms (another timerfd), releases it and exits 0; 1 on failure, 2 on bad usage. The
 * servers come from -s, else $ZKLOCK_SERVERS, else 127.0.0.1:2181. Build it with
 * common.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* timerfd, epoll, clocks and pthread types under -std=c11 */
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <zklocks/zklocks.h>

#include "common.h"

const char prog[] = "epoll";
const char usage_args[] = "[-s servers] [-t hold_ms] PATH";

struct app {
	zkl_lock *lock;
	int hold_fd;     /* fires when the hold is over */
	int hold_ms;
	int ticks;
	int rc;          /* of the acquire, once done */
	bool done;       /* released (or failed): leave the loop */
};

/* Arms a one-shot or periodic timerfd. */
static void arm(int fd, int first_ms, int every_ms)
{
	struct itimerspec t = {
		.it_value = {first_ms / 1000, (long)(first_ms % 1000) * 1000000},
		.it_interval = {every_ms / 1000, (long)(every_ms % 1000) * 1000000},
	};
	timerfd_settime(fd, 0, &t, NULL);
}

/* Runs in zkl_client_process(), on the loop's thread. */
static void acquired(zkl_lock *l, int rc, void *data)
{
	struct app *a = data;
	a->rc = rc;
	if (rc != 0) {
		fail(zkl_lock_path(l), rc);
		a->done = true;
		return;
	}
	printf("holds %s (token %" PRId64 ") after %d ticks\n", zkl_lock_path(l),
	       zkl_lock_token(l), a->ticks);
	arm(a->hold_fd, a->hold_ms > 0 ? a->hold_ms : 1, 0);
}

int main(int argc, char **argv)
{
	struct rounds_args opt;
	parse_rounds_args(argc, argv, 0, 1, &opt);
	setvbuf(stdout, NULL, _IOLBF, 0);

	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = opt.servers ? opt.servers : getenv("ZKLOCK_SERVERS");
	if (!o.servers)
		o.servers = "127.0.0.1:2181";
	o.external_loop = true;
	zkl_client *c;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0) {
		fail(o.servers, rc);
		return 1;
	}
	zkl_mutex *m;
	if ((rc = zkl_mutex_new(&m, c, opt.args[0])) != 0) {
		fail(opt.args[0], rc);
		zkl_client_close(c);
		return 1;
	}
	struct app a = {.lock = zkl_mutex_lock(m), .hold_ms = opt.hold_ms, .rc = 1};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	a.hold_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int zfd = zkl_client_loop_fd(c);
	int fds[] = {zfd, tick, a.hold_fd};
	for (int i = 0; i < 3; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	arm(tick, 100, 100);

	if ((rc = zkl_lock_acquire_async(a.lock, ZKL_WAIT_FOREVER, acquired, &a)) != 0) {
		fail(opt.args[0], rc);
		a.done = true;
	}
	while (!a.done) {
		struct epoll_event ev[3];
		int n = epoll_wait(ep, ev, 3, zkl_client_loop_timeout(c));
		for (int i = 0; i < n; i++) {
			uint64_t count;
			if (ev[i].data.fd == tick && read(tick, &count, sizeof count) > 0)
				a.ticks += (int)count;
			if (ev[i].data.fd == a.hold_fd && read(a.hold_fd, &count, sizeof count) > 0) {
				rc = zkl_lock_release(a.lock);
				if (rc != 0)
					fail("release", rc);
				a.rc = rc;
				a.done = true;
			}
		}
		zkl_client_process(c); /* whether the descriptor fired or the timeout passed */
	}
	close(a.hold_fd);
	close(tick);
	close(ep);
	zkl_mutex_free(m);
	zkl_client_close(c);
	return a.rc == 0 ? 0 : 1;
}
