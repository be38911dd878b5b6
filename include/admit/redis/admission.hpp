// admit/redis/admission.hpp — admit::admission across processes and hosts: a rate (token bucket), a concurrency limit
// and priority classes decided together, in one queue per class, on Redis's clock. A request of class c is admitted
// when, at the head of its class's queue, its n tokens AND its n permits are both there and the share rule lets it
// take them; it then holds n permits in a lease (admit::redis::lease, as admit::redis::semaphore's) until released,
// and the tokens are spent for good.
//
//   admit::redis::connection conn(io.get_executor(), admit::redis::parse_url("redis://db-host:6379"));
//   admit::redis::admission db(conn, "reports-db", {.rate = admit::rate::per_second(20), .burst = 5,
//                                                   .max_in_flight = 8});
//   if (auto l = db.try_acquire_for(2s, /*priority=*/0)) run_report();   // l.value() is the lease
//
// Reserve-then-commit: the tokens and the permits are checked in one script call and taken together, so a waiting
// request holds neither — it does not keep a permit idle while the rate makes it wait, nor spend tokens it then cannot
// use. Within a class, waiters are served strictly in arrival order across every process (a large head holds back the
// smaller requests behind it). Between classes, the share rule of the local admit::admission (admission.hpp, and
// detail/admission_rule.hpp which states it in full) decides, with the same numbers: each class is guaranteed its
// share of max_in_flight (apportioned by largest remainder) and of the rate (an assured token bucket of its own); a
// class within its guarantee goes before a borrower that arrived earlier, and what a class does not use the others
// borrow, in arrival order. One held back by permits is woken by a push when a release frees them; one held back by the
// rate asks again at its tokens' time (after those of the waiters ahead of it), and the call that finds them there
// is granted. A timed request whose tokens, after those of the waiters ahead of it, the rate cannot give by its
// deadline fails at once with errc::timeout, and takes nothing.
//
// The limit's definition — rate, burst, max_in_flight and the classes' shares — is stored in Redis with it. An
// acquisition by a process whose definition differs from the stored one fails with errc::definition_conflict (inspect()
// shows the stored one; describe(limits) names a definition for messages); set_limits changes it for every process.
// Releases, renewals and waits already queued are never refused.
//
// Everything else — leases, fencing tokens in grant order, renewal, lease loss, the failure policy with its local cap,
// the circuit breaker, background work and shutdown(), metrics — is admit::redis::semaphore's: an admission without a
// rate is a semaphore of capacity max_in_flight, and a semaphore of the same name sees (and honours) the admission's
// rate. The keys are the semaphore's: "{name}:meta" and the others of redis/semaphore.hpp.
//
// Not supported across hosts: the zero rate and the on_admitted hook (the constructor refuses them with
// std::invalid_argument). Time is Redis's, in microseconds: a token costs the rate's interval rounded up to a whole
// microsecond (rates above 1,000,000/s act as 1,000,000/s), and a class's assured bucket its own interval so rounded.
// With classes the keys are also "{name}:waiters" and "{name}:waiting:<class>" (class 0 uses the semaphore's queue).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <utility>

#include "admit/admission_options.hpp"
#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/redis/semaphore.hpp"

namespace admit::redis {

class admission {
 public:
  using clock = std::chrono::steady_clock;
  using duration = clock::duration;
  using time_point = clock::time_point;
  // The capacity inspect() shows for max_in_flight 0 (no concurrency limit), and the most a request may ask for then
  // (where the local admission takes up to 2^59): n above it is errc::exceeds_capacity.
  static constexpr std::int64_t unlimited_capacity = std::int64_t{1} << 50;

  // The admission `name` (the hash tag of its keys: no '{' or '}') on `conn`'s server, or on a Redis Cluster. Throws
  // std::invalid_argument naming the bad value: the name, a burst < 1 with a finite rate, max_in_flight outside
  // [0, 2^50], a share outside [0, 1] or shares summing above 1, what is not supported (above), or the semaphore
  // options' (redis/semaphore.hpp). limits.max_waiters,
  // when set, bounds the queue (the smaller of it and options.max_waiters). Does not call Redis.
  admission(connection& conn, std::string name, admission_options limits, semaphore_options options = {});
  admission(cluster& c, std::string name, admission_options limits, semaphore_options options = {});
  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;

