// cli/recommend/recorded_trace.hpp — a trace read once and replayed many times: `admit recommend` replays one
// candidate limit per pass, and a pass must not parse the text again (nor can standard input be read twice).
//
//   recorded_trace trace = recorded_trace::read(file, reading);   // any format cli/replay/access_log.hpp reads
//   replay_result r = trace.replay_rate(settings, /*per_key=*/false);
//   concurrency_result c = trace.replay_concurrency({.limit = 8});
//
// The records go into an unnamed temporary file (temporary_file: in $TMPDIR, gone when closed or when the program
// ends), 32 bytes each, so memory does not grow with the trace: a pass reads the file back in blocks of 64 KiB, and
// the page cache keeps it in memory when it fits. In memory: the distinct keys of a --per-key trace (each key's text
// once).
// Each pass drives the same engine as `admit replay` (rate_replayer, concurrency_replayer), so a pass answers exactly
// what `admit replay` prints for that limit.
// Thread safety: passes (replay_*) may run concurrently on different threads: each reads the file through its own
// descriptor offset (pread). Reading the trace is not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "cli/replay/access_log.hpp"
#include "cli/replay/concurrency_replay.hpp"
#include "cli/replay/replay.hpp"

namespace admit::cli {

class recorded_trace {
 public:
  // Reads every record of `in`: a plain trace (`<seconds> [n]`, or `<arrival> <duration> [n]` with
  // reading.needs_duration) or an access log as log_reader reads it (reading.per_key: with each record's key). Throws
  // trace_error (the line that does not parse), usage_error (a --per-key field the format lacks), std::system_error
  // when the temporary file cannot be created or written.
  static recorded_trace read(std::istream& in, const log_request& reading);

  [[nodiscard]] std::int64_t records() const noexcept { return records_; }
  [[nodiscard]] std::int64_t tokens() const noexcept { return tokens_; }
  // The most tokens one key asks for over the trace (the whole trace's when it was read without keys).
  [[nodiscard]] std::int64_t most_key_tokens() const noexcept { return most_key_tokens_; }
  // The sum of n × duration over the requests (with durations): the permit-time they ask for, in permit-ns.
  [[nodiscard]] double permit_ns() const noexcept { return permit_ns_; }
  [[nodiscard]] std::int64_t first_ns() const noexcept { return first_ns_; }
  [[nodiscard]] std::int64_t last_ns() const noexcept { return last_ns_; }
  [[nodiscard]] std::int64_t keys() const noexcept { return static_cast<std::int64_t>(keys_.size()); }
  [[nodiscard]] std::int64_t skipped_lines() const noexcept { return skipped_; }  // --skip-bad-lines
  [[nodiscard]] std::int64_t reordered() const noexcept { return reordered_; }    // access logs (log_reader)
  [[nodiscard]] bool has_durations() const noexcept { return durations_; }
  [[nodiscard]] bool has_keys() const noexcept { return !keys_.empty(); }

  // One pass of the rate replay (per_key: one limiter per key; the trace must have been read with keys).
  [[nodiscard]] replay_result replay_rate(const replay_settings& settings, bool per_key) const;
  // One pass of the concurrency replay (the trace must have been read with durations).
  [[nodiscard]] concurrency_result replay_concurrency(const concurrency_settings& settings) const;

  struct record {
    std::int64_t t_ns, duration_ns, n;
    std::uint32_t key;  // index into keys_
    std::uint32_t unused;
  };

 private:
  recorded_trace() = default;
  template <class Visit>
  void for_each(Visit visit) const;

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
  std::vector<std::string> keys_;
  std::int64_t records_ = 0, tokens_ = 0, most_key_tokens_ = 0, first_ns_ = 0, last_ns_ = 0, skipped_ = 0,
               reordered_ = 0;
  double permit_ns_ = 0;
  bool durations_ = false;
};

}  // namespace admit::cli
