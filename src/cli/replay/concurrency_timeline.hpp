// cli/replay/concurrency_timeline.hpp — what the chart of `admit replay --algorithm concurrency --plot` needs, kept in
// a fixed number of time buckets so that its memory does not grow with the trace.
//
//   concurrency_timeline t;
//   t.record(500'000'000, 3, 1);   // just after the events at 0.5 s: 3 permits in flight, 1 request waiting
//
// The replay reports the state after each event; the timeline keeps, for each of `buckets` equal time buckets
// covering [0, span), the largest number of permits in flight and of requests waiting at any instant inside it (the
// state left by the last event at an instant, as a step function), and whether a request that arrived inside it was
// rejected with queue-full or timed out. The bucket width starts at 1 ns and doubles, merging neighbours (largest
// value, either mark), whenever an event falls past the span, so at the end a bucket is narrower than 1/2048 of the
// replayed time: under half a pixel of the chart. Memory: about 100 KB, whatever the trace.
//
// Thread safety: none (one replay per timeline).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace admit::cli {

class concurrency_timeline {
 public:
  static constexpr std::size_t buckets = 4096;

  struct level {
    std::int64_t in_flight = 0;  // permits held
    std::int64_t waiting = 0;    // requests queued
  };

  // The state just after all events at t_ns (a later report at the same instant replaces an earlier one). Times never
  // go back: t_ns is at least the last one recorded.
  void record(std::int64_t t_ns, level state);
  // A request that arrived at t_ns (at most the last recorded time) was rejected with queue-full, or timed out.
  void mark_queue_full(std::int64_t arrival_ns);
  void mark_timeout(std::int64_t arrival_ns);

  // The largest state over the buckets whose middle lies in [from_ns, to_ns) (or, if the range is narrower than a
  // bucket, over the bucket holding from_ns). Consecutive ranges share out the buckets, so every peak shows in
  // exactly one range, moved by at most half a bucket width. Past the last report, the last state holds.
  [[nodiscard]] level peak(std::int64_t from_ns, std::int64_t to_ns) const;
  // Whether one of those buckets holds a marked arrival.
  [[nodiscard]] bool queue_full_in(std::int64_t from_ns, std::int64_t to_ns) const;
  [[nodiscard]] bool timeout_in(std::int64_t from_ns, std::int64_t to_ns) const;

  [[nodiscard]] std::int64_t bucket_ns() const noexcept { return width_; }

 private:
  struct bucket {
    level peak;
    bool queue_full = false, timeout = false;
  };
  void commit();                  // folds the pending report into the buckets
  void cover(std::int64_t t_ns);  // widens the buckets until t_ns falls inside the span
  [[nodiscard]] std::size_t index(std::int64_t t_ns) const noexcept { return static_cast<std::size_t>(t_ns / width_); }
  [[nodiscard]] level state_in(std::size_t k) const;  // bucket k's peak (k == buckets: past the span)
  // The buckets [first, last) whose middle lies in [from_ns, to_ns), as peak() says.
  [[nodiscard]] std::pair<std::size_t, std::size_t> middles_in(std::int64_t from_ns, std::int64_t to_ns) const;
  template <bool bucket::*Flag>
  [[nodiscard]] bool marked_in(std::int64_t from_ns, std::int64_t to_ns) const;

  std::array<bucket, buckets> buckets_{};
  std::int64_t width_ = 1;  // ns per bucket, a power of two
  std::size_t filled_ = 0;  // buckets [0, filled_) hold the step function up to the last committed time
  level current_{};         // the state since the last committed time
  std::int64_t pending_t_ = 0;
  level pending_{};  // the last report, not yet committed (another at its instant may replace it)
};

}  // namespace admit::cli
