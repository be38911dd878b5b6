// admit/keyed.hpp — one rate limiter per key (per client IP, per API key), created on first use, with a hard cap on
// the number of keys and idle keys evicted as the limiter is used: no background thread, no unbounded growth.
//
//   admit::keyed<admit::gcra> per_client{admit::rate::per_second(10), 20, {.max_keys = 100'000}};
//   if (admit::decision d = per_client.decide(client_ip); !d) reply_429(d.retry_after, d.limit, d.remaining);
//
// (admit::keyed<admit::token_bucket> likewise: one x/time/rate token bucket per key.)
//
// Storage. Every key shares one configuration, held once here; each key stores only its algorithm's state (GCRA: the
// int64 TAT − τ; token bucket: its TAT and the latest `now` of an admission, 16 bytes), next to the key, in an
// open-addressing table (detail/keyed_table.hpp). The keys are split over a power-of-two number of shards by the top
// bits of their (mixed) hash; each shard is a table under its own mutex, alone on its cache line, so threads on keys of
// different shards never touch the same memory. A lock rather than a lock-free table: a decision holds it for one probe
// and a few integer operations (tens of ns), insertion and eviction move keys (backward-shift deletion, growth), which
// a lock-free table would have to do with per-slot versioning or hazard pointers; and a hot key contends on its cache
// line whether it is guarded by a lock or by a CAS.
//
// Eviction, exact. A key's state is "full" from some time on (policy full_at: for GCRA, TAT; for the token
// bucket, TAT + τ); from then on it carries no information — a new, full limiter decides the same — and the store may
// drop it. It never drops a key earlier unless the cap forces it under keyed_when_full::evict_busy. Each shard
// remembers a floor: the latest time from which a key it dropped was full; a key created in the shard starts "full
// since the floor" (policy full_since), which is a new, full limiter for every now at or after the floor — so with
// times that do not go back, decisions are identical with and without eviction — and for an earlier now (a stale time
// from another thread, a clock going backwards) is never fuller than the dropped key was: eviction never makes the
// store admit more than without it.
//
// Eviction, amortized. Each insertion of a new key first examines `sweep` slots under the shard's clock hand and
// drops the idle keys there; when the shard is at its cap, the insertion scans the whole shard for idle keys — but only
// once time has reached the earliest moment one can have become idle (a lower bound each shard keeps), so a flood of
// new keys against a shard of busy keys is refused in O(1). Nothing runs between calls.
//
// The cap. `max_keys` is split evenly over the shards (each shard holds at most its share, so size() <= max_keys
// always); a shard can be full while another has room. When a new key must be stored in a full shard with no idle key:
// - keyed_when_full::reject_new (default): the request is refused, with limit == 0 (is_key_limit_refusal(d)), and a
//   retry_after that is the earliest time a key of that shard can become idle (a lower bound, >= 1 ns). Keys already
//   stored keep their state and their service.
// - keyed_when_full::evict_busy: the busy key nearest to being full, among `sweep` (at least 16) stored keys from the
//   hand on, is dropped (a new key is refused only when every sampled key can never be full: the zero rate); the
//   shard's floor rises to the time it would have been full, so new keys of that shard start no fuller than it was
//   until then. No key is ever admitted more than rate·w + burst in a window w; the price is that under key pressure
//   new keys may start with less than a full burst.
//
// Metrics (detail/rate_limiter_base.hpp): enable_metrics() keeps one admit::limiter_metrics for the whole keyed
// limiter, not one per key: every decide / try_acquire counts one outcome (admitted or unavailable; a new key refused
// for the cap is unavailable too). The waiter bound (set_max_waiters) applies to admit::asio::async_wait on a key.
//
// Thread safety: every member may be called concurrently. Decisions on keys of different shards do not contend.
#pragma once

#include <algorithm>
#include <cassert>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "admit/clock.hpp"
#include "admit/decision.hpp"
#include "admit/detail/check_n.hpp"
#include "admit/detail/keyed_table.hpp"
#include "admit/detail/rate_limiter_base.hpp"
#include "admit/detail/saturating.hpp"
#include "admit/keyed_policy.hpp"
#include "admit/rate.hpp"

