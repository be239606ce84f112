/* The recipes' predicates, on hand-made queues (no server). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "predicates.h"

/* Builds a sorted queue from names. */
static size_t queue_of(const char **names, size_t n, zkl_child *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (zkl__child_parse(names[i], &out[k]))
			k++;
	zkl__children_sort(out, k);
	return k;
}

static size_t index_of(const zkl_child *q, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(q[i].name, name) == 0)
			return i;
	fail_msg("%s not in queue", name);
	return n;
}

static void test_first(void **state)
{
	(void)state;
	const char *names[] = {"_c_b-lock-0000000003", "stray", "_c_a-lock-0000000001",
	                       "_c_c-lock-0000000007"};
	zkl_child q[4];
	size_t n = queue_of(names, 4, q);
	assert_int_equal(n, 3);
	size_t watch = 99;
	assert_true(zkl__pred_first.holds(q, n, index_of(q, n, "_c_a-lock-0000000001"), NULL, &watch));
	assert_int_equal(watch, 99);
	assert_false(zkl__pred_first.holds(q, n, index_of(q, n, "_c_c-lock-0000000007"), NULL, &watch));
	assert_string_equal(q[watch].name, "_c_b-lock-0000000003");
	assert_false(zkl__pred_first.holds(q, n, index_of(q, n, "_c_b-lock-0000000003"), NULL, &watch));
	assert_string_equal(q[watch].name, "_c_a-lock-0000000001");
}

static void test_read(void **state)
{
	(void)state;
	const char *names[] = {"_c_1-__READ__0000000001", "_c_2-__READ__0000000002",
	                       "_c_3-__WRIT__0000000003", "_c_4-__READ__0000000004",
	                       "_c_5-__WRIT__0000000005", "_c_6-__READ__0000000006",
	                       "x__rlock__0000000000"};
	zkl_child q[7];
	size_t n = queue_of(names, 7, q);
	assert_int_equal(n, 7);
	size_t watch = 99;
	/* Readers before any writer hold together, kazoo's too. */
	assert_true(zkl__pred_read.holds(q, n, index_of(q, n, "x__rlock__0000000000"), NULL, &watch));
	assert_true(zkl__pred_read.holds(q, n, index_of(q, n, "_c_2-__READ__0000000002"), NULL, &watch));
	/* A reader behind a writer waits for the nearest writer ahead. */
	assert_false(zkl__pred_read.holds(q, n, index_of(q, n, "_c_4-__READ__0000000004"), NULL, &watch));
	assert_string_equal(q[watch].name, "_c_3-__WRIT__0000000003");
	assert_false(zkl__pred_read.holds(q, n, index_of(q, n, "_c_6-__READ__0000000006"), NULL, &watch));
	assert_string_equal(q[watch].name, "_c_5-__WRIT__0000000005");
	/* A writer needs the head of the queue, readers included. */
	assert_false(zkl__pred_first.holds(q, n, index_of(q, n, "_c_3-__WRIT__0000000003"), NULL, &watch));
	assert_string_equal(q[watch].name, "_c_2-__READ__0000000002");
	/* kazoo's lock nodes count as writers for readers. */
	const char *mixed[] = {"k__lock__0000000001", "_c_9-__READ__0000000002"};
	n = queue_of(mixed, 2, q);
	assert_false(zkl__pred_read.holds(q, n, 1, NULL, &watch));
	assert_int_equal(watch, 0);
}

static void test_downgrade_node_order(void **state)
{
	(void)state;
	/* A downgrade read node shares its writer's number: it sorts right after that
	 * writer and before every later writer, so they stay blocked once it is released. */
	const char *names[] = {"_c_w2-__WRIT__0000000009", "_c_d-__READ__0000000004",
	                       "_c_w1-__WRIT__0000000004"};
	zkl_child q[3];
	size_t n = queue_of(names, 3, q);
	assert_string_equal(q[0].name, "_c_w1-__WRIT__0000000004");
	assert_string_equal(q[1].name, "_c_d-__READ__0000000004");
	size_t watch = 99;
	assert_false(zkl__pred_first.holds(q, n, 2, NULL, &watch));
	assert_string_equal(q[watch].name, "_c_d-__READ__0000000004");
	/* With the writer gone, the downgraded reader holds and the next writer waits. */
	zkl_child rest[2] = {q[1], q[2]};
	assert_true(zkl__pred_read.holds(rest, 2, 0, NULL, &watch));
	assert_false(zkl__pred_first.holds(rest, 2, 1, NULL, &watch));
	assert_int_equal(watch, 0);
}

