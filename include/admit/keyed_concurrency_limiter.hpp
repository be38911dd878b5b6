// admit/keyed_concurrency_limiter.hpp — at most `limit` requests in flight per key (per client, per tenant), each key
// with its own FIFO queue of waiters, a hard cap on the keys stored, and a key's entry freed as soon as it is unused.
//
//   admit::keyed_concurrency_limiter<> per_client{{.limit = 4, .max_waiters = 16, .timeout = 250ms}};
//   if (auto r = per_client.acquire(client_ip)) handle(request); else shed(r.error());   // queue_full, timeout, ...
//
// Each key stored is an admit::semaphore of `limit` permits (created on the key's first acquisition): every guarantee
// of <admit/semaphore.hpp> holds per key — FIFO waiters with head-of-line blocking by large requests, direct hand-off
// on release, exactly-once resolution of a grant racing a timeout or cancel, max_waiters per key (queue_full at once
// past it). Keys are independent: a key at its limit never delays another.
//
// Storage. The keys are split over a power-of-two number of shards by their mixed hash, each shard a table
// (detail/keyed_table.hpp) under its own mutex, mapping a key to its entry (the semaphore, on the heap so that it does
// not move). An entry counts its references — permits alive and acquisitions under way — under the shard's lock; the
// last one to go (a permit's release, a wait that failed) removes the key and frees the entry. So a key is stored
// exactly while it has permits held or waiters, an entry is never freed while a permit or a waiter refers to it, and
// nothing idle stays behind: no sweep, no background thread. Memory: one entry (~200 bytes: the semaphore's word and
// mutex on their own cache lines) per busy key, plus the table's slot.
//
// The cap. `max_keys` is split evenly over the shards (so size() <= max_keys always); a shard can be full while
// another has room. Every stored key is busy (it holds permits or has waiters), and a key with permits held is never
// evicted, so a new key that finds its shard full is refused (the idea of keyed_when_full::reject_new; evicting a busy
// key would break its limit): at once with errc::queue_full from acquire / try_acquire_for / _until / async_acquire,
// and an empty result from try_acquire. stats().refused_keys counts these refusals apart from full per-key queues.
//
// Bounds on waiting: max_waiters is per key; with the key cap, at most max_keys · max_waiters requests wait at once.
//
// Cost. An acquisition locks its key's shard once to find (or create) the entry and take a reference, then works on
// the key's semaphore as admit::semaphore does (a free permit: one compare-and-swap). A release returns the permits
// (handing them to the key's waiters) and locks the shard once to drop the reference. A new key allocates its entry.
//
// Metrics (opt-in): enable_metrics() keeps one admit::limiter_metrics for the whole limiter (every key's decisions);
// metrics() adds the gauges: limit (the per-key limit), in_flight and waiting summed over the keys (which locks each
// shard in turn: for a scrape, O(keys)).
//
// Thread safety: every member may be called concurrently. The limiter must outlive its permits and waiters.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include "admit/acquire_result.hpp"
#include "admit/clock.hpp"
#include "admit/detail/blocking_wait.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/keyed_table.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/errc.hpp"
#include "admit/expected.hpp"
#include "admit/keyed.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/permit.hpp"

namespace admit {

struct keyed_concurrency_options {
  // Requests (permits) in flight at most per key: 1 <= limit <= 2^59.
  std::int64_t limit = 1;
  // Requests that may wait at once per key; the next one that would have to wait fails with errc::queue_full.
  // 0: never wait.
  std::size_t max_waiters = std::numeric_limits<std::size_t>::max();
  // How long acquire() waits at most (timeout). Zero: never wait; nanoseconds::max(): no deadline. Not negative.
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max();
  // Hard cap on the keys stored at once (>= 1), split evenly over the shards. Only busy keys are stored.
  std::size_t max_keys = 100'000;
  // Number of shards (>= 1): rounded up to a power of two, and reduced so that each shard may hold at least 16 keys.
  std::size_t shards = 64;
};

// Counters since construction, summed over shards.
struct keyed_concurrency_stats {
  std::uint64_t keys = 0;          // stored now (size())
  std::uint64_t inserted = 0;      // entries created (a key's first acquisition after it was unused)
  std::uint64_t removed = 0;       // entries freed (the key's last permit released or last waiter gone)
  std::uint64_t refused_keys = 0;  // acquisitions of new keys refused for the cap
};

template <class Key = std::string, steady_clock_like Clock = std::chrono::steady_clock, class Hash = keyed_hash<Key>,
          class Eq = std::equal_to<>>
class basic_keyed_concurrency_limiter {
  struct entry;

