// Lost-state detection (see epoch_tracker.hpp).
#include "epoch_tracker.hpp"

#include <algorithm>

namespace admit::redis::detail {

bool epoch_tracker::observe(const epoch_sighting& s) {
  if (s.id.empty()) return false;
  const admit::detail::lock_guard lock(mutex_);
  bool lost = false;
  if (id_.empty()) {
    id_ = s.id;
  } else if (s.id != id_) {
    lost = s.now_us < state_until_;
    id_ = s.id;
    seq_ = 0;
    seq_time_ = 0;
    state_until_ = 0;
  } else if (s.seq < seq_ && s.now_us > seq_time_) {
    // The count went back, in a later reply: admissions this process saw acknowledged are gone.
    lost = true;
    seq_ = 0;
  }
  if (s.seq >= seq_) {
    seq_ = s.seq;
    seq_time_ = s.now_us;
  }
  if (s.wrote) state_until_ = std::max(state_until_, s.now_us + s.reset_us);
  return lost;
}

}  // namespace admit::redis::detail
