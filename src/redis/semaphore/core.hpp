// src/redis/semaphore/core.hpp — the state one admit::redis::semaphore object, its waits and its leases share
// (semaphore_core), and one lease's state (lease_core). Private to src/redis/semaphore/:
//   core.cpp     script calls, errors, the releases and queue-leaves nobody waits for
//   background_work.cpp  counting those until Redis answers them (what shutdown() waits for)
//   op_batcher.cpp several operations to a script call
//   lease.cpp    the lease object; releasing at scope end
//   renewal.cpp  a lease's automatic renewal (when: renewal_schedule.hpp)
//   waiter.cpp   a waiting acquisition (async_acquire_op) and the blocking waits built on it
//   wake_registry.cpp  this object's waiters by id, and the BLMPOP loop that brings each grant to its own
//   gauges.hpp   what metrics() reports without asking Redis
//   open_waits.hpp  the waits in progress, which closing the object ends
//   semaphore.cpp the public class: configuration checks, capacity, inspect
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/dispatch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/deadline.hpp"
#include "admit/detail/thread_annotations.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/redis/client/detail/random_id.hpp"
#include "admit/redis/client/script.hpp"
#include "admit/redis/semaphore.hpp"
#include "background_work.hpp"
#include "gauges.hpp"
#include "op_batcher.hpp"
#include "open_waits.hpp"
#include "renewal_schedule.hpp"
#include "wake_registry.hpp"

namespace admit::redis::detail {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

// The script's reply statuses (semaphore.lua).
enum sem_status : std::int64_t {
  granted = 0,
  queued = 1,
  unavailable = 2,
  full = 3,
  too_large = 4,
  unknown = 5,
  left = 6,
  conflict = 7,  // another definition is stored (admission)
  too_late = 8,  // the rate cannot admit it within its deadline (admission)
};

const script& semaphore_script();

// The one error for a reply the semaphore's script should not have made (an error reply, a reply of another shape):
// errc::unexpected_reply.
std::error_code script_error() noexcept;
// A client error as the std::error_code the semaphore's API speaks.
inline std::error_code as_error(const boost::system::error_code& ec) { return std::error_code(ec); }

// "{name}:", the prefix of every key of semaphore `name`.
std::string key_prefix(const std::string& name);
// The keys of semaphore.lua, in its KEYS order: `prefix` ("{name}:", key_prefix) followed by each one's name.
std::vector<std::string> semaphore_keys(const std::string& prefix);
// A waiter's time to live when semaphore_options::waiter_ttl is 0: three polls and a call's timeout, which a live
// waiter's polls always beat (the lease of a queue entry that is never renewed lives as long).
std::chrono::milliseconds default_waiter_ttl(const semaphore_options& o);
// EVALSHA of semaphore.lua with `keys` (semaphore_keys); the caller appends ARGV, room for `more_args` of them kept.
command script_call(const std::vector<std::string>& keys, std::size_t more_args = 0);
std::int64_t to_us(std::chrono::milliseconds d);
// A reply {status, ...} whose first `count` elements are integers; nullopt for any other shape.
std::optional<std::vector<std::int64_t>> integers(const reply& r, std::size_t count);

class lease_core;

class semaphore_core : public std::enable_shared_from_this<semaphore_core> {
 public:
  // What a wake-up says (wake_registry::grant): the grant as a granted reply {0, n, token, expiry_us, now_us}, or
  // empty when it could not be read (the waiter then asks with a poll).
  using grant_reply = wake_registry::grant;

  // `waker`: a client of the same server(s) of its own, for the blocking BLMPOP; `close_waker` closes it.
  // `definition`: the script's ARGV[2], a semaphore's capacity or an admission's "capacity/interval/burst[/classes]";
  // `more_keys`: the keys after the semaphore's five (an admission's with classes: its waiters, its classes' queues).
  // `prefix`: the keys' common prefix, "{name}:" when empty (a rate limiter's queue has its own). A null `waker`: no
  // wake-up loop (the waiters learn of grants by their polls).
  semaphore_core(client& c, std::unique_ptr<client> waker, std::function<void()> close_waker,
                 std::string semaphore_name, std::string definition, semaphore_options o,
                 std::vector<std::string> more_keys = {}, std::string prefix = {});
  semaphore_core(const semaphore_core&) = delete;
  semaphore_core& operator=(const semaphore_core&) = delete;

