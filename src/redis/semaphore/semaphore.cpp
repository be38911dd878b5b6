// admit::redis::semaphore, the public class: configuration checks, the constructors (the wake-up connection),
// capacity changes, inspect, shutdown. The parts are in the other files of this folder (core.hpp lists them).
#include "admit/redis/semaphore.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "admit/redis/client/cluster.hpp"
#include "admit/redis/limiter_result.hpp"
#include "core.hpp"
#include "hash_tag.hpp"

namespace admit::redis {

using detail::integers;
using detail::script_error;
using detail::semaphore_script;

// ---- semaphore ----

void check_semaphore_name(const std::string& name) { detail::check_tag_name("semaphore", name); }

namespace {

constexpr std::int64_t max_capacity = std::int64_t{1} << 50;  // exact in the script's doubles, with room

void check_capacity(std::int64_t capacity) {
  if (capacity < 0 || capacity > max_capacity) {
    throw std::invalid_argument("admit::redis::semaphore: capacity must be in [0, 2^50], got " +
                                std::to_string(capacity));
  }
}

std::pair<semaphore_snapshot, std::error_code> parse_snapshot(const result& r) {
  semaphore_snapshot s;
  if (r.error) return {s, detail::as_error(r.error)};
  // An error reply keeps its text: LOADING, BUSY or MASTERDOWN may pass by waiting, WRONGTYPE will not.
  if (r.value.is_error()) {
    s.error_reply = r.value.str();
    return {s, make_error_code(errc::error_reply)};
  }
  const auto v = integers(r.value, 1);
  if (!v) return {s, script_error()};
  if ((*v)[0] == detail::unknown) return {s, make_error_code(errc::not_found)};
  const auto head = integers(r.value, 5);
  const auto& e = r.value.elements();
  if (!head || e.size() < 9 || !e[5].is_array() || !e[6].is_array()) {
    return {s, script_error()};
  }
  s.capacity = (*head)[1];
  s.available = (*head)[2];
  s.last_fencing_token = (*head)[3];
  s.server_time = std::chrono::microseconds((*head)[4]);
  for (const reply& h : e[5].elements()) {
    const auto& f = h.elements();
    if (f.size() < 4) continue;
    s.holders.push_back({f[0].str(), f[1].integer(), f[2].integer(),
                         std::chrono::microseconds(f[3].integer() - (*head)[4]),
                         f.size() > 4 && f[4].is_integer() ? static_cast<std::size_t>(f[4].integer()) : 0});
  }
  for (const reply& w : e[6].elements()) {
    const auto& f = w.elements();
    if (f.size() < 3) continue;
    s.queue.push_back({f[0].str(), f[1].integer(), std::chrono::microseconds(f[2].integer() - (*head)[4]),
                       f.size() > 3 && f[3].is_integer() ? static_cast<std::size_t>(f[3].integer()) : 0});
  }
  s.holder_count = e[7].is_integer() ? e[7].integer() : 0;
  s.waiter_count = e[8].is_integer() ? e[8].integer() : 0;
  if (e.size() >= 12 && e[9].is_integer() && e[10].is_integer() && e[11].is_integer()) {
    s.token_interval = std::chrono::microseconds(e[9].integer());
    s.burst = e[10].integer();
    s.tokens = e[11].integer();
  }
  if (e.size() >= 13 && e[12].is_array()) {
    for (const reply& c : e[12].elements()) {
      if (!c.is_array()) continue;
      const auto& f = c.elements();
      if (f.size() == 2 && f[0].is_integer() && f[1].is_integer())
        s.classes.push_back({f[0].integer(), f[1].integer()});
    }
  }
  if (e.size() >= 14 && e[13].is_integer()) s.next_token = std::chrono::microseconds(e[13].integer());
  return {s, {}};
}

}  // namespace

namespace {

void check_options(const semaphore_options& options) {
  const auto positive = [](std::chrono::milliseconds d, const char* what) {
    if (d.count() < 1) {
      throw std::invalid_argument(std::string("admit::redis::semaphore: options.") + what +
                                  " must be at least 1 ms, got " + std::to_string(d.count()) + "ms");
    }
  };
  // At most 2^40 µs (~12.7 days): the script's microseconds stay exact and nothing overflows on the way there.
  const auto bounded = [](std::chrono::milliseconds d, const char* what) {
    if (d > std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::microseconds(std::int64_t{1} << 40))) {
      throw std::invalid_argument(std::string("admit::redis::semaphore: options.") + what +
                                  " must be at most 2^40 us (about 12.7 days), got " + std::to_string(d.count()) +
                                  "ms");
    }
  };
  positive(options.lease_ttl, "lease_ttl");
  positive(options.poll_interval, "poll_interval");
  positive(options.timeout, "timeout");
  bounded(options.lease_ttl, "lease_ttl");
  bounded(options.poll_interval, "poll_interval");
  bounded(options.timeout, "timeout");
  bounded(options.waiter_ttl, "waiter_ttl");
  bounded(options.idle_ttl, "idle_ttl");
  if (options.idle_ttl.count() < 0) {
    throw std::invalid_argument("admit::redis::semaphore: options.idle_ttl must be at least 0 ms, got " +
                                std::to_string(options.idle_ttl.count()) + "ms");
  }
  if (options.on_failure == failure_policy::local_fallback) {
    throw std::invalid_argument(
        "admit::redis::semaphore: options.on_failure must be fail_closed or fail_open, got local_fallback");
  }
  if (options.local_cap < 0) {
    throw std::invalid_argument("admit::redis::semaphore: options.local_cap must be at least 0, got " +
                                std::to_string(options.local_cap));
  }
  // A live waiter polls every poll_interval, each poll taking up to timeout: a shorter waiter_ttl would expire it.
  if (options.waiter_ttl.count() != 0 && options.waiter_ttl <= options.poll_interval + options.timeout) {
    throw std::invalid_argument("admit::redis::semaphore: options.waiter_ttl must exceed poll_interval + timeout (" +
                                std::to_string((options.poll_interval + options.timeout).count()) + "ms), got " +
                                std::to_string(options.waiter_ttl.count()) + "ms");
  }
}

}  // namespace

