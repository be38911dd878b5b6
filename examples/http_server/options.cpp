// examples/http_server/options.cpp — admit_http_server's command line (options.hpp).
#include "options.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace http_server {
namespace {

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "admit_http_server: " << error << "\n"
            << "usage: admit_http_server [--address A] [--port N] [--rate R] [--burst N] [--concurrency N]\n"
            << "         [--queue N] [--deadline MS] [--work MS] [--max-keys N] [--threads N] [--grace MS]\n"
            << "         [--shed] [--no-rate-fields] [--no-admit]\n"
            << "  --rate       per-client-IP rate, as admit::rate::parse reads it (\"10/s\", \"5/min\", \"inf\")\n"
            << "  --burst      per-client-IP burst\n"
            << "  --concurrency requests handled at once (global); --queue: requests that may wait for one\n"
            << "  --deadline   how long a request may wait for a concurrency permit (ms)\n"
            << "  --work       simulated handler time (ms); --shed: refuse at once instead of queueing\n"
            << "  --grace      after SIGTERM, how long admitted requests may still run (ms)\n"
            << "  --no-rate-fields: RateLimit-* fields only on 429s, not on admitted responses\n"
            << "  --no-admit   serve without the middleware\n";
  std::exit(2);
}

std::int64_t to_int(std::string_view name, const char* text, std::int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < min) usage(std::string(name) + ": not an integer >= " + std::to_string(min));
  return v;
}

}  // namespace

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--address")
      o.address = value();
    else if (arg == "--port")
      o.port = static_cast<unsigned short>(to_int(arg, value(), 0));
    else if (arg == "--rate") {
      try {
        o.rate = admit::rate::parse(value());
      } catch (const std::invalid_argument& e) {
        usage(e.what());
      }
    } else if (arg == "--burst")
      o.burst = to_int(arg, value(), 1);
    else if (arg == "--concurrency")
      o.concurrency = to_int(arg, value(), 1);
    else if (arg == "--queue")
      o.queue = static_cast<std::size_t>(to_int(arg, value(), 0));
    else if (arg == "--deadline")
      o.deadline = std::chrono::milliseconds(to_int(arg, value(), 0));
    else if (arg == "--work")
      o.work = std::chrono::milliseconds(to_int(arg, value(), 0));
    else if (arg == "--grace")
      o.grace = std::chrono::milliseconds(to_int(arg, value(), 0));
    else if (arg == "--max-keys")
      o.max_keys = static_cast<std::size_t>(to_int(arg, value(), 1));
    else if (arg == "--threads")
      o.threads = static_cast<unsigned>(to_int(arg, value(), 1));
    else if (arg == "--shed")
      o.shed = true;
    else if (arg == "--no-admit")
      o.admit = false;
    else if (arg == "--no-rate-fields")
      o.rate_fields = false;
    else if (arg == "--help" || arg == "-h")
      usage("help");
    else
      usage("unknown option " + std::string(arg));
  }
  return o;
}

}  // namespace http_server
