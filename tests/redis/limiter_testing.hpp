// tests/redis/limiter_testing.hpp — what the distributed limiters' tests share: a patient deadline, a bounded wait for
// a real process's state, the server's count of writes, and readable decisions in failure messages.
#pragma once

#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "admit/decision.hpp"
#include "admit/redis/limiter.hpp"
#include "admit/redis/limiter_options.hpp"
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

// async_decide's (error_code, decision) as a future (Boost 1.81's as_tuple does not compose with use_future here).
inline std::future<std::pair<boost::system::error_code, admit::decision>> decide_async(const limiter& l,
                                                                                       std::string_view key,
                                                                                       std::int64_t n) {
  auto p = std::make_shared<std::promise<std::pair<boost::system::error_code, admit::decision>>>();
  auto f = p->get_future();
  l.async_decide(key, n, [p](boost::system::error_code ec, admit::decision d) { p->set_value({ec, d}); });
  return f;
}

}  // namespace admit::redis::testing
