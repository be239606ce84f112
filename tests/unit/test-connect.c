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

/* What zkl_client_open() did at a port of ours: its code, message and time taken. */
struct attempt {
	int rc;
	char msg[512];
	int64_t ms;
};

/* Opens a client at a port of 127.0.0.1 where a socket of ours listens (never accepting)
 * or only is bound (refusing), with the connect timeout. */
static struct attempt open_at(bool listening, int connect_timeout_ms, bool external)
{
	struct attempt a;
	int port, fd = socket_on_port(listening, &port);
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
	a.rc = zkl_client_open(&c, &o);
	a.ms = now_ms() - t0;
	snprintf(a.msg, sizeof a.msg, "%s", zkl_last_error());
	if (c)
		zkl_client_close(c);
	close(fd);
	print_message("%s after %lld ms: %s\n", listening ? "silent" : "refused",
	              (long long)a.ms, a.msg);
	return a;
}

static void refused(bool external)
{
	/* A connect timeout far above the bound: the refusal must end it, not the timeout.
	 * (It takes about 0.3 s; the bound leaves room for valgrind on a busy machine.) */
	struct attempt a = open_at(false, 20000, external);
	assert_int_equal(a.rc, ZKL_ECONNECT);
	assert_true(a.ms < 4000);
	assert_non_null(strstr(a.msg, "connection refused"));
	assert_non_null(strstr(a.msg, "nothing listens"));
	assert_null(strstr(a.msg, "TLS"));
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
	struct attempt a = open_at(true, 1500, false);
	assert_int_equal(a.rc, ZKL_ECONNECT);
	assert_true(a.ms >= 1500);
	assert_true(a.ms < 1500 + 3000);
	assert_non_null(strstr(a.msg, "no answer"));
	assert_non_null(strstr(a.msg, "accepts connections"));
	assert_non_null(strstr(a.msg, "TLS"));
	assert_null(strstr(a.msg, "refused"));
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
