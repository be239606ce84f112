/* Logging (log.h). */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void zkl__logf(const struct zkl_logger *lg, zkl_log_level level, const char *fmt, ...)
{
	if (!lg || !lg->fn || level > lg->level)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	lg->fn(level, buf, lg->data);
}
