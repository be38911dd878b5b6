// serve/engine/backend.hpp — where `admit serve` keeps its counters: in this process (in_process_backend) or in Redis
// (redis_backend). The service (service.hpp) matches descriptors to rules and asks its backend to count the hits of
// one request at once; the backend answers each hit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "admit/decision.hpp"
#include "serve/config/configuration.hpp"
#include "serve/engine/rls.hpp"

namespace admit::serve {

// The index of a rule the service made for one request: the descriptor matched no rule of the configuration but the
// caller sent an override of the limit, which envoyproxy/ratelimit then applies alone (a fixed window of the
// override's limit and unit, not in shadow mode). Such a rule lives as long as the request's decision.
inline constexpr std::size_t no_rule_index = static_cast<std::size_t>(-1);

// One descriptor to count: the rule it matched (owned by the configuration the request is decided on, which outlives
// the call; or a rule made for the request, index no_rule_index, see above), the counter's key, the hits (0: check
// without counting, as a descriptor's hits_addend of 0 asks), and the caller's override of the limit if it sent one.
struct hit {
  const rate_limit_rule* rule = nullptr;
  std::string counter_key;
  std::uint32_t n = 1;
  std::optional<limit_override> override_limit;
};

// How a release of a concurrency lease ended.
struct release_result {
  enum class state : std::uint8_t {
    released,  // it was held, and is no longer
    not_held,  // no such lease is held: unknown, already released, or expired
    failed,    // the backend could not be asked (Redis unreachable, no answer in time): whether the lease was held,
               // and whether it still is, is unknown; asking again may tell
  };
  state result = state::not_held;
  std::string error;  // failed: why
};

struct hit_outcome {
  enum class state : std::uint8_t { ok, over_limit, failed };
  state result = state::ok;
  std::uint32_t limit = 0;        // requests_per_unit (or concurrency) decided against
  std::uint32_t remaining = 0;    // what is left after this hit (0 when over the limit)
  std::uint64_t count_after = 0;  // the counter after this hit, for near-limit metrics (fixed_window: hits in window)
  // Until the window ends / the limiter is back to full; of a refused hit of admit's algorithms, until it could pass
  // (refused_reset_after); of a concurrency rule, --lease-ttl while permits are held.
  std::chrono::nanoseconds reset_after{0};
  std::string lease;  // concurrency rules: the lease id to release, when admitted
  std::string error;  // failed: why (a Redis error), for logs and metrics
  // False when the answer came from this process alone — hits prefetched from Redis, or a limiter's leased tokens —
  // without asking the backend's store: it then says nothing of whether the store answers (backend_health).
  bool consulted = true;
};

// duration_until_reset of a hit that gcra, token_bucket or sliding_window refused (`d`, the limiter's decision): the
// time until this hit could pass if nothing else came — with over_limit_hits: count, until the key's debt is repaid —
// rounded up to whole seconds; one `unit` when it never can (more hits than the limiter holds at once), as a fixed
// window's refusal of such a hit says no more than "not in this window".
[[nodiscard]] inline std::chrono::nanoseconds refused_reset_after(const decision& d, std::chrono::seconds unit) {
  // (A wait within a second of the largest duration is "never" too: rounded up, it would not fit in nanoseconds.)
  if (d.retry_after >= std::chrono::nanoseconds::max() - std::chrono::seconds{1}) return unit;
  return std::chrono::ceil<std::chrono::seconds>(d.retry_after);
}

// One request's hits on their way through a backend, and the backend's answers: made by the service, answered by the
// backend. Before decide(): `outcomes` holds one default outcome per hit. The backend sets outcomes[i] to the answer
// to hits[i] and then calls complete() exactly once, inline or later on another thread; it keeps the object (its
// std::shared_ptr) until then, so `hits` and `outcomes` live as long as it needs them. A request usually carries one
// or two descriptors: up to two hits and outcomes are kept inside the object itself, with no allocation of their own.
class pending_decision {
 public:
  using hit_list = boost::container::small_vector<hit, 2>;
  using outcome_list = boost::container::small_vector<hit_outcome, 2>;

  virtual ~pending_decision() = default;
  // The answers are in. Thread safety: called once, by one thread.
  virtual void complete() = 0;

  hit_list hits;
  outcome_list outcomes;
  std::chrono::system_clock::time_point now;  // Unix time: fixed windows are aligned to it, as envoyproxy/ratelimit's
};

class backend {
 public:
  virtual ~backend() = default;
  // Counts `call->hits` (all of one request) at `call->now`, sets their outcomes in order and completes the call
  // (pending_decision above). A decide() that throws may still complete the call later, if it kept it. Thread
  // safety: called concurrently from many threads.
  virtual void decide(std::shared_ptr<pending_decision> call) = 0;
  // Ends a concurrency lease; `done` is called once with how it ended.
  virtual void release(std::string lease, std::function<void(release_result)> done) = 0;
  // A reload installed `next`: state of rules that are unchanged (same counter key, algorithm and limit) carries over;
  // state of rules that are gone may be dropped. Called with no decision of `next` yet made.
  virtual void configure(const configuration& next) = 0;
  // A drain's deadline passed: every decision still waiting for the store completes now, as failed (the failure
  // policy answers it), and so does every later one. A store that never keeps a decision waiting does nothing.
  // Thread safety: may be called from any thread, while decisions are made.
  virtual void abandon() {}
};

// b.decide() with a callback: `done` gets the outcomes, one per hit, in order (tools and tests; the service makes its
// own pending_decision).
void decide(backend& b, std::vector<hit> hits, std::chrono::system_clock::time_point now,
            std::function<void(std::vector<hit_outcome>)> done);

}  // namespace admit::serve
