// admit_redis_semaphore_bench's wake-up case and its floor (see the top of redis_semaphore_bench.cpp): the latency from
// a release to the queued waiter of another semaphore object running, and the same with LPUSH -> BLPOP.
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "redis_semaphore_bench.hpp"

namespace admit::bench::semaphore_bench {

using namespace std::chrono_literals;

namespace {

bool released(admit::redis::lease& l) { return l.release().first == admit::redis::lease::release_status::released; }

// The waiter of a wake-up case: a thread that, for each round it is told to start, calls `wait` (which blocks until
// it holds what it waits for) and reports when it returned.
template <class Result>
class waiter_thread {
 public:
  explicit waiter_thread(std::function<Result()> wait) : wait_(std::move(wait)), thread_([this] { loop(); }) {}
  ~waiter_thread() {
    {
      std::lock_guard lock(m_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  waiter_thread(const waiter_thread&) = delete;
  waiter_thread& operator=(const waiter_thread&) = delete;

  void start_round() {
    std::lock_guard lock(m_);
    go_ = true;
    done_ = false;
    cv_.notify_all();
  }
  // Waits for the round's result: the time `wait` returned and what it returned.
  std::pair<clock_type::time_point, Result> result() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return done_; });
    return {acquired_at_, std::move(*result_)};
  }

 private:
  void loop() {
    for (;;) {
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return go_ || quit_; });
        if (quit_) return;
        go_ = false;
      }
      auto r = wait_();
      const auto at = clock_type::now();
      std::lock_guard lock(m_);
      acquired_at_ = at;
      result_.emplace(std::move(r));
      done_ = true;
      cv_.notify_all();
    }
  }

  std::function<Result()> wait_;
  std::mutex m_;
  std::condition_variable cv_;
  bool go_ = false, done_ = false, quit_ = false;
  clock_type::time_point acquired_at_;
  std::optional<Result> result_;
  std::thread thread_;  // last: starts after the members above
};

}  // namespace

void run_wakeup(const settings& s, int repetition) {
  io_thread io;
  // Two parties, each with its own connection and semaphore object (so its own wake list and BLPOP connection).
  admit::redis::connection holder_conn(io.executor(), connection_options(s));
  admit::redis::connection waiter_conn(io.executor(), connection_options(s));
  connect_or_exit(holder_conn, s);
  connect_or_exit(waiter_conn, s);
  const std::string name = case_name(s, "wakeup", repetition);
  admit::redis::semaphore holder(holder_conn, name, 1, semaphore_options(s));
  admit::redis::semaphore waiter(waiter_conn, name, 1, semaphore_options(s));
  waiter_thread<admit::redis::semaphore_result> w([&] { return waiter.try_acquire_for(10s); });
  std::mt19937_64 rng(0x5eed0000 + static_cast<unsigned>(repetition));
  std::uniform_real_distribution<double> jitter(0.0, s.jitter_ms);

  std::vector<std::int64_t> ns;
  std::uint64_t errors = 0;
  for (int round = 0; round < s.wakeup_rounds; ++round) {
    auto h = holder.try_acquire_for(10s);
    if (!h) {
      ++errors;
      std::cerr << "admit_redis_semaphore_bench: wakeup: the holder could not acquire: " << h.error().message() << "\n";
      continue;
    }
    w.start_round();
    // Until Redis has the waiter in its queue.
    bool queued = false;
    for (const auto give_up = clock_type::now() + 5s; clock_type::now() < give_up;) {
      const auto [snap, ec] = holder.inspect(1);
      if (!ec && snap.waiter_count >= 1) {
        queued = true;
        break;
      }
      std::this_thread::sleep_for(200us);
    }
    if (!queued) std::cerr << "admit_redis_semaphore_bench: wakeup: the waiter did not show up in the queue\n";
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(s.settle_ms + jitter(rng)));
    const auto released_at = clock_type::now();
    const bool ok = released(*h);
    auto [acquired_at, r] = w.result();
    if (!ok || !r || !queued) {
      ++errors;
      if (!r) std::cerr << "admit_redis_semaphore_bench: wakeup: the waiter failed: " << r.error().message() << "\n";
    } else {
      ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(acquired_at - released_at).count());
    }
    if (r && !released(*r)) ++errors;
  }
  const auto samples = ns.size();
  const summary sm = summarize(std::move(ns));
  std::printf("admit\t%s\twakeup\t1\t1\t%d\t-\t%.1f\t%.1f\t%.1f\t%.1f\t%zu\t%llu\t-\n", variant(s).c_str(), repetition,
              sm.p50, sm.p99, sm.mean, sm.max, samples, static_cast<unsigned long long>(errors));
  std::fflush(stdout);
}

// The floor of any wake-up through Redis on this machine: the same two parties and timing as run_wakeup, with plain
// commands on admit::redis::connection instead of the semaphore — the waiter blocks in BLPOP on its connection, the
// holder reads the clock and sends LPUSH on its own. One command and one blocked reply, with the same io thread and
// the same thread hand-offs; what admit's wake-up adds to it is the semaphore's work (the release script, the wake-up
// loop handing the grant to the waiting thread).
void run_floor(const settings& s, int repetition) {
  io_thread io;
  admit::redis::connection holder_conn(io.executor(), connection_options(s));
  admit::redis::connection waiter_conn(io.executor(), connection_options(s));
  connect_or_exit(holder_conn, s);
  connect_or_exit(waiter_conn, s);
  const std::string key = std::string(1, '{').append(case_name(s, "floor", repetition)).append("}");
  waiter_thread<admit::redis::result> w([&] { return waiter_conn.execute_for(15s, "BLPOP", key, "10"); });
  std::mt19937_64 rng(0x5eed0000 + static_cast<unsigned>(repetition));
  std::uniform_real_distribution<double> jitter(0.0, s.jitter_ms);

  std::vector<std::int64_t> ns;
  std::uint64_t errors = 0;
  for (int round = 0; round < s.wakeup_rounds; ++round) {
    w.start_round();
    // Until Redis has the waiter blocked (CLIENT LIST: a client blocked in blpop).
    bool blocked = false;
    for (const auto give_up = clock_type::now() + 5s; clock_type::now() < give_up;) {
      const auto r = holder_conn.execute("CLIENT", "LIST");
      // A line per client; a blocked client has flag b ("cmd" is the last command, blocked or not).
      std::string_view list = !r.error && r.value.is_string() ? std::string_view(r.value.str()) : std::string_view();
      for (const auto& client : split(list, '\n')) {
        if (client.find(" flags=b ") != std::string::npos && client.find(" cmd=blpop") != std::string::npos) {
          blocked = true;
        }
      }
      if (blocked) break;
      std::this_thread::sleep_for(200us);
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(s.settle_ms + jitter(rng)));
    const auto pushed_at = clock_type::now();
    const auto pushed = holder_conn.execute("LPUSH", key, "x");
    auto [woken_at, r] = w.result();
    if (pushed.error || r.error || !r.value.is_array() || !blocked) {
      ++errors;
    } else {
      ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(woken_at - pushed_at).count());
    }
  }
  const auto samples = ns.size();
  const summary sm = summarize(std::move(ns));
  std::printf("redis-floor\tlpush-blpop\twakeup\t1\t1\t%d\t-\t%.1f\t%.1f\t%.1f\t%.1f\t%zu\t%llu\t-\n", repetition,
              sm.p50, sm.p99, sm.mean, sm.max, samples, static_cast<unsigned long long>(errors));
  std::fflush(stdout);
}

}  // namespace admit::bench::semaphore_bench
