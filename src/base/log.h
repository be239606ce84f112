/* Logging: where a client's messages go (its zkl_log_fn, at or above its level). Every
 * layer logs through it; the client keeps one logger (zkl_client.logger, zkl__log()). */
#ifndef ZKL_LOG_H
#define ZKL_LOG_H

#include <zklocks/client.h>

struct zkl_logger {
	zkl_log_fn fn;          /* NULL: nothing is logged */
	void *data;
	zkl_log_level level;    /* messages above it are dropped */
};

/* Formats the message (at most 511 bytes; longer ones are cut) and hands it to lg's
 * function if lg is set and level is at most its level. Any thread. */
void zkl__logf(const struct zkl_logger *lg, zkl_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