static void test_heir(void **state)
{
	(void)state;
	zkl_child q[4];
	size_t watch = 99;
	/* Second of a mutex queue: when the head goes, we hold without listing again. */
	const char *mutex[] = {"_c_a-lock-0000000001", "_c_b-lock-0000000002",
	                       "_c_c-lock-0000000003"};
	size_t n = queue_of(mutex, 3, q);
	assert_false(zkl__pred_first.holds(q, n, 1, NULL, &watch));
	assert_true(zkl__pred_first.heir(q, 1, watch));
	/* Third: the head may still be there when our predecessor goes. */
	assert_false(zkl__pred_first.holds(q, n, 2, NULL, &watch));
	assert_false(zkl__pred_first.heir(q, 2, watch));
	/* A writer ahead may downgrade, leaving a read node at its number: list again. */
	const char *rw[] = {"_c_w-__WRIT__0000000001", "_c_x-__WRIT__0000000002"};
	n = queue_of(rw, 2, q);
	assert_false(zkl__pred_first.holds(q, n, 1, NULL, &watch));
	assert_false(zkl__pred_first.heir(q, 1, watch));
	const char *kz[] = {"k__lock__0000000001", "j__lock__0000000002"};
	n = queue_of(kz, 2, q);
	assert_false(zkl__pred_first.heir(q, 1, 0));
	/* A read node ahead of a writer cannot leave anything behind. */
	const char *rd[] = {"_c_r-__READ__0000000001", "_c_x-__WRIT__0000000002"};
	n = queue_of(rd, 2, q);
	assert_false(zkl__pred_first.holds(q, n, 1, NULL, &watch));
	assert_true(zkl__pred_first.heir(q, 1, watch));
	/* A reader holds once the nearest writer goes if it was the only writer ahead. */
	const char *rq[] = {"_c_1-__READ__0000000001", "_c_2-__WRIT__0000000002",
	                    "_c_3-__READ__0000000003", "_c_4-__READ__0000000004"};
	n = queue_of(rq, 4, q);
	assert_false(zkl__pred_read.holds(q, n, 3, NULL, &watch));
	assert_int_equal(watch, 1);
	assert_true(zkl__pred_read.heir(q, 3, watch));
	const char *rq2[] = {"_c_1-__WRIT__0000000001", "_c_2-__WRIT__0000000002",
	                     "_c_3-__READ__0000000003"};
	n = queue_of(rq2, 3, q);
	assert_false(zkl__pred_read.holds(q, n, 2, NULL, &watch));
	assert_int_equal(watch, 1);
	assert_false(zkl__pred_read.heir(q, 2, watch));
	/* Counting predicates always list again. */
	assert_null(zkl__pred_count.heir);
}

static void test_queue_alone(void **state)
{
	(void)state;
	zkl_child own;
	/* Number 0 in a folder we just made: nothing can be ahead. */
	assert_true(zkl__child_parse("_c_a-lock-0000000000", &own));
	assert_true(zkl__queue_alone(true, &own));
	/* A folder that existed, or someone else made, may hold anything. */
	assert_false(zkl__queue_alone(false, &own));
	/* Number 1: a node was made (and maybe deleted) before ours. */
	assert_true(zkl__child_parse("_c_a-lock-0000000001", &own));
	assert_false(zkl__queue_alone(true, &own));
	/* kazoo's names count the same way. */
	assert_true(zkl__child_parse("x__lock__0000000000", &own));
	assert_true(zkl__queue_alone(true, &own));
	/* Past the counter's wrap ("%010d" of -1): not 0, so not alone. */
	assert_true(zkl__child_parse("x__lock__-000000001", &own));
	assert_false(zkl__queue_alone(true, &own));
}

static void test_count(void **state)
{
	(void)state;
	int fixed = 2;
	int32_t shared = 0;
	struct zkl_limit lim = {&fixed, &shared};
	zkl_child q[3] = {{0}};
	size_t watch = 0;
	assert_true(zkl__pred_count.holds(q, 1, 0, &lim, &watch));
	assert_true(zkl__pred_count.holds(q, 2, 1, &lim, &watch));
	assert_false(zkl__pred_count.holds(q, 3, 2, &lim, &watch));
	assert_true(watch == ZKL_WATCH_CHILDREN);
	/* A shared limit applies when there is no fixed one; zero or less admits nobody. */
	fixed = 0;
	shared = 3;
	assert_true(zkl__pred_count.holds(q, 3, 2, &lim, &watch));
	shared = 0;
	assert_false(zkl__pred_count.holds(q, 1, 0, &lim, &watch));
	shared = -5;
	assert_false(zkl__pred_count.holds(q, 1, 0, &lim, &watch));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_downgrade_node_order),
		cmocka_unit_test(test_heir),
		cmocka_unit_test(test_queue_alone),
		cmocka_unit_test(test_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
