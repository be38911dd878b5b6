// admit::redis::limiter — the machinery every distributed limiter shares (see limiter.hpp): validation, the script
// call's arguments, the interpretation of the common reply, the circuit breaker, the failure policies, lost-state
// detection and local token leasing.
#include "admit/redis/limiter.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>

#include "admit/gcra.hpp"
#include "admit/keyed.hpp"
#include "hash_tag.hpp"

namespace admit::redis::detail {

using steady = std::chrono::steady_clock;

class limiter_core {
 public:
  limiter_core(std::string_view algorithm, std::string name, limiter_algorithm algo, limiter_options options)
      : algorithm_(algorithm),
        name_(std::move(name)),
        // Built by count and character, not from "..." literals: GCC 12 at -O3 warns (-Wrestrict, a false
        // positive) on `"{" + name_ + "}"` and on assigning a literal to a member string here.
        detect_arg_(1, options.detect_lost_state ? '1' : '0'),
        algo_(std::move(algo)),
        options_(std::move(options)),
        breaker_(options_.breaker) {
    epoch_key_ = hash_tag(name_);
    prefix_ = epoch_key_;
    prefix_.push_back(':');
    if (options_.on_failure == failure_policy::local_fallback && !algo_.inf) {
      const double per_second = algo_.fallback_rate.per_second() * options_.fallback_share;
      const auto burst = std::max<std::int64_t>(
          1,
          static_cast<std::int64_t>(std::floor(static_cast<double>(algo_.fallback_burst) * options_.fallback_share)));
      keyed_options ko;
      ko.max_keys = options_.fallback_max_keys;
      fallback_ = std::make_unique<keyed<admit::gcra>>(rate::per_second(per_second), burst, ko);
    }
  }

  // Members are the free functions' implementation; see limiter.hpp.
  limiter_plan before(std::string_view key, std::int64_t n);
  limiter_result after(std::string_view key, std::int64_t n, const limiter_plan& plan,
                       const boost::system::error_code& ec, const reply& r);

  // One decision waiting for, or riding in, a script call.
  struct batch_entry {
    std::shared_ptr<request_base> req;
    std::string state_key;
    std::int64_t n, k;
    std::optional<steady::time_point> deadline;
  };
  static void submit(const std::shared_ptr<limiter_core>& self, client& conn, batch_entry entry);

  std::string algorithm_;
  std::string name_;
  std::string prefix_;
  std::string epoch_key_;
  std::string detect_arg_;
  limiter_algorithm algo_;
  limiter_options options_;
  circuit_breaker breaker_;
  std::unique_ptr<keyed<admit::gcra>> fallback_;

  struct counters {
    std::atomic<std::uint64_t> decisions{0}, redis{0}, leased{0}, failures{0}, circuit_refused{0}, lost_state{0},
        circuit_opened{0};
  } counters_;

 private:
  struct parsed_reply {
    bool admitted;
    std::int64_t granted, remaining, wait, reset, now, seq;
    std::string epoch;
  };
  std::optional<parsed_reply> parse(const reply& r, std::int64_t n, std::int64_t k) const;
  limiter_result failed(std::string_view key, std::int64_t n, boost::system::error_code ec, std::string message);
  bool note_epoch(const parsed_reply& p);
  void lease_surplus(std::string_view key, std::int64_t surplus);
  void emit(limiter_event_kind kind, std::string_view key, boost::system::error_code ec) const;
  static void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

  // Lost-state detection: what this process has seen of the epoch.
  std::mutex epoch_mutex_;
  std::string epoch_id_;
  std::int64_t epoch_seq_ = 0;       // the highest seq seen under epoch_id_
  std::int64_t epoch_seq_time_ = 0;  // the server time (µs) of the reply that carried it
  std::int64_t state_until_ = 0;     // server time (µs) until which state this process wrote must still exist

  // Batching (limiter_options::max_batch): the first decision queued schedules a flush on the client's executor;
  // every decision queued before the flush runs (the other completions of the same read, other threads' calls)
  // leaves with it.
  // A batch this large leaves at once, without waiting for the flush: the server works on it while this process
  // completes (and queues) the next decisions. 8 measured best at 64 and 512 callers on one connection (4: -10-20%,
  // 16 and 32: -5-20% on the hot key; docs/perf/redis.md).
  static constexpr std::size_t stream_batch = 8;
  static void flush(const std::shared_ptr<limiter_core>& self, client& conn);
  static void send(const std::shared_ptr<limiter_core>& self, client& conn, std::vector<batch_entry> batch);
  command batch_command(const std::vector<batch_entry>& batch) const;
  std::mutex batch_mutex_;
  std::vector<batch_entry> queued_;
  bool flush_scheduled_ = false;

