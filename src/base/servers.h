/* The servers string of a client: "host:port[,host:port...][/chroot]". */
#ifndef ZKL_SERVERS_H
#define ZKL_SERVERS_H

/* Checks servers and writes the C client's form of it into a new malloc'd *out: each
 * entry "host:port" with a port of 1..65535 (an IPv6 literal in brackets, "[::1]:2181",
 * is passed on without them, as the C client reads the port after the last colon), at
 * most one chroot, after the last entry. Returns 0, ZKL_EINVAL with the reason in
 * zkl_last_error() (naming the entry), or ZKL_ENOMEM. */
int zkl__servers_parse(const char *servers, char **out);

/* After the C client failed to start on servers (the C client's form): if no host name
 * in it can be resolved, fails with ZKL_ECONNECT naming the first and the resolver's
 * reason, and returns that; else returns 0. */
int zkl__servers_unresolved(const char *servers);

#endif