  // ---- script calls (core.cpp) ----
  // An operation of semaphore.lua: its name, then its own arguments. The calls below go through `batcher`, but for
  // async_command_alone.
  using op_args = std::vector<std::string>;
  // The script call of `op` alone; the one running `ops` (one: its own call; more: a `batch` call).
  command make(const op_args& op) const;
  command make(const std::vector<op_batcher::op>& ops) const;
  // The operation `op`, blocking until `deadline` (not on the connection's executor thread): a call of its own when
  // `batcher` has a slot free and nothing waits, else through it. inspect is always sent alone (it must not create
  // the semaphore, which a batch would).
  result call(std::optional<steady::time_point> deadline, op_args op);
  // The operation `op`, completing `handler(error_code, reply)` through its associated executor (the connection's by
  // default; dispatched: inline when the answering thread may run it), never from within this call.
  template <class Handler>
  void async_command(op_args op, std::optional<steady::time_point> deadline, Handler&& handler) {
    auto h = std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
    batcher_.submit({std::move(op), deadline,
                     [h, ex = link_.get_executor()](boost::system::error_code ec, reply r) {
                       const auto target = asio::get_associated_executor(*h, ex);
                       asio::dispatch(target, [h, ec, r = std::move(r)]() mutable { (*h)(ec, std::move(r)); });
                     }},
                    shared_from_this());
  }
  // The operation `op` in a call of its own, never batched, completing `handler` as async_command does.
  template <class Handler>
  void async_command_alone(const op_args& op, std::optional<steady::time_point> deadline, Handler&& handler) {
    asio::async_compose<Handler, void(boost::system::error_code, reply)>(
        evalsha_op{&link_, &semaphore_script(), make(op), deadline}, handler, link_.get_executor());
  }
  // now + options().timeout, or `limit` if earlier.
  std::optional<steady::time_point> call_deadline(std::optional<steady::time_point> limit) const {
    const auto d = admit::detail::deadline_after<steady>(steady::now(), options_.timeout);
    return limit ? std::min(d, *limit) : d;
  }
  // An acquire of n under `id`; waiting, with the wait's `deadline` (the script refuses at once what the rate cannot
  // admit by then).
  // `priority`: an admission's class (0 for a semaphore; only sent with classes).
  op_args acquire_op(const std::string& id, std::int64_t n, bool wait,
                     std::optional<steady::time_point> deadline = std::nullopt, std::size_t priority = 0) const;
  // What an acquire call's reply means: a result, or nullopt when the request is queued. A failed call leaves the
  // request behind on the server (queued or granted): it is abandoned.
  std::optional<semaphore_result> judge(const std::string& id, const boost::system::error_code& ec, const reply& r,
                                        steady::time_point sent);
  // A lease from a granted reply {0, n, token, expiry_us, now_us[, free_after]} to a call sent at `sent` (local time).
  semaphore_result make_lease(const std::string& id, const std::vector<std::int64_t>& v, steady::time_point sent);
  // try_acquire, counted in the metrics.
  semaphore_result try_acquire(std::int64_t n, std::size_t priority = 0);
  // The same without blocking: `done` runs once with the outcome, on the thread that read Redis's answer (inline for
  // an open breaker).
  void async_try_acquire(std::int64_t n, std::size_t priority, std::function<void(semaphore_result)> done);

