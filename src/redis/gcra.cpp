// admit::redis::gcra — configuration, the embedded script, and the interpretation of its reply (see gcra.hpp).
#include "admit/redis/gcra.hpp"

#include <admit_redis_lua/gcra_lua.hpp>
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "admit/detail/ceil_ns.hpp"
#include "admit/detail/saturating.hpp"

namespace admit::redis::detail {

namespace {

// The script's arithmetic is exact while every value stays below 2^53 µs; with now ~1.8e15 µs (2^50.6) and values up
// to now + 2·tau, tau <= 2^51 (~71 years) keeps it so until about the year 2100.
constexpr std::int64_t max_tau_us = std::int64_t{1} << 51;

[[noreturn]] void invalid(const std::string& what) { throw std::invalid_argument("admit::redis::gcra: " + what); }

admit::decision policy_decision(const gcra_settings& s) {
  admit::decision d;
  d.limit = s.burst;
  if (s.options.on_failure == failure_policy::fail_open) {
    d.admitted = true;
  } else {
    d.admitted = false;
    d.retry_after = s.options.failure_retry_after;
  }
  return d;
}

gcra_result failed(const gcra_settings& s, boost::system::error_code ec, std::string message = {}) {
  gcra_result r;
  r.decision = policy_decision(s);
  r.error = ec;
  r.message = std::move(message);
  return r;
}

std::chrono::nanoseconds us_to_ns(std::int64_t us) { return std::chrono::microseconds{us}; }

}  // namespace

std::shared_ptr<const gcra_settings> make_gcra_settings(std::string name, rate r, std::int64_t burst,
                                                        gcra_options options) {
  if (name.empty()) invalid("name must not be empty");
  if (name.find_first_of("{}") != std::string::npos) {
    invalid("name must not contain '{' or '}' (it becomes the hash tag), got \"" + name + "\"");
  }
  if (r.is_zero()) invalid("rate must not be zero (a quota that never refills would keep its keys forever)");
  if (burst < 1) invalid("burst must be at least 1, got " + std::to_string(burst));
  if (!(options.timeout > std::chrono::nanoseconds::zero()) || options.timeout == std::chrono::nanoseconds::max()) {
    invalid("options.timeout must be positive and finite, got " + std::to_string(options.timeout.count()) + "ns");
  }
  if (options.failure_retry_after < std::chrono::nanoseconds::zero()) {
    invalid("options.failure_retry_after must not be negative, got " +
            std::to_string(options.failure_retry_after.count()) + "ns");
  }
  auto s = std::make_shared<gcra_settings>();
  s->inf = r.is_inf();
  if (!s->inf) {
    // T rounded up to whole nanoseconds (as admit::gcra), then up to whole microseconds.
    const std::int64_t interval_ns = std::max<std::int64_t>(1, admit::detail::ceil_ns(r.interval_ns()));
    s->interval_us = interval_ns / 1000 + (interval_ns % 1000 != 0 ? 1 : 0);
    const std::int64_t tau = admit::detail::sat_mul(burst, s->interval_us);
    if (tau > max_tau_us) {
      invalid("burst " + std::to_string(burst) + " at rate " + r.to_string() +
              " spans more than 2^51 microseconds (~71 years)");
    }
  }
  s->name = std::move(name);
  s->prefix = "{" + s->name + "}:";
  s->r = r;
  s->burst = burst;
  s->interval_arg = std::to_string(s->interval_us);
  s->burst_arg = std::to_string(burst);
  s->options = options;
  return s;
}

const script& gcra_script() {
  static const script s{std::string(lua::gcra)};
  return s;
}

command gcra_command(const gcra_settings& s, std::string_view key, std::int64_t n) {
  command c{"EVALSHA", gcra_script().sha1(), "1"};
  std::string k;
  k.reserve(s.prefix.size() + key.size());
  k.append(s.prefix).append(key);
  c.arg(k).arg(s.interval_arg).arg(s.burst_arg).arg(n);
  return c;
}

std::optional<std::chrono::steady_clock::time_point> gcra_deadline(const gcra_settings& s) noexcept {
  const auto now = std::chrono::steady_clock::now();
  // options.timeout is positive and finite; saturate rather than overflow for absurdly long ones.
  const auto room = std::chrono::steady_clock::time_point::max() - now;
  if (s.options.timeout >= room) return std::nullopt;
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(s.options.timeout);
}

gcra_result gcra_unlimited(const gcra_settings& s) {
  gcra_result r;
  r.decision.admitted = true;
  r.decision.limit = s.burst;
  r.decision.remaining = s.burst;
  return r;
}

gcra_result gcra_interpret(const gcra_settings& s, const boost::system::error_code& ec, const reply& r) {
  if (ec) return failed(s, ec);
  if (r.is_error()) return failed(s, make_error_code(gcra_errc::error_reply), r.str());
  // {admitted, remaining, retry_after_us (-1: never), reset_after_us, now_us}
  const auto& e = r.elements();
  const auto integer = [&](std::size_t i) { return e[i].is_integer(); };
  if (!r.is_array() || e.size() != 5 || !integer(0) || !integer(1) || !integer(2) || !integer(3) || !integer(4)) {
    return failed(s, make_error_code(gcra_errc::unexpected_reply));
  }
  const std::int64_t admitted = e[0].integer(), remaining = e[1].integer(), wait = e[2].integer(),
                     reset = e[3].integer(), now = e[4].integer();
  if ((admitted != 0 && admitted != 1) || remaining < 0 || remaining > s.burst || wait < -1 || reset < 0 || now <= 0 ||
      (admitted == 1 && wait != 0)) {
    return failed(s, make_error_code(gcra_errc::unexpected_reply));
  }
  gcra_result out;
  out.consulted = true;
  out.server_time = std::chrono::microseconds{now};
  out.decision.admitted = admitted == 1;
  out.decision.limit = s.burst;
  out.decision.remaining = remaining;
  out.decision.retry_after = wait == -1 ? std::chrono::nanoseconds::max() : us_to_ns(wait);
  out.decision.reset_after = us_to_ns(reset);
  return out;
}

}  // namespace admit::redis::detail

namespace admit::redis {

gcra_result gcra::decide(std::string_view key, std::int64_t n) const {
  assert(n >= 0 && "admit::redis::gcra: n must not be negative");
  const detail::gcra_settings& s = *settings_;
  if (s.inf) return detail::gcra_unlimited(s);
  const std::vector<std::string> keys{storage_key(key)};
  const std::vector<std::string> args{s.interval_arg, s.burst_arg, std::to_string(n)};
  const result r = evalsha_until(*conn_, detail::gcra_deadline(s), detail::gcra_script(), keys, args);
  return detail::gcra_interpret(s, r.error, r.value);
}

}  // namespace admit::redis
