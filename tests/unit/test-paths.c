/* Unit tests of lock path checks and joins (src/base/paths.c). No server needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <zklocks/common.h>
#include <zklocks/errors.h>

#include "errors_internal.h"
#include "paths.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const valid_paths[] = {
	"/a",
	"/a/b-c_d.e",
	"/locks/nightly-backup",
	"/apps/x/locks/_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1",
	"/a/.b",          /* only "." and ".." themselves are refused */
	"/a/..b",
	"/a/b..",
	"/a/...",
	"/zookeeperx",    /* only "/zookeeper" and below is reserved */
	"/zoo/zookeeper",
	"/a b",
	"/caf\xc3\xa9",            /* U+00E9 */
	"/\xe6\x97\xa5\xe6\x9c\xac", /* U+65E5 U+672C */
	"/a\xc2\xa0",              /* U+00A0, just past the C1 controls */
	"/a\xef\xa4\x80",          /* U+F900, just past the private-use area */
	"/a\xef\xbf\xaf",          /* U+FFEF, just below U+FFF0 */
	"/a\xed\x9f\xbf",          /* U+D7FF, just below the surrogates */
	"/a~!@#$%^&*()=+[]{};:'\",<>?|\\",
};

struct bad_path {
	const char *path;
	const char *reason; /* a substring the message must contain */
};

static const struct bad_path bad_paths[] = {
	{ NULL, "is NULL" },
	{ "", "is empty" },
	{ "locks/x", "is not absolute (must start with '/')" },
	{ "a", "is not absolute" },
	{ " /a", "is not absolute" },
	{ "/", "is the root \"/\"" },
	{ "//", "has an empty segment (\"//\")" },
	{ "/a//b", "has an empty segment (\"//\")" },
	{ "//a", "has an empty segment (\"//\")" },
	{ "/a/", "ends with '/'" },
	{ "/a/b/", "ends with '/'" },
	{ "/.", "has a \".\" or \"..\" segment" },
	{ "/..", "has a \".\" or \"..\" segment" },
	{ "/a/.", "has a \".\" or \"..\" segment" },
	{ "/a/..", "has a \".\" or \"..\" segment" },
	{ "/a/./b", "has a \".\" or \"..\" segment" },
	{ "/a/../b", "has a \".\" or \"..\" segment" },
	{ "/zookeeper", "is under the reserved \"/zookeeper\"" },
	{ "/zookeeper/quota", "is under the reserved \"/zookeeper\"" },
	{ "/zookeeper/config/x", "is under the reserved \"/zookeeper\"" },
	{ "/a\x01" "b", "has a control character (byte 0x01 at offset 2)" },
	{ "/a\tb", "has a control character (byte 0x09" },
	{ "/a\nb", "has a control character (byte 0x0a" },
	{ "/a\x1f", "has a control character (byte 0x1f" },
	{ "/a\x7f", "has a control character (byte 0x7f" },
	{ "/a\xc2\x80", "has a control character (U+0080" },
	{ "/a\xc2\x9f", "has a control character (U+009F" },
	{ "/a\xff", "is not valid UTF-8" },
	{ "/a\x80", "is not valid UTF-8" },
	{ "/a\xc3", "is not valid UTF-8" },           /* truncated */
	{ "/a\xc0\xaf", "is not valid UTF-8" },       /* overlong '/' */
	{ "/a\xe0\x80\xaf", "is not valid UTF-8" },   /* overlong '/' */
	{ "/a\xed\xa0\x80", "is not valid UTF-8" },   /* an encoded surrogate */
	{ "/a\xf4\x90\x80\x80", "is not valid UTF-8" }, /* above U+10FFFF */
	{ "/a\xee\x80\x80", "has a character ZooKeeper refuses (U+E000" },
	{ "/a\xef\xa3\xbf", "has a character ZooKeeper refuses (U+F8FF" },
	{ "/a\xef\xbf\xb0", "has a character ZooKeeper refuses (U+FFF0" },
	{ "/a\xef\xbf\xbd", "has a character ZooKeeper refuses (U+FFFD" },
	{ "/a\xf0\x9f\x94\x92", "has a character ZooKeeper refuses (U+1F512" },
};

static void
test_valid(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(valid_paths); i++) {
		int rc = zkl__path_check(valid_paths[i], "lock path");

		if (rc != 0)
			fail_msg("\"%s\" refused: %d %s", valid_paths[i], rc, zkl_last_error());
	}
}

