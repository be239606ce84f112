/* What the fuzz targets of zklock share: zklock's own files (all but main.c) are linked
 * in, and these helpers drive its command line as main() does. */
#ifndef ZKLOCK_FUZZ_H
#define ZKLOCK_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zklock.h"
#include "fuzz.h"

/* Splits data at each NUL into at most max strings, in a copy (*buf, to free). */
static inline int fuzz_split(const uint8_t *data, size_t size, char **out, int max,
                             char **buf)
{
	char *b = malloc(size + 1);
	if (!b)
		return -1;
	memcpy(b, data, size);
	b[size] = 0;
	int n = 0;
	for (char *p = b; n < max;) {
		out[n++] = p;
		char *end = memchr(p, 0, (size_t)(b + size - p) + 1);
		if (!end || end >= b + size)
			break;
		p = end + 1;
	}
	*buf = b;
	return n;
}

/* parse_args() and resolve_servers() on argv, as main() runs them, and what a parse
 * that succeeds promises to the rest of zklock. Returns parse_args()'s status. */
static inline int fuzz_parse(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	int status = parse_args(argc, argv, &o);
	if (status == 0 && !o.help && !o.version) {
		status = resolve_servers(&o);
		CHECK(o.servers != NULL);
		CHECK(o.path != NULL && o.path[0] == '/');
		CHECK(o.command != CMD_RUN || (o.cmd && o.cmd[0]));
		/* A hold never lasts forever, and says why; --for and --reason are its own. */
		CHECK(o.command != CMD_HOLD || (o.hold_for_ms > 0 && o.reason && *o.reason));
		CHECK(o.command == CMD_HOLD || (o.hold_for_ms == 0 && !o.reason));
		CHECK(o.wait_ms >= ZKL_WAIT_FOREVER);
		CHECK(o.lock_folders == ZKL_FOLDERS_AUTO || o.lock_folders == ZKL_FOLDERS_CONTAINER ||
		      o.lock_folders == ZKL_FOLDERS_PERSISTENT);
	}
	free(o.servers_buf);
	config_free();
	return status;
}

#endif
