// cli/run/wait_bounded.hpp — an asynchronous call waited for from a thread that must not wait past a deadline:
// what `admit run --redis` waits with, so that --timeout holds also when Redis stops answering.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <stop_token>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::cli {

// Runs an asynchronous call and waits for its result, as long as `stop` is not requested and at most until `until`:
// then the call is cancelled (terminally: it completes at once, and what it leaves in Redis is the library's
// background work) and `abandoned` says so when `until` was the reason. `initiate(slot, done)` starts the call with
// its handler bound to `slot`; the handler calls done(result) once. The call's completion runs on `ex`.
template <class Result, class Initiate>
Result wait_bounded(const boost::asio::any_io_executor& ex, Initiate initiate,
                    std::optional<std::chrono::steady_clock::time_point> until, std::stop_token stop, bool& abandoned) {
  struct shared {
    admit::detail::mutex m;
    std::condition_variable_any cv;
    std::optional<Result> result ADMIT_GUARDED_BY(m);
    boost::asio::cancellation_signal cancel;
  };
  auto sh = std::make_shared<shared>();
  initiate(sh->cancel.slot(), [sh](Result r) {
    const admit::detail::lock_guard lock(sh->m);
    sh->result.emplace(std::move(r));
    sh->cv.notify_all();
  });
  admit::detail::unique_lock lock(sh->m);
  const auto done = [&]() ADMIT_REQUIRES(sh->m) { return sh->result.has_value(); };
  if (until) {
    sh->cv.wait_until(lock.native(), stop, *until, done);
  } else {
    sh->cv.wait(lock.native(), stop, done);
  }
  if (!sh->result) {
    abandoned = !stop.stop_requested();
    // The cancellation is emitted where the call runs (the slot is not thread-safe).
    boost::asio::post(ex, [sh] { sh->cancel.emit(boost::asio::cancellation_type::terminal); });
    sh->cv.wait(lock.native(), done);
  }
  return std::move(*sh->result);
}

}  // namespace admit::cli
