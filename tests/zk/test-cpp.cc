// The C++ API (<zklocks/zklocks.hpp>) on a real ZooKeeper server: the standard guards
// over every kind, timeouts on any clock, errors thrown and returned, moves, asynchronous
// acquires and lost holds. Built twice, as C++17 and C++20, each with -Wall -Wextra
// -Werror -pedantic (tests/zk/meson.build). Run through tests/with-zk; plain checks that
// abort with a message, no cmocka. An argument runs only the tests whose name contains it.
#include <zklocks/zklocks.hpp>
#include <zookeeper/zookeeper.h> // ZooKeeper's codes, for a transaction's zk_rc

#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

// The harness is C, without guards of its own: only h_servers() and h_expire() are used.
extern "C" {
#include "harness.h"
}

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;

// ---- checks ----

[[noreturn]] static void die(const char *file, int line, const char *expr, const std::string &why)
{
	std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file, line, expr,
	             why.empty() ? "" : ": ", why.c_str());
	std::fflush(stderr);
	std::abort();
}

#define EXPECT(cond)                                                                      \
	do {                                                                              \
		if (!(cond))                                                              \
			die(__FILE__, __LINE__, #cond, "");                               \
	} while (0)

#define EXPECT_EQ(got, want)                                                              \
	do {                                                                              \
		const auto got_ = (got);                                                  \
		const auto want_ = (want);                                                \
		if (!(got_ == want_))                                                     \
			die(__FILE__, __LINE__, #got " == " #want,                        \
			    "got " + std::to_string(got_) + ", want " + std::to_string(want_) + \
			        " (" + zkl_last_error() + ")");                           \
	} while (0)

// Runs the statement; it must throw zkl::error with code want.
#define EXPECT_THROWS(want, ...)                                                          \
	do {                                                                              \
		bool thrown_ = false;                                                     \
		try {                                                                     \
			__VA_ARGS__;                                                      \
		} catch (const zkl::error &e_) {                                          \
			thrown_ = true;                                                   \
			if (e_.code() != (want))                                          \
				die(__FILE__, __LINE__, #__VA_ARGS__,                     \
				    std::string("threw ") + e_.what());                   \
		}                                                                         \
		if (!thrown_)                                                             \
			die(__FILE__, __LINE__, #__VA_ARGS__, "did not throw");           \
	} while (0)

// ---- servers, clients, paths ----

// A client of the test server with a short session (so that h_expire() is quick) whose
// releases are confirmed (so that the next acquire by another client finds the node gone).
static zkl::client open_client()
{
	zkl::client_options o(h_servers());
	o.session_timeout_ms = 4000;
	o.confirm_release = true;
	return zkl::client(o);
}

static std::string fresh_path(const char *test)
{
	static int n;
	return "/t/cpp-" + std::string(test) + "-" + std::to_string(n++) + "-" +
	       std::to_string(static_cast<long>(getpid()));
}

template <class Clock>
static long long ms_since(typename Clock::time_point t0)
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Any kind, through the shared verbs.
static bool try_any(zkl::lockable &l)
{
	if (!l.try_lock())
		return false;
	l.unlock();
	EXPECT_EQ(l.last_unlock_error(), 0);
	return true;
}

// ---- timeouts, without a server ----

static void test_timeout_rounding()
{
	using zkl::detail::ceil_ms;
	const double nan = std::numeric_limits<double>::quiet_NaN();
	const double inf = std::numeric_limits<double>::infinity();
	EXPECT_EQ(ceil_ms(0ns), 0);
	EXPECT_EQ(ceil_ms(-1ms), 0);
	EXPECT_EQ(ceil_ms(-5s), 0);
	EXPECT_EQ(ceil_ms(1ns), 1);
	EXPECT_EQ(ceil_ms(1ms), 1);
	EXPECT_EQ(ceil_ms(1001us), 2);
	EXPECT_EQ(ceil_ms(999999ns), 1);
	EXPECT_EQ(ceil_ms(2s), 2000);
	EXPECT_EQ(ceil_ms(std::chrono::duration<double>(0.0005)), 1);
	EXPECT_EQ(ceil_ms(std::chrono::duration<double>(nan)), 0);
	EXPECT_EQ(ceil_ms(std::chrono::duration<double>(-inf)), 0);
	EXPECT_EQ(ceil_ms(std::chrono::duration<double>(inf)), INT_MAX);
	EXPECT_EQ(ceil_ms(std::chrono::milliseconds(INT_MAX - 1)), INT_MAX - 1);
	EXPECT_EQ(ceil_ms(std::chrono::milliseconds(INT_MAX)), INT_MAX);
	EXPECT_EQ(ceil_ms(std::chrono::hours::max()), INT_MAX);
	EXPECT_EQ(ceil_ms(std::chrono::nanoseconds::max()), INT_MAX);

	// What a timeout becomes, seen by a fake acquire that answers at once.
	std::vector<int> asked;
	auto record = [&](int rc) {
		return [&asked, rc](int ms) {
			asked.push_back(ms);
			return rc;
		};
	};
	EXPECT_EQ(zkl::detail::acquire_for(-5s, record(0)), 0);
	EXPECT_EQ(asked.back(), 0);
	EXPECT_EQ(zkl::detail::acquire_for(1500us, record(0)), 0);
	EXPECT_EQ(asked.back(), 2);
	EXPECT_EQ(zkl::detail::acquire_for(std::chrono::hours::max(), record(0)), 0);
	EXPECT_EQ(asked.back(), ZKL_WAIT_FOREVER);
	EXPECT_EQ(zkl::detail::acquire_for(std::chrono::hours(24 * 30), record(0)), 0);
	EXPECT_EQ(asked.back(), INT_MAX); // 30 days: the first round of a longer wait
	// A deadline passed, on any clock: one try without waiting.
	asked.clear();
	EXPECT_EQ(zkl::detail::acquire_until(system_clock::now() - 1h, record(ZKL_ETIMEDOUT)),
	          ZKL_ETIMEDOUT);
	EXPECT_EQ(asked.size(), 1u);
	EXPECT_EQ(asked[0], 0);
	// A coarse clock and a coarse time point: 2 s of whole seconds from now leaves
	// between 1 and 2 s, rounded up.
	asked.clear();
	const auto coarse = std::chrono::time_point_cast<std::chrono::seconds>(system_clock::now()) + 2s;
	EXPECT_EQ(zkl::detail::acquire_until(coarse, record(0)), 0);
	EXPECT(asked[0] > 1000 && asked[0] <= 2000);
	// A wait that ends early by the deadline's clock is tried again for the rest.
	asked.clear();
	const auto t0 = steady_clock::now();
	auto halfway = [&](int ms) {
		asked.push_back(ms);
		std::this_thread::sleep_for(std::chrono::milliseconds(ms / 2));
		return ZKL_ETIMEDOUT;
	};
	EXPECT_EQ(zkl::detail::acquire_until(t0 + 100ms, halfway), ZKL_ETIMEDOUT);
	EXPECT(asked.size() >= 2);
	EXPECT(steady_clock::now() >= t0 + 100ms);
}

// ---- errors ----

static void test_errors()
{
	zkl::error e(ZKL_ELOST, "");
	EXPECT_EQ(e.code(), ZKL_ELOST);
	EXPECT(std::string(e.what()) == std::string("ZKL_ELOST: ") + zkl_strerror(ZKL_ELOST));
	EXPECT(std::string(e.detail()) == zkl_strerror(ZKL_ELOST));
	EXPECT(std::string(e.name()) == "ZKL_ELOST");
	zkl::error d(ZKL_EBUSY, "the handle is busy");
	EXPECT(std::string(d.what()) == "ZKL_EBUSY: the handle is busy");
	zkl::error copy = d;
	EXPECT(std::string(copy.detail()) == "the handle is busy");
	const std::runtime_error &base = d;
	EXPECT(std::string(base.what()) == "ZKL_EBUSY: the handle is busy");
	EXPECT_EQ(zkl::check(0), 0);
	EXPECT_EQ(zkl::check(7), 7);
	EXPECT_THROWS(ZKL_ETIMEDOUT, zkl::check(ZKL_ETIMEDOUT));

	zkl::client c = open_client();
	// A bad path: ZKL_EINVAL, with the library's detail.
	try {
		zkl::mutex m(c, "locks/relative");
		die(__FILE__, __LINE__, "zkl::mutex(c, \"locks/relative\")", "did not throw");
	} catch (const zkl::error &x) {
		EXPECT_EQ(x.code(), ZKL_EINVAL);
		const std::string what = x.what();
		EXPECT(what.rfind("ZKL_EINVAL: ", 0) == 0);
		EXPECT(what.find("locks/relative") != std::string::npos);
		EXPECT(std::strcmp(x.detail(), x.what() + std::strlen("ZKL_EINVAL: ")) == 0);
	}
	EXPECT_THROWS(ZKL_EINVAL, (void)zkl::rwlock(c, ""));
	EXPECT_THROWS(ZKL_EINVAL, (void)zkl::semaphore(c, fresh_path("errors"), 0));
	EXPECT_THROWS(ZKL_EINVAL, (void)zkl::semaphore_mutex(c, "no-slash"));

	// Verbs that fail throw their code; unlock() keeps it instead.
	zkl::mutex m(c, fresh_path("errors"));
	EXPECT_THROWS(ZKL_ENOTHELD, m.token());
	EXPECT_THROWS(ZKL_ENOTHELD, m.node());
	EXPECT_THROWS(ZKL_ENOTOWNER, m.release());
	m.unlock(); // not held: no exception
	EXPECT_EQ(m.last_unlock_error(), ZKL_ENOTOWNER);
	m.lock();
	m.unlock();
	EXPECT_EQ(m.last_unlock_error(), 0);
	EXPECT_THROWS(ZKL_EINVAL, m.set_data(std::string(1024 * 1024 + 1, 'x')));
	zkl::semaphore s(c, fresh_path("errors"), 1);
	s.unlock();
	EXPECT_EQ(s.last_unlock_error(), ZKL_ENOTHELD);

	// No server: ZKL_ECONNECT from the client's constructor.
	zkl::client_options o("127.0.0.1:1");
	o.connect_timeout_ms = 300;
	EXPECT_THROWS(ZKL_ECONNECT, (void)zkl::client(o));
}

// ---- the standard guards ----

static void test_guards()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("guards"), q = fresh_path("guards");
	zkl::mutex ma(a, p), mb(b, p), ma2(a, q), mb2(b, q);

	{
		std::lock_guard<zkl::mutex> g(ma);
		EXPECT(ma.is_held());
		EXPECT(!mb.try_lock()); // another client holds
		{
			std::lock_guard<zkl::mutex> again(ma); // reentrant per thread
			EXPECT(ma.is_held());
		}
		EXPECT(ma.is_held());
		EXPECT(!mb.try_lock());
	}
	EXPECT(!ma.is_held());
	EXPECT_EQ(ma.last_unlock_error(), 0);

	{
		std::unique_lock<zkl::mutex> u(ma);
		EXPECT(u.owns_lock());
		EXPECT(ma.token() > 0);
		std::unique_lock<zkl::mutex> other(mb, std::try_to_lock);
		EXPECT(!other.owns_lock());
		u.unlock();
		EXPECT(other.try_lock());
		EXPECT(!ma.try_lock());
	}
	EXPECT(try_any(ma));

	{
		std::unique_lock<zkl::mutex> u(ma, std::defer_lock);
		EXPECT(u.try_lock_for(5s));
		std::unique_lock<zkl::mutex> timed(mb, 100ms); // times out: ma holds
		EXPECT(!timed.owns_lock());
	}

	{
		std::scoped_lock both(ma, ma2);
		EXPECT(ma.is_held() && ma2.is_held());
		EXPECT(!mb.try_lock());
		EXPECT(!mb2.try_lock());
	}
	EXPECT(!ma.is_held() && !ma2.is_held());
	{
		// std::lock's dance (lock one, try the others, back off) with one of them taken:
		// it gets both once the other client lets go. (Holds are per thread: the thread
		// that takes mb2 gives it back.)
		std::promise<void> taken;
		std::thread t([&] {
			std::lock_guard<zkl::mutex> held(mb2);
			taken.set_value();
			std::this_thread::sleep_for(300ms);
		});
		taken.get_future().wait();
		std::scoped_lock both(ma, ma2);
		t.join();
		EXPECT(ma.is_held() && ma2.is_held());
	}
	EXPECT(try_any(mb) && try_any(mb2));

	// Different kinds in one std::scoped_lock, and a zkl::lockable reference.
	zkl::semaphore_mutex sa(a, fresh_path("guards"));
	zkl::semaphore s(a, fresh_path("guards"), 2);
	{
		std::scoped_lock mixed(ma, sa, s);
		EXPECT(ma.is_held() && sa.is_held() && s.is_held());
		std::lock_guard<zkl::lockable> g(static_cast<zkl::lockable &>(mb2));
		EXPECT(mb2.is_held());
	}
	EXPECT(!ma.is_held() && !sa.is_held() && !s.is_held() && !mb2.is_held());
}

// try_lock_for and try_lock_until time out on any clock, and succeed once it is free.
static void test_timeouts()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("timeouts");
	zkl::mutex ma(a, p), mb(b, p);
	mb.lock();

	auto t0 = steady_clock::now();
	EXPECT(!ma.try_lock_for(300ms));
	long long waited = ms_since<steady_clock>(t0);
	EXPECT(waited >= 300 && waited < 10000);
	t0 = steady_clock::now();
	EXPECT(!ma.try_lock_for(std::chrono::duration<double>(0.2)));
	EXPECT(ms_since<steady_clock>(t0) >= 200);
	t0 = steady_clock::now();
	EXPECT(!ma.try_lock_for(-1s)); // tries once
	EXPECT(ms_since<steady_clock>(t0) < 5000);

	const auto sd = steady_clock::now() + 300ms;
	EXPECT(!ma.try_lock_until(sd));
	EXPECT(steady_clock::now() >= sd);
	const auto wd = system_clock::now() + 300ms;
	EXPECT(!ma.try_lock_until(wd));
	EXPECT(system_clock::now() >= wd);
	t0 = steady_clock::now();
	EXPECT(!ma.try_lock_until(steady_clock::now() - 1s));
	EXPECT(!ma.try_lock_until(system_clock::now() - 1h));
	EXPECT(!ma.try_lock_until(system_clock::time_point::min() + 1h));
	EXPECT(ms_since<steady_clock>(t0) < 5000);
	EXPECT(!ma.is_held());

	// Freed while waiting: the wait ends with the lock. (Holds are per thread: a thread
	// of its own takes mb and gives it back.)
	mb.unlock();
	std::promise<void> taken;
	std::thread t([&] {
		std::lock_guard<zkl::mutex> held(mb);
		taken.set_value();
		std::this_thread::sleep_for(300ms);
	});
	taken.get_future().wait();
	EXPECT(!ma.try_lock());
	EXPECT(ma.try_lock_until(system_clock::now() + 10s));
	t.join();
	EXPECT(ma.is_held());
	EXPECT(!mb.try_lock_until(steady_clock::now() + 100ms));
	ma.unlock();
	EXPECT(mb.try_lock_for(std::chrono::minutes(1)));
	mb.unlock();
	EXPECT(ma.try_lock_until(steady_clock::time_point::max()));
	ma.unlock();
}