namespace admit {

// What a keyed limiter does with a new key when the key's shard is at its cap and holds no idle key.
enum class keyed_when_full {
  reject_new,  // refuse the new key's request (is_key_limit_refusal); stored keys keep their state
  evict_busy,  // drop the stored key nearest to full; new keys of the shard then start no fuller than it was
};

struct keyed_options {
  // Hard cap on the number of keys stored (>= 1), split evenly over the shards.
  std::size_t max_keys = 1'000'000;
  keyed_when_full when_full = keyed_when_full::reject_new;
  // Number of shards (>= 1): rounded up to a power of two, and reduced so that each shard may hold at least 16 keys.
  std::size_t shards = 64;
  // Slots examined for idle keys at each insertion of a new key (0: evict only when a shard is full).
  std::size_t sweep = 4;
};

// Counters since construction, summed over shards.
struct keyed_stats {
  std::uint64_t keys = 0;          // stored now (size())
  std::uint64_t inserted = 0;      // new keys stored
  std::uint64_t evicted_idle = 0;  // dropped because full (lossless)
  std::uint64_t evicted_busy = 0;  // dropped by keyed_when_full::evict_busy (conservative)
  std::uint64_t refused_keys = 0;  // requests of new keys refused for the cap (keyed_when_full::reject_new)
  std::uint64_t full_scans = 0;    // whole-shard scans for idle keys
};

// True for the refusal of a new key because its shard is full: `limit` is zero (a limiter's own decisions carry its
// limit, >= 1), remaining is zero, retry_after is when a stored key can first become idle, reset_after is zero.
[[nodiscard]] constexpr bool is_key_limit_refusal(const decision& d) noexcept { return !d.admitted && d.limit == 0; }

// The default hash: std::hash, made transparent for std::string keys so that lookups by std::string_view or
// const char* need not build a std::string. (keyed mixes whatever it returns, so identity hashes are fine.)
template <class Key>
struct keyed_hash : std::hash<Key> {};
template <>
struct keyed_hash<std::string> {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// One `Limiter` per key. `Limiter` is a limiter with a keyed policy (admit::basic_gcra<Clock> and
// admit::basic_token_bucket<Clock>, so keyed<gcra>, keyed<token_bucket>, keyed<basic_gcra<manual_clock>>) or a keyed
// policy itself (admit/keyed_policy.hpp: write one for an algorithm of your own); each key decides exactly as a
// standalone Limiter's decide_at would. Lookups accept any type that Hash and Eq accept when both are transparent
// (std::string_view for std::string keys, by default).
template <class Limiter, class Key = std::string, class Hash = keyed_hash<Key>, class Eq = std::equal_to<>>
class keyed : public detail::rate_limiter_base {
 public:
  using policy_type = typename keyed_policy_for<Limiter>::type;
  static_assert(keyed_policy<policy_type>, "admit::keyed: Limiter has no keyed policy");
  using clock_type = typename policy_type::clock_type;
  using time_point = typename clock_type::time_point;
  using config_type = typename policy_type::config_type;
  using state_type = typename policy_type::state_type;
  using key_type = Key;

