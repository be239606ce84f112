/* zklocks.hpp: the C++17 face of zklocks, in this one header. It has no library of its
 * own: every member calls the C API of <zklocks/zklocks.h> inline, so a program links
 * with libzklocks as a C program does.
 *
 *     zkl::client c("zk1:2181,zk2:2181");
 *     zkl::mutex m(c, "/locks/nightly-backup");
 *     {
 *             std::unique_lock<zkl::mutex> hold(m, std::defer_lock);
 *             if (hold.try_lock_for(std::chrono::seconds(5))) {
 *                     std::int64_t token = m.token();
 *                     ... work, fenced by token ...
 *             }
 *     } // released here, if it was taken
 *
 * What there is:
 * - zkl::client: one ZooKeeper session (zkl_client).
 * - zkl::mutex, zkl::rwlock (whose read() and write() halves are locks of their own),
 *   zkl::semaphore (one lease per lock()) and zkl::semaphore_mutex: each owns its C handle
 *   and frees it in its destructor. All of them but zkl::rwlock are a zkl::lockable, the
 *   verbs every kind shares (<zklocks/lock.h>); zkl::rwlock forwards lock() to its write
 *   half and lock_shared() to its read half, as std::shared_timed_mutex does.
 * - zkl::leader: a participant of a leader election (Curator's LeaderLatch), a lock
 *   too: std::unique_lock<zkl::leader> leads for its scope.
 * - zkl::multilock: several of them held as one, all or nothing.
 * - zkl::error, the exception every throwing member throws.
 *
 * Every lock type meets the standard Lockable and TimedLockable requirements (lock(),
 * try_lock(), unlock(), try_lock_for(), try_lock_until()), so std::lock_guard,
 * std::unique_lock, std::scoped_lock and std::lock work on them, and zkl::rwlock meets
 * SharedTimedLockable for std::shared_lock. The rules of the C kinds still hold: a mutex
 * is reentrant per thread, a semaphore takes one more lease at each lock(), and so on.
 *
 * Errors, two ways:
 * - Members throw zkl::error (its code() is the ZKL_E* code, its what() says
 *   "<ZKL_NAME>: <detail>"), except that the try_lock* verbs return false on
 *   ZKL_ETIMEDOUT, and unlock() never throws (see below). Out of memory in the C++ part
 *   throws std::bad_alloc, as the standard library does.
 * - A member whose last argument is std::nothrow never throws: it returns what the C
 *   function returns, 0 or a negative ZKL_E* code, with zkl_last_error() set on the
 *   calling thread (ZKL_ENOMEM from the C++ part leaves zkl_last_error() as it was).
 *   These exist for acquiring, releasing and the token: acquire(std::nothrow),
 *   acquire(timeout, std::nothrow), acquire_until(deadline, std::nothrow),
 *   release(std::nothrow), acquire_async(..., std::nothrow), token(std::nothrow).
 *
 * unlock() is noexcept: the standard's guards call it from their destructors. It releases
 * one level as zkl_lock_release() does and keeps the result, 0 or the error, for
 * last_unlock_error(). ZKL_ELOST there means the hold had been lost meanwhile (its
 * session ended): it is gone all the same, and the function of on_lost() has reported
 * it, unless this unlock() was the first to find the loss. ZKL_ENOTOWNER or ZKL_ENOTHELD means there was nothing to unlock
 * (nothing changed); ZKL_EACL or ZKL_EZK that ZooKeeper refused the delete, and the node
 * stays until its session ends. release() is the same verb, throwing.
 *
 * Timeouts are std::chrono durations of any unit, rounded up to whole milliseconds; a
 * zero or negative one tries once without waiting. A deadline (try_lock_until,
 * acquire_until) may be on any clock: it is turned into the time that remains, rounded
 * up, never negative, and waited for on the monotonic clock; should that wait end while
 * the deadline's own clock says there is time left (the clock was set back), the lock
 * is tried again for the rest. A timeout longer than INT_MAX ms (about 24.8 days) is
 * waited in rounds of that length (each queues afresh), and one of 10^12 ms (about 31
 * years) or more waits without limit.
 *
 * Ownership and lifetime: the client must outlive every lock made on it, and a
 * multi-lock's members must outlive the multi-lock (destroy them in the reverse order of
 * their making, as C++ does for locals). Clients and locks are move-only; a moved-from
 * object is empty: its destructor does nothing, unlock() does nothing, is_held() is
 * false, and every verb that can fail fails with ZKL_EINVAL (thrown, or returned by the
 * std::nothrow forms). A lock's
 * destructor frees its C handle as the *_free() function does: the calling thread's hold
 * is released, an asynchronous acquire under way is canceled (its function runs, with
 * ZKL_ECANCELED, before the destructor returns, unless the destructor runs on the
 * client's event thread: then it never runs).
 *
 * Threads: a lock object may be used by several threads at once, like its C handle
 * (moving it or destroying it may not overlap any other use); a multi-lock by one
 * thread at a time. Functions given to
 * acquire_async() and on_lost() run on the client's event thread with no zklocks lock
 * held; a blocking acquire there fails at once with ZKL_EDEADLK. They must not throw: an
 * exception leaving them calls std::terminate(). Nothing here starts a thread. */
#ifndef ZKLOCKS_ZKLOCKS_HPP
#define ZKLOCKS_ZKLOCKS_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "<zklocks/zklocks.hpp> needs C++17 or later; C programs include <zklocks/zklocks.h>"
#endif

#include <zklocks/zklocks.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkl {

/* ---- errors ---- */

/* What every throwing member throws: code() is the ZKL_E* code (or a ZooKeeper code passed
 * through), what() is "<ZKL_NAME>: <detail>", the detail being zkl_last_error() of the
 * failed call, or zkl_strerror(code) when that is empty. Copying never throws. */
class error : public std::runtime_error {
public:
	/* An error with the calling thread's zkl_last_error() as its detail: make it right
	 * after the C call that failed, before any other zklocks call on the thread. */
	explicit error(int code) : error(code, std::string(zkl_last_error())) {}