  // Never waits: admitted now, or errc::would_block (someone waits first, or the tokens or permits are not there).
  // `priority`: the class, an index into limits.classes (0 without classes). Throws std::invalid_argument for n < 1
  // or a priority out of range. Results as redis::semaphore's, plus
  // errc::definition_conflict and errc::exceeds_capacity (n above max_in_flight, or above the burst; with
  // max_in_flight 0, above unlimited_capacity).
  semaphore_result try_acquire(std::size_t priority, std::int64_t n = 1);
  // Waits in the queue until admitted, `deadline` (errc::timeout; at once when the rate cannot make it) or `stop`. A
  // deadline already passed does not wait: one call decides, as try_acquire's (admitted now, or errc::timeout).
  semaphore_result try_acquire_until(time_point deadline, std::size_t priority, std::int64_t n = 1,
                                     std::stop_token stop = {});
  template <class Rep, class Period>
  semaphore_result try_acquire_for(std::chrono::duration<Rep, Period> timeout, std::size_t priority, std::int64_t n = 1,
                                   std::stop_token stop = {}) {
    return try_acquire_until(admit::detail::deadline_after<clock>(clock::now(), timeout), priority, n, std::move(stop));
  }
  // Waits until admitted or `stop` is requested (errc::cancelled).
  semaphore_result acquire(std::stop_token stop, std::size_t priority, std::int64_t n = 1);

  // Asio: as redis::semaphore's async_acquire forms. Completion: void(std::error_code, lease).
  template <class CompletionToken>
  auto async_acquire(std::size_t priority, std::int64_t n, CompletionToken&& token) {
    check(priority, n);
    return semaphore_.initiate(n, std::nullopt, std::forward<CompletionToken>(token), priority);
  }
  template <class CompletionToken>
  auto async_acquire_until(time_point deadline, std::size_t priority, std::int64_t n, CompletionToken&& token) {
    check(priority, n);
    return semaphore_.initiate(n, deadline, std::forward<CompletionToken>(token), priority);
  }
  template <class Rep, class Period, class CompletionToken>
  auto async_acquire_for(std::chrono::duration<Rep, Period> timeout, std::size_t priority, std::int64_t n,
                         CompletionToken&& token) {
    return async_acquire_until(admit::detail::deadline_after<clock>(clock::now(), timeout), priority, n,
                               std::forward<CompletionToken>(token));
  }

  // The live state as Redis has it: holders, queue, and the rate's token_interval, burst and tokens (errors as
  // redis::semaphore::inspect's).
  std::pair<semaphore_snapshot, std::error_code> inspect(std::size_t most = 100);
  // Stores `limits` as the definition for every process (validated as the constructor's; throws the same). Permits
  // held beyond a lower max_in_flight are returned as they are released; the bucket keeps the tokens it holds, up to
  // the new burst (a rate where there was none starts full); the shares may change, and the number of classes only
  // while nobody holds a lease or waits (std::invalid_argument when `limits` has another number than this object's;
  // errc::definition_conflict when the stored definition has another and a lease or a waiter keeps its class's
  // number). limits.max_waiters is this object's and stays as it was made. While the call is under way, this
  // object's acquisitions still ask with the old definition (and may get errc::definition_conflict once Redis has
  // the new one); a call that fails leaves this object's definition as it was, whether or not Redis applied it.
  std::error_code set_limits(admission_options limits);
  // The same, its call given up at `deadline` or at the semaphore's timeout, whichever comes first (errc::timeout:
  // Redis may or may not have applied it).
  std::error_code set_limits_until(admission_options limits, time_point deadline);
  // The definition this object asks with.
  [[nodiscard]] admission_options limits() const;

  // As redis::semaphore's.
  std::pair<std::size_t, std::error_code> shutdown(clock::time_point deadline) { return semaphore_.shutdown(deadline); }
  std::pair<std::size_t, std::error_code> shutdown() { return semaphore_.shutdown(); }
  void enable_metrics(limiter_metrics::event_handler on_event = {}) { semaphore_.enable_metrics(std::move(on_event)); }
  [[nodiscard]] limiter_snapshot metrics() const noexcept { return semaphore_.metrics(); }
  [[nodiscard]] std::uint64_t leases_lost() const noexcept { return semaphore_.leases_lost(); }
  [[nodiscard]] const std::string& name() const noexcept { return semaphore_.name(); }

 private:
  void check(std::size_t priority, std::int64_t n) const;

  semaphore semaphore_;
  const std::size_t classes_;  // priorities are 0 to classes_ - 1 (set_limits keeps their number)
  mutable admit::detail::mutex mutex_;
  admission_options limits_ ADMIT_GUARDED_BY(mutex_);
};

// A definition in words, for messages: "rate 20/s, burst 5, max_in_flight 8" ("no rate", "no concurrency limit"; with
// classes ", classes interactive 0.75, batch 0.25").
std::string describe(const admission_options& limits);
// The definition stored in Redis, as inspect() returns it, in the same words.
std::string describe(const semaphore_snapshot& stored);

}  // namespace admit::redis
