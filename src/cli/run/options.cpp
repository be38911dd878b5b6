// `admit run`'s options (see options.hpp).
#include "cli/run/options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/common/message.hpp"
#include "cli/common/values.hpp"
#include "cli/common/window_limit.hpp"

namespace admit::cli::run {

namespace {

// The longest --lease-ttl: the semaphore counts its durations in µs, at most 2^40 of them (about 12.7 days).
constexpr std::chrono::nanoseconds max_lease_ttl = std::chrono::microseconds(std::int64_t{1} << 40);

std::chrono::nanoseconds positive(std::string_view option, const std::string& text) {
  const std::chrono::nanoseconds d = parse_duration_option(option, text);
  if (d <= std::chrono::nanoseconds::zero()) {
    throw usage_error("invalid " + std::string(option) + " " + quote(text) + ": must be positive, e.g. 10s");
  }
  return d;
}

lease_lost_action parse_action(const std::string& text) {
  if (text == "term") return lease_lost_action::term;
  if (text == "kill") return lease_lost_action::kill;
  if (text == "ignore") return lease_lost_action::ignore;
  throw usage_error("invalid --on-lease-lost " + quote(text) + ": use term, kill or ignore");
}

}  // namespace

run_settings check(const run_options& o) {
  run_settings s;
  // A value left out takes the next option as the value (`--concurrency --name db`): said first, before what its
  // absence leaves missing. No value of these begins with "--" (--lock-dir's, a path, may: not checked).
  for (const auto& [flag, value] :
       {std::pair{"--concurrency", &o.concurrency}, std::pair{"--weight", &o.weight}, std::pair{"--rate", &o.rate},
        std::pair{"--burst", &o.burst}, std::pair{"--redis", &o.redis}, std::pair{"--timeout", &o.timeout},
        std::pair{"--max-waiters", &o.max_waiters}, std::pair{"--lease-ttl", &o.lease_ttl},
        std::pair{"--kill-after", &o.kill_after}, std::pair{"--classes", &o.classes},
        std::pair{"--class", &o.class_name}}) {
    if (*value && (*value)->starts_with("--")) {
      throw usage_error(std::string(flag) + " needs a value: it took the option " + quote(**value) +
                        " as its value (was the value left out before that option?)");
    }
  }
  if (o.command.empty()) throw usage_error("a command is required: admit run [options] -- COMMAND [ARGS...]");
  if (o.command.front().empty()) throw usage_error("the command name is empty");
  s.command = o.command;
  if (o.name.empty()) {
    throw usage_error(
        "--name is required and must not be empty: the limit's name, shared by every `admit run` that "
        "uses the limit");
  }
  // (A missing name takes the next option as its value: `--name --no-wait`.)
  if (o.name.front() == '-') {
    throw usage_error("invalid --name " + quote(o.name) +
                      ": a name does not begin with '-' (was the name left out before that option?)");
  }
  s.name = o.name;
  s.redis = o.redis;
  if (!s.redis) {
    try {
      check_local_name(o.name);
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--name: ") + e.what());
    }
  } else if (o.name.find_first_of("{}") != std::string::npos) {
    throw usage_error("invalid --name " + quote(o.name) +
                      ": must not contain '{' or '}' (the name is the hash tag of the limit's Redis keys)");
  }
  if (!o.concurrency && !o.rate) {
    throw usage_error(
        "nothing to limit: give --concurrency N (at most N at once), --rate R (start at most R), or both");
  }
  if (o.concurrency) s.concurrency = parse_count_option("--concurrency", *o.concurrency, 1, max_count);
  if (o.weight) s.weight = parse_count_option("--weight", *o.weight, 1, max_count);
  if (s.concurrency > 0 && s.weight > s.concurrency) {
    throw usage_error("--weight " + std::to_string(s.weight) + " is more than --concurrency " +
                      std::to_string(s.concurrency) + ": the command could never run; use --weight 1 to " +
                      std::to_string(s.concurrency));
  }
  if (o.rate) {
    s.rate = parse_rate_option("--rate", *o.rate);
    s.rate_text = *o.rate;
    if (s.rate->is_zero())
      throw usage_error("invalid --rate " + quote(*o.rate) + ": a zero rate never starts anything");
    if (s.rate->is_inf()) s.rate.reset();  // no rate limit
    if (!s.rate && s.concurrency == 0) {
      throw usage_error("--rate " + quote(*o.rate) + " limits nothing: give a finite rate, or --concurrency N");
    }
  }
  if (o.burst) {
    if (!o.rate) throw usage_error("--burst applies only with --rate");
    s.burst = parse_count_option("--burst", *o.burst, 1, max_count);
  }
  // With --redis, a rate Redis would slow (it spaces starts a whole number of microseconds apart) is refused, as
  // admit decide refuses it: the limit enforced is the one asked for (3000/s ran as 2994/s).
  if (s.rate && s.redis) {
    try {
      require_close_rate(*s.rate, *o.rate, redis_granularity, "microseconds", "Redis");
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
  }
  if (s.rate && s.weight > s.burst) {
    throw usage_error("--weight " + std::to_string(s.weight) + " is more than --burst " + std::to_string(s.burst) +
                      ": the rate could never admit it; use --burst " + std::to_string(s.weight) + " or more");
  }
  if (o.lock_dir) {
    if (s.redis) throw usage_error("--lock-dir applies only without --redis (a limit on this host)");
    if (o.lock_dir->empty()) throw usage_error("--lock-dir must not be empty");
    s.lock_directory = *o.lock_dir;
  } else if (!s.redis) {
    s.lock_directory = default_lock_directory();
  }
  if (o.timeout) s.timeout = parse_duration_option("--timeout", *o.timeout);
  s.no_wait = o.no_wait;
  if (s.no_wait && s.timeout) throw usage_error("--no-wait and --timeout: choose one (--no-wait is --timeout 0s)");
  if (s.timeout && s.timeout->count() == 0) {  // one decision, not a wait that has no time for Redis to answer
    s.no_wait = true;
    s.timeout.reset();
  }
  if (o.max_waiters) {
    s.max_waiters = static_cast<std::size_t>(parse_count_option("--max-waiters", *o.max_waiters, 0, max_count));
  }
  if (o.lease_ttl) {
    if (!s.redis) throw usage_error("--lease-ttl applies only with --redis (a local permit cannot expire)");
    s.lease_ttl = parse_duration_option("--lease-ttl", *o.lease_ttl);
    if (s.lease_ttl < std::chrono::milliseconds(10) || s.lease_ttl > max_lease_ttl) {
      throw usage_error("invalid --lease-ttl " + quote(*o.lease_ttl) + ": must be from 10ms to 12d");
    }
  }
  s.on_lease_lost = parse_action(o.on_lease_lost);
  if (o.on_lease_lost != "term" && !s.redis) {
    throw usage_error("--on-lease-lost applies only with --redis (a local permit cannot be lost)");
  }
  if (o.kill_after) {
    if (!s.redis) throw usage_error("--kill-after applies only with --redis (after --on-lease-lost=term's SIGTERM)");
    s.kill_after = positive("--kill-after", *o.kill_after);
    if (s.on_lease_lost != lease_lost_action::term) {
      throw usage_error("--kill-after applies only with --on-lease-lost term (the SIGKILL after its SIGTERM), not " +
                        o.on_lease_lost);
    }
  }
  if (o.set_capacity && !s.redis) {
    throw usage_error("--set-capacity applies only with --redis (it sets the definition Redis stores for every host)");
  }
  s.set_capacity = o.set_capacity;
  // This host's limit counts time in whole nanoseconds, up to 2^62 of them (Redis's checks its own range).
  if (s.rate && !s.redis) {
    if (s.rate->interval_ns() < 1) {
      throw usage_error("invalid --rate " + quote(*o.rate) +
                        ": more than one start a nanosecond, finer than this host's limit counts time (use a lower "
                        "rate, or --rate inf for none)");
    }
    if (s.rate->interval_ns() * static_cast<double>(s.burst) > 0x1p62) {
      throw usage_error("invalid --rate " + quote(*o.rate) + " with --burst " + std::to_string(s.burst) +
                        ": takes more than 2^62 ns (146 years) to refill");
    }
  }
  if (o.classes) s.classes = parse_classes(*o.classes);
  // Each class's share of the rate is a token bucket of its own (admit::admission's rule): one too slow to refill
  // within the arithmetic's range (2^62 ns) is refused here, naming the class, rather than by the limit's plan.
  if (o.classes && s.rate && !s.rate->is_inf() && !s.rate->is_zero()) {
    for (const auto& c : s.classes) {
      if (c.share <= 0) continue;
      const double burst = std::max(1.0, std::ceil(c.share * static_cast<double>(s.burst) - 1e-9));
      if (s.rate->interval_ns() / c.share * burst > 0x1p62) {
        throw usage_error("invalid --classes " + quote(*o.classes) + ": the share of " + quote(c.name) + " (" +
                          classes_option({c}).substr(c.name.size() + 1) + ") of --rate " + s.rate->to_string() +
                          " would refill its tokens more slowly than once in 146 years (2^62 ns): give it a larger "
                          "share, or 0 to guarantee it nothing");
      }
    }
  }
  if (o.class_name) {
    if (!o.classes) throw usage_error("--class applies only with --classes (the limit's classes)");
    std::string names;
    for (std::size_t i = 0; i < s.classes.size(); ++i) {
      if (s.classes[i].name == *o.class_name) {
        s.priority = i;
        names.clear();
        break;
      }
      names += (i == 0 ? "" : ", ") + s.classes[i].name;
    }
    if (!names.empty()) {
      throw usage_error("invalid --class " + quote(*o.class_name) + ": not one of --classes's (" + names + ")");
    }
  }
  s.quiet = o.quiet;
  s.json = o.json;
  return s;
}

std::string not_admitted_in_time(const run_settings& s, const std::string& where) {
  std::string what = "no permit of " + where;
  if (s.concurrency == 0) what = "no start by the rate of " + where;
  if (s.concurrency > 0 && s.rate) what += " with a start by its rate";
  return "not admitted: " + what + " within --timeout" + (s.timeout ? " " + format_duration(*s.timeout) : "");
}

}  // namespace admit::cli::run
