#include "serve/engine/backend_health.hpp"

#include <stdexcept>
#include <utility>

namespace admit::serve {

backend_health::backend_health(clock::duration summary_every) : summary_every_(summary_every) {
  if (summary_every <= clock::duration::zero()) {
    throw std::invalid_argument("backend_health: the summary interval must be positive");
  }
}

backend_event backend_health::take(backend_event::kind what, clock::time_point now) {
  backend_event e;
  e.what = what;
  e.error = latest_error_;
  e.decided_open = open_;
  e.decided_closed = closed_;
  e.failing_for = now - since_;
  open_ = closed_ = 0;
  last_event_ = now;
  return e;
}

std::optional<backend_event> backend_health::failed(std::string_view error, bool open, clock::time_point now) {
  const admit::detail::lock_guard lock(mutex_);
  latest_error_ = error;
  ++(open ? open_ : closed_);
  if (failing_.load(std::memory_order_relaxed)) return std::nullopt;
  failing_.store(true, std::memory_order_relaxed);
  since_ = now;
  reported_ = !last_event_ || now - *last_event_ >= summary_every_;
  if (!reported_) return std::nullopt;  // flapping: the next summary reports it
  // (Outages not told yet: this outage's events count their decisions; their time is left out.)
  unreported_ = false;
  unreported_for_ = {};
  backend_event e = take(backend_event::kind::failing, now);
  // The failing event reports the outage's start; the hit that started it is counted in the next event.
  open_ = e.decided_open;
  closed_ = e.decided_closed;
  e.decided_open = e.decided_closed = 0;
  return e;
}

std::optional<backend_event> backend_health::answered(clock::time_point now) {
  if (!failing_.load(std::memory_order_relaxed)) return std::nullopt;
  const admit::detail::lock_guard lock(mutex_);
  if (!failing_.load(std::memory_order_relaxed)) return std::nullopt;
  failing_.store(false, std::memory_order_relaxed);
  if (!reported_) {  // told by summary_due once the interval has passed
    unreported_ = true;
    unreported_for_ += now - since_;
    return std::nullopt;
  }
  return take(backend_event::kind::counting, now);
}

std::optional<backend_event> backend_health::summary_due(clock::time_point now) {
  const admit::detail::lock_guard lock(mutex_);
  if (last_event_ && now - *last_event_ < summary_every_) return std::nullopt;
  if (failing_.load(std::memory_order_relaxed)) {
    reported_ = true;
    unreported_ = false;  // the summary counts their decisions too
    unreported_for_ = {};
    return take(backend_event::kind::summary, now);
  }
  if (!unreported_) return std::nullopt;
  unreported_ = false;
  backend_event e = take(backend_event::kind::failed_meanwhile, now);
  e.failing_for = std::exchange(unreported_for_, {});
  return e;
}

}  // namespace admit::serve
