#include "cli/replay/options.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cli/common/duration.hpp"
#include "cli/common/temporary_file.hpp"
#include "cli/common/values.hpp"
#include "cli/replay/arrival_source.hpp"
#include "cli/replay/plot.hpp"
#include "cli/replay/report.hpp"
#include "cli/replay/trace.hpp"
#include "cli/replay/trace_input.hpp"

namespace admit::cli {

std::string all_algorithm_names() { return algorithm_names() + "|" + std::string(concurrency_algorithm_name); }

namespace {

// --cold-factor: a decimal above 1 (the cold rate is the stable rate divided by it), at most 1000.
double parse_cold_factor(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v, std::chars_format::fixed);
  if (ec != std::errc() || ptr != end || !(v > 1) || v > 1000) {
    throw usage_error("invalid --cold-factor " + quote(text) +
                      ": expected a number above 1 and at most 1000, such as 3 (Guava's) or 2.5");
  }
  return v;
}

}  // namespace

replay_config to_config(const replay_options& o) {
  if (const auto algo = parse_algorithm(o.algorithm)) {
    for (const auto& [option, value] : {std::pair{"--limit", &o.limit}, std::pair{"--max-waiters", &o.max_waiters},
                                        std::pair{"--timeout", &o.timeout}}) {
      refuse_if_given(option, *value, to_string(*algo), "only to concurrency");
    }
  }
  replay_config config = to_config(
      rate_limit_options{o.algorithm, o.rate, o.burst, o.window, o.slack, o.warmup, o.mode}, all_algorithm_names());
  if (o.cold_factor) config.cold_factor = parse_cold_factor(*o.cold_factor);
  return config;
}

log_request to_log_request(const replay_options& o) {
  log_request r;
  const auto format = parse_log_format(o.format);
  if (!format) throw usage_error("invalid --format " + quote(o.format) + ": use " + log_format_names());
  r.format = *format;
  const bool named = r.format == log_format::csv || r.format == log_format::jsonl;
  for (const auto& [option, value] :
       {std::pair{"--time-field", &o.time_field}, std::pair{"--key-field", &o.key_field},
        std::pair{"--cost-field", &o.cost_field}, std::pair{"--duration-field", &o.duration_field}}) {
    if (!*value) continue;
    if (!named) {
      throw usage_error(std::string(option) + " " + quote(**value) + " does not apply to --format " + o.format +
                        " (only to csv and jsonl, whose fields have names)");
    }
    if ((*value)->empty()) throw usage_error(std::string("invalid ") + option + " \"\": give a field's name");
  }
  if (o.time_field) r.fields.time = *o.time_field;
  if (o.key_field) r.fields.key = *o.key_field;
  if (o.cost_field) r.fields.cost = *o.cost_field;
  if (o.duration_field) r.fields.duration = *o.duration_field;
  const bool concurrency = o.algorithm == concurrency_algorithm_name;
  if (o.per_key) {
    if (concurrency) throw usage_error("--per-key " + quote(*o.per_key) + " applies to the rate algorithms only");
    if (r.format == log_format::plain) {
      throw usage_error("--per-key " + quote(*o.per_key) +
                        " needs a key on each line, which the plain trace does not have; use --format nginx, envoy, "
                        "csv or jsonl");
    }
    if (o.per_key->empty()) throw usage_error("invalid --per-key \"\": use client or a field's name");
    r.per_key = *o.per_key;
  }
  if (o.duration_field && !concurrency) {
    throw usage_error("--duration-field " + quote(*o.duration_field) + " applies to --algorithm concurrency only");
  }
  if (concurrency && r.format == log_format::nginx) {
    throw usage_error(
        "--format nginx has no request duration, which --algorithm concurrency needs; use --format envoy (its "
        "DURATION), csv or jsonl (--duration-field), or a plain `<arrival> <duration>` trace");
  }
  if (o.skip_bad_lines && r.format == log_format::plain) {
    throw usage_error("--skip-bad-lines applies to --format nginx, envoy, csv and jsonl; a plain trace must parse");
  }
  r.needs_duration = concurrency;
  r.skip_bad_lines = o.skip_bad_lines;
  return r;
}