 public:
  using key_type = Key;
  using clock_type = Clock;
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  // Permits of one key. Move-only; releases exactly once (release(), destruction, assignment over it): the permits go
  // to the key's waiters first, and the key's entry is freed if nothing else refers to it. Thread safety: as a value;
  // permits of any keys may be released concurrently. The limiter must outlive it.
  class [[nodiscard]] permit {
   public:
    permit() noexcept = default;
    permit(permit&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)),
          entry_(std::exchange(other.entry_, nullptr)),
          held_(std::move(other.held_)) {}
    permit& operator=(permit&& other) noexcept {
      if (this != &other) {
        release();
        owner_ = std::exchange(other.owner_, nullptr);
        entry_ = std::exchange(other.entry_, nullptr);
        held_ = std::move(other.held_);
      }
      return *this;
    }
    permit(const permit&) = delete;
    permit& operator=(const permit&) = delete;
    ~permit() { release(); }

    // Returns the permits and drops this permit's reference to its key. Releasing an empty permit does nothing.
    void release() noexcept {
      if (owner_ == nullptr) return;
      held_.release();  // the entry is alive: this permit still holds a reference to it
      std::exchange(owner_, nullptr)->unref(std::exchange(entry_, nullptr));
    }

    // How many permits this object holds (0 once released or moved from).
    std::int64_t count() const noexcept { return held_.count(); }
    explicit operator bool() const noexcept { return held_.count() > 0; }

   private:
    friend class basic_keyed_concurrency_limiter;
    permit(basic_keyed_concurrency_limiter& owner, entry& e, admit::permit held) noexcept
        : owner_(&owner), entry_(&e), held_(std::move(held)) {}

    basic_keyed_concurrency_limiter* owner_ = nullptr;
    entry* entry_ = nullptr;
    admit::permit held_;
  };

  // The result of a wait: the permit, or an admit::errc (an admit::expected, as admit::acquire_result is).
  using acquire_result = expected<permit, errc>;

  // Throws std::invalid_argument naming the value for a limit outside [1, 2^59], a negative timeout, max_keys or
  // shards of zero, or a shard's share of max_keys above 2^30.
  explicit basic_keyed_concurrency_limiter(const keyed_concurrency_options& options, const Hash& hash = {},
                                           const Eq& eq = {})
      : opts_(check(options)), hash_(hash), eq_(eq) {
    std::size_t n = 1;
    while (n < opts_.shards && n < (std::size_t{1} << 16)) n *= 2;
    while (n > 1 && opts_.max_keys / n < 16) n /= 2;
    while ((std::size_t{1} << bits_) < n) ++bits_;
    shard_count_ = n;
    if (opts_.max_keys / n >= (std::size_t{1} << 30)) {
      throw std::invalid_argument("admit::keyed_concurrency_limiter: max_keys " + std::to_string(opts_.max_keys) +
                                  " over " + std::to_string(n) + " shards exceeds 2^30 keys per shard");
    }
    shards_ = std::make_unique<shard[]>(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t share = opts_.max_keys / n + (i < opts_.max_keys % n ? 1 : 0);
      shards_[i].max_keys = share;
      shards_[i].table.set_capacity_limit(share + share / 3 + 2);  // room for `share` keys at load 3/4
    }
  }
  basic_keyed_concurrency_limiter(const basic_keyed_concurrency_limiter&) = delete;
  basic_keyed_concurrency_limiter& operator=(const basic_keyed_concurrency_limiter&) = delete;
  // Precondition: no permit or waiter of any key is left (as for admit::semaphore).
  ~basic_keyed_concurrency_limiter() {
    for (std::size_t s = 0; s < shard_count_; ++s) {
      auto& t = shards_[s].table;
      for (std::size_t i = 0; i < t.capacity(); ++i) {
        if (t.occupied(i)) delete t.at(i).state;
      }
    }
  }

