// admit_redis_semaphore_bench's crowd case (see the top of redis_semaphore_bench.cpp): C contenders (threads) on a
// semaphore of capacity K, each holding what it gets for H ms — at any moment K hold and C − K wait. What it costs
// Redis per grant (its CPU time, INFO cpu, over the window ÷ the grants in it) and how long a freed permit stays
// unused (the hand-off: from the start of a release call to the next grant).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "redis_semaphore_bench.hpp"

namespace admit::bench::semaphore_bench {

using namespace std::chrono_literals;

namespace {

// The server's CPU time so far (used_cpu_sys + used_cpu_user of INFO cpu), in seconds; negative when it cannot be
// read.
double redis_cpu_s(admit::redis::connection& conn) {
  const auto r = conn.execute_command(std::chrono::steady_clock::now() + 2s, admit::redis::command{"INFO", "cpu"});
  if (!r.ok() || !r.value.is_string()) return -1;
  std::istringstream lines(r.value.str());
  double total = 0;
  int found = 0;
  for (std::string line; std::getline(lines, line);) {
    for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
      if (line.rfind(field, 0) == 0) {
        total += std::stod(line.substr(std::string(field).size()));
        ++found;
      }
    }
  }
  return found == 2 ? total : -1;
}

}  // namespace

void run_crowd(const settings& s, const crowd_case& c, int repetition) {
  io_thread io;
  admit::redis::connection conn(io.executor(), connection_options(s));
  connect_or_exit(conn, s);
  admit::redis::connection admin(io.executor(), connection_options(s));
  connect_or_exit(admin, s);
  const std::string name =
      case_name(s, "crowd-" + std::to_string(c.contenders) + "x" + std::to_string(c.capacity), repetition);
  admit::redis::semaphore sem(conn, name, c.capacity, semaphore_options(s));

  const auto from = clock_type::now() + seconds(s.warmup_s) + std::chrono::milliseconds(c.hold_ms);
  const auto until = from + seconds(s.duration_s);
  std::mutex m;
  std::deque<clock_type::time_point> freed;  // when each permit given back was freed (its release call began)
  std::vector<std::int64_t> handoff_ns;
  std::vector<std::uint64_t> grants(static_cast<std::size_t>(c.contenders), 0);
  std::atomic<std::uint64_t> errors{0};
  std::stop_source stop;
  std::vector<std::thread> threads;
  for (int i = 0; i < c.contenders; ++i) {
    threads.emplace_back([&, i] {
      const std::stop_token token = stop.get_token();
      while (!token.stop_requested()) {
        auto r = sem.try_acquire_for(60s, 1, token);
        const auto got = clock_type::now();
        if (!r) {
          if (r.error() != admit::errc::cancelled) errors.fetch_add(1);
          continue;
        }
        {
          std::lock_guard lock(m);
          // The permit this grant took was the one freed longest ago (every permit is taken as soon as it is free:
          // there are always waiters). The first K grants took permits nobody had freed.
          if (!freed.empty()) {
            if (got >= from && got < until) handoff_ns.push_back((got - freed.front()).count());
            freed.pop_front();
          }
          if (got >= from && got < until) ++grants[static_cast<std::size_t>(i)];
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(c.hold_ms));
        {
          std::lock_guard lock(m);
          freed.push_back(clock_type::now());
        }
        if (r->release().first != admit::redis::lease::release_status::released) errors.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_until(from);
  const double cpu_before = redis_cpu_s(admin);
  std::this_thread::sleep_until(until);
  const double cpu_after = redis_cpu_s(admin);
  stop.request_stop();
  for (auto& t : threads) t.join();

  std::uint64_t total = 0, fewest = ~std::uint64_t{0};
  for (const auto g : grants) {
    total += g;
    fewest = std::min(fewest, g);
  }
  const double cpu_us = cpu_before < 0 || cpu_after < 0 ? -1 : (cpu_after - cpu_before) * 1e6;
  std::printf("# admit crowd %d:%lld hold %d ms rep %d: redis cpu %.1f us per grant (%.3f s of cpu, %llu grants)\n",
              c.contenders, static_cast<long long>(c.capacity), c.hold_ms, repetition,
              total > 0 && cpu_us >= 0 ? cpu_us / static_cast<double>(total) : -1.0, cpu_us / 1e6,
              static_cast<unsigned long long>(total));
  const summary sm = summarize(std::move(handoff_ns));
  const double mean_per_contender = static_cast<double>(total) / c.contenders;
  std::printf("admit\t%s\tcrowd\t%d\t%lld\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%llu\t%llu\t%.3f\n", variant(s).c_str(),
              c.contenders, static_cast<long long>(c.capacity), repetition, static_cast<double>(total) / s.duration_s,
              sm.p50, sm.p99, sm.mean, sm.max, static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(errors.load()),
              mean_per_contender > 0 ? static_cast<double>(fewest) / mean_per_contender : 0.0);
  std::fflush(stdout);
}

}  // namespace admit::bench::semaphore_bench
