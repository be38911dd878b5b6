// src/redis/limiter/batcher.hpp — many callers, one script call (private to admit_redis; limiter_options::max_batch):
// decisions of one limiter asked for at about the same time are queued and leave together, in calls of at most
// max_batch decisions, through a sink that sends a call and schedules a flush.
//
//   batcher b(64);
//   b.submit(std::move(entry), sink);   // queued; the first one queued asks sink.schedule_flush()
//   b.flush(sink);                      // (run by the scheduled flush) everything queued leaves as one sink.send
//
// Grouping. The first decision queued schedules a flush (the limiter posts it to the client's executor), so every
// decision queued before the flush runs — the other completions of the same read, other threads' calls — leaves with
// it. A queue that reaches min(max_batch, stream_batch) leaves at once, without waiting for the flush: the server works
// on it while this process completes (and queues) the next decisions. The flush sends what is left as one call: the
// queue never holds min(max_batch, stream_batch) decisions once submit returns, so a call is never larger than
// max_batch. A decision completed while it waited (a cancellation, a blocking caller's deadline) is dropped, never
// sent.
//
// Order. A call decides its decisions in the order they were queued. Between calls there is no order: a full queue
// is sent by the thread that filled it and a flush by the executor's thread, so a later call can reach the server
// first — even for decisions one thread asked for one after another in separate calls.
//
// Thread safety: submit and flush may be called concurrently from any thread (one mutex around the queue); the sink
// is called outside it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/redis/client/detail/request.hpp"

namespace admit::redis::detail {

// One decision waiting for, or riding in, a script call.
struct batch_entry {
  std::shared_ptr<request_base> req;  // completed with the decision's own reply (script_call.hpp's member_reply)
  std::string state_key;              // KEYS: "{name}:key"
  std::int64_t n = 0;                 // ARGV: asked
  std::int64_t k = 0;                 // ARGV: the most the script may take (leasing)
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Where batches go: the limiter sends a call through its client; a test records them.
class batch_sink {
 public:
  virtual ~batch_sink() = default;
  // Arrange for batcher::flush(sink) to run soon (after the current handler returns), once.
  virtual void schedule_flush() = 0;
  // Send one call deciding `batch` in order (never empty, every request not yet completed when it left the queue).
  virtual void send(std::vector<batch_entry> batch) = 0;
};

class batcher {
 public:
  // A queue this large leaves at once. 8 measured best at 64 and 512 callers on one connection (4: -10-20%, 16 and
  // 32: -5-20% on the hot key; docs/perf/redis.md).
  static constexpr std::size_t stream_batch = 8;

  // max_batch >= 1 (validated by the limiter); 1 is one call per decision.
  explicit batcher(std::size_t max_batch) noexcept : max_batch_(max_batch) {}

  // Queues `entry`; sends the queue at once when it is full, else schedules a flush unless one is pending.
  void submit(batch_entry entry, batch_sink& sink);
  // Sends everything queued (the scheduled flush) as one call: fewer than min(max_batch, stream_batch) decisions.
  void flush(batch_sink& sink);

 private:
  const std::size_t max_batch_;
  admit::detail::mutex mutex_;
  std::vector<batch_entry> queued_ ADMIT_GUARDED_BY(mutex_);
  bool flush_scheduled_ ADMIT_GUARDED_BY(mutex_) = false;
};

}  // namespace admit::redis::detail
