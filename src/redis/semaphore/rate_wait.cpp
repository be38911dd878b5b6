// admit::redis::rate_limiter's waits (rate_limiter.hpp): for each key, a queue of the admission's script with no
// concurrency limit and the limiter's rate, whose state is the limiter's own key (semaphore.lua's rate_key), so that
// waits and decide() spend one budget. A wait is a semaphore_core of its own for the one call: no wake-up loop (a
// waiter held back by the rate asks again at its tokens' time, which its reply names), no renewal; its grant's queue
// entry — a lease of n of the unlimited permits — is given back in the background as soon as it is granted.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "admit/detail/check_n.hpp"
#include "admit/errc.hpp"
#include "admit/redis/admission.hpp"
#include "admit/redis/rate_limiter.hpp"
#include "core.hpp"
#include "hash_tag.hpp"

namespace admit::redis {

std::optional<wait_result> rate_limiter::settled_at_once(std::int64_t n) const {
  admit::detail::check_n("admit::redis::rate_limiter", n);
  if (n == 0 || interval_.count() == 0) return wait_result{};  // a query, or rate inf: nothing to wait for
  if (n > burst()) return wait_result(make_error_code(errc::exceeds_capacity));
  return std::nullopt;
}

std::shared_ptr<detail::semaphore_core> rate_limiter::queue_of(std::string_view key) const {
  semaphore_options o;
  // The limiter's call timeout, in whole milliseconds (at least one).
  o.timeout = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(options().timeout));
  o.lease_ttl = detail::default_waiter_ttl(o);  // outlives the poll of a waiter granted by another's call
  o.auto_renew = false;
  o.on_failure = failure_policy::fail_closed;  // a wait is never decided by a failure policy: the error is returned
  o.idle_ttl = std::chrono::seconds(10);
  std::string prefix = detail::hash_tag(name()) + "|q:";
  prefix.append(key);
  prefix += ':';
  const std::string definition = std::to_string(admission::unlimited_capacity) + "/" +
                                 std::to_string(interval_.count()) + "/" + std::to_string(burst()) + "@" + state_;
  return std::make_shared<detail::semaphore_core>(redis_client(), nullptr, std::function<void()>{}, name(), definition,
                                                  o, std::vector<std::string>{prefix + "waiters", storage_key(key)},
                                                  prefix);
}

namespace {

// The tokens are spent for good; the queue entry's unlimited permits go back. (If that release is lost, the entry
// expires at lease_ttl: it holds nothing anyone waits for.)
void give_back_entry(detail::semaphore_core& queue, lease& l, std::int64_t n) {
  if (std::string id = l.detach(); !id.empty()) queue.release_async(id, n);
}

// A deadline already passed does not wait, as the local bucket's: one try, admitted now (nobody waiting first) or
// errc::timeout — the error such a try's "not free now" (errc::would_block) becomes.
bool now_only(std::optional<std::chrono::steady_clock::time_point> deadline) {
  return deadline && *deadline <= std::chrono::steady_clock::now();
}
std::error_code wait_error(std::error_code ec, bool now_only) {
  return now_only && ec == errc::would_block ? make_error_code(errc::timeout) : ec;
}

}  // namespace

wait_result rate_limiter::wait(std::string_view key, std::int64_t n, std::optional<clock::time_point> deadline,
                               std::stop_token stop) const {
  if (auto r = settled_at_once(n)) return *r;
  if (stop.stop_requested()) return make_error_code(errc::cancelled);
  const auto queue = queue_of(key);
  const bool once = now_only(deadline);
  semaphore_result r = once ? queue->try_acquire(n) : queue->acquire(n, deadline, stop);
  queue->close();
  if (!r) return wait_error(r.error(), once);
  give_back_entry(*queue, r.value(), n);
  return {};
}

namespace detail {

namespace {

// An asynchronous wait's completion: gives the queue entry back, as the blocking wait does, and tells `done`.
class rate_wait_completion final : public acquire_completion {
 public:
  rate_wait_completion(std::shared_ptr<semaphore_core> queue, std::int64_t n, bool now_only,
                       std::function<void(std::error_code)> done)
      : queue_(std::move(queue)), n_(n), now_only_(now_only), done_(std::move(done)) {}
  void complete(std::error_code ec, lease l) override {
    if (!ec) give_back_entry(*queue_, l, n_);
    done_(wait_error(ec, now_only_));
  }
  void settled() override { queue_->close(); }

 private:
  std::shared_ptr<semaphore_core> queue_;
  std::int64_t n_;
  bool now_only_;
  std::function<void(std::error_code)> done_;
};

}  // namespace

std::shared_ptr<async_acquire_op> make_rate_wait(const std::shared_ptr<semaphore_core>& queue, std::int64_t n,
                                                 std::optional<steady::time_point> deadline,
                                                 std::function<void(std::error_code)> done) {
  const bool once = now_only(deadline);
  auto completion = std::make_shared<rate_wait_completion>(queue, n, once, std::move(done));
  if (!once) return make_async_acquire(queue, n, deadline, std::move(completion));
  start_try_acquire(queue, n, std::move(completion));
  return nullptr;
}

}  // namespace detail

}  // namespace admit::redis
