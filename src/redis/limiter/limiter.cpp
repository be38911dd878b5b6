// admit::redis::limiter — the core every distributed limiter shares (see limiter.hpp), assembled from small objects
// with one job each: the token leases (lease_table.hpp), the batcher (batcher.hpp) and the script call's wire format
// (script_call.hpp), the epoch tracker (epoch_tracker.hpp) and the failure handler with its circuit breaker
// (failure_handler.hpp). What is left here is the order in which a decision meets them, the counters and the events.
#include "admit/redis/limiter.hpp"
#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>

#include "admit/detail/deadline.hpp"
#include "batcher.hpp"
#include "epoch_tracker.hpp"
#include "failure_handler.hpp"
#include "hash_tag.hpp"
#include "lease_table.hpp"
#include "parameters.hpp"
#include "script_call.hpp"

namespace admit::redis::detail {

using steady = std::chrono::steady_clock;

class limiter_core {
 public:
  limiter_core(std::string name, limiter_algorithm algo, limiter_options options)
      : algo_(std::move(algo)),
        leases_(options.lease, algo_.max_n, options.lease_ttl, options.lease_max_keys),
        failures_(options, algo_),
        batcher_(options.max_batch) {
    identity_.limit = algo_.limit;
    epoch_key_ = hash_tag(name);
    identity_.prefix = epoch_key_;
    identity_.prefix.push_back(':');
    identity_.name = std::move(name);
    identity_.options = std::move(options);
  }

  limiter_core(const limiter_core&) = delete;
  limiter_core& operator=(const limiter_core&) = delete;

  // plan() and settle(), each counting the decision it ends in the metrics (when enabled).
  limiter_plan before(std::string_view key, std::int64_t n);
  void submit(const std::shared_ptr<limiter_core>& self, client& conn, batch_entry entry);
  limiter_result after(std::string_view key, std::int64_t n, const limiter_plan& plan,
                       const boost::system::error_code& ec, const reply& r);

  [[nodiscard]] const limiter_identity& identity() const noexcept { return identity_; }
  [[nodiscard]] limiter_statistics statistics() const noexcept;
  [[nodiscard]] breaker_state circuit_state() const noexcept { return failures_.state(steady::now()); }

  void enable_metrics(limiter_metrics::event_handler on_event);
  [[nodiscard]] limiter_snapshot metrics() const noexcept;
  [[nodiscard]] const wait_histogram& wait_times() const noexcept;

 private:
  class client_sink;

  limiter_plan plan(std::string_view key, std::int64_t n);
  limiter_result settle(std::string_view key, std::int64_t n, const limiter_plan& plan,
                        const boost::system::error_code& ec, const reply& r);

  limiter_result failed(std::string_view key, std::int64_t n, std::error_code ec, std::string message);
  limiter_result decided(const decision_reply& d);
  void emit(limiter_event_kind kind, std::string_view key, std::error_code ec) const;
  static void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

  limiter_identity identity_;
  std::string epoch_key_;  // "{name}"
  limiter_algorithm algo_;
  lease_table leases_;
  epoch_tracker epochs_;
  failure_handler failures_;
  batcher batcher_;
  struct counters {
    std::atomic<std::uint64_t> decisions{0}, redis{0}, leased{0}, failures{0}, circuit_refused{0}, lost_state{0},
        circuit_opened{0};
  } counters_;
  // The metrics decisions count in: null until enable_metrics, then the last one it installed. Every one installed
  // is kept until the core dies (operations in flight keep the core alive): a decision that loaded an earlier one
  // can still count in it.
  std::atomic<limiter_metrics*> metrics_{nullptr};
  admit::detail::mutex metrics_mutex_;
  std::vector<std::unique_ptr<limiter_metrics>> metrics_kept_ ADMIT_GUARDED_BY(metrics_mutex_);
};

// The batcher's sink for a real client: a call is one EVALSHA (with its NOSCRIPT retry) whose deadline is the
// earliest of its decisions'; a flush runs on the client's executor, after the handler that scheduled it.
class limiter_core::client_sink final : public batch_sink {
 public:
  client_sink(const std::shared_ptr<limiter_core>& core, client& conn) noexcept : core_(core), conn_(conn) {}

