/* Unit tests of node names and queue order (src/base/names.c). No server needed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "names.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A uuid as Curator writes it, used by several names below. */
#define CURATOR_UUID "53345f98-9423-4e0c-a7b5-9f819e3ec2e1"

struct good_name {
	const char *name;
	enum zkl_kind kind;
	int64_t seq;
};

/* Names every library we share a path with creates, and what they must parse to. */
static const struct good_name good_names[] = {
	/* Each marker alone, and behind Curator's protection prefix. */
	{ "lock-0000000000", ZKL_KIND_LOCK, 0 },
	{ "__READ__0000000001", ZKL_KIND_READ, 1 },
	{ "__WRIT__0000000002", ZKL_KIND_WRITE, 2 },
	{ "lease-0000000003", ZKL_KIND_LEASE, 3 },
	{ "latch-0000000004", ZKL_KIND_LATCH, 4 },
	{ "__lock__0000000005", ZKL_KIND_KLOCK, 5 },
	{ "__rlock__0000000006", ZKL_KIND_KRLOCK, 6 },
	{ "_c_" CURATOR_UUID "-lock-0000000003", ZKL_KIND_LOCK, 3 },
	{ "_c_" CURATOR_UUID "-__READ__0000000010", ZKL_KIND_READ, 10 },
	{ "_c_" CURATOR_UUID "-__WRIT__0000000011", ZKL_KIND_WRITE, 11 },
	{ "_c_" CURATOR_UUID "-lease-0000000012", ZKL_KIND_LEASE, 12 },
	{ "_c_" CURATOR_UUID "-latch-0000000013", ZKL_KIND_LATCH, 13 },
	/* kazoo: a bare hex uuid, then the marker. */
	{ "a1b2c3d4e5f60718293a4b5c6d7e8f90__lock__0000000007", ZKL_KIND_KLOCK, 7 },
	{ "a1b2c3d4e5f60718293a4b5c6d7e8f90__rlock__0000000008", ZKL_KIND_KRLOCK, 8 },
	/* The int32 extremes, as "%010d" prints them. */
	{ "lock-2147483647", ZKL_KIND_LOCK, INT32_MAX },
	{ "lock--2147483648", ZKL_KIND_LOCK, INT32_MIN },
	{ "lock--000000005", ZKL_KIND_LOCK, -5 },
	{ "lock--000000001", ZKL_KIND_LOCK, -1 },
	{ "lock--999999999", ZKL_KIND_LOCK, -999999999 },
	{ "lock--1000000000", ZKL_KIND_LOCK, -1000000000 },
	{ "_c_" CURATOR_UUID "-__WRIT__-2147483647", ZKL_KIND_WRITE, -2147483647 },
	{ "lock-0999999999", ZKL_KIND_LOCK, 999999999 },
	/* The last occurrence of the marker counts. */
	{ "lock-0000000001lock-0000000002", ZKL_KIND_LOCK, 2 },
	{ "lock-lock-0000000003", ZKL_KIND_LOCK, 3 },
	{ "__READ__x__READ__0000000004", ZKL_KIND_READ, 4 },
	/* A prefix that contains another marker's text. */
	{ "__READ__lock-0000000009", ZKL_KIND_LOCK, 9 },
	{ "lock-__WRIT__0000000009", ZKL_KIND_WRITE, 9 },
	{ "__lock____rlock__0000000010", ZKL_KIND_KRLOCK, 10 },
};

/* Names a queue must ignore. */
static const char *const stray_names[] = {
	"",
	"foo",
	"lock-",
	"__READ__",
	"__rlock__",
	"0000000001",
	"lock-000000001",    /* nine digits */
	"lock-00000000001",  /* eleven digits */
	"lock-00000000a1",   /* a letter in the number */
	"lock-000000000x",
	"lock-0000000001x",  /* trailing text */
	"lock-0000000001 ",
	"lock- 000000001",
	"lock-+000000001",
	"lock-2147483648",   /* above INT32_MAX */
	"lock-9999999999",
	"lock--2147483649",  /* below INT32_MIN */
	"lock--9999999999",
	"lock--00000005",    /* a negative with eight digits */
	"lock--0000000005",  /* ten digits, but "%010d" prints -5 with nine */
	"lock--000000000",   /* negative zero is never printed */
	"lock---000000005",
	"LOCK-0000000001",   /* markers are case sensitive */
	"__read__0000000001",
	"__write__0000000001",
	"lock_0000000001",
	"lease0000000001",
	"lock-0000000001/",
	"_c_" CURATOR_UUID "-lock-",
	"_c_" CURATOR_UUID "-lock-00000000003",
	"_c_" CURATOR_UUID "-mutex-0000000003",
};

