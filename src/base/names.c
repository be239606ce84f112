/* Node names and queue order.
 *
 * Design notes
 *
 * Names. Every contender is an EPHEMERAL_SEQUENTIAL child whose name ends in a marker
 * and the sequence number the server appended: "<prefix><marker><seq>". The markers
 * are Curator's and kazoo's, byte for byte, so a C process and a Java or Python process
 * that use the same lock path see one queue. What comes before the marker is free: it
 * is Curator's protection prefix "_c_<uuid>-" for our nodes and Curator's, and a bare
 * hex uuid for kazoo's ("<uuid>__lock__0000000007").
 *
 * Parsing. Like Curator, we take the last occurrence of a marker, so a prefix that
 * happens to contain marker text does not confuse us. Unlike Curator, we insist that
 * what follows is exactly what the server writes: Java's "%010d" of the parent's
 * signed 32-bit child counter, that is ten digits, or '-' and nine or ten digits. Each
 * number has exactly one such text, so no two names can claim one number by spelling it
 * differently. At most one marker can match a name, so the order in which they are
 * tried does not matter: no marker is a suffix of another, and the only two places a
 * sequence text can start differ when the name ends in '-' and ten digits, where the
 * byte before that '-' would have to be both the last byte of one marker ('-' or '_')
 * and the letter before the final '-' of another. A name that
 * does not parse is a stray (a node some other tool put there); a queue ignores it
 * rather than failing, so a stray can never wedge a lock.
 *
 * Order. The server increments the counter as an int and prints it signed, so after
 * 2147483647 comes -2147483648, and after -1 comes 0. Read as an unsigned 32-bit
 * number the first step is +1 and keeps its order; only the step from -1 to 0
 * (0xffffffff to 0) wraps. A queue is short-lived and small next to 2^32, so its keys
 * occupy a short arc of the 2^32 circle; if the sorted keys show a gap wider than half
 * the circle, the arc crosses the wrap, and the queue starts just after that gap. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "names.h"

static const char *const markers[ZKL_KIND_COUNT] = {
	[ZKL_KIND_LOCK] = "lock-",
	[ZKL_KIND_READ] = "__READ__",
	[ZKL_KIND_WRITE] = "__WRIT__",
	[ZKL_KIND_LEASE] = "lease-",
	[ZKL_KIND_LATCH] = "latch-",
	[ZKL_KIND_KLOCK] = "__lock__",
	[ZKL_KIND_KRLOCK] = "__rlock__",
};

#define PROTECT_HEAD "_c_"

const char *
zkl__kind_marker(enum zkl_kind k)
{
	/* An out-of-range kind is a caller's bug; "" keeps it from becoming a crash in
	 * a printf. */
	if ((unsigned)k >= ZKL_KIND_COUNT)
		return "";
	return markers[k];
}

bool
zkl__kind_is_writer(enum zkl_kind k)
{
	return k != ZKL_KIND_READ && k != ZKL_KIND_KRLOCK;
}

bool
zkl__kind_may_downgrade(enum zkl_kind k)
{
	return k == ZKL_KIND_WRITE || k == ZKL_KIND_KLOCK;
}

/* Parses ZooKeeper's "%010d" text of a signed 32-bit number, the whole of s. */
static bool
parse_seq(const char *s, int64_t *out)
{
	bool neg = (s[0] == '-');
	const char *d = neg ? s + 1 : s;
	size_t n = 0;
	int64_t v = 0;

	while (d[n] >= '0' && d[n] <= '9') {
		v = v * 10 + (d[n] - '0');
		n++;
		/* Eleven digits never fit; stop before v could overflow. */
		if (n > 10)
			return false;
	}
	if (d[n] != '\0')
		return false;
	if (!neg) {
		/* Positive numbers are always zero-padded to exactly ten digits. */
		if (n != 10 || v > INT32_MAX)
			return false;
		*out = v;
		return true;
	}
	/* "%010d" counts the sign in the width: -5 is "-000000005" (nine digits), and only
	 * numbers of ten digits, -1000000000 and below, are longer ("-2147483648"). So a
	 * ten-digit negative never starts with 0, and negative zero is never printed. */
	if (n == 9) {
		if (v == 0)
			return false;
	} else if (n == 10) {
		if (d[0] == '0' || v > -(int64_t)INT32_MIN)
			return false;
	} else {
		return false;
	}
	*out = -v;
	return true;
}