	/* An error with the given detail ("" for zkl_strerror(code)). */
	error(int code, const std::string &detail)
		: std::runtime_error(message(code, detail)), code_(code)
	{
	}

	/* The code, e.g. ZKL_EINVAL. */
	int code() const noexcept { return code_; }

	/* Its symbolic name, e.g. "ZKL_EINVAL" (static). */
	const char *name() const noexcept { return zkl_errname(code_); }

	/* The detail alone: what() without "<ZKL_NAME>: ". Lives as long as the error. */
	const char *detail() const noexcept
	{
		return what() + std::strlen(zkl_errname(code_)) + 2;
	}

private:
	static std::string message(int code, const std::string &detail)
	{
		std::string m = zkl_errname(code);
		m += ": ";
		m += detail.empty() ? zkl_strerror(code) : detail;
		return m;
	}

	int code_;
};

/* Throws zkl::error(rc) if rc is negative (a ZKL_E* code, just returned by a C function
 * or a std::nothrow member); returns rc otherwise. For code that mixes the two styles. */
inline int check(int rc)
{
	if (rc < 0)
		throw error(rc);
	return rc;
}

/* ---- timeouts ---- */

namespace detail {

/* d in whole milliseconds, rounded up: 0 for a zero, negative or NaN duration, at most
 * INT_MAX. */
template <class Rep, class Period>
int ceil_ms(const std::chrono::duration<Rep, Period> &d) noexcept
{
	const double ms = std::chrono::duration<double, std::milli>(d).count();
	if (!(ms > 0))
		return 0;
	if (ms >= static_cast<double>(INT_MAX))
		return INT_MAX;
	const long long whole =
		std::chrono::ceil<std::chrono::duration<long long, std::milli>>(d).count();
	return whole >= INT_MAX ? INT_MAX : static_cast<int>(whole);
}

/* Calls acquire(ms) with the time left until deadline, by deadline's clock, until it
 * succeeds, fails otherwise, or times out with no time left. */
template <class Clock, class Duration, class F>
int acquire_until(const std::chrono::time_point<Clock, Duration> &deadline, F &&acquire)
{
	for (;;) {
		const auto now = Clock::now();
		const int ms = now < deadline ? ceil_ms(deadline - now) : 0;
		const int rc = acquire(ms);
		if (rc != ZKL_ETIMEDOUT || ms == 0 || !(Clock::now() < deadline))
			return rc;
	}
}

/* Calls acquire(ms) with timeout d: at once if it fits an int of milliseconds, else in
 * rounds until a deadline on the steady clock, or without limit beyond 10^12 ms. */
template <class Rep, class Period, class F>
int acquire_for(const std::chrono::duration<Rep, Period> &d, F &&acquire)
{
	const double ms = std::chrono::duration<double, std::milli>(d).count();
	if (!(ms >= static_cast<double>(INT_MAX)))
		return acquire(ceil_ms(d));
	if (ms >= 1e12)
		return acquire(ZKL_WAIT_FOREVER);
	const std::chrono::duration<long long, std::milli> whole(
		static_cast<long long>(std::ceil(ms)));
	return detail::acquire_until(std::chrono::steady_clock::now() + whole, acquire);
}

/* What a lock object keeps on the heap, so that it stays put while the object moves:
 * the C library holds its address as the data of the lost callback and of asynchronous
 * acquires. It is freed after the C handle, which by then calls nothing any more. */
struct lock_state;

/* One asynchronous acquire whose function has not run yet. */
struct async_call {
	lock_state *owner;
	std::function<void(int)> fn;
};

struct lock_state {
	std::mutex mu;
	/* mu: the lost function (a shared copy, so that a callback running while it is
	 * replaced keeps the old one alive) */
	std::shared_ptr<const std::function<void(int)>> lost;
	/* mu: started asynchronous acquires whose function has not run; one whose handle
	 * was freed on the event thread never runs, and is freed here */
	std::vector<async_call *> calls;
	/* the result of the latest unlock() */
	std::atomic<int> unlock_rc{0};

	~lock_state()
	{
		for (async_call *c : calls)
			delete c;
	}

	void forget(async_call *call) noexcept
	{
		std::lock_guard<std::mutex> g(mu);
		calls.erase(std::remove(calls.begin(), calls.end(), call), calls.end());
	}
};

/* The trampolines the C library calls (C linkage, as its callback types have). */
extern "C" {

inline void zklocks_hpp_lost(zkl_lock *, int reason, void *data) noexcept
{
	auto *st = static_cast<lock_state *>(data);
	std::shared_ptr<const std::function<void(int)>> fn;
	{
		std::lock_guard<std::mutex> g(st->mu);
		fn = st->lost;
	}
	if (fn && *fn)
		(*fn)(reason);
}

inline void zklocks_hpp_acquired(zkl_lock *, int rc, void *data) noexcept
{
	std::unique_ptr<async_call> call(static_cast<async_call *>(data));
	call->owner->forget(call.get());
	/* The function may destroy the lock object, and with it the lock_state: call is no
	 * longer listed there, and is freed here once the function has returned. */
	call->fn(rc);
}

} // extern "C"

} // namespace detail

/* ---- the client ---- */

/* zkl_client_options with the defaults of zkl_client_options_init() already in: set the
 * fields wanted and pass it to zkl::client. The strings it points to are the caller's,
 * and are copied when the client opens. */
struct client_options : zkl_client_options {
	client_options() noexcept : zkl_client_options() { zkl_client_options_init(this); }
	explicit client_options(const char *servers_) noexcept : client_options()
	{
		servers = servers_;
	}
};

/* One ZooKeeper session (zkl_client, <zklocks/client.h>): opened by the constructor,
 * closed by the destructor. Every lock made on it must be destroyed first. Move-only;
 * thread-safe as the C client is. */
class client {
public:
	/* Connects and waits for the session (zkl_client_open()). Throws zkl::error:
	 * ZKL_EINVAL, ZKL_ECONNECT (no server answered in connect_timeout_ms), ZKL_EAUTH. */
	explicit client(const zkl_client_options &options) { check(zkl_client_open(&c_, &options)); }

