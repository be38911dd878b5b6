// admit::redis::token_bucket — the token bucket's parameters for the shared limiter machinery (see token_bucket.hpp
// and limiter.cpp).
#include "admit/redis/token_bucket.hpp"

#include <string>
#include <utility>

#include "functions.hpp"
#include "parameters.hpp"

namespace admit::redis {

namespace {

const script& token_bucket_script() { return detail::function_script(detail::admit_function::token_bucket); }

}  // namespace

token_bucket::token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options)
    : token_bucket(c, std::move(name), r, burst, std::move(options),
                   detail::checked_interval("token_bucket", r, burst)) {}

token_bucket::token_bucket(client& c, std::string name, rate r, std::int64_t burst, limiter_options options,
                           std::chrono::microseconds interval)
    : rate_limiter(c,
                   detail::make_limiter_core("token_bucket", std::move(name),
                                             detail::rate_algorithm(token_bucket_script(), r, burst, interval),
                                             std::move(options)),
                   r, interval, "token_bucket") {}

}  // namespace admit::redis
