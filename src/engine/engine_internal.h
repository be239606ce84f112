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

/* Parses and sorts a listing's names (count of them, from zkl__op_take_names) into a new
 * array (on the loop), leaving out our own nodes whose delete is on its way. The array
 * points into the names, which stay the caller's: free them with
 * zkl__names_free(names, count) after the array. */
int zkl__take_queue(zkl_client *c, const char *path, char **names, int count,
                   zkl_child **queue, size_t *n);

/* Takes a listing's names and their count out of its answer, so that the request can
 * go before they are read. */
static inline void zkl__op_take_names(struct zkl_op *op, char ***names, int *count)
{
	*names = op->names;
	*count = op->count;
	op->names = NULL;
	op->count = 0;
}

/* The last component of a path. */
static inline const char *zkl__basename(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

#endif