	/* The same, with servers ("host:port[,host:port...][/chroot]") and the defaults. */
	explicit client(const std::string &servers) : client(client_options(servers.c_str())) {}

	/* Takes over a client opened with zkl_client_open() (NULL gives an empty one). */
	static client adopt(zkl_client *c) noexcept { return client(c, 0); }

	client(const client &) = delete;
	client &operator=(const client &) = delete;
	client(client &&o) noexcept
	    : c_(std::exchange(o.c_, nullptr)), observer_(std::move(o.observer_))
	{
	}
	client &operator=(client &&o) noexcept
	{
		if (this != &o) {
			close();
			c_ = std::exchange(o.c_, nullptr);
			observer_ = std::move(o.observer_);
		}
		return *this;
	}
	~client() { close(); }

	/* Closes the session now (zkl_client_close()); the object is empty afterwards. */
	void close() noexcept
	{
		zkl_client_close(std::exchange(c_, nullptr));
		observer_.reset(); /* called no more: the client is gone */
	}

	/* Tells fn every lock event of the client (zkl_client_set_observer(): on the
	 * client's event thread, no lock held; it must not throw). An empty fn removes
	 * the observer; when this returns, a replaced one is not running. Throws
	 * zkl::error (ZKL_EINVAL) on an empty client. */
	void on_event(std::function<void(const zkl_lock_event &)> fn)
	{
		if (!c_)
			throw error(ZKL_EINVAL, "the client is empty");
		std::unique_ptr<std::function<void(const zkl_lock_event &)>> next;
		if (fn)
			next.reset(new std::function<void(const zkl_lock_event &)>(std::move(fn)));
		check(next ? zkl_client_set_observer(c_, &client::observed, next.get())
		           : zkl_client_set_observer(c_, nullptr, nullptr));
		observer_ = std::move(next);
	}

	/* The C handle (borrowed; NULL when empty), for the rest of the C API. */
	zkl_client *native_handle() const noexcept { return c_; }
	explicit operator bool() const noexcept { return c_ != nullptr; }

	/* zkl_client_state(), zkl_client_session_id(), zkl_client_session_timeout(). */
	zkl_state state() const noexcept { return c_ ? zkl_client_state(c_) : ZKL_STATE_CLOSED; }
	std::int64_t session_id() const noexcept { return c_ ? zkl_client_session_id(c_) : 0; }
	int session_timeout_ms() const noexcept { return c_ ? zkl_client_session_timeout(c_) : 0; }
	/* zkl_client_get_stats(): all zero when empty. */
	zkl_client_stats stats() const noexcept
	{
		zkl_client_stats s{};
		if (c_)
			(void)zkl_client_get_stats(c_, &s, sizeof s);
		return s;
	}

private:
	client(zkl_client *c, int) noexcept : c_(c) {}

	static void observed(zkl_client *, const zkl_lock_event *ev, void *data) noexcept
	{
		(*static_cast<std::function<void(const zkl_lock_event &)> *>(data))(*ev);
	}

	zkl_client *c_ = nullptr;
	/* on the heap, so that its address, the observer's data, stays while we move */
	std::unique_ptr<std::function<void(const zkl_lock_event &)>> observer_;
};

/* ---- the verbs every lock shares ---- */

/* One contender of a lock's queue (zkl_participant, copied). */
struct participant {
	std::string path;        /* the full node path */
	std::string data;        /* its data (bytes; may hold NULs) */
	std::int64_t sequence = 0;
	std::int64_t czxid = 0;  /* a holder's fencing token */
	std::int64_t ctime = 0;  /* ms since the epoch, by the server's clock */
	bool holder = false;     /* whether it holds now */
};

namespace detail {

/* True for 0, false for ZKL_ETIMEDOUT; throws for anything else. */
inline bool timed(int rc)
{
	if (rc == ZKL_ETIMEDOUT)
		return false;
	check(rc);
	return true;
}

/* lock(), try_lock(), try_lock_for() and try_lock_until() (the standard's Lockable and
 * TimedLockable, but unlock()) over Self's acquire(std::nothrow),
 * acquire(duration, std::nothrow) and acquire_until(time_point, std::nothrow). */
template <class Self>
class timed_lockable {
public:
	void lock() { check(self().acquire(std::nothrow)); }
	bool try_lock() { return timed(self().acquire(std::chrono::milliseconds(0), std::nothrow)); }
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &timeout)
	{
		return timed(self().acquire(timeout, std::nothrow));
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &deadline)
	{
		return timed(self().acquire_until(deadline, std::nothrow));
	}

protected:
	timed_lockable() noexcept = default;

private:
	Self &self() noexcept { return static_cast<Self &>(*this); }
};

} // namespace detail

/* The verbs of <zklocks/lock.h> on one view, shared by zkl::mutex, both halves of
 * zkl::rwlock, zkl::semaphore and zkl::semaphore_mutex: a function that takes a
 * `zkl::lockable &` takes any of them. It is never made nor destroyed by itself: the
 * object it is part of owns the C handle. */
class lockable : public detail::timed_lockable<lockable> {
public:
	lockable(const lockable &) = delete;
	lockable &operator=(const lockable &) = delete;

	/* ---- Lockable, TimedLockable ---- */

	/* lock() acquires, waiting as long as it takes, and throws zkl::error: ZKL_ECANCELED
	 * (cancel()), ZKL_ELOST (re-entry into a hold that was lost: unlock it first),
	 * ZKL_EDEADLK (an upgrade from a read half; or on the event thread), ZKL_EACL,
	 * ZKL_ECLOSED, ZKL_EZK, ... as zkl_lock_acquire(). try_lock() tries once, without
	 * waiting: false if it is taken elsewhere (ZKL_ETIMEDOUT); try_lock_for(timeout) and
	 * try_lock_until(deadline, on any clock) wait at most that long (see "Timeouts"
	 * above): false if it passed; other failures throw as lock(). (detail::timed_lockable) */

