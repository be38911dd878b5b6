#include "cli/recommend/options.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <istream>
#include <mutex>
#include <new>
#include <ostream>
#include <string_view>
#include <system_error>
#include <utility>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/values.hpp"
#include "cli/recommend/report.hpp"
#include "cli/replay/options.hpp"
#include "cli/replay/trace_input.hpp"

namespace admit::cli {

namespace {

// The progress of the replays on a terminal's standard error: "admit recommend: 12 replays, 3.2s", redrawn at most
// ten times a second, erased before anything else is written. Thread safety: replayed() may be called from two
// threads at once (the frontier's search).
class replay_status {
 public:
  replay_status(std::ostream& err, bool shown) : err_(err), shown_(shown) {}
  replay_status(const replay_status&) = delete;
  replay_status& operator=(const replay_status&) = delete;
  ~replay_status() { erase(); }

  void replayed() {
    if (!shown_) return;
    const std::lock_guard lock(mutex_);
    ++replays_;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - drawn_at_ < std::chrono::milliseconds(100)) return;
    err_ << "\radmit recommend: " << replays_ << (replays_ == 1 ? " replay, " : " replays, ")
         << human_duration((now - start_).count()) << "\x1b[K";
    err_.flush();
    drawn_ = true;
    drawn_at_ = now;
  }
  void erase() {
    const std::lock_guard lock(mutex_);
    if (!drawn_) return;
    err_ << "\r\x1b[K";
    err_.flush();
    drawn_ = false;
  }

