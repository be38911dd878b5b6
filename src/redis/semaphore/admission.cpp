// admit::redis::admission: the definition (checked, written as the script's "capacity/interval/burst", described for
// messages) and set_limits; the waits and leases are the semaphore's (core.hpp), which the script decides with the
// rate.
#include "admit/redis/admission.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "admit/redis/client/cluster.hpp"
#include "core.hpp"

namespace admit::redis {

namespace {

// The script's capacity for "no concurrency limit" (max_in_flight 0): more permits than anything can ask for, still an
// exact integer in its doubles.
constexpr std::int64_t unlimited = admission::unlimited_capacity;

struct definition {
  std::int64_t capacity = unlimited;
  std::int64_t interval_us = 0;  // 0: no rate
  std::int64_t burst = 0;

  [[nodiscard]] std::string text() const {
    return std::to_string(capacity) + "/" + std::to_string(interval_us) + "/" + std::to_string(burst);
  }
};

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("admit::redis::admission: " + what); }

definition check_limits(const admission_options& l) {
  if (l.classes.size() > 1) {
    refuse("priority classes across hosts are not supported yet: give at most one class, got " +
           std::to_string(l.classes.size()));
  }
  if (l.on_admitted) refuse("the on_admitted hook is not supported across hosts (count admissions with metrics())");
  if (l.max_in_flight < 0 || l.max_in_flight > unlimited) {
    refuse("max_in_flight must be in [0, 2^50] (0: no concurrency limit), got " + std::to_string(l.max_in_flight));
  }
  definition d;
  if (l.max_in_flight > 0) d.capacity = l.max_in_flight;
  if (l.rate.is_inf()) return d;
  if (l.rate.is_zero()) refuse("the rate must not be zero across hosts (it would never admit): give a rate or inf");
  if (l.burst < 1) refuse("burst must be at least 1 with a finite rate, got " + std::to_string(l.burst));
  // A token costs the interval rounded up to a whole microsecond: Redis's clock.
  d.interval_us = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(l.rate.interval_ns() / 1000.0)));
  if (l.burst > unlimited / d.interval_us) {
    refuse("burst " + std::to_string(l.burst) + " at rate " + l.rate.to_string() +
           " takes more than 2^50 us (35 years) to refill");
  }
  d.burst = l.burst;
  return d;
}

std::string describe_parts(const std::string& rate, std::int64_t burst, std::int64_t capacity) {
  std::string s = rate.empty() ? "no rate" : "rate " + rate + ", burst " + std::to_string(burst);
  s += capacity >= unlimited ? ", no concurrency limit" : ", max_in_flight " + std::to_string(capacity);
  return s;
}

}  // namespace

admission::admission(connection& conn, std::string name, admission_options limits, semaphore_options options)
    : semaphore_(conn, std::move(name), semaphore::defined_by{check_limits(limits).text()},
                 (options.max_waiters = std::min(options.max_waiters, limits.max_waiters), std::move(options))),
      limits_(std::move(limits)) {}

admission::admission(cluster& c, std::string name, admission_options limits, semaphore_options options)
    : semaphore_(c, std::move(name), semaphore::defined_by{check_limits(limits).text()},
                 (options.max_waiters = std::min(options.max_waiters, limits.max_waiters), std::move(options))),
      limits_(std::move(limits)) {}

void admission::check(std::size_t priority, std::int64_t n) const {
  semaphore::check_n(n);
  if (priority != 0) {
    throw std::invalid_argument("admit::redis::admission: priority must be 0 (one class), got " +
                                std::to_string(priority));
  }
}

semaphore_result admission::try_acquire(std::size_t priority, std::int64_t n) {
  check(priority, n);
  return semaphore_.try_acquire(n);
}

semaphore_result admission::try_acquire_until(time_point deadline, std::size_t priority, std::int64_t n,
                                              std::stop_token stop) {
  check(priority, n);
  return semaphore_.try_acquire_until(deadline, n, std::move(stop));
}

semaphore_result admission::acquire(std::stop_token stop, std::size_t priority, std::int64_t n) {
  check(priority, n);
  return semaphore_.acquire(n, std::move(stop));
}

std::pair<semaphore_snapshot, std::error_code> admission::inspect(std::size_t most) { return semaphore_.inspect(most); }

std::error_code admission::set_limits(admission_options limits) {
  const std::string text = check_limits(limits).text();
  detail::semaphore_core& core = *semaphore_.core_;
  const result r = core.call(core.call_deadline({}), {"set_limits", text, core.wake_key});
  if (r.error) return detail::as_error(r.error);
  if (!detail::integers(r.value, 1)) return detail::script_error();
  core.set_definition(text);
  core.deliver_grants(r.value, 3);
  const admit::detail::lock_guard lock(mutex_);
  limits_ = std::move(limits);
  return {};
}

admission_options admission::limits() const {
  const admit::detail::lock_guard lock(mutex_);
  return limits_;
}

std::string describe(const admission_options& limits) {
  const definition d = check_limits(limits);
  return describe_parts(d.interval_us == 0 ? "" : limits.rate.to_string(), d.burst, d.capacity);
}

std::string describe(const semaphore_snapshot& stored) {
  const std::string rate =
      stored.token_interval.count() == 0 ? "" : admit::rate::every(stored.token_interval).to_string();
  return describe_parts(rate, stored.burst, stored.capacity);
}

}  // namespace admit::redis