	/* Releases one level (see "unlock() is noexcept" above); never throws. The result is
	 * kept for last_unlock_error(). A mutex's hold (or a half's) is the thread's that
	 * took it: unlock() from another thread keeps ZKL_ENOTOWNER and changes nothing,
	 * unless the hold came from acquire_async(). Nothing on an empty object. */
	void unlock() noexcept
	{
		if (st_)
			st_->unlock_rc.store(zkl_lock_release(view_));
	}

	/* The result of the latest unlock() on this object, by any thread: 0, or the error
	 * it did not throw (ZKL_ELOST, ZKL_ENOTOWNER, ...). 0 on an empty object. */
	int last_unlock_error() const noexcept { return st_ ? st_->unlock_rc.load() : 0; }

	/* unlock() that throws its error instead of keeping it. */
	void release() { check(release(std::nothrow)); }

	/* ---- the same, without exceptions: 0 or the ZKL_E* code ---- */

	int acquire(std::nothrow_t) noexcept { return zkl_lock_acquire(view_, ZKL_WAIT_FOREVER); }

	template <class Rep, class Period>
	int acquire(const std::chrono::duration<Rep, Period> &timeout, std::nothrow_t) noexcept
	{
		return detail::acquire_for(timeout, [this](int ms) { return zkl_lock_acquire(view_, ms); });
	}

	template <class Clock, class Duration>
	int acquire_until(const std::chrono::time_point<Clock, Duration> &deadline,
	                  std::nothrow_t) noexcept
	{
		return detail::acquire_until(deadline,
		                             [this](int ms) { return zkl_lock_acquire(view_, ms); });
	}

	int release(std::nothrow_t) noexcept { return zkl_lock_release(view_); }

	/* ---- asynchronous acquires ---- */

	/* Starts an acquire that waits at most timeout (rounded up; at most INT_MAX ms; none
	 * for the forms without it) and returns at once; fn(rc) then runs exactly once on
	 * the client's event thread: rc 0 when the lock is held (by the object, not by a
	 * thread: any thread, or fn, gives it back with unlock()), or what lock() would have
	 * failed with, zkl_last_error() telling more. fn is kept by the object's heap state
	 * until it has run. One at a time per object. Throws zkl::error, and fn never runs:
	 * ZKL_EINVAL (fn empty), ZKL_EBUSY (an asynchronous acquire of this object is under
	 * way or holds it), ZKL_ECLOSED. cancel() ends it with ZKL_ECANCELED. */
	void acquire_async(std::function<void(int)> fn)
	{
		check(start_async(ZKL_WAIT_FOREVER, std::move(fn)));
	}

	template <class Rep, class Period>
	void acquire_async(const std::chrono::duration<Rep, Period> &timeout,
	                   std::function<void(int)> fn)
	{
		check(start_async(detail::ceil_ms(timeout), std::move(fn)));
	}

	int acquire_async(std::function<void(int)> fn, std::nothrow_t) noexcept
	{
		return start_async_nothrow(ZKL_WAIT_FOREVER, std::move(fn));
	}

	template <class Rep, class Period>
	int acquire_async(const std::chrono::duration<Rep, Period> &timeout,
	                  std::function<void(int)> fn, std::nothrow_t) noexcept
	{
		return start_async_nothrow(detail::ceil_ms(timeout), std::move(fn));
	}

	/* Wakes every thread of this object waiting to acquire, and ends its asynchronous
	 * acquire: they end with ZKL_ECANCELED (lock() throws it, try_lock_for() too). Does
	 * not touch a hold. */
	void cancel() noexcept { zkl_lock_cancel(view_); }

	/* ---- what is held ---- */

	/* Whether it is held and not lost: for a mutex or a half, by the calling thread or an
	 * asynchronous acquire; for a semaphore, by any lease of this object. */
	bool is_held() const noexcept { return zkl_lock_is_held(view_); }

	/* The fencing token of the current hold (zkl_lock_token()). Throws ZKL_ENOTHELD if
	 * there is none or it was lost. */
	std::int64_t token() const
	{
		const std::int64_t t = zkl_lock_token(view_);
		if (t < 0)
			throw error(static_cast<int>(t));
		return t;
	}

	/* The same, or the negative ZKL_E* code. */
	std::int64_t token(std::nothrow_t) const noexcept { return zkl_lock_token(view_); }

	/* The full path of the node held (zkl_lock_node()). Throws ZKL_ENOTHELD. */
	std::string node() const
	{
		char buf[ZKL_NODE_MAX];
		const int n = check(zkl_lock_node(view_, buf, sizeof buf));
		return std::string(buf, static_cast<std::size_t>(n));
	}

	/* ---- writes that only a holder can make ---- */

	/* Commits ops all or none, together with a check that this hold's node still exists
	 * (zkl_lock_txn()), and returns their results. Throws the transaction's code:
	 * ZKL_ELOST (the hold is gone; it is reported lost as any loss), ZKL_ENOTHELD, the
	 * failing operation's (ZKL_EZK...: the detail names it), ZKL_ECONNLOSS... */
	std::vector<zkl_txn_result> txn(const std::vector<zkl_txn_op> &ops)
	{
		std::vector<zkl_txn_result> results(ops.size());
		check(zkl_lock_txn(view_, ops.data(), ops.size(), results.data()));
		return results;
	}

	/* The same, without throwing: the code, and the results in results (resized). */
	int txn(const std::vector<zkl_txn_op> &ops, std::vector<zkl_txn_result> &results,
	        std::nothrow_t)
	{
		results.resize(ops.size());
		return zkl_lock_txn(view_, ops.data(), ops.size(), results.data());
	}

	/* Writes data to the node at path, only while this hold's node exists
	 * (zkl_lock_guarded_set()). Throws as txn(). */
	void guarded_set(const std::string &path, std::string_view data)
	{
		check(zkl_lock_guarded_set(view_, path.c_str(), data.data(), data.size()));
	}

	/* Makes a persistent node at path with data, only while this hold's node exists
	 * (zkl_lock_guarded_create()). Throws as txn(). */
	void guarded_create(const std::string &path, std::string_view data)
	{
		check(zkl_lock_guarded_create(view_, path.c_str(), data.data(), data.size()));
	}

