// admit::redis::sliding_window — the sliding window counter's parameters for the shared limiter machinery (see
// sliding_window.hpp and limiter.cpp).
#include "admit/redis/sliding_window.hpp"

#include <string>
#include <utility>

#include "functions.hpp"
#include "parameters.hpp"

namespace admit::redis {

namespace {

const script& sliding_window_script() { return detail::function_script(detail::admit_function::sliding_window); }

}  // namespace

sliding_window::sliding_window(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                               limiter_options options)
    : sliding_window(c, std::move(name), limit, std::move(options),
                     detail::checked_window("sliding_window", limit, sliding_window::max_limit, window, true)) {}

sliding_window::sliding_window(client& c, std::string name, std::int64_t limit, limiter_options options,
                               std::chrono::microseconds window)
    : limiter(c, detail::make_limiter_core("sliding_window", std::move(name),
                                           detail::window_algorithm(sliding_window_script(), limit, window),
                                           std::move(options))),
      window_(window) {}

}  // namespace admit::redis