static void
test_invalid(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad_paths); i++) {
		const struct bad_path *b = &bad_paths[i];
		const char *shown = b->path ? b->path : "(null)";
		const char *msg;
		int rc;

		zkl__clear_error();
		rc = zkl__path_check(b->path, "lock path");
		msg = zkl_last_error();
		if (rc != ZKL_EINVAL)
			fail_msg("\"%s\": rc %d, want ZKL_EINVAL", shown, rc);
		if (!strstr(msg, b->reason))
			fail_msg("\"%s\": message \"%s\" lacks \"%s\"", shown, msg, b->reason);
		if (strncmp(msg, "lock path", 9) != 0)
			fail_msg("\"%s\": message \"%s\" does not name the path", shown, msg);
		/* Nothing unprintable reaches the message: a bad byte is shown escaped. */
		for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
			if (*p < 0x20 || *p >= 0x7f)
				fail_msg("\"%s\": message has raw byte 0x%02x", shown, *p);
		}
	}
}

static void
test_messages(void **state)
{
	(void)state;
	assert_int_equal(zkl__path_check("locks/x", "lock path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(),
	                    "lock path \"locks/x\" is not absolute (must start with '/')");

	assert_int_equal(zkl__path_check("/a//b", "lock path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(), "lock path \"/a//b\" has an empty segment (\"//\")");

	assert_int_equal(zkl__path_check(NULL, "lock path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(), "lock path is NULL");

	assert_int_equal(zkl__path_check("", "latch path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(), "latch path is empty");

	/* The control character is shown escaped. */
	assert_int_equal(zkl__path_check("/a\x01", "lock path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(),
	                    "lock path \"/a\\x01\" has a control character (byte 0x01 at offset 2)");

	/* Without a `what`, the message still says what it is about. */
	assert_int_equal(zkl__path_check("x", NULL), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(), "path \"x\" is not absolute (must start with '/')");

	/* Quotes in the path are escaped, so the message stays unambiguous. */
	assert_int_equal(zkl__path_check("a\"b", "lock path"), ZKL_EINVAL);
	assert_string_equal(zkl_last_error(),
	                    "lock path \"a\\\"b\" is not absolute (must start with '/')");
}

static void
test_length(void **state)
{
	char *p = malloc(ZKL_PATH_MAX + 2);

	(void)state;
	assert_non_null(p);
	/* Exactly ZKL_PATH_MAX bytes is fine. */
	p[0] = '/';
	memset(p + 1, 'x', ZKL_PATH_MAX - 1);
	p[ZKL_PATH_MAX] = '\0';
	assert_int_equal(strlen(p), ZKL_PATH_MAX);
	assert_int_equal(zkl__path_check(p, "lock path"), 0);

	/* One more is too long, and the message keeps its reason although the path is
	 * shortened to fit. */
	p[ZKL_PATH_MAX] = 'x';
	p[ZKL_PATH_MAX + 1] = '\0';
	assert_int_equal(zkl__path_check(p, "lock path"), ZKL_EINVAL);
	assert_non_null(strstr(zkl_last_error(), "is longer than 1024 bytes"));
	assert_non_null(strstr(zkl_last_error(), "lock path \"/xxxxxxxx"));
	assert_non_null(strstr(zkl_last_error(), "...\""));
	free(p);
}

static void
test_long_path_reason_survives(void **state)
{
	/* A long path with a fault at its end: the reason is never cut off. */
	char p[ZKL_PATH_MAX];

	(void)state;
	p[0] = '/';
	memset(p + 1, 'y', 900);
	strcpy(p + 901, "/../z");
	assert_int_equal(zkl__path_check(p, "lock path"), ZKL_EINVAL);
	assert_non_null(strstr(zkl_last_error(), "has a \".\" or \"..\" segment"));

	/* Every byte escaped (four characters each) still leaves room for the reason. */
	p[0] = '/';
	memset(p + 1, '\x01', 900);
	p[901] = '\0';
	assert_int_equal(zkl__path_check(p, "lock path"), ZKL_EINVAL);
	assert_non_null(strstr(zkl_last_error(), "has a control character (byte 0x01 at offset 1)"));
}

static void
test_join(void **state)
{
	char *s;

	(void)state;
	s = zkl__path_join("/a", "b");
	assert_string_equal(s, "/a/b");
	free(s);
	s = zkl__path_join("/a/b", "_c_x-lock-0000000001");
	assert_string_equal(s, "/a/b/_c_x-lock-0000000001");
	free(s);
	/* The root is joined without a double slash. */
	s = zkl__path_join("/", "x");
	assert_string_equal(s, "/x");
	free(s);
	s = zkl__path_join("/locks/x", "leases");
	assert_string_equal(s, "/locks/x/leases");
	free(s);
}

static void
test_parent_len(void **state)
{
	(void)state;
	assert_int_equal(zkl__path_parent_len("/a/b"), 2);
	assert_int_equal(zkl__path_parent_len("/a"), 0);
	assert_int_equal(zkl__path_parent_len("/a/b/c"), 4);
	assert_int_equal(zkl__path_parent_len("/locks/x/_c_u-lock-0000000001"), 8);
	assert_int_equal(zkl__path_parent_len("/"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_length),
		cmocka_unit_test(test_long_path_reason_survives),
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_parent_len),
	};

	return cmocka_run_group_tests_name("paths", tests, NULL, NULL);
}