// The std::nothrow forms return the C codes and never throw.
static void test_nothrow()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("nothrow");
	zkl::mutex ma(a, p), mb(b, p);
	EXPECT_EQ(mb.acquire(std::nothrow), 0);
	EXPECT_EQ(ma.acquire(0ms, std::nothrow), ZKL_ETIMEDOUT);
	EXPECT(*zkl_last_error() != '\0');
	EXPECT_EQ(ma.acquire(100ms, std::nothrow), ZKL_ETIMEDOUT);
	EXPECT_EQ(ma.acquire_until(system_clock::now() + 100ms, std::nothrow), ZKL_ETIMEDOUT);
	EXPECT_EQ(ma.release(std::nothrow), ZKL_ENOTOWNER);
	EXPECT_EQ(ma.token(std::nothrow), static_cast<std::int64_t>(ZKL_ENOTHELD));
	EXPECT_EQ(mb.release(std::nothrow), 0);
	EXPECT_EQ(ma.acquire(5s, std::nothrow), 0);
	EXPECT(ma.token(std::nothrow) > 0);
	EXPECT_EQ(ma.release(std::nothrow), 0);
	EXPECT_EQ(ma.acquire_async(std::function<void(int)>(), std::nothrow), ZKL_EINVAL);
	EXPECT(std::strstr(zkl_last_error(), "callback") != nullptr);

	// An empty object fails with ZKL_EINVAL, by the C library's own check.
	zkl::mutex empty;
	EXPECT_EQ(empty.acquire(std::nothrow), ZKL_EINVAL);
	EXPECT(std::string(zkl_last_error()) == "lock is NULL");
	EXPECT_EQ(empty.release(std::nothrow), ZKL_EINVAL);
	EXPECT_EQ(empty.acquire_async([](int) {}, std::nothrow), ZKL_EINVAL);

	zkl::multilock ml({ma});
	EXPECT_EQ(ml.acquire(std::nothrow), 0);
	EXPECT_EQ(mb.acquire(0ms, std::nothrow), ZKL_ETIMEDOUT);
	EXPECT_EQ(ml.release(std::nothrow), 0);
	EXPECT_EQ(ml.release(std::nothrow), ZKL_ENOTHELD);
}

