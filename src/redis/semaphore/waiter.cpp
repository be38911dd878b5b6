// A waiting acquisition: async_acquire_op, a state machine on a strand — the acquire call, then polls on a timer or a
// wake-up, until granted, the deadline or a cancellation; exactly one completion. The blocking waits run it and wait
// for its completion on the calling thread, which ends the wait itself at its deadline or stop and then waits (within
// leave_wait after a deadline, options().timeout after a stop) until the request has left the queue in Redis.
#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <optional>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/redis/limiter_result.hpp"
#include "core.hpp"

namespace admit::redis::detail {

// How long a blocking wait ended by its deadline waits for Redis to confirm that its request left the queue: the bound
// on how far past its deadline a wait can return (semaphore.hpp, "Deadlines").
constexpr std::chrono::milliseconds leave_wait{40};

class async_acquire_op : public std::enable_shared_from_this<async_acquire_op> {
 public:
  // `timed`: the operation enforces `deadline` with a timer of its own and counts its outcome in the metrics (a
  // blocking wait does both itself). Counted in the semaphore's waiting gauge until it completes.
  // A deadline already passed does not wait: one acquire that does not queue decides (admitted now, else
  // errc::timeout where try_acquire says errc::would_block), given leave_wait to be answered (deadline() is then the
  // end of that, past which the outcome is errc::timeout, as any wait's past its deadline).
  async_acquire_op(std::shared_ptr<semaphore_core> core, std::int64_t n, std::optional<steady::time_point> deadline,
                   std::shared_ptr<acquire_completion> completion, bool timed = true, std::size_t priority = 0)
      : core_(std::move(core)),
        n_(n),
        priority_(priority),
        now_only_(deadline && *deadline <= steady::now()),
        deadline_(now_only_ ? steady::now() + leave_wait : deadline),
        timed_(timed),
        completion_(std::move(completion)),
        strand_(asio::make_strand(core_->link().get_executor())),
        id_(random_id()),
        start_(core_->record_start()) {
    core_->gauges().wait_begins();
  }
  async_acquire_op(const async_acquire_op&) = delete;
  async_acquire_op& operator=(const async_acquire_op&) = delete;
  // The deadline the wait ends at (see the constructor).
  [[nodiscard]] std::optional<steady::time_point> deadline() const noexcept { return deadline_; }
  ~async_acquire_op() {
    if (state_ == state::waiting) core_->gauges().wait_ends();  // its executor died first
    core_->waits().remove(ticket_);                             // (then, or cancelled before it started)
  }

  void start() {
    // (Ended with errc::closed by the semaphore object's destruction: close().)
    core_->waits().add(ticket_, [weak = weak_from_this()] {
      if (auto op = weak.lock()) op->cancel(admit::errc::closed);
    });
    asio::post(strand_, [self = shared_from_this()] {
      if (self->state_ != state::waiting) return;  // cancelled before it started
      if (self->deadline_ && *self->deadline_ - steady::now() <= self->calls_end_within()) self->arm_deadline();
      self->enqueue();
    });
  }
  // Gives up with `why` (errc::cancelled, or errc::timeout when a blocking waiter's own deadline came first).
  void cancel(admit::errc why = admit::errc::cancelled) {
    asio::post(strand_, [self = shared_from_this(), why] { self->complete(why, leave::queue); });
  }