static void
test_parse_markers(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(good_names); i++) {
		const struct good_name *g = &good_names[i];
		zkl_child c;

		memset(&c, 0xa5, sizeof(c));
		if (!zkl__child_parse(g->name, &c))
			fail_msg("\"%s\" did not parse", g->name);
		assert_ptr_equal(c.name, g->name);
		if (c.kind != g->kind || c.seq != g->seq)
			fail_msg("\"%s\": kind %d seq %lld, want kind %d seq %lld", g->name, (int)c.kind,
			         (long long)c.seq, (int)g->kind, (long long)g->seq);
		assert_int_equal(c.index, 0);
	}
}

static void
test_parse_every_kind(void **state)
{
	(void)state;
	/* Every kind round-trips through the prefix we build and the parser. */
	for (int k = 0; k < ZKL_KIND_COUNT; k++) {
		char name[128];
		zkl_child c;
		int n = zkl__node_prefix(name, sizeof(name), CURATOR_UUID, (enum zkl_kind)k);

		assert_true(n > 0);
		snprintf(name + n, sizeof(name) - (size_t)n, "%010d", 1234567 + k);
		assert_true(zkl__child_parse(name, &c));
		assert_int_equal(c.kind, k);
		assert_int_equal(c.seq, 1234567 + k);
	}
}

static void
test_parse_strays(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(stray_names); i++) {
		zkl_child c;

		if (zkl__child_parse(stray_names[i], &c))
			fail_msg("stray \"%s\" parsed as kind %d seq %lld", stray_names[i], (int)c.kind,
			         (long long)c.seq);
	}
	{
		zkl_child c;

		assert_false(zkl__child_parse(NULL, &c));
	}
}

static void
test_kinds(void **state)
{
	(void)state;
	assert_string_equal(zkl__kind_marker(ZKL_KIND_LOCK), "lock-");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_READ), "__READ__");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_WRITE), "__WRIT__");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_LEASE), "lease-");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_LATCH), "latch-");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_KLOCK), "__lock__");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_KRLOCK), "__rlock__");
	assert_string_equal(zkl__kind_marker(ZKL_KIND_COUNT), "");

	assert_true(zkl__kind_is_writer(ZKL_KIND_LOCK));
	assert_false(zkl__kind_is_writer(ZKL_KIND_READ));
	assert_true(zkl__kind_is_writer(ZKL_KIND_WRITE));
	assert_true(zkl__kind_is_writer(ZKL_KIND_LEASE));
	assert_true(zkl__kind_is_writer(ZKL_KIND_LATCH));
	assert_true(zkl__kind_is_writer(ZKL_KIND_KLOCK));
	assert_false(zkl__kind_is_writer(ZKL_KIND_KRLOCK));
}

/* Parses names[] the way a caller does (strays dropped, index kept), sorts, and checks
 * that the result is want[] (NULL-terminated). */
static void
check_sorted(const char *const *names, size_t n, const char *const *want)
{
	zkl_child *c = calloc(n ? n : 1, sizeof(*c));
	size_t m = 0, w = 0;

	assert_non_null(c);
	for (size_t i = 0; i < n; i++) {
		if (zkl__child_parse(names[i], &c[m])) {
			c[m].index = i;
			m++;
		}
	}
	zkl__children_sort(c, m);
	for (; want[w]; w++) {
		if (w >= m)
			fail_msg("sorted list is short: %zu entries, want more", m);
		if (strcmp(c[w].name, want[w]) != 0)
			fail_msg("position %zu: \"%s\", want \"%s\"", w, c[w].name, want[w]);
		/* The index still points at the name's place in the input. */
		assert_ptr_equal(names[c[w].index], c[w].name);
	}
	assert_int_equal(m, w);
	free(c);
}