semaphore::defined_by semaphore::capacity_definition(std::int64_t capacity) {
  check_capacity(capacity);
  return {std::to_string(capacity), {}};
}

semaphore::semaphore(connection& conn, std::string name, std::int64_t capacity, semaphore_options options)
    : semaphore(conn, std::move(name), capacity_definition(capacity), std::move(options)) {}

semaphore::semaphore(cluster& c, std::string name, std::int64_t capacity, semaphore_options options)
    : semaphore(c, std::move(name), capacity_definition(capacity), std::move(options)) {}

semaphore::semaphore(connection& conn, std::string name, defined_by d, semaphore_options options) {
  check_semaphore_name(name);
  check_options(options);
  auto waker = std::make_unique<connection>(conn.get_executor(), conn.options());
  connection* w = waker.get();
  core_ = std::make_shared<detail::semaphore_core>(
      conn, std::move(waker), [w] { (void)w->close_for(std::chrono::nanoseconds::zero()); }, std::move(name),
      std::move(d.definition), std::move(options), std::move(d.more_keys));
}

semaphore::semaphore(cluster& c, std::string name, defined_by d, semaphore_options options) {
  check_semaphore_name(name);
  check_options(options);
  // Its own cluster client, seeded with the node this one was given: BLMPOP routes by its key, to the semaphore's slot.
  auto waker =
      std::make_unique<cluster>(c.get_executor(), std::vector<connection_options>{c.node_options()}, c.options());
  cluster* w = waker.get();
  core_ = std::make_shared<detail::semaphore_core>(
      c, std::move(waker), [w] { (void)w->close_for(std::chrono::nanoseconds::zero()); }, std::move(name),
      std::move(d.definition), std::move(options), std::move(d.more_keys));
}

semaphore::~semaphore() { core_->close(); }

void semaphore::check_n(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("admit::redis::semaphore: n must be at least 1, got " + std::to_string(n));
}
semaphore_result semaphore::try_acquire(std::int64_t n) {
  check_n(n);
  return core_->try_acquire(n);
}
semaphore_result semaphore::acquire(std::int64_t n, std::stop_token stop) {
  check_n(n);
  return core_->acquire(n, std::nullopt, stop);
}
semaphore_result semaphore::try_acquire_until(clock::time_point deadline, std::int64_t n, std::stop_token stop) {
  check_n(n);
  return core_->acquire(n, deadline, stop);
}

namespace {

// Whether `id` can name a lease of the script: the library's ids are hex digits; a ':' would not survive the queue's
// records, and a local lease's id ("local:...") is never in Redis.
bool may_be_lease_id(const std::string& id) { return !id.empty() && id.find(':') == std::string::npos; }

}  // namespace