 private:
  // Joins the queue under id_ (registered for its wake-up before the call: a grant's wake-up can come before the reply
  // "queued").
  void enqueue() {
    core_->register_waiter(id_, [weak = weak_from_this(), id = id_](const semaphore_core::grant_reply& grant) {
      auto op = weak.lock();
      if (!op) return;
      asio::post(op->strand_, [op, grant, id] {
        if (id != op->id_) return;  // for an identity given up by a requeue meanwhile: nobody's
        const bool fresh = !grant.empty() && op->sent_ + std::chrono::microseconds(grant[3] - grant[4]) > steady::now();
        if (!fresh || op->state_ != state::waiting) return op->poll();  // unreadable, too late, or no longer wanted
        op->complete(op->core_->make_lease(op->id_, grant, op->sent_), leave::nothing);
      });
    });
    pass_ = core_->breaker().allow(steady::now());
    if (pass_ == breaker_pass::refused) {
      return complete(core_->degrade(n_, make_error_code(errc::circuit_open)), leave::nothing);
    }
    sent_ = steady::now();
    core_->async_command(
        core_->acquire_op(id_, n_, !now_only_, deadline_, priority_), core_->call_deadline(deadline_),
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, reply r) {
          self->core_->breaker().report(as_error(ec), self->pass_, steady::now());
          if (self->state_ == state::leaving) {
            // Given up meanwhile. The cancel was sent after this call, but may have run first when this call had to
            // load the script and retry: if it queued or granted after all, leave again.
            const auto v = ec ? std::nullopt : integers(r, 1);
            if (v && ((*v)[0] == granted || (*v)[0] == queued)) self->core_->abandon(self->id_);
            return;
          }
          if (self->state_ != state::waiting) return;  // granted by a wake-up that came before this reply
          if (ec && self->deadline_ && steady::now() >= *self->deadline_) {
            // The call ran out with the wait: the wait's own error.
            return self->complete(admit::errc::timeout, leave::queue);
          }
          if (is_outage(as_error(ec))) {
            (void)self->core_->judge(self->id_, ec, r, self->sent_);  // leaves whatever the call may have done
            return self->complete(self->core_->degrade(self->n_, as_error(ec)), leave::nothing);
          }
          if (!ec && r.is_transient_error()) {
            // "Not now" (CLUSTERDOWN while a node rejoins, LOADING, BUSY...): the script did not run. Its poll finds
            // it unknown once Redis answers again, and it queues then. Until the deadline (without one, for as long as
            // Redis says "not now"); unlike an outage, which the failure policy answers at once.
            self->arm_deadline();
            return self->arm();
          }
          if (auto result = self->core_->judge(self->id_, ec, r, self->sent_)) {
            if (self->now_only_ && !*result && result->error() == admit::errc::would_block) {
              return self->complete(admit::errc::timeout, leave::nothing);  // not now, and the deadline has passed
            }
            return self->complete(std::move(*result), leave::nothing);
          }
          self->arm_deadline();
          if (!self->told_queued_ && self->core_->options().on_queued) {
            self->told_queued_ = true;
            self->core_->options().on_queued(self->id_);
          }
          self->arm(ask_again_in(r));
        }));
  }
  // The deadline's timer, when the operation enforces one (timed_) and it is not armed yet. Armed at the start when the
  // deadline may come before the acquire call ends, else once the call says the request is queued: a request granted
  // at once never arms it (arming and cancelling a timer was about 1 µs of the client's 50 µs for a cycle of acquire
  // and release).
  void arm_deadline() {
    if (!deadline_ || !timed_ || deadline_timer_) return;
    auto& timer = deadline_timer_.emplace(strand_);
    timer.expires_at(*deadline_);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->complete(admit::errc::timeout, leave::queue);
    });
  }
  // How soon any call this operation makes ends, at the latest: by its own deadline or options().timeout after the
  // last operation batched with it was asked for, and those wait in the batcher at most for a call in flight, which
  // ends the same way; the margin covers the executor's turns between them.
  steady::duration calls_end_within() const { return 2 * core_->options().timeout + std::chrono::milliseconds(100); }
  // Queues again under a new identity (a late wake-up for the old one is then nobody's).
  void requeue() {
    core_->unregister_waiter(id_);
    id_ = random_id();
    told_queued_ = false;  // on_queued hears the new id
    enqueue();
  }
  // µs after which the script asks this waiter to poll (the queued reply's fourth element): when the rate can admit
  // it, or, at the queue's head, when the earliest lease expires; 0: at poll_interval.
  static std::int64_t ask_again_in(const reply& r) {
    const auto v = integers(r, 4);
    return v ? std::max<std::int64_t>((*v)[3], 0) : 0;
  }
  // Polls after poll_interval, or sooner when the script asks (nobody's release wakes a waiter held back by the rate,
  // nor one whose permits a dead holder's lease keeps until it expires: it asks at its tokens' time, or the head at the
  // lease's expiry, and the poll that finds them there is granted).
  void arm(std::int64_t ask_again_in_us = 0) {
    auto after = std::chrono::duration_cast<steady::duration>(core_->options().poll_interval);
    if (ask_again_in_us > 0) after = std::min<steady::duration>(after, std::chrono::microseconds(ask_again_in_us));
    if (!poll_timer_) poll_timer_.emplace(strand_);
    poll_timer_->expires_after(after);
    poll_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->poll();
    });
  }
  void poll() {
    if (state_ != state::waiting || polling_) return;
    polling_ = true;
    sent_ = steady::now();
    core_->async_command(
        {"poll", id_, core_->waiter_ttl_text()}, core_->call_deadline(deadline_),
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec, reply r) {
          self->polling_ = false;
          if (self->state_ != state::waiting) return;
          if (ec == errc::closed) return self->complete(as_error(ec), leave::nothing);  // nobody will answer
          // Redis is away, or answers "not now" (CLUSTERDOWN, LOADING, BUSY...): ask again later, until the deadline.
          if (ec || r.is_transient_error()) return self->arm();
          const auto v = integers(r, 1);
          if (v && (*v)[0] == queued) return self->arm(ask_again_in(r));
          if (v && (*v)[0] == unknown) return self->requeue();  // our place expired: queue again
          const auto l = integers(r, 5);
          if (v && (*v)[0] == granted && l) {
            return self->complete(self->core_->make_lease(self->id_, *l, self->sent_), leave::nothing);
          }
          self->complete(script_error(), leave::queue);
        }));
  }
  enum class leave : std::uint8_t {
    nothing,  // granted, or failed with nothing of it left in Redis (or nobody left to ask)
    queue,    // failed while its request may be queued (or granted) in Redis: it leaves, and a grant goes back
  };
  // The one completion: the outcome `r` to the caller, counted, once; then the request leaves the queue when `how`
  // says so, and the completion is told settled() once nothing of it is left in Redis.
  void complete(semaphore_result r, leave how) {
    if (state_ != state::waiting) return;
    state_ = how == leave::queue ? state::leaving : state::completed;
    core_->waits().remove(ticket_);
    stop_timers();
    if (how == leave::nothing) core_->unregister_waiter(id_);
    core_->gauges().wait_ends();
    if (timed_) core_->record(r, n_, core_->since(start_));  // before the completion: the caller sees it counted
    if (r) {
      completion_->complete({}, std::move(r.value()));
    } else {
      completion_->complete(r.error(), lease());
    }
    if (how == leave::queue) return core_->abandon(id_, [c = completion_] { c->settled(); });
    completion_->settled();
  }
  void complete(admit::errc e, leave how) { complete(semaphore_result(e), how); }
  void complete(std::error_code ec, leave how) { complete(semaphore_result(ec), how); }
  void stop_timers() {
    if (poll_timer_) poll_timer_->cancel();
    if (deadline_timer_) deadline_timer_->cancel();
  }

  std::shared_ptr<semaphore_core> core_;
  std::int64_t n_;
  std::size_t priority_;  // an admission's class
  bool now_only_;         // the deadline had passed when it was asked for: one call, never queued
  std::optional<steady::time_point> deadline_;
  bool timed_;
  std::shared_ptr<acquire_completion> completion_;
  breaker_pass pass_ = breaker_pass::call;  // of the acquire call in flight
  asio::strand<asio::any_io_executor> strand_;
  // Made when first armed: a request granted at once never needs either (making a timer looks up its service under
  // the io_context's lock).
  std::optional<asio::steady_timer> poll_timer_;
  std::optional<asio::steady_timer> deadline_timer_;
  std::string id_;
  steady::time_point sent_;
  open_waits::ticket ticket_ = 0;  // in the semaphore's open waits: written and read under their lock only
  // Touched on strand_ only (state_ also by the destructor, when nothing else can).
  enum class state : std::uint8_t {
    waiting,    // from the start to the outcome: counted in the semaphore's waiting gauge
    completed,  // the outcome given, nothing left in Redis to undo
    leaving,    // the outcome given without a lease (deadline, cancellation, unreadable reply): leaving the queue
  };
  state state_ = state::waiting;
  bool polling_ = false;      // a poll call in flight (while waiting)
  bool told_queued_ = false;  // options.on_queued has been told id_
  steady::time_point start_;  // for the metrics: the call (zero when they are not enabled)
};