// A moved-from object is empty: its destructor does nothing, its verbs fail.
static void test_moves()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("moves"), q = fresh_path("moves");
	zkl::mutex mb(b, p), mbq(b, q);

	zkl::mutex m1(a, p);
	m1.lock();
	const std::int64_t token = m1.token();
	zkl::mutex m2(std::move(m1));
	EXPECT(!m1 && m1.native_handle() == nullptr && m1.native_mutex() == nullptr);
	EXPECT(!m1.is_held());
	EXPECT(m1.path().empty() && m1.kind().empty());
	EXPECT_THROWS(ZKL_EINVAL, m1.lock());
	EXPECT_THROWS(ZKL_EINVAL, m1.try_lock());
	EXPECT_THROWS(ZKL_EINVAL, m1.on_lost([](int) {}));
	EXPECT_THROWS(ZKL_EINVAL, m1.token());
	m1.unlock(); // nothing
	EXPECT_EQ(m1.last_unlock_error(), 0);
	EXPECT(m2 && m2.is_held());
	EXPECT_EQ(m2.token(), token);
	EXPECT(m2.path() == p);
	EXPECT(!mb.try_lock());

	// The moved-from object going out of scope does not release.
	zkl::mutex outer;
	{
		zkl::mutex tmp(std::move(m2));
		outer = std::move(tmp);
	}
	EXPECT(outer.is_held());
	EXPECT(!mb.try_lock());

	// Assigning over a lock frees what it had (and releases its hold) first.
	zkl::mutex other(a, q);
	other.lock();
	EXPECT(!mbq.try_lock());
	other = std::move(outer);
	EXPECT(try_any(mbq));
	EXPECT(other.is_held());
	EXPECT_EQ(other.token(), token);
	{
		zkl::mutex last(std::move(other)); // destroyed here: released
	}
	EXPECT(try_any(mb));

	// The other kinds.
	zkl::rwlock r1(a, p);
	zkl::rwlock r2(std::move(r1));
	EXPECT(!r1 && !r1.read() && !r1.write());
	EXPECT_THROWS(ZKL_EINVAL, r1.read().lock());
	EXPECT(r2.read().kind() == "read" && r2.write().kind() == "write");
	EXPECT(try_any(r2.write()));
	zkl::semaphore s1(a, p + "-s", 1);
	zkl::semaphore s2;
	s2 = std::move(s1);
	EXPECT(!s1 && s2.native_semaphore() != nullptr);
	EXPECT_EQ(s2.max_leases(), 1);
	zkl::semaphore_mutex sm1(a, p + "-sm");
	zkl::semaphore_mutex sm2(std::move(sm1));
	EXPECT(!sm1 && try_any(sm2));
	zkl::multilock ml1({sm2});
	zkl::multilock ml2(std::move(ml1));
	EXPECT(!ml1);
	EXPECT_THROWS(ZKL_EINVAL, ml1.lock());
	ml1.unlock(); // nothing
	EXPECT(ml2.try_lock());
	ml2.unlock();

	// Clients move too; a lock on an empty one cannot be made.
	zkl::client c1 = open_client();
	zkl::client c2(std::move(c1));
	EXPECT(!c1 && c1.native_handle() == nullptr);
	EXPECT(c1.state() == ZKL_STATE_CLOSED);
	EXPECT(c2.state() == ZKL_STATE_CONNECTED && c2.session_id() != 0);
	EXPECT(c2.session_timeout_ms() > 0);
	EXPECT_THROWS(ZKL_EINVAL, (void)zkl::mutex(c1, p));
	zkl::mutex on2(c2, q);
	EXPECT(try_any(on2));
	EXPECT(c2.stats().acquisitions == 1 && c2.stats().granted == 1);
	EXPECT(c1.stats().acquisitions == 0);
	zkl::client c3 = zkl::client::adopt(nullptr);
	EXPECT(!c3);
}

