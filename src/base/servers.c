/* The servers string.
 *
 * The C client splits "host:port,host:port/chroot" itself, but says little when it
 * cannot: a port above 65535 wraps around (it is read with atoi into 16 bits), a chroot
 * followed by more hosts takes the hosts as part of its path, "[::1]:2181" fails as
 * "No such file or directory", and so does a host name the resolver does not know. So a
 * client checks the string here first, and names the entry that is wrong. */
#include <ctype.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "errors_internal.h"
#include "servers.h"

/* Checks the port of an entry: digits only, 1..65535. */
static int port_check(const char *servers, const char *entry, size_t len, const char *port,
                      size_t plen)
{
	long v = 0;
	bool digits = plen > 0 && plen <= 5;
	for (size_t i = 0; digits && i < plen; i++) {
		digits = isdigit((unsigned char)port[i]) != 0;
		v = v * 10 + (port[i] - '0');
	}
	if (plen == 0)
		return zkl__fail(ZKL_EINVAL, "servers \"%s\": \"%.*s\" has no port (expected "
		                "host:port)", servers, (int)len, entry);
	if (!digits || v < 1 || v > 65535)
		return zkl__fail(ZKL_EINVAL, "servers \"%s\": port \"%.*s\" of \"%.*s\" is not a "
		                "port number (1..65535)", servers, (int)plen, port, (int)len, entry);
	return 0;
}

int zkl__servers_parse(const char *servers, char **out)
{
	*out = NULL;
	const char *slash = strchr(servers, '/');
	size_t hosts_len = slash ? (size_t)(slash - servers) : strlen(servers);
	if (slash && strchr(slash, ','))
		return zkl__fail(ZKL_EINVAL, "servers \"%s\": the chroot \"%s\" must come last, "
		                "after every host:port (one chroot for all of them: "
		                "\"host1:2181,host2:2181/chroot\")", servers, slash);
	char *copy = malloc(strlen(servers) + 1);
	if (!copy)
		return zkl__fail(ZKL_ENOMEM, "out of memory");
	char *w = copy;
	const char *p = servers, *end = servers + hosts_len;
	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma ? comma : end;
		size_t len = (size_t)(stop - p);
		const char *host = p, *colon = NULL;
		size_t hlen = 0;
		int rc = 0;
		if (len == 0) {
			rc = zkl__fail(ZKL_EINVAL, "servers \"%s\" has an empty entry (expected "
			              "\"host:port[,...][/chroot]\")", servers);
		} else if (*p == '[') {
			/* An IPv6 literal: "[addr]:port". */
			const char *close = memchr(p, ']', len);
			if (!close || close + 1 == stop || close[1] != ':')
				rc = zkl__fail(ZKL_EINVAL, "servers \"%s\": \"%.*s\" is not "
				              "\"[IPv6-address]:port\"", servers, (int)len, p);
			else {
				host = p + 1;
				hlen = (size_t)(close - host);
				colon = close + 1;
			}
		} else {
			for (const char *q = p; q < stop; q++)
				if (*q == ':')
					colon = q;
			if (!colon)
				rc = zkl__fail(ZKL_EINVAL, "servers \"%s\": \"%.*s\" has no port "
				              "(expected host:port)", servers, (int)len, p);
			else
				hlen = (size_t)(colon - p);
		}
		if (rc == 0 && hlen == 0)
			rc = zkl__fail(ZKL_EINVAL, "servers \"%s\": \"%.*s\" has no host", servers,
			              (int)len, p);
		if (rc == 0)
			rc = port_check(servers, p, len, colon + 1, (size_t)(stop - colon - 1));
		if (rc != 0) {
			free(copy);
			return rc;
		}
		if (w != copy)
			*w++ = ',';
		memcpy(w, host, hlen);
		w += hlen;
		size_t plen = (size_t)(stop - colon);
		memcpy(w, colon, plen);
		w += plen;
		p = stop + 1;
	}
	strcpy(w, slash ? slash : "");
	*out = copy;
	return 0;
}

int zkl__servers_unresolved(const char *servers)
{
	char *copy = strdup(servers);
	if (!copy)
		return 0;
	char *slash = strchr(copy, '/');
	if (slash)
		*slash = 0;
	char first[256] = "";
	const char *why = NULL;
	bool any = false;
	for (char *save = NULL, *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(e, ':');
		if (colon)
			*colon = 0;
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
		int rc = getaddrinfo(e, colon ? colon + 1 : NULL, &hints, &res);
		if (rc == 0) {
			freeaddrinfo(res);
			any = true;
			break;
		}
		if (!why) {
			snprintf(first, sizeof first, "%s", e);
			why = gai_strerror(rc);
		}
	}
	free(copy);
	if (any || !why)
		return 0;
	return zkl__fail(ZKL_ECONNECT, "the host name \"%s\" could not be resolved (%s)%s",
	                first, why, strchr(servers, ',') ? ", nor any other of the servers" : "");
}
