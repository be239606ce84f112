/* A server that drops the connection at each point of the exchange it can reach, and what
 * the library's client and zklock make of it: the usual connect error (zklock exits 69),
 * and the process lives on. A write to a connection the server has dropped raises
 * SIGPIPE in the writing thread, and SIGPIPE's default action would end this process (the
 * test keeps it at its default, unblocked): OpenSSL writes with write(), and a TLS
 * client writes an alert to a connection it finds closed. Then the same client connects
 * to the real server and locks.
 *
 *   tests/secure/with-secure-zk tls test-drop ZKLOCK [CASES]   (a build with TLS)
 *   tests/with-zk test-drop ZKLOCK [CASES]                     (a plaintext build)
 *
 * CASES: a pattern of the cases to run (cmocka's filter: "test_tls_*").
 *
 * The fake server drops a connection as a server process that dies does: it sends its FIN,
 * then a reset (SO_LINGER 0), so the client's next write finds the socket gone (EPIPE).
 * Each point is asserted reached by at least one connection. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef ZKL_HAVE_ZK_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include "harness.h"

static const char *zklock_path;

/* ---- the fake server ---- */

enum point {
	P_ACCEPT,    /* accepts, then drops at once */
	P_HELLO,     /* TLS: reads the client's hello */
	P_FLIGHT,    /* TLS: answers it with the server's flight, up to its Finished */
	P_HANDSHAKE, /* TLS: the handshake completes */
	P_CONNECT,   /* reads ZooKeeper's connect request */
	P_SESSION,   /* answers it with a session, and reads the next request */
};

static const char *const point_names[] = { "accept", "hello", "flight", "handshake",
	                                   "connect", "session" };

struct fake {
	enum point point;
	bool tls;
	int lfd;
	int stop[2];
	int port;
	pthread_t tid;
	atomic_int reached; /* connections that got as far as the point */
#ifdef ZKL_HAVE_ZK_TLS
	SSL_CTX *ctx;
#endif
};

/* The running fake server (one at a time; stopped by the teardown if a test failed), and
 * the read end of its stop pipe. */
static struct fake *running;
static int stop_fd = -1;

/* Waits until fd is readable (or writable); false once the fake server is told to stop,
 * after a minute, or on error. A client may take seconds over its part of a handshake
 * (under valgrind). */
static bool wait_fd(int fd, bool out)
{
	struct pollfd p[2] = { { .fd = fd, .events = out ? POLLOUT : POLLIN },
		               { .fd = stop_fd, .events = POLLIN } };
	int n;
	while ((n = poll(p, 2, 60000)) < 0 && errno == EINTR)
		;
	return n > 0 && p[0].revents && !p[1].revents;
}

static bool read_full(int fd, void *buf, size_t n)
{
	char *b = buf;
	while (n > 0) {
		if (!wait_fd(fd, false))
			return false;
		ssize_t r = recv(fd, b, n, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
	}
	return true;
}

static bool send_full(int fd, const void *buf, size_t n)
{
	return send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n;
}

#ifdef ZKL_HAVE_ZK_TLS
/* Runs one TLS call on the non-blocking socket until done; 1 when it succeeded. */
static int tls_step(SSL *ssl, int fd, int (*call)(SSL *, void *, int), void *buf, int n)
{
	for (;;) {
		int r = call(ssl, buf, n);
		if (r > 0)
			return r;
		int e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_WANT_READ && wait_fd(fd, false))
			continue;
		if (e == SSL_ERROR_WANT_WRITE && wait_fd(fd, true))
			continue;
		return -1;
	}
}

static int tls_read_call(SSL *ssl, void *buf, int n)
{
	return SSL_read(ssl, buf, n);
}

static int tls_write_call(SSL *ssl, void *buf, int n)
{
	return SSL_write(ssl, buf, n);
}
#endif

/* One connection's transport: plaintext, or TLS once the handshake is done. */
struct conn {
	int fd;
#ifdef ZKL_HAVE_ZK_TLS
	SSL *ssl;
#endif
};

static bool conn_read(struct conn *c, void *buf, size_t n)
{
#ifdef ZKL_HAVE_ZK_TLS
	if (c->ssl) {
		for (char *b = buf; n > 0;) {
			int r = tls_step(c->ssl, c->fd, tls_read_call, b, (int)n);
			if (r <= 0)
				return false;
			b += r;
			n -= (size_t)r;
		}
		return true;
	}
#endif
	return read_full(c->fd, buf, n);
}

static bool conn_write(struct conn *c, const void *buf, size_t n)
{
#ifdef ZKL_HAVE_ZK_TLS
	if (c->ssl)
		return tls_step(c->ssl, c->fd, tls_write_call, (void *)buf, (int)n) == (int)n;
#endif
	return send_full(c->fd, buf, n);
}

