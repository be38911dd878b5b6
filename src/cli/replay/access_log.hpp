// cli/replay/access_log.hpp — `admit replay --format nginx|envoy|csv|jsonl`: the arrivals of an access log, one record
// a line, read in file order.
//
//   nginx   the `combined` and `common` log formats:
//             $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer"
//             "$http_user_agent"
//           (common ends after $body_bytes_sent). The client is $remote_addr.
//   envoy   Envoy's default access log format:
//             [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE%
//             %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%
//             "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
//           The client is the first address of X-FORWARDED-FOR; the duration is DURATION, in milliseconds.
//   csv     a header line naming the columns, then one record a line (RFC 4180 quoting within a line: "a ""b"", c").
//   jsonl   one JSON object a line (parsed by nlohmann::json).
//
// In csv and jsonl the fields are named by log_fields (--time-field, --key-field, --cost-field, --duration-field); a
// jsonl name that starts with '/' is a JSON pointer ("/request/client"). A time there is a number of seconds (since
// the epoch, or any origin) or an RFC 3339 timestamp (cli/replay/log_time.hpp); a duration is a number of seconds or a
// duration with its unit ("250ms"); a cost is a whole number of tokens from 1. In nginx and envoy every record costs 1.
// A field written `-` (or, in csv and jsonl, empty or null) is missing: a missing time, cost or needed duration makes
// the line bad; a missing key is the key "-" (all such records share one limiter).
//
// Times: the first record is time zero; a record earlier than the latest one before it (logs are written when requests
// end, not when they start) is replayed at that latest time, in file order, and counted (log_reader::reordered()).
// Blank lines are ignored. A line that does not parse is a trace_error naming the line and the field:
//   line 7: field "time" ([$time_local]): invalid time "10/Oct/2000:13:55:36": expected dd/Mon/yyyy:hh:mm:ss ±hhmm
// unless skip_bad_lines, which counts it (log_reader::skipped()) and goes on.
// Thread safety: none (one reader per log).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/replay/arrival_source.hpp"

namespace admit::cli {

enum class log_format { plain, nginx, envoy, csv, jsonl };

// "plain" -> log_format::plain, ...; nullopt for an unknown name.
[[nodiscard]] std::optional<log_format> parse_log_format(std::string_view name) noexcept;
[[nodiscard]] std::string_view to_string(log_format f) noexcept;
// "plain|nginx|envoy|csv|jsonl"
[[nodiscard]] std::string log_format_names();

// The fields of a csv or jsonl log.
struct log_fields {
  std::string time = "time";          // --time-field
  std::string key = "client";         // --key-field: what `--per-key client` reads
  std::string cost;                   // --cost-field; empty: each record costs 1
  std::string duration = "duration";  // --duration-field (--algorithm concurrency)
};

// The fields of the nginx and envoy formats that --per-key may name besides `client`, "a|b|c".
[[nodiscard]] std::string log_key_names(log_format f);

// What a reader takes from each record.
struct log_request {
  log_format format = log_format::nginx;
  log_fields fields;
  std::optional<std::string> per_key;  // "client" or a field's name; nullopt: no key is read
  bool needs_duration = false;         // --algorithm concurrency
  bool skip_bad_lines = false;
};

// One record, its time since the first record's.
struct log_record {
  std::int64_t t_ns = 0;
  std::int64_t n = 1;
  std::int64_t duration_ns = 0;  // when needs_duration
  std::string_view key;          // when per_key; valid until the next read
  std::size_t line = 0;          // 1-based
};

class log_reader {
 public:
  // Throws usage_error for a request that cannot be read: plain (it has its own reader), a --per-key field the format
  // does not have.
  log_reader(std::istream& in, log_request request);
  ~log_reader();
  log_reader(const log_reader&) = delete;
  log_reader& operator=(const log_reader&) = delete;

  // The next record; false at the end. Throws trace_error (see above).
  bool read(log_record& next);

  [[nodiscard]] std::int64_t skipped() const noexcept { return skipped_; }
  [[nodiscard]] std::int64_t reordered() const noexcept { return reordered_; }

  class parser;  // one per format (access_log.cpp)

 private:
  std::istream& in_;
  bool skip_bad_lines_;
  std::unique_ptr<parser> parser_;
  std::string line_;
  std::size_t line_number_ = 0;
  bool started_ = false;
  std::int64_t origin_ns_ = 0, latest_ns_ = 0;
  std::int64_t skipped_ = 0, reordered_ = 0;
};

// A log's records as arrivals (cost as n, key for --per-key).
class log_source final : public arrival_source {
 public:
  explicit log_source(log_reader& reader) noexcept : reader_(reader) {}
  bool read(keyed_arrival& next) override;

 private:
  log_reader& reader_;
};

// Splits a line of the nginx or envoy formats into fields: `[...]` (brackets dropped), `"..."` (quotes dropped; a
// backslash escapes the next character, which is kept with it) or a run of characters up to a space. Throws
// trace_error for an unterminated bracket or quote.
void split_log_line(std::string_view line, std::size_t line_number, std::vector<std::string_view>& fields);

// Splits a csv line into fields (RFC 4180 within a line: a quoted field may hold commas and "" for a quote). The
// unquoted text of each field goes into `storage`, which the returned views point into. Throws trace_error for a
// quote that does not end.
void split_csv_line(std::string_view line, std::size_t line_number, std::string& storage,
                    std::vector<std::string_view>& fields);

}  // namespace admit::cli
