// cli/replay/arrival_source.hpp — where a rate replay reads its arrivals from: a trace of `<seconds> [n]` lines
// (trace_source), an access log (cli/replay/access_log.hpp), a vector (span_source). A source hands out one arrival at
// a time, so a replay holds none of them.
//
//   admit::cli::trace_source arrivals(std::cin);
//   admit::cli::keyed_arrival next;
//   while (arrivals.read(next)) use(next.a.t_ns, next.a.n);
//
// A replay reads each arrival once, in order; a search that replays many candidate limits (one pass each) makes a
// source per pass.
// Thread safety: none (one reader per source).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "cli/replay/trace.hpp"

namespace admit::cli {

// An arrival as a source hands it over: the arrival, and its key for a --per-key replay (the text stays valid until
// the source's next read).
struct keyed_arrival {
  arrival a;
  std::string_view key;
};

// Where a replay reads its arrivals from: a trace file, an access log, a vector. A replay reads each arrival once, in
// order; a search that replays many candidate limits (each one pass) makes a source per pass.
class arrival_source {
 public:
  virtual ~arrival_source() = default;
  // Reads the next arrival into `next`; false at the end. Throws what the source's parser throws (trace_error).
  virtual bool read(keyed_arrival& next) = 0;
};

// The arrivals of a span, without keys.
class span_source final : public arrival_source {
 public:
  explicit span_source(std::span<const arrival> arrivals) noexcept : arrivals_(arrivals) {}
  bool read(keyed_arrival& next) override {
    if (i_ == arrivals_.size()) return false;
    next = {arrivals_[i_++], {}};
    return true;
  }

 private:
  std::span<const arrival> arrivals_;
  std::size_t i_ = 0;
};

// The arrivals of a trace of `<seconds since start> [n]` lines (cli/replay/trace.hpp), read line by line from `in`
// (which must outlive the source). read() throws trace_error naming the line, and "read error" when the stream fails.
class trace_source final : public arrival_source {
 public:
  explicit trace_source(std::istream& in) noexcept : in_(in) {}
  bool read(keyed_arrival& next) override;

 private:
  std::istream& in_;
  trace_parser parser_;
  std::string line_;
};

}  // namespace admit::cli
