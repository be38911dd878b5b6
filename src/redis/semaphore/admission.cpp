// admit::redis::admission: the definition (checked, written as the script's "capacity/interval/burst", described for
// messages) and set_limits; the waits and leases are the semaphore's (core.hpp), which the script decides with the
// rate.
#include "admit/redis/admission.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/detail/admission_classes.hpp"
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
  std::string classes;  // with more than one class: "g:ai:ab,..." (admission.lua's definition, semaphore.lua's header)
  std::size_t class_count = 1;

  [[nodiscard]] std::string text() const {
    std::string t = std::to_string(capacity) + "/" + std::to_string(interval_us) + "/" + std::to_string(burst);
    if (!classes.empty()) t += "/" + classes;
    return t;
  }
};

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("admit::redis::admission: " + what); }

// The classes' guarantees as the local admission computes them (detail/admission_classes.hpp: permits by largest
// remainder, each class's assured bucket), with the assured interval in whole microseconds.
std::string class_definition(const admission_options& l) {
  admit::detail::admission_plan plan;
  try {
    plan = admit::detail::plan_admission_classes(l, 0);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const std::string local = "admit::admission: ";
    refuse(what.rfind(local, 0) == 0 ? what.substr(local.size()) : what);
  }
  std::string text;
  for (const auto& c : plan.classes) {
    const std::int64_t ai = l.rate.is_inf() || c.assured.burst < 1 ? 0 : (c.assured.cost1 + 999) / 1000;
    if (!text.empty()) text += ",";
    text += std::to_string(c.permits) + ":" + std::to_string(ai) + ":" + std::to_string(ai == 0 ? 0 : c.assured.burst);
  }
  return text;
}

definition check_limits(const admission_options& l) {
  if (l.on_admitted) refuse("the on_admitted hook is not supported across hosts (count admissions with metrics())");
  if (l.max_in_flight < 0 || l.max_in_flight > unlimited) {
    refuse("max_in_flight must be in [0, 2^50] (0: no concurrency limit), got " + std::to_string(l.max_in_flight));
  }
  definition d;
  if (l.max_in_flight > 0) d.capacity = l.max_in_flight;
  if (!l.rate.is_inf()) {
    if (l.rate.is_zero()) refuse("the rate must not be zero across hosts (it would never admit): give a rate or inf");
    if (l.burst < 1) refuse("burst must be at least 1 with a finite rate, got " + std::to_string(l.burst));
    // A token costs the interval rounded up to a whole microsecond: Redis's clock.
    d.interval_us = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(l.rate.interval_ns() / 1000.0)));
    if (l.burst > unlimited / d.interval_us) {
      refuse("burst " + std::to_string(l.burst) + " at rate " + l.rate.to_string() +
             " takes more than 2^50 us (35 years) to refill");
    }
    d.burst = l.burst;
  }
  const std::string classes = class_definition(l);  // checks the shares, also of one class
  if (l.classes.size() > 1) {
    d.classes = classes;
    d.class_count = l.classes.size();
  }
  return d;
}

std::string describe_parts(const std::string& rate, std::int64_t burst, std::int64_t capacity) {
  std::string s = rate.empty() ? "no rate" : "rate " + rate + ", burst " + std::to_string(burst);
  s += capacity >= unlimited ? ", no concurrency limit" : ", max_in_flight " + std::to_string(capacity);
  return s;
}

// The keys after the semaphore's five: with classes, the waiters hash and the queues of classes 1, 2, ... On a
// Cluster (`cluster`) the waiters hash always, which a rate uses too (and set_limits may add one): a Cluster checks
// the keys a call declares before it runs, and refuses it while its slot moves (TRYAGAIN, ASK); a key it did not
// declare, moved already, would fail the call halfway through, its first writes made.
std::vector<std::string> more_keys(const std::string& name, std::size_t classes, bool cluster) {
  std::vector<std::string> keys;
  if (classes < 2 && !cluster) return keys;  // meta's alone: the script finds the others by their names
  keys.push_back(detail::key_prefix(name) + "waiters");
  for (std::size_t c = 1; c < classes; ++c) keys.push_back(detail::key_prefix(name) + "waiting:" + std::to_string(c));
  return keys;
}

