// admit::redis::sliding_log — the sliding log's parameters for the shared limiter machinery (see
// sliding_log.hpp and limiter.cpp).
#include "admit/redis/sliding_log.hpp"

#include <string>
#include <utility>

#include "functions.hpp"
#include "parameters.hpp"

namespace admit::redis {

namespace {

const script& sliding_log_script() { return detail::function_script(detail::admit_function::sliding_log); }

}  // namespace

sliding_log::sliding_log(client& c, std::string name, std::int64_t limit, std::chrono::nanoseconds window,
                         limiter_options options)
    : sliding_log(c, std::move(name), limit, std::move(options),
                  detail::checked_window("sliding_log", limit, sliding_log::max_limit, window, false)) {}

sliding_log::sliding_log(client& c, std::string name, std::int64_t limit, limiter_options options,
                         std::chrono::microseconds window)
    : limiter(c, detail::make_limiter_core("sliding_log", std::move(name),
                                           detail::window_algorithm(sliding_log_script(), limit, window),
                                           std::move(options))),
      window_(window) {}

}  // namespace admit::redis
