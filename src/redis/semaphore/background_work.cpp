// The semaphore's background work: counting, draining (background_work.hpp).
#include "background_work.hpp"

#include "admit/errc.hpp"

namespace admit::redis::detail {

void background_work::begin() {
  const admit::detail::lock_guard lock(mutex_);
  ++in_flight_;
}

void background_work::end(bool delivered, std::error_code why) {
  std::vector<std::function<void(std::size_t, std::error_code)>> done;
  drained report;
  {
    const admit::detail::lock_guard lock(mutex_);
    --in_flight_;
    if (!delivered) {
      ++undelivered_;
      if (!first_failure_) first_failure_ = why;
    }
    if (in_flight_ == 0 && !drain_waiters_.empty()) {
      done.swap(drain_waiters_);
      report = take_failures();
    }
  }
  idle_.notify_all();
  for (auto& d : done) d(report.first, report.second);
}

background_work::drained background_work::drain(std::chrono::steady_clock::time_point deadline) {
  admit::detail::unique_lock lock(mutex_);
  idle_.wait_until(lock.native(), deadline, [&]() ADMIT_REQUIRES(mutex_) { return in_flight_ == 0; });
  const std::size_t still = in_flight_;
  drained r = take_failures();
  r.first += still;
  if (still != 0) r.second = admit::make_error_code(admit::errc::timeout);
  return r;
}

void background_work::when_drained(std::function<void(std::size_t, std::error_code)> done) {
  drained report;
  {
    const admit::detail::lock_guard lock(mutex_);
    if (in_flight_ != 0) {
      drain_waiters_.push_back(std::move(done));
      return;
    }
    report = take_failures();
  }
  done(report.first, report.second);
}

background_work::drained background_work::take_failures() {
  drained r{undelivered_, undelivered_ == 0 ? std::error_code() : first_failure_};
  undelivered_ = 0;
  first_failure_ = {};
  return r;
}

}  // namespace admit::redis::detail
