// Every options struct of the public API can be written with designated initializers naming only the fields a user
// sets, without a -Wmissing-field-initializers warning (GCC's -Wextra warns about a member without a default member
// initializer that the initializer leaves out). Compiled, never run.
#include "snippet_prelude.hpp"

namespace {
[[maybe_unused]] void each_options_struct_takes_one_designated_field() {
  [[maybe_unused]] admit::semaphore_options semaphore{.max_waiters = 1};
  [[maybe_unused]] admit::concurrency_limiter_options limiter{.limit = 1};
  [[maybe_unused]] admit::pacer_options pacer{.slack = 0};
  [[maybe_unused]] admit::keyed_options keyed{.max_keys = 1};
  [[maybe_unused]] admit::aimd_options aimd{.initial_limit = 1};
  [[maybe_unused]] admit::vegas_options vegas{.initial_limit = 1};
  [[maybe_unused]] admit::redis::connection_options connection{.host = "localhost"};
  [[maybe_unused]] admit::redis::cluster_options cluster{.max_redirects = 1};
  [[maybe_unused]] admit::redis::limiter_options redis_limiter{.max_batch = 1};
  [[maybe_unused]] admit::redis::circuit_breaker_options breaker{.failure_threshold = 1};
  [[maybe_unused]] admit::redis::semaphore_options redis_semaphore{.max_waiters = 1};
}
}  // namespace
