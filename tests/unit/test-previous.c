/* How the holder before left, decided from the note "<path>.previous" and the node an
 * acquire last waited behind (zkl__previous_decide; no server). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lock_internal.h"

static zkl_previous decide(const char *note, const char *pred, const char *self, char *who)
{
	return zkl__previous_decide(note, note ? strlen(note) : 0, pred, self, who, 64);
}

/* Waited behind a node: released only if the note names it as released. */
static void test_waited_behind(void **state)
{
	(void)state;
	char who[64];
	assert_int_equal(decide("released _c_a-lock-0000000001", "_c_a-lock-0000000001",
	                        "_c_b-lock-0000000002", who), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(who, "_c_a-lock-0000000001");
	/* A newline at the end is allowed. */
	assert_int_equal(decide("released x-lock-0000000001\n", "x-lock-0000000001", "y", who),
	                 ZKL_PREVIOUS_RELEASED);
	/* The note names another node: the one waited behind left none. */
	assert_int_equal(decide("released _c_a-lock-0000000001", "_c_c-lock-0000000003",
	                        "_c_b-lock-0000000004", who), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, "_c_c-lock-0000000003");
	/* Still "held": it vanished. No note at all: it vanished too (another library). */
	assert_int_equal(decide("held _c_c-lock-0000000003", "_c_c-lock-0000000003", "me", who),
	                 ZKL_PREVIOUS_VANISHED);
	assert_int_equal(decide(NULL, "lock-0000000007", "lock-0000000008", who),
	                 ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, "lock-0000000007");
	/* A released note for a longer name that starts the same is another node. */
	assert_int_equal(decide("released lock-00000000070", "lock-0000000007", "me", who),
	                 ZKL_PREVIOUS_VANISHED);
}

/* Waited behind none: the note says who held last. */
static void test_waited_behind_none(void **state)
{
	(void)state;
	char who[64];
	assert_int_equal(decide(NULL, "", "me", who), ZKL_PREVIOUS_NONE);
	assert_string_equal(who, "");
	assert_int_equal(decide("released a-lock-0000000001", "", "me", who),
	                 ZKL_PREVIOUS_RELEASED);
	assert_string_equal(who, "a-lock-0000000001");
	assert_int_equal(decide("held a-lock-0000000001", "", "me", who), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, "a-lock-0000000001");
	/* Our own "held" (a second look after our write): proves nothing. */
	assert_int_equal(decide("held me", "", "me", who), ZKL_PREVIOUS_NONE);
}

/* A reader ahead of a writer is no predecessor: readers keep no note. */
static void test_reader_ahead(void **state)
{
	(void)state;
	char who[64];
	assert_int_equal(decide(NULL, "_c_r-__READ__0000000001", "w", who), ZKL_PREVIOUS_NONE);
	assert_int_equal(decide("released _c_w-__WRIT__0000000000", "_c_r-__READ__0000000001",
	                        "w", who), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(who, "_c_w-__WRIT__0000000000");
}

/* Notes not written by zklocks prove nothing. */
static void test_unreadable(void **state)
{
	(void)state;
	char who[64];
	const char *bad[] = {"", "released", "released ", "released a/b", "held \n",
	                     "RELEASED a", "releaseda", "released a\n\n", "released a\nb\nc",
	                     "released a\n\tb", "held a\nexited 0", "held"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(decide(bad[i], "", "me", who), ZKL_PREVIOUS_NONE);
		assert_string_equal(who, "");
	}
	/* A NUL inside. */
	assert_int_equal(zkl__previous_decide("released a\0b", 12, "", "me", who, sizeof who),
	                 ZKL_PREVIOUS_NONE);
	/* A name longer than the room is cut short, never overrun. */
	char small[4];
	assert_int_equal(zkl__previous_decide("released abcdefgh", 17, "", "me", small,
	                                      sizeof small), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(small, "abc");
}

/* A release's note may say how its hold ended, on a second line; a note without one
 * reads as before, and an end is never read from a note that is not a release's. */
static void test_end(void **state)
{
	(void)state;
	char who[64], end[ZKL_END_MAX];
	assert_int_equal(zkl__previous_decide_end("released a-lock-1\nmax-runtime", 29, "", "me",
	                                          who, sizeof who, end, sizeof end),
	                 ZKL_PREVIOUS_RELEASED);
	assert_string_equal(who, "a-lock-1");
	assert_string_equal(end, "max-runtime");
	const char *n = "released a-lock-1\nexited 3\n";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "a-lock-1", "me", who, sizeof who,
	                                          end, sizeof end), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(end, "exited 3");
	/* The end of another node's release is not the predecessor's. */
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "b-lock-2", "me", who, sizeof who,
	                                          end, sizeof end), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(end, "");
	/* Without a second line: none said. */
	n = "released a-lock-1\n";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "", "me", who, sizeof who, end,
	                                          sizeof end), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(end, "");
	/* Cut short to the room given; too long to be an end: unreadable. */
	char small[4];
	n = "released a\nsignal 9";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "", "me", who, sizeof who, small,
	                                          sizeof small), ZKL_PREVIOUS_RELEASED);
	assert_string_equal(small, "sig");
	char lng[128];
	snprintf(lng, sizeof lng, "released a\n%0*d", ZKL_END_MAX, 7);
	assert_int_equal(zkl__previous_decide_end(lng, strlen(lng), "", "me", who, sizeof who, end,
	                                          sizeof end), ZKL_PREVIOUS_NONE);
}

/* A holder that lost its lock and said so: vanished (no release note), with the end
 * "lost"; only for the node it names. */
static void test_lost(void **state)
{
	(void)state;
	char who[64], end[ZKL_END_MAX];
	const char *n = "lost a-lock-1";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "", "me", who, sizeof who, end,
	                                          sizeof end), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, "a-lock-1");
	assert_string_equal(end, "lost");
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "a-lock-1", "me", who, sizeof who,
	                                          end, sizeof end), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(end, "lost");
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "b-lock-2", "me", who, sizeof who,
	                                          end, sizeof end), ZKL_PREVIOUS_VANISHED);
	assert_string_equal(who, "b-lock-2");
	assert_string_equal(end, "");
	/* Our own, or with more after the name: proves nothing. */
	n = "lost me";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "", "me", who, sizeof who, end,
	                                          sizeof end), ZKL_PREVIOUS_NONE);
	n = "lost a\nexited 0";
	assert_int_equal(zkl__previous_decide_end(n, strlen(n), "", "me", who, sizeof who, end,
	                                          sizeof end), ZKL_PREVIOUS_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waited_behind),
		cmocka_unit_test(test_waited_behind_none),
		cmocka_unit_test(test_reader_ahead),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_end),
		cmocka_unit_test(test_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