namespace {

// The completion of a blocking wait. The waiting thread ends the wait itself at its deadline or stop, whether or not
// the executor runs; the first outcome claimed is the result. A lease that loses the claim is kept for the waiting
// thread to release (or released by its destructor if nobody takes it).
class blocking_completion final : public acquire_completion {
 public:
  std::future<semaphore_result> get_future() { return promise_.get_future(); }
  bool claim(semaphore_result r) {
    if (claimed_.exchange(true)) return false;
    promise_.set_value(std::move(r));
    return true;
  }
  void complete(std::error_code ec, lease l) override {
    if (claim(ec ? semaphore_result(ec) : semaphore_result(std::move(l)))) return;
    const admit::detail::lock_guard lock(mutex_);
    orphan_ = std::move(l);
  }
  void settled() override {
    std::shared_ptr<semaphore_core> tracked;
    {
      const admit::detail::lock_guard lock(mutex_);
      settled_ = true;
      tracked = std::move(tracked_);
    }
    cv_.notify_all();
    if (tracked) tracked->background().end(true, {});
  }
  // The waiting thread ended the wait: until the operation is settled (its leave answered), that counts as background
  // work of `core`, so that a shutdown() right after the wait returned waits for the leave even when the executor has
  // not yet run the cancel that sends it.
  void track(std::shared_ptr<semaphore_core> core) {
    const admit::detail::lock_guard lock(mutex_);
    if (settled_) return;
    core->background().begin();
    tracked_ = std::move(core);
  }
  // Waits until the operation is settled (it left the queue, or completed) or `deadline`; then the lease that lost
  // the claim, if any.
  lease wait_settled(steady::time_point deadline) {
    admit::detail::unique_lock lock(mutex_);
    cv_.wait_until(lock.native(), deadline, [&]() ADMIT_REQUIRES(mutex_) { return settled_; });
    return std::move(orphan_);
  }