  // Local token leasing: tokens this process took from Redis and has not spent, per key.
  struct lease_entry {
    std::int64_t tokens;
    steady::time_point expires;
  };
  std::mutex lease_mutex_;
  std::unordered_map<std::string, lease_entry, keyed_hash<std::string>, std::equal_to<>> leases_;
};

namespace {

bool leasing(const limiter_options& o) noexcept { return o.lease > 1; }

// Errors that say Redis is unreachable or too slow (they feed the breaker), as opposed to an answer.
bool is_outage(const boost::system::error_code& ec) noexcept {
  if (!ec) return false;
  if (ec == boost::asio::error::operation_aborted) return false;
  if (ec.category() == limiter_error_category()) return false;
  return true;
}

std::optional<steady::time_point> deadline_after(std::chrono::nanoseconds timeout) noexcept {
  const auto now = steady::now();
  if (timeout >= steady::time_point::max() - now) return std::nullopt;
  return now + std::chrono::duration_cast<steady::duration>(timeout);
}

}  // namespace

limiter_plan limiter_core::before(std::string_view key, std::int64_t n) {
  limiter_plan plan;
  plan.k = n;
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
  if (leasing(options_) && n > 0 && n <= algo_.max_n) {
    const auto now = steady::now();
    std::lock_guard lock(lease_mutex_);
    if (auto it = leases_.find(key); it != leases_.end()) {
      if (it->second.expires <= now) {
        leases_.erase(it);
      } else if (it->second.tokens >= n) {
        it->second.tokens -= n;
        limiter_result r;
        r.source = decided_by::lease;
        r.decision.admitted = true;
        r.decision.limit = algo_.limit;
        r.decision.remaining = it->second.tokens;
        if (it->second.tokens == 0) leases_.erase(it);
        bump(counters_.decisions);
        bump(counters_.leased);
        plan.done = std::move(r);
        return plan;
      }
    }
    plan.k = std::max(n, std::min(options_.lease, algo_.max_n));
  }
  plan.pass = breaker_.allow(steady::now());
  if (plan.pass == breaker_pass::refused) {
    bump(counters_.circuit_refused);
    plan.done = failed(key, n, make_error_code(limiter_errc::circuit_open), {});
    return plan;
  }
  plan.deadline = deadline_after(options_.timeout);
  return plan;
}

void limiter_core::submit(const std::shared_ptr<limiter_core>& self, client& conn, batch_entry entry) {
  std::vector<batch_entry> full;
  {
    std::lock_guard lock(self->batch_mutex_);
    self->queued_.push_back(std::move(entry));
    if (self->queued_.size() >= std::min(self->options_.max_batch, stream_batch)) {
      full.swap(self->queued_);  // the scheduled flush, if any, finds the queue empty or refilled
    } else if (self->flush_scheduled_) {
      return;
    } else {
      self->flush_scheduled_ = true;
    }
  }
  if (!full.empty()) {
    std::erase_if(full, [](const batch_entry& e) { return e.req->done(); });
    if (!full.empty()) send(self, conn, std::move(full));
    return;
  }
  boost::asio::post(conn.get_executor(), [self, &conn] { flush(self, conn); });
}

void limiter_core::flush(const std::shared_ptr<limiter_core>& self, client& conn) {
  std::vector<batch_entry> queued;
  {
    std::lock_guard lock(self->batch_mutex_);
    queued.swap(self->queued_);
    self->flush_scheduled_ = false;
  }
  // A decision completed while it waited (a cancellation, a blocking caller's deadline) is not sent.
  std::erase_if(queued, [](const batch_entry& e) { return e.req->done(); });
  if (queued.empty()) return;
  // Calls of at most max_batch decisions; and at least two calls for 16 decisions or more, so that the server decides
  // the first while this process reads the replies of the one before and queues the next (one large call would have
  // client and server take turns).
  const std::size_t max = self->options_.max_batch;
  const std::size_t calls = (queued.size() + max - 1) / max;
  const std::size_t per_call = (queued.size() + calls - 1) / calls;
  for (std::size_t first = 0; first < queued.size(); first += per_call) {
    const std::size_t last = std::min(queued.size(), first + per_call);
    std::vector<batch_entry> batch(std::make_move_iterator(queued.begin() + static_cast<std::ptrdiff_t>(first)),
                                   std::make_move_iterator(queued.begin() + static_cast<std::ptrdiff_t>(last)));
    send(self, conn, std::move(batch));
  }
}

command limiter_core::batch_command(const std::vector<batch_entry>& batch) const {
  // KEYS: the epoch, then one state key per decision; ARGV: detect, the parameters, then n and k per decision.
  command c{"EVALSHA", algo_.lua->sha1()};
  c.arg(batch.size() + 1).arg(epoch_key_);
  for (const auto& e : batch) c.arg(e.state_key);
  c.arg(detect_arg_);
  for (const auto& p : algo_.params) c.arg(p);
  for (const auto& e : batch) c.arg(e.n).arg(e.k);
  return c;
}

namespace {

// Decision i's own reply out of a batch's {r_1, ..., r_m, now, epoch_id, epoch_seq}: {r_i..., now, id, seq}, or r_i
// when it is an error reply. A reply of another shape (an error for the whole call, say) goes to every decision as it
// is, for limiter_core::after to judge.
reply member_reply(const reply& r, std::size_t i, std::size_t m) {
  if (!r.is_array() || r.elements().size() != m + 3) return r;
  const auto& e = r.elements();
  if (!e[i].is_array()) return e[i];
  std::vector<reply> one = e[i].elements();
  one.push_back(e[m]);
  one.push_back(e[m + 1]);
  one.push_back(e[m + 2]);
  return reply::array(std::move(one));
}

}  // namespace

void limiter_core::send(const std::shared_ptr<limiter_core>& self, client& conn, std::vector<batch_entry> batch) {
  std::optional<steady::time_point> deadline;
  for (const auto& e : batch) {
    if (e.deadline && (!deadline || *e.deadline < *deadline)) deadline = e.deadline;
  }
  command cmd = self->batch_command(batch);
  auto on_reply = [batch = std::move(batch)](boost::system::error_code ec, reply r) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].req->try_finish(ec, ec ? reply() : member_reply(r, i, batch.size()));
    }
  };
  boost::asio::async_compose<decltype(on_reply), void(boost::system::error_code, reply)>(
      evalsha_op{&conn, self->algo_.lua, std::move(cmd), deadline}, on_reply, conn.get_executor());
}

