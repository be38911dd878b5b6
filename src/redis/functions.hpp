// src/redis/functions.hpp — admit's Lua code on a server: one Redis Functions library, "admit_<version>", holding a
// function per script (the five rate limiters' and the semaphore's), loaded by one FUNCTION LOAD wherever any of them
// is first called (script::libraries in admit/redis/client/script.hpp). Each script is also sent by EVALSHA where
// functions are not there (Redis before 7.0) or not allowed (an ACL user without FCALL); the first such server sends
// all of them by EVALSHA from then on.
#pragma once

#include "admit/redis/client/script.hpp"

namespace admit::redis::detail {

enum class admit_function { gcra, token_bucket, fixed_window, sliding_window, sliding_log, semaphore };

// The script of `f`, a function of the one library. Thread-safe (made once, on first use).
const script& function_script(admit_function f);

}  // namespace admit::redis::detail
