/* What the recipes take from the inspection (inspect.c). Never installed. */
#ifndef ZKL_INSPECT_INTERNAL_H
#define ZKL_INSPECT_INTERNAL_H

#include <zklocks/common.h>

/* The leases of the semaphore at path, oldest first, each with holder set unless it is
 * the lease that waits at the gate (inspect.h says how that one is told). limit is the
 * handle's, used when the path records none (0: unknown). Blocks for two round trips
 * on c's session. On success *out is the caller's: zkl_participants_free(*out, *count).
 * An absent path gives an empty list. */
int zkl__inspect_leases(zkl_client *c, const char *path, int limit, zkl_participant **out,
                       size_t *count);

#endif
