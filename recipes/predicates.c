/* The recipes' predicates: given the queue in order and our place in it, do we hold,
 * and if not, what do we wait for? Pure functions, unit-tested without a server. */
#include "predicates.h"

static bool first_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                        size_t *watch)
{
	(void)queue;
	(void)n;
	(void)arg;
	if (self == 0)
		return true;
	*watch = self - 1;
	return false;
}

static bool first_heir(const zkl_child *queue, size_t self, size_t watch)
{
	(void)watch;
	return self == 1 && !zkl__kind_may_downgrade(queue[0].kind);
}

const struct zkl_predicate zkl__pred_first = { first_holds, first_heir };

static bool read_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                       size_t *watch)
{
	(void)n;
	(void)arg;
	for (size_t i = self; i-- > 0;) {
		if (zkl__kind_is_writer(queue[i].kind)) {
			*watch = i;
			return false;
		}
	}
	return true;
}

static bool read_heir(const zkl_child *queue, size_t self, size_t watch)
{
	(void)self;
	for (size_t i = 0; i < watch; i++)
		if (zkl__kind_is_writer(queue[i].kind))
			return false;
	return true;
}

const struct zkl_predicate zkl__pred_read = { read_holds, read_heir };

static bool count_holds(const zkl_child *queue, size_t n, size_t self, void *arg,
                        size_t *watch)
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

const struct zkl_predicate zkl__pred_count = { count_holds, NULL };