  // Takes n permits of `key` (n >= 1) if they are free and nobody waits on that key; never waits. Empty otherwise:
  // short, queued behind others, closed, n above the limit, or a new key refused for the cap. Locks the key's shard
  // (twice when refused). Throws std::invalid_argument for n < 1; may throw std::bad_alloc for a new key (nothing
  // changed).
  template <class K>
  std::optional<permit> try_acquire(const K& key, std::int64_t n = 1) {
    check_n(n);
    if (n > opts_.limit) {
      record(is_closed() ? errc::closed : errc::exceeds_capacity, n, {});
      return std::nullopt;
    }
    errc why{};
    entry* e = ref(key, why);
    if (e == nullptr) {
      record(why == errc::closed ? why : errc::would_block, n, {});  // the cap: unavailable, as a try_* refusal
      return std::nullopt;
    }
    if (!e->sem.try_acquire(n)) {
      const errc refused = e->sem.refusal(n, errc::would_block);
      unref(e);
      record(refused, n, {});
      return std::nullopt;
    }
    // The keyed permit owns the permits and the entry's reference before the (possibly throwing) event hook runs.
    std::optional<permit> granted = permit(*this, *e, admit::permit(e->sem, n));
    record(errc{}, n, {});
    return granted;
  }

  // Waits for n permits of `key` at most the default timeout (options.timeout), FIFO behind the key's waiters.
  // Errors: queue_full (the key's max_waiters already wait, or a new key refused for the cap) and exceeds_capacity
  // at once, timeout, cancelled (`stop`), closed. A grant that races with the deadline or the cancel wins. Throws
  // std::invalid_argument for n < 1; may throw std::bad_alloc for a new key.
  template <class K>
  acquire_result acquire(const K& key, std::int64_t n = 1, std::stop_token stop = {}) {
    if (opts_.timeout == std::chrono::nanoseconds::max()) return wait(key, n, std::nullopt, std::move(stop));
    return wait(key, n, detail::deadline_after<Clock>(Clock::now(), opts_.timeout), std::move(stop));
  }

  // As acquire, with `timeout` instead of the default (zero or negative: do not wait; huge: saturates).
  template <class K, class Rep, class Period>
  acquire_result try_acquire_for(const K& key, std::chrono::duration<Rep, Period> timeout, std::int64_t n = 1,
                                 std::stop_token stop = {}) {
    return wait(key, n, detail::deadline_after<Clock>(Clock::now(), timeout), std::move(stop));
  }

  // As acquire, until `deadline` on Clock (already passed: do not wait, fail with timeout when nothing is free).
  template <class K>
  acquire_result try_acquire_until(const K& key, time_point deadline, std::int64_t n = 1, std::stop_token stop = {}) {
    return wait(key, n, deadline, std::move(stop));
  }

  // Every waiter of every key fails with closed, and so do later acquisitions. Held permits stay valid. Idempotent.
  void close() noexcept {
    closed_.store(true, std::memory_order_release);
    for (std::size_t s = 0; s < shard_count_; ++s) {
      std::lock_guard lock(shards_[s].mutex);
      auto& t = shards_[s].table;
      for (std::size_t i = 0; i < t.capacity(); ++i) {
        if (t.occupied(i)) t.at(i).state->sem.close();
      }
    }
  }
  bool is_closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  // Whether `key` is stored now (it has permits held or waiters).
  template <class K>
  [[nodiscard]] bool contains(const K& key) const {
    const std::uint64_t h = hash_of(key);
    shard& sh = shard_of(h);
    std::lock_guard lock(sh.mutex);
    return sh.table.find(key, h, eq_) != table_type::npos;
  }

  // Permits held now by `key`'s permits (0 for a key not stored).
  template <class K>
  [[nodiscard]] std::int64_t in_flight(const K& key) const {
    return with_entry(
        key, [](const entry& e) { return e.sem.in_use(); }, std::int64_t{0});
  }
  // Requests waiting on `key` now.
  template <class K>
  [[nodiscard]] std::size_t waiting(const K& key) const {
    return with_entry(
        key, [](const entry& e) { return e.sem.waiting(); }, std::size_t{0});
  }

  // Keys stored now (<= max_keys()). Locks each shard in turn: a moving total under concurrent use.
  [[nodiscard]] std::size_t size() const {
    std::size_t n = 0;
    for (std::size_t s = 0; s < shard_count_; ++s) {
      std::lock_guard lock(shards_[s].mutex);
      n += shards_[s].table.size();
    }
    return n;
  }
  [[nodiscard]] keyed_concurrency_stats stats() const {
    keyed_concurrency_stats out;
    for (std::size_t s = 0; s < shard_count_; ++s) {
      std::lock_guard lock(shards_[s].mutex);
      out.keys += shards_[s].table.size();
      out.inserted += shards_[s].stats.inserted;
      out.removed += shards_[s].stats.removed;
      out.refused_keys += shards_[s].stats.refused_keys;
    }
    return out;
  }

