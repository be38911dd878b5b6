// admit/redis/semaphore.hpp — a counting semaphore shared by every process that uses the same name on one Redis: the
// distributed form of admit::semaphore (<admit/semaphore.hpp>), for "at most N at once across the fleet" (e.g.
// workers on many machines that must not run more than N database queries together).
//
//   admit::redis::semaphore db(conn, "db-queries", 8);           // capacity 8, shared by every process
//   if (auto r = db.try_acquire_for(2s)) {                       // FIFO across hosts; r.value() is the lease
//     query(r->fencing_token());                                 // the resource rejects tokens older than it has seen
//   }                                                            // released at scope end
//
// Guarantees, and where they stop (docs/distributed.md says more):
// - Leases. Each grant is a lease that expires lease_ttl after it was granted or last renewed, on Redis's clock (TIME;
//   no client clock is ever compared with another). While the lease object lives, the client renews it every
//   lease_ttl / 3 (opt out: auto_renew = false). A holder that dies frees its permits at most lease_ttl later, and the
//   next waiters are granted then without anyone calling release: the waiter at the head of the queue asks again when
//   the earliest lease expires (a waiter further back, at its poll; one that became the head by a grant to the one
//   before it, from its next poll on). A holder that stops (a GC pause, SIGSTOP, a
//   partition) for longer than lease_ttl loses its lease: state() becomes lost and on_lease_lost is called when the
//   process notices — while renewals get no answer, at the lease's local expiry (lease_ttl after the last renewal
//   that succeeded was sent, which is no later than Redis's expiry); a process that was stopped, when it runs again.
//   The process may still believe, for a while, that it holds the permit. A lease alone cannot protect a resource
//   from that stale holder; the fencing token can.
// - Fencing tokens. Each grant carries a token, strictly increasing per semaphore (and at least the server time in µs,
//   so it keeps increasing across a Redis restart that lost the semaphore's state). A resource that remembers the
//   largest token it has seen and refuses smaller ones is safe from stale holders (examples/redis_fencing).
// - FIFO across hosts, hand-off, no herd. Waiters queue in Redis in arrival order. A release (or an expiry, or a
//   capacity increase) grants the head waiter(s) directly — a large request at the head holds back smaller ones
//   behind it — and wakes exactly those: a grant to a waiter of the same semaphore object comes back in the release's
//   reply; any other is pushed on its process's wake list (one LPUSH per grant; each semaphore object has its own wake
//   list and one connection blocked on it in BLMPOP, which takes every waiting grant at once). A lost wake-up costs at
//   most poll_interval, never a hang: every waiter polls its state that often.
// - A waiter that dies leaves the queue waiter_ttl after its last poll; it cannot block the queue.
// - Every identity is per acquisition (128 random bits), never per host; every key shares the hash tag {name}.
// - max_waiters bounds the queue across the fleet: a request that would have to wait behind that many fails with
//   errc::queue_full.
// - Deadlines. A deadline already passed does not wait: one call that does not queue decides, as try_acquire's
//   (errc::timeout where it says errc::would_block), answered within the 40 ms below or errc::timeout. A wait ends at
//   its deadline (errc::timeout) or on its stop_token (errc::cancelled) even while a call is in flight or Redis does
//   not answer; before a blocking wait so ended returns, its request has left the queue in Redis (and a grant that
//   raced with it has been released) — it waits for that answer at most options().timeout more after a stop, and at
//   most 40 ms more after its deadline (so that no blocking wait returns later than that past its deadline, however
//   slow Redis is). A leave Redis has not answered by then goes on in the background (shutdown() waits for it); until
//   it lands the request stays queued, and a grant it gets meanwhile is released. async_acquire's cancellation
//   completes at once and leaves the queue in the background (see shutdown()). Every Redis call has options().timeout;
//   a failed call makes the acquire fail with that error (admit::errc), except while waiting, where a poll that got no
//   answer is retried until the deadline — unless the connection was closed (or destroyed): the wait then ends with
//   errc::closed (at its next poll, within poll_interval; a wait cancelled through its stop token or cancellation slot
//   ends at once).
// - Nothing lost at exit, when the program calls shutdown() (or async_shutdown()) before it ends. release() waits
//   for Redis's answer. The lease's destructor does too (bounded by
//   options().timeout) when it runs off the connection's executor thread — a lease released at scope end is free in
//   Redis before the next statement, even if that is `return` from main. On the executor's thread (a completion
//   handler), where waiting could not be answered, the release is sent in the background; so are the queue-leaves of
//   cancelled async waits. shutdown() and async_shutdown() wait for that background work; neither ~semaphore nor the
//   end of main does, and a release that never reaches Redis keeps its permits taken until lease_ttl, a leave its
//   waiter queued until waiter_ttl.
//
// Metrics (opt-in, enable_metrics): try_acquire, acquire, try_acquire_until/for and the async forms each count
// exactly one admit::acquire_outcome in an admit::limiter_metrics (limiter_metrics.hpp): admitted (a lease from
// Redis), unavailable (errc::would_block), queue_full, timeout, cancelled, closed, exceeds_capacity, failed (any other
// error: a call Redis did not answer, an open breaker, an unexpected reply). A local lease of failure_policy::fail_open
// counts as failed, not admitted: Redis could not answer (the lease is in in_flight all the same). The wait of an
// admission is its time from the call to the grant (one round trip at least: a try_acquire's too), so `waited` counts
// every admission from Redis. metrics() reads no Redis: its gauges are this object's — limit the capacity it last
// learned (set_capacity, inspect; 0 before), in_flight the permits its leases hold now (neither released nor found
// lost), waiting its acquisitions under way (from the call to the outcome; not try_acquire) — and are kept whether or
// not metrics are enabled. Leases found lost are counted by leases_lost() (not an outcome: the acquisition was
// admitted). The event hook runs once per acquisition: a blocking one on the calling thread (what it throws reaches
// the caller, after the acquisition is counted and has left the queue); an async one on the connection's executor
// before the completion is posted — there it must not throw.
//
// Thread safety: every member may be called concurrently from any thread but the ones that run the connection's
// executor (the waits block). The connection (or cluster) must outlive the calls made on the semaphore and its
// leases; leases may outlive the semaphore object. Work they leave behind (renewals, leaving the queue, releasing a
// grant that raced with a cancellation) may outlive both and the connection: it then ends without touching it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <type_traits>
#include <utility>