static void
test_sort_basic(void **state)
{
	static const char *const names[] = {
		"_c_ffffffff-ffff-4fff-bfff-ffffffffffff-lock-0000000001",
		"stray",
		"_c_00000000-0000-4000-8000-000000000000-lock-0000000003",
		"lock-000000002",   /* a stray: nine digits */
		"a1b2c3d4__lock__0000000002",
		"_c_" CURATOR_UUID "-lock-0000000000",
		"leader",
	};
	/* Sequence order, not name order. */
	static const char *const want[] = {
		"_c_" CURATOR_UUID "-lock-0000000000",
		"_c_ffffffff-ffff-4fff-bfff-ffffffffffff-lock-0000000001",
		"a1b2c3d4__lock__0000000002",
		"_c_00000000-0000-4000-8000-000000000000-lock-0000000003",
		NULL,
	};

	(void)state;
	check_sorted(names, ARRAY_LEN(names), want);
}

static void
test_sort_small(void **state)
{
	zkl_child c;

	(void)state;
	/* Empty and single lists are left alone (and a NULL array with n = 0 is fine). */
	zkl__children_sort(NULL, 0);
	assert_true(zkl__child_parse("lock--000000001", &c));
	zkl__children_sort(&c, 1);
	assert_int_equal(c.seq, -1);
}

/* Calls check_sorted for every permutation of want[] as input. */
static void
check_all_orders(const char *const *want, size_t n)
{
	const char *in[8];
	size_t idx[8];

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (;;) {
		size_t i, j;

		for (i = 0; i < n; i++)
			in[i] = want[idx[i]];
		check_sorted(in, n, want);

		/* Next permutation of idx, in lexicographic order. */
		if (n < 2)
			return;
		i = n - 1;
		while (i > 0 && idx[i - 1] >= idx[i])
			i--;
		if (i == 0)
			return;
		j = n - 1;
		while (idx[j] <= idx[i - 1])
			j--;
		{
			size_t t = idx[i - 1];

			idx[i - 1] = idx[j];
			idx[j] = t;
		}
		for (j = n - 1; i < j; i++, j--) {
			size_t t = idx[i];

			idx[i] = idx[j];
			idx[j] = t;
		}
	}
}

static void
test_sort_int32_overflow(void **state)
{
	/* The server's int counter steps from 2147483647 to -2147483648: creation order
	 * continues through the sign change. */
	static const char *const want[] = {
		"lock-2147483646",
		"lock-2147483647",
		"lock--2147483648",
		"lock--2147483647",
		NULL,
	};

	(void)state;
	check_all_orders(want, 4);
}

static void
test_sort_wrap(void **state)
{
	/* From -1 to 0 the unsigned counter wraps; the set is rotated so that the oldest
	 * (-2) comes first. */
	static const char *const want[] = {
		"lock--000000002",
		"lock--000000001",
		"lock-0000000000",
		"lock-0000000001",
		NULL,
	};
	static const char *const want_mixed[] = {
		"_c_" CURATOR_UUID "-__WRIT__-000000003",
		"_c_" CURATOR_UUID "-__READ__-000000001",
		"_c_" CURATOR_UUID "-__WRIT__0000000000",
		"_c_" CURATOR_UUID "-__READ__0000000002",
		"_c_" CURATOR_UUID "-__WRIT__0000000005",
		NULL,
	};

	(void)state;
	check_all_orders(want, 4);
	check_all_orders(want_mixed, 5);
}

static void
test_sort_no_wrap_at_half(void **state)
{
	/* A spread of exactly half the circle is not a wrap: plain unsigned order stays. */
	static const char *const half[] = {
		"lock-0000000000",
		"lock--2147483648",
		NULL,
	};
	static const char *const just_under[] = {
		"lock-0000000000",
		"lock-2147483647",
		NULL,
	};

	(void)state;
	check_all_orders(half, 2);
	check_all_orders(just_under, 2);
}