// Readers share, a writer is alone, and the halves are locks of their own.
static void test_rwlock()
{
	zkl::client a = open_client(), b = open_client(), c = open_client();
	const std::string p = fresh_path("rwlock");
	zkl::rwlock ra(a, p), rb(b, p), rc(c, p);
	{
		std::shared_lock<zkl::rwlock> r1(ra);
		std::shared_lock<zkl::rwlock> r2(rb, 5s); // readers overlap
		EXPECT(r1.owns_lock() && r2.owns_lock());
		EXPECT(ra.read().is_held() && rb.read().is_held());
		std::unique_lock<zkl::rwlock> w(rc, std::try_to_lock);
		EXPECT(!w.owns_lock());
		EXPECT(!rc.try_lock_for(200ms));
		EXPECT(!rc.write().try_lock_until(system_clock::now() + 100ms));
		// An upgrade can never succeed.
		EXPECT_THROWS(ZKL_EDEADLK, ra.write().lock());
		EXPECT_THROWS(ZKL_EDEADLK, std::unique_lock<zkl::rwlock> up(ra));
	}
	{
		std::unique_lock<zkl::rwlock> w(rc);
		EXPECT(rc.write().is_held());
		EXPECT(!ra.try_lock_shared());
		EXPECT(!rb.try_lock_shared_for(100ms));
		EXPECT(!rb.try_lock_shared_until(steady_clock::now() + 100ms));
		// A downgrade: the writer takes the read half too.
		std::unique_lock<zkl::rwlock::half> r(rc.read());
		EXPECT(r.owns_lock());
		w.unlock();
		EXPECT(!rb.try_lock()); // still a reader here
		EXPECT(try_any(rb.read()));
	}
	// The halves with the standard guards directly.
	{
		std::unique_lock<zkl::rwlock::half> r(ra.read());
		std::shared_lock<zkl::rwlock> r2(rb);
		EXPECT(!try_any(rc.write()));
	}
	{
		std::lock_guard<zkl::rwlock::half> w(ra.write());
		EXPECT(!try_any(rb.read()));
		EXPECT(ra.write().node().rfind(p + "/", 0) == 0);
	}
	EXPECT(try_any(rc.write()));
}

