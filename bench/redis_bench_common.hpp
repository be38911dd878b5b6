// bench/redis_bench_common.hpp — what the Redis benchmark programs (admit_redis_bench, bench/redis_bench.cpp;
// admit_redis_semaphore_bench, bench/redis_semaphore_bench.cpp) share: their command line (FLAG VALUE pairs, checked
// numbers, comma lists, the default URL), the clock they time with and the percentile of their latencies.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace admit::bench {

using clock_type = std::chrono::steady_clock;

// A command line's seconds as a duration to add to the clock's time points.
inline std::chrono::nanoseconds seconds(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// --url's default: $ADMIT_REDIS_URL, else redis://127.0.0.1:6379; the last line of every usage text says so.
inline std::string default_url() {
  const char* env = std::getenv("ADMIT_REDIS_URL");
  return env != nullptr && *env != '\0' ? env : "redis://127.0.0.1:6379";
}
inline constexpr std::string_view url_usage =
    "URL defaults to $ADMIT_REDIS_URL, else redis://127.0.0.1:6379. The program never starts Redis.\n";

// "a,b" -> {"a", "b"}; "" -> {}.
inline std::vector<std::string> split(std::string_view s, char by = ',') {
  std::vector<std::string> out;
  while (!s.empty()) {
    const auto at = s.find(by);
    out.emplace_back(s.substr(0, at));
    if (at == std::string_view::npos) break;
    s.remove_prefix(at + 1);
  }
  return out;
}

// A program's command line, FLAG VALUE pairs. -h or --help prints the usage text (then url_usage) and exits with
// status 0; a wrong argument prints "<program>: <error>", then the usage text, and exits with status 2.
class command_line {
 public:
  constexpr command_line(std::string_view program, std::string_view usage_text)
      : program_(program), usage_(usage_text) {}

  [[noreturn]] void usage(const std::string& error) const {
    if (!error.empty()) std::cerr << program_ << ": " << error << "\n\n";
    std::cerr << usage_ << url_usage;
    std::exit(error.empty() ? 0 : 2);
  }

  // Calls take(flag, value) for each pair, in order; take calls usage() on a flag it does not know.
  template <class Take>
  void for_each_flag(int argc, char** argv, Take take) const {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "-h" || flag == "--help") usage("");
      if (i + 1 >= argc) usage(flag.rfind("--", 0) == 0 ? flag + " needs a value" : "unknown " + flag);
      const std::string value = argv[++i];
      take(flag, value);
    }
  }

  double to_double(const std::string& flag, const std::string& v) const {
    try {
      std::size_t used = 0;
      const double d = std::stod(v, &used);
      if (used != v.size() || !(d >= 0)) throw std::invalid_argument(v);
      return d;
    } catch (const std::exception&) {
      usage(flag + " expects a non-negative number, got '" + v + "'");
    }
  }

  long long to_integer(const std::string& flag, const std::string& v, long long min) const {
    try {
      std::size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used != v.size() || n < min) throw std::invalid_argument(v);
      return n;
    } catch (const std::exception&) {
      usage(flag + " expects an integer >= " + std::to_string(min) + ", got '" + v + "'");
    }
  }

 private:
  std::string_view program_;
  std::string_view usage_;
};

// The percentile q of latencies in ns, in µs, by nearest rank: the smallest value with at least q of the sample at or
// below it; 0 without a sample. Reorders `ns`.
template <class T>
double percentile_us(std::vector<T>& ns, double q) {
  if (ns.empty()) return 0;
  auto rank = static_cast<std::size_t>(q * static_cast<double>(ns.size()));
  if (static_cast<double>(rank) < q * static_cast<double>(ns.size())) ++rank;
  const std::size_t index = std::min(ns.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(index), ns.end());
  return static_cast<double>(ns[index]) / 1000.0;
}

}  // namespace admit::bench
