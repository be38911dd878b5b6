#include "cli/replay/access_log.hpp"

#include <algorithm>
#include <cmath>
#include <istream>
#include <iterator>
#include <span>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/common/decimal.hpp"
#include "cli/common/duration.hpp"
#include "cli/common/message.hpp"
#include "cli/common/text.hpp"
#include "cli/replay/log_time.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli {

namespace {

// A line that cannot be read, and no later line can be either (a csv header without a needed column): never skipped.
class log_header_error : public trace_error {
 public:
  using trace_error::trace_error;
};

[[noreturn]] void bad_field(std::size_t line, std::string_view field, const std::string& what) {
  throw trace_error(line, "field " + quote(field) + ": " + what);
}

bool is_missing(std::string_view value) noexcept { return value.empty() || value == "-"; }

// A named field of the nginx or envoy format: its index in split_log_line's fields and how the message shows it.
struct named_field {
  std::string_view name;
  std::size_t index;
  std::string_view shown;  // the format's own spelling, for messages
};

constexpr named_field nginx_fields[] = {{"remote_addr", 0, "$remote_addr"},
                                        {"remote_user", 2, "$remote_user"},
                                        {"time_local", 3, "[$time_local]"},
                                        {"request", 4, "\"$request\""},
                                        {"status", 5, "$status"},
                                        {"body_bytes_sent", 6, "$body_bytes_sent"},
                                        {"http_referer", 7, "\"$http_referer\""},
                                        {"http_user_agent", 8, "\"$http_user_agent\""}};
constexpr named_field envoy_fields[] = {{"start_time", 0, "[%START_TIME%]"},
                                        {"request", 1, "\"%REQ(:METHOD)% ... %PROTOCOL%\""},
                                        {"response_code", 2, "%RESPONSE_CODE%"},
                                        {"response_flags", 3, "%RESPONSE_FLAGS%"},
                                        {"bytes_received", 4, "%BYTES_RECEIVED%"},
                                        {"bytes_sent", 5, "%BYTES_SENT%"},
                                        {"duration", 6, "%DURATION%"},
                                        {"upstream_service_time", 7, "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"},
                                        {"x_forwarded_for", 8, "\"%REQ(X-FORWARDED-FOR)%\""},
                                        {"user_agent", 9, "\"%REQ(USER-AGENT)%\""},
                                        {"request_id", 10, "\"%REQ(X-REQUEST-ID)%\""},
                                        {"authority", 11, "\"%REQ(:AUTHORITY)%\""},
                                        {"upstream_host", 12, "\"%UPSTREAM_HOST%\""}};

std::span<const named_field> fields_of(log_format f) {
  if (f == log_format::nginx) return nginx_fields;
  if (f == log_format::envoy) return envoy_fields;
  return {};
}

const named_field* find_field(log_format f, std::string_view name) {
  for (const auto& field : fields_of(f)) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// A csv or jsonl time: decimal seconds (exact) or RFC 3339.
std::int64_t time_from_text(std::size_t line, std::string_view field, std::string_view text) {
  if (const auto seconds = parse_seconds(text)) return *seconds;
  if (const auto t = parse_rfc3339_time(text)) return *t;
  bad_field(line, field,
            "invalid time " + quote_excerpt(text) +
                ": expected seconds (a decimal with up to 9 fraction digits) or an RFC 3339 time such as "
                "2026-12-01T10:00:00.250Z, from 1970 to 2262-04-11");
}

std::int64_t duration_from_text(std::size_t line, std::string_view field, std::string_view text) {
  if (const auto seconds = parse_seconds(text)) return *seconds;
  if (const auto d = parse_duration(text)) return d->count();
  bad_field(line, field,
            "invalid duration " + quote_excerpt(text) + ": expected seconds (a decimal) or a duration with a unit (" +
                std::string(duration_units()) + "), such as 250ms");
}

std::int64_t cost_from_text(std::size_t line, std::string_view field, std::string_view text) {
  const auto n = text.size() <= 10 ? parse_whole_number(text) : std::nullopt;
  if (!n || *n < 1 || *n > max_tokens_per_arrival) {
    bad_field(line, field,
              "invalid cost " + quote_excerpt(text) + ": expected a whole number of tokens from 1 to " +
                  std::to_string(max_tokens_per_arrival));
  }
  return *n;
}

}  // namespace

class log_reader::parser {
 public:
  virtual ~parser() = default;
  // Reads a non-blank line into `r` (its time from any origin in r.t_ns). false: the line holds no record (a csv
  // header). Throws trace_error.
  virtual bool parse(std::string_view line, std::size_t number, log_record& r) = 0;
};

namespace {

// nginx and envoy: fields by position.
class positional_parser final : public log_reader::parser {
 public:
  explicit positional_parser(const log_request& request) : format_(request.format), request_(request) {
    if (request.per_key && *request.per_key != "client") {
      key_ = find_field(format_, *request.per_key);
      if (key_ == nullptr) {
        throw usage_error("--per-key " + quote(*request.per_key) + " is not a field of the " +
                          std::string(to_string(format_)) + " format; use client or " + log_key_names(format_));
      }
    }
  }