  semaphore_result try_acquire_once(std::int64_t n, std::size_t priority);
  // What a non-waiting acquire of n under `id` comes to, from its call's answer (`ec`, `r`) and the breaker's `pass`:
  // the lease, the refusal, or — when Redis did not answer — the failure policy's.
  semaphore_result try_outcome(const std::string& id, const boost::system::error_code& ec, const reply& r,
                               steady::time_point sent, breaker_pass pass, std::int64_t n);

  // ---- releases (core.cpp) ----
  // What a release came to, as lease::release() returns it.
  using release_answer = std::pair<lease::release_status, std::error_code>;
  // The answer (`ec`, `r`) to a release call: released or not held (the grants it carries handed to this object's
  // waiters), or failed with the call's error or script_error() for a reply of another shape.
  release_answer answer_to_release(std::error_code ec, const reply& r);
  // Releases lease `id` of `n` permits (0: unknown, Redis looks it up) and waits for the answer, within
  // options().timeout (not on the connection's executor thread, which reads the answer: there it waits for the
  // deadline and says errc::timeout).
  release_answer release_now(const std::string& id, std::int64_t n);

  // ---- background work (core.cpp): releases and queue-leaves not waited for by their caller ----
  // Releases lease `id` of `n` permits (0: unknown, Redis looks it up) through the link; `then` runs once it is
  // answered (or failed), on the thread that read the answer. Counted until then.
  void release_async(const std::string& id, std::int64_t n, std::function<void(release_answer)> then = {});
  // The release call (asked once more on a lost connection when `may_retry`); `then` (required) runs once with the
  // answer, on the thread that read it, after the grants it carries went to this object's waiters. Not counted.
  void send_release(const std::string& id, std::int64_t n, std::optional<steady::time_point> deadline, bool may_retry,
                    std::function<void(release_answer)> then);
  // Releases `id` and waits for the answer until options().timeout from now — unless the calling thread runs the
  // connection's executor, where it cannot wait: then as release_async. Used by ~lease.
  void release_before_return(const std::string& id, std::int64_t n);
  // Leaves the queue (a grant that came first is released); `then` runs when that is done. Counted until then.
  void abandon(const std::string& id, std::function<void()> then = {});
  // The background work above, which semaphore::shutdown() drains.
  background_work& background() noexcept { return background_; }

  // ---- metrics (core.cpp; see "Metrics" in semaphore.hpp) ----
  // Counts the outcome of an acquisition of n that took `wait` from its call to its outcome (when metrics are
  // enabled): a lease is admitted (a local lease of the failure policy: failed), an error to_outcome's.
  void record(const semaphore_result& r, std::int64_t n, steady::duration wait);
  void record(std::error_code ec, std::int64_t n, steady::duration wait);
  // The start of an acquisition and the time since, for record(): no clock read when metrics are not enabled (a start
  // read before they were is zero, and so is its wait).
  steady::time_point record_start() const noexcept {
    return metrics() != nullptr ? steady::now() : steady::time_point{};
  }
  steady::duration since(steady::time_point start) const noexcept {
    if (start == steady::time_point{} || metrics() == nullptr) return steady::duration::zero();
    return steady::now() - start;
  }

  // ---- waits (waiter.cpp) ----
  // Waits in the queue until granted, `deadline` or `stop`; a wait ended by `stop` or `deadline` has left the queue
  // when this returns, unless Redis did not answer the leave within options().timeout (after a stop) or 40 ms (after
  // the deadline): the leave is then background work. Counted in the metrics.
  semaphore_result acquire(std::int64_t n, std::optional<steady::time_point> deadline, const std::stop_token& stop,
                           std::size_t priority = 0);

  // ---- wake-ups (wake_registry) ----
  // Waiters of this object, by id: `on_wake` runs when a grant for the id comes out of the wake list or a reply;
  // registering the first starts the wake-up loop.
  void register_waiter(const std::string& id, wake_registry::callback on_wake) { wakes_->add(id, std::move(on_wake)); }
  void unregister_waiter(const std::string& id) { wakes_->remove(id); }
  // Hands the grants in `r`'s elements from index `from` on ("id:n:token:expiry:now", the script's grants to waiters
  // of this object, returned to the call that made them instead of pushed on the wake list) to their waiters.
  void deliver_grants(const reply& r, std::size_t from) { wakes_->deliver(r, from); }
  // The semaphore object is destroyed: its waits in progress end with errc::closed (each leaving the queue in the
  // background), and the wake-up loop stops.
  void close() {
    closing_ = true;
    wakes_->close();
    waits_.close();
  }
  open_waits& waits() noexcept { return waits_; }

