// `admit decide` (see decide.hpp): checks the options, builds the distributed limiter, checks that Redis takes
// commands, decides, and with --wait retries after each refusal's retry_after, and after each transient Redis failure
// with a growing pause, until admitted or --max-wait would be exceeded.
#include "cli/decide/decide.hpp"

#include <algorithm>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "admit/detail/deadline.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/client/options.hpp"
#include "admit/redis/fixed_window.hpp"
#include "admit/redis/gcra.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/sliding_log.hpp"
#include "admit/redis/sliding_window.hpp"
#include "admit/redis/token_bucket.hpp"
#include "cli/common/algorithms.hpp"
#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/io_runner.hpp"
#include "cli/common/json.hpp"
#include "cli/common/message.hpp"
#include "cli/common/redis_failure.hpp"
#include "cli/common/redis_topology.hpp"
#include "cli/common/values.hpp"
#include "cli/common/window_limit.hpp"

namespace admit::cli {

namespace {

// A positive duration option.
std::chrono::nanoseconds positive_duration_option(std::string_view option, const std::string& text) {
  const std::chrono::nanoseconds d = parse_duration_option(option, text);
  if (d <= std::chrono::nanoseconds::zero()) {
    throw usage_error("invalid " + std::string(option) + " " + quote(text) + ": must be positive");
  }
  return d;
}

// The algorithms with a distributed form (info().distributed), as --help words them: the default first.
constexpr std::string_view distributed_algorithms = "gcra, token-bucket, fixed-window, sliding-window or sliding-log";

// The algorithm, its options and the rate, checked against the table (cli/common/algorithms.hpp) and against what Redis
// takes, before any connection.
replay_settings check_limit(const decide_options& o) {
  if (const auto algo = parse_algorithm(o.algorithm); algo && !info(*algo).distributed) {
    throw usage_error("invalid --algorithm " + quote(o.algorithm) + ": it has no distributed form; use " +
                      std::string(distributed_algorithms));
  }
  if (!o.rate) throw usage_error("--rate is required (e.g. --rate 10/s)");
  // A window Redis would round is refused before the rate is fitted to it: a rate that fits a window refused anyway
  // would be no advice. (A window that does not parse is refused here as resolve() would; one not positive is left
  // to it.)
  if (const auto algo = parse_algorithm(o.algorithm); algo && is_window(*algo) && o.window) {
    const std::chrono::nanoseconds window = parse_duration_option("--window", *o.window);
    try {
      if (window.count() > 0) require_whole_window(window, redis_granularity, "microseconds", "Redis");
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
  }
  try {
    const replay_settings r = resolve(to_config({.algorithm = o.algorithm,
                                                 .rate = o.rate,
                                                 .burst = o.burst,
                                                 .window = o.window,
                                                 .slack = std::nullopt,
                                                 .warmup = std::nullopt,
                                                 .mode = std::nullopt},
                                                algorithm_names(/*distributed_only=*/true)));
    // A distributed quota that never refills would keep its keys for ever: the Redis forms refuse it.
    if (r.limit.is_zero()) {
      throw usage_error("invalid --rate " + quote(*o.rate) +
                        ": must be above zero (a limit on Redis that never refills would keep its keys for ever)");
    }
    // What Redis would round is refused, as resolve() refuses a window limit that is not whole: the limit enforced is
    // the one asked for (a rate within max_rate_slowdown of it). (A --window it would round is refused above; the
    // default window is whole microseconds.)
    if (!is_window(r.algo)) require_close_rate(r.limit, r.shown_rate(), redis_granularity, "microseconds", "Redis");
    return r;
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
}

// The distributed form of `s`'s algorithm (check_limit() has refused the others).
std::unique_ptr<redis::limiter> make_limiter(const decide_options& o, const replay_settings& s, redis::client& c,
                                             const redis::limiter_options& lo) {
  try {
    switch (s.algo) {
      case algorithm::gcra:
        return std::make_unique<redis::gcra>(c, o.name, s.limit, s.burst, lo);
      case algorithm::token_bucket:
        return std::make_unique<redis::token_bucket>(c, o.name, s.limit, s.burst, lo);
      case algorithm::fixed_window:
        return std::make_unique<redis::fixed_window>(c, o.name, s.window_limit, s.window, lo);
      case algorithm::sliding_window:
        return std::make_unique<redis::sliding_window>(c, o.name, s.window_limit, s.window, lo);
      case algorithm::sliding_log:
        return std::make_unique<redis::sliding_log>(c, o.name, s.window_limit, s.window, lo);
      case algorithm::pacer:
      case algorithm::warmup:
        break;
    }
  } catch (const std::invalid_argument& e) {
    // What the checks above leave to the limiter (the name, a burst spanning ~71 years), without its C++ name.
    throw usage_error(without_cpp_name(e.what()));
  }
  throw usage_error("invalid --algorithm " + quote(o.algorithm) + ": it has no distributed form; use " +
                    std::string(distributed_algorithms));
}

std::string_view source_name(redis::decided_by s) {
  switch (s) {
    case redis::decided_by::redis:
      return "redis";
    case redis::decided_by::lease:
      return "lease";
    case redis::decided_by::failure_policy:
      return "failure_policy";
    case redis::decided_by::local_fallback:
      return "local_fallback";
    case redis::decided_by::unlimited:
      return "unlimited";
  }
  return "unknown";
}

std::int64_t ns_of(std::chrono::nanoseconds d) { return d.count(); }

// The pause before retrying a transient Redis failure: doubles from the first to the last.
constexpr std::chrono::nanoseconds first_pause = std::chrono::milliseconds(50);
constexpr std::chrono::nanoseconds last_pause = std::chrono::seconds(1);

// `failure`: why Redis did not decide (the "error" of the JSON form), empty when it did.
// `n`: the parsed --cost (never its text: "007" is not a JSON number).
// `permanent`: Redis failed in a way waiting cannot fix; the line gives no retry_after, as no wait would help (the JSON
// form keeps its fields).
void print(std::ostream& out, const decide_options& o, std::int64_t n, const redis::limiter& l,
           const redis::limiter_result& r, std::chrono::nanoseconds waited, const std::string& failure,
           bool permanent = false) {
  const decision& d = r.decision;
  const bool never = d.exceeds_capacity();
  if (o.json) {
    nlohmann::ordered_json j;
    j["admitted"] = d.admitted;
    j["key"] = o.key;
    j["limiter"] = l.name();
    j["algorithm"] = o.algorithm;
    j["n"] = n;
    j["limit"] = d.limit;
    j["remaining"] = d.remaining;
    j["retry_after_s"] = never ? nlohmann::ordered_json(nullptr) : json_seconds(ns_of(d.retry_after));
    j["reset_after_s"] = json_seconds(ns_of(d.reset_after));
    j["decided_by"] = source_name(r.source);
    j["error"] = failure.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(failure);
    j["server_time_us"] = r.server_time.count();
    j["waited_s"] = json_seconds(ns_of(waited));
    write_json_line(out, j);
    return;
  }
  out << (d.admitted ? "admitted" : "refused") << ": " << quote(o.key) << " n=" << n << " limit=" << d.limit
      << " remaining=" << d.remaining;
  if (!d.admitted && !permanent) {
    out << " retry_after=" << (never ? std::string("never") : human_duration(ns_of(d.retry_after)));
  }
  out << " reset_after=" << human_duration(ns_of(d.reset_after)) << " decided_by=" << source_name(r.source);
  if (waited > std::chrono::nanoseconds::zero()) out << " waited=" << human_duration(ns_of(waited));
  out << "\n";
}

// limiter.decide(key, n), given up at `deadline` (if any) when that comes before the limiter's own timeout: an
// attempt of --wait never runs past --max-wait. Blocking; not on `executor`'s thread.
redis::limiter_result decide_by(const redis::limiter& limiter, const boost::asio::any_io_executor& executor,
                                const std::string& key, std::int64_t n,
                                std::optional<std::chrono::steady_clock::time_point> deadline,
                                std::chrono::nanoseconds timeout) {
  if (!deadline ||
      *deadline >= admit::detail::deadline_after<std::chrono::steady_clock>(std::chrono::steady_clock::now(), timeout))
    return limiter.decide(key, n);
  auto cancel = std::make_shared<boost::asio::cancellation_signal>();
  auto done = std::make_shared<std::promise<redis::limiter_result>>();
  std::future<redis::limiter_result> answer = done->get_future();
  limiter.async_decide_detailed(
      key, n,
      boost::asio::bind_cancellation_slot(
          cancel->slot(),
          boost::asio::bind_executor(executor, [done](redis::limiter_result r) { done->set_value(std::move(r)); })));
  if (answer.wait_until(*deadline) == std::future_status::timeout) {
    // On the executor's (only) thread, as the operation's cancellation slot wants; a no-op once it has completed.
    boost::asio::post(executor, [cancel] { cancel->emit(boost::asio::cancellation_type::terminal); });
  }
  redis::limiter_result r = answer.get();
  if (r.error == admit::errc::cancelled) r.error = errc::timeout;  // the cancellation above: the deadline
  return r;
}

int decide_and_print(const decide_options& o, std::ostream& out, std::ostream& err) {
  try {
    if (o.redis.empty()) throw usage_error("--redis is required (e.g. --redis redis://127.0.0.1:6379)");
    if (o.key.empty()) throw usage_error("the key must not be empty");
    const std::int64_t n = parse_count_option("--cost", o.cost, 0, max_count);
    redis::limiter_options lo;
    lo.timeout = positive_duration_option("--timeout", o.timeout);
    lo.on_failure = o.fail_open ? redis::failure_policy::fail_open : redis::failure_policy::fail_closed;
    lo.breaker.failure_threshold = 0;  // one process, a few decisions: every one asks Redis
    std::optional<std::chrono::nanoseconds> max_wait;
    if (o.max_wait) {
      if (!o.wait) throw usage_error("--max-wait: applies only with --wait");
      max_wait = parse_duration_option("--max-wait", *o.max_wait);
    }

    redis::connection_options co;
    try {
      co = redis::parse_url(o.redis);
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--redis: ") + e.what());
    }
    co.connect_timeout = lo.timeout;
    co.reconnect_max = last_pause;  // the connection's own backoff between attempts keeps pace with --wait's retries
    io_runner io;
    redis::connection conn(io.executor(), co);
    std::unique_ptr<redis::cluster>
        nodes;  // when the server is a Redis Cluster node: the limit's slot may be elsewhere
    bool topology_known = false;
    const replay_settings settings = check_limit(o);
    std::unique_ptr<redis::limiter> limiter = make_limiter(o, settings, conn, lo);
    // Known here, whether Redis answers or not: never an answer of the failure policy (with --fail-open an admission)
    // or a retry.
    // Rate inf admits without a call (decided_by unlimited): Redis need not be there.
    const bool unlimited = settings.limit.is_inf();
    if (!unlimited && n > limiter->limit()) {
      throw usage_error("--cost " + std::to_string(n) + " is more than the limit " + std::to_string(limiter->limit()) +
                        ": it can never be admitted");
    }

    const auto start = std::chrono::steady_clock::now();
    // Every retry of --wait (connecting, PING, deciding) ends by then: each call's timeout is cut to what is left. The
    // first asking is not waiting: it has its whole --timeout, as without --wait.
    std::optional<std::chrono::steady_clock::time_point> give_up;
    if (o.wait && max_wait) give_up = start + *max_wait;
    std::chrono::nanoseconds pause = first_pause;
    for (bool retried = false;; retried = true) {
      const std::optional<std::chrono::steady_clock::time_point> by = retried ? give_up : std::nullopt;
      std::optional<redis_failure> failure = unlimited ? std::nullopt : check_ready(conn, lo.timeout, by);
      redis::limiter_result r;
      if (!failure && !topology_known && !unlimited) {
        // Asked again at the next retry when it got no answer; never past --max-wait.
        const auto now = std::chrono::steady_clock::now();
        const std::chrono::nanoseconds left = by && *by < now + lo.timeout ? *by - now : lo.timeout;
        const std::chrono::nanoseconds given = std::max(left, std::chrono::nanoseconds(1));
        topology t = learn_topology(conn, given);
        topology_known = !t.error;
        if (t.error) failure = call_failure(conn, t.error, {}, given);  // not known: deciding could meet MOVED
        if (t.nodes) {
          nodes = std::move(t.nodes);
          limiter = make_limiter(o, settings, *nodes, lo);  // its arguments were checked by the first one
        }
      }
      if (!failure) {
        const auto asked = std::chrono::steady_clock::now();
        r = decide_by(*limiter, io.executor(), o.key, n, by, lo.timeout);
        if (r.error) {
          // A decision cut short by --max-wait: no answer within what was left of it.
          const std::chrono::nanoseconds given =
              by && *by < asked + lo.timeout ? std::chrono::nanoseconds(*by - asked) : lo.timeout;
          failure = nodes ? call_failure(conn, *nodes, r.error, r.message, given)
                          : call_failure(conn, r.error, r.message, given);
        }
      }
      // Time spent waiting for admission (zero for an answer at the first asking).
      const std::chrono::nanoseconds waited =
          retried ? std::chrono::steady_clock::now() - start : std::chrono::nanoseconds::zero();
      if (failure) {
        const std::chrono::nanoseconds so_far = std::chrono::steady_clock::now() - start;
        // Not connected: the connection's own attempts (reconnect_max above) pace the retries, the next call waiting
        // for the next of them; a pause of ours on top came to twice the time it said.
        const bool reconnecting = !conn.is_connected();
        if (o.wait && failure->transient && reconnecting && (!max_wait || so_far < *max_wait)) {
          err << "admit decide: " << failure->message
              << "; retrying at the connection's next attempt (50 ms to 1 s apart, doubling; waited "
              << human_duration(ns_of(so_far)) << ")\n";
          err.flush();
          continue;
        }
        if (o.wait && failure->transient && (!max_wait || so_far + pause <= *max_wait)) {
          err << "admit decide: " << failure->message << "; retrying in " << format_duration(pause) << " (waited "
              << human_duration(ns_of(so_far)) << ")\n";
          err.flush();
          std::this_thread::sleep_for(pause);
          pause = std::min(pause * 2, last_pause);
          continue;
        }
        err << "admit decide: " << failure->message << "; "
            << (o.fail_open ? "admitted by --fail-open" : "not admitted (--fail-open admits)") << "\n";
        // The failure policy's decision, as the limiter makes it.
        redis::limiter_result policy;
        policy.error = failure->error;
        policy.source = redis::decided_by::failure_policy;
        policy.decision.admitted = o.fail_open;
        policy.decision.limit = limiter->limit();
        if (!o.fail_open) policy.decision.retry_after = lo.failure_retry_after;
        print(out, o, n, *limiter, policy, waited, failure->message, !failure->transient);
        return o.fail_open ? exit_ok : failure->exit_status();
      }
      pause = first_pause;
      if (r.decision.admitted) {
        print(out, o, n, *limiter, r, waited, {});
        return exit_ok;
      }
      if (r.decision.exceeds_capacity()) {
        print(out, o, n, *limiter, r, waited, {});
        err << "admit decide: --cost " << n << " is more than the limit " << r.decision.limit
            << ": it can never be admitted\n";
        return exit_bad_input;
      }
      const auto so_far = std::chrono::steady_clock::now() - start;
      if (!o.wait || (max_wait && so_far + r.decision.retry_after > *max_wait)) {
        print(out, o, n, *limiter, r, waited, {});
        if (o.wait) {
          err << "admit decide: refused, and its retry_after " << human_duration(ns_of(r.decision.retry_after))
              << " would end past --max-wait " << human_duration(ns_of(*max_wait)) << " (waited "
              << human_duration(ns_of(so_far)) << "): not waiting\n";
        }
        return exit_refused;
      }
      err << "admit decide: refused, retrying in " << human_duration(ns_of(r.decision.retry_after)) << " (waited "
          << human_duration(ns_of(std::chrono::steady_clock::now() - start)) << ")\n";
      std::this_thread::sleep_for(r.decision.retry_after);
    }
  } catch (const usage_error& e) {
    err << "admit decide: " << e.what() << "\n";
    return exit_bad_input;
  }
}

}  // namespace

int run_decide(const decide_options& o, std::ostream& out, std::ostream& err) {
  const int status = decide_and_print(o, out, err);
  out.flush();
  if (!out) {  // the decision did not reach its reader: not a success, whatever it was
    err << "admit decide: write error on standard output\n";
    return exit_failure;
  }
  return status;
}

}  // namespace admit::cli
