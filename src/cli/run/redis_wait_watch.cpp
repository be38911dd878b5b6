// The watch over a waiting `admit run --redis` (redis_wait_watch.hpp).
#include "cli/run/redis_wait_watch.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "admit/errc.hpp"
#include "admit/redis/semaphore.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/run_holder.hpp"

namespace admit::cli::redis_run {

namespace {

// How often the watch looks at the client's state and, with a status line, asks Redis how many wait and hold.
constexpr std::chrono::milliseconds status_every{500};

}  // namespace

// Whether the server that holds the limit answers: one call at a time, each within call_timeout — EXISTS of a key of
// the limit's (read-only, O(1)), which a cluster sends to the master of the limit's slot, where a PING would go to any
// node. Thread-safe; the call's completion may outlive the watch (it holds the probe).
class liveness_probe : public std::enable_shared_from_this<liveness_probe> {
 public:
  // Whether the last call that ended got no answer in time (false when none ended yet), after sending the next one if
  // none is in flight.
  bool silent(redis::client& c, const std::string& key) {
    const admit::detail::lock_guard lock(mutex_);
    if (!in_flight_) {
      in_flight_ = true;
      c.async_execute_command(steady::now() + call_timeout, redis::command{"EXISTS", key},
                              [self = shared_from_this(), round = round_](boost::system::error_code ec, redis::reply) {
                                const admit::detail::lock_guard l(self->mutex_);
                                self->in_flight_ = false;
                                if (round == self->round_) self->silent_ = ec == admit::errc::timeout;
                              });
    }
    return silent_;
  }
  // The connection was lost meanwhile: what a PING sent before found, or finds, says nothing of the new one.
  void forget() {
    const admit::detail::lock_guard lock(mutex_);
    ++round_;
    silent_ = false;
  }

 private:
  admit::detail::mutex mutex_;
  bool in_flight_ ADMIT_GUARDED_BY(mutex_) = false;
  bool silent_ ADMIT_GUARDED_BY(mutex_) = false;
  // forget() calls so far: a PING's answer counts only in its own round.
  std::uint64_t round_ ADMIT_GUARDED_BY(mutex_) = 0;
};

wait_watch::wait_watch(state& st, std::optional<steady::time_point> deadline, const progress_fn& progress,
                       bool status_line)
    : st_(st),
      deadline_(deadline),
      progress_(progress),
      status_line_(status_line),
      probe_(std::make_shared<liveness_probe>()) {
  // The thread first: should it not start, st_ is left without a callback to this watch.
  thread_ = std::jthread([this](const std::stop_token& done) { watch(done); });
  const admit::detail::lock_guard lock(st_.mutex);
  st_.on_queued = [this] {
    const admit::detail::lock_guard l(mutex_);
    queued_ = true;
    cv_.notify_all();
  };
}

wait_watch::~wait_watch() { finish(false); }

void wait_watch::finish(bool redis_answered) {
  if (finished_) return;
  finished_ = true;
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  {
    const admit::detail::lock_guard lock(st_.mutex);
    st_.on_queued = nullptr;
  }
  if (trouble_told_ && redis_answered && progress_) {
    last_.trouble.clear();
    progress_(last_);
  }
}

void wait_watch::watch(const std::stop_token& done) {
  const run::run_settings& s = st_.settings;
  admit::detail::unique_lock l(mutex_);
  if (!cv_.wait(l.native(), done, [&]() ADMIT_REQUIRES(mutex_) { return queued_; })) return;
  l.unlock();
  // The entry inspect shows of this waiter lives 3 × --lease-ttl: written again every --lease-ttl.
  auto show_again = steady::now() + s.lease_ttl;
  for (bool first = true;; first = false) {
    std::string trouble = st_.unreachable();
    if (!trouble.empty()) probe_->forget();
    // A server that is connected and does not answer: the client's state cannot tell, a call can.
    if (trouble.empty() && probe_->silent(st_.limit_client(), run_classes_key(s.name))) {
      trouble = "no answer from " + st_.holder_where() + " within " + format_duration(call_timeout) +
                " (connected, but Redis does not reply)";
    }
    // Told when Redis goes away or comes back (not at each new reason while it is away).
    if (!first && trouble.empty() != last_.trouble.empty() && (!status_line_ || !trouble.empty())) {
      last_.trouble = trouble;
      trouble_told_ = !trouble.empty();
      if (progress_) progress_(last_);
    }
    if (first || (status_line_ && trouble.empty())) {  // the "waiting" event; then, with a status line, updates
      run::wait_progress p;  // position 0: Redis does not say a waiter's place without its identity
      p.capacity = s.concurrency;
      const auto by_call = steady::now() + call_timeout;
      const auto [snap, ec] = redis::inspect_semaphore_until(
          st_.limit_client(), s.name, deadline_ ? std::min(by_call, *deadline_ + past_deadline) : by_call, 1);
      if (!ec) {
        p.waiting = static_cast<std::size_t>(snap.waiter_count);
        if (s.concurrency > 0) {
          p.held = snap.capacity - snap.available;
          p.capacity = snap.capacity;
        }
        // The rate's tokens are short: the head starts once they are there (this run after those ahead of it).
        if (snap.token_interval.count() > 0 && snap.tokens < s.weight) {
          p.rate_wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
              snap.token_interval * (s.weight - snap.tokens - 1) + snap.next_token);
        }
        last_ = p;
        trouble_told_ = false;  // the status line, which shows the wait again, tells that Redis is back
      }
      if (progress_ && (first || !ec)) progress_(p);
    }
    l.lock();
    // (Every status_every even without a status line: whether Redis can be reached is the client's own state.)
    cv_.wait_until(l.native(), done, std::min(show_again, steady::now() + status_every), [] { return false; });
    if (done.stop_requested()) return;
    l.unlock();
    if (steady::now() >= show_again) {
      st_.show_waiter();
      show_again = steady::now() + s.lease_ttl;
    }
  }
}

}  // namespace admit::cli::redis_run
