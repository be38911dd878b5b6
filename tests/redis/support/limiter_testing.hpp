// tests/redis/support/limiter_testing.hpp — what the distributed limiters' tests share: a patient deadline, a bounded
// wait for a real process's state, the server's count of writes, and readable decisions in failure messages.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "admit/decision.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/limiter_options.hpp"
#include "admit/redis/limiter_result.hpp"
#include "redis_server.hpp"

namespace admit {
// Readable decisions in failure messages.
inline void PrintTo(const decision& d, std::ostream* os) {
  *os << "{admitted " << d.admitted << ", limit " << d.limit << ", remaining " << d.remaining << ", retry_after "
      << d.retry_after.count() << "ns, reset_after " << d.reset_after.count() << "ns}";
}
}  // namespace admit

namespace admit::redis::testing {

// Options whose deadline cannot expire on a loaded machine, for the tests that are not about deadlines.
inline limiter_options patient() {
  limiter_options o;
  o.timeout = std::chrono::seconds(10);
  return o;
}

// Polls `pred` every millisecond for up to `limit`: for waiting on a real process (a server restarting, a key the
// server expires), never to make a limiter's time pass.
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The server's count of changes to the dataset (it counts with persistence off too): unchanged means nothing was
// written.
inline long long dirty(const redis_server& server) {
  const std::string info = server.admin({"INFO", "persistence"});
  const std::string key = "rdb_changes_since_last_save:";
  const auto at = info.find(key);
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in INFO");
  return std::atoll(info.c_str() + at + key.size());
}

// The server time a decision was made at, as a time point of a clock whose epoch is the Unix epoch: the local limiter
// replayed at that point aligns its windows where the scripts do (on the Unix epoch).
inline std::chrono::steady_clock::time_point at(const limiter_result& r) {
  return std::chrono::steady_clock::time_point{
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(r.server_time)};
}

// The server's clock now (TIME), in µs since the Unix epoch.
inline std::int64_t server_now(const redis_server& server) {
  const std::string time = server.admin({"TIME"});
  const auto newline = time.find('\n');
  return std::stoll(time.substr(0, newline)) * 1'000'000 + std::stoll(time.substr(newline + 1));
}

// One decision of a recorded trace.
struct traced {
  std::string key;
  std::int64_t n;
  limiter_result result;
};

// Concurrent callers' results in the order the server decided them. By server time; within one microsecond (one
// batch of one script call, or calls that read the same TIME) by falling remaining *before* the decision (remaining
// + granted): only admissions change a key's state, and each lowers it, so that order is the order of the decisions
// on each key; at equal values a refusal or a query comes before an admission (it saw the state the admission then
// changed). Keys are independent: the relative order of each key's decisions is what the replay needs.
inline void sort_in_server_order(std::vector<traced>& trace) {
  const auto order = [](const traced& t) {
    const limiter_result& r = t.result;
    return std::make_tuple(r.server_time, -(r.decision.remaining + r.granted), r.granted > 0);
  };
  std::stable_sort(trace.begin(), trace.end(), [&](const traced& a, const traced& b) { return order(a) < order(b); });
}

// Replays `trace` on local limiters, one per key built by make_local() (a std::unique_ptr to a limiter with
// decide_at), at the server times the script reported: every field of every decision must equal the local one, as
// `adjust` turns it into the server's units.
template <class MakeLocal, class Adjust = std::identity>
void expect_matches_local(const std::vector<traced>& trace, MakeLocal make_local, Adjust adjust = {}) {
  std::map<std::string, decltype(make_local())> local;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const traced& t = trace[i];
    ASSERT_TRUE(t.result.consulted) << i << ": " << t.result.error.message();
    auto& l = local[t.key];
    if (!l) l = make_local();
    EXPECT_EQ(t.result.decision, adjust(l->decide_at(at(t.result), t.n)))
        << "request " << i << " key " << t.key << " n " << t.n << " at " << t.result.server_time.count();
  }
}

// `callers` concurrent chains of l.async_decide_detailed(key, n), each issuing its next call from its previous call's
// completion, `per_caller` calls each. `midway`, if set, runs on the calling thread once a quarter of the results are
// in (e.g. a SCRIPT FLUSH under load), at a defined point whatever the machine's speed: from then on a chain whose
// call completes is held; once the quarter is in, the held chains issue one more call each (held again when it
// completes) and `midway` runs at once, while those calls are in flight. So before `midway` returns at most a quarter
// of the results plus two calls per chain are in.
// Returns every result, in completion order, once all are in (the test fails after 60 s without them).
inline std::vector<traced> decide_concurrently(const limiter& l, const std::string& key, std::int64_t n, int callers,
                                               int per_caller, const std::function<void()>& midway = {}) {
  const auto total = static_cast<std::size_t>(callers * per_caller);
  std::mutex m;
  std::vector<traced> results;
  bool gate_open = !midway;
  std::vector<int> held;  // the calls left to the chains that wait for `midway`
  std::promise<void> done;
  std::function<void(int)> issue = [&](int left) {
    l.async_decide_detailed(key, n, [&, left](limiter_result r) {
      bool last = false, hold = false;
      {
        std::lock_guard lock(m);
        results.push_back({key, n, std::move(r)});
        last = results.size() == total;
        hold = !gate_open && left > 1 && results.size() > total / 4;
        if (hold) held.push_back(left - 1);
      }
      if (left > 1 && !hold) issue(left - 1);
      if (last) done.set_value();
    });
  };
  for (int i = 0; i < callers; ++i) issue(per_caller);
  if (midway) {
    eventually([&] {
      std::lock_guard lock(m);
      return results.size() >= total / 4;
    });
    // The held chains issue one call each (held again when it completes), `midway` runs while those are in flight,
    // then every chain runs free.
    const auto resume_held = [&](bool open) {
      std::vector<int> resume;
      {
        std::lock_guard lock(m);
        gate_open = open;
        resume.swap(held);
      }
      for (const int left : resume) issue(left);
    };
    resume_held(false);
    midway();
    resume_held(true);
  }
  if (done.get_future().wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "decide_concurrently: not every call completed within 60 s";
    std::terminate();  // the chains still reference this frame
  }
  return results;
}

// async_decide's (error_code, decision) as a future (Boost 1.81's as_tuple does not compose with use_future here).
inline std::future<std::pair<boost::system::error_code, admit::decision>> decide_async(const limiter& l,
                                                                                       std::string_view key,
                                                                                       std::int64_t n) {
  auto p = std::make_shared<std::promise<std::pair<boost::system::error_code, admit::decision>>>();
  auto f = p->get_future();
  l.async_decide(key, n, [p](boost::system::error_code ec, admit::decision d) { p->set_value({ec, d}); });
  return f;
}

// async_decide_detailed's result as a future.
inline std::future<limiter_result> detailed(const limiter& l, std::string_view key, std::int64_t n = 1) {
  auto p = std::make_shared<std::promise<limiter_result>>();
  auto f = p->get_future();
  l.async_decide_detailed(key, n, [p](limiter_result r) { p->set_value(std::move(r)); });
  return f;
}

}  // namespace admit::redis::testing