  // ---- renewals (renewal.cpp) ----
  // Renews `l` at `due` (and every lease_ttl / 3 after each renewal) until unscheduled. Thread-safe.
  void schedule_renewal(const std::shared_ptr<lease_core>& l, steady::time_point due);
  void unschedule_renewal(const lease_core& l) { renewals_->cancel(l); }

  // The script's ARGV[2] (see the constructor), which set_definition changes (admission::set_limits). Thread-safe.
  std::string definition() const {
    const admit::detail::lock_guard lock(definition_mutex_);
    return definition_;
  }
  // ARGV[2] of a call: the definition, and "~µs" after it with an idle_ttl.
  std::string definition_arg() const;
  void set_definition(std::string d) {
    const admit::detail::lock_guard lock(definition_mutex_);
    definition_ = std::move(d);
  }

  // ---- what the parts share ----
  client& conn() noexcept { return conn_; }       // for blocking calls of their own (inspect, call()'s when idle)
  client_link& link() noexcept { return link_; }  // for calls whose handlers may run after the client's destruction
  asio::any_io_executor executor() const noexcept { return link_.get_executor(); }
  const std::string& name() const noexcept { return name_; }
  const semaphore_options& options() const noexcept { return options_; }
  // The waiter TTL as a poll sends it (µs, decimal digits).
  const std::string& waiter_ttl_text() const noexcept { return waiter_ttl_text_; }
  const std::string& wake_key() const noexcept { return wake_key_; }
  bool closing() const noexcept { return closing_.load(); }
  op_batcher& batcher() noexcept { return batcher_; }
  circuit_breaker& breaker() noexcept { return breaker_; }
  // The permits in local leases (failure_policy::fail_open): taken by degrade(), given back by their leases.
  void local_released(std::int64_t n) noexcept { local_held_ -= n; }
  // The metrics acquisitions count in: null until enable_metrics, then the last one installed (each is kept until
  // the core dies: an acquisition that loaded an earlier one can still count in it).
  limiter_metrics* metrics() const noexcept { return metrics_.load(std::memory_order_acquire); }
  void install_metrics(limiter_metrics::event_handler on_event);
  // The gauges and the lost leases, kept whether or not metrics are enabled.
  semaphore_gauges& gauges() noexcept { return gauges_; }

  // The failure policy for an acquisition of `n` that Redis could not answer (`why`): a local lease, or `why`.
  semaphore_result degrade(std::int64_t n, std::error_code why);

 private:
  // Declared first: constructed before, and destroyed after, everything below that uses them.
  client& conn_;
  client_link link_;
  std::string name_;
  semaphore_options options_;
  std::string prefix_;  // of every key: the constructor's `prefix`, or "{name}:"
  // The script's KEYS: meta's alone, or all of them followed by the constructor's more_keys.
  std::vector<std::string> keys_;
  std::string wake_key_;
  // As the script reads them, made once (the constructor, once the waiter TTL's default is known): the lease TTL
  // (µs), max waiters (-1: no limit) and the waiter TTL (µs), which every acquire sends alike, and a batch once.
  std::string lease_ttl_text_, max_waiters_text_, waiter_ttl_text_;
  std::atomic<bool> closing_{false};
  op_batcher batcher_;  // every operation but inspect and renewals
  circuit_breaker breaker_;
  std::atomic<std::int64_t> local_held_{0};         // permits in local leases (failure_policy::fail_open)
  std::atomic<limiter_metrics*> metrics_{nullptr};  // see metrics(); the ones installed are kept in metrics_kept_