  // Keys limited by `cfg`. Throws std::invalid_argument, naming the value, when max_keys or shards is zero, or a
  // shard's share of max_keys exceeds 2^30.
  explicit keyed(const config_type& cfg, const keyed_options& opts = {}, const Hash& hash = {}, const Eq& eq = {})
      : cfg_(cfg), opts_(opts), hash_(hash), eq_(eq) {
    if (opts.max_keys < 1) throw std::invalid_argument("admit::keyed: max_keys must be at least 1, got 0");
    if (opts.shards < 1) throw std::invalid_argument("admit::keyed: shards must be at least 1, got 0");
    std::size_t n = 1;
    while (n < opts.shards && n < (std::size_t{1} << 16)) n *= 2;
    while (n > 1 && opts.max_keys / n < 16) n /= 2;
    while ((std::size_t{1} << bits_) < n) ++bits_;
    shard_count_ = n;
    if (opts.max_keys / n >= (std::size_t{1} << 30)) {
      throw std::invalid_argument("admit::keyed: max_keys " + std::to_string(opts.max_keys) + " over " +
                                  std::to_string(n) + " shards exceeds 2^30 keys per shard");
    }
    shards_ = std::make_unique<shard[]>(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t share = opts.max_keys / n + (i < opts.max_keys % n ? 1 : 0);
      shards_[i].max_keys = share;
      shards_[i].table.set_capacity_limit(share + share / 3 + 2);  // room for `share` keys at load 3/4
    }
  }

  // Keys each limited as `Limiter{r, burst, policy}` would be (same exceptions).
  keyed(rate r, std::int64_t burst, const keyed_options& opts = {}) requires requires(rate rr, std::int64_t b) {
    policy_type::make_config(rr, b);
  } : keyed(policy_type::make_config(r, burst), opts) {
  }
  keyed(rate r, std::int64_t burst, oversize_policy policy, const keyed_options& opts = {}) requires
      requires(rate rr, std::int64_t b, oversize_policy p) {
    policy_type::make_config(rr, b, p);
  } : keyed(policy_type::make_config(r, burst, policy), opts) {
  }

  keyed(const keyed&) = delete;
  keyed& operator=(const keyed&) = delete;

  // The decision of `key`'s limiter for n at `now` (as Limiter::decide_at), creating the key's limiter if the request
  // changes it (a refused request, n == 0 or an infinite rate store nothing). When the key is new and its shard is
  // full with no idle key, see keyed_when_full: under reject_new the answer is is_key_limit_refusal(d).
  // Locks the key's shard for O(1) expected; an insertion also sweeps `sweep` slots, and at the cap may scan the shard
  // (see the header comment). Throws std::invalid_argument for n < 0 (nothing changed). May throw std::bad_alloc (or
  // what Key's constructor throws) when storing a new key; nothing is then changed. A stale `now` never admits more
  // than the latest one would.
  template <class K>
  requires(std::same_as<K, Key> || (requires {
             typename Hash::is_transparent;
             typename Eq::is_transparent;
           } && std::is_constructible_v<Key, const K&>)) [[nodiscard]] decision
      decide_at(const K& key, time_point now, std::int64_t n = 1) {
    const decision d = decide_quiet_at(key, now, n);
    record_try(d.admitted, n);
    return d;
  }
  template <class K>
  [[nodiscard]] decision decide(const K& key, std::int64_t n = 1) {
    return decide_at(key, clock_type::now(), n);
  }

  // decide_at(key, now, n).admitted.
  template <class K>
  [[nodiscard]] bool try_acquire_at(const K& key, time_point now, std::int64_t n = 1) {
    return decide_at(key, now, n).admitted;
  }
  template <class K>
  [[nodiscard]] bool try_acquire(const K& key, std::int64_t n = 1) {
    return decide_at(key, clock_type::now(), n).admitted;
  }

  // Drops every key that is idle (full) at `now`, in every shard (what insertions do a few slots at a time). Returns
  // how many. O(capacity), locking one shard at a time.
  std::size_t evict_idle_at(time_point now) {
    const std::int64_t t = to_ns<clock_type>(now);
    std::size_t evicted = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      evicted += full_scan(shards_[i], t);
    }
    return evicted;
  }
  std::size_t evict_idle() { return evict_idle_at(clock_type::now()); }

  // Whether `key` has a stored state (it has been admitted something and not been evicted).
  template <class K>
  [[nodiscard]] bool contains(const K& key) const {
    const std::uint64_t h = hash_of(key);
    shard& sh = shard_of(h);
    std::lock_guard lock(sh.mutex);
    return sh.table.find(key, h, eq_) != table_type::npos;
  }

