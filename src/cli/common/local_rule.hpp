// cli/common/local_rule.hpp — one look at a local limit's queue (see local_limit.hpp for the design): whether a waiter
// is admitted now, decided by admit::admission's share rule on the live entries, and the rate state it reads and
// writes. Internal to local_limit.cpp. Every function that reads or writes the files must be called holding the
// queue's `lock` (local_queue.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "admit/detail/admission_classes.hpp"
#include "admit/detail/saturating.hpp"
#include "cli/common/local_limit.hpp"
#include "cli/common/local_queue.hpp"

namespace admit::cli::run::local {

// The limit as admit::admission's plan (admit/detail/admission_classes.hpp): the global token bucket, and each class's
// guaranteed permits and assured bucket. Throws std::invalid_argument naming a bad value.
detail::admission_plan plan_of(const limit_definition& d);

// The rate state in the token bucket's representation (CLOCK_MONOTONIC ns). States this definition cannot have made
// at this boot's clock (a slower rate's, before the definition changed; a clock namespace; a damaged file) are
// clamped on reading: the global bucket is never emptier than empty, a class's bucket never owes more than one
// request's tokens (the most it can be charged in debt). A clamped state must be written back at once
// (write_buckets): the clamp is relative to now, so read again later it would never refill.
struct bucket_state {
  std::int64_t tat = detail::ns_min;  // the global bucket; ns_min: full
  std::vector<std::int64_t> assured;  // each class's assured bucket
  bool clamped = false;
};
// Under `lock`: the state in `rate` at `clock` (none stored, or another boot's: every bucket full).
bucket_state read_buckets(const queue_dir& q, const detail::admission_plan& plan, const clock_reading& clock);
// Under `lock`: stores the state (with classes, their buckets too).
void write_buckets(const queue_dir& q, const detail::admission_plan& plan, const clock_reading& clock,
                   const bucket_state& b);

// The outcome of one admission check.
struct evaluation {
  bool admit = false;
  wait_progress progress;
  bucket_state after;  // the rate state read; with admit, the state to store
  clock_reading clock;
  std::int64_t ahead = 0;  // the permits its class's waiters ahead of it ask for
  // Waiting: how long until time alone could admit it (its tokens), when it is the head of its class.
  std::optional<std::chrono::nanoseconds> rate_wait;
};

// Under `lock`: whether the waiter `self` (of configuration `c`, in class c.priority) may be admitted now, given the
// live entries `live` (self among them): the share rule of admit::admission (admit/detail/admission_rule.hpp) on the
// heads of the classes' queues, the tickets being the arrival order. Only the picked head admits itself; every other
// waiter is woken by the change that admission makes (or its own token time) and looks again. A clamped rate state
// is written back here.
evaluation evaluate(const queue_dir& q, const local_limit_config& c, const detail::admission_plan& plan,
                    const std::vector<entry_record>& live, std::uint64_t self);

}  // namespace admit::cli::run::local