  std::int64_t limit() const noexcept { return opts_.limit; }
  std::chrono::nanoseconds default_timeout() const noexcept { return opts_.timeout; }
  [[nodiscard]] std::size_t max_keys() const noexcept { return opts_.max_keys; }
  [[nodiscard]] std::size_t shard_count() const noexcept { return shard_count_; }
  const keyed_concurrency_options& options() const noexcept { return opts_; }

  // Metrics (see the top of the file). enable_metrics: opt-in; call before the limiter is shared (it is not
  // thread-safe against decisions). Each acquisition is recorded exactly once: admitted (with its wait), unavailable
  // (try_acquire, including a new key refused for the cap), queue_full (the key's queue, or the cap), timeout,
  // cancelled, closed, exceeds_capacity.
  void enable_metrics(limiter_metrics::event_handler on_event = {}) {
    metrics_ = std::make_unique<limiter_metrics>(std::move(on_event));
  }
  limiter_snapshot metrics() const {
    limiter_snapshot s = metrics_ ? metrics_->snapshot() : limiter_snapshot{};
    s.limit = opts_.limit;
    for (std::size_t i = 0; i < shard_count_; ++i) {
      std::lock_guard lock(shards_[i].mutex);
      auto& t = shards_[i].table;
      for (std::size_t j = 0; j < t.capacity(); ++j) {
        if (!t.occupied(j)) continue;
        s.in_flight += t.at(j).state->sem.in_use();
        s.waiting += t.at(j).state->sem.waiting();
      }
    }
    return s;
  }
  // The waits of the admitted acquisitions (empty until metrics are enabled).
  const wait_histogram& wait_times() const noexcept { return metrics_ ? metrics_->wait_times() : no_waits(); }

  // For the Asio integration (<admit/asio/keyed_async_acquire.hpp>), not for general use: a reference to `key`'s
  // entry (created if needed) and its semaphore; empty with `why` (closed, queue_full for the cap).
  struct entry_ref {
    basic_keyed_concurrency_limiter* owner = nullptr;
    entry* e = nullptr;
    detail::semaphore_state& state() const noexcept { return e->sem; }
    // Wraps permits taken from state() into a keyed permit (which takes over this reference).
    permit adopt(admit::permit held) && noexcept {
      return permit(*std::exchange(owner, nullptr), *std::exchange(e, nullptr), std::move(held));
    }
    // Drops the reference (when the acquisition failed).
    void drop() && noexcept {
      if (e != nullptr) std::exchange(owner, nullptr)->unref(std::exchange(e, nullptr));
    }
  };
  template <class K>
  entry_ref native_ref(const K& key, errc& why) {
    entry* e = ref(key, why);
    return e == nullptr ? entry_ref{} : entry_ref{this, e};
  }
  // Records one outcome (as the members do), for the Asio integration.
  void record(errc e, std::int64_t n, std::chrono::nanoseconds wait) {
    if (metrics_) metrics_->record(e, n, wait);
  }

 private:
  struct entry {
    entry(std::int64_t limit, std::size_t max_waiters, std::uint64_t h) : sem(limit, max_waiters), hash(h) {}
    detail::semaphore_state sem;
    std::uint64_t hash;
    std::int64_t refs = 0;  // guarded by the shard's mutex: permits alive + acquisitions under way
  };
  using table_type = detail::keyed_table<Key, entry*>;

  struct alignas(64) shard {
    mutable std::mutex mutex;
    table_type table;
    std::size_t max_keys = 0;
    keyed_concurrency_stats stats;
  };

  struct rehash {
    const basic_keyed_concurrency_limiter* self;
    std::uint64_t operator()(const Key& k) const noexcept { return self->hash_of(k); }
  };

  static const keyed_concurrency_options& check(const keyed_concurrency_options& o) {
    if (o.limit < 1 || o.limit > detail::semaphore_state::max_permits) {
      throw std::invalid_argument("admit::keyed_concurrency_limiter: limit must be in [1, " +
                                  std::to_string(detail::semaphore_state::max_permits) + "], got " +
                                  std::to_string(o.limit));
    }
    if (o.timeout < std::chrono::nanoseconds::zero()) {
      throw std::invalid_argument("admit::keyed_concurrency_limiter: timeout must not be negative, got " +
                                  std::to_string(o.timeout.count()) + "ns");
    }
    if (o.max_keys < 1)
      throw std::invalid_argument("admit::keyed_concurrency_limiter: max_keys must be at least 1, got 0");
    if (o.shards < 1) throw std::invalid_argument("admit::keyed_concurrency_limiter: shards must be at least 1, got 0");
    return o;
  }
  static void check_n(std::int64_t n) {
    detail::semaphore_state::check_count("n", n, 1, "admit::keyed_concurrency_limiter");
  }

