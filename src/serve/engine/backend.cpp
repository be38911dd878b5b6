#include "serve/engine/backend.hpp"

#include <utility>

namespace admit::serve {

namespace {

struct callback_decision final : pending_decision {
  std::function<void(std::vector<hit_outcome>)> done;
  void complete() override {
    done(std::vector<hit_outcome>(std::make_move_iterator(outcomes.begin()), std::make_move_iterator(outcomes.end())));
  }
};

}  // namespace

void decide(backend& b, std::vector<hit> hits, std::chrono::system_clock::time_point now,
            std::function<void(std::vector<hit_outcome>)> done) {
  auto call = std::make_shared<callback_decision>();
  call->hits.assign(std::make_move_iterator(hits.begin()), std::make_move_iterator(hits.end()));
  call->outcomes.resize(call->hits.size());
  call->now = now;
  call->done = std::move(done);
  if (call->hits.empty()) return call->complete();
  b.decide(std::move(call));
}

}  // namespace admit::serve