/* The last occurrence of needle in hay, or NULL. */
static const char *
last_strstr(const char *hay, const char *needle)
{
	const char *last = NULL;
	const char *p = hay;

	while ((p = strstr(p, needle)) != NULL) {
		last = p;
		p++;
	}
	return last;
}

bool
zkl__child_parse(const char *name, zkl_child *out)
{
	if (!name)
		return false;
	for (int k = 0; k < ZKL_KIND_COUNT; k++) {
		const char *m = last_strstr(name, markers[k]);
		int64_t seq;

		if (!m || !parse_seq(m + strlen(markers[k]), &seq))
			continue;
		out->name = name;
		out->kind = (enum zkl_kind)k;
		out->seq = seq;
		/* The caller knows the position; it sets index after a successful parse. */
		out->index = 0;
		return true;
	}
	return false;
}

static uint32_t
seq_key(const zkl_child *c)
{
	return (uint32_t)c->seq;
}

static int
child_cmp(const void *pa, const void *pb)
{
	const zkl_child *a = pa, *b = pb;
	uint32_t ka = seq_key(a), kb = seq_key(b);
	bool wa, wb;

	if (ka != kb)
		return ka < kb ? -1 : 1;
	/* A tie means a downgrade read node that shares its writer's number; the writer
	 * sorts first so the read node sees the write lock it sits behind. The names then
	 * make the order total, so every client sorts the same set the same way. */
	wa = zkl__kind_is_writer(a->kind);
	wb = zkl__kind_is_writer(b->kind);
	if (wa != wb)
		return wa ? -1 : 1;
	return strcmp(a->name, b->name);
}

static void
reverse(zkl_child *c, size_t lo, size_t hi)
{
	/* Reverses c[lo, hi). */
	while (lo + 1 < hi) {
		zkl_child t = c[lo];

		c[lo] = c[hi - 1];
		c[hi - 1] = t;
		lo++;
		hi--;
	}
}

void
zkl__children_sort(zkl_child *children, size_t n)
{
	uint32_t best_gap = 0;
	size_t best = 0;

	if (n < 2)
		return;
	qsort(children, n, sizeof(*children), child_cmp);

	/* Find the widest gap between neighbours. Keys are sorted, so the difference is
	 * never negative and fits in 32 bits. */
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t gap = seq_key(&children[i + 1]) - seq_key(&children[i]);

		if (gap > best_gap) {
			best_gap = gap;
			best = i + 1;
		}
	}
	if (best_gap <= UINT32_C(0x80000000))
		return;
	/* The queue crosses the wrap from -1 to 0: the oldest node is the one after the
	 * gap. Rotate left by `best` with three reversals, which needs no memory. */
	reverse(children, 0, best);
	reverse(children, best, n);
	reverse(children, 0, n);
}

/* Reads n random bytes. getrandom() is preferred: it needs no file descriptor and
 * works in a chroot. /dev/urandom is for kernels older than 3.17. */
static bool
random_bytes(unsigned char *buf, size_t n)
{
	size_t got = 0;
	int fd;

	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);

		if (r > 0) {
			got += (size_t)r;
		} else if (r < 0 && errno != EINTR) {
			break;
		}
	}
	if (got == n)
		return true;

	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r > 0) {
			got += (size_t)r;
		} else if (r == 0 || errno != EINTR) {
			break;
		}
	}
	close(fd);
	return got == n;
}

