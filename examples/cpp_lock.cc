// cpp_lock: takes a zklocks mutex from C++ and says which fencing token it got.
//
//   cpp_lock [-s servers] [-w wait_ms] [-t hold_ms] PATH
//
// Connects (to -s, else $ZKLOCK_SERVERS, else 127.0.0.1:2181), waits at most wait_ms
// (default 5000) for the mutex at PATH with std::unique_lock and try_lock_for, prints
// "locked PATH (token T)", holds it for hold_ms (default 1000) and lets the unique_lock
// release it. Exits 0 when it got the lock, 1 when it did not (busy, or an error), 2 on
// bad usage. Run two at once on the same PATH to see the second one wait, or give up.
// Needs only <zklocks/zklocks.hpp> (C++17) and libzklocks.
#include <zklocks/zklocks.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <unistd.h>

static void usage()
{
	std::fprintf(stderr, "usage: cpp_lock [-s servers] [-w wait_ms] [-t hold_ms] PATH\n");
	std::exit(2);
}

static int ms_arg(const char *s)
{
	char *end;
	const long v = std::strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0 || v > 1000000000)
		usage();
	return static_cast<int>(v);
}

int main(int argc, char **argv)
{
	const char *servers = std::getenv("ZKLOCK_SERVERS");
	int wait_ms = 5000, hold_ms = 1000;
	for (int opt; (opt = getopt(argc, argv, "s:w:t:")) != -1;) {
		switch (opt) {
		case 's': servers = optarg; break;
		case 'w': wait_ms = ms_arg(optarg); break;
		case 't': hold_ms = ms_arg(optarg); break;
		default: usage();
		}
	}
	if (argc - optind != 1)
		usage();
	const std::string path = argv[optind];

	try {
		// zkl::client and zkl::mutex free what they hold in their destructors, the
		// mutex first (it was made last), as the C API asks.
		zkl::client_options options(servers && *servers ? servers : "127.0.0.1:2181");
		zkl::client client(options);
		zkl::mutex mutex(client, path);

		std::unique_lock<zkl::mutex> hold(mutex, std::defer_lock);
		if (!hold.try_lock_for(std::chrono::milliseconds(wait_ms))) {
			std::printf("%s is busy: gave up after %d ms\n", path.c_str(), wait_ms);
			return 1;
		}
		std::printf("locked %s (token %lld)\n", path.c_str(),
		            static_cast<long long>(mutex.token()));
		std::fflush(stdout);
		std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
		hold.unlock();
		if (mutex.last_unlock_error() != 0) { // e.g. ZKL_ELOST: the session ended first
			std::fprintf(stderr, "cpp_lock: releasing %s: %s\n", path.c_str(),
			             zkl_errname(mutex.last_unlock_error()));
			return 1;
		}
		return 0;
	} catch (const zkl::error &e) {
		// what() is "<ZKL_NAME>: <detail>", e.g. "ZKL_ECONNECT: no server answered ...".
		std::fprintf(stderr, "cpp_lock: %s\n", e.what());
		return 1;
	}
}
