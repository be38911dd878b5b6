// tests/cli/replay_testing.hpp — what the tests of `admit replay`'s engine (replay_engine_test.cpp, the real limiters
// in replay_limiters_test.cpp) and of the algorithm table (algorithms_test.cpp) share: configurations built in one
// line, the message a configuration is refused with, and a limiter with known answers.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/replay/options.hpp"
#include "cli/replay/replay.hpp"
#include "cli/replay/trace.hpp"

namespace admit::cli::replay_testing {

inline constexpr std::int64_t ms = 1'000'000;
inline constexpr std::int64_t s = 1'000'000'000;

inline std::vector<arrival> trace_of(std::string_view text) { return read_trace(text); }

// Designated initializers would read better, but g++ 12 warns (-Wmissing-field-initializers) on every omitted field.
using config_edit = std::function<void(replay_config&)>;
using options_edit = std::function<void(replay_options&)>;

inline replay_config config_for(algorithm a, const char* r, const config_edit& edit = {}) {
  replay_config c;
  c.algo = a;
  c.limit = admit::rate::parse(r);
  if (edit) edit(c);
  return c;
}

inline replay_settings settings_for(algorithm a, const char* r, const config_edit& edit = {}) {
  return resolve(config_for(a, r, edit));
}

inline replay_options options_for(const char* algo, const char* r, const options_edit& edit = {}) {
  replay_options o;
  o.algorithm = algo;
  o.rate = r;
  if (edit) edit(o);
  return o;
}

inline std::string resolve_error(replay_config c) {
  try {
    (void)resolve(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A limiter with a known answer: admits arrivals of even n after a delay of n ms, rejects odd n.
class even_limiter final : public replay_limiter {
 public:
  outcome offer(std::int64_t, std::int64_t n) override { return {n % 2 == 0, n % 2 == 0 ? n * ms : 0}; }
};

}  // namespace admit::cli::replay_testing