/* splitmix64: a well-mixing step for the last-resort fallback below. */
static uint64_t
mix64(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

void
zkl__uuid(char buf[ZKL_UUID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];
	size_t o = 0;

	if (!random_bytes(b, sizeof(b))) {
		/* No entropy source at all (a sandbox without /dev). The uuid only has to
		 * be unique among the contenders of one lock path, so time, pid, a stack
		 * address and a counter, well mixed, are enough. */
		static _Thread_local uint64_t counter;
		struct timespec ts;
		uint64_t s;

		clock_gettime(CLOCK_REALTIME, &ts);
		s = mix64((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
		s = mix64(s ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&ts);
		s = mix64(s ^ ++counter);
		for (size_t i = 0; i < sizeof(b); i++) {
			if (i % 8 == 0)
				s = mix64(s);
			b[i] = (unsigned char)(s >> (8 * (i % 8)));
		}
	}
	/* RFC 4122 version 4 (random) and variant 10xx. */
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);

	for (size_t i = 0; i < sizeof(b); i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[o++] = '-';
		buf[o++] = hex[b[i] >> 4];
		buf[o++] = hex[b[i] & 0x0f];
	}
	buf[o] = '\0';
}

/* The 32 hex digits of a uuid, without its dashes. */
static void
uuid_hex(const char *uuid, char hex[33])
{
	size_t k = 0;

	for (size_t i = 0; uuid[i] && k < 32; i++)
		if (uuid[i] != '-')
			hex[k++] = uuid[i];
	hex[k] = 0;
}

int
zkl__node_prefix(char *buf, size_t size, const char *uuid, enum zkl_kind kind)
{
	int n;

	if ((unsigned)kind >= ZKL_KIND_COUNT || !uuid || strlen(uuid) != ZKL_UUID_LEN)
		return -1;
	if (kind == ZKL_KIND_KLOCK || kind == ZKL_KIND_KRLOCK) {
		/* kazoo's names: the uuid's 32 hex digits, then the marker. */
		char hex[33];
		uuid_hex(uuid, hex);
		n = snprintf(buf, size, "%s%s", hex, markers[kind]);
	} else {
		n = snprintf(buf, size, PROTECT_HEAD "%s-%s", uuid, markers[kind]);
	}
	if (n < 0 || (size_t)n >= size)
		return -1;
	return n;
}

/* The length of dir as a node's path uses it: under the root, "/" + name, not "//" +
 * name. */
static size_t
dir_len(const char *dir)
{
	size_t dlen = strlen(dir);

	return dlen > 0 && dir[dlen - 1] == '/' ? dlen - 1 : dlen;
}

char *
zkl__node_path(const char *dir, const char *uuid, enum zkl_kind kind)
{
	char prefix[ZKL_PROTECT_PREFIX_LEN + 32];
	int n = zkl__node_prefix(prefix, sizeof prefix, uuid, kind);
	size_t dlen = dir_len(dir);
	char *path;

	if (n < 0) {
		errno = EINVAL;
		return NULL;
	}
	path = malloc(dlen + 1 + (size_t)n + 1);
	if (path)
		snprintf(path, dlen + 1 + (size_t)n + 1, "%.*s/%s", (int)dlen, dir, prefix);
	return path;
}

long
zkl__node_path_len(const char *dir, enum zkl_kind kind)
{
	/* Every uuid names a prefix of the same length: measure one. */
	char uuid[ZKL_UUID_LEN + 1];
	char prefix[ZKL_PROTECT_PREFIX_LEN + 32];
	int n;

	memset(uuid, '0', ZKL_UUID_LEN);
	uuid[ZKL_UUID_LEN] = '\0';
	n = zkl__node_prefix(prefix, sizeof prefix, uuid, kind);
	if (n < 0)
		return -1;
	return (long)(dir_len(dir) + 1 + (size_t)n);
}

bool
zkl__name_has_uuid(const char *name, const char *uuid)
{
	size_t hlen = sizeof(PROTECT_HEAD) - 1;
	size_t ulen;

	if (!name || !uuid)
		return false;
	ulen = strlen(uuid);
	/* Only a whole uuid identifies a node: a shorter string (or an empty one) would
	 * match the nodes of other contenders whose uuids merely begin the same way. */
	if (ulen != ZKL_UUID_LEN)
		return false;
	if (strncmp(name, PROTECT_HEAD, hlen) == 0)
		return strncmp(name + hlen, uuid, ulen) == 0 && name[hlen + ulen] == '-';
	/* kazoo's form: 32 hex digits, then "__". */
	char hex[33];
	uuid_hex(uuid, hex);
	return strncmp(name, hex, 32) == 0 && name[32] == '_' && name[33] == '_';
}
