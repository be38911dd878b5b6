// libFuzzer target: the trace parser of `admit replay` on arbitrary bytes.
//
// Invariants: it never crashes; it fails only with trace_error, whose message starts with "line N: " for the line
// it reports, N between 1 and the number of lines, printable (valid UTF-8 without control characters, C1 or
// bidirectional controls: an excerpt of the line keeps its valid UTF-8 and escapes the rest) and bounded; on success
// every arrival has n >= 1, times never go back, line numbers increase, and each time round-trips through
// format_seconds()/parse_seconds().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common/message.hpp"
#include "cli/replay/trace.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  (void)what;
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace admit::cli;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t lines = 1;
  for (char c : text) lines += c == '\n' ? 1 : 0;

  std::vector<arrival> trace;
  try {
    trace = read_trace(text);
  } catch (const trace_error& e) {
    if (e.line() < 1 || e.line() > lines) fail("error names a line outside the input");
    const std::string prefix = "line " + std::to_string(e.line()) + ": ";
    const std::string_view message = e.what();
    if (message.substr(0, prefix.size()) != prefix) fail("message does not start with the line number");
    if (message.size() > 400) fail("message is not bounded");
    for (std::size_t i = 0; i < message.size();) {
      const auto c = static_cast<unsigned char>(message[i]);
      if (c < 0x20 || c == 0x7f) fail("control character in the message");
      const std::size_t length = c < 0x80 ? 1 : utf8_sequence_length(message.substr(i));
      if (length == 0) fail("invalid UTF-8 in the message");
      if (length > 1) {
        // C1 controls and bidirectional overrides/isolates act on a terminal: quote() escapes them.
        std::uint32_t cp = c & (0xffu >> (length + 1));
        for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<unsigned char>(message[i + k]) & 0x3fu);
        if (cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
          fail("C1 control or bidirectional control in the message");
        }
      }
      i += length;
    }
    return 0;
  }
  std::int64_t last_t = 0;
  std::size_t last_line = 0;
  for (const arrival& a : trace) {
    if (a.n < 1 || a.n > max_tokens_per_arrival) fail("n out of range");
    if (a.t_ns < last_t) fail("time went back");
    if (a.line <= last_line || a.line > lines) fail("line numbers out of order");
    if (parse_seconds(format_seconds(a.t_ns)) != a.t_ns) fail("time does not round-trip");
    last_t = a.t_ns;
    last_line = a.line;
  }
  return 0;
}
