// admit/testing/invalid_argument_message.hpp — what a std::invalid_argument says, for tests of error messages.
//
// Invalid configuration throws std::invalid_argument naming the bad value; tests check that it does:
//
//   EXPECT_THAT(admit::testing::invalid_argument_message([] { admit::rate::parse("5/sec"); }), HasSubstr("5/sec"));
#pragma once

#include <stdexcept>
#include <string>

namespace admit::testing {

// Calls `f` and returns the message of the std::invalid_argument it throws, or "(no exception)" when it returns.
// Any other exception propagates.
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    static_cast<F&&>(f)();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace admit::testing
