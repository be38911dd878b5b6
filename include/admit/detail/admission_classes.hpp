// admit/detail/admission_classes.hpp — admit::admission's configuration, checked and turned into numbers: the global
// token bucket, and each class's guaranteed permits and assured token bucket (the share rule of admission.hpp).
// Pure functions of the options; no state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "admit/detail/format_double.hpp"
#include "admit/detail/semaphore_state.hpp"
#include "admit/detail/token_bucket_math.hpp"
#include "admit/priority_class.hpp"
#include "admit/rate.hpp"

namespace admit::detail {

struct admission_class_plan {
  double share = 0;
  std::int64_t permits = 0;     // g_c: guaranteed permits (0 without a concurrency limit)
  token_bucket_config assured;  // rate share·rate, burst max(1, ceil(share·burst)); burst 0 for share 0
};

struct admission_plan {
  token_bucket_config global;
  std::int64_t max_in_flight = 0;  // 0: no limit
  std::vector<admission_class_plan> classes;
};

// One class with the whole share: its assured bucket is the global bucket, so it is entitled to every token the
// global bucket has, and its assured state need not be kept (admission_class_state::assured is null for it).
[[nodiscard]] inline bool admission_sole(const admission_plan& p) noexcept {
  return p.classes.size() == 1 && p.classes[0].share >= 1;
}

// Shares within 1e-9 of a whole permit or token count as reaching it (0.1 · 10 is 0.9999999999999999 in double).
inline constexpr double admission_share_epsilon = 1e-9;

// Checks the options (throws std::invalid_argument naming the value) and derives the plan, time standing still at
// `now_ns` for a zero rate.
template <class Options>
admission_plan plan_admission_classes(const Options& o, std::int64_t now_ns) {
  const char* who = "admit::admission";
  if (!o.rate.is_inf() && o.burst < 1) {
    throw std::invalid_argument(std::string(who) + ": burst must be >= 1 with a finite rate (" + o.rate.to_string() +
                                "), got " + std::to_string(o.burst));
  }
  if (o.max_in_flight < 0 || o.max_in_flight > semaphore_state::max_permits) {
    throw std::invalid_argument(std::string(who) + ": max_in_flight must be in [0, " +
                                std::to_string(semaphore_state::max_permits) + "] (0: no limit), got " +
                                std::to_string(o.max_in_flight));
  }
  std::vector<priority_class> classes = o.classes;
  if (classes.empty()) classes.push_back({"default", 1.0});
  double sum = 0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const double s = classes[c].share;
    if (!(s >= 0 && s <= 1)) {
      throw std::invalid_argument(std::string(who) + ": classes[" + std::to_string(c) + "] (\"" + classes[c].name +
                                  "\") share must be in [0, 1], got " + format_double(s));
    }
    sum += s;
  }
  if (sum > 1 + admission_share_epsilon) {
    throw std::invalid_argument(std::string(who) + ": the classes' shares must sum to at most 1, got " +
                                format_double(sum));
  }

  admission_plan p;
  p.global = make_token_bucket_config(o.rate, o.rate.is_inf() ? 0 : o.burst, now_ns, who);
  p.max_in_flight = o.max_in_flight;
  p.classes.resize(classes.size());

  // Guaranteed permits by largest remainder: each class floor or ceil of share·M, together min(M, floor(sum·M)).
  const auto m = static_cast<double>(o.max_in_flight);
  const auto total =
      std::min(o.max_in_flight, static_cast<std::int64_t>(std::floor(sum * m + admission_share_epsilon)));
  std::int64_t given = 0;
  std::vector<std::pair<double, std::size_t>> remainders;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const double exact = classes[c].share * m;
    const auto base = static_cast<std::int64_t>(std::floor(exact + admission_share_epsilon));
    p.classes[c].share = classes[c].share;
    p.classes[c].permits = base;
    given += base;
    remainders.emplace_back(exact - static_cast<double>(base), c);
  }
  // Shares that sum to a hair above 1 (within the epsilon, accepted) floor to more than M together once M is large
  // (2^59 · (1 + 10^-9) is 5.8·10^8 above 2^59): the excess comes off the largest guarantees.
  while (given > total) {
    auto& largest = *std::max_element(p.classes.begin(), p.classes.end(),
                                      [](const auto& a, const auto& b) { return a.permits < b.permits; });
    const std::int64_t cut = std::min(given - total, largest.permits);
    largest.permits -= cut;
    given -= cut;
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < total && i < remainders.size(); ++i, ++given) {
    if (remainders[i].first <= admission_share_epsilon) break;
    ++p.classes[remainders[i].second].permits;
  }

  // Assured buckets: rate share·rate, burst max(1, ceil(share·burst)).
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const double s = classes[c].share;
    if (o.rate.is_inf()) {
      p.classes[c].assured = make_token_bucket_config(o.rate, 0, now_ns, who);
      continue;
    }
    std::int64_t burst = 0;
    rate r;  // zero
    if (s > 0) {
      burst = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(std::ceil(s * static_cast<double>(o.burst) - admission_share_epsilon)));
      if (!o.rate.is_zero()) r = rate::every(std::chrono::duration<double, std::nano>(o.rate.interval_ns() / s));
    }
    p.classes[c].assured = make_token_bucket_config(r, burst, now_ns, who);
  }
  return p;
}

}  // namespace admit::detail