#include "admit/detail/deadline.hpp"
#include "admit/errc.hpp"
#include "admit/expected.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/redis/client/client.hpp"
#include "admit/redis/client/cluster.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/detail/async_wait.hpp"
#include "admit/redis/limiter_options.hpp"

namespace admit::redis {

namespace detail {
class semaphore_core;
class lease_core;
}  // namespace detail

enum class lease_state {
  held,      // granted, and not known to have expired
  lost,      // Redis no longer has it (it expired: renewals failed or came too late; or Redis lost its data)
  released,  // given back by release() or the destructor
};

struct semaphore_options {
  // Requests that may wait at once across the fleet; one more that would have to wait fails with errc::queue_full.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
  // A lease's lifetime on Redis's clock, from its grant or last renewal. >= 1 ms.
  std::chrono::milliseconds lease_ttl{10'000};
  // Renew held leases every lease_ttl / 3 while their lease object lives.
  bool auto_renew = true;
  // How often a waiter asks Redis about its place when no wake-up came (a lost wake-up costs at most this). >= 1 ms.
  std::chrono::milliseconds poll_interval{1'000};
  // How long a waiter stays queued after its last poll: its process is presumed dead after that. 0: 3 ×
  // poll_interval + timeout. Must exceed poll_interval + timeout. Every duration here is at most 2^40 µs.
  std::chrono::milliseconds waiter_ttl{0};
  // The deadline of each Redis call. > 0.
  std::chrono::milliseconds timeout{1'000};
  // How long the semaphore stays in Redis once nobody holds or waits: its keys expire that long after the last of its
  // leases and waiters could, and up to a quarter of it later (a call moves every key's expiry only when it needs a
  // later one), and the next acquisition makes it anew with its object's capacity — a capacity set_capacity changed is
  // forgotten then. For semaphores named after unbounded values (a client, a tenant), which would otherwise stay in
  // Redis for ever. Costs one to four commands per call. 0 (the default): the keys stay until deleted. >= 0.
  std::chrono::milliseconds idle_ttl{0};
  // Called when a lease this process holds is found lost (on the thread that found it; must not block).
  std::function<void(const std::string& lease_id, std::int64_t fencing_token)> on_lease_lost{};
  // Called when an acquisition that has to wait has joined the queue in Redis, with its waiter id (on the connection's
  // executor; must not block): its place in the FIFO order is then taken. The id is what inspect lists in the queue
  // and, once granted, the lease's id(). Once per acquisition, and again with a new id should it have to join anew
  // (its place was lost: Redis restarted, or it stopped polling past waiter_ttl).
  std::function<void(const std::string& waiter_id)> on_queued{};
  // What an acquisition does when Redis cannot answer it — its call failed for want of an answer (timeout, refused or
  // lost connection), or the breaker is open. failure_policy::fail_closed (the default): it fails with that error
  // (errc::circuit_open when the breaker kept the call from Redis). failure_policy::fail_open: it gets a
  // local lease instead (fencing_token() 0, id() "local:...", never in Redis) while this semaphore object holds
  // fewer than local_cap permits in local leases, and fails as fail_closed beyond that. The over-admission bound
  // while Redis is away: local_cap permits per semaphore object, on top of the leases Redis still counts.
  // failure_policy::local_fallback is not accepted (std::invalid_argument). A waiter already queued keeps polling
  // until its deadline, as without a policy.
  failure_policy on_failure = failure_policy::fail_closed;
  std::int64_t local_cap = 1;  // >= 0
  // Consecutive failed acquisitions that stop calling Redis for breaker.open_for; failure_threshold 0 disables it.
  circuit_breaker_options breaker{};
};

// A granted lease: `count()` permits of the semaphore until released, destroyed, or lost. Move-only.
class [[nodiscard]] lease {
 public:
  lease() noexcept;
  lease(lease&&) noexcept;
  lease& operator=(lease&&) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  // Releases if still held. Off the connection's executor thread it waits for Redis's answer, at most the
  // semaphore's options().timeout (one round trip; a Redis that does not answer delays the
  // destructor by the timeout, and the release then goes on in the background). On the executor's thread (an
  // io_context's, a strand of one or a thread_pool's; any executor of another kind counts as that) it does not
  // wait: the release is background work that semaphore::shutdown() waits for.
  ~lease();

  // What the result of release() says.
  enum class release_status {
    released,  // Redis took the permits back (and handed them to the next waiters)
    not_held,  // Redis had no such lease: it expired, was released already, or is another's — nothing was changed
    failed,    // the call failed (its error is in release()'s second member); the lease expires by itself
  };

  // Gives the permits back and waits for Redis's answer (within the semaphore's timeout).
  std::pair<release_status, std::error_code> release();
  // Gives the permits back without blocking. The lease is released (state() says so) once the operation is initiated
  // (before this returns, for a callback); the completion gets Redis's answer, as release() returns it.
  // Completion: void(std::error_code, release_status), the error set exactly when the status is failed, through the
  // handler's associated executor (the connection's by default; the system executor for an empty lease), never
  // inside this call. Not cancellable: a release is always delivered or fails, and semaphore::shutdown() waits for it
  // as for the destructor's background releases.
  template <class CompletionToken>
  auto async_release(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, release_status)>(
        [](auto handler, const std::shared_ptr<detail::lease_core>& core) {
          auto done =
              detail::posted_completion<std::error_code, release_status>(std::move(handler), executor_of(core.get()));
          release_then(core, [done](release_status status, std::error_code ec) { done(ec, status); });
        },
        token, core_);
  }

  // Extends the lease to lease_ttl from now on Redis's clock; false when Redis no longer has it (state() is then
  // lost) or the call failed (the error is in the second member).
  std::pair<bool, std::error_code> renew();

  // Hands the lease over without releasing it, and returns its id: this object is empty afterwards (it neither renews
  // nor releases), and the permits stay taken in Redis until a semaphore object of the same name releases the id
  // (semaphore::release, in this process or any other) or the lease expires — lease_ttl after its grant or last
  // renewal, on Redis's clock (expires_at()). For a request that one process admits and another finishes (a job
  // handed from a front end to a worker; `admit serve`'s /release). Returns "" and hands over nothing for an empty
  // or released lease, and for a local lease of the failure policy (it is not in Redis, so no other object could
  // release it: its permits are given back to this process at once). No Redis call. A renewal already on its way
  // when detach() is called may still land, extending the lease once more (by lease_ttl at most).
  [[nodiscard]] std::string detach();

  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(core_); }
  [[nodiscard]] std::int64_t count() const noexcept;
  // Strictly increasing per semaphore, grant after grant.
  [[nodiscard]] std::int64_t fencing_token() const noexcept;
  // The lease's identity in Redis (per acquisition).
  [[nodiscard]] const std::string& id() const noexcept;
  [[nodiscard]] lease_state state() const noexcept;
  // The permits the semaphore had free at the end of the call that granted this lease, as Redis counted them
  // (negative after a capacity cut; with classes, after the call also served other waiters); std::nullopt when not
  // known: a grant that waited (handed over by a release or found by a poll), a local lease. For a "remaining" figure
  // in an answer; it is not kept up to date.
  [[nodiscard]] std::optional<std::int64_t> available() const noexcept;
  // The expiry Redis last reported, in µs since the Unix epoch of Redis's clock.
  [[nodiscard]] std::chrono::microseconds expires_at() const noexcept;

 private:
  friend class detail::semaphore_core;
  explicit lease(std::shared_ptr<detail::lease_core> core) noexcept;
  // What release() and async_release() share: the outcome when Redis need not be asked (no lease, or a local one),
  // after marking the lease released. (Static, on the lease's state: async_release's initiation may run after the
  // lease object has gone, with a deferred completion token.)
  static std::optional<std::pair<release_status, std::error_code>> release_locally(detail::lease_core* core);
  // async_release without the handler: calls `done` once with the outcome, on any thread (inline when Redis need not
  // be asked).
  static void release_then(const std::shared_ptr<detail::lease_core>& core,
                           std::function<void(release_status, std::error_code)> done);
  // The connection's executor; the system executor for no lease.
  static boost::asio::any_io_executor executor_of(const detail::lease_core* core);
  std::shared_ptr<detail::lease_core> core_;
};

// The outcome of an acquisition: the lease, or why there is none — an admit::errc (queue_full, timeout, cancelled,
// exceeds_capacity), errc::would_block (try_acquire: not free now), or the Redis call's error (also an admit::errc:
// unexpected_reply for a reply the script should not have made, an error reply included).
// admit::expected (admit/expected.hpp), as every admit result: has_value(), value() (throws std::system_error),
// *r, r->, error().
using semaphore_result = admit::expected<lease, std::error_code>;

namespace detail {

// The completion of an async_acquire, type-erased: semaphore.cpp drives the operation and calls complete() once.
class acquire_completion : public std::enable_shared_from_this<acquire_completion> {
 public:
  virtual ~acquire_completion() = default;
  virtual void complete(std::error_code ec, lease l) = 0;
  // Called once after complete(), when the operation has nothing more in flight for this request in Redis (it left
  // the queue, or was granted).
  virtual void settled() {}
};

// An acquire_completion that posts handler(ec, lease) as posted_completion does.
template <class Handler>
class acquire_completion_for final : public acquire_completion {
 public:
  acquire_completion_for(Handler&& handler, const boost::asio::any_io_executor& fallback)
      : post_(posted_completion<std::error_code, lease>(std::move(handler), fallback)) {}
  void complete(std::error_code ec, lease l) override { post_(ec, std::move(l)); }