 private:
  std::ostream& err_;
  const bool shown_;
  std::mutex mutex_;
  std::int64_t replays_ = 0;
  bool drawn_ = false;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drawn_at_;
};

constexpr std::initializer_list<algorithm> rate_algorithms = {algorithm::token_bucket, algorithm::gcra,
                                                              algorithm::fixed_window, algorithm::sliding_window};

bool is_recommended(algorithm a) {
  return std::find(rate_algorithms.begin(), rate_algorithms.end(), a) != rate_algorithms.end();
}

// "1%", "0.25%", "100%": a share of the requests, exactly.
percentage parse_percentage(const char* option, const std::string& text) {
  const auto expected = [&] {
    return usage_error(std::string("invalid ") + option + " " + quote(text) +
                       ": expected a percentage from 0% to 100%, such as 1% or 0.5% (up to 9 fraction digits)");
  };
  if (text.empty() || text.back() != '%') throw expected();
  const auto value = parse_seconds(std::string_view(text).substr(0, text.size() - 1));
  if (!value || *value > 100'000'000'000) throw expected();
  return {*value};
}

// A duration in ns (0 allowed: --max-wait-p99 0s asks that 99% never wait).
std::int64_t parse_duration_ns(const char* option, const std::string& text) {
  return parse_duration_option(option, text).count();
}

// The `admit replay` arguments that read the trace as `o` does.
std::string replay_arguments(const recommend_options& o) {
  std::string args;
  const auto add = [&](const char* option, const std::optional<std::string>& value) {
    if (value) args += std::string(option) + " " + shell_word(*value) + " ";
  };
  if (o.format != "plain") args += "--format " + shell_word(o.format) + " ";
  add("--time-field", o.time_field);
  add("--key-field", o.key_field);
  add("--cost-field", o.cost_field);
  add("--duration-field", o.duration_field);
  add("--per-key", o.per_key);
  if (o.skip_bad_lines) args += "--skip-bad-lines ";
  // A trace read from standard input is read there again (it was consumed: the command says so, as a shell comment).
  return args + (o.trace == "-" ? std::string("-  # the same trace on standard input again") : shell_word(o.trace));
}

}  // namespace

std::string recommend_algorithm_names() {
  std::string names;
  for (const algorithm a : rate_algorithms) names += std::string(to_string(a)) + "|";
  return names + std::string(concurrency_algorithm_name);
}

std::variant<rate_question, concurrency_question> to_question(const recommend_options& o) {
  if (o.algorithm == concurrency_algorithm_name) {
    const std::string name(concurrency_algorithm_name);
    for (const auto& [option, value] :
         {std::pair{"--burst", &o.burst}, std::pair{"--window", &o.window}, std::pair{"--mode", &o.mode},
          std::pair{"--max-rejected", &o.max_rejected}, std::pair{"--max-delay-p99", &o.max_delay_p99}}) {
      refuse_if_given(option, *value, name,
                      "it takes --max-wait-p99, or --max-timed-out with --max-waiters or --timeout");
    }
    concurrency_question q;
    if (o.max_wait_p99) q.max_wait_p99_ns = parse_duration_ns("--max-wait-p99", *o.max_wait_p99);
    if (o.max_waiters) q.max_waiters = parse_count_option("--max-waiters", *o.max_waiters, 0, max_count);
    if (o.timeout) q.timeout_ns = parse_duration_ns("--timeout", *o.timeout);
    if (o.max_timed_out) {
      if (!o.max_waiters && !o.timeout) {
        throw usage_error("--max-timed-out " + quote(*o.max_timed_out) +
                          " needs a bounded queue, whose requests can be turned away: give --max-waiters or --timeout");
      }
      q.max_turned_away = parse_percentage("--max-timed-out", *o.max_timed_out);
    }
    if (!o.max_wait_p99 && !o.max_timed_out) {
      throw usage_error(
          "--algorithm concurrency needs a target: --max-wait-p99 D (at most 1% of the "
          "requests wait longer than D), and with --max-waiters or --timeout also --max-timed-out P%");
    }
    q.curve = o.plot.has_value();
    return q;
  }
  const auto algo = parse_algorithm(o.algorithm);
  if (!algo || !is_recommended(*algo)) {
    throw usage_error("invalid --algorithm " + quote(o.algorithm) + ": admit recommend takes " +
                      recommend_algorithm_names());
  }
  const std::string name(to_string(*algo));
  for (const auto& [option, value] :
       {std::pair{"--max-wait-p99", &o.max_wait_p99}, std::pair{"--max-waiters", &o.max_waiters},
        std::pair{"--timeout", &o.timeout}, std::pair{"--max-timed-out", &o.max_timed_out}}) {
    refuse_if_given(option, *value, name, "only to concurrency");
  }
  rate_question q;
  q.algo = *algo;
  if (is_window(*algo)) {
    refuse_if_given("--burst", o.burst, name, "a window counts requests per --window");
    q.window = o.window.value_or("1s");
    const auto window = parse_duration_option("--window", q.window);
    if (window.count() <= 0) {
      throw usage_error("invalid --window " + quote(q.window) + ": a window must be longer than zero, e.g. 1s");
    }
    if (max_window_limit(*algo, window) < 1) {
      throw usage_error("invalid --window " + quote(q.window) + ": too short for " + name +
                        " to count even one request a window; use a longer window, such as 1ms");
    }
  } else {
    refuse_if_given("--window", o.window, name, "it takes --burst");
    if (o.burst) q.burst = parse_count_option("--burst", *o.burst, 1, max_count);
  }
  if (o.mode) {
    if (*o.mode == "reserve") {
      if (!info(*algo).can_reserve) {
        throw usage_error("--mode reserve does not apply to " + name + ": a window cannot reserve (use allow)");
      }
      q.mode = replay_mode::reserve;
    } else if (*o.mode != "allow") {
      throw usage_error("invalid --mode " + quote(*o.mode) + ": use allow or reserve");
    }
  }
  if (q.mode == replay_mode::reserve) {
    if (!o.max_delay_p99) {
      throw usage_error("--mode reserve needs --max-delay-p99 D: the 99th percentile of the delays to stay within");
    }
    q.max_delay_p99_ns = parse_duration_ns("--max-delay-p99", *o.max_delay_p99);
  } else {
    if (o.max_delay_p99) {
      throw usage_error("--max-delay-p99 " + quote(*o.max_delay_p99) +
                        " applies to --mode reserve (in allow mode nothing is delayed: use --max-rejected)");
    }
    if (!o.max_rejected) {
      throw usage_error(
          "a target is needed: --max-rejected P% (at most P% of the requests rejected), or "
          "--mode reserve --max-delay-p99 D");
    }
  }
  if (o.max_rejected) q.max_rejected = parse_percentage("--max-rejected", *o.max_rejected);
  q.per_key = o.per_key.has_value();
  q.curve = o.plot.has_value();
  return q;
}

log_request to_trace_reading(const recommend_options& o) {
  replay_options r;
  r.algorithm = o.algorithm;
  r.format = o.format;
  r.time_field = o.time_field;
  r.key_field = o.key_field;
  r.cost_field = o.cost_field;
  r.duration_field = o.duration_field;
  r.per_key = o.per_key;
  r.skip_bad_lines = o.skip_bad_lines;
  return to_log_request(r);
}

int run_recommend(const recommend_options& o, std::istream& in, std::ostream& out, std::ostream& err) {
  replay_status progress(err, o.stderr_is_terminal);
  const auto fail = [&](const std::string& message, int status = exit_bad_input) {
    progress.erase();
    err << "admit recommend: " << message << "\n";
    return status;
  };
  std::variant<rate_question, concurrency_question> question;
  log_request reading;
  try {
    question = to_question(o);
    reading = to_trace_reading(o);
  } catch (const usage_error& e) {
    return fail(e.what());
  }
  if (auto error = check_plot_name(o.plot); !error.empty()) return fail(error);
  plot_probe plot(o.plot);
  if (auto error = plot.check(); !error.empty()) return fail(error);
  const trace_input input{o.trace, o.stdin_is_terminal, "admit recommend"};
  const recommend_context ctx{input.source(), replay_arguments(o)};

  std::optional<recorded_trace> trace;
  try {
    if (auto error =
            read_trace_input(input, in, err, [&](std::istream& s) { trace.emplace(recorded_trace::read(s, reading)); });
        !error.empty()) {
      plot.forget();
      return fail(error);
    }
  } catch (const usage_error& e) {
    plot.forget();
    return fail(e.what());
  } catch (const std::system_error& e) {
    plot.forget();
    return fail(e.what(), exit_failure);
  }
  if (trace->records() == 0) {
    plot.forget();
    return fail(reading.format != log_format::plain ? empty_log_message(ctx.source, reading, trace->skipped_lines())
                : reading.needs_duration            ? empty_trace_message(ctx.source, "`<arrival> <duration> [n]`")
                                                    : empty_trace_message(ctx.source, "`<seconds since start> [n]`"));
  }

  bool found = false;
  std::string plot_error;
  const replay_observer replayed = [&progress] { progress.replayed(); };
  try {
    if (const auto* q = std::get_if<rate_question>(&question)) {
      const rate_recommendation r = recommend_rate(*trace, *q, replayed);
      progress.erase();
      found = r.best.has_value();
      if (o.plot)
        plot_error =
            write_plot_file(*o.plot, [&](std::ostream& svg) { write_rate_recommendation_svg(svg, ctx, *q, r); });
      if (o.json) {
        write_rate_recommendation_json(out, ctx, *trace, *q, r);
      } else {
        write_rate_recommendation(out, ctx, *trace, *q, r);
      }
    } else {
      const auto& cq = std::get<concurrency_question>(question);
      const concurrency_recommendation r = recommend_concurrency(*trace, cq, replayed);
      progress.erase();
      found = r.best.has_value();
      if (o.plot) {
        plot_error =
            write_plot_file(*o.plot, [&](std::ostream& svg) { write_concurrency_recommendation_svg(svg, ctx, cq, r); });
      }
      if (o.json) {
        write_concurrency_recommendation_json(out, ctx, *trace, cq, r);
      } else {
        write_concurrency_recommendation(out, ctx, *trace, cq, r);
      }
    }
  } catch (const std::system_error& e) {
    plot.forget();
    return fail(e.what(), exit_failure);
  } catch (const std::invalid_argument& e) {  // settings the concurrency replay refuses
    plot.forget();
    return fail(without_cpp_name(e.what()));
  } catch (const usage_error& e) {
    plot.forget();
    return fail(e.what());
  } catch (const std::exception& e) {  // out of memory, an engine's broken contract: nothing to keep
    plot.forget();
    return fail(e.what(), exit_failure);
  }
  if (!plot_error.empty()) {
    plot.forget();
    return fail(plot_error, exit_failure);
  }
  out.flush();
  if (!out) return fail("write error on standard output", exit_failure);
  return found ? exit_ok : exit_no_limit;
}

}  // namespace admit::cli