std::optional<limiter_core::parsed_reply> limiter_core::parse(const reply& r, std::int64_t n, std::int64_t k) const {
  // {admitted, granted, remaining, retry_after_us (-1: never), reset_after_us, now_us, epoch_id, epoch_seq}
  if (!r.is_array()) return std::nullopt;
  const auto& e = r.elements();
  if (e.size() != 8) return std::nullopt;
  for (std::size_t i : {0U, 1U, 2U, 3U, 4U, 5U, 7U}) {
    if (!e[i].is_integer()) return std::nullopt;
  }
  if (!e[6].is_string()) return std::nullopt;
  parsed_reply p{e[0].integer() == 1, e[1].integer(), e[2].integer(), e[3].integer(),
                 e[4].integer(),      e[5].integer(), e[7].integer(), e[6].str()};
  const bool shape_ok =
      (e[0].integer() == 0 || e[0].integer() == 1) && p.remaining >= 0 && p.remaining <= algo_.limit && p.wait >= -1 &&
      p.reset >= 0 && p.now > 0 && p.seq >= 0 &&
      (p.admitted ? p.wait == 0 && (n == 0 ? p.granted == 0 : p.granted >= n && p.granted <= k) : p.granted == 0);
  if (!shape_ok) return std::nullopt;
  return p;
}