  void schedule_flush() override {
    boost::asio::post(conn_.get_executor(), [core = core_, &conn = conn_] {
      client_sink sink(core, conn);
      core->batcher_.flush(sink);
    });
  }

  void send(std::vector<batch_entry> batch) override {
    std::optional<steady::time_point> deadline;
    for (const auto& e : batch) {
      if (e.deadline && (!deadline || *e.deadline < *deadline)) deadline = e.deadline;
    }
    command cmd = batch_command(core_->algo_, core_->epoch_key_, core_->identity_.options.detect_lost_state, batch);
    auto on_reply = [batch = std::move(batch)](boost::system::error_code ec, reply r) {
      for (std::size_t i = 0; i < batch.size(); ++i) {
        batch[i].req->try_finish(ec, ec ? reply() : member_reply(r, i, batch.size()));
      }
    };
    boost::asio::async_compose<decltype(on_reply), void(boost::system::error_code, reply)>(
        evalsha_op{&conn_, core_->algo_.lua, std::move(cmd), deadline}, on_reply, conn_.get_executor());
  }

 private:
  const std::shared_ptr<limiter_core>& core_;
  client& conn_;
};

namespace {

// The one outcome a decision counts as (see "Metrics" in limiter.hpp).
acquire_outcome outcome_of(const limiter_result& r) noexcept {
  if (r.error) {
    if (r.error.category() == admit::error_category()) return to_outcome(static_cast<admit::errc>(r.error.value()));
    return r.error == std::errc::operation_canceled ? acquire_outcome::cancelled : acquire_outcome::failed;
  }
  if (r.decision.admitted) return acquire_outcome::admitted;
  return r.decision.retry_after == std::chrono::nanoseconds::max() ? acquire_outcome::exceeds_capacity
                                                                   : acquire_outcome::unavailable;
}

}  // namespace

limiter_plan limiter_core::before(std::string_view key, std::int64_t n) {
  limiter_plan p = plan(key, n);
  if (p.done) {
    // Decided without a call (rate inf, a lease, an open breaker): it did not wait.
    if (limiter_metrics* m = metrics_.load(std::memory_order_acquire)) m->record(outcome_of(*p.done), n);
  }
  return p;
}

limiter_result limiter_core::after(std::string_view key, std::int64_t n, const limiter_plan& p,
                                   const boost::system::error_code& call_error, const reply& r) {
  limiter_result out = settle(key, n, p, call_error, r);
  if (limiter_metrics* m = metrics_.load(std::memory_order_acquire))
    m->record(outcome_of(out), n, steady::now() - p.start);
  return out;
}

void limiter_core::enable_metrics(limiter_metrics::event_handler on_event) {
  auto m = std::make_unique<limiter_metrics>(std::move(on_event));
  const admit::detail::lock_guard lock(metrics_mutex_);
  metrics_kept_.reserve(metrics_kept_.size() + 1);  // may throw: before anything changes
  metrics_.store(m.get(), std::memory_order_release);
  metrics_kept_.push_back(std::move(m));
}

limiter_snapshot limiter_core::metrics() const noexcept {
  const limiter_metrics* m = metrics_.load(std::memory_order_acquire);
  return m ? m->snapshot() : limiter_snapshot{};
}

const wait_histogram& limiter_core::wait_times() const noexcept {
  static const wait_histogram none;
  const limiter_metrics* m = metrics_.load(std::memory_order_acquire);
  return m ? m->wait_times() : none;
}

limiter_plan limiter_core::plan(std::string_view key, std::int64_t n) {
  limiter_plan plan;
  if (algo_.inf) {
    bump(counters_.decisions);
    limiter_result r;
    r.source = decided_by::unlimited;
    r.decision.admitted = true;
    r.decision.limit = algo_.limit;
    r.decision.remaining = algo_.limit;
    plan.done = std::move(r);
    return plan;
  }
  const steady::time_point now = steady::now();
  if (leases_.enabled()) {
    if (const std::optional<std::int64_t> left = leases_.try_spend(key, n, now)) {
      limiter_result r;
      r.source = decided_by::lease;
      r.decision.admitted = true;
      r.decision.limit = algo_.limit;
      r.decision.remaining = *left;
      bump(counters_.decisions);
      bump(counters_.leased);
      plan.done = std::move(r);
      return plan;
    }
    if (const std::optional<steady::time_point> until = leases_.refuses(key, n, now)) {
      limiter_result r;  // Redis refused as much or less, not long ago, until `until` (lease_table.hpp)
      r.source = decided_by::lease;
      r.decision.limit = algo_.limit;
      r.decision.retry_after = *until - now;
      r.decision.reset_after = r.decision.retry_after;  // not full before it can admit again
      bump(counters_.decisions);
      plan.done = std::move(r);
      return plan;
    }
  }
  plan.k = leases_.take(n);
  plan.pass = failures_.allow(now);
  if (plan.pass == breaker_pass::refused) {
    bump(counters_.circuit_refused);
    plan.done = failed(key, n, make_error_code(errc::circuit_open), {});
    return plan;
  }
  // From the `now` read at the start on purpose: limiter_options::timeout counts from the decision's start, so the
  // time spent waiting for the lease table's mutex (a full table is swept under it) counts against it.
  plan.deadline = admit::detail::optional_deadline_after<steady>(now, identity_.options.timeout);
  plan.start = now;
  return plan;
}

void limiter_core::submit(const std::shared_ptr<limiter_core>& self, client& conn, batch_entry entry) {
  client_sink sink(self, conn);
  batcher_.submit(std::move(entry), sink);
}

limiter_result limiter_core::settle(std::string_view key, std::int64_t n, const limiter_plan& plan,
                                    const boost::system::error_code& call_error, const reply& r) {
  if (call_error) {
    const std::error_code ec = admit::asio::from_error_code(call_error);  // a cancellation is admit::errc::cancelled
    if (failures_.report(ec, plan.pass, steady::now()) == breaker_change::opened) {
      bump(counters_.circuit_opened);
      emit(limiter_event_kind::circuit_opened, {}, ec);
    }
    return failed(key, n, ec, {});
  }
  // Redis answered (even an error reply proves it is there).
  if (failures_.report({}, plan.pass, steady::now()) == breaker_change::closed)
    emit(limiter_event_kind::circuit_closed, {}, {});
  if (r.is_error()) return failed(key, n, make_error_code(errc::error_reply), r.str());
  const std::optional<decision_reply> d = parse_decision(r, n, plan.k, algo_.limit);
  if (!d) return failed(key, n, make_error_code(errc::unexpected_reply), {});

  bump(counters_.decisions);
  bump(counters_.redis);
  if (d->admitted && d->granted > n) leases_.add(key, d->granted - n, steady::now());
  if (!d->admitted && d->retry_after_us > 0 && !identity_.options.charge_refused) {
    // Until a whole lease (k tokens) has refilled, from the decision's start (the server decided later): asked
    // sooner, Redis would grant fewer than k, and the next request would ask again at once.
    // The lease's refill is capped at a second: on a slow rate, waiting for a whole lease would refuse for long what
    // Redis would admit.
    const std::int64_t until_us = d->retry_after_us + std::min<std::int64_t>((plan.k - n) * algo_.refill_us, 1'000'000);
    leases_.refused(key, n, plan.start + std::chrono::microseconds(until_us), steady::now());
  }
  // A refusal of n > 0 writes when refusals are charged (limiter_options::charge_refused).
  const bool wrote = d->granted > 0 || (identity_.options.charge_refused && !d->admitted && n > 0);
  if (epochs_.observe({d->epoch_id, d->epoch_seq, d->now_us, wrote, d->reset_after_us})) {
    bump(counters_.lost_state);
    emit(limiter_event_kind::lost_state, key, {});
  }
  return decided(*d);
}

limiter_result limiter_core::decided(const decision_reply& d) {
  limiter_result out;
  out.source = decided_by::redis;
  out.consulted = true;
  out.server_time = std::chrono::microseconds{d.now_us};
  out.granted = d.granted;
  out.decision.admitted = d.admitted;
  out.decision.limit = algo_.limit;
  out.decision.remaining = d.remaining;
  out.decision.retry_after = d.retry_after_us == -1
                                 ? std::chrono::nanoseconds::max()
                                 : std::chrono::nanoseconds{std::chrono::microseconds{d.retry_after_us}};
  out.decision.reset_after = std::chrono::microseconds{d.reset_after_us};
  return out;
}

limiter_result limiter_core::failed(std::string_view key, std::int64_t n, std::error_code ec, std::string message) {
  bump(counters_.decisions);
  bump(counters_.failures);
  return failures_.decide(key, n, ec, std::move(message), steady::now());
}

void limiter_core::emit(limiter_event_kind kind, std::string_view key, std::error_code ec) const {
  if (!identity_.options.on_event) return;
  identity_.options.on_event(limiter_event{kind, identity_.name, key, ec});
}

limiter_statistics limiter_core::statistics() const noexcept {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const auto& c = counters_;
  return {get(c.decisions),       get(c.redis),      get(c.leased),        get(c.failures),
          get(c.circuit_refused), get(c.lost_state), get(c.circuit_opened)};
}

// The free functions limiter.hpp declares.

std::shared_ptr<limiter_core> make_limiter_core(std::string_view algorithm, std::string name, limiter_algorithm algo,
                                                limiter_options options) {
  check_limiter_options(algorithm, name, algo, options);
  assert(algo.lua != nullptr);
  if (options.charge_refused) algo.params.back() = "1";
  try {
    return std::make_shared<limiter_core>(std::move(name), std::move(algo), std::move(options));
  } catch (const std::invalid_argument& e) {  // circuit_breaker_options, the fallback's rate
    throw std::invalid_argument("admit::redis::" + std::string(algorithm) + ": options: " + e.what());
  }
}

limiter_plan limiter_before(limiter_core& core, std::string_view key, std::int64_t n) { return core.before(key, n); }
void limiter_submit(const std::shared_ptr<limiter_core>& core, client& conn, std::shared_ptr<request_base> req,
                    std::string_view key, std::int64_t n, const limiter_plan& plan) {
  std::string state;
  state.reserve(core->identity().prefix.size() + key.size());
  state.append(core->identity().prefix).append(key);
  core->submit(core, conn, {std::move(req), std::move(state), n, plan.k, plan.deadline});
}
limiter_result limiter_after(limiter_core& core, std::string_view key, std::int64_t n, const limiter_plan& plan,
                             const boost::system::error_code& ec, const reply& r) {
  return core.after(key, n, plan, ec, r);
}
const limiter_identity& limiter_identity_of(const limiter_core& core) noexcept { return core.identity(); }
limiter_statistics limiter_get_statistics(const limiter_core& core) noexcept { return core.statistics(); }
breaker_state limiter_breaker_state(const limiter_core& core) noexcept { return core.circuit_state(); }
void limiter_enable_metrics(limiter_core& core, limiter_metrics::event_handler on_event) {
  core.enable_metrics(std::move(on_event));
}
limiter_snapshot limiter_get_metrics(const limiter_core& core) noexcept { return core.metrics(); }
const wait_histogram& limiter_wait_times(const limiter_core& core) noexcept { return core.wait_times(); }

}  // namespace admit::redis::detail

namespace admit::redis {

limiter_result limiter::decide(std::string_view key, std::int64_t n) const {
  admit::detail::check_n("admit::redis::limiter", n);
  detail::limiter_core& core = *core_;
  const detail::limiter_plan plan = detail::limiter_before(core, key, n);
  if (plan.done) return *plan.done;
  auto req = std::make_shared<detail::blocking_request>();
  detail::limiter_submit(core_, *client_, req, key, n, plan);
  const auto [ec, r] = req->wait(plan.deadline);
  return core.after(key, n, plan, ec, r);
}

}  // namespace admit::redis
