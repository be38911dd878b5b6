// serve/stand_in/backend.hpp — a stand-in for the in-process backend until engine/in_process_backend.hpp lands:
// fixed windows aligned to Unix time, in one map under a mutex. Not for use once the real backend exists (delete
// stand_in/ then).
#pragma once

#include <memory>

#include "serve/engine/backend.hpp"

namespace admit::serve::stand_in {

[[nodiscard]] std::unique_ptr<backend> make_fixed_window_backend();

}  // namespace admit::serve::stand_in