 private:
  std::function<void(std::error_code, lease)> post_;
};

// The operation behind async_acquire (semaphore.cpp): made first, so that the handler's cancellation slot can be
// connected to it before it starts.
// `priority`: an admission's class (0 for a semaphore).
std::shared_ptr<async_acquire_op> make_async_acquire(const std::shared_ptr<semaphore_core>& core, std::int64_t n,
                                                     std::optional<std::chrono::steady_clock::time_point> deadline,
                                                     std::shared_ptr<acquire_completion> completion,
                                                     std::size_t priority = 0);
// The operation behind async_try_acquire: one non-waiting acquire call, completing `completion` once.
void start_try_acquire(const std::shared_ptr<semaphore_core>& core, std::int64_t n,
                       std::shared_ptr<acquire_completion> completion, std::size_t priority = 0);
boost::asio::any_io_executor executor_of(const semaphore_core& core) noexcept;

}  // namespace detail

// What `inspect` returns: the semaphore's live state, as Redis has it.
struct semaphore_snapshot {
  struct holder {
    std::string id;
    std::int64_t count;
    std::int64_t fencing_token;
    std::chrono::microseconds remaining;  // until the lease expires (negative: expired, not swept yet)
    std::size_t priority = 0;             // an admission's: the class it was admitted in
  };
  struct waiter {
    std::string id;
    std::int64_t count;
    std::chrono::microseconds remaining;  // until the waiter is presumed dead unless it polls
    std::size_t priority = 0;             // an admission's: the class it waits in
  };
  // An admission's priority class: the permits its holders hold and its waiters ask for.
  struct class_state {
    std::int64_t held = 0;
    std::int64_t queued = 0;
  };
  std::int64_t capacity = 0;
  std::int64_t available = 0;  // capacity minus permits held (negative after a capacity cut)
  std::int64_t last_fencing_token = 0;
  std::chrono::microseconds server_time{0};
  std::vector<holder> holders;  // the first `most`, by expiry
  std::vector<waiter> queue;    // the first `most`, in order (with classes: of arrival, over all classes)
  std::int64_t holder_count = 0, waiter_count = 0;
  // With a rate (an admission's): what one token costs, the burst, and the whole tokens the bucket holds now (negative
  // while it is in debt); all 0 without a rate.
  std::chrono::microseconds token_interval{0};
  std::int64_t burst = 0;
  std::int64_t tokens = 0;
  // With a rate, while the bucket holds fewer than `burst` tokens: until it holds one more whole token (0 otherwise).
  std::chrono::microseconds next_token{0};
  // With priority classes (an admission's, more than one): each class's, by priority; empty otherwise.
  std::vector<class_state> classes;
  // When inspecting failed because Redis answered with an error reply (LOADING, BUSY, MASTERDOWN, WRONGTYPE...): its
  // text, the error being errc::error_reply; empty otherwise.
  std::string error_reply;
};

class semaphore {
 public:
  using clock = std::chrono::steady_clock;

