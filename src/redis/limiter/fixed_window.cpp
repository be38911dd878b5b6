// admit::redis::fixed_window — the fixed window counter's parameters for the shared limiter machinery (see
// fixed_window.hpp and limiter.cpp).
#include "admit/redis/fixed_window.hpp"

#include <string>
#include <utility>

#include "functions.hpp"
#include "parameters.hpp"

namespace admit::redis {

namespace {

const script& fixed_window_script() { return detail::function_script(detail::admit_function::fixed_window); }

}  // namespace

fixed_window::fixed_window(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                           limiter_options options)
    : fixed_window(c, std::move(name), limit, std::move(options),
                   detail::checked_window("fixed_window", limit, fixed_window::max_limit, window, false)) {}

fixed_window::fixed_window(client& c, std::string name, std::int64_t limit, limiter_options options,
                           std::chrono::microseconds window)
    : limiter(c, detail::make_limiter_core("fixed_window", std::move(name),
                                           detail::window_algorithm(fixed_window_script(), limit, window),
                                           std::move(options))),
      window_(window) {}

}  // namespace admit::redis
