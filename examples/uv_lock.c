/* uv_lock: takes a zklocks mutex from a libuv loop, through the header-only adapter
 * <zklocks/adapters/libuv.h>.
 *
 *   uv_lock [-s servers] [-t hold_ms] PATH
 *
 * The client is opened with external_loop and attached to the default libuv loop, which
 * also runs a timer of its own (a tick every 100 ms, standing for the rest of a
 * service's work). The program asks for PATH asynchronously, prints "holds PATH (token
 * T) after N ticks" once it holds it, keeps it hold_ms (a libuv timer), releases it,
 * detaches and exits 0; 1 on failure, 2 on bad usage. The servers come from -s, else
 * $ZKLOCK_SERVERS, else 127.0.0.1:2181. Build it with common.c and libuv. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* timerfd, epoll, clocks and pthread types under -std=c11 */
#endif
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <zklocks/adapters/libuv.h>

#include "common.h"

const char prog[] = "uv_lock";
const char usage_args[] = "[-s servers] [-t hold_ms] PATH";

static zkl_uv adapter;
static uv_timer_t tick, hold;
static zkl_lock *lock;
static int ticks, result = 1;

static void finish(void)
{
	uv_close((uv_handle_t *)&tick, NULL);
	uv_close((uv_handle_t *)&hold, NULL);
	zkl_uv_detach(&adapter, NULL);
}

static void on_tick(uv_timer_t *t)
{
	(void)t;
	ticks++;
}

static void on_hold_over(uv_timer_t *t)
{
	(void)t;
	int rc = zkl_lock_release(lock);
	if (rc != 0)
		fail("release", rc);
	result = rc == 0 ? 0 : 1;
	finish();
}

/* Runs on the loop's thread, inside the adapter's zkl_client_process(). */
static void acquired(zkl_lock *l, int rc, void *data)
{
	int hold_ms = *(int *)data;
	if (rc != 0) {
		fail(zkl_lock_path(l), rc);
		finish();
		return;
	}
	printf("holds %s (token %" PRId64 ") after %d ticks\n", zkl_lock_path(l),
	       zkl_lock_token(l), ticks);
	uv_timer_start(&hold, on_hold_over, (uint64_t)(hold_ms > 0 ? hold_ms : 0), 0);
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
	lock = zkl_mutex_lock(m);
	uv_loop_t *loop = uv_default_loop();
	if (zkl_uv_attach(&adapter, loop, c) != 0) {
		fprintf(stderr, "uv_lock: cannot attach the client to the loop\n");
		zkl_mutex_free(m);
		zkl_client_close(c);
		return 1;
	}
	uv_timer_init(loop, &tick);
	uv_timer_init(loop, &hold);
	uv_timer_start(&tick, on_tick, 100, 100);
	if ((rc = zkl_lock_acquire_async(lock, ZKL_WAIT_FOREVER, acquired, &opt.hold_ms)) != 0) {
		fail(opt.args[0], rc);
		finish();
	}
	uv_run(loop, UV_RUN_DEFAULT);
	uv_loop_close(loop);
	zkl_mutex_free(m);
	zkl_client_close(c);
	return result;
}