	/* Writes the record at path (zkl_record_set_guarded()). Throws as txn(). */
	void record_set_guarded(const std::string &path, std::string_view data)
	{
		check(zkl_record_set_guarded(view_, path.c_str(), data.data(), data.size()));
	}

	/* ---- settings ---- */

	/* Sets the function called once when a hold is lost (its session expired, or could
	 * no longer be proven alive): fn(ZKL_ELOST); or its node was deleted while held:
	 * fn(ZKL_EDELETED) (see zkl_lock_on_lost()), on the client's event thread. It may
	 * call unlock() (which then keeps ZKL_ELOST) but not destroy the object. An empty fn
	 * clears it. If unlock() is the first to find the loss, its ZKL_ELOST is the report
	 * and fn is not called. fn is kept by the object's heap state, so it moves with the
	 * object; but if fn refers to the object itself, it must not be moved while fn may
	 * run. Throws ZKL_EINVAL on an empty object. */
	void on_lost(std::function<void(int reason)> fn)
	{
		if (!st_)
			check(zkl_lock_on_lost(view_, nullptr, nullptr));
		std::shared_ptr<const std::function<void(int)>> next;
		if (fn)
			next = std::make_shared<const std::function<void(int)>>(std::move(fn));
		std::lock_guard<std::mutex> g(st_->mu);
		st_->lost.swap(next); /* the old one goes when next does, after the lock */
	}

	/* Sets the data of the nodes created from now on (copied; at most 1 MiB; "" for
	 * empty nodes). The default is "<hostname>:<pid>". Throws ZKL_EINVAL. */
	void set_data(std::string_view data)
	{
		check(zkl_lock_set_data(view_, data.data(), data.size()));
	}

	/* The contenders at the lock's path, in queue order (zkl_lock_participants()).
	 * Throws ZKL_ECONNLOSS, ZKL_EZK, ... */
	std::vector<participant> participants() const
	{
		zkl_participant *list = nullptr;
		std::size_t n = 0;
		check(zkl_lock_participants(view_, &list, &n));
		std::vector<participant> out;
		try {
			out.reserve(n);
			for (std::size_t i = 0; i < n; i++) {
				const zkl_participant &p = list[i];
				participant q;
				q.path = p.path;
				q.data.assign(p.data, static_cast<std::size_t>(p.data_len));
				q.sequence = p.sequence;
				q.czxid = p.czxid;
				q.ctime = p.ctime;
				q.holder = p.holder;
				out.push_back(std::move(q));
			}
		} catch (...) {
			zkl_participants_free(list, n);
			throw;
		}
		zkl_participants_free(list, n);
		return out;
	}

	/* The lock path and the kind ("mutex", "read", "write", "semaphore",
	 * "semaphore-mutex"); empty for an empty object. */
	std::string_view path() const noexcept
	{
		const char *p = zkl_lock_path(view_);
		return p ? std::string_view(p) : std::string_view();
	}
	std::string_view kind() const noexcept
	{
		const char *k = zkl_lock_kind(view_);
		return k ? std::string_view(k) : std::string_view();
	}

	/* The C view (borrowed, NULL when empty), for the rest of the C API, such as
	 * zkl_multilock_add(). */
	zkl_lock *native_handle() const noexcept { return view_; }
	explicit operator bool() const noexcept { return view_ != nullptr; }

protected:
	lockable() noexcept = default;
	lockable(lockable &&o) noexcept
		: view_(std::exchange(o.view_, nullptr)), st_(std::move(o.st_))
	{
	}
	/* The owner frees its C handle first: the old state goes here, after it. */
	lockable &operator=(lockable &&o) noexcept
	{
		view_ = std::exchange(o.view_, nullptr);
		st_ = std::move(o.st_);
		return *this;
	}
	~lockable() = default;

	/* Binds a new C view and its state (made before the handle, so that nothing can fail
	 * once the handle exists). */
	void attach(zkl_lock *view, std::unique_ptr<detail::lock_state> st) noexcept
	{
		view_ = view;
		st_ = std::move(st);
		zkl_lock_on_lost(view_, &detail::zklocks_hpp_lost, st_.get());
	}

private:

	int start_async(int ms, std::function<void(int)> &&fn)
	{
		if (!fn || !st_) /* let the C function say what is wrong */
			return zkl_lock_acquire_async(view_, ms, nullptr, nullptr);
		auto call = std::make_unique<detail::async_call>(
			detail::async_call{st_.get(), std::move(fn)});
		{
			std::lock_guard<std::mutex> g(st_->mu);
			st_->calls.push_back(call.get());
		}
		const int rc = zkl_lock_acquire_async(view_, ms, &detail::zklocks_hpp_acquired,
		                                      call.get());
		if (rc != 0) {
			st_->forget(call.get());
			return rc; /* call is freed; zkl_last_error() is untouched */
		}
		call.release(); /* the trampoline's now; it may even have run already */
		return 0;
	}

	int start_async_nothrow(int ms, std::function<void(int)> &&fn) noexcept
	{
		try {
			return start_async(ms, std::move(fn));
		} catch (...) {
			return ZKL_ENOMEM;
		}
	}

	zkl_lock *view_ = nullptr;
	std::unique_ptr<detail::lock_state> st_;
};

/* ---- the kinds ---- */

/* A fair mutex, reentrant per thread (zkl_mutex, <zklocks/mutex.h>). */
class mutex : public lockable {
public:
	/* An empty mutex, to move one into later. */
	mutex() noexcept = default;

	/* A mutex at the absolute path on c (nothing is sent yet). Throws ZKL_EINVAL (bad
	 * path, empty client). */
	mutex(client &c, const std::string &path)
	{
		auto st = std::make_unique<detail::lock_state>();
		check(zkl_mutex_new(&m_, c.native_handle(), path.c_str()));
		attach(zkl_mutex_lock(m_), std::move(st));
	}

	mutex(mutex &&o) noexcept : lockable(std::move(o)), m_(std::exchange(o.m_, nullptr)) {}
	mutex &operator=(mutex &&o) noexcept
	{
		if (this != &o) {
			zkl_mutex_free(std::exchange(m_, std::exchange(o.m_, nullptr)));
			lockable::operator=(std::move(o));
		}
		return *this;
	}
	/* zkl_mutex_free(): releases the calling thread's hold, cancels an asynchronous
	 * acquire. */
	~mutex() { zkl_mutex_free(m_); }