// The script's definition and the keys after the semaphore's five.
std::pair<std::string, std::vector<std::string>> defined(const std::string& name, const admission_options& limits,
                                                         bool cluster) {
  const definition d = check_limits(limits);
  return {d.text(), more_keys(name, d.class_count, cluster)};
}

semaphore_options with_max_waiters(semaphore_options o, const admission_options& limits) {
  o.max_waiters = std::min(o.max_waiters, limits.max_waiters);
  return o;
}

}  // namespace

admission::admission(connection& conn, std::string name, admission_options limits, semaphore_options options)
    : semaphore_(conn, name, std::make_from_tuple<semaphore::defined_by>(defined(name, limits, false)),
                 with_max_waiters(std::move(options), limits)),
      classes_(std::max<std::size_t>(1, limits.classes.size())),
      limits_(std::move(limits)) {}

admission::admission(cluster& c, std::string name, admission_options limits, semaphore_options options)
    : semaphore_(c, name, std::make_from_tuple<semaphore::defined_by>(defined(name, limits, true)),
                 with_max_waiters(std::move(options), limits)),
      classes_(std::max<std::size_t>(1, limits.classes.size())),
      limits_(std::move(limits)) {}

void admission::check(std::size_t priority, std::int64_t n) const {
  semaphore::check_n(n);
  if (priority >= classes_) {
    throw std::invalid_argument("admit::redis::admission: priority " + std::to_string(priority) + " is out of range: " +
                                std::to_string(classes_) + " class(es), 0 to " + std::to_string(classes_ - 1));
  }
}

semaphore_result admission::try_acquire(std::size_t priority, std::int64_t n) {
  check(priority, n);
  return semaphore_.core_->try_acquire(n, priority);
}

semaphore_result admission::try_acquire_until(time_point deadline, std::size_t priority, std::int64_t n,
                                              std::stop_token stop) {
  check(priority, n);
  return semaphore_.core_->acquire(n, deadline, stop, priority);
}

semaphore_result admission::acquire(std::stop_token stop, std::size_t priority, std::int64_t n) {
  check(priority, n);
  return semaphore_.core_->acquire(n, std::nullopt, stop, priority);
}

std::pair<semaphore_snapshot, std::error_code> admission::inspect(std::size_t most) { return semaphore_.inspect(most); }

// (The semaphore's timeout alone: its call deadline is the sooner of the two.)
std::error_code admission::set_limits(admission_options limits) {
  return set_limits_until(std::move(limits), time_point::max());
}

std::error_code admission::set_limits_until(admission_options limits, time_point deadline) {
  if (std::max<std::size_t>(1, limits.classes.size()) != classes_) {
    refuse("set_limits keeps the number of classes (" + std::to_string(classes_) + "), got " +
           std::to_string(std::max<std::size_t>(1, limits.classes.size())));
  }
  const std::string text = check_limits(limits).text();
  detail::semaphore_core& core = *semaphore_.core_;
  const result r = core.call(core.call_deadline(deadline), {"set_limits", text, core.wake_key()});
  if (r.error) return detail::as_error(r.error);
  const auto status = detail::integers(r.value, 1);
  if (!status) return detail::script_error();
  // Another number of classes, while a lease or a waiter keeps its class's number.
  if ((*status)[0] == detail::conflict) return make_error_code(errc::definition_conflict);
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
  std::string s = describe_parts(d.interval_us == 0 ? "" : limits.rate.to_string(), d.burst, d.capacity);
  if (limits.classes.size() > 1) {
    s += ", classes";
    for (std::size_t c = 0; c < limits.classes.size(); ++c) {
      s += (c == 0 ? " " : ", ") + limits.classes[c].name + " " + admit::detail::format_double(limits.classes[c].share);
    }
  }
  return s;
}

std::string describe(const semaphore_snapshot& stored) {
  const std::string rate =
      stored.token_interval.count() == 0 ? "" : admit::rate::every(stored.token_interval).to_string();
  std::string s = describe_parts(rate, stored.burst, stored.capacity);
  if (stored.classes.size() > 1) s += ", " + std::to_string(stored.classes.size()) + " classes";
  return s;
}

}  // namespace admit::redis