concurrency_settings to_concurrency_settings(const replay_options& o) {
  const std::string name(concurrency_algorithm_name);
  for (const auto& [option, value] :
       {std::pair{"--rate", &o.rate}, std::pair{"--burst", &o.burst}, std::pair{"--window", &o.window},
        std::pair{"--slack", &o.slack}, std::pair{"--warmup", &o.warmup}, std::pair{"--cold-factor", &o.cold_factor},
        std::pair{"--mode", &o.mode}}) {
    refuse_if_given(option, *value, name, "it takes --limit, --max-waiters and --timeout");
  }
  concurrency_settings s;
  if (!o.limit) throw usage_error("--limit is required for " + name);
  s.limit = parse_count_option("--limit", *o.limit, 1, max_count);
  if (o.max_waiters) s.max_waiters = parse_count_option("--max-waiters", *o.max_waiters, 0, max_count);
  if (o.timeout) s.timeout = parse_duration_option("--timeout", *o.timeout);
  return s;
}

namespace {

// --json --events of the concurrency replay: the events, formatted as they are decided, wait in a temporary file
// (temporary_file: in $TMPDIR, removed when closed or when the program ends) until the summary, which comes first in
// the document, is known.
class json_event_spool {
 public:
  json_event_spool() : file_(temporary_file(), &std::fclose) {}
  [[nodiscard]] bool is_open() const noexcept { return file_ != nullptr; }

