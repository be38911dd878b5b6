// serve/engine/window_stock.hpp — the fixed-window hits one `admit serve` instance has prefetched from Redis (the rule
// extension `prefetch: N`), per counter. Internal to the Redis backend.
//
//   window_stock<my_hit> stock;
//   auto p = stock.take(key, n, 20, limit, true, window_end_s, now_s, &hit);   // p.served: decided here;
//   // p.waiting: `hit` was moved into the stock, to come back from refilled(); else ask Redis for p.take hits
//   ... Redis counted p.take hits (or fewer) ...
//   for (my_hit& w : stock.refilled(key, extra)) ...;                          // only for a call with p.refill
//
// Guarantees, for each counter (a window's key names its window):
// - What is in stock was counted in Redis when it was taken, within the window's limit: spending it never takes the
//   window over its limit.
// - At most one call refills a counter's stock at a time, and a stock is never refilled while it holds n or more:
//   it holds at most N − 1 hits, so an instance leaves at most N − 1 counted hits unspent per window.
// - While a refill is under way, the counter's other hits (1 <= n < N) wait for it in the stock rather than each
//   going to Redis: refilled() hands every one of them back, to be taken again (served from the new stock, or asking
//   Redis) or failed with the refill's error. Nothing else drops them: an entry with waiting hits outlives its
//   window's end and clear().
// - A stock belongs to its window: it is never spent after the window's end (the counter's key changes with the
//   window; an entry past its end is dropped).
// - A refusal here is Redis's own: the counter's count only grows within its window, so once a reply showed it at the
//   limit (learned()), every hit of n >= 1 is over it, and once above the limit, a check of 0 too. Where refused hits
//   are counted (over_limit_hits: count), hits are refused here only once a reply showed the count above the limit: a
//   refusal not sent to Redis is then not missing from a count that other instances' checks read.
//
// Thread safety: every member may be called concurrently (one mutex; O(1) but for the sweep of ended windows when
// the table is full, at most once per window end — and at every new key while an ended window's hits wait for its
// refill, which ends within the refill's deadline).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::serve::detail {

// Waiter: what a hit that waits for a refill is kept as (movable).
template <class Waiter>
class window_stock {
 public:
  // At most `max_keys` counters hold a stock at once; beyond it, hits of other counters ask Redis without prefetching.
  explicit window_stock(std::size_t max_keys = 100'000) : max_keys_(max_keys) {}

  struct plan {
    bool served = false;     // decided from the stock: `left` hits remain in it
    bool waiting = false;    // waits for the refill under way: the waiter was moved into the stock
    bool refused = false;    // over the limit, as a reply showed: the counter held `known` hits
    std::uint32_t take = 0;  // otherwise: the hits to ask Redis for (>= n; > n when this call refills the stock)
    bool refill = false;     // this call refills the stock: refilled() must follow, whatever the call's outcome
    std::uint32_t left = 0;
    std::uint64_t known = 0;
  };

  // A hit of n on `key` (prefetch N >= 2, the window's limit; `counts_refused`: over_limit_hits count) in a window that
  // ends at `window_end_s` (Unix seconds), at `now_s`. `waiter`: the hit, moved into the stock when the plan is
  // `waiting` (null: never wait, ask Redis instead).
  plan take(const std::string& key, std::uint32_t n, std::uint32_t prefetch, std::uint32_t limit, bool counts_refused,
            std::int64_t window_end_s, std::int64_t now_s, Waiter* waiter = nullptr) {
    const admit::detail::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.window_end_s <= now_s && it->second.waiters.empty()) {
      entries_.erase(it);
      it = entries_.end();
    }
    const bool live = it != entries_.end() && it->second.window_end_s > now_s;
    if (live && it->second.hits > 0 && it->second.hits >= n) {
      it->second.hits -= n;
      return {true, false, false, 0, false, it->second.hits, it->second.known};
    }
    if (live && (n > 0 && !counts_refused ? it->second.known >= limit : it->second.known > limit)) {
      return {false, false, true, 0, false, 0, it->second.known};
    }
    // A check (n = 0) never prefetches; a hit as large as the prefetch takes only itself; nor does a hit of a window
    // that has ended.
    if (n == 0 || n >= prefetch || window_end_s <= now_s) return {false, false, false, n, false, 0, 0};
    if (it == entries_.end()) {
      if (entries_.size() >= max_keys_) sweep(now_s);
      if (entries_.size() >= max_keys_) return {false, false, false, n, false, 0, 0};
      it = entries_.emplace(key, entry{}).first;
      it->second.window_end_s = window_end_s;
      next_sweep_s_ = std::min(next_sweep_s_, window_end_s);
    }
    if (it->second.fetching) {  // another call refills it: wait for that one
      if (waiter == nullptr) return {false, false, false, n, false, 0, 0};
      it->second.waiters.push_back(std::move(*waiter));
      return {false, true, false, 0, false, 0, 0};
    }
    it->second.fetching = true;
    return {false, false, false, prefetch, true, 0, 0};
  }

