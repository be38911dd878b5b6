// admit's Lua code as one function library (functions.hpp).
#include "functions.hpp"

#include <admit_redis_lua/fixed_window_lua.hpp>
#include <admit_redis_lua/gcra_lua.hpp>
#include <admit_redis_lua/semaphore_lua.hpp>
#include <admit_redis_lua/sliding_log_lua.hpp>
#include <admit_redis_lua/sliding_window_lua.hpp>
#include <admit_redis_lua/token_bucket_lua.hpp>
#include <cstddef>
#include <vector>

namespace admit::redis::detail {

const script& function_script(admit_function f) {
  // In admit_function's order.
  static const std::vector<script> scripts = script::libraries("admit", {{"admit_gcra", lua::gcra},
                                                                         {"admit_token_bucket", lua::token_bucket},
                                                                         {"admit_fixed_window", lua::fixed_window},
                                                                         {"admit_sliding_window", lua::sliding_window},
                                                                         {"admit_sliding_log", lua::sliding_log},
                                                                         {"admit_semaphore", lua::semaphore}});
  return scripts[static_cast<std::size_t>(f)];
}

}  // namespace admit::redis::detail
