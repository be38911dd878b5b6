// src/redis/limiter/lease_table.hpp — local token leasing (private to admit_redis; limiter_options::lease): the tokens
// this process took from Redis beyond what a decision asked for, per key, spent locally until they run out or expire.
//
//   lease_table t(10, 100, 100ms, 10'000);       // leases of 10 tokens (the limit is 100), kept 100 ms
//   t.take(1);                                   // 10: a call for 1 token asks the script for up to 10
//   t.add("k", 9, now);  t.try_spend("k", 1, now + 1ms);   // 8 left
//
// Arithmetic. A call for n takes k = max(n, min(lease, max_n)) tokens (never fewer than asked, never more than can
// ever be admitted at once); the script grants between n and k, as many as are available. The surplus (granted − n)
// is added to the key's lease, whose expiry moves to now + ttl (saturated: a ttl too long for the clock never
// expires). A lease that has expired is dropped unspent: its tokens were charged in Redis, so dropping them only
// refuses more, never admits more.
// Times are passed in (steady_clock by the limiter), so the table is deterministic under test.
//
// Thread safety: every member may be called concurrently (one mutex). Under it, a hash lookup; and when add finds the
// table full, one sweep of every key for expired leases (O(max_keys)), which other callers wait for.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/keyed.hpp"

namespace admit::redis::detail {

class lease_table {
 public:
  using clock = std::chrono::steady_clock;

  // lease <= 1 disables leasing (take(n) == n, try_spend never spends). The limiter validates the values
  // (parameters.hpp): lease <= max_n, ttl > 0, max_keys >= 1.
  lease_table(std::int64_t lease, std::int64_t max_n, std::chrono::nanoseconds ttl, std::size_t max_keys) noexcept
      : lease_(lease), max_n_(max_n), ttl_(std::chrono::duration_cast<clock::duration>(ttl)), max_keys_(max_keys) {}

  [[nodiscard]] bool enabled() const noexcept { return lease_ > 1; }

  // How many tokens a call for n asks the script for (ARGV's k): n when leasing is off, n == 0 (a query) or
  // n > max_n (refused anyway); otherwise max(n, min(lease, max_n)).
  [[nodiscard]] std::int64_t take(std::int64_t n) const noexcept;

  // Spends n tokens of key's lease at `now`: the tokens still leased after it, or std::nullopt when the key holds
  // fewer than n (nothing is spent), its lease expired at or before `now` (it is dropped), or n is not in [1, max_n]
  // (a query, or a request the limiter refuses whatever it holds).
  [[nodiscard]] std::optional<std::int64_t> try_spend(std::string_view key, std::int64_t n, clock::time_point now);

  // Adds `surplus` > 0 tokens to key's lease and moves its expiry to now + ttl. With max_keys keys already leased,
  // expired leases are dropped first; if the table is still full the surplus is dropped (charged but unused: it only
  // refuses more) and add returns false.
  bool add(std::string_view key, std::int64_t surplus, clock::time_point now);

  // Keys holding a lease (expired ones included until they are dropped).
  [[nodiscard]] std::size_t size() const;

  // Refusals remembered (with leasing only). Redis refused n on `key`, saying it fits no earlier than `until` (its
  // retry_after): until then, a request of n or more on the key is refused here, without a call — capacity only comes
  // back with time, and other processes only take it, so Redis would refuse it too. The limiter does not remember the
  // refusals it charges (limiter_options::charge_refused): each must reach Redis. At most max_keys keys; a full table
  // drops the ended refusals, then forgets the new one.
  void refused(std::string_view key, std::int64_t n, clock::time_point until, clock::time_point now);
  // When a request of n on `key` at `now` is refused by a remembered refusal: until when.
  [[nodiscard]] std::optional<clock::time_point> refuses(std::string_view key, std::int64_t n, clock::time_point now);

 private:
  struct entry {
    std::int64_t tokens;
    clock::time_point expires;
  };

  const std::int64_t lease_;
  const std::int64_t max_n_;
  const clock::duration ttl_;
  const std::size_t max_keys_;
  mutable admit::detail::mutex mutex_;
  std::unordered_map<std::string, entry, keyed_hash<std::string>, std::equal_to<>> leases_ ADMIT_GUARDED_BY(mutex_);
  struct refusal {
    std::int64_t n;
    clock::time_point until;
  };
  std::unordered_map<std::string, refusal, keyed_hash<std::string>, std::equal_to<>> refusals_ ADMIT_GUARDED_BY(mutex_);
  // No remembered refusal ends before this.
  clock::time_point next_refusal_sweep_ ADMIT_GUARDED_BY(mutex_) = clock::time_point::min();
};

}  // namespace admit::redis::detail
