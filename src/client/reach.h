/* Why no session comes up (reach.c): zkl_client_open() looks at the servers with TCP
 * connects of its own while it waits for its first session. */
#ifndef ZKL_REACH_H
#define ZKL_REACH_H

#include <stdbool.h>
#include <stdint.h>

enum zkl_reach_result {
	ZKL_REACH_UNKNOWN,  /* no answer either way yet, or a name that does not resolve */
	ZKL_REACH_REFUSED,  /* every address of every server refused the connection */
	ZKL_REACH_ACCEPTED, /* some address accepted it */
};

struct zkl_reach {
	int64_t next_ms;    /* when to look next (CLOCK_MONOTONIC ms) */
	int refused_rounds; /* rounds in a row in which every address refused */
	bool accepted;      /* some round saw a server accept a connection */
};

void zkl__reach_init(struct zkl_reach *r);
/* Looks at the servers ("host:port[,...][/chroot]") if it is time to (blocking for up to
 * about 100 ms); returns true once they have refused every connection for a few rounds in
 * a row: nothing listens. Call without any lock held. */
bool zkl__reach_step(struct zkl_reach *r, const char *servers);

#endif