  // A semaphore named `name` (the hash tag of its keys: no '{' or '}') on `conn`'s server. `capacity` applies when the
  // semaphore does not exist in Redis yet; an existing one keeps its own (set_capacity changes it). Opens one more
  // connection (with conn's options) for wake-ups. Throws std::invalid_argument naming a bad value.
  semaphore(connection& conn, std::string name, std::int64_t capacity, semaphore_options options = {});
  // The same on a Redis Cluster: every key lives in the slot of {name}; the wake-ups use a cluster client of their
  // own (seeded with c's node options), whose BLMPOP goes to that slot's master.
  semaphore(cluster& c, std::string name, std::int64_t capacity, semaphore_options options = {});
  // Stops the wake-up connection, and ends the asynchronous waits still in progress, as destroying an I/O object ends
  // its operations: their handlers get errc::closed (posted, never inside the destructor), and each request leaves
  // the queue in the background. No member call may overlap the destructor (a blocking wait is ended by its
  // stop_token first). Does not wait for background work (call shutdown() first for that, once no wait is in
  // progress): leases and the work they leave may outlive the semaphore object.
  ~semaphore();
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  // n permits if they are free and nobody waits; never waits (errc::would_block).
  semaphore_result try_acquire(std::int64_t n = 1);
  // Waits in the fleet's FIFO queue until granted or `stop` is requested.
  semaphore_result acquire(std::int64_t n = 1, std::stop_token stop = {});
  // Waits at most until `deadline` (errc::timeout). A deadline already passed does not wait: one call decides, as
  // try_acquire's (admitted now, or errc::timeout where try_acquire says errc::would_block).
  semaphore_result try_acquire_until(clock::time_point deadline, std::int64_t n = 1, std::stop_token stop = {});
  template <class Rep, class Period>
  semaphore_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                                   std::stop_token stop = {}) {
    return try_acquire_until(admit::detail::deadline_after<clock>(clock::now(), timeout), n, stop);
  }

