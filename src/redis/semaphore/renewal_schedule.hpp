// redis/semaphore/renewal_schedule.hpp — when each of a semaphore object's leases is renewed next: one timer for all of
// them, armed for the earliest renewal due, so that a lease made or released costs a map insert or erase and no timer
// operation. Items that fall due together are handed over together, in due order, to `on_due` (which renews them and
// schedules each again). Items are held weakly: one whose last owner let go is skipped, never kept alive.
//
//   auto s = renewal_schedule<lease_core>::make(executor, [](auto due) { for (auto& l : due) renew(l); });
//   s->schedule(lease, steady_clock::now() + ttl / 3);   // again after each renewal
//   s->cancel(*lease);                                   // when the lease is released
//
// Thread safety: schedule and cancel may be called concurrently from any thread. `on_due` runs on the schedule's own
// strand of `executor`, one batch at a time, outside the schedule's lock: it may schedule and cancel. The timer's
// handler keeps the schedule alive while it runs; once the last owner's shared_ptr is gone, nothing more falls due.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "admit/detail/annotated_mutex.hpp"
#include "admit/detail/thread_annotations.hpp"

namespace admit::redis::detail {

template <class Item>
class renewal_schedule : public std::enable_shared_from_this<renewal_schedule<Item>> {
 public:
  using clock = std::chrono::steady_clock;
  using batch = std::vector<std::shared_ptr<Item>>;

  static std::shared_ptr<renewal_schedule> make(boost::asio::any_io_executor executor,
                                                std::function<void(batch)> on_due) {
    return std::shared_ptr<renewal_schedule>(new renewal_schedule(std::move(executor), std::move(on_due)));
  }
  renewal_schedule(const renewal_schedule&) = delete;
  renewal_schedule& operator=(const renewal_schedule&) = delete;

  // `item` falls due at `due` (in the past: at once), replacing the time it was scheduled at.
  void schedule(const std::shared_ptr<Item>& item, clock::time_point due) {
    bool rearm = false;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (auto at = places_.find(item.get()); at != places_.end()) {
        by_due_.erase(at->second);
        places_.erase(at);
      }
      places_.emplace(item.get(), by_due_.emplace(due, entry{item.get(), item}));
      if (due < armed_) {
        armed_ = due;
        rearm = true;
      }
    }
    if (rearm)
      boost::asio::post(strand_, [weak = this->weak_from_this()] {
        if (auto self = weak.lock()) self->arm();
      });
  }
  // `item` is not renewed any more (until scheduled again). A batch already handed to on_due may still hold it.
  void cancel(const Item& item) {
    const admit::detail::lock_guard lock(mutex_);
    if (auto at = places_.find(&item); at != places_.end()) {
      by_due_.erase(at->second);
      places_.erase(at);
    }
  }
  // The items scheduled now.
  std::size_t size() {
    const admit::detail::lock_guard lock(mutex_);
    return by_due_.size();
  }

 private:
  // The item's address keys its place in places_; the weak pointer is what is handed over, if it still lives.
  struct entry {
    const Item* key;
    std::weak_ptr<Item> item;
  };
  using entries = std::multimap<clock::time_point, entry>;

  renewal_schedule(boost::asio::any_io_executor executor, std::function<void(batch)> on_due)
      : strand_(boost::asio::make_strand(std::move(executor))), timer_(strand_), on_due_(std::move(on_due)) {}

  // On the strand: arms the timer for the earliest due item (or lets it rest).
  void arm() {
    clock::time_point at;
    {
      const admit::detail::lock_guard lock(mutex_);
      if (by_due_.empty()) {
        armed_ = clock::time_point::max();
        timer_.cancel();
        return;
      }
      at = armed_ = by_due_.begin()->first;
    }
    timer_.expires_at(at);
    timer_.async_wait([weak = this->weak_from_this()](boost::system::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->fire();
    });
  }
  // On the strand: hands the items due to on_due, then arms for the next.
  void fire() {
    batch due;
    {
      const admit::detail::lock_guard lock(mutex_);
      const auto now = clock::now();
      while (!by_due_.empty() && by_due_.begin()->first <= now) {
        const auto first = by_due_.begin();
        if (auto item = first->second.item.lock()) due.push_back(std::move(item));
        // An address may have been reused by an item scheduled since: only this entry's own place goes.
        if (auto at = places_.find(first->second.key); at != places_.end() && at->second == first) places_.erase(at);
        by_due_.erase(first);
      }
      armed_ = clock::time_point::max();
    }
    if (!due.empty()) on_due_(std::move(due));
    arm();
  }

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::steady_timer timer_;  // on strand_
  std::function<void(batch)> on_due_;

  admit::detail::mutex mutex_;
  entries by_due_ ADMIT_GUARDED_BY(mutex_);
  std::unordered_map<const Item*, typename entries::iterator> places_ ADMIT_GUARDED_BY(mutex_);
  clock::time_point armed_ ADMIT_GUARDED_BY(mutex_) = clock::time_point::max();
};

// When a lease whose renewal failed at `now` is tried again: a quarter of the time left until its local expiry
// `expiry`, at least 100 ms and at most `every` (lease_ttl / 3) from now, and never past the expiry (where a failed try
// finds it lost). Sooner than `every` because a renewal fails most often while Redis moves (a failover, a slot
// migration, a restart): the new master is often there within seconds, and a lease tried again only every
// lease_ttl / 3 was lost although it could have been renewed there for seconds; geometrically sooner, so that the
// last seconds before the expiry are tried several times.
template <class Clock>
[[nodiscard]] typename Clock::time_point retry_after_failed_renewal(typename Clock::time_point now,
                                                                    typename Clock::time_point expiry,
                                                                    typename Clock::duration every) {
  const typename Clock::duration floor = std::chrono::milliseconds(100);
  const auto left = expiry > now ? expiry - now : Clock::duration::zero();
  const auto wait = std::min(every, std::max(floor, left / 4));
  return std::min(now + wait, expiry);
}

}  // namespace admit::redis::detail