  static const wait_histogram& no_waits() noexcept {
    static const wait_histogram empty;
    return empty;
  }

  template <class K>
  std::uint64_t hash_of(const K& key) const noexcept {
    return detail::mix_hash(static_cast<std::uint64_t>(hash_(key)));
  }
  shard& shard_of(std::uint64_t h) const noexcept { return shards_[bits_ == 0 ? 0 : h >> (64 - bits_)]; }

  template <class K, class F, class T>
  T with_entry(const K& key, F f, T otherwise) const {
    const std::uint64_t h = hash_of(key);
    shard& sh = shard_of(h);
    std::lock_guard lock(sh.mutex);
    const std::size_t i = sh.table.find(key, h, eq_);
    return i == table_type::npos ? otherwise : static_cast<T>(f(*sh.table.at(i).state));
  }

  // A new reference to key's entry, created if needed; nullptr with `why` = closed, or queue_full for the cap.
  template <class K>
  entry* ref(const K& key, errc& why) {
    const std::uint64_t h = hash_of(key);
    shard& sh = shard_of(h);
    std::lock_guard lock(sh.mutex);
    if (closed_.load(std::memory_order_relaxed)) {  // close() sets it before it walks the shards (under their locks)
      why = errc::closed;
      return nullptr;
    }
    const std::size_t i = sh.table.find(key, h, eq_);
    if (i != table_type::npos) {
      entry* e = sh.table.at(i).state;
      ++e->refs;
      return e;
    }
    if (sh.table.size() >= sh.max_keys || !sh.table.can_insert()) {
      ++sh.stats.refused_keys;
      why = errc::queue_full;
      return nullptr;
    }
    auto e = std::make_unique<entry>(opts_.limit, opts_.max_waiters, h);
    sh.table.insert(key, h, e.get(), rehash{this});  // may throw: nothing changed, the entry is freed
    ++sh.stats.inserted;
    e->refs = 1;
    return e.release();
  }

  // Drops a reference; the last one removes the key and frees the entry (nothing else can reach it any more).
  void unref(entry* e) noexcept {
    shard& sh = shard_of(e->hash);
    {
      std::lock_guard lock(sh.mutex);
      if (--e->refs > 0) return;
      const std::size_t i = sh.table.find_if(e->hash, [e](const auto& slot) { return slot.state == e; });
      sh.table.erase_at(i, rehash{this});
      ++sh.stats.removed;
    }
    delete e;
  }

  template <class K>
  acquire_result wait(const K& key, std::int64_t n, std::optional<time_point> deadline, std::stop_token stop) {
    check_n(n);
    if (n > opts_.limit) return refuse(is_closed() ? errc::closed : errc::exceeds_capacity, n, {});
    errc why{};
    entry* e = ref(key, why);
    if (e == nullptr) return refuse(why, n, {});
    if (e->sem.try_acquire(n)) {
      acquire_result granted = permit(*this, *e, admit::permit(e->sem, n));  // owns them before record can throw
      record(errc{}, n, {});
      return granted;
    }
    const time_point start = Clock::now();
    admit::acquire_result r = detail::blocking_acquire<Clock>(e->sem, n, deadline, stop);
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
    if (!r) {
      unref(e);
      return refuse(r.error(), n, waited);
    }
    acquire_result granted = permit(*this, *e, std::move(*r));  // owns them before record can throw
    record(errc{}, n, waited);
    return granted;
  }

  acquire_result refuse(errc e, std::int64_t n, std::chrono::nanoseconds waited) {
    record(e, n, waited);
    return e;
  }

  const keyed_concurrency_options opts_;
  [[no_unique_address]] const Hash hash_;
  [[no_unique_address]] const Eq eq_;
  std::size_t bits_ = 0;
  std::size_t shard_count_ = 1;
  std::unique_ptr<shard[]> shards_;
  std::atomic<bool> closed_{false};
  std::unique_ptr<limiter_metrics> metrics_;  // null: metrics disabled
};

// At most `limit` in flight per key, on std::chrono::steady_clock.
template <class Key = std::string, class Hash = keyed_hash<Key>, class Eq = std::equal_to<>>
using keyed_concurrency_limiter = basic_keyed_concurrency_limiter<Key, std::chrono::steady_clock, Hash, Eq>;

}  // namespace admit