  // The refilling call's outcome: `extra` hits counted in Redis beyond the call's own n (0 when Redis had none to
  // spare, or the call failed). Returns the hits that waited for it, to be taken again or failed.
  // (An entry of an ended window keeps them until the next take() or sweep drops it: none is spent after its end.)
  [[nodiscard]] std::vector<Waiter> refilled(const std::string& key, std::uint32_t extra) {
    const admit::detail::lock_guard lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return {};
    it->second.fetching = false;
    if (!std::exchange(it->second.cleared, false)) it->second.hits += extra;
    return std::exchange(it->second.waiters, {});
  }

  // A reply showed the counter holding at least `count` hits (in the window that ends at `window_end_s`).
  void learned(const std::string& key, std::uint64_t count, std::int64_t window_end_s) {
    const admit::detail::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= max_keys_) return;
      it = entries_.emplace(key, entry{}).first;
      it->second.window_end_s = window_end_s;
      next_sweep_s_ = std::min(next_sweep_s_, window_end_s);
    }
    it->second.known = std::max(it->second.known, count);
  }

  // Forgets every stock and count (a reload: a rule's limit or prefetch may have changed). A refill under way stays
  // the counter's one refill, and the hits that wait for it stay, for refilled() to hand back; that refill's extra
  // hits are not kept.
  void clear() {
    const admit::detail::lock_guard lock(mutex_);
    std::erase_if(entries_, [](const auto& e) { return !e.second.fetching; });
    for (auto& [key, e] : entries_) {
      e.hits = 0;
      e.known = 0;
      e.cleared = true;
    }
    next_sweep_s_ = std::numeric_limits<std::int64_t>::min();
  }

  [[nodiscard]] std::size_t size() const {
    const admit::detail::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct entry {
    std::uint32_t hits = 0;
    bool fetching = false;
    bool cleared = false;  // cleared while fetching: the refill's extra hits are not kept
    std::int64_t window_end_s = 0;
    std::uint64_t known = 0;      // the counter held at least this many hits, as a reply showed
    std::vector<Waiter> waiters;  // hits waiting for the refill under way
  };

  // Drops the entries of ended windows (a refill of one finds it gone and drops its hits), at most once until the
  // earliest end of those that remain: a full table of live windows is not walked again for every new key.
  void sweep(std::int64_t now_s) ADMIT_REQUIRES(mutex_) {
    if (now_s < next_sweep_s_) return;
    std::erase_if(entries_,
                  [now_s](const auto& e) { return e.second.window_end_s <= now_s && e.second.waiters.empty(); });
    next_sweep_s_ = std::numeric_limits<std::int64_t>::max();
    for (const auto& e : entries_) next_sweep_s_ = std::min(next_sweep_s_, e.second.window_end_s);
  }

  const std::size_t max_keys_;
  mutable admit::detail::mutex mutex_;
  std::int64_t next_sweep_s_ ADMIT_GUARDED_BY(mutex_) = std::numeric_limits<std::int64_t>::min();
  std::unordered_map<std::string, entry> entries_ ADMIT_GUARDED_BY(mutex_);
};

}  // namespace admit::serve::detail
