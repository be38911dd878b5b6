// admit_serve_load --mode redis-incr-expire: the Redis work envoyproxy/ratelimit does for one decision
// (src/redis/fixed_cache_impl.go: per descriptor, INCRBY of its counter key by the hits and EXPIRE of the key to the
// unit's length, all appended to one pipeline), with no service in front: what its two commands per descriptor cost
// the server, at the same concurrency as the gRPC runs. Keys are laid out as its are, "<domain>_<key>_<value>_<window
// start>". One admit::redis::connection, which writes everything queued at once (the pipelining a pool of Go
// connections gives it at best), on one io_context thread (the calling one): --threads is not used.
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "serve_load.hpp"

namespace admit::bench::serve_load {
namespace {

namespace asio = boost::asio;

struct redis_slot {
  clock_type::time_point issued;
  std::size_t pending = 0;  // replies still to come
  bool failed = false;
  std::string error;
  bool over = false;
};

}  // namespace

recorder run_redis_incr_expire(const settings& s) {
  asio::io_context io(1);
  admit::redis::connection conn(io.get_executor(), s.url);
  bool connected = false;
  boost::system::error_code connect_error;
  conn.async_connect([&](boost::system::error_code ec) {
    connected = true;
    connect_error = ec;
  });
  while (!connected) io.run_one();
  if (connect_error) throw std::runtime_error("cannot connect to " + s.url + ": " + connect_error.message());

  recorder r;
  r.latencies_ns.reserve(1U << 22U);
  value_source values(s, 1);
  std::vector<std::unique_ptr<redis_slot>> slots;
  for (int i = 0; i < s.streams; ++i) slots.push_back(std::make_unique<redis_slot>());
  std::size_t outstanding = slots.size();
  const window w = make_window(s);
  const auto timeout = std::chrono::milliseconds(s.timeout_ms);

  std::function<void(redis_slot&)> issue;
  const auto finish = [&](redis_slot& slot) {
    const auto done = clock_type::now();
    if (slot.failed) {
      record_error(r, w, done, "redis: " + slot.error);
    } else {
      record_answer(r, w, done, done - slot.issued, slot.over ? answer::over_limit : answer::ok);
    }
    if (w.issuing(done)) {
      issue(slot);
    } else {
      --outstanding;
    }
  };
  issue = [&](redis_slot& slot) {
    slot.failed = false;
    slot.over = false;
    slot.pending = 2 * s.descriptors.size();
    const auto unix_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string window_start = std::to_string(unix_s / s.expire_s * s.expire_s);
    const std::uint32_t hits = s.hits_addend == 0 ? 1 : s.hits_addend;
    slot.issued = clock_type::now();
    for (const auto& d : s.descriptors) {
      std::string key = s.domain;
      for (const auto& [k, pattern] : d) key += "_" + k + "_" + values.value(pattern);
      key += "_" + window_start;
      const auto reply = [&, p = &slot](bool incr) {
        return [&, p, incr](boost::system::error_code ec, admit::redis::reply rep) {
          if (ec) {
            p->failed = true;
            p->error = ec.message();
          } else if (rep.is_error()) {
            p->failed = true;
            p->error = "error reply";
          } else if (incr) {
            if (!rep.is_integer()) {
              p->failed = true;
              p->error = "INCRBY: not an integer";
            } else if (static_cast<std::uint64_t>(rep.integer()) > s.limit) {
              p->over = true;
            }
          }
          if (--p->pending == 0) finish(*p);
        };
      };
      conn.async_execute_for(timeout, "INCRBY", key, static_cast<std::int64_t>(hits), reply(true));
      conn.async_execute_for(timeout, "EXPIRE", key, s.expire_s, reply(false));
    }
  };
  for (auto& slot : slots) issue(*slot);
  while (outstanding > 0) io.run_one();
  conn.close();
  return r;
}

}  // namespace admit::bench::serve_load
