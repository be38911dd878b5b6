// tests/docs/snippet_prelude.hpp — what a documentation fragment may take for granted: every public header of admit,
// std::chrono's literals, and the reader's own code that the examples call (serve(), reply_429(), a request...),
// declared here as placeholders that accept anything.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "snippet_headers.hpp"  // generated: every public header

using namespace std::chrono_literals;

namespace snippet_placeholders {
struct any_value {
  template <class T>
  operator T() const {
    return T{};
  }
};
}  // namespace snippet_placeholders

// The reader's own functions: each accepts any arguments.
#define ADMIT_SNIPPET_PLACEHOLDER(name)             \
  template <class... Args>                          \
  snippet_placeholders::any_value name(Args&&...) { \
    return {};                                      \
  }
ADMIT_SNIPPET_PLACEHOLDER(serve)
ADMIT_SNIPPET_PLACEHOLDER(reply)
ADMIT_SNIPPET_PLACEHOLDER(reply_429)
ADMIT_SNIPPET_PLACEHOLDER(reply_503)
ADMIT_SNIPPET_PLACEHOLDER(query)
ADMIT_SNIPPET_PLACEHOLDER(call)
ADMIT_SNIPPET_PLACEHOLDER(shed)
ADMIT_SNIPPET_PLACEHOLDER(handle)
ADMIT_SNIPPET_PLACEHOLDER(run_query)
#undef ADMIT_SNIPPET_PLACEHOLDER

// The reader's own values.
inline const std::string client_ip = "192.0.2.1";
inline const std::string request = "GET /";
