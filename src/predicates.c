/* The recipes' predicates: given the queue in order and our place in it, do we hold,
 * and if not, what do we wait for? Pure functions, unit-tested without a server. */
#include "engine.h"

bool zkl_pred_first(const zkl_child *queue, size_t n, size_t self, void *arg, size_t *watch)
{
	(void)queue;
	(void)n;
	(void)arg;
	if (self == 0)
		return true;
	*watch = self - 1;
	return false;
}

bool zkl_pred_read(const zkl_child *queue, size_t n, size_t self, void *arg, size_t *watch)
{
	(void)n;
	(void)arg;
	for (size_t i = self; i-- > 0;) {
		if (zkl_kind_is_writer(queue[i].kind)) {
			*watch = i;
			return false;
		}
	}
	return true;
}

bool zkl_pred_count(const zkl_child *queue, size_t n, size_t self, void *arg, size_t *watch)
{
	(void)queue;
	(void)self;
	const struct zkl_limit *l = arg;
	int max = *l->fixed > 0 ? *l->fixed : (*l->shared > 0 ? (int)*l->shared : 0);
	if (n <= (size_t)max)
		return true;
	*watch = ZKL_WATCH_CHILDREN;
	return false;
}

bool zkl_queue_alone(bool made_folder, const zkl_child *own)
{
	return made_folder && own->seq == 0;
}

/* Nodes that can leave a node at their own place in the queue: a writer that downgrades
 * creates a read node with its own number before it goes. */
static bool can_downgrade(enum zkl_kind k)
{
	return k == ZKL_KIND_WRITE || k == ZKL_KIND_KLOCK;
}

bool zkl_pred_heir(zkl_predicate_fn pred, const zkl_child *queue, size_t self, size_t watch)
{
	if (watch >= self)
		return false;
	if (pred == zkl_pred_first)
		return self == 1 && !can_downgrade(queue[0].kind);
	if (pred == zkl_pred_read) {
		for (size_t i = 0; i < watch; i++)
			if (zkl_kind_is_writer(queue[i].kind))
				return false;
		return true;
	}
	return false;
}