	/* Which library's node names to use (zkl_mutex_set_naming()). Throws ZKL_EINVAL. */
	void set_naming(zkl_naming naming) { check(zkl_mutex_set_naming(m_, naming)); }

	/* The C handle (borrowed; NULL when empty). */
	zkl_mutex *native_mutex() const noexcept { return m_; }

private:
	zkl_mutex *m_ = nullptr;
};

/* A fair read-write lock (zkl_rwlock, <zklocks/rwlock.h>). read() and write() are its
 * halves, each a lock of its own, reentrant per thread; a writer may take the read half
 * too (a downgrade), a reader the write half never (ZKL_EDEADLK). The lock itself is
 * SharedTimedLockable: lock() and its kin take the write half, lock_shared() and its kin
 * the read half, so that std::unique_lock<zkl::rwlock> writes and
 * std::shared_lock<zkl::rwlock> reads. */
class rwlock {
public:
	/* A half: a lockable that belongs to its rwlock (and moves with it). */
	class half : public lockable {
	private:
		friend class rwlock;
		half() noexcept = default;
		half(half &&) noexcept = default;
		half &operator=(half &&) noexcept = default;
	};

	rwlock() noexcept = default;

	/* A read-write lock at the absolute path on c. Throws ZKL_EINVAL. */
	rwlock(client &c, const std::string &path)
	{
		auto rst = std::make_unique<detail::lock_state>();
		auto wst = std::make_unique<detail::lock_state>();
		check(zkl_rwlock_new(&rw_, c.native_handle(), path.c_str()));
		read_.attach(zkl_mutex_lock(zkl_rwlock_read(rw_)), std::move(rst));
		write_.attach(zkl_mutex_lock(zkl_rwlock_write(rw_)), std::move(wst));
	}

	rwlock(rwlock &&o) noexcept
		: rw_(std::exchange(o.rw_, nullptr)), read_(std::move(o.read_)),
		  write_(std::move(o.write_))
	{
	}
	rwlock &operator=(rwlock &&o) noexcept
	{
		if (this != &o) {
			zkl_rwlock_free(std::exchange(rw_, std::exchange(o.rw_, nullptr)));
			read_ = std::move(o.read_);
			write_ = std::move(o.write_);
		}
		return *this;
	}
	/* zkl_rwlock_free(): releases the calling thread's holds of both halves. */
	~rwlock() { zkl_rwlock_free(rw_); }

	/* The halves (they live as long as this object; a reference to a half of an object
	 * moved from refers to an empty half). */
	half &read() noexcept { return read_; }
	half &write() noexcept { return write_; }

	/* The write half, for std::unique_lock<zkl::rwlock> and std::lock_guard. */
	void lock() { write_.lock(); }
	bool try_lock() { return write_.try_lock(); }
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &timeout)
	{
		return write_.try_lock_for(timeout);
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &deadline)
	{
		return write_.try_lock_until(deadline);
	}
	void unlock() noexcept { write_.unlock(); }

	/* The read half, for std::shared_lock<zkl::rwlock>. */
	void lock_shared() { read_.lock(); }
	bool try_lock_shared() { return read_.try_lock(); }
	template <class Rep, class Period>
	bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &timeout)
	{
		return read_.try_lock_for(timeout);
	}
	template <class Clock, class Duration>
	bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &deadline)
	{
		return read_.try_lock_until(deadline);
	}
	void unlock_shared() noexcept { read_.unlock(); }

	/* Which library's node names both halves use (zkl_rwlock_set_naming()). */
	void set_naming(zkl_naming naming) { check(zkl_rwlock_set_naming(rw_, naming)); }

	/* The C handle (borrowed; NULL when empty). */
	zkl_rwlock *native_handle() const noexcept { return rw_; }
	explicit operator bool() const noexcept { return rw_ != nullptr; }

private:
	zkl_rwlock *rw_ = nullptr;
	half read_, write_;
};

/* N leases shared between processes (zkl_semaphore, <zklocks/semaphore.h>). As a
 * lockable, each lock() takes one more lease and each unlock() gives back the one taken
 * last; not reentrant (a lock() beyond the limit waits, even in the thread holding the
 * others). Its lost function is called once for every lease lost. */
class semaphore : public lockable {
public:
	semaphore() noexcept = default;

	/* A semaphore at path with a fixed limit of max_leases (>= 1; every user of the path
	 * must agree on it). Throws ZKL_EINVAL. */
	semaphore(client &c, const std::string &path, int max_leases)
	{
		auto st = std::make_unique<detail::lock_state>();
		check(zkl_semaphore_new(&s_, c.native_handle(), path.c_str(), max_leases));
		attach(zkl_semaphore_lock(s_), std::move(st));
	}

	/* A semaphore whose limit is the shared count at count_path, made with initial_count
	 * if it does not exist (zkl_semaphore_new_shared()). */
	static semaphore shared(client &c, const std::string &path, const std::string &count_path,
	                        int initial_count)
	{
		semaphore s;
		auto st = std::make_unique<detail::lock_state>();
		check(zkl_semaphore_new_shared(&s.s_, c.native_handle(), path.c_str(),
		                               count_path.c_str(), initial_count));
		s.attach(zkl_semaphore_lock(s.s_), std::move(st));
		return s;
	}

	semaphore(semaphore &&o) noexcept
		: lockable(std::move(o)), s_(std::exchange(o.s_, nullptr))
	{
	}
	semaphore &operator=(semaphore &&o) noexcept
	{
		if (this != &o) {
			zkl_semaphore_free(std::exchange(s_, std::exchange(o.s_, nullptr)));
			lockable::operator=(std::move(o));
		}
		return *this;
	}
	/* zkl_semaphore_free(): releases every lease this object still holds. */
	~semaphore() { zkl_semaphore_free(s_); }

