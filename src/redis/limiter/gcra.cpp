// admit::redis::gcra — the GCRA's parameters for the shared limiter machinery (see gcra.hpp and limiter.cpp).
#include "admit/redis/gcra.hpp"

#include <string>
#include <utility>

#include "functions.hpp"
#include "parameters.hpp"

namespace admit::redis {

namespace {

const script& gcra_script() { return detail::function_script(detail::admit_function::gcra); }

}  // namespace

gcra::gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options)
    : gcra(c, std::move(name), r, burst, std::move(options), detail::checked_interval("gcra", r, burst)) {}

gcra::gcra(client& c, std::string name, rate r, std::int64_t burst, limiter_options options,
           std::chrono::microseconds t)
    : rate_limiter(c,
                   detail::make_limiter_core("gcra", std::move(name),
                                             detail::rate_algorithm(gcra_script(), r, burst, t), std::move(options)),
                   r, t, "gcra") {}

}  // namespace admit::redis
