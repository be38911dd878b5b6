// admit_serve_load --mode library: the decision `admit serve` makes for a call, without gRPC —
// admit::serve::service::should_rate_limit on the configuration of --config, with the backend `admit serve` would
// build (in process, or Redis with --redis). Each client thread keeps its share of the streams outstanding; a
// completion (inline for the in-process backend, on the backend's thread for Redis) hands its slot back to the thread,
// which records it and issues the next call.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serve/command/backends.hpp"
#include "serve/config/configuration.hpp"
#include "serve/engine/service.hpp"
#include "serve_load.hpp"

namespace admit::bench::serve_load {
namespace {

namespace serve = ::admit::serve;

struct library_slot {
  clock_type::time_point issued, done;
  serve::rls_result result;
};

// The slots whose call completed, for their thread to record and reissue.
struct finished_queue {
  std::mutex mutex;
  std::condition_variable ready;
  std::vector<library_slot*> slots;

  // Notifies under the lock: once the thread has taken the last slot it may return and destroy this queue.
  void push(library_slot* s) {
    const std::lock_guard lock(mutex);
    slots.push_back(s);
    ready.notify_one();
  }
  void take(std::vector<library_slot*>& out) {
    std::unique_lock lock(mutex);
    ready.wait(lock, [this] { return !slots.empty(); });
    out.swap(slots);
  }
};

serve::rls_request make_request(const settings& s, value_source& values) {
  serve::rls_request req;
  req.domain = s.domain;
  req.hits_addend = s.hits_addend;
  req.descriptors.reserve(s.descriptors.size());
  for (const auto& d : s.descriptors) {
    serve::rls_descriptor desc;
    desc.entries.reserve(d.size());
    for (const auto& [key, pattern] : d) desc.entries.push_back({key, values.value(pattern)});
    req.descriptors.push_back(std::move(desc));
  }
  return req;
}

answer classify(const serve::rls_result& res, const settings& s) {
  if (res.failure || res.response.statuses.size() != s.descriptors.size()) return answer::bad;
  bool unlimited = false;
  for (const auto& st : res.response.statuses) {
    if (st.code != serve::rls_code::ok && st.code != serve::rls_code::over_limit) return answer::bad;
    if (!st.current_limit) unlimited = true;
  }
  if (unlimited && s.require_limit) return answer::unlimited;
  switch (res.response.overall_code) {
    case serve::rls_code::ok:
      return answer::ok;
    case serve::rls_code::over_limit:
      return answer::over_limit;
    default:
      return answer::bad;
  }
}

}  // namespace

recorder run_library(const settings& s) {
  auto config = serve::configuration::load_directory(s.config_dir);
  std::optional<std::string> redis;
  if (!s.redis_url.empty()) redis = s.redis_url;
  serve::backend_choice chosen =
      serve::make_backend(redis, "--redis", true, *config, serve::default_redis_timeout, serve::default_lease_ttl);
  serve::service svc(std::move(chosen.store), std::move(config), serve::service_options{});

  std::vector<recorder> tallies(static_cast<std::size_t>(s.threads));
  const window w = make_window(s);
  std::vector<std::thread> threads;
  for (int t = 0; t < s.threads; ++t) {
    threads.emplace_back([&, t] {
      recorder& r = tallies[static_cast<std::size_t>(t)];
      r.latencies_ns.reserve(1U << 22U);
      value_source values(s, static_cast<std::uint64_t>(t) + 1);
      finished_queue finished;
      std::vector<std::unique_ptr<library_slot>> slots;
      for (int i = t; i < s.streams; i += s.threads) slots.push_back(std::make_unique<library_slot>());
      const auto issue = [&](library_slot& slot) {
        serve::rls_request req = make_request(s, values);
        slot.issued = clock_type::now();
        svc.should_rate_limit(std::move(req), [&finished, p = &slot](serve::rls_result res) {
          p->done = clock_type::now();
          p->result = std::move(res);
          finished.push(p);
        });
      };
      std::size_t outstanding = slots.size();
      for (auto& slot : slots) issue(*slot);
      std::vector<library_slot*> batch;
      while (outstanding > 0) {
        batch.clear();
        finished.take(batch);
        for (library_slot* slot : batch) {
          const answer a = classify(slot->result, s);
          if (slot->result.failure) {
            record_error(r, w, slot->done, "service: " + slot->result.failure->message);
          } else {
            record_answer(r, w, slot->done, slot->done - slot->issued, a);
          }
          if (w.issuing(slot->done)) {
            issue(*slot);
          } else {
            --outstanding;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  recorder all;
  for (const auto& r : tallies) all.merge(r);
  return all;
}

}  // namespace admit::bench::serve_load