 private:
  std::atomic<bool> claimed_{false};
  std::promise<semaphore_result> promise_;
  admit::detail::mutex mutex_;
  std::condition_variable cv_;
  bool settled_ ADMIT_GUARDED_BY(mutex_) = false;
  lease orphan_ ADMIT_GUARDED_BY(mutex_);
  std::shared_ptr<semaphore_core> tracked_ ADMIT_GUARDED_BY(mutex_);  // counted in its background work (track)
};

}  // namespace

semaphore_result semaphore_core::acquire(std::int64_t n, std::optional<steady::time_point> deadline,
                                         const std::stop_token& stop, std::size_t priority) {
  const steady::time_point start = record_start();
  if (stop.stop_requested()) {  // nothing sent
    record(make_error_code(admit::errc::cancelled), n, since(start));
    return semaphore_result(admit::errc::cancelled);
  }
  auto completion = std::make_shared<blocking_completion>();
  auto done = completion->get_future();
  auto op = std::make_shared<async_acquire_op>(shared_from_this(), n, deadline, completion, false, priority);
  deadline = op->deadline();  // (a deadline already passed: the one call's bound)
  op->start();
  {
    // The stop and the deadline end the wait here and now, even with a call in flight; the operation then leaves
    // the queue (or releases a grant that raced) on the executor.
    const std::stop_callback on_stop(stop, [&] {
      if (completion->claim(semaphore_result(admit::errc::cancelled))) {
        completion->track(shared_from_this());
        op->cancel(admit::errc::cancelled);
      }
    });
    if (deadline && done.wait_until(*deadline) == std::future_status::timeout &&
        completion->claim(semaphore_result(admit::errc::timeout))) {
      completion->track(shared_from_this());
      op->cancel(admit::errc::timeout);
    }
    done.wait();
  }
  semaphore_result r = done.get();
  const steady::duration waited = since(start);
  if (!r) {
    // Not granted: before returning, the request leaves the queue (and a grant that raced with the stop or the
    // deadline goes back), waited for at most options().timeout — or, after the deadline, at most leave_wait, so
    // that a slow or silent Redis cannot hold the caller past its deadline. What is not answered by then stays
    // background work.
    const bool past_deadline = deadline && r.error() == admit::errc::timeout;
    const steady::duration wait_for_leave =
        past_deadline ? std::min<steady::duration>(leave_wait, options_.timeout) : steady::duration(options_.timeout);
    lease raced = completion->wait_settled(admit::detail::deadline_after<steady>(steady::now(), wait_for_leave));
    // A grant that raced goes back unused, as a leave gives back a grant that came first: with its tokens.
    if (std::string id = raced.detach(); !id.empty()) abandon(id);
  }
  record(r, n, waited);  // after the clean-up: what the hook throws reaches the caller with nothing left behind
  return r;
}

std::shared_ptr<async_acquire_op> make_async_acquire(const std::shared_ptr<semaphore_core>& core, std::int64_t n,
                                                     std::optional<steady::time_point> deadline,
                                                     std::shared_ptr<acquire_completion> completion,
                                                     std::size_t priority) {
  return std::make_shared<async_acquire_op>(core, n, deadline, std::move(completion), true, priority);
}
void start(const std::shared_ptr<async_acquire_op>& op) { op->start(); }
void start_try_acquire(const std::shared_ptr<semaphore_core>& core, std::int64_t n,
                       std::shared_ptr<acquire_completion> completion, std::size_t priority) {
  core->async_try_acquire(n, priority, [completion = std::move(completion)](semaphore_result r) {
    if (r) {
      completion->complete({}, std::move(*r));
    } else {
      completion->complete(r.error(), lease());
    }
    completion->settled();
  });
}
void cancel(const std::shared_ptr<async_acquire_op>& op) { op->cancel(); }
asio::any_io_executor executor_of(const semaphore_core& core) noexcept { return core.executor(); }

}  // namespace admit::redis::detail