/* Reads one length-prefixed ZooKeeper packet (its body dropped, but for the first
 * bytes, kept in head). */
static bool read_packet(struct conn *c, char *head, size_t head_len)
{
	uint32_t len;
	if (!conn_read(c, &len, sizeof len))
		return false;
	len = ntohl(len);
	if (len == 0 || len > 1 << 20)
		return false;
	char buf[4096];
	for (size_t done = 0; done < len;) {
		size_t k = len - done < sizeof buf ? len - done : sizeof buf;
		if (!conn_read(c, buf, k))
			return false;
		if (done == 0 && head)
			memcpy(head, buf, k < head_len ? k : head_len);
		done += k;
	}
	return true;
}

static void put32(char *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static void put64(char *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

/* Answers a connect request (protocolVersion, lastZxidSeen, timeOut, sessionId, ...)
 * with a session: the one asked for, else a new one. */
static bool answer_connect(struct conn *c, const char *req)
{
	uint32_t timeout;
	uint64_t sid;
	memcpy(&timeout, req + 12, 4);
	memcpy(&sid, req + 16, 8);
	char resp[4 + 37];
	memset(resp, 0, sizeof resp);
	put32(resp, 37);                  /* the length */
	put32(resp + 4, 0);               /* protocolVersion */
	memcpy(resp + 8, &timeout, 4);    /* timeOut, as asked (network order) */
	if (sid == 0)
		put64(resp + 12, 0x5ca1ab1e0001ULL);
	else
		memcpy(resp + 12, &sid, 8);
	put32(resp + 20, 16);             /* passwd: 16 zero bytes; readOnly: false */
	return conn_write(c, resp, sizeof resp);
}

/* The FIN, then a reset: the client's next write fails with EPIPE. */
static void drop(int fd)
{
	shutdown(fd, SHUT_WR);
	struct linger l = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
	close(fd);
}

/* Takes one connection as far as f->point; true when it got there. */
static bool serve(struct fake *f, struct conn *c)
{
	if (f->point == P_ACCEPT)
		return true;
#ifdef ZKL_HAVE_ZK_TLS
	if (f->tls) {
		if (f->point == P_HELLO) {
			/* One TLS record: a 5-byte header that ends with its length. */
			unsigned char h[5];
			if (!read_full(c->fd, h, sizeof h) || h[0] != 22)
				return false;
			char body[16384 + 2048];
			size_t n = (size_t)h[3] << 8 | h[4];
			return n <= sizeof body && read_full(c->fd, body, n);
		}
		c->ssl = SSL_new(f->ctx);
		if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
			return false;
		for (;;) {
			int r = SSL_accept(c->ssl);
			if (r == 1)
				break;
			int e = SSL_get_error(c->ssl, r);
			if (e == SSL_ERROR_WANT_READ) {
				/* The server's flight is out once it waits for the client's. */
				if (f->point == P_FLIGHT &&
				    BIO_number_written(SSL_get_wbio(c->ssl)) > 0)
					return true;
				if (wait_fd(c->fd, false))
					continue;
			} else if (e == SSL_ERROR_WANT_WRITE && wait_fd(c->fd, true)) {
				continue;
			}
			return false;
		}
		if (f->point == P_FLIGHT)
			return false; /* the handshake ended without a pause: not that point */
		if (f->point == P_HANDSHAKE)
			return true;
	}
#endif
	char req[28];
	if (!read_packet(c, req, sizeof req))
		return false;
	if (f->point == P_CONNECT)
		return true;
	return answer_connect(c, req) && read_packet(c, NULL, 0);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	/* This thread's own writes to a client that has gone must not end the test. */
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	for (;;) {
		struct pollfd p[2] = { { .fd = f->lfd, .events = POLLIN },
			               { .fd = f->stop[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(f->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct conn c = { .fd = fd };
		if (serve(f, &c))
			atomic_fetch_add(&f->reached, 1);
#ifdef ZKL_HAVE_ZK_TLS
		SSL_free(c.ssl); /* no close_notify: the connection is dropped */
		ERR_clear_error();
#endif
		drop(fd);
	}
	return NULL;
}

static struct fake *fake_start(enum point point, bool tls)
{
	struct fake *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->point = point;
	f->tls = tls;
#ifdef ZKL_HAVE_ZK_TLS
	if (tls) {
		const char *dir = getenv("ZKL_TEST_CERTS");
		assert_non_null(dir);
		char pem[512], key[512], ca[512];
		snprintf(pem, sizeof pem, "%s/server.pem", dir);
		snprintf(key, sizeof key, "%s/server.key", dir);
		snprintf(ca, sizeof ca, "%s/ca.pem", dir);
		f->ctx = SSL_CTX_new(TLS_server_method());
		assert_non_null(f->ctx);
		assert_int_equal(SSL_CTX_use_certificate_chain_file(f->ctx, pem), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey_file(f->ctx, key, SSL_FILETYPE_PEM), 1);
		assert_int_equal(SSL_CTX_load_verify_locations(f->ctx, ca, NULL), 1);
		/* As the real server: a client certificate is asked for. */
		SSL_CTX_set_verify(f->ctx, SSL_VERIFY_PEER, NULL);
	}
#endif
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	socklen_t len = sizeof a;
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pipe2(f->stop, O_CLOEXEC), 0);
	stop_fd = f->stop[0];
	running = f;
	assert_int_equal(pthread_create(&f->tid, NULL, fake_main, f), 0);
	return f;
}

/* Stops it; returns how many connections reached its point. */
static int fake_stop(struct fake *f)
{
	assert_int_equal(write(f->stop[1], "x", 1), 1);
	pthread_join(f->tid, NULL);
	close(f->stop[0]);
	close(f->stop[1]);
	stop_fd = -1;
	running = NULL;
	close(f->lfd);
#ifdef ZKL_HAVE_ZK_TLS
	SSL_CTX_free(f->ctx);
#endif
	int n = atomic_load(&f->reached);
	free(f);
	return n;
}

/* ---- the clients ---- */

static char cert_buf[4][512];

static const char *cert(int i, const char *name)
{
	const char *dir = getenv("ZKL_TEST_CERTS");
	assert_non_null(dir);
	snprintf(cert_buf[i], sizeof cert_buf[i], "%s/%s", dir, name);
	return cert_buf[i];
}

/* How long a client tries the fake server: long enough for a TLS handshake with the fake
 * server in this process, which under valgrind (ZKL_TEST_WRAPPER) takes seconds. */
static int connect_ms(void)
{
	const char *w = getenv("ZKL_TEST_WRAPPER");
	return w && *w ? 15000 : 1500;
}

static void client_options(zkl_client_options *o, const char *servers, bool tls)
{
	zkl_client_options_init(o);
	o->servers = servers;
	o->session_timeout_ms = 4000;
	o->connect_timeout_ms = connect_ms();
	if (tls) {
		o->tls_ca = cert(0, "ca.pem");
		o->tls_cert = cert(1, "client.pem");
		o->tls_key = cert(2, "client.key");
	}
}

/* Runs zklock with args (NULL-terminated) as a shell would start it: SIGPIPE at its
 * default, unblocked. Returns its wait status; its stderr goes to err. */
static int run_zklock(const char *const *args, char *err, size_t err_size)
{
	int pfd[2];
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	const char *argv[32];
	int n = 0;
	argv[n++] = zklock_path;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(pfd[1], 2);
		setenv("ZKLOCK_CONFIG", "/dev/null", 1);
		unsetenv("ZKLOCK_SERVERS");
		execv(zklock_path, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	size_t got = 0;
	for (;;) {
		ssize_t r = read(pfd[0], err + got, err_size - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == err_size - 1)
			got = 0; /* keep the tail */
	}
	err[got] = '\0';
	close(pfd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void expect_zklock(int want, const char *servers, bool tls, const char *path)
{
	char timeout[16];
	snprintf(timeout, sizeof timeout, "%d", connect_ms());
	const char *args[20];
	int n = 0;
	args[n++] = "-s";
	args[n++] = servers;
	args[n++] = "--connect-timeout";
	args[n++] = timeout;
	if (tls) {
		args[n++] = "--tls-ca";
		args[n++] = cert(0, "ca.pem");
		args[n++] = "--tls-cert";
		args[n++] = cert(1, "client.pem");
		args[n++] = "--tls-key";
		args[n++] = cert(2, "client.key");
	}
	args[n++] = path;
	args[n++] = "--";
	args[n++] = "true";
	args[n] = NULL;
	char err[4096];
	int st = run_zklock(args, err, sizeof err);
	if (WIFSIGNALED(st))
		fail_msg("zklock -s %s was killed by signal %d (%s); stderr: %s", servers,
		         WTERMSIG(st), strsignal(WTERMSIG(st)), err);
	if (WEXITSTATUS(st) != want)
		fail_msg("zklock -s %s exited %d, expected %d; stderr: %s", servers,
		         WEXITSTATUS(st), want, err);
	if (want == 69 && !strstr(err, servers))
		fail_msg("zklock's error does not name %s: %s", servers, err);
}

/* The library's client and zklock against a server that drops every connection at
 * point: the connect error, and both live on. */
static void drop_at(enum point point, bool tls)
{
	struct fake *f = fake_start(point, tls);
	char servers[64];
	snprintf(servers, sizeof servers, "127.0.0.1:%d", f->port);

	zkl_client_options o;
	client_options(&o, servers, tls);
	zkl_client *c = NULL;
	int rc;
	if (point == P_SESSION) {
		/* Connected, until the first request: the connection drops under it. */
		/* It returns once connected: bounds for a handshake under valgrind and load (the
		 * C client gives a connection up after the session timeout). */
		o.connect_timeout_ms = 60000;
		o.session_timeout_ms = 30000;
		rc = zkl_client_open(&c, &o);
		CHECK_OK(rc);
		zkl_mutex *m;
		CHECK_OK(zkl_mutex_new(&m, c, "/drop"));
		rc = zkl_lock_acquire(zkl_mutex_lock(m), 1500);
		if (rc == 0)
			fail_msg("acquired a lock from a server that answers no request");
		zkl_mutex_free(m);
		zkl_client_close(c);
	} else {
		rc = zkl_client_open(&c, &o);
		if (rc != ZKL_ECONNECT) {
			zkl_client_close(c);
			fail_msg("%s at %s: expected ZKL_ECONNECT, got %s: %s",
			         tls ? "TLS" : "plaintext", point_names[point], zkl_errname(rc),
			         zkl_last_error());
		}
		assert_null(c);
		if (!strstr(zkl_last_error(), servers))
			fail_msg("the error does not name %s: %s", servers, zkl_last_error());
		expect_zklock(69, servers, tls, "/drop");
	}
	int reached = fake_stop(f);
	if (reached == 0)
		fail_msg("no connection reached the point \"%s\"", point_names[point]);
}

/* The same client, at the real server: it connects and locks; and zklock. */
static void real_server(bool tls)
{
	zkl_client_options o;
	client_options(&o, h_servers(), tls);
	/* A first handshake under valgrind takes seconds. */
	o.connect_timeout_ms = 20000;
	zkl_client *c = NULL;
	CHECK_OK(zkl_client_open(&c, &o));
	zkl_mutex *m;
	CHECK_OK(zkl_mutex_new(&m, c, h_path("drop-real")));
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK_OK(zkl_lock_acquire(l, 5000));
	assert_true(zkl_lock_token(l) > 0);
	CHECK_OK(zkl_lock_release(l));
	zkl_mutex_free(m);
	zkl_client_close(c);
	expect_zklock(0, h_servers(), tls, h_path("drop-real-zklock"));
}

/* After a failed test, the fake server it left running. */
static int stop_fake(void **state)
{
	(void)state;
	if (running)
		fake_stop(running);
	return 0;
}

#ifdef ZKL_HAVE_ZK_TLS
#define TLS_SERVER true
#else
#define TLS_SERVER false
#endif

/* One case: a point, over TLS or plaintext. */
struct drop_case {
	enum point point;
	bool tls;
};

static void test_drop(void **state)
{
	const struct drop_case *d = *state;
	drop_at(d->point, d->tls);
}

static const struct drop_case plain[] = { { P_ACCEPT, false }, { P_CONNECT, false },
	                                  { P_SESSION, false } };
#ifdef ZKL_HAVE_ZK_TLS
static const struct drop_case tls[] = { { P_ACCEPT, true }, { P_HELLO, true },
	                                { P_FLIGHT, true }, { P_HANDSHAKE, true },
	                                { P_CONNECT, true }, { P_SESSION, true } };
#endif

/* The case named test_<plain|tls>_<point>, run by test_drop. */
#define DROP_CASE(kind, i, name)                                                       \
	{ "test_" #kind "_" name, test_drop, NULL, stop_fake, (void *)&kind[i] }

static void test_real_server(void **state)
{
	(void)state;
	real_server(TLS_SERVER);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test-drop ZKLOCK [CASES] (through tests/with-zk, or "
		                "tests/secure/with-secure-zk tls in a build with TLS)\n");
		return 2;
	}
	zklock_path = argv[1];
	if (argc == 3)
		cmocka_set_test_filter(argv[2]);
	h_servers(); /* skips without a server */
	/* As an application starts: a SIGPIPE that reaches this process ends it. */
	signal(SIGPIPE, SIG_DFL);
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_UNBLOCK, &pipe_set, NULL);

	const struct CMUnitTest tests[] = {
		DROP_CASE(plain, 0, "accept"),
		DROP_CASE(plain, 1, "connect"),
		DROP_CASE(plain, 2, "session"),
#ifdef ZKL_HAVE_ZK_TLS
		DROP_CASE(tls, 0, "accept"),
		DROP_CASE(tls, 1, "hello"),
		DROP_CASE(tls, 2, "flight"),
		DROP_CASE(tls, 3, "handshake"),
		DROP_CASE(tls, 4, "connect"),
		DROP_CASE(tls, 5, "session"),
#endif
		cmocka_unit_test(test_real_server),
	};
	return H_RUN(tests);
}