  std::shared_ptr<wake_registry> wakes_;  // its BLMPOP loop runs on the waker client given to the constructor
  // Each lease is in renewals_ while its lease object holds it; the due ones are renewed together (renewal.cpp).
  std::shared_ptr<renewal_schedule<lease_core>> renewals_;

  admit::detail::mutex metrics_mutex_;
  std::vector<std::unique_ptr<limiter_metrics>> metrics_kept_ ADMIT_GUARDED_BY(metrics_mutex_);

  background_work background_;
  semaphore_gauges gauges_;
  open_waits waits_;

  mutable admit::detail::mutex definition_mutex_;
  std::string definition_ ADMIT_GUARDED_BY(definition_mutex_);
};

// One lease's shared state: what the lease object, its renewal and a release in flight share. What was granted (id,
// count, token, whether local, available) is fixed at construction; the expiry (two estimates) and the state are each
// an atomic of its own, so every member may be called from any thread (a reader may see one expiry renewed and the
// other not yet).
class lease_core : public std::enable_shared_from_this<lease_core> {
 public:
  // A lease Redis granted: n permits with fencing `token`, expiring at `expiry_us` (µs, Redis's clock) and, by a
  // conservative local estimate, at `local_expiry_at`; `available` the permits Redis had free right after the grant,
  // when its reply said.
  lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, std::int64_t token,
             std::int64_t expiry_us, steady::time_point local_expiry_at, std::optional<std::int64_t> available);
  // A lease of the failure policy (fail_open), granted in this process and not by Redis: nothing of it to release or
  // renew there.
  struct local_grant {};
  lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, local_grant);

  [[nodiscard]] semaphore_core& owner() const noexcept { return *owner_; }
  [[nodiscard]] const std::string& id() const noexcept { return id_; }
  [[nodiscard]] std::int64_t count() const noexcept { return n_; }
  [[nodiscard]] std::int64_t token() const noexcept { return token_; }
  [[nodiscard]] bool local() const noexcept { return local_; }
  [[nodiscard]] std::optional<std::int64_t> available() const noexcept { return available_; }
  [[nodiscard]] std::int64_t expires_us() const noexcept { return expires_us_.load(std::memory_order_relaxed); }
  [[nodiscard]] steady::time_point local_expiry() const noexcept {
    return steady::time_point(steady::duration(local_expiry_.load(std::memory_order_relaxed)));
  }
  [[nodiscard]] lease_state state() const noexcept { return state_.load(); }

  // held -> lost, calling on_lease_lost once (and counting it in the semaphore's `lost`).
  void mark_lost();
  // Sets the state to released; returns the state before. Leaving `held` takes n from the semaphore's held permits
  // gauge.
  lease_state mark_released() noexcept;
  // Called after a successful renewal sent at `sent` (local time): the lease lives at least lease_ttl from then.
  void renewed(std::int64_t expiry_us, steady::time_point sent);
  // Sends one renewal (a call of its own, waited for no longer than the local expiry) and schedules the next.
  void renew();
  void stop_renewal() { owner_->unschedule_renewal(*this); }

 private:
  // Both of the above: a local lease is token 0, expiry 0, locally expired at its grant, `available` unknown.
  lease_core(std::shared_ptr<semaphore_core> owner, std::string id, std::int64_t n, std::int64_t token,
             std::int64_t expiry_us, steady::time_point local_expiry_at, std::optional<std::int64_t> available,
             bool local);

  const std::shared_ptr<semaphore_core> owner_;
  const std::string id_;
  const std::int64_t n_;
  const std::int64_t token_;
  const bool local_;
  const std::optional<std::int64_t> available_;
  std::atomic<std::int64_t> expires_us_;
  std::atomic<steady::rep> local_expiry_;  // conservative local estimate of the expiry (steady clock ticks)
  std::atomic<lease_state> state_{lease_state::held};
};

}  // namespace admit::redis::detail