// A semaphore of two leases: two holders, a third waits; one object may take both.
static void test_semaphore()
{
	zkl::client a = open_client(), b = open_client(), c = open_client();
	const std::string p = fresh_path("semaphore");
	zkl::semaphore s1(a, p, 2), s2(b, p, 2), s3(c, p, 2);
	EXPECT_EQ(s1.max_leases(), 2);
	EXPECT(s1.kind() == "semaphore");
	{
		std::lock_guard<zkl::semaphore> g1(s1);
		std::unique_lock<zkl::semaphore> g2(s2);
		EXPECT(s1.is_held() && s2.is_held());
		EXPECT(!s3.try_lock());
		EXPECT(!s3.try_lock_for(200ms));
		int holders = 0;
		for (const zkl::participant &x : s3.participants())
			holders += x.holder;
		EXPECT_EQ(holders, 2);
		g2.unlock();
		EXPECT(s3.try_lock_for(5s));
		EXPECT(!s2.try_lock());
		s3.unlock();
	}
	// One object, one lease per lock(), given back last first.
	s1.lock();
	const std::int64_t first = s1.token();
	s1.lock();
	const std::int64_t second = s1.token();
	EXPECT(second > first);
	EXPECT(!s2.try_lock());
	s1.unlock();
	EXPECT_EQ(s1.token(), first);
	EXPECT(s2.try_lock_for(5s));
	EXPECT(!s3.try_lock());
	s2.unlock();
	s1.unlock();
	EXPECT(!s1.is_held());
	EXPECT_EQ(s1.last_unlock_error(), 0);

	// Its limit read from a shared count.
	zkl::semaphore sh = zkl::semaphore::shared(a, p + "-shared", p + "-count", 1);
	EXPECT_EQ(sh.max_leases(), 1);
	EXPECT(try_any(sh));

	// A semaphore-mutex is not reentrant: its own second try fails.
	zkl::semaphore_mutex sm(a, p + "-sm"), smb(b, p + "-sm");
	std::lock_guard<zkl::semaphore_mutex> g(sm);
	EXPECT(!sm.try_lock());
	EXPECT(!smb.try_lock_for(100ms));
}