  // Asio: waits as acquire does without blocking a thread. Completion: void(std::error_code, lease) — the lease, or
  // why there is none (as semaphore_result's errors). The handler runs through its associated executor (the
  // connection's by default), never inside this call. Cancellation: terminal, through the handler's slot
  // (errc::cancelled; leaving the queue is sent without waiting, a grant that raced with it is released).
  template <class CompletionToken>
  auto async_acquire(std::int64_t n, CompletionToken&& token) {
    return initiate(n, std::nullopt, std::forward<CompletionToken>(token));
  }
  // The same, failing with errc::timeout at `deadline` (already passed: one call decides, as try_acquire_until's).
  template <class CompletionToken>
  auto async_acquire_until(clock::time_point deadline, std::int64_t n, CompletionToken&& token) {
    return initiate(n, deadline, std::forward<CompletionToken>(token));
  }
  template <class Rep, class Period, class CompletionToken>
  auto async_acquire_for(std::chrono::duration<Rep, Period> timeout, std::int64_t n, CompletionToken&& token) {
    return initiate(n, admit::detail::deadline_after<clock>(clock::now(), timeout),
                    std::forward<CompletionToken>(token));
  }

  // try_acquire without blocking a thread: n permits if they are free and nobody waits, never waiting
  // (errc::would_block). One round trip. Completion: void(std::error_code, lease), as async_acquire's (the failure
  // policy's local lease included). Not cancellable.
  template <class CompletionToken>
  auto async_try_acquire(std::int64_t n, CompletionToken&& token) {
    check_n(n);
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, lease)>(
        [core = core_](auto handler, std::int64_t count) {
          using handler_type = std::decay_t<decltype(handler)>;
          detail::start_try_acquire(core, count,
                                    std::make_shared<detail::acquire_completion_for<handler_type>>(
                                        std::move(handler), detail::executor_of(*core)));
        },
        token, n);
  }

