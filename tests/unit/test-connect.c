/* zkl_client_open() against servers that are not there: no ZooKeeper server needed.
 * A port where nothing listens fails fast and says so; a port that accepts connections
 * but never answers fails at the connect timeout, says no answer came, and only then
 * mentions that a TLS-only port stays silent to a plaintext client. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <zklocks/client.h>
#include <zklocks/errors.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP socket bound to a free port of 127.0.0.1; listening if listening is true.
 * A bound socket that does not listen refuses connections (the kernel answers RST). */
static int socket_on_port(bool listening, int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	socklen_t len = sizeof a;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	if (listening)
		assert_int_equal(listen(fd, 16), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Opens a client at 127.0.0.1:port with the connect timeout; returns its code, the
 * message in msg and the time it took in *ms. */
static int open_at(int port, int connect_timeout_ms, char *msg, size_t size, int64_t *ms,
                   bool external)
{
	char servers[64];
	snprintf(servers, sizeof servers, "127.0.0.1:%d", port);
	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = servers;
	o.connect_timeout_ms = connect_timeout_ms;
	o.quiet_zk_log = true;
	o.external_loop = external;
	zkl_client *c = NULL;
	int64_t t0 = now_ms();
	int rc = zkl_client_open(&c, &o);
	*ms = now_ms() - t0;
	snprintf(msg, size, "%s", zkl_last_error());
	if (c)
		zkl_client_close(c);
	return rc;
}

static void refused(bool external)
{
	int port, fd = socket_on_port(false, &port);
	char msg[512];
	int64_t ms;
	/* A connect timeout far above the bound: the refusal must end it, not the timeout. */
	int rc = open_at(port, 10000, msg, sizeof msg, &ms, external);
	close(fd);
	print_message("refused after %lld ms: %s\n", (long long)ms, msg);
	assert_int_equal(rc, ZKL_ECONNECT);
	assert_true(ms < 2000);
	assert_non_null(strstr(msg, "connection refused"));
	assert_non_null(strstr(msg, "nothing listens"));
	assert_null(strstr(msg, "TLS"));
}

static void test_refused(void **state)
{
	(void)state;
	refused(false);
}

static void test_refused_external_loop(void **state)
{
	(void)state;
	refused(true);
}

static void test_silent(void **state)
{
	(void)state;
	/* Listening, never accepting: the kernel completes the handshake, nobody answers. */
	int port, fd = socket_on_port(true, &port);
	char msg[512];
	int64_t ms;
	int rc = open_at(port, 1500, msg, sizeof msg, &ms, false);
	close(fd);
	print_message("silent after %lld ms: %s\n", (long long)ms, msg);
	assert_int_equal(rc, ZKL_ECONNECT);
	assert_true(ms >= 1500);
	assert_true(ms < 1500 + 2000);
	assert_non_null(strstr(msg, "no answer"));
	assert_non_null(strstr(msg, "accepts connections"));
	assert_non_null(strstr(msg, "TLS"));
	assert_null(strstr(msg, "refused"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_refused_external_loop),
		cmocka_unit_test(test_silent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
