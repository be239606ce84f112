/* Lock path validation and joining. Pure functions, no I/O. */
#ifndef ZKL_PATHS_H
#define ZKL_PATHS_H

#include <stddef.h>

/* Checks a lock path: non-NULL, absolute, no empty segment ("//"), no trailing slash
 * (except "/" itself, which is refused too: a lock needs its own folder), no "." or ".."
 * segment, no control characters, at most ZKL_PATH_MAX bytes, and not under the
 * reserved "/zookeeper". Returns 0, or ZKL_EINVAL with the reason in zkl_last_error()
 * (naming `what`, e.g. "lock path"). */
int zkl__path_check(const char *path, const char *what);

/* Writes parent + "/" + child into a new malloc'd string. Returns NULL on ENOMEM. */
char *zkl__path_join(const char *parent, const char *child);

/* Length of the parent part of path ("/a/b" -> 2, "/a" -> 0 meaning the root). */
size_t zkl__path_parent_len(const char *path);

#endif