  bool parse(std::string_view line, std::size_t number, log_record& r) override {
    const bool nginx = format_ == log_format::nginx;
    // Neither format's lines start with '#' (an address, a '[' time): most likely admit's own trace, whose comments do.
    if (!line.empty() && line.front() == '#') {
      throw trace_error(number, std::string(nginx ? "nginx's" : "Envoy's") +
                                    " access log has no line starting with '#' (" + quote_excerpt(line) +
                                    "); for admit's trace of `<seconds> [n]` lines, use --format plain");
    }
    split_log_line(line, number, fields_);
    if (fields_.size() < 7) {  // both formats' first seven fields hold what the replay reads
      throw trace_error(number, "expected " +
                                    std::string(nginx ? "nginx's combined or common log format"
                                                      : "Envoy's default access log format") +
                                    ", found " + plural(static_cast<std::int64_t>(fields_.size()), "field", "fields") +
                                    " in " + quote_excerpt(line));
    }
    const named_field& time = nginx ? nginx_fields[2] : envoy_fields[0];
    const std::string_view t = fields_[time.index];
    const auto at = nginx ? parse_nginx_time(t) : parse_rfc3339_time(t);
    if (!at) {
      bad_field(number, time.shown,
                "invalid time " + quote_excerpt(t) +
                    (nginx ? ": expected dd/Mon/yyyy:hh:mm:ss ±hhmm, such as 10/Oct/2000:13:55:36 -0700"
                           : ": expected an RFC 3339 time such as 2016-04-15T20:17:00.310Z") +
                    ", from 1970 to 2262-04-11");
    }
    r.t_ns = *at;
    r.n = 1;
    if (request_.needs_duration) {
      if (nginx) throw std::logic_error("the nginx format has no duration");  // refused before reading
      const std::string_view d = fields_[6];
      const auto ms = d.size() <= 12 ? parse_whole_number(d) : std::nullopt;
      if (!ms) {
        bad_field(number, envoy_fields[6].shown,
                  (is_missing(d) ? "missing duration " : "invalid duration ") + quote_excerpt(d) +
                      ": expected a whole number of milliseconds");
      }
      r.duration_ns = *ms * ns_per_ms;
    }
    if (request_.per_key) r.key = key_of(number);
    return true;
  }

 private:
  std::string_view key_of(std::size_t number) {
    const named_field* field = key_;
    if (field == nullptr) field = format_ == log_format::nginx ? &nginx_fields[0] : &envoy_fields[8];
    if (field->index >= fields_.size()) {
      bad_field(number, field->shown,
                "missing: the line has only " + plural(static_cast<std::int64_t>(fields_.size()), "field", "fields") +
                    (format_ == log_format::nginx && fields_.size() < std::size(nginx_fields)
                         ? " (nginx's common format, which has no $http_referer or $http_user_agent: those are in "
                           "its combined format)"
                         : std::string()));
    }
    std::string_view key = fields_[field->index];
    if (key_ == nullptr && format_ == log_format::envoy) {
      // The client is the first address X-Forwarded-For lists: "203.0.113.7, 10.0.0.1" -> "203.0.113.7".
      key = key.substr(0, key.find(','));
      while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    }
    return key.empty() ? std::string_view("-") : key;
  }