limiter_result limiter_core::after(std::string_view key, std::int64_t n, const limiter_plan& plan,
                                   const boost::system::error_code& ec, const reply& r) {
  if (ec) {
    if (plan.pass == breaker_pass::probe && !is_outage(ec)) breaker_.cancel_probe();
    if (is_outage(ec) && breaker_.on_failure(steady::now(), plan.pass)) {
      bump(counters_.circuit_opened);
      emit(limiter_event_kind::circuit_opened, {}, ec);
    }
    return failed(key, n, ec, {});
  }
  // Redis answered (even an error reply proves it is there).
  if (breaker_.on_success()) emit(limiter_event_kind::circuit_closed, {}, {});
  if (r.is_error()) return failed(key, n, make_error_code(limiter_errc::error_reply), r.str());
  const auto p = parse(r, n, plan.k);
  if (!p) return failed(key, n, make_error_code(limiter_errc::unexpected_reply), {});

  limiter_result out;
  out.source = decided_by::redis;
  out.consulted = true;
  out.server_time = std::chrono::microseconds{p->now};
  out.granted = p->granted;
  out.decision.admitted = p->admitted;
  out.decision.limit = algo_.limit;
  out.decision.remaining = p->remaining;
  out.decision.retry_after =
      p->wait == -1 ? std::chrono::nanoseconds::max() : std::chrono::nanoseconds{std::chrono::microseconds{p->wait}};
  out.decision.reset_after = std::chrono::microseconds{p->reset};
  bump(counters_.decisions);
  bump(counters_.redis);
  if (p->admitted && p->granted > n) lease_surplus(key, p->granted - n);
  if (note_epoch(*p)) {
    bump(counters_.lost_state);
    emit(limiter_event_kind::lost_state, key, {});
  }
  return out;
}

bool limiter_core::note_epoch(const parsed_reply& p) {
  if (p.epoch.empty()) return false;
  std::lock_guard lock(epoch_mutex_);
  bool lost = false;
  if (epoch_id_.empty()) {
    epoch_id_ = p.epoch;
  } else if (p.epoch != epoch_id_) {
    // A new epoch: lost only if state this process wrote could still be alive (the epoch outlives every state key
    // written under it, so an epoch that expired naturally comes back only after that state is gone).
    lost = p.now < state_until_;
    epoch_id_ = p.epoch;
    epoch_seq_ = 0;
    epoch_seq_time_ = 0;
    state_until_ = 0;
  } else if (p.seq < epoch_seq_ && p.now > epoch_seq_time_) {
    // The count of admissions went back, in a later reply: writes this process saw acknowledged are gone.
    lost = true;
    epoch_seq_ = 0;
  }
  if (p.seq >= epoch_seq_) {
    epoch_seq_ = p.seq;
    epoch_seq_time_ = p.now;
  }
  if (p.granted > 0) state_until_ = std::max(state_until_, p.now + p.reset);
  return lost;
}

void limiter_core::lease_surplus(std::string_view key, std::int64_t surplus) {
  const auto expires = steady::now() + std::chrono::duration_cast<steady::duration>(options_.lease_ttl);
  std::lock_guard lock(lease_mutex_);
  auto it = leases_.find(key);
  if (it == leases_.end()) {
    if (leases_.size() >= options_.lease_max_keys) {
      const auto now = steady::now();
      std::erase_if(leases_, [&](const auto& kv) { return kv.second.expires <= now; });
      if (leases_.size() >= options_.lease_max_keys) return;  // dropped: charged but unused (only refuses more)
    }
    leases_.emplace(std::string(key), lease_entry{surplus, expires});
    return;
  }
  it->second.tokens += surplus;
  it->second.expires = expires;
}

limiter_result limiter_core::failed(std::string_view key, std::int64_t n, boost::system::error_code ec,
                                    std::string message) {
  bump(counters_.decisions);
  bump(counters_.failures);
  limiter_result r;
  r.error = ec;
  r.message = std::move(message);
  r.decision.limit = algo_.limit;
  switch (options_.on_failure) {
    case failure_policy::fail_open:
      r.source = decided_by::failure_policy;
      r.decision.admitted = true;
      break;
    case failure_policy::fail_closed:
      r.source = decided_by::failure_policy;
      r.decision.retry_after = options_.failure_retry_after;
      break;
    case failure_policy::local_fallback:
      r.source = decided_by::local_fallback;
      if (n > algo_.max_n) {
        r.decision.retry_after = std::chrono::nanoseconds::max();
      } else {
        r.decision = fallback_->decide(key, n);
      }
      break;
  }
  return r;
}

void limiter_core::emit(limiter_event_kind kind, std::string_view key, boost::system::error_code ec) const {
  if (!options_.on_event) return;
  options_.on_event(limiter_event{kind, name_, key, ec});
}

// The free functions limiter.hpp declares.

