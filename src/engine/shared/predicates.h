/* The queue's rules the engine gives the recipes (DESIGN.md, "The one mechanism"), each
 * with what it lets the engine assume (engine.c). Pure functions, unit-tested without a
 * server. */
#ifndef ZKL_PREDICATES_H
#define ZKL_PREDICATES_H

#include "engine.h"

/* Mutex, write lock, leader, a semaphore's gate: first in line; otherwise watch the node
 * just before us. Heir: when that node was the only one ahead and may not downgrade. */
extern const struct zkl_predicate zkl__pred_first;

/* Read lock: no writer ahead of us; otherwise watch the nearest writer ahead (the nearest
 * wakes least often). Heir: when that writer was the only writer ahead. */
extern const struct zkl_predicate zkl__pred_read;

/* A semaphore's leases: hold while the leases number at most the limit, else wait for
 * any change of the folder. arg is a struct zkl_limit (read with the client mutex held):
 * the fixed limit if positive, else the shared one. Never an heir: always list again. */
struct zkl_limit {
	const int *fixed;
	const int32_t *shared;
};
extern const struct zkl_predicate zkl__pred_count;

#endif