static void
test_sort_ties(void **state)
{
	/* A downgrade read node shares its writer's number: the writer sorts first. */
	static const char *const curator[] = {
		"_c_" CURATOR_UUID "-__WRIT__0000000005",
		"_c_" CURATOR_UUID "-__READ__0000000005",
		"_c_" CURATOR_UUID "-__READ__0000000006",
		NULL,
	};
	static const char *const kazoo[] = {
		"aaaa__lock__0000000005",
		"ffff__lock__0000000005",
		"0000__rlock__0000000005",
		"9999__rlock__0000000005",
		NULL,
	};
	/* The writer-first rule holds at the wrap too. */
	static const char *const at_wrap[] = {
		"lock--000000001",
		"z__WRIT__0000000000",
		"a__READ__0000000000",
		NULL,
	};

	(void)state;
	check_all_orders(curator, 3);
	check_all_orders(kazoo, 4);
	check_all_orders(at_wrap, 3);
}

static void
test_uuid_format(void **state)
{
	(void)state;
	for (int round = 0; round < 100; round++) {
		char u[ZKL_UUID_LEN + 1];

		memset(u, 'X', sizeof(u));
		zkl__uuid(u);
		assert_int_equal(strlen(u), ZKL_UUID_LEN);
		for (size_t i = 0; i < ZKL_UUID_LEN; i++) {
			if (i == 8 || i == 13 || i == 18 || i == 23) {
				assert_int_equal(u[i], '-');
			} else if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f'))) {
				fail_msg("uuid \"%s\": byte %zu is not lower-case hex", u, i);
			}
		}
		/* Version 4, variant 10xx. */
		assert_int_equal(u[14], '4');
		assert_non_null(strchr("89ab", u[19]));
	}
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void
test_uuid_unique(void **state)
{
	enum { N = 1000 };
	char (*u)[ZKL_UUID_LEN + 1] = calloc(N, sizeof(*u));

	(void)state;
	assert_non_null(u);
	for (int i = 0; i < N; i++)
		zkl__uuid(u[i]);
	qsort(u, N, sizeof(*u), cmp_str);
	for (int i = 1; i < N; i++) {
		if (strcmp(u[i - 1], u[i]) == 0)
			fail_msg("uuid %s drawn twice", u[i]);
	}
	free(u);
}

static void
test_prefix(void **state)
{
	char buf[64];
	char small[45];
	const char *want = "_c_" CURATOR_UUID "-lock-";
	int n;

	(void)state;
	n = zkl__node_prefix(buf, sizeof(buf), CURATOR_UUID, ZKL_KIND_LOCK);
	assert_int_equal(n, strlen(want));
	assert_int_equal(n, ZKL_PROTECT_PREFIX_LEN + 5);
	assert_string_equal(buf, want);

	n = zkl__node_prefix(buf, sizeof(buf), CURATOR_UUID, ZKL_KIND_WRITE);
	assert_string_equal(buf, "_c_" CURATOR_UUID "-__WRIT__");
	assert_int_equal(n, ZKL_PROTECT_PREFIX_LEN + 8);

	/* 45 bytes plus the NUL need 46: one short fails, exactly enough works. */
	assert_int_equal(zkl__node_prefix(small, sizeof(small), CURATOR_UUID, ZKL_KIND_LOCK), -1);
	assert_int_equal(zkl__node_prefix(buf, 46, CURATOR_UUID, ZKL_KIND_LOCK), 45);
	assert_string_equal(buf, want);

	assert_int_equal(zkl__node_prefix(buf, sizeof(buf), CURATOR_UUID, ZKL_KIND_COUNT), -1);
}

/* A node's full path: the folder, one slash (none doubled under the root), the prefix. */
static void
test_node_path(void **state)
{
	char *p;

	(void)state;
	p = zkl__node_path("/locks/a", CURATOR_UUID, ZKL_KIND_LOCK);
	assert_non_null(p);
	assert_string_equal(p, "/locks/a/_c_" CURATOR_UUID "-lock-");
	free(p);
	p = zkl__node_path("/", CURATOR_UUID, ZKL_KIND_WRITE);
	assert_non_null(p);
	assert_string_equal(p, "/_c_" CURATOR_UUID "-__WRIT__");
	free(p);
	/* kazoo's names carry the uuid's hex digits alone. */
	p = zkl__node_path("/k", CURATOR_UUID, ZKL_KIND_KLOCK);
	assert_non_null(p);
	assert_int_equal(strlen(p), strlen("/k/") + 32 + strlen("__lock__"));
	assert_memory_equal(p + strlen(p) - 8, "__lock__", 8);
	assert_null(strchr(p + 3, '-'));
	free(p);
	/* What cannot be named is refused, not named wrong. */
	errno = 0;
	assert_null(zkl__node_path("/locks/a", CURATOR_UUID, ZKL_KIND_COUNT));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(zkl__node_path("/locks/a", "short", ZKL_KIND_LOCK));
	assert_int_equal(errno, EINVAL);
}

