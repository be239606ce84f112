/* Lock path validation and joining.
 *
 * A lock path is checked once, when a recipe handle is made, so that a bad path is
 * reported with its reason right there instead of as ZBADARGUMENTS from deep inside an
 * acquire. The rules are ZooKeeper's own (PathUtils.validatePath on the server) plus
 * three of ours: "/" is refused because a lock needs a folder of its own, "/zookeeper"
 * belongs to the server, and ZKL_PATH_MAX leaves room for the node name a recipe
 * appends.
 *
 * The server decodes a path as UTF-8 and refuses control characters, the UTF-16
 * surrogate and private-use range U+D800..U+F8FF and U+FFF0..U+FFFF. Java strings are
 * UTF-16, so every character above U+FFFF becomes a surrogate pair and is refused too,
 * and a malformed byte becomes U+FFFD, which is in the refused range. We therefore
 * decode the UTF-8 here and refuse the same characters. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/common.h>
#include <zklocks/errors.h>

#include "errors_internal.h"
#include "paths.h"

/* How much of a bad path a message shows. The error buffer is 256 bytes, and the
 * reason must survive, so a long path is shortened rather than the reason cut. */
#define SHOWN_MAX 96

/* Copies path into out as printable ASCII: quotes, backslashes and every byte outside
 * 0x20..0x7e are escaped, so a control character or broken UTF-8 in the path cannot
 * mangle the message that reports it. */
static void
show_path(char *out, size_t size, const char *path)
{
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		char tmp[5];
		size_t n;

		if (*p == '"' || *p == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)*p;
			n = 2;
		} else if (*p < 0x20 || *p >= 0x7f) {
			snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
			n = 4;
		} else {
			tmp[0] = (char)*p;
			n = 1;
		}
		/* Keep room for "..." and the NUL. */
		if (o + n + 4 > size) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(out + o, tmp, n);
		o += n;
	}
	out[o] = '\0';
}

static int
path_fail(const char *what, const char *path, const char *reason)
{
	char shown[SHOWN_MAX + 1];

	show_path(shown, sizeof(shown), path);
	return zkl__fail(ZKL_EINVAL, "%s \"%s\" %s", what, shown, reason);
}

/* Decodes one UTF-8 character at s. Returns its length in bytes and sets *cp, or 0 for
 * a malformed sequence (a stray continuation byte, a truncated sequence, an overlong
 * form, an encoded surrogate or a value above U+10FFFF). */
static size_t
utf8_decode(const unsigned char *s, uint32_t *cp)
{
	uint32_t c, min;
	size_t len;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	for (size_t i = 1; i < len; i++) {
		/* A NUL ends the string, and it is not a continuation byte either, so this
		 * never reads past the terminator. */
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Checks every character; returns 0 or the failure code. */
static int
check_chars(const char *path, const char *what)
{
	const unsigned char *s = (const unsigned char *)path;
	char reason[80];
	size_t i = 0;

	while (s[i]) {
		uint32_t cp;
		size_t n = utf8_decode(s + i, &cp);

		if (n == 0) {
			snprintf(reason, sizeof(reason), "is not valid UTF-8 (byte 0x%02x at offset %zu)",
			         s[i], i);
			return path_fail(what, path, reason);
		}
		if (cp < 0x20 || cp == 0x7f) {
			snprintf(reason, sizeof(reason),
			         "has a control character (byte 0x%02x at offset %zu)", (unsigned)cp, i);
			return path_fail(what, path, reason);
		}
		if (cp >= 0x80 && cp <= 0x9f) {
			snprintf(reason, sizeof(reason),
			         "has a control character (U+%04X at offset %zu)", (unsigned)cp, i);
			return path_fail(what, path, reason);
		}
		if ((cp >= 0xd800 && cp <= 0xf8ff) || cp >= 0xfff0) {
			snprintf(reason, sizeof(reason),
			         "has a character ZooKeeper refuses (U+%04X at offset %zu)",
			         (unsigned)cp, i);
			return path_fail(what, path, reason);
		}
		i += n;
	}
	return 0;
}

/* Checks the segments between slashes. path is absolute and longer than "/". */
static int
check_segments(const char *path, const char *what)
{
	const char *seg = path + 1;

	for (;;) {
		const char *end = strchr(seg, '/');
		size_t len = end ? (size_t)(end - seg) : strlen(seg);

		if (len == 0) {
			if (!end)
				return path_fail(what, path, "ends with '/'");
			return path_fail(what, path, "has an empty segment (\"//\")");
		}
		if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
			return path_fail(what, path, "has a \".\" or \"..\" segment");
		if (!end)
			return 0;
		seg = end + 1;
	}
}

int
zkl__path_check(const char *path, const char *what)
{
	static const char reserved[] = "/zookeeper";
	const size_t rlen = sizeof(reserved) - 1;
	size_t len;
	int rc;

	if (!what)
		what = "path";
	if (!path)
		return zkl__fail(ZKL_EINVAL, "%s is NULL", what);
	if (path[0] == '\0')
		return zkl__fail(ZKL_EINVAL, "%s is empty", what);
	if (path[0] != '/')
		return path_fail(what, path, "is not absolute (must start with '/')");
	len = strlen(path);
	if (len > ZKL_PATH_MAX) {
		char reason[48];

		snprintf(reason, sizeof(reason), "is longer than %d bytes", ZKL_PATH_MAX);
		return path_fail(what, path, reason);
	}
	if (len == 1)
		return path_fail(what, path, "is the root \"/\" (a lock needs its own folder)");
	rc = check_chars(path, what);
	if (rc != 0)
		return rc;
	rc = check_segments(path, what);
	if (rc != 0)
		return rc;
	/* "/zookeeper" and everything under it, but not "/zookeeperish". */
	if (strncmp(path, reserved, rlen) == 0 && (path[rlen] == '\0' || path[rlen] == '/'))
		return path_fail(what, path, "is under the reserved \"/zookeeper\"");
	return 0;
}

char *
zkl__path_join(const char *parent, const char *child)
{
	size_t plen = strlen(parent);
	size_t clen = strlen(child);
	char *out;

	/* The root is the one parent that already ends with a slash: "/" + "x" is "/x",
	 * not "//x", which ZooKeeper would refuse. */
	if (plen > 0 && parent[plen - 1] == '/')
		plen--;
	out = malloc(plen + 1 + clen + 1);
	if (!out)
		return NULL;
	memcpy(out, parent, plen);
	out[plen] = '/';
	memcpy(out + plen + 1, child, clen + 1);
	return out;
}

size_t
zkl__path_parent_len(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path) : 0;
}