  // Releases the lease whose id is `lease_id` (lease::id(), handed over by lease::detach() — here or in another
  // process), as lease::release() does: released (its permits go to the head waiters), not_held (Redis has no such
  // lease: released already, expired, never granted — or an id that no lease of this semaphore can have: empty, a
  // local lease's), or failed with the call's error (the lease then expires by itself). Blocks; not on the
  // connection's executor thread.
  std::pair<lease::release_status, std::error_code> release(const std::string& lease_id);
  // The same without blocking. Completion: void(std::error_code, lease::release_status), as lease::async_release's
  // (never inside this call; not cancellable; shutdown() waits for it).
  template <class CompletionToken>
  auto async_release(std::string lease_id, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, lease::release_status)>(
        [core = core_](auto handler, std::string id) {
          auto done = detail::posted_completion<std::error_code, lease::release_status>(std::move(handler),
                                                                                        detail::executor_of(*core));
          release_by_id(core, id, [done](lease::release_status status, std::error_code ec) { done(ec, status); });
        },
        token, std::move(lease_id));
  }

  // Changes the capacity for the whole fleet; permits held beyond a lower capacity are returned as they are released.
  std::error_code set_capacity(std::int64_t capacity);
  // The live state (at most `most` holders and waiters listed). Errors: the call's (an admit::errc),
  // errc::error_reply for an error reply (its text in the snapshot's error_reply),
  // errc::not_found when the semaphore does not exist, errc::unexpected_reply for a reply of
  // another shape.
  std::pair<semaphore_snapshot, std::error_code> inspect(std::size_t most = 100);

  // inspect() without blocking a thread. Completion: void(std::error_code, semaphore_snapshot), with inspect()'s
  // errors, through the handler's associated executor (the connection's by default), never inside this call.
  template <class CompletionToken>
  auto async_inspect(std::size_t most, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, semaphore_snapshot)>(
        [core = core_](auto handler, std::size_t m) {
          auto done = detail::posted_completion<std::error_code, semaphore_snapshot>(std::move(handler),
                                                                                     detail::executor_of(*core));
          inspect_then(core, m, [done](semaphore_snapshot s, std::error_code ec) { done(ec, std::move(s)); });
        },
        token, most);
  }

  // Waits until the background work of this semaphore and its leases — releases by leases destroyed on the
  // connection's executor thread, queue-leaves of cancelled async_acquire calls, releases of grants that raced with
  // a cancellation — has been answered by Redis, or until `deadline` (the other form: options().timeout from now).
  // Returns how many of them were not delivered (still unanswered at the deadline, or failed since the last
  // shutdown: such a lease expires by itself within lease_ttl, such a waiter within waiter_ttl) and why: none and
  // no error when all were delivered; errc::timeout when some were still in flight; else the first failure
  // (an admit::errc). Blocks; must not be called on the connection's executor thread. The semaphore stays usable.
  std::pair<std::size_t, std::error_code> shutdown(clock::time_point deadline);
  std::pair<std::size_t, std::error_code> shutdown();
  // The same without blocking and without a deadline (bind one with a cancel-after or a timer if needed).
  // Completion: void(std::error_code, std::size_t undelivered), through the handler's associated executor (the
  // connection's by default), never inside this call.
  template <class CompletionToken>
  auto async_shutdown(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, std::size_t)>(
        [](auto handler, const std::shared_ptr<detail::semaphore_core>& core) {
          auto done =
              detail::posted_completion<std::error_code, std::size_t>(std::move(handler), detail::executor_of(*core));
          when_drained(*core, [done](std::size_t undelivered, std::error_code failure) {
            done(undelivered == 0 ? std::error_code() : failure, undelivered);
          });
        },
        token, core_);
  }

  const std::string& name() const noexcept;
  const semaphore_options& options() const noexcept;

  // Starts counting acquisitions (see "Metrics" above), calling `on_event` (if not empty) once per acquisition.
  // Calling it again starts the counters from zero with the new hook; the previous counters (about 16 KB) stay in
  // memory until the semaphore's leases and work are gone, and an acquisition already under way may still count
  // there. Thread-safe: may be called while acquisitions run (those that complete before it are not counted; one
  // under way when it is first called counts with a wait of 0).
  void enable_metrics(limiter_metrics::event_handler on_event = {});
  // The counters (all 0 before enable_metrics) and this object's gauges. Lock-free, no Redis call.
  [[nodiscard]] limiter_snapshot metrics() const noexcept;
  // The waits of the admissions (empty before enable_metrics), for histogram buckets and other percentiles.
  [[nodiscard]] const wait_histogram& wait_times() const noexcept;
  // Leases of this object found lost (on_lease_lost calls), since it was made; counted whether or not metrics are.
  [[nodiscard]] std::uint64_t leases_lost() const noexcept;

 private:
  static void when_drained(detail::semaphore_core& core, std::function<void(std::size_t, std::error_code)> done);
  template <class CompletionToken>
  auto initiate(std::int64_t n, std::optional<clock::time_point> deadline, CompletionToken&& token,
                std::size_t priority = 0) {
    check_n(n);
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, lease)>(
        [core = core_, priority](auto handler, std::int64_t count, std::optional<clock::time_point> until) {
          using handler_type = std::decay_t<decltype(handler)>;
          auto slot = boost::asio::get_associated_cancellation_slot(handler);
          auto completion = std::make_shared<detail::acquire_completion_for<handler_type>>(std::move(handler),
                                                                                           detail::executor_of(*core));
          auto op = detail::make_async_acquire(core, count, until, std::move(completion), priority);
          detail::cancel_on_terminal(slot, op);
          detail::start(op);
        },
        token, n, deadline);
  }
  static void check_n(std::int64_t n);
  // async_inspect without the handler: `done` runs once, on the thread that read the answer.
  static void inspect_then(const std::shared_ptr<detail::semaphore_core>& core, std::size_t most,
                           std::function<void(semaphore_snapshot, std::error_code)> done);
  // async_release(id) without the handler: `done` runs once, on any thread (inline for an id no lease can have).
  static void release_by_id(const std::shared_ptr<detail::semaphore_core>& core, const std::string& id,
                            std::function<void(lease::release_status, std::error_code)> done);

  friend class admission;
  // An admission's semaphore: `definition` is its script's "capacity/interval/burst" (the semaphore's own is its
  // capacity).
  struct defined_by {
    // A constructor, not an aggregate: built from a pair by std::make_from_tuple (clang 14 has no aggregate
    // initialization from parentheses).
    defined_by(std::string d, std::vector<std::string> k) : definition(std::move(d)), more_keys(std::move(k)) {}
    std::string definition;
    std::vector<std::string> more_keys;  // after the semaphore's five keys (an admission's classes)
  };
  semaphore(connection& conn, std::string name, defined_by d, semaphore_options options);
  semaphore(cluster& c, std::string name, defined_by d, semaphore_options options);
  static defined_by capacity_definition(std::int64_t capacity);

  std::shared_ptr<detail::semaphore_core> core_;
};

// Throws std::invalid_argument naming the bad value when `name` cannot name a semaphore (empty, or containing '{' or
// '}': it becomes the hash tag of its keys); the same check as the constructor's and inspect_semaphore's, for a caller
// that checks its input before connecting.
void check_semaphore_name(const std::string& name);

// inspect() without a semaphore object (admit inspect): the state of semaphore `name` on `conn`'s server(s).
std::pair<semaphore_snapshot, std::error_code> inspect_semaphore(client& conn, const std::string& name,
                                                                 std::size_t most = 100);
// The same by `deadline` (std::nullopt: none) instead of the client's default deadline (errc::timeout past it).
std::pair<semaphore_snapshot, std::error_code> inspect_semaphore_until(
    client& conn, const std::string& name, std::optional<std::chrono::steady_clock::time_point> deadline,
    std::size_t most = 100);

}  // namespace admit::redis
