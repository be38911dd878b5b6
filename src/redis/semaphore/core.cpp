// The semaphore's script calls, its one error helper, and the background work that shutdown() waits for: releases and
// queue-leaves whose caller does not wait (a lease destroyed on the connection's executor thread, a cancelled
// async_acquire, a grant that raced with a cancellation). See core.hpp.
#include "core.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <future>
#include <iterator>
#include <limits>
#include <span>
#include <type_traits>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/limiter_result.hpp"
#include "functions.hpp"
#include "hash_tag.hpp"

namespace admit::redis {

namespace detail {

const script& semaphore_script() { return function_script(admit_function::semaphore); }

std::error_code script_error() noexcept { return make_error_code(errc::unexpected_reply); }

std::string key_prefix(const std::string& name) { return hash_tag(name).append(":"); }

std::chrono::milliseconds default_waiter_ttl(const semaphore_options& o) { return 3 * o.poll_interval + o.timeout; }

std::vector<std::string> semaphore_keys(const std::string& prefix) {
  std::vector<std::string> keys;
  for (const char* k : {"meta", "holders", "leases", "waiting", "expiry"}) keys.push_back(prefix + k);
  return keys;
}

command script_call(const std::vector<std::string>& keys, std::size_t more_args) {
  command c;
  c.reserve(3 + keys.size() + more_args);
  c.arg("EVALSHA").arg(semaphore_script().sha1()).arg(keys.size());
  for (const auto& k : keys) c.arg(k);
  return c;
}

std::int64_t to_us(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

std::optional<std::vector<std::int64_t>> integers(const reply& r, std::size_t count) {
  if (!r.is_array() || r.elements().size() < count) return std::nullopt;
  std::vector<std::int64_t> v;
  v.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!r.elements()[i].is_integer()) return std::nullopt;
    v.push_back(r.elements()[i].integer());
  }
  return v;
}

semaphore_core::semaphore_core(client& c, std::unique_ptr<client> waker, std::function<void()> close_waker,
                               std::string semaphore_name, std::string definition_text, semaphore_options o,
                               std::vector<std::string> more_keys, std::string prefix)
    : conn_(c),
      link_(c),
      name_(std::move(semaphore_name)),
      options_(std::move(o)),
      prefix_(prefix.empty() ? key_prefix(name_) : std::move(prefix)),
      keys_(semaphore_keys(prefix_)),
      // Without a waker nobody reads a wake list: '-' tells the script to push nothing (semaphore.lua's push_wake).
      wake_key_(waker ? prefix_ + "wake:" + random_id() : std::string("-")),
      batcher_(
          [this](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point> deadline,
                 op_batcher::completion answered) {
            asio::async_compose<op_batcher::completion, void(boost::system::error_code, reply)>(
                evalsha_op{&link_, &semaphore_script(), make(ops), deadline}, answered, link_.get_executor());
          },
          [executor = link_.get_executor()](std::function<void()> task) { asio::post(executor, std::move(task)); },
          // An answer's completions reach their callers' handlers two turns later: a waiter's strand, then the
          // handler's own post (posted_completion).
          2,
          // Two waves of calls (op_batcher.hpp).
          2),
      breaker_(options_.breaker),
      wakes_(std::make_shared<wake_registry>(std::move(waker), std::move(close_waker), wake_key_,
                                             options_.poll_interval, options_.timeout)),
      // Every lease holds its semaphore_core: the renewals need no pointer to this one.
      renewals_(renewal_schedule<lease_core>::make(c.get_executor(),
                                                   [](const renewal_schedule<lease_core>::batch& due) {
                                                     for (const auto& l : due) l->renew();
                                                   })),
      definition_(std::move(definition_text)) {
  if (options_.waiter_ttl.count() == 0) options_.waiter_ttl = default_waiter_ttl(options_);
  lease_ttl_text_ = std::to_string(to_us(options_.lease_ttl));
  // -1: no limit (the script then does not count the queue).
  max_waiters_text_ = options_.max_waiters >= static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
                          ? "-1"
                          : std::to_string(options_.max_waiters);
  waiter_ttl_text_ = std::to_string(to_us(options_.waiter_ttl));
  // Without more keys, meta's alone: the script finds the others by their names (semaphore.lua's KEYS), and each key
  // given costs Redis a string and a table slot in every call. Not on a Cluster, where Redis checks the declared keys
  // before a call runs: a key moved to another node mid-reshard must refuse the call, not fail it halfway.
  if (more_keys.empty() && dynamic_cast<const cluster*>(&c) == nullptr) {
    keys_.resize(1);
  } else {
    keys_.insert(keys_.end(), std::make_move_iterator(more_keys.begin()), std::make_move_iterator(more_keys.end()));
  }
}

std::string semaphore_core::definition_arg() const {
  std::string d = definition();
  if (options_.idle_ttl.count() > 0) d += "~" + std::to_string(to_us(options_.idle_ttl));
  return d;
}

command semaphore_core::make(const op_args& op) const {
  command c = script_call(keys_, op.size() + 1);
  c.arg(op.front()).arg(definition_arg());
  for (std::size_t i = 1; i < op.size(); ++i) c.arg(op[i]);
  return c;
}

namespace {

// The arguments of `op` that a batch sends (semaphore.lua's `batch`), by their place in `op`: an acquire, a release, a
// cancel and a poll leave out what the batch names once for all of them (the wake key, the lease and waiter TTLs, max
// waiters); any other operation sends all of its own. Each ends before `op` does when `op` has fewer (a release
// without n).
std::span<const std::size_t> batched(const semaphore_core::op_args& op) {
  static constexpr std::array<std::size_t, 6> acquire{0, 1, 2, 4, 8, 9};  // name, id, n, wait, deadline, class
  static constexpr std::array<std::size_t, 3> release{0, 1, 3};           // name, id, n
  static constexpr std::array<std::size_t, 2> by_id{0, 1};                // name, id
  if (op.front() == "acquire") return acquire;
  if (op.front() == "release") return release;
  if (op.front() == "cancel" || op.front() == "poll") return by_id;
  return {};
}

}  // namespace

command semaphore_core::make(const std::vector<op_batcher::op>& ops) const {
  if (ops.size() == 1) return make(ops.front().args);
  const auto count = [](const op_args& op, std::span<const std::size_t> kept) {
    return kept.empty() ? op.size()
                        : static_cast<std::size_t>(
                              std::count_if(kept.begin(), kept.end(), [&](std::size_t i) { return i < op.size(); }));
  };
  std::size_t args = 7;
  for (const auto& o : ops) args += 1 + count(o.args, batched(o.args));
  command c = script_call(keys_, args);
  c.arg("batch").arg(definition_arg()).arg(std::to_string(ops.size()));
  c.arg(wake_key_).arg(lease_ttl_text_).arg(max_waiters_text_).arg(waiter_ttl_text_);
  for (const auto& o : ops) {
    const auto kept = batched(o.args);
    c.arg(std::to_string(count(o.args, kept)));
    if (kept.empty()) {
      for (const auto& a : o.args) c.arg(a);
    } else {
      for (const std::size_t i : kept) {
        if (i < o.args.size()) c.arg(o.args[i]);
      }
    }
  }
  return c;
}

result semaphore_core::call(std::optional<steady::time_point> deadline, op_args op) {
  if (op.front() == "inspect") return evalsha_until(conn_, deadline, semaphore_script(), make(op));
  if (batcher_.begin_alone()) {
    // Nothing else in the way: the call of its own, waited for on this thread (no hand-off through the executor).
    struct slot {
      semaphore_core& core;
      ~slot() { core.batcher().end_alone(core.shared_from_this()); }
    } const taken{*this};
    return evalsha_until(conn_, deadline, semaphore_script(), make(op));
  }
  auto answer = std::make_shared<std::promise<result>>();
  auto answered = answer->get_future();
  batcher_.submit({std::move(op), deadline,
                   [answer](boost::system::error_code ec, reply r) {
                     answer->set_value(result{std::error_code(ec), std::move(r)});
                   }},
                  shared_from_this());
  // The call itself ends at `deadline` too; this covers an operation still queued behind unanswered calls.
  if (deadline && answered.wait_until(*deadline) == std::future_status::timeout) {
    return result{make_error_code(errc::timeout), reply()};
  }
  return answered.get();
}

semaphore_core::op_args semaphore_core::acquire_op(const std::string& id, std::int64_t n, bool wait,
                                                   std::optional<steady::time_point> deadline,
                                                   std::size_t priority) const {
  op_args op{"acquire",
             id,
             std::to_string(n),
             lease_ttl_text_,
             wait ? "1" : "0",
             max_waiters_text_,
             waiter_ttl_text_,
             wake_key_,
             deadline
                 ? std::to_string(std::max<std::int64_t>(
                       0, std::chrono::duration_cast<std::chrono::microseconds>(*deadline - steady::now()).count()))
                 : "-1"};
  if (priority != 0) op.push_back(std::to_string(priority));
  return op;
}

std::optional<semaphore_result> semaphore_core::judge(const std::string& id, const boost::system::error_code& ec,
                                                      const reply& r, steady::time_point sent) {
  if (ec) {
    abandon(id);  // it may have been queued or granted before the call failed
    return semaphore_result(as_error(ec));
  }
  const auto v = integers(r, 3);
  if (r.is_error() || !v) return semaphore_result(script_error());
  switch ((*v)[0]) {
    case granted:
      // An acquire's own grant also says what it left free (a sixth element); a poll's or a wake-up's does not.
      if (auto l = integers(r, 6) ? integers(r, 6) : integers(r, 5)) return make_lease(id, *l, sent);
      break;
    case queued:
      return std::nullopt;
    case unavailable:
      return semaphore_result(errc::would_block);
    case full:
      return semaphore_result(admit::errc::queue_full);
    case too_large:
      return semaphore_result(admit::errc::exceeds_capacity);
    case conflict:
      return semaphore_result(admit::errc::definition_conflict);
    case too_late:
      return semaphore_result(admit::errc::timeout);
    default:
      break;
  }
  return semaphore_result(script_error());
}

semaphore_result semaphore_core::make_lease(const std::string& id, const std::vector<std::int64_t>& v,
                                            steady::time_point sent) {
  // The lease lives (expiry - now) of the server's time after the reply was made, which is after `sent`: counting
  // from `sent` is a conservative local estimate of its expiry.
  const auto left_us = std::chrono::microseconds(std::max<std::int64_t>(0, v[3] - v[4]));
  auto core = std::make_shared<lease_core>(shared_from_this(), id, v[1], v[2], v[3], sent + left_us,
                                           v.size() > 5 ? std::optional<std::int64_t>(v[5]) : std::nullopt);
  // A grant found late (a lost wake-up, a slow poll) has less than lease_ttl left: the first renewal comes in time.
  if (options_.auto_renew) {
    schedule_renewal(
        core, steady::now() +
                  std::min<steady::duration>(
                      std::max<steady::duration>(options_.lease_ttl / 3, std::chrono::milliseconds(1)), left_us / 2));
  }
  return semaphore_result(lease(std::move(core)));
}

semaphore_result semaphore_core::degrade(std::int64_t n, std::error_code why) {
  if (options_.on_failure == failure_policy::fail_open) {
    std::int64_t held = local_held_.load();
    while (n <= options_.local_cap - held) {  // not held + n: n may be near INT64_MAX
      if (local_held_.compare_exchange_weak(held, held + n)) {
        return semaphore_result(lease(
            std::make_shared<lease_core>(shared_from_this(), "local:" + random_id(), n, lease_core::local_grant{})));
      }
    }
  }
  return semaphore_result(why);
}

namespace {

// The outcome an acquisition's error means: an admit::errc's (to_outcome), an Asio cancellation cancelled, anything
// else failed.
acquire_outcome outcome_of(const std::error_code& ec) noexcept {
  if (ec.category() == admit::error_category()) return to_outcome(static_cast<admit::errc>(ec.value()));
  return ec == std::errc::operation_canceled ? acquire_outcome::cancelled : acquire_outcome::failed;
}

}  // namespace

void semaphore_core::record(const semaphore_result& r, std::int64_t n, steady::duration wait) {
  limiter_metrics* m = metrics_.load(std::memory_order_acquire);
  if (!m) return;
  if (!r) return m->record(outcome_of(r.error()), n, wait);
  // A local lease: Redis could not answer and the failure policy admitted (see "Metrics" in semaphore.hpp).
  m->record(r->core_ && r->core_->local() ? acquire_outcome::failed : acquire_outcome::admitted, n, wait);
}

void semaphore_core::record(std::error_code ec, std::int64_t n, steady::duration wait) {
  if (limiter_metrics* m = metrics_.load(std::memory_order_acquire)) m->record(outcome_of(ec), n, wait);
}

void semaphore_core::install_metrics(limiter_metrics::event_handler on_event) {
  auto m = std::make_unique<limiter_metrics>(std::move(on_event));
  const admit::detail::lock_guard lock(metrics_mutex_);
  metrics_kept_.reserve(metrics_kept_.size() + 1);  // may throw: before anything changes
  metrics_.store(m.get(), std::memory_order_release);
  metrics_kept_.push_back(std::move(m));
}

semaphore_result semaphore_core::try_acquire(std::int64_t n, std::size_t priority) {
  const steady::time_point start = record_start();
  semaphore_result r = try_acquire_once(n, priority);
  record(r, n, since(start));
  return r;
}

semaphore_result semaphore_core::try_acquire_once(std::int64_t n, std::size_t priority) {
  const breaker_pass pass = breaker_.allow(steady::now());
  if (pass == breaker_pass::refused) return degrade(n, make_error_code(errc::circuit_open));
  const std::string id = random_id();
  const steady::time_point sent = steady::now();
  const result r = call(call_deadline({}), acquire_op(id, n, false, std::nullopt, priority));
  return try_outcome(id, r.error, r.value, sent, pass, n);
}

void semaphore_core::async_try_acquire(std::int64_t n, std::size_t priority,
                                       std::function<void(semaphore_result)> done) {
  const steady::time_point start = record_start();
  auto finish = [self = shared_from_this(), n, start, done = std::move(done)](semaphore_result r) {
    self->record(r, n, self->since(start));
    done(std::move(r));
  };
  const breaker_pass pass = breaker_.allow(steady::now());
  if (pass == breaker_pass::refused) return finish(degrade(n, make_error_code(errc::circuit_open)));
  std::string id = random_id();
  op_args op = acquire_op(id, n, false, std::nullopt, priority);
  async_command(
      std::move(op), call_deadline({}),
      [self = shared_from_this(), id = std::move(id), sent = steady::now(), pass, n, finish = std::move(finish)](
          boost::system::error_code ec, reply r) { finish(self->try_outcome(id, ec, r, sent, pass, n)); });
}

semaphore_result semaphore_core::try_outcome(const std::string& id, const boost::system::error_code& ec, const reply& r,
                                             steady::time_point sent, breaker_pass pass, std::int64_t n) {
  breaker_.report(as_error(ec), pass, steady::now());
  if (is_outage(as_error(ec))) {
    (void)judge(id, ec, r, sent);  // leaves whatever the call may have done
    return degrade(n, as_error(ec));
  }
  if (auto done = judge(id, ec, r, sent)) return std::move(*done);
  abandon(id);  // queued although told not to wait: a script out of step with this client
  return semaphore_result(script_error());
}

semaphore_core::release_answer semaphore_core::answer_to_release(std::error_code ec, const reply& r) {
  using status = lease::release_status;
  if (ec) return {status::failed, ec};
  const auto v = integers(r, 1);
  if (!v) return {status::failed, script_error()};
  deliver_grants(r, 3);  // to this object's waiters: no wake-up round trip
  return {(*v)[0] == granted ? status::released : status::not_held, {}};
}

// Through the executor, as an asynchronous release: the answer is read there, and the grants it carries reach this
// object's waiters there and then, before this thread wakes — a hand-off does not wait for the releasing thread to be
// scheduled again.
semaphore_core::release_answer semaphore_core::release_now(const std::string& id, std::int64_t n) {
  const auto deadline = call_deadline({});
  auto answer = std::make_shared<std::promise<release_answer>>();
  auto answered = answer->get_future();
  send_release(id, n, deadline, true, [answer](const release_answer& a) { answer->set_value(a); });
  if (deadline && answered.wait_until(*deadline) == std::future_status::timeout) {
    return {lease::release_status::failed, make_error_code(errc::timeout)};
  }
  return answered.get();
}

void semaphore_core::release_async(const std::string& id, std::int64_t n, std::function<void(release_answer)> then) {
  background_.begin();
  send_release(id, n, call_deadline({}), true, [self = shared_from_this(), then = std::move(then)](release_answer a) {
    // The caller's completion first: a shutdown that ends with this must find it posted already.
    if (then) then(a);
    self->background_.end(a.first != lease::release_status::failed, a.second);
  });
}

// A connection lost under the call (it reconnects) is asked once more within the same deadline: releasing is
// idempotent (a release that did run makes the second answer "not held"), and a release lost here would hold the
// permits until the lease expires.
void semaphore_core::send_release(const std::string& id, std::int64_t n, std::optional<steady::time_point> deadline,
                                  bool may_retry, std::function<void(release_answer)> then) {
  async_command(n > 0 ? op_args{"release", id, wake_key_, std::to_string(n)} : op_args{"release", id, wake_key_},
                deadline,
                [self = shared_from_this(), id, n, deadline, may_retry, then = std::move(then)](
                    boost::system::error_code ec, reply r) mutable {
                  const std::error_code e = ec ? as_error(ec) : std::error_code();
                  if (may_retry && (e == errc::connection_lost || e == errc::outcome_unknown)) {
                    return self->send_release(id, n, deadline, false, std::move(then));
                  }
                  // Delivered: Redis answered (released, or it no longer had the lease: nothing left to give back).
                  then(self->answer_to_release(e, r));
                });
}

void semaphore_core::release_before_return(const std::string& id, std::int64_t n) {
  if (running_in_this_thread(link_.get_executor())) return release_async(id, n);
  auto answered = std::make_shared<std::promise<void>>();
  auto f = answered->get_future();
  release_async(id, n, [answered](const release_answer&) { answered->set_value(); });
  // Not answered by then: it stays counted as background work (shutdown() can still wait for it).
  (void)f.wait_for(options_.timeout);
}

void semaphore_core::abandon(const std::string& id, std::function<void()> then) {
  unregister_waiter(id);
  background_.begin();
  async_command({"cancel", id, wake_key_}, call_deadline({}),
                [self = shared_from_this(), id, then = std::move(then)](boost::system::error_code ec, reply r) mutable {
                  // The script gives back a grant that came first, whole: also when this reply is lost or comes
                  // after its deadline (a cancel that reaches Redis late still frees the permits at once).
                  const auto v = ec ? std::nullopt : integers(r, 1);
                  if (v && (*v)[0] == left) self->deliver_grants(r, 3);
                  // Never reached Redis: the waiter leaves by itself after waiter_ttl (a grant with its lease).
                  if (then) then();
                  self->background_.end(v.has_value(), ec ? as_error(ec) : script_error());
                });
}

}  // namespace detail
}  // namespace admit::redis
