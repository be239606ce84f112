/* Helpers shared by the recipes. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/lock.h>

#include "common.h"

/* ZooKeeper's default jute.maxbuffer is 1 MiB, and a node's data must fit in it. */
#define ZKL_DATA_MAX ZKL_LOCK_DATA_MAX

_Thread_local zkl__owner zkl__owner_mine;

zkl__owner zkl__owner_next(void)
{
	static atomic_uint_fast64_t next = 1;
	return (zkl__owner)atomic_fetch_add(&next, 1);
}

int zkl__data_init(struct zkl_data *d)
{
	char buf[300];
	int n = zkl__default_data(buf, sizeof buf);
	d->bytes = malloc((size_t)n + 1);
	if (!d->bytes)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	memcpy(d->bytes, buf, (size_t)n + 1);
	d->len = n;
	return 0;
}

int zkl__data_set(struct zkl_data *d, const void *data, size_t len)
{
	if (!data && len > 0)
		return zkl__fail(ZKL_EINVAL, "data is NULL but its length is %zu", len);
	if (len > ZKL_DATA_MAX)
		return zkl__fail(ZKL_EINVAL, "node data of %zu bytes is larger than %d bytes", len,
		                ZKL_DATA_MAX);
	char *copy = malloc(len + 1);
	if (!copy)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	if (len)
		memcpy(copy, data, len);
	copy[len] = 0;
	free(d->bytes);
	d->bytes = copy;
	d->len = (int)len;
	return 0;
}

int zkl__check_new(const void *out, const zkl_client *c, const char *path)
{
	zkl__clear_error();
	if (!out)
		return zkl__fail(ZKL_EINVAL, "output pointer is NULL");
	if (!c)
		return zkl__fail(ZKL_EINVAL, "client is NULL");
	return zkl__path_check(path, "lock path");
}

int zkl__count_parse(const char *data, int len)
{
	if (!data || len <= 0 || len > 10)
		return 0;
	int64_t v = 0;
	for (int i = 0; i < len; i++) {
		if (data[i] < '0' || data[i] > '9')
			return 0;
		v = v * 10 + (data[i] - '0');
	}
	return v > 0 && v <= INT32_MAX ? (int)v : 0;
}