/* A path's length, measured without making it, is the length of the path any uuid
 * makes; a kind that cannot be named has none. */
static void
test_node_path_len(void **state)
{
	static const char *dirs[] = { "/", "/locks/a", "/locks/a/", "/k" };
	static const enum zkl_kind kinds[] = { ZKL_KIND_LOCK, ZKL_KIND_WRITE, ZKL_KIND_KLOCK,
	                                       ZKL_KIND_KRLOCK };
	char uuid[ZKL_UUID_LEN + 1];

	(void)state;
	for (size_t d = 0; d < sizeof dirs / sizeof *dirs; d++) {
		for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
			zkl__uuid(uuid);
			char *p = zkl__node_path(dirs[d], uuid, kinds[k]);
			assert_non_null(p);
			assert_int_equal(zkl__node_path_len(dirs[d], kinds[k]), (long)strlen(p));
			free(p);
		}
	}
	assert_int_equal(zkl__node_path_len("/locks/a", ZKL_KIND_COUNT), -1);
}

static void
test_has_uuid(void **state)
{
	char uuid[ZKL_UUID_LEN + 1], other[ZKL_UUID_LEN + 1];
	char name[96];
	int n;

	(void)state;
	zkl__uuid(uuid);
	do
		zkl__uuid(other);
	while (strcmp(uuid, other) == 0);

	n = zkl__node_prefix(name, sizeof(name), uuid, ZKL_KIND_READ);
	assert_true(n > 0);
	strcat(name, "0000000017");
	assert_true(zkl__name_has_uuid(name, uuid));
	assert_false(zkl__name_has_uuid(name, other));

	assert_true(zkl__name_has_uuid("_c_" CURATOR_UUID "-lock-0000000003", CURATOR_UUID));
	/* The uuid must be whole, behind "_c_", and followed by '-'. */
	assert_false(zkl__name_has_uuid("_c_" CURATOR_UUID "lock-0000000003", CURATOR_UUID));
	assert_false(zkl__name_has_uuid("_c_" CURATOR_UUID, CURATOR_UUID));
	assert_false(zkl__name_has_uuid(CURATOR_UUID "-lock-0000000003", CURATOR_UUID));
	assert_false(zkl__name_has_uuid("x_c_" CURATOR_UUID "-lock-0000000003", CURATOR_UUID));
	assert_false(zkl__name_has_uuid("_c_" CURATOR_UUID "-lock-0000000003", "53345f98"));
	assert_false(zkl__name_has_uuid("_c_53345f98-lock-0000000003", CURATOR_UUID));
	assert_false(zkl__name_has_uuid("", CURATOR_UUID));
	assert_false(zkl__name_has_uuid("_c_-lock-0000000003", ""));
	assert_false(zkl__name_has_uuid(NULL, CURATOR_UUID));
	assert_false(zkl__name_has_uuid("_c_" CURATOR_UUID "-lock-0000000003", NULL));
	/* A kazoo name carries no protection prefix. */
	assert_false(zkl__name_has_uuid("53345f9894234e0ca7b59f819e3ec2e1__lock__0000000001",
	                               "53345f9894234e0ca7b59f819e3ec2e1"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_markers),
		cmocka_unit_test(test_parse_every_kind),
		cmocka_unit_test(test_parse_strays),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_sort_basic),
		cmocka_unit_test(test_sort_small),
		cmocka_unit_test(test_sort_int32_overflow),
		cmocka_unit_test(test_sort_wrap),
		cmocka_unit_test(test_sort_no_wrap_at_half),
		cmocka_unit_test(test_sort_ties),
		cmocka_unit_test(test_uuid_format),
		cmocka_unit_test(test_uuid_unique),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_node_path),
		cmocka_unit_test(test_node_path_len),
		cmocka_unit_test(test_has_uuid),
	};

	return cmocka_run_group_tests_name("names", tests, NULL, NULL);
}
