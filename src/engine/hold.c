/* The engine's side of a hold: what a recipe asks of the hold made at the grant of its
 * node (engine.c, zkl__engine_hold). The client keeps the record and the watch on its node
 * (src/client/holds.c); the recipes see them only through what is here, in
 * terms of their node, so that the rule each answer follows is written once. All on the
 * loop but zkl__node_lost(), which reads the atomic loss. */
#include <string.h>

#include "engine.h"

bool zkl__node_lost(const struct zkl_node *node)
{
	return zkl__hold_lost(node->hold);
}

int64_t zkl__loss_deadline(zkl_client *c)
{
	return zkl__lost_at(c);
}

int zkl__loss_reason(const struct zkl_hold *h)
{
	return h->node_gone ? ZKL_EDELETED : ZKL_ELOST;
}

bool zkl__loss_outside(const struct zkl_hold *h)
{
	return h->deleted;
}

/* ---- a hold the loop keeps from its grant to its end ------------------------------ */

bool zkl__node_follow(zkl_client *c, struct zkl_node *node, struct zkl_stage *s)
{
	struct zkl_hold *h = node->hold;
	if (!h || !h->nw)
		return false;
	zkl__hold_follow(c, h, &s->w);
	return true;
}

void zkl__node_confirm(zkl_client *c, struct zkl_node *node)
{
	zkl__hold_confirm(c, node->hold);
}

bool zkl__node_confirmed(const struct zkl_node *node)
{
	return zkl__hold_confirmed(node->hold);
}

int zkl__node_stands(zkl_client *c, const struct zkl_node *node, int64_t *until)
{
	const struct zkl_hold *h = node->hold;
	if (!zkl__hold_lost(h) && node->gen == c->gen && zkl__now_ms() < zkl__lost_at(c))
		return 0;
	/* Lost at once; the reason waits for the hold's watch to learn whether the node was
	 * deleted from outside, the session living on, or went with the session. */
	const int64_t lost_at = zkl__lost_at(c);
	if (h && h->deleting && node->gen == c->gen && zkl__now_ms() < lost_at) {
		*until = lost_at;
		return ZKL_HOLD_ASKING;
	}
	return h && h->deleted ? ZKL_ENOTHELD : ZKL_ELOST;
}

void zkl__node_hold_end(zkl_client *c, struct zkl_node *node, enum zkl_hold_ending how)
{
	struct zkl_hold *h = node->hold;
	if (!h)
		return;
	node->hold = NULL;
	/* The observer hears how it ended, once: a loss the loop has reported was told as
	 * it was. */
	if (how != ZKL_HOLD_END_QUIET && !h->notified)
		zkl__hold_observe(c, h, how == ZKL_HOLD_END_LOST || atomic_load(&h->lost)
		                        ? ZKL_EVENT_LOST : ZKL_EVENT_RELEASED);
	zkl__hold_drop(c, h);
}

/* ---- a hold known by its node's path ---------------------------------------------- */

/* The hold of ours whose node is path, or NULL. */
static struct zkl_hold *hold_find(zkl_client *c, const char *path)
{
	for (struct zkl_hold *h = c->holds; h; h = h->next)
		if (strcmp(h->path, path) == 0)
			return h;
	return NULL;
}

/* Whether h is still its owner's: neither ended nor on its way out. */
static bool hold_owned(const struct zkl_hold *h)
{
	return h && atomic_load(&h->state) != ZKL_HOLD_ENDED && !atomic_load(&h->releasing);
}

enum zkl_held_at zkl__held_at(zkl_client *c, const char *path)
{
	const struct zkl_hold *h = hold_find(c, path);
	if (!hold_owned(h))
		return h && atomic_load(&h->lost) ? ZKL_HELD_AT_GONE_LOST : ZKL_HELD_AT_NONE;
	return atomic_load(&h->lost) || h->gen != c->gen ? ZKL_HELD_AT_LOST : ZKL_HELD_AT_HELD;
}

bool zkl__held_at_gone(zkl_client *c, const char *path)
{
	struct zkl_hold *h = hold_find(c, path);
	if (!hold_owned(h))
		return false;
	zkl__hold_mark_lost(c, h);
	return true;
}
