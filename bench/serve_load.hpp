// bench/serve_load.hpp — what the three modes of admit_serve_load (bench/serve_load.cpp) share: the settings, the
// request pattern (domain and descriptors, a value "{rand}" drawn anew per call), the measurement window and the
// per-thread recorder of answers and latencies. See bench/serve_load.cpp for the program itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace admit::bench::serve_load {

using clock_type = std::chrono::steady_clock;

struct settings {
  std::string mode = "grpc";  // grpc | library | redis-incr-expire
  // grpc: the server's address (host:port).
  std::string target = "127.0.0.1:8081";
  int channels = 1;  // grpc: channels (one HTTP/2 connection each); streams are spread round-robin over them
  // library: the configuration directory and the backend (--redis URL, else in process), as `admit serve` takes them.
  std::string config_dir;
  std::string redis_url;
  int streams = 16;  // concurrent outstanding calls
  int threads = 1;   // client threads (grpc: one completion queue each; library: one issuing loop each)
  double duration_s = 5.0;
  double warmup_s = 1.0;
  std::string domain = "bench";
  // One entry per --descriptor, e.g. {{"user", "{rand}"}}; "{rand}" in a value is replaced per call by a number drawn
  // uniformly from [0, key_count).
  std::vector<std::vector<std::pair<std::string, std::string>>> descriptors;
  std::uint64_t key_count = 100'000;
  std::uint32_t hits_addend = 0;  // 0: the field is not sent (Envoy's default of 1)
  bool require_limit = true;      // an answer whose status has no current_limit (no rule matched) is an error
  int timeout_ms = 5000;          // per call
  // redis-incr-expire: envoyproxy/ratelimit's Redis work per decision, INCRBY + EXPIRE per descriptor, pipelined.
  std::string url = "redis://127.0.0.1:6379";
  std::int64_t expire_s = 1;            // the window (unit) in seconds, as its EXPIRE sets it
  std::uint64_t limit = 1'000'000'000;  // INCRBY's result above this is an over-limit answer
  bool json = false;
  std::string label;  // the first field of the output line
};

// The measurement window: calls issued from `start` on; those completing in [measure_from, measure_to) count.
// make_window starts it now (each mode calls it once its connections are up).
struct window {
  clock_type::time_point start, measure_from, measure_to;
  [[nodiscard]] bool issuing(clock_type::time_point now) const { return now < measure_to; }
  [[nodiscard]] bool counts(clock_type::time_point now) const { return now >= measure_from && now < measure_to; }
};
[[nodiscard]] window make_window(const settings& s);

// One thread's tally (merged at the end; no synchronization while it runs).
struct recorder {
  std::vector<std::int64_t> latencies_ns;       // answered calls completing in the window
  std::uint64_t ok = 0, over_limit = 0;         // answers in the window, by overall code
  std::uint64_t unlimited = 0;                  // answers in the window with a status that matched no rule
  std::uint64_t bad_answers = 0;                // answers in the window with the wrong number of statuses or a bad code
  std::map<std::string, std::uint64_t> errors;  // failed calls in the window, by kind (gRPC status, Redis error)
  std::uint64_t answered_total = 0;  // every answered call, warm-up and drain included (for server-side ratios)

  void merge(const recorder& o);
  [[nodiscard]] std::uint64_t error_count() const;
};

// What a finished call was.
enum class answer { ok, over_limit, unlimited, bad };

// Records one answered call completing at `done` after `latency`.
void record_answer(recorder& r, const window& w, clock_type::time_point done, std::chrono::nanoseconds latency,
                   answer a);
// Records one failed call (kind: e.g. "UNAVAILABLE", "redis: timeout").
void record_error(recorder& r, const window& w, clock_type::time_point done, const std::string& kind);

// Draws the descriptors' values of one call: each "{rand}" in a value becomes a number in [0, key_count). One per
// thread (xorshift64*, seeded per thread).
class value_source {
 public:
  value_source(const settings& s, std::uint64_t seed);
  // `pattern` with each "{rand}" replaced by a fresh draw.
  [[nodiscard]] std::string value(const std::string& pattern);

 private:
  std::uint64_t key_count_;
  std::uint64_t state_;
};

// The modes; each sets up, runs one window and returns the merged tally (and throws std::runtime_error when it cannot
// start).
[[nodiscard]] recorder run_grpc(const settings& s);
[[nodiscard]] recorder run_library(const settings& s);
[[nodiscard]] recorder run_redis_incr_expire(const settings& s);

}  // namespace admit::bench::serve_load