std::pair<lease::release_status, std::error_code> semaphore::release(const std::string& lease_id) {
  if (!may_be_lease_id(lease_id)) return {lease::release_status::not_held, {}};
  return core_->release_now(lease_id, 0);
}

void semaphore::release_by_id(const std::shared_ptr<detail::semaphore_core>& core, const std::string& id,
                              std::function<void(lease::release_status, std::error_code)> done) {
  if (!may_be_lease_id(id)) return done(lease::release_status::not_held, {});
  core->release_async(id, 0, [done = std::move(done)](const detail::semaphore_core::release_answer& answer) {
    done(answer.first, answer.second);
  });
}

std::error_code semaphore::set_capacity(std::int64_t capacity) {
  check_capacity(capacity);
  const result r = core_->call(core_->call_deadline({}), {"set_capacity", std::to_string(capacity), core_->wake_key()});
  if (r.error) return detail::as_error(r.error);
  if (!integers(r.value, 1)) return script_error();
  core_->gauges().capacity_seen(capacity);
  core_->deliver_grants(r.value, 3);
  return {};
}

namespace {

// The inspect operation, for `most` holders and waiters.
detail::semaphore_core::op_args inspect_op(std::size_t most) {
  return {"inspect", std::to_string(std::max<std::size_t>(most, 1))};
}
// What an inspect call's answer says; the capacity it shows is the one the gauges report from then on.
std::pair<semaphore_snapshot, std::error_code> read_inspect(detail::semaphore_core& core, const result& r) {
  auto out = parse_snapshot(r);
  if (!out.second) core.gauges().capacity_seen(out.first.capacity);
  return out;
}

}  // namespace

std::pair<semaphore_snapshot, std::error_code> semaphore::inspect(std::size_t most) {
  return read_inspect(*core_, core_->call(core_->call_deadline({}), inspect_op(most)));
}

void semaphore::inspect_then(const std::shared_ptr<detail::semaphore_core>& core, std::size_t most,
                             std::function<void(semaphore_snapshot, std::error_code)> done) {
  core->async_command_alone(inspect_op(most), core->call_deadline({}),
                            [core, done = std::move(done)](boost::system::error_code ec, reply r) {
                              auto out = read_inspect(*core, result{std::error_code(ec), std::move(r)});
                              done(std::move(out.first), out.second);
                            });
}

void semaphore::enable_metrics(limiter_metrics::event_handler on_event) { core_->install_metrics(std::move(on_event)); }

limiter_snapshot semaphore::metrics() const noexcept {
  const limiter_metrics* m = core_->metrics();
  limiter_snapshot s = m ? m->snapshot() : limiter_snapshot{};
  core_->gauges().fill(s);
  return s;
}

const wait_histogram& semaphore::wait_times() const noexcept {
  static const wait_histogram none;
  const limiter_metrics* m = core_->metrics();
  return m ? m->wait_times() : none;
}

std::uint64_t semaphore::leases_lost() const noexcept { return core_->gauges().leases_lost(); }

std::pair<std::size_t, std::error_code> semaphore::shutdown(clock::time_point deadline) {
  return core_->background().drain(deadline);
}
std::pair<std::size_t, std::error_code> semaphore::shutdown() {
  return shutdown(clock::now() + core_->options().timeout);
}
void semaphore::when_drained(detail::semaphore_core& core, std::function<void(std::size_t, std::error_code)> done) {
  core.background().when_drained(std::move(done));
}

const std::string& semaphore::name() const noexcept { return core_->name(); }
const semaphore_options& semaphore::options() const noexcept { return core_->options(); }

std::pair<semaphore_snapshot, std::error_code> inspect_semaphore(client& conn, const std::string& name,
                                                                 std::size_t most) {
  return inspect_semaphore_until(conn, name, conn.default_deadline(), most);
}

std::pair<semaphore_snapshot, std::error_code> inspect_semaphore_until(
    client& conn, const std::string& name, std::optional<std::chrono::steady_clock::time_point> deadline,
    std::size_t most) {
  check_semaphore_name(name);
  command c = detail::script_call(detail::semaphore_keys(detail::key_prefix(name)));
  c.arg("inspect").arg("0").arg(std::to_string(std::max<std::size_t>(most, 1)));
  return parse_snapshot(evalsha_until(conn, deadline, semaphore_script(), c));
}

}  // namespace admit::redis