	/* The current limit (zkl_semaphore_max(): the shared count is read, one round
	 * trip). Throws zkl::error. */
	int max_leases() { return check(zkl_semaphore_max(s_)); }

	/* The C handle (borrowed; NULL when empty), e.g. for zkl_semaphore_acquire(). */
	zkl_semaphore *native_semaphore() const noexcept { return s_; }

private:
	zkl_semaphore *s_ = nullptr;
};

/* ---- leader election ---- */

/* The options of a zkl::leader (zkl_leader_options, with functions instead of C
 * callbacks). */
struct leader_options {
	/* The participant id stored in our node; empty: "<hostname>:<pid>". */
	std::string id;
	/* Run on the client's loop when this participant becomes the leader, and when that
	 * leadership ends (with the reason: ZKL_ELOST, ZKL_ECONNLOSS, ZKL_ENOTHELD,
	 * ZKL_ECLOSED, ZKL_EZK, as zkl_leader_lost_fn says); once per leadership each,
	 * alternating, gained first. Each may be empty. They must not throw, block, or
	 * destroy the leader. */
	std::function<void()> on_gained;
	std::function<void(int)> on_lost;
	/* Leadership ends as soon as the connection drops (Curator's default). */
	bool lose_on_suspend = true;
	/* close() of the leader calls on_lost with ZKL_ECLOSED first. */
	bool notify_on_close = false;
};

namespace detail {

/* What a leader keeps on the heap for its C callbacks (it stays put while the object
 * moves). */
struct leader_state {
	std::function<void()> gained;
	std::function<void(int)> lost;
};

extern "C" {

inline void zklocks_hpp_gained(zkl_leader *, void *data) noexcept
{
	auto *st = static_cast<leader_state *>(data);
	if (st->gained)
		st->gained();
}

inline void zklocks_hpp_leader_lost(zkl_leader *, int reason, void *data) noexcept
{
	auto *st = static_cast<leader_state *>(data);
	if (st->lost)
		st->lost(reason);
}

} // extern "C"

} // namespace detail

/* A participant of a leader election (zkl_leader, Curator's LeaderLatch,
 * <zklocks/leader.h>), made by the constructor and freed (leaving the election) by the
 * destructor. Two ways to use it, not both:
 * - as a lock: std::unique_lock<zkl::leader> (or lock(), try_lock_for(), ...) joins the
 *   election and returns once this participant leads; unlock() leaves it. While
 *   locked, is_held() says whether leadership lasts (false as soon as it is lost), and
 *   on_lost() of the lockable reports the loss;
 * - started: start() joins for good (after a loss the latch joins again by itself),
 *   await() waits until it leads, and the functions of leader_options report each
 *   leadership; close() or the destructor leaves.
 * token() is the leader's fencing token. Move-only. */
class leader : public lockable {
public:
	leader() noexcept = default;

	/* A participant of the election at the absolute path on c (nothing is sent yet).
	 * Throws ZKL_EINVAL. */
	leader(client &c, const std::string &path, leader_options o = {})
	{
		auto st = std::make_unique<detail::lock_state>();
		auto ls = std::make_unique<detail::leader_state>();
		ls->gained = std::move(o.on_gained);
		ls->lost = std::move(o.on_lost);
		zkl_leader_options co;
		zkl_leader_options_init(&co);
		co.id = o.id.empty() ? nullptr : o.id.c_str();
		co.on_gained = &detail::zklocks_hpp_gained;
		co.on_lost = &detail::zklocks_hpp_leader_lost;
		co.data = ls.get();
		co.lose_on_suspend = o.lose_on_suspend;
		co.notify_on_close = o.notify_on_close;
		check(zkl_leader_new(&l_, c.native_handle(), path.c_str(), &co));
		ls_ = std::move(ls);
		attach(zkl_leader_lock(l_), std::move(st));
	}

	leader(leader &&o) noexcept
		: lockable(std::move(o)), l_(std::exchange(o.l_, nullptr)), ls_(std::move(o.ls_))
	{
	}
	leader &operator=(leader &&o) noexcept
	{
		if (this != &o) {
			zkl_leader_free(std::exchange(l_, std::exchange(o.l_, nullptr)));
			lockable::operator=(std::move(o));
			ls_ = std::move(o.ls_);
		}
		return *this;
	}
	/* zkl_leader_free(): leaves the election; no function of it runs afterwards. */
	~leader() { zkl_leader_free(l_); }

	/* Joins the election for good (zkl_leader_start()). Throws ZKL_EBUSY (started
	 * already, or led through the lock verbs), ZKL_ECLOSED, ZKL_EINVAL. */
	void start() { check(zkl_leader_start(l_)); }

	/* Waits until this participant leads, at most timeout (see "Timeouts"): true if it
	 * leads, false if the time passed. Throws ZKL_ECLOSED, ZKL_EINVAL (not started),
	 * ZKL_EDEADLK (on the client's loop). */
	template <class Rep, class Period>
	bool await(const std::chrono::duration<Rep, Period> &timeout)
	{
		const int rc = detail::acquire_for(timeout,
		                                   [this](int ms) { return zkl_leader_await(l_, ms); });
		if (rc == ZKL_ETIMEDOUT)
			return false;
		check(rc);
		return true;
	}

	/* Whether this participant leads now (zkl_lock_is_held() of the latch's view). */
	bool has_leadership() const noexcept { return is_held(); }

	/* Leaves the election for good (zkl_leader_close()); once it returns, no function of
	 * leader_options runs any more (unless called from one of them). Never throws. */
	void close() noexcept
	{
		if (l_)
			(void)zkl_leader_close(l_);
	}

	/* The id of the current leader (zkl_leader_leader_id()); empty if nobody takes
	 * part. Throws ZKL_EDEADLK (on the client's loop), ZKL_ECONNLOSS, ... */
	std::string leader_id()
	{
		char *id = nullptr;
		const int rc = zkl_leader_leader_id(l_, &id);
		if (rc == ZKL_ENOTHELD)
			return std::string();
		check(rc);
		std::unique_ptr<char, decltype(&std::free)> hold(id, &std::free);
		return std::string(id);
	}