std::shared_ptr<limiter_core> make_limiter_core(std::string_view algorithm, std::string name, limiter_algorithm algo,
                                                limiter_options options) {
  const auto invalid = [&](const std::string& what) {
    throw std::invalid_argument("admit::redis::" + std::string(algorithm) + ": " + what);
  };
  check_tag_name(algorithm, name);
  if (!(options.timeout > std::chrono::nanoseconds::zero()) || options.timeout == std::chrono::nanoseconds::max()) {
    invalid("options.timeout must be positive and finite, got " + std::to_string(options.timeout.count()) + "ns");
  }
  if (options.failure_retry_after < std::chrono::nanoseconds::zero()) {
    invalid("options.failure_retry_after must not be negative, got " +
            std::to_string(options.failure_retry_after.count()) + "ns");
  }
  if (!(options.fallback_share > 0 && options.fallback_share <= 1)) {
    invalid("options.fallback_share must be in (0, 1], got " + std::to_string(options.fallback_share));
  }
  if (options.fallback_max_keys < 1) invalid("options.fallback_max_keys must be at least 1, got 0");
  if (options.lease < 0) invalid("options.lease must not be negative, got " + std::to_string(options.lease));
  if (options.lease > 1 && options.lease > algo.max_n) {
    invalid("options.lease " + std::to_string(options.lease) + " exceeds the limit " + std::to_string(algo.max_n));
  }
  if (options.lease > 1 && options.lease_ttl <= std::chrono::nanoseconds::zero()) {
    invalid("options.lease_ttl must be positive, got " + std::to_string(options.lease_ttl.count()) + "ns");
  }
  if (options.lease_max_keys < 1) invalid("options.lease_max_keys must be at least 1, got 0");
  if (options.max_batch < 1) invalid("options.max_batch must be at least 1, got 0");
  assert(algo.lua != nullptr);
  try {
    return std::make_shared<limiter_core>(algorithm, std::move(name), std::move(algo), std::move(options));
  } catch (const std::invalid_argument& e) {  // circuit_breaker_options, the fallback's rate
    invalid(std::string("options: ") + e.what());
  }
  return nullptr;  // unreachable: invalid throws
}

limiter_plan limiter_before(limiter_core& core, std::string_view key, std::int64_t n) { return core.before(key, n); }
void limiter_submit(const std::shared_ptr<limiter_core>& core, client& conn, std::shared_ptr<request_base> req,
                    std::string_view key, std::int64_t n, const limiter_plan& plan) {
  std::string state;
  state.reserve(core->prefix_.size() + key.size());
  state.append(core->prefix_).append(key);
  limiter_core::submit(core, conn, {std::move(req), std::move(state), n, plan.k, plan.deadline});
}
limiter_result limiter_after(limiter_core& core, std::string_view key, std::int64_t n, const limiter_plan& plan,
                             const boost::system::error_code& ec, const reply& r) {
  return core.after(key, n, plan, ec, r);
}
const std::string& limiter_name(const limiter_core& core) noexcept { return core.name_; }
const std::string& limiter_prefix(const limiter_core& core) noexcept { return core.prefix_; }
const limiter_options& limiter_get_options(const limiter_core& core) noexcept { return core.options_; }
std::int64_t limiter_limit(const limiter_core& core) noexcept { return core.algo_.limit; }
limiter_statistics limiter_get_statistics(const limiter_core& core) noexcept {
  const auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const auto& c = core.counters_;
  return {get(c.decisions),       get(c.redis),      get(c.leased),        get(c.failures),
          get(c.circuit_refused), get(c.lost_state), get(c.circuit_opened)};
}
breaker_state limiter_breaker_state(const limiter_core& core) noexcept { return core.breaker_.state(steady::now()); }

}  // namespace admit::redis::detail

namespace admit::redis {

limiter_result limiter::decide(std::string_view key, std::int64_t n) const {
  admit::detail::check_n("admit::redis::limiter", n);
  detail::limiter_core& core = *core_;
  const detail::limiter_plan plan = core.before(key, n);
  if (plan.done) return *plan.done;
  auto req = std::make_shared<detail::blocking_request>();
  detail::limiter_submit(core_, *client_, req, key, n, plan);
  const auto [ec, r] = req->wait(plan.deadline);
  return core.after(key, n, plan, ec, r);
}

}  // namespace admit::redis
