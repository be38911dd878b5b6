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

struct hit_outcome {
  enum class state : std::uint8_t { ok, over_limit, failed };
  state result = state::ok;
  std::uint32_t limit = 0;        // requests_per_unit (or concurrency) decided against
  std::uint32_t remaining = 0;    // what is left after this hit (0 when over the limit)
  std::uint64_t count_after = 0;  // the counter after this hit, for near-limit metrics (fixed_window: hits in window)
  std::chrono::nanoseconds reset_after{0};  // until the window ends / the limiter is back to full
  std::string lease;                        // concurrency rules: the lease id to release, when admitted
  std::string error;                        // failed: why (a Redis error), for logs and metrics
};

class backend {
 public:
  using completion = std::function<void(std::vector<hit_outcome>)>;
  virtual ~backend() = default;
  // Counts `hits` (all of one request) at `now` (Unix time: fixed windows are aligned to it, as envoyproxy/ratelimit's
  // are) and calls `done` exactly once with one outcome per hit, in order — inline or later on another thread.
  // Thread safety: called concurrently from many threads.
  virtual void decide(std::vector<hit> hits, std::chrono::system_clock::time_point now, completion done) = 0;
  // Ends a concurrency lease. False when no such lease is held (unknown, already released, or expired).
  virtual void release(std::string lease, std::function<void(bool)> done) = 0;
  // A reload installed `next`: state of rules that are unchanged (same counter key, algorithm and limit) carries over;
  // state of rules that are gone may be dropped. Called with no decision of `next` yet made.
  virtual void configure(const configuration& next) = 0;
};

}  // namespace admit::serve