  log_format format_;
  log_request request_;
  const named_field* key_ = nullptr;  // nullptr: the client
  std::vector<std::string_view> fields_;
};

// csv: fields by the header's names.
class csv_parser final : public log_reader::parser {
 public:
  explicit csv_parser(const log_request& request) : request_(request) {}

  bool parse(std::string_view line, std::size_t number, log_record& r) override {
    split_csv_line(line, number, storage_, fields_);
    if (!header_) {
      header_ = true;
      time_ = column(number, request_.fields.time, "--time-field");
      if (request_.per_key) {
        const bool client = *request_.per_key == "client";
        key_ = column(number, client ? request_.fields.key : *request_.per_key, client ? "--key-field" : "--per-key");
      }
      if (!request_.fields.cost.empty()) cost_ = column(number, request_.fields.cost, "--cost-field");
      if (request_.needs_duration) duration_ = column(number, request_.fields.duration, "--duration-field");
      return false;
    }
    const auto value = [&](std::size_t index, const std::string& name) -> std::string_view {
      if (index >= fields_.size()) {
        bad_field(number, name,
                  "missing: the line has " + std::to_string(fields_.size()) + " fields, the header " +
                      std::to_string(names_.size()));
      }
      return fields_[index];
    };
    const std::string_view t = value(time_, request_.fields.time);
    if (is_missing(t)) bad_field(number, request_.fields.time, "missing time");
    r.t_ns = time_from_text(number, request_.fields.time, t);
    r.n = 1;
    if (cost_) {
      const std::string_view c = value(*cost_, request_.fields.cost);
      if (is_missing(c)) bad_field(number, request_.fields.cost, "missing cost");
      r.n = cost_from_text(number, request_.fields.cost, c);
    }
    if (duration_) {
      const std::string_view d = value(*duration_, request_.fields.duration);
      if (is_missing(d)) bad_field(number, request_.fields.duration, "missing duration");
      r.duration_ns = duration_from_text(number, request_.fields.duration, d);
    }
    if (key_) {
      const std::string_view k = value(*key_, names_[*key_]);
      r.key = k.empty() ? std::string_view("-") : k;
    }
    return true;
  }

 private:
  std::size_t column(std::size_t number, const std::string& name, const char* option) {
    if (names_.empty()) {
      for (const auto f : fields_) names_.emplace_back(f);
    }
    const auto it = std::find(names_.begin(), names_.end(), name);
    if (it == names_.end()) {
      std::string known;
      for (const auto& n : names_) {
        if (!known.empty()) known += ", ";
        known += quote(n);
      }
      throw log_header_error(number,
                             "the header has no column " + quote(name) + " (" + option + "); its columns: " + known);
    }
    const auto at = static_cast<std::size_t>(it - names_.begin());
    if (const auto again = std::find(it + 1, names_.end(), name); again != names_.end()) {
      // Which of the two holds what this option reads is not known: neither is taken.
      throw log_header_error(number, "the header names the column " + quote(name) + " (" + option +
                                         ") twice: columns " + std::to_string(at + 1) + " and " +
                                         std::to_string(static_cast<std::size_t>(again - names_.begin()) + 1));
    }
    return at;
  }

  log_request request_;
  bool header_ = false;
  std::vector<std::string> names_;
  std::size_t time_ = 0;
  std::optional<std::size_t> key_, cost_, duration_;
  std::string storage_;
  std::vector<std::string_view> fields_;
};

// jsonl: fields by name, or by JSON pointer.
class jsonl_parser final : public log_reader::parser {
 public:
  explicit jsonl_parser(const log_request& request) : request_(request) {}