	/* The C handle (borrowed; NULL when empty). */
	zkl_leader *native_leader() const noexcept { return l_; }

private:
	zkl_leader *l_ = nullptr;
	std::unique_ptr<detail::leader_state> ls_;
};

/* A mutex that is not reentrant, a semaphore of one lease (zkl_semaphore_mutex,
 * <zklocks/semaphore_mutex.h>): a second lock() by its holder waits behind itself. */
class semaphore_mutex : public lockable {
public:
	semaphore_mutex() noexcept = default;

	/* A semaphore-mutex at the absolute path on c. Throws ZKL_EINVAL. */
	semaphore_mutex(client &c, const std::string &path)
	{
		auto st = std::make_unique<detail::lock_state>();
		check(zkl_semaphore_mutex_new(&m_, c.native_handle(), path.c_str()));
		attach(zkl_semaphore_mutex_lock(m_), std::move(st));
	}

	semaphore_mutex(semaphore_mutex &&o) noexcept
		: lockable(std::move(o)), m_(std::exchange(o.m_, nullptr))
	{
	}
	semaphore_mutex &operator=(semaphore_mutex &&o) noexcept
	{
		if (this != &o) {
			zkl_semaphore_mutex_free(std::exchange(m_, std::exchange(o.m_, nullptr)));
			lockable::operator=(std::move(o));
		}
		return *this;
	}
	/* zkl_semaphore_mutex_free(): releases the lease if held. */
	~semaphore_mutex() { zkl_semaphore_mutex_free(m_); }

	/* The C handle (borrowed; NULL when empty). */
	zkl_semaphore_mutex *native_semaphore_mutex() const noexcept { return m_; }

private:
	zkl_semaphore_mutex *m_ = nullptr;
};

/* ---- several locks as one ---- */

/* Locks of any kind held as one, all or nothing (zkl_multilock, <zklocks/multilock.h>):
 * lock() takes every member within one deadline, or none. The members are borrowed: they
 * must outlive the multi-lock. Used by one thread at a time: the thread that locked it
 * unlocks it. Lockable and TimedLockable, with the same two ways of failing as a
 * lockable. Move-only. */
class multilock : public detail::timed_lockable<multilock> {
public:
	/* canonical: members are taken sorted by path, write halves before read halves, so
	 * that two multi-locks over the same locks cannot deadlock; as_added: in the order of
	 * add(). */
	enum class order { canonical = ZKL_MULTILOCK_CANONICAL, as_added = ZKL_MULTILOCK_AS_ADDED };

	/* An empty multi-lock, to add() members to. */
	explicit multilock(order o = order::canonical)
	{
		check(zkl_multilock_new(&ml_, static_cast<zkl_multilock_order>(o)));
	}

	/* A multi-lock of these members: zkl::multilock both({a, rw.read(), sem}). */
	multilock(std::initializer_list<std::reference_wrapper<lockable>> members,
	          order o = order::canonical)
		: multilock(o)
	{
		for (lockable &l : members)
			add(l);
	}

	multilock(const multilock &) = delete;
	multilock &operator=(const multilock &) = delete;
	multilock(multilock &&o) noexcept
		: ml_(std::exchange(o.ml_, nullptr)), unlock_rc_(o.unlock_rc_)
	{
	}
	multilock &operator=(multilock &&o) noexcept
	{
		if (this != &o) {
			zkl_multilock_free(std::exchange(ml_, std::exchange(o.ml_, nullptr)));
			unlock_rc_ = o.unlock_rc_;
		}
		return *this;
	}
	/* zkl_multilock_free(): releases the members if held (not the members themselves). */
	~multilock() { zkl_multilock_free(ml_); }

	/* Adds a member, before the first lock(). Throws ZKL_EBUSY (held), ZKL_EINVAL (the
	 * same lock twice, or an empty one). */
	void add(lockable &l) { check(zkl_multilock_add(ml_, l.native_handle())); }

	/* lock(), try_lock(), try_lock_for(), try_lock_until(): all or nothing, as
	 * zkl_multilock_acquire() (detail::timed_lockable). */
	/* Releases every member; never throws. The first error (ZKL_ELOST, ...; ZKL_ENOTHELD
	 * if it was not held) is kept for last_unlock_error(). Nothing on an empty object. */
	void unlock() noexcept
	{
		if (ml_)
			unlock_rc_ = zkl_multilock_release(ml_);
	}
	int last_unlock_error() const noexcept { return unlock_rc_; }
	void release() { check(release(std::nothrow)); }

	int acquire(std::nothrow_t) noexcept { return zkl_multilock_acquire(ml_, ZKL_WAIT_FOREVER); }
	template <class Rep, class Period>
	int acquire(const std::chrono::duration<Rep, Period> &timeout, std::nothrow_t) noexcept
	{
		return detail::acquire_for(timeout,
		                           [this](int ms) { return zkl_multilock_acquire(ml_, ms); });
	}
	template <class Clock, class Duration>
	int acquire_until(const std::chrono::time_point<Clock, Duration> &deadline,
	                  std::nothrow_t) noexcept
	{
		return detail::acquire_until(deadline,
		                             [this](int ms) { return zkl_multilock_acquire(ml_, ms); });
	}
	int release(std::nothrow_t) noexcept { return zkl_multilock_release(ml_); }

	/* Whether every member is held and none lost. */
	bool is_held() const noexcept { return zkl_multilock_is_held(ml_); }

	/* The C handle (borrowed; NULL when empty). */
	zkl_multilock *native_handle() const noexcept { return ml_; }
	/* Its C view, zkl_multilock_lock() (borrowed; NULL when empty): the zkl_lock_* verbs,
	 * such as an asynchronous acquire of every member on one client (<zklocks/multilock.h>
	 * says how the view answers). */
	zkl_lock *native_lock() const noexcept { return zkl_multilock_lock(ml_); }
	explicit operator bool() const noexcept { return ml_ != nullptr; }

private:

	zkl_multilock *ml_ = nullptr;
	int unlock_rc_ = 0; /* one thread at a time: no atomic needed */
};

} // namespace zkl

#endif
