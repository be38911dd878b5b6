// bench/redis_semaphore_bench.hpp — what the parts of admit_redis_semaphore_bench share: its settings, the io thread
// its connections run on, the options of its semaphores and connections, and the report of a cycles case. The parts:
//   redis_semaphore_bench.cpp         the command line, main, the cycles cases with blocking contenders (threads)
//   redis_semaphore_async_cycles.cpp  the cycles cases with asynchronous contenders (one io thread, as an event loop)
//   redis_semaphore_wakeup.cpp        the wake-up case and the floor
//   redis_semaphore_crowd.cpp         the crowd case (many waiters on a few permits held for a while)
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admit/rate.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "redis_bench_common.hpp"

namespace admit::bench::semaphore_bench {

namespace asio = boost::asio;

struct cycles_case {
  int contenders;
  std::int64_t capacity;
};

struct crowd_case {
  int contenders;
  std::int64_t capacity;
  int hold_ms;
};

struct settings {
  std::string url = admit::bench::default_url();
  std::vector<cycles_case> cycles = {{1, 1}, {64, 8}};
  double duration_s = 3.0;
  double warmup_s = 0.5;
  std::vector<crowd_case> crowds;  // none unless --crowd
  int wakeup_rounds = 300;
  double settle_ms = 2.0;
  double jitter_ms = 10.0;
  int repetitions = 1;
  std::string name = "admit-sem-bench";
  std::chrono::milliseconds timeout{1000};
  std::optional<std::chrono::milliseconds> poll_interval;  // semaphore_options::poll_interval (default: its default)
  std::chrono::milliseconds idle_ttl{0};                   // semaphore_options::idle_ttl
  std::string progress_file;  // --progress: the asynchronous cycles cases write their cycles so far there
  std::string tag;
  bool floor = true;     // also the LPUSH -> BLPOP floor after the wake-up case
  bool blocking = true;  // the cycles cases with blocking contenders (threads)
  bool async = true;     // and with asynchronous ones (--api)
  bool minimal = true;   // and the minimal FIFO hand-off's (--minimal)
  // --rate R: the blocking cycles go through an admit::redis::admission of that rate (burst: --burst) and the case's
  // capacity instead of the semaphore (variant "admission"): what deciding a rate with the permits costs.
  std::optional<admit::rate> rate;
  std::int64_t burst = 1'000'000;
};

// An io_context run by one background thread until destroyed (tests/redis/io_thread.hpp): declared before the
// connections, so that they are destroyed first.
class io_thread {
 public:
  io_thread() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~io_thread() {
    guard_.reset();
    thread_.join();
  }
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

struct summary {
  double p50 = 0, p99 = 0, mean = 0, max = 0;
};
// In µs, of latencies in ns.
summary summarize(std::vector<std::int64_t> ns);

admit::redis::semaphore_options semaphore_options(const settings& s);
// The variant column: "default" (or "pollNms"; "async" or "async-pollNms" for asynchronous contenders) and --tag.
std::string variant(const settings& s, bool async = false);
admit::redis::connection_options connection_options(const settings& s);
void connect_or_exit(admit::redis::connection& conn, const settings& s);
// A semaphore name of its own for a case's run ("<name>-<what>-...-<pid>").
std::string case_name(const settings& s, const std::string& what, int repetition);

// What the contenders of a cycles case recorded, each its own: acquire and release latencies (ns, in the window) and
// cycles completed in the window; the errors (and the first one's text) of all.
struct cycles_tally {
  explicit cycles_tally(int contenders)
      : acquire_ns(static_cast<std::size_t>(contenders)),
        release_ns(static_cast<std::size_t>(contenders)),
        cycles(static_cast<std::size_t>(contenders), 0) {}
  std::vector<std::vector<std::int64_t>> acquire_ns, release_ns;
  std::vector<std::uint64_t> cycles;
  std::uint64_t errors = 0;
  std::string first_error;
  // Counts an error, keeping the first one's text (not thread-safe: for contenders on one thread).
  void add_error(const std::string& what) {
    ++errors;
    if (first_error.empty()) first_error = what;
  }
};
// --progress: while it lives, writes the sum of `t`'s cycles to `file` every 100 ms, on `ex` (the thread the
// contenders count on); nothing when `file` is empty. Each write replaces the file whole (a new file renamed over it),
// so that a reader never sees half a number.
class progress_writer {
 public:
  progress_writer(boost::asio::any_io_executor ex, const cycles_tally& t, std::string file);
  ~progress_writer();
  progress_writer(const progress_writer&) = delete;
  progress_writer& operator=(const progress_writer&) = delete;

 private:
  struct state;
  std::shared_ptr<state> state_;
};
// A case's measured window [from, until), after its warm-up.
struct window {
  clock_type::time_point from, until;
  bool contains(clock_type::time_point t) const { return t >= from && t < until; }
};
inline std::int64_t ns(clock_type::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}
// Prints the case's data line and its '#' lines (see the top of redis_semaphore_bench.cpp); `label` names the
// contenders in the '#' lines ("admit cycles" or "admit async cycles"), `impl` the data line's first column.
void report_cycles(const settings& s, const cycles_case& c, int repetition, const std::string& variant_name,
                   const std::string& label, cycles_tally t, const std::string& impl = "admit");

void run_cycles(const settings& s, const cycles_case& c, int repetition);
void run_async_cycles(const settings& s, const cycles_case& c, int repetition);
// The same cases with the minimal FIFO hand-off (redis_semaphore_minimal_fifo.cpp) instead of admit's semaphore.
void run_minimal_fifo_cycles(const settings& s, const cycles_case& c, int repetition);
void run_wakeup(const settings& s, int repetition);
void run_crowd(const settings& s, const crowd_case& c, int repetition);
void run_floor(const settings& s, int repetition);

}  // namespace admit::bench::semaphore_bench
