/* Node names and the queue built from a listing: any bytes, any count of names, with
 * duplicate and missing sequence numbers, Curator's and kazoo's names mixed. The input
 * is the listing, names separated by '\n' (a server's names hold no NUL, and the '\n'
 * is as good a separator as any other byte for the parser). Each name is parsed as
 * the engine parses a listing (zkl__take_queue), the queue sorted, and every recipe's
 * predicate asked for every place in it.
 *
 * What must hold, besides no crash, leak or undefined behaviour: a parsed name's
 * sequence number is a signed 32-bit value and its kind a known one; sorting keeps the
 * same names; every predicate that does not hold names a node ahead of ours to watch
 * (or, the semaphore's, the folder); the first in the queue always holds a mutex;
 * zkl__name_has_uuid() finds our uuid only where Curator's or kazoo's protected names
 * put it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predicates.h"
#include "fuzz.h"

enum { MAX_NAMES = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	char *names[MAX_NAMES];
	size_t count = 0;
	for (char *p = text, *end = text + size; count < MAX_NAMES;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		names[count++] = p;
		if (!nl)
			break;
		*nl = 0;
		p = nl + 1;
	}
	zkl_child *q = malloc(count * sizeof *q);
	size_t n = 0;
	uint64_t sum_before = 0, sum_after = 0;
	for (size_t i = 0; q && i < count; i++) {
		if (!zkl__child_parse(names[i], &q[n]))
			continue;
		CHECK(q[n].name == names[i]);
		CHECK(q[n].seq >= INT32_MIN && q[n].seq <= INT32_MAX);
		CHECK(q[n].kind < ZKL_KIND_COUNT);
		CHECK(zkl__kind_marker(q[n].kind) && strstr(names[i], zkl__kind_marker(q[n].kind)));
		q[n].index = i;
		sum_before += i * 2654435761u + (uint64_t)q[n].seq;
		n++;
	}
	if (q) {
		zkl__children_sort(q, n);
		for (size_t i = 0; i < n; i++) {
			CHECK(q[i].name == names[q[i].index]);
			sum_after += q[i].index * 2654435761u + (uint64_t)q[i].seq;
		}
		CHECK(sum_before == sum_after);
		const int fixed = (int)(size % 5), none = 0;
		const int32_t shared = (int32_t)(size % 3);
		struct zkl_limit limit = {.fixed = &fixed, .shared = &shared};
		struct zkl_limit unlimited = {.fixed = &none, .shared = &shared};
		const struct {
			const struct zkl_predicate *p;
			void *arg;
		} preds[] = {{&zkl__pred_first, NULL}, {&zkl__pred_read, NULL},
		             {&zkl__pred_count, &limit}, {&zkl__pred_count, &unlimited}};
		for (size_t k = 0; k < sizeof preds / sizeof *preds; k++) {
			for (size_t self = 0; self < n; self++) {
				size_t watch = SIZE_MAX - 1;
				if (preds[k].p->holds(q, n, self, preds[k].arg, &watch))
					continue;
				CHECK(watch == ZKL_WATCH_CHILDREN || watch < self);
				if (preds[k].p->heir && watch != ZKL_WATCH_CHILDREN)
					(void)preds[k].p->heir(q, self, watch);
			}
			if (n > 0 && k == 0) {
				size_t watch;
				CHECK(preds[k].p->holds(q, n, 0, NULL, &watch));
			}
		}
		zkl_child own;
		if (n > 0) {
			own = q[0];
			(void)zkl__queue_alone(size & 1, &own);
		}
	}
	/* Our own names: the prefix we make, and the uuid found in it again. */
	char uuid[ZKL_UUID_LEN + 1] = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0";
	for (size_t i = 0; i < count; i++) {
		bool ours = zkl__name_has_uuid(names[i], uuid);
		/* Curator's "_c_<uuid>-", or kazoo's "<uuid without dashes>__". */
		CHECK(!ours || strncmp(names[i], "_c_", 3) == 0 ||
		      strncmp(names[i], "0f1e2d3c4b5a49788695a4b3c2d1e0f0__", 34) == 0);
	}
	char prefix[ZKL_PROTECT_PREFIX_LEN + 32];
	CHECK(zkl__node_prefix(prefix, sizeof prefix, uuid, (enum zkl_kind)(size % ZKL_KIND_COUNT)) >
	      0);
	CHECK(zkl__name_has_uuid(prefix, uuid));
	free(q);
	free(text);
	return 0;
}