  bool parse(std::string_view line, std::size_t number, log_record& r) override {
    try {
      record_ = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // (nlohmann's text without its "[json.exception.parse_error.101] " prefix: where, and what was wrong.)
      std::string why = e.what();
      if (const auto at = why.find("] "); why.starts_with("[json.exception") && at != std::string::npos) {
        why.erase(0, at + 2);
      }
      throw trace_error(number, "not JSON: " + why + ", in " + quote_excerpt(line));
    }
    if (!record_.is_object()) throw trace_error(number, "expected a JSON object, found " + quote_excerpt(line));
    const auto& f = request_.fields;
    const nlohmann::json* t = field(number, f.time);
    if (t == nullptr) bad_field(number, f.time, "missing time");
    r.t_ns = t->is_string() ? time_from_text(number, f.time, t->get_ref<const std::string&>())
                            : seconds_of(number, f.time, *t, "time");
    r.n = 1;
    if (!f.cost.empty()) {
      const nlohmann::json* c = field(number, f.cost);
      if (c == nullptr) bad_field(number, f.cost, "missing cost");
      r.n = c->is_string() ? cost_from_text(number, f.cost, c->get_ref<const std::string&>())
                           : cost_from_text(number, f.cost, c->dump());
    }
    if (request_.needs_duration) {
      const nlohmann::json* d = field(number, f.duration);
      if (d == nullptr) bad_field(number, f.duration, "missing duration");
      r.duration_ns = d->is_string() ? duration_from_text(number, f.duration, d->get_ref<const std::string&>())
                                     : seconds_of(number, f.duration, *d, "duration");
    }
    if (request_.per_key) {
      const std::string& name = *request_.per_key == "client" ? f.key : *request_.per_key;
      const nlohmann::json* k = field(number, name);
      if (k == nullptr) {
        key_ = "-";
      } else if (k->is_string()) {
        key_ = k->get_ref<const std::string&>();
        if (key_.empty()) key_ = "-";
      } else {
        key_ = k->dump();
      }
      r.key = key_;
    }
    return true;
  }

 private:
  // The member `name` (a JSON pointer when it starts with '/'); nullptr when absent or null.
  const nlohmann::json* field(std::size_t number, const std::string& name) {
    const nlohmann::json* v = nullptr;
    if (!name.empty() && name.front() == '/') {
      try {
        const nlohmann::json::json_pointer pointer(name);
        if (record_.contains(pointer)) v = &record_.at(pointer);
      } catch (const nlohmann::json::exception&) {
        bad_field(number, name, "not a JSON pointer (such as /request/client)");
      }
    } else if (const auto it = record_.find(name); it != record_.end()) {
      v = &*it;
    }
    return v == nullptr || v->is_null() ? nullptr : v;
  }

  static std::int64_t seconds_of(std::size_t number, std::string_view name, const nlohmann::json& v, const char* what) {
    if (v.is_number_unsigned() || v.is_number_integer()) {
      const auto s = v.get<std::int64_t>();
      if (s >= 0 && s <= max_trace_seconds * 3) return s * ns_per_second;
    } else if (v.is_number_float()) {
      const double s = v.get<double>();
      // A double: to about a microsecond for times since the epoch (a string of decimal seconds is exact).
      if (s >= 0 && s <= static_cast<double>(max_trace_seconds) * 3) return std::llround(s * 1e9);
    }
    bad_field(number, name,
              std::string("invalid ") + what + " " + quote_excerpt(v.dump()) +
                  ": expected a number of seconds from 0, or a string");
  }