  // Keys stored now (<= max_keys()). Locks each shard in turn: a moving total under concurrent use.
  [[nodiscard]] std::size_t size() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      n += shards_[i].table.size();
    }
    return n;
  }
  [[nodiscard]] keyed_stats stats() const {
    keyed_stats s;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      const keyed_stats& x = shards_[i].stats;
      s.keys += shards_[i].table.size();
      s.inserted += x.inserted;
      s.evicted_idle += x.evicted_idle;
      s.evicted_busy += x.evicted_busy;
      s.refused_keys += x.refused_keys;
      s.full_scans += x.full_scans;
    }
    return s;
  }
  [[nodiscard]] std::size_t max_keys() const noexcept { return opts_.max_keys; }
  [[nodiscard]] std::size_t shard_count() const noexcept { return shard_count_; }
  [[nodiscard]] const keyed_options& options() const noexcept { return opts_; }
  [[nodiscard]] const config_type& config() const noexcept { return cfg_; }

 private:
  // decide_at without the metrics, for an integration that records the outcome of its own wait once
  // (admit::asio::async_wait on a key, through
  // detail::limiter_access).
  friend struct detail::limiter_access;

  template <class K>
  requires(std::same_as<K, Key> || (requires {
             typename Hash::is_transparent;
             typename Eq::is_transparent;
           } && std::is_constructible_v<Key, const K&>)) [[nodiscard]] decision
      decide_quiet_at(const K& key, time_point now, std::int64_t n = 1) {
    detail::check_n("admit::keyed", n);
    const std::int64_t t = to_ns<clock_type>(now);
    const std::uint64_t h = hash_of(key);
    shard& sh = shard_of(h);
    std::lock_guard lock(sh.mutex);
    const std::size_t i = sh.table.find(key, h, eq_);
    if (i != table_type::npos) return policy_type::decide(cfg_, sh.table.at(i).state, t, n);

    state_type s = policy_type::full_since(cfg_, sh.floor);
    decision d = decide_new(s, t, n);
    if (!d.admitted || s == policy_type::full_since(cfg_, sh.floor)) return d;  // nothing to remember
    const std::int64_t floor = sh.floor;
    if (!make_room(sh, t)) return refuse(sh, t);
    if (sh.floor != floor) {  // an eviction raised the floor: the new key starts from there
      s = policy_type::full_since(cfg_, sh.floor);
      d = decide_new(s, t, n);
      if (!d.admitted || s == policy_type::full_since(cfg_, sh.floor)) return d;
    }
    sh.table.insert(key, h, s, rehash{this});
    sh.next_idle_at = std::min(sh.next_idle_at, policy_type::full_at(cfg_, s));
    ++sh.stats.inserted;
    return d;
  }

  using table_type = detail::keyed_table<Key, state_type>;

  struct alignas(64) shard {
    mutable std::mutex mutex;
    table_type table;
    std::size_t max_keys = 0;
    std::size_t hand = 0;                        // the clock hand of the amortized sweep
    std::int64_t floor = detail::ns_min;         // new keys start full_since(floor)
    std::int64_t next_idle_at = detail::ns_max;  // no stored key is idle before this (a lower bound)
    keyed_stats stats;
  };

  struct rehash {
    const keyed* self;
    std::uint64_t operator()(const Key& k) const noexcept { return self->hash_of(k); }
  };

  template <class K>
  std::uint64_t hash_of(const K& key) const noexcept {
    return detail::mix_hash(static_cast<std::uint64_t>(hash_(key)));
  }
  shard& shard_of(std::uint64_t h) const noexcept { return shards_[bits_ == 0 ? 0 : h >> (64 - bits_)]; }

  decision decide_new(state_type& s, std::int64_t t, std::int64_t n) const noexcept {
    return policy_type::decide(cfg_, s, t, n);
  }

  // Drops the key in slot i, whose state is full from `full_at` on; raises the floor to it.
  void drop(shard& sh, std::size_t i, std::int64_t full_at, bool busy) noexcept {
    sh.floor = std::max(sh.floor, full_at);
    sh.table.erase_at(i, rehash{this});
    ++(busy ? sh.stats.evicted_busy : sh.stats.evicted_idle);
  }

  // Examines up to `count` slots under the hand, dropping the keys idle at t.
  void sweep(shard& sh, std::int64_t t, std::size_t count) noexcept {
    const std::size_t cap = sh.table.capacity();
    if (cap == 0) return;
    for (std::size_t k = 0; k < count; ++k) {
      if (sh.hand >= cap) sh.hand = 0;
      if (sh.table.occupied(sh.hand)) {
        const std::int64_t fa = policy_type::full_at(cfg_, sh.table.at(sh.hand).state);
        if (fa <= t) {
          drop(sh, sh.hand, fa, false);
          continue;  // another key may have shifted into this slot
        }
      }
      ++sh.hand;
    }
  }

  // Drops every key idle at t; sets next_idle_at to the exact earliest time a remaining key becomes idle.
  std::size_t full_scan(shard& sh, std::int64_t t) noexcept {
    ++sh.stats.full_scans;
    std::size_t evicted = 0;
    std::int64_t next = detail::ns_max;
    for (std::size_t i = 0; i < sh.table.capacity();) {
      if (sh.table.occupied(i)) {
        const std::int64_t fa = policy_type::full_at(cfg_, sh.table.at(i).state);
        if (fa <= t) {
          drop(sh, i, fa, false);
          ++evicted;
          continue;  // re-examine slot i: a key may have shifted into it
        }
        next = std::min(next, fa);
      }
      ++i;
    }
    sh.next_idle_at = next;
    return evicted;
  }

  // Makes room for one more key in `sh` at t, per the options. False: the new key must be refused.
  bool make_room(shard& sh, std::int64_t t) noexcept {
    sweep(sh, t, opts_.sweep);
    if (sh.table.size() < sh.max_keys) return true;
    if (t >= sh.next_idle_at && full_scan(sh, t) > 0) return true;
    if (opts_.when_full == keyed_when_full::reject_new) return false;
    // evict_busy: the key nearest to full among a sample of `samples` stored keys from the hand on (never one that can
    // never be full). The sample counts keys, not slots: the slots after the hand are where the previous evictions
    // emptied the table, and a run of empty slots there must not turn into a refusal. The shard is full (it holds
    // max_keys >= 16 keys), so the walk meets `samples` keys (or all of them) in O(samples / load factor) slots.
    const std::size_t cap = sh.table.capacity();
    const std::size_t samples = std::max<std::size_t>(16, opts_.sweep);
    std::size_t best = table_type::npos;
    std::int64_t best_at = detail::ns_max;
    std::size_t seen = 0;
    for (std::size_t k = 0, i = sh.hand % cap; k < cap && seen < samples; ++k, i = i + 1 == cap ? 0 : i + 1) {
      if (!sh.table.occupied(i)) continue;
      ++seen;
      const std::int64_t fa = policy_type::full_at(cfg_, sh.table.at(i).state);
      if (fa < best_at) {
        best_at = fa;
        best = i;
      }
    }
    if (best == table_type::npos) return false;
    sh.hand = best + 1;
    drop(sh, best, best_at, true);
    return true;
  }

  decision refuse(shard& sh, std::int64_t t) noexcept {
    ++sh.stats.refused_keys;
    decision d;
    d.limit = 0;
    d.retry_after = sh.next_idle_at == detail::ns_max
                        ? std::chrono::nanoseconds::max()
                        : std::chrono::nanoseconds{std::max<std::int64_t>(1, detail::sat_sub(sh.next_idle_at, t))};
    return d;
  }

  const config_type cfg_;
  const keyed_options opts_;
  [[no_unique_address]] const Hash hash_;
  [[no_unique_address]] const Eq eq_;
  std::size_t bits_ = 0;
  std::size_t shard_count_ = 1;
  std::unique_ptr<shard[]> shards_;
};

}  // namespace admit
