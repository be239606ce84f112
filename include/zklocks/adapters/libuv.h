/* zklocks on a libuv loop: a header-only adapter, so that libzklocks itself never
 * depends on libuv. Include it where the loop lives, and link with libuv.
 *
 *     zkl_client_options o;
 *     zkl_client_options_init(&o);
 *     o.servers = "127.0.0.1:2181";
 *     o.external_loop = true;              // no thread: the libuv loop runs zklocks
 *     zkl_client *c;
 *     zkl_client_open(&c, &o);
 *     zkl_uv *u = malloc(sizeof *u);
 *     zkl_uv_attach(u, uv_default_loop(), c);
 *     ... zkl_lock_acquire_async(...): its callback runs on the loop's thread ...
 *     zkl_uv_detach(u, on_detached);       // on_detached(u) frees u; then close c
 *
 * The adapter polls the client's descriptor (zkl_client_loop_fd()) and keeps one timer at
 * zkl_client_loop_timeout(); either calls zkl_client_process(), and the timer is set
 * again after every call. Everything runs on the loop's thread, and nothing zklocks does
 * there waits for the server: releases, cancels, frees and leader closes return at once
 * (their deletes go on in the background), and a call that needs an answer (a blocking
 * acquire, participants, records, inspection) fails there at once with ZKL_EDEADLK:
 * make it from another thread (uv_queue_work). */
#ifndef ZKLOCKS_ADAPTERS_LIBUV_H
#define ZKLOCKS_ADAPTERS_LIBUV_H

#include <uv.h>

#include <zklocks/zklocks.h>

typedef struct zkl_uv zkl_uv;

struct zkl_uv {
	zkl_client *client;
	uv_poll_t poll;
	uv_timer_t timer;
	int open_handles;               /* handles not yet closed, during detach */
	void (*detached)(zkl_uv *u);
	int last_rc;                    /* the last zkl_client_process() result */
	void *data;                     /* the application's */
};

static inline void zkl_uv__run(zkl_uv *u);

static inline void zkl_uv__on_timer(uv_timer_t *t)
{
	zkl_uv__run((zkl_uv *)t->data);
}

static inline void zkl_uv__on_poll(uv_poll_t *p, int status, int events)
{
	(void)status;
	(void)events;
	zkl_uv__run((zkl_uv *)p->data);
}

/* Processes, then sets the timer to the client's next deadline. */
static inline void zkl_uv__run(zkl_uv *u)
{
	u->last_rc = zkl_client_process(u->client);
	if (u->last_rc != 0)
		return; /* closing: detach is on its way */
	int t = zkl_client_loop_timeout(u->client);
	if (t >= 0)
		uv_timer_start(&u->timer, zkl_uv__on_timer, (uint64_t)t, 0);
	else
		uv_timer_stop(&u->timer);
}

/* Runs client c (opened with external_loop) on loop. u is the caller's, and must stay
 * put until detached. Returns 0, or a libuv error code (negative; uv_strerror()). */
static inline int zkl_uv_attach(zkl_uv *u, uv_loop_t *loop, zkl_client *c)
{
	int fd = zkl_client_loop_fd(c);
	if (fd < 0)
		return UV_EINVAL;
	u->client = c;
	u->open_handles = 0;
	u->detached = NULL;
	u->last_rc = 0;
	int rc = uv_poll_init(loop, &u->poll, fd);
	if (rc != 0)
		return rc;
	u->poll.data = u;
	rc = uv_timer_init(loop, &u->timer);
	if (rc != 0) {
		uv_close((uv_handle_t *)&u->poll, NULL);
		return rc;
	}
	u->timer.data = u;
	rc = uv_poll_start(&u->poll, UV_READABLE, zkl_uv__on_poll);
	if (rc != 0) {
		uv_close((uv_handle_t *)&u->poll, NULL);
		uv_close((uv_handle_t *)&u->timer, NULL);
		return rc;
	}
	/* Run once soon: whatever was queued before the loop watched. */
	uv_timer_start(&u->timer, zkl_uv__on_timer, 0, 0);
	return 0;
}

static inline void zkl_uv__on_closed(uv_handle_t *h)
{
	zkl_uv *u = (zkl_uv *)h->data;
	if (--u->open_handles == 0 && u->detached)
		u->detached(u);
}

/* Stops running the client on the loop. detached(u), if not NULL, runs on the loop once
 * libuv is done with u; free u there (or after), and only then close the client. */
static inline void zkl_uv_detach(zkl_uv *u, void (*detached)(zkl_uv *u))
{
	u->detached = detached;
	u->open_handles = 2;
	uv_poll_stop(&u->poll);
	uv_timer_stop(&u->timer);
	uv_close((uv_handle_t *)&u->poll, zkl_uv__on_closed);
	uv_close((uv_handle_t *)&u->timer, zkl_uv__on_closed);
}

#endif