  // One element of the "events" array (format_event_json, format_concurrency_event_json).
  void add(const std::string& element) {
    std::string text = empty_ ? "" : ",\n";
    empty_ = false;
    text += element;
    if (std::fwrite(text.data(), 1, text.size(), file_.get()) != text.size()) failed_ = true;
  }
  // Makes the file ready to be read back; false (errno says why) if writing it failed.
  [[nodiscard]] bool rewind() {
    return !failed_ && std::fflush(file_.get()) == 0 && std::fseek(file_.get(), 0, SEEK_SET) == 0;
  }
  void copy_to(std::ostream& out) {
    char buffer[1 << 16];
    while (const std::size_t got = std::fread(buffer, 1, sizeof buffer, file_.get())) {
      out.write(buffer, static_cast<std::streamsize>(got));
    }
  }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  bool empty_ = true;
  bool failed_ = false;
};

int run_concurrency(const replay_options& o, std::istream& in, std::ostream& out, std::ostream& err) {
  const auto fail = [&](const std::string& message) {
    err << "admit replay: " << message << "\n";
    return exit_bad_input;
  };
  concurrency_settings settings;
  log_request reading;
  try {
    settings = to_concurrency_settings(o);
    reading = to_log_request(o);
  } catch (const usage_error& e) {
    return fail(e.what());
  }
  if (auto error = check_plot_name(o.plot); !error.empty()) return fail(error);
  const trace_input input{o.trace, o.stdin_is_terminal, "admit replay"};
  const std::string source = input.source();
  plot_probe plot(o.plot);
  if (auto error = plot.check(); !error.empty()) return fail(error);
  const auto fail_replay = [&](const std::string& message) {
    plot.forget();
    return fail(message);
  };
  // The replay streams: each event is written as soon as it is decided (--events), or spooled (--json --events).
  std::optional<json_event_spool> spool;
  concurrency_replayer::event_sink sink;
  if (o.events && o.json) {
    spool.emplace();
    if (!spool->is_open()) {
      err << "admit replay: cannot create a temporary file for --json --events in " << temporary_directory().string()
          << " ($TMPDIR): " << std::strerror(errno) << "\n";
      return exit_failure;
    }
    sink = [&](const request_event& e) { spool->add(format_concurrency_event_json(e)); };
  } else if (o.events) {
    sink = [&](const request_event& e) { out << format_concurrency_event(e); };
  }
  concurrency_result result;
  try {
    if (auto error = read_trace_input(input, in, err,
                                      [&](std::istream& s) {
                                        if (reading.format == log_format::plain) {
                                          result = replay_concurrency(settings, s, sink);
                                          return;
                                        }
                                        log_reader reader(s, reading);
                                        concurrency_replayer replayer(settings, sink);
                                        for (log_record r; reader.read(r);) {
                                          replayer.add(request{r.t_ns, r.duration_ns, r.n, r.line});
                                        }
                                        result = replayer.finish();
                                        result.skipped_lines = reader.skipped();
                                        result.reordered = reader.reordered();
                                      });
        !error.empty()) {
      return fail_replay(error);
    }
  } catch (const std::invalid_argument& e) {
    return fail_replay(e.what());
  } catch (const usage_error& e) {  // an access log's reader refusing its request (a --per-key field it lacks)
    return fail_replay(e.what());
  }
  if (result.requests == 0) {
    return fail_replay(reading.format == log_format::plain ? empty_trace_message(source, "`<arrival> <duration> [n]`")
                                                           : empty_log_message(source, reading, result.skipped_lines));
  }
  if (o.plot) {
    const auto error =
        write_plot_file(*o.plot, [&](std::ostream& svg) { write_concurrency_svg(svg, settings, source, result); });
    if (!error.empty()) return fail(error);
  }
  if (o.json) {
    if (spool) {
      if (!spool->rewind()) {
        err << "admit replay: cannot write the temporary file of --json --events: " << std::strerror(errno) << "\n";
        return exit_failure;
      }
      write_concurrency_json(out, settings, source, result, [&](std::ostream& to) { spool->copy_to(to); });
    } else {
      write_concurrency_json(out, settings, source, result, false);
    }
  } else if (o.events) {
    write_concurrency_summary(out, settings, source, result, /*comment=*/true);
  } else {
    write_concurrency_summary(out, settings, source, result);
  }
  out.flush();
  if (!out) {
    err << "admit replay: write error on standard output\n";
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace

int run_replay(const replay_options& o, std::istream& in, std::ostream& out, std::ostream& err) {
  if (o.algorithm == concurrency_algorithm_name) return run_concurrency(o, in, out, err);
  const auto fail = [&](const std::string& message) {
    err << "admit replay: " << message << "\n";
    return exit_bad_input;
  };
  replay_settings settings;
  log_request reading;
  try {
    settings = resolve(to_config(o));
    reading = to_log_request(o);
  } catch (const usage_error& e) {
    return fail(e.what());
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  }
  if (auto error = check_plot_name(o.plot); !error.empty()) return fail(error);
  plot_probe plot(o.plot);
  if (auto error = plot.check(); !error.empty()) return fail(error);
  const auto fail_replay = [&](const std::string& message) {
    plot.forget();
    return fail(message);
  };

  const trace_input input{o.trace, o.stdin_is_terminal, "admit replay"};
  const std::string source = input.source();
  // The replay streams: each event is written as soon as it is decided (--events), or spooled (--json --events).
  rate_replay_options engine;
  std::optional<json_event_spool> spool;
  if (o.events && o.json) {
    spool.emplace();
    if (!spool->is_open()) {
      err << "admit replay: cannot create a temporary file for --json --events in " << temporary_directory().string()
          << " ($TMPDIR): " << std::strerror(errno) << "\n";
      return exit_failure;
    }
    engine.on_event = [&](const event& e, std::string_view key) { spool->add(format_event_json(e, key)); };
  } else if (o.events) {
    engine.on_event = [&](const event& e, std::string_view key) { out << format_event(e, key); };
  }
  engine.per_key = reading.per_key.has_value();
  replay_result result;
  report_context ctx{settings, source};
  ctx.per_key = reading.per_key.value_or("");
  try {
    if (auto error = read_trace_input(input, in, err,
                                      [&](std::istream& s) {
                                        if (reading.format == log_format::plain) {
                                          trace_source arrivals(s);
                                          result = replay(settings, arrivals, engine);
                                          return;
                                        }
                                        log_reader reader(s, reading);
                                        log_source arrivals(reader);
                                        result = replay(settings, arrivals, engine);
                                        ctx.skipped_lines = reader.skipped();
                                        ctx.reordered = reader.reordered();
                                      });
        !error.empty()) {
      return fail_replay(error);
    }
  } catch (const std::invalid_argument& e) {
    return fail_replay(e.what());
  } catch (const usage_error& e) {  // an access log's reader refusing its request (a --per-key field it lacks)
    return fail_replay(e.what());
  }
  if (result.arrivals == 0) {
    return fail_replay(reading.format == log_format::plain ? empty_trace_message(source, "`<seconds since start> [n]`")
                                                           : empty_log_message(source, reading, ctx.skipped_lines));
  }

  if (o.plot) {
    const auto error = write_plot_file(*o.plot, [&](std::ostream& svg) { write_svg(svg, ctx, result); });
    if (!error.empty()) return fail(error);
  }
  if (o.json) {
    if (spool) {
      if (!spool->rewind()) {
        err << "admit replay: cannot write the temporary file of --json --events: " << std::strerror(errno) << "\n";
        return exit_failure;
      }
      write_json(out, ctx, result, [&](std::ostream& to) { spool->copy_to(to); });
    } else {
      write_json(out, ctx, result, false);
    }
  } else if (o.events) {
    write_summary(out, ctx, result, /*comment=*/true);
  } else {
    write_summary(out, ctx, result);
  }
  out.flush();
  if (!out) {
    err << "admit replay: write error on standard output\n";
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace admit::cli
