// serve/engine/lease_table.hpp — the leases of `admit serve`'s in-process concurrency rules: permits of the library's
// admit::keyed_concurrency_limiter (which counts them, one limiter per rule) held under a random id until the caller
// gives the id back (release) or the lease expires.
//
//   lease_table leases{{.ttl = std::chrono::seconds(60)}};
//   if (auto p = limiter->try_acquire("domain\x1fuser_alice", 1)) {     // limiter: a std::shared_ptr
//     std::optional<std::string> id = leases.hold(rule_id, limiter, std::move(*p), now_ns);   // 32 hex digits
//   }
//   leases.release(*id, later_ns);                                                     // the permit goes back
//
// A caller that never releases (it crashed, its connection went away) does not hold the permits forever: a lease
// expires `ttl` after it was granted. Expired leases are dropped — their permits released — by the next call that
// looks at the table (expire(), hold(), release()): no timer, no thread; a caller that counts on the limiter calls
// expire() first. Times are the caller's `now` (Unix time, nanoseconds): a backwards step of the system clock only
// delays expiry.
//
// Lease ids are 128 random bits (admit::redis::detail::random_id: the kernel's random source, safe across fork), in
// hex: a caller cannot guess another's lease to release it. The table holds at most max_leases leases.
//
// Thread safety: every member may be called concurrently (one mutex: each call is O(log leases) plus the leases it
// expires). Permits are released after the mutex is let go, so a limiter's work never runs under it; each lease keeps
// its limiter alive (the shared_ptr given to hold) until its permit is released, so a rule removed by a reload while
// one of its permits is being released cannot take the limiter from under it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/keyed_concurrency_limiter.hpp"

namespace admit::serve {

class lease_table {
 public:
  using permit = admit::keyed_concurrency_limiter<>::permit;
  struct options {
    std::chrono::nanoseconds ttl = std::chrono::seconds(60);  // > 0
    std::size_t max_leases = 1'000'000;                       // >= 1
  };

  // Throws std::invalid_argument naming the value when ttl <= 0 or max_leases == 0.
  explicit lease_table(options opts);
  lease_table(const lease_table&) = delete;
  lease_table& operator=(const lease_table&) = delete;

  // Holds `p`, a permit of `limiter`, under a new id, for `owner` (an id the caller gives each rule), until released
  // or expired (ttl after now_ns). std::nullopt when the table already holds max_leases leases: `p` is released then.
  [[nodiscard]] std::optional<std::string> hold(std::uint64_t owner,
                                                std::shared_ptr<admit::keyed_concurrency_limiter<>> limiter, permit p,
                                                std::int64_t now_ns);
  // Releases the lease's permits. False when no such lease is held (unknown, released already, or expired by now_ns).
  bool release(std::string_view lease, std::int64_t now_ns);
  // Releases the permits of the leases expired by now_ns.
  void expire(std::int64_t now_ns);
  // Releases every lease of `owner` (its rule was removed by a reload).
  void drop_owner(std::uint64_t owner);
  // Leases held (expired ones not yet dropped included).
  [[nodiscard]] std::size_t size() const;

  std::chrono::nanoseconds ttl() const noexcept { return opts_.ttl; }

 private:
  using expiry_map = std::multimap<std::int64_t, std::string>;
  // A permit and its limiter: the limiter first, so that it is let go after the permit is released.
  struct held_permit {
    std::shared_ptr<admit::keyed_concurrency_limiter<>> limiter;
    permit p;
  };
  struct lease {
    std::uint64_t owner = 0;
    held_permit held;
    expiry_map::iterator expiry;
  };
  using lease_map = std::unordered_map<std::string, lease>;
  // Takes the lease out of the maps; its permit, to release once the mutex is let go.
  held_permit take(lease_map::iterator it) ADMIT_REQUIRES(mutex_);
  void expire_locked(std::int64_t now_ns, std::vector<held_permit>& out) ADMIT_REQUIRES(mutex_);

  const options opts_;
  mutable admit::detail::mutex mutex_;
  lease_map leases_ ADMIT_GUARDED_BY(mutex_);   // by id
  expiry_map expiry_ ADMIT_GUARDED_BY(mutex_);  // lease ids by expiry time
};

}  // namespace admit::serve