// acquire_async: the function runs once, on the event thread, with the outcome.
static void test_async()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("async");
	zkl::mutex ma(a, p), mb(b, p);
	const std::thread::id main_thread = std::this_thread::get_id();

	mb.lock();
	std::atomic<int> runs{0};
	std::promise<int> got;
	std::thread::id ran_on;
	ma.acquire_async(10s, [&](int rc) {
		ran_on = std::this_thread::get_id();
		runs++;
		got.set_value(rc);
	});
	std::future<int> f = got.get_future();
	EXPECT(f.wait_for(200ms) == std::future_status::timeout); // behind b
	EXPECT_THROWS(ZKL_EBUSY, ma.acquire_async([](int) {}));   // one at a time
	mb.unlock();
	EXPECT(f.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(f.get(), 0);
	EXPECT(ran_on != main_thread);
	EXPECT(ma.is_held());
	EXPECT(ma.token() > 0);
	EXPECT(!mb.try_lock());
	// The hold is the object's: another thread gives it back.
	std::thread([&] { ma.unlock(); }).join();
	EXPECT_EQ(ma.last_unlock_error(), 0);
	EXPECT(try_any(mb));
	EXPECT_EQ(runs.load(), 1);

	// Timed out, canceled, or the object destroyed meanwhile: the function says so.
	mb.lock();
	std::promise<int> timed;
	ma.acquire_async(100ms, [&](int rc) { timed.set_value(rc); });
	std::future<int> tf = timed.get_future();
	EXPECT(tf.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(tf.get(), ZKL_ETIMEDOUT);

	std::promise<int> canceled;
	ma.acquire_async([&](int rc) { canceled.set_value(rc); });
	ma.cancel();
	std::future<int> cf = canceled.get_future();
	EXPECT(cf.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(cf.get(), ZKL_ECANCELED);

	std::promise<int> gone;
	std::future<int> gf = gone.get_future();
	{
		zkl::mutex tmp(a, p);
		tmp.acquire_async([&](int rc) { gone.set_value(rc); });
	}
	EXPECT(gf.wait_for(0ms) == std::future_status::ready); // before the destructor returned
	EXPECT_EQ(gf.get(), ZKL_ECANCELED);

	// Started on one object, finished on the one it moved to; the function releases.
	std::promise<int> moved;
	zkl::mutex m1(a, p);
	m1.acquire_async(10s, [&](int rc) { moved.set_value(rc); });
	zkl::mutex m2(std::move(m1));
	mb.unlock();
	std::future<int> mf = moved.get_future();
	EXPECT(mf.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(mf.get(), 0);
	EXPECT(m2.is_held());
	std::promise<int> released;
	m2.unlock();
	ma.acquire_async(10s, [&](int rc) {
		if (rc == 0)
			ma.unlock();
		released.set_value(rc == 0 ? ma.last_unlock_error() : rc);
	});
	std::future<int> rf = released.get_future();
	EXPECT(rf.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(rf.get(), 0);
	EXPECT(!ma.is_held());
	EXPECT_THROWS(ZKL_EINVAL, ma.acquire_async(std::function<void(int)>()));

	// A semaphore too.
	zkl::semaphore s(a, p + "-s", 1);
	std::promise<int> leased;
	s.acquire_async(5s, [&](int rc) { leased.set_value(rc); });
	std::future<int> lf = leased.get_future();
	EXPECT(lf.wait_for(10s) == std::future_status::ready);
	EXPECT_EQ(lf.get(), 0);
	EXPECT(s.is_held());
	s.unlock();
	EXPECT_EQ(s.last_unlock_error(), 0);
}

// The lost function runs when the session expires; unlock() then keeps ZKL_ELOST.
static void test_on_lost()
{
	zkl::client c = open_client();
	const std::string p = fresh_path("lost");
	std::promise<int> lost;
	std::atomic<int> calls{0};
	std::thread::id ran_on;
	zkl::mutex m0(c, p);
	m0.on_lost([&](int reason) {
		ran_on = std::this_thread::get_id();
		if (calls++ == 0)
			lost.set_value(reason);
	});
	zkl::mutex m(std::move(m0)); // the function moves with the object
	std::future<int> f = lost.get_future();
	{
		std::unique_lock<zkl::mutex> g(m);
		EXPECT(m.is_held());
		h_expire(c.native_handle());
		EXPECT(f.wait_for(10s) == std::future_status::ready);
		// Closed from elsewhere: its node may be told gone before the session is.
		const int reason = f.get();
		EXPECT(reason == ZKL_ELOST || reason == ZKL_EDELETED);
		EXPECT(ran_on != std::this_thread::get_id());
		EXPECT(!m.is_held());
		EXPECT_THROWS(ZKL_ENOTHELD, m.token());
	} // unlocked here, without an exception
	EXPECT_EQ(m.last_unlock_error(), ZKL_ELOST);
	EXPECT_EQ(calls.load(), 1);

	// On the new session the lock works again, and a cleared function is not called.
	m.on_lost(nullptr);
	EXPECT(m.try_lock_for(10s));
	h_expire(c.native_handle());
	for (int i = 0; i < 100 && m.is_held(); i++)
		std::this_thread::sleep_for(100ms);
	EXPECT(!m.is_held());
	EXPECT_THROWS(ZKL_ELOST, m.release());
	EXPECT_EQ(calls.load(), 1);

	// A semaphore's function runs for each lease lost.
	zkl::semaphore s(c, p + "-s", 2);
	std::atomic<int> leases_lost{0};
	s.on_lost([&](int reason) {
		if (reason == ZKL_ELOST || reason == ZKL_EDELETED)
			leases_lost++;
	});
	s.lock();
	s.lock();
	h_expire(c.native_handle());
	for (int i = 0; i < 100 && leases_lost.load() < 2; i++)
		std::this_thread::sleep_for(100ms);
	EXPECT_EQ(leases_lost.load(), 2);
	s.unlock();
	EXPECT_EQ(s.last_unlock_error(), ZKL_ELOST);
	s.unlock();
	EXPECT_EQ(s.last_unlock_error(), ZKL_ELOST);
}

// Node data, the node held, participants, path and kind.
static void test_node_and_data()
{
	zkl::client a = open_client();
	const std::string p = fresh_path("data");
	zkl::mutex m(a, p);
	EXPECT(m.path() == p && m.kind() == "mutex");
	EXPECT(m.participants().empty());
	m.set_data(std::string_view("owner\0cpp", 9));
	std::lock_guard<zkl::mutex> g(m);
	const std::vector<zkl::participant> ps = m.participants();
	EXPECT_EQ(ps.size(), 1u);
	EXPECT(ps[0].holder);
	EXPECT(ps[0].data == std::string("owner\0cpp", 9));
	EXPECT_EQ(ps[0].czxid, m.token());
	EXPECT(ps[0].path == m.node());
	EXPECT(m.node().rfind(p + "/", 0) == 0);
	EXPECT(ps[0].ctime > 0 && ps[0].sequence >= 0);
	m.set_data("");
	zkl::mutex n(a, p + "-empty");
	n.set_data({});
	EXPECT(try_any(n));
}

// Writes that only a holder can make: a transaction and the short forms, refused once
// the hold's node is gone.
static void test_guarded()
{
	zkl::client a = open_client();
	const std::string p = fresh_path("guarded");
	const std::string rec = fresh_path("guarded-rec");
	zkl::mutex m(a, p);
	EXPECT_THROWS(ZKL_ENOTHELD, m.guarded_create(rec, "x"));
	m.lock();
	m.guarded_create(rec, "one");
	m.guarded_set(rec, "two");
	const std::vector<zkl_txn_result> r = m.txn({
		{ZKL_TXN_CHECK, rec.c_str(), nullptr, 0, 1, 0},
		{ZKL_TXN_SET, rec.c_str(), "three", 5, 1, 0},
	});
	EXPECT_EQ(r.size(), 2u);
	EXPECT_EQ(r[1].version, 2);
	std::vector<zkl_txn_result> out;
	EXPECT_EQ(m.txn({{ZKL_TXN_SET, rec.c_str(), "four", 4, 7, 0}}, out, std::nothrow),
	          ZKL_EZK);
	EXPECT_EQ(out[0].zk_rc, ZBADVERSION);
	m.record_set_guarded(rec + "-deep/r", "five");
	h_delete(m.node().c_str());
	EXPECT_THROWS(ZKL_ELOST, m.guarded_set(rec, "late"));
	EXPECT(!m.is_held());
	char buf[16] = {0};
	EXPECT_EQ(h_get(rec.c_str(), buf, sizeof buf - 1), 5);
	EXPECT(std::string(buf) == "three");
	m.unlock();
	EXPECT_EQ(m.last_unlock_error(), ZKL_ELOST);
}

// Several kinds held as one, all or nothing.
static void test_multilock()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("multi"), q = fresh_path("multi"), r = fresh_path("multi");
	zkl::mutex ma(a, p), mb(b, p);
	zkl::semaphore_mutex sa(a, q), sb(b, q);
	zkl::rwlock ra(a, r), rb(b, r);
	zkl::multilock ml({ma, sa, ra.read()});
	{
		std::unique_lock<zkl::multilock> g(ml);
		EXPECT(ml.is_held());
		EXPECT(ma.is_held() && sa.is_held() && ra.read().is_held());
		EXPECT(!mb.try_lock() && !sb.try_lock() && !rb.write().try_lock());
		EXPECT(try_any(rb.read()));
		EXPECT_THROWS(ZKL_EBUSY, ml.add(ra.write()));
	}
	EXPECT(!ml.is_held());
	EXPECT_EQ(ml.last_unlock_error(), 0);
	// All or nothing: one member taken elsewhere, none is held after a timeout.
	sb.lock();
	EXPECT(!ml.try_lock_for(200ms));
	EXPECT(!ma.is_held() && !sa.is_held() && !ra.read().is_held());
	EXPECT(try_any(mb));
	sb.unlock();
	EXPECT(ml.try_lock_until(steady_clock::now() + 5s));
	ml.unlock();
	ml.unlock();
	EXPECT_EQ(ml.last_unlock_error(), ZKL_ENOTHELD);
	EXPECT_THROWS(ZKL_ENOTHELD, ml.release());

	zkl::multilock empty(zkl::multilock::order::as_added);
	EXPECT_THROWS(ZKL_EINVAL, empty.lock());
	empty.add(mb);
	EXPECT_THROWS(ZKL_EINVAL, empty.add(mb));
	EXPECT(empty.try_lock());
	EXPECT(!ma.try_lock());
	empty.unlock();
	EXPECT(try_any(ma));

	// The C view: the shared verbs, on the multi-lock.
	zkl_lock *view = ml.native_lock();
	EXPECT(view != nullptr);
	EXPECT(std::string_view(zkl_lock_kind(view)) == "multilock");
	EXPECT_EQ(zkl_lock_acquire(view, 5000), 0);
	EXPECT(ml.is_held() && zkl_lock_is_held(view));
	EXPECT_EQ(zkl_lock_token(view), int64_t{ZKL_ENOTSUP});
	EXPECT_EQ(zkl_lock_release(view), 0);
	EXPECT(!ml.is_held());
}

// ---- main ----

struct test_case {
	const char *name;
	void (*fn)();
};

// ---- leader election ----

static void test_leader()
{
	zkl::client a = open_client(), b = open_client();
	const std::string p = fresh_path("leader"), q = fresh_path("leader");

	// As a lock: leads for the scope of the guard.
	zkl::leader la(a, p), lb(b, p);
	EXPECT(!la.has_leadership());
	std::int64_t first = 0;
	{
		std::unique_lock<zkl::leader> g(la);
		EXPECT(la.has_leadership());
		EXPECT(la.kind() == "leader");
		first = la.token();
		EXPECT(first > 0);
		EXPECT(!lb.try_lock_for(100ms)); // one leader at a time
		EXPECT(!lb.has_leadership());
	}
	EXPECT(!la.has_leadership());
	EXPECT_EQ(la.last_unlock_error(), 0);
	{
		std::unique_lock<zkl::leader> g(lb, std::defer_lock);
		EXPECT(g.try_lock_for(5s));
		EXPECT(lb.token() > first); // tokens grow from one leader to the next
		zkl::leader moved(std::move(lb)); // leadership moves with the object
		EXPECT(moved.has_leadership());
		EXPECT(!lb.has_leadership());
		g.release();
		moved.unlock();
		EXPECT_EQ(moved.last_unlock_error(), 0);
	}

	// Started: in the election for good, the functions tell each leadership.
	// (await() may return before the loop has run the gained function: wait for it.)
	std::atomic<int> gained_x{0}, lost_x{0}, lost_reason{0}, gained_y{0};
	std::promise<void> px, py;
	zkl::leader_options ox;
	ox.id = "x-id";
	ox.notify_on_close = true;
	ox.on_gained = [&] {
		if (gained_x++ == 0)
			px.set_value();
	};
	ox.on_lost = [&](int reason) {
		lost_reason = reason;
		lost_x++;
	};
	zkl::leader x(a, q, std::move(ox));
	zkl::leader_options oy;
	oy.id = "y-id";
	oy.on_gained = [&] {
		if (gained_y++ == 0)
			py.set_value();
	};
	zkl::leader y(b, q, std::move(oy));
	EXPECT_THROWS(ZKL_EINVAL, (void)x.await(0ms)); // not started
	x.start();
	EXPECT(x.await(5s));
	EXPECT(x.has_leadership());
	EXPECT(px.get_future().wait_for(5s) == std::future_status::ready);
	EXPECT_EQ(gained_x.load(), 1);
	EXPECT_THROWS(ZKL_EBUSY, x.start());
	y.start();
	EXPECT(!y.await(100ms)); // x leads
	EXPECT(y.leader_id() == "x-id");
	x.close(); // y takes over; x's on_lost says why, once, before close returns
	EXPECT_EQ(lost_x.load(), 1);
	EXPECT_EQ(lost_reason.load(), ZKL_ECLOSED);
	EXPECT(!x.has_leadership());
	EXPECT(y.await(5s));
	EXPECT(py.get_future().wait_for(5s) == std::future_status::ready);
	EXPECT_EQ(gained_y.load(), 1);
	EXPECT(x.leader_id() == "y-id");
	EXPECT_EQ(gained_x.load(), 1);

	// An empty leader fails as every empty lock does.
	zkl::leader empty;
	EXPECT(!empty.has_leadership());
	EXPECT_THROWS(ZKL_EINVAL, empty.start());
}

// The observer as a std::function: told each event in order; the client moves with it.
static void test_observer()
{
	zkl::client a = open_client();
	std::mutex mu;
	std::condition_variable cv;
	std::vector<std::pair<zkl_lock_event_type, std::string>> seen;
	a.on_event([&](const zkl_lock_event &ev) {
		std::lock_guard<std::mutex> g(mu);
		seen.emplace_back(ev.type, ev.kind ? ev.kind : "");
		cv.notify_all();
	});
	zkl::client moved = std::move(a); // the observer goes with the client
	const std::string p = fresh_path("observer");
	{
		zkl::mutex m(moved, p);
		std::lock_guard<zkl::mutex> g(m);
	}
	{
		std::unique_lock<std::mutex> g(mu);
		EXPECT(cv.wait_for(g, 20s, [&] { return seen.size() >= 2; }));
		EXPECT(seen[0].first == ZKL_EVENT_GRANTED && seen[0].second == "mutex");
		EXPECT(seen[1].first == ZKL_EVENT_RELEASED);
	}
	moved.on_event(nullptr);
	{
		zkl::mutex m(moved, p);
		std::lock_guard<zkl::mutex> g(m);
	}
	{
		std::lock_guard<std::mutex> g(mu);
		EXPECT_EQ(seen.size(), 2u);
	}
	zkl::client empty = zkl::client::adopt(nullptr);
	bool threw = false;
	try {
		empty.on_event([](const zkl_lock_event &) {});
	} catch (const zkl::error &e) {
		threw = e.code() == ZKL_EINVAL;
	}
	EXPECT(threw);
}

int main(int argc, char **argv)
{
	static const test_case tests[] = {
		{"timeout_rounding", test_timeout_rounding},
		{"errors", test_errors},
		{"guards", test_guards},
		{"timeouts", test_timeouts},
		{"nothrow", test_nothrow},
		{"moves", test_moves},
		{"rwlock", test_rwlock},
		{"semaphore", test_semaphore},
		{"async", test_async},
		{"on_lost", test_on_lost},
		{"node_and_data", test_node_and_data},
		{"guarded", test_guarded},
		{"multilock", test_multilock},
		{"leader", test_leader},
		{"observer", test_observer},
	};
	h_servers(); // exits 77 (skip) without a server
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	std::printf("C++ %ld\n", static_cast<long>(__cplusplus));
	int ran = 0;
	for (const test_case &t : tests) {
		if (argc > 1 && !std::strstr(t.name, argv[1]))
			continue;
		std::printf("[ RUN  ] %s\n", t.name);
		const auto t0 = steady_clock::now();
		try {
			t.fn();
		} catch (const std::exception &e) {
			std::fprintf(stderr, "%s: unexpected exception: %s\n", t.name, e.what());
			std::abort();
		}
		std::printf("[   OK ] %s (%lld ms)\n", t.name, ms_since<steady_clock>(t0));
		ran++;
	}
	std::printf("%d test(s) passed\n", ran);
	return ran > 0 ? 0 : 1;
}