  log_request request_;
  nlohmann::json record_;
  std::string key_;
};

}  // namespace

std::optional<log_format> parse_log_format(std::string_view name) noexcept {
  for (const auto f : {log_format::plain, log_format::nginx, log_format::envoy, log_format::csv, log_format::jsonl}) {
    if (to_string(f) == name) return f;
  }
  return std::nullopt;
}

std::string_view to_string(log_format f) noexcept {
  switch (f) {
    case log_format::plain:
      return "plain";
    case log_format::nginx:
      return "nginx";
    case log_format::envoy:
      return "envoy";
    case log_format::csv:
      return "csv";
    case log_format::jsonl:
      return "jsonl";
  }
  return "?";
}

std::string log_format_names() { return "plain|nginx|envoy|csv|jsonl"; }

std::string log_key_names(log_format f) {
  std::string out;
  // Appended piece by piece: `"literal" + std::string` trips g++ 12's false -Wrestrict at -O3 (GCC bug 105651).
  for (const auto& field : fields_of(f)) {
    if (!out.empty()) out += '|';
    out += field.name;
  }
  return out;
}

log_reader::log_reader(std::istream& in, log_request request) : in_(in), skip_bad_lines_(request.skip_bad_lines) {
  switch (request.format) {
    case log_format::nginx:
    case log_format::envoy:
      parser_ = std::make_unique<positional_parser>(request);
      break;
    case log_format::csv:
      parser_ = std::make_unique<csv_parser>(request);
      break;
    case log_format::jsonl:
      parser_ = std::make_unique<jsonl_parser>(request);
      break;
    case log_format::plain:
      throw std::logic_error("log_reader: the plain format has its own reader (trace_source)");
  }
}

log_reader::~log_reader() = default;

bool log_reader::read(log_record& next) {
  while (std::getline(in_, line_)) {
    std::string_view line = line_;
    if (++line_number_ == 1) line = without_bom(line);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    try {
      if (!parser_->parse(line, line_number_, next)) continue;
    } catch (const log_header_error&) {
      throw;
    } catch (const trace_error&) {
      if (!skip_bad_lines_) throw;
      ++skipped_;
      continue;
    }
    next.line = line_number_;
    if (!started_) {
      started_ = true;
      origin_ns_ = next.t_ns;
    }
    std::int64_t t = next.t_ns - origin_ns_;
    if (t > max_trace_seconds * ns_per_second) {
      throw trace_error(line_number_, "time is more than " + std::to_string(max_trace_seconds) +
                                          " s after the first record's: beyond the largest supported time");
    }
    if (t < latest_ns_) {
      ++reordered_;
      t = latest_ns_;
    }
    latest_ns_ = t;
    next.t_ns = t;
    return true;
  }
  if (in_.bad()) throw trace_error(line_number_ + 1, "read error");
  return false;
}

bool log_source::read(keyed_arrival& next) {
  log_record r;
  if (!reader_.read(r)) return false;
  next = {arrival{r.t_ns, r.n, r.line}, r.key};
  return true;
}

void split_log_line(std::string_view line, std::size_t line_number, std::vector<std::string_view>& fields) {
  fields.clear();
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) return;
    const char open = line[i];
    if (open == '[' || open == '"') {
      const char close = open == '[' ? ']' : '"';
      const std::size_t start = ++i;
      while (i < line.size() && line[i] != close) i += line[i] == '\\' && open == '"' ? 2 : 1;
      if (i >= line.size()) {
        throw trace_error(line_number, std::string("a field opened with ") + open +
                                           " does not end: " + quote_excerpt(line.substr(start - 1)));
      }
      fields.push_back(line.substr(start, i - start));
      ++i;
    } else {
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      fields.push_back(line.substr(start, i - start));
    }
  }
}

void split_csv_line(std::string_view line, std::size_t line_number, std::string& storage,
                    std::vector<std::string_view>& fields) {
  fields.clear();
  storage.clear();
  storage.reserve(line.size());  // never reallocated below: the views stay valid
  std::size_t i = 0;
  while (true) {
    const std::size_t start = storage.size();
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) {
          throw trace_error(line_number, "a quoted field does not end on its line: " + quote_excerpt(line));
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            storage += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        storage += line[i++];
      }
      while (i < line.size() && line[i] != ',') storage += line[i++];  // text after the quote: kept, as most readers
    } else {
      while (i < line.size() && line[i] != ',') storage += line[i++];
    }
    fields.emplace_back(storage.data() + start, storage.size() - start);
    if (i >= line.size()) return;
    ++i;  // the comma
  }
}

}  // namespace admit::cli
