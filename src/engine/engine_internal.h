/* What the engine's files share (engine.c, acquire.c). Never used outside src/engine. */
#ifndef ZKL_ENGINE_INTERNAL_H
#define ZKL_ENGINE_INTERNAL_H

#include <string.h>

#include "engine.h"

/* Our node is known (on the loop): arm its revocation watch if the recipe asks for
 * one. */
void zkl__node_known(const struct zkl_queue *q, struct zkl_node *node);
/* Forgets our node (on the loop): its revocation watch goes too, and q->on_node is
 * told. */
void zkl__node_forget(const struct zkl_queue *q, struct zkl_node *node);

/* Drops node's revocation watch, if it has one (on the loop). */
static inline void zkl__node_rev_drop(zkl_client *c, struct zkl_node *node)
{
	if (node->rev) {
		zkl__revwatch_remove(c, node->rev);
		node->rev = NULL;
	}
}

/* Makes node->hold if q asks for one, at a grant (on the loop): 0, or ZKL_ENOMEM
 * with nothing made. */
int zkl__engine_hold(zkl_client *c, const struct zkl_queue *q, struct zkl_node *node,
                    int64_t since);

/* Parses and sorts op's children into a new array (on the loop), leaving out our own
 * nodes whose delete is on its way. Takes the names from the op: free them with
 * zkl__names_free(*names, *count). */
int zkl__take_queue(zkl_client *c, const char *path, struct zkl_op *op, zkl_child **queue,
                   size_t *n, char ***names, int *count);

/* The last component of a path. */
static inline const char *zkl__basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

#endif
