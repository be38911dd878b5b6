// examples/http_server/options.hpp — admit_http_server's command line: its options, their defaults and the parser.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "admit/rate.hpp"

namespace http_server {

struct options {
  std::string address = "127.0.0.1";
  unsigned short port = 8080;
  admit::rate rate = admit::rate::per_second(100);
  std::int64_t burst = 100;
  std::int64_t concurrency = 64;
  std::size_t queue = 128;
  std::chrono::milliseconds deadline{1000};
  std::chrono::milliseconds work{0};
  std::chrono::milliseconds grace{10000};
  std::size_t max_keys = 100'000;
  unsigned threads = 1;
  bool shed = false;
  bool admit = true;
  bool rate_fields = true;  // RateLimit-* fields on admitted responses too
};

// The options of argv. On --help, an unknown option, a missing value or a value out of range: prints what is wrong
// and the usage to stderr and exits 2.
options parse(int argc, char** argv);

}  // namespace http_server
