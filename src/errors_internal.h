/* Internal error helpers: set the thread's error detail and return the code. */
#ifndef ZKL_ERRORS_INTERNAL_H
#define ZKL_ERRORS_INTERNAL_H

#include <zklocks/errors.h>

/* Records a printf-style detail for zkl_last_error() and returns err. */
int zkl_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the thread's error detail. */
void zkl_clear_error(void);

/* Maps a ZooKeeper return code of a failed request to a ZKL_E* code, recording the
 * detail "<what>: <zerror>". */
int zkl_fail_zk(int zrc, const char *what, const char *path);

#endif
