// A backend for the transports' drain tests: it keeps every decision until the test lets it go, so a test controls
// exactly which calls are in flight when a drain starts, without depending on timing. And the one-rule configuration
// those tests decide on.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "serve/config/configuration.hpp"
#include "serve/engine/backend.hpp"

namespace admit::serve::testing {

// Keeps every decision until release_all(); wait_held(n) waits until `n` are kept. Thread-safe.
class held_backend final : public backend {
 public:
  void decide(std::shared_ptr<pending_decision> call) override {
    const std::lock_guard lock(mutex_);
    pending_.push_back(std::move(call));
    changed_.notify_all();
  }
  void release(std::string, std::function<void(admit::serve::release_result)> done) override { done({}); }
  void configure(const configuration&) override {}

  void wait_held(std::size_t n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return pending_.size() >= n; });
  }
  // Answers every kept decision: each hit OK, limit 5, 4 remaining.
  void release_all() {
    std::vector<std::shared_ptr<pending_decision>> taken;
    {
      const std::lock_guard lock(mutex_);
      taken.swap(pending_);
    }
    for (auto& call : taken) {
      for (hit_outcome& ok : call->outcomes) {
        ok.limit = 5;
        ok.remaining = 4;
      }
      call->complete();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<pending_decision>> pending_;
};

// Domain "d", key "k": 5 a second.
inline std::shared_ptr<const configuration> one_rule() {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"t.yaml",
       "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
       "      requests_per_unit: 5\n"}};
  return configuration::load(files);
}

}  // namespace admit::serve::testing
