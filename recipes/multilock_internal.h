/* The multi-lock's entries for an owner (common.h), as its blocking calls are for their
 * thread, so that the simulator drives a blocking multi-lock without threads. Never
 * installed. */
#ifndef ZKL_MULTILOCK_INTERNAL_H
#define ZKL_MULTILOCK_INTERNAL_H

#include <zklocks/multilock.h>

#include "common.h"

/* Acquires every member of ml for owner within one deadline of timeout_ms, as
 * zkl_multilock_acquire() does for its thread, without waiting: the same run. Its
 * members must be on one client. Returns 0, and done(arg, rc) runs once on the loop with
 * no lock held when the acquire ends (0: owner holds every member; else nothing was
 * left taken); 1 if owner re-entered every member at once (done never runs); or a
 * ZKL_E* code, nothing taken, and done never runs. zkl_lock_cancel() on the view
 * cancels it. */
int zkl__multilock_start_as(zkl_multilock *ml, zkl__owner owner, int timeout_ms,
                           void (*done)(void *arg, int rc), void *arg);
/* Releases one level of owner's hold (every member, in reverse order): 0, the first
 * member's error, ZKL_ENOTOWNER or ZKL_ENOTHELD. */
int zkl__multilock_release_as(zkl_multilock *ml, zkl__owner owner);
/* Whether owner holds ml, and every member for owner (none lost). */
bool zkl__multilock_held_as(zkl_multilock *ml, zkl__owner owner);

#endif
