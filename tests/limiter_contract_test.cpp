// The contract every rate limiter of admit keeps, checked on all of them with one typed test suite: token bucket,
// GCRA, pacer, fixed window, sliding window, sliding log and warm-up, each built with a comparable configuration (10
// per second, a capacity of 5 at one instant unless a test asks for another).
//
// What each test checks is what decision.hpp and the conventions of every limiter promise; where a limiter documents
// something else, the test says so and skips it for that limiter. The algorithm-specific behaviour (exact values,
// bounds over windows, waiting) stays in tests/<limiter>_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "admit/decision.hpp"
#include "admit/fixed_window.hpp"
#include "admit/gcra.hpp"
#include "admit/pacer.hpp"
#include "admit/rate.hpp"
#include "admit/sliding_log.hpp"
#include "admit/sliding_window.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/warmup.hpp"
#include "support/count_allocations.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace limiter_contract_test {

namespace {

using namespace std::chrono_literals;
using admit::decision;
using admit::rate;
using std::chrono::nanoseconds;
using steady = std::chrono::steady_clock;
using tp = steady::time_point;

// Aligned to every window length used below, far from the clock's epoch.
const tp start = tp{} + 1000h;

// One family per limiter: make<Clock>(start, capacity) builds a limiter of about 10 per second that admits
// `capacity` requests of one at `start` (the warm-up limiter admits one request at a time whatever the capacity).
// rejects_oversize: a request above the capacity is refused for good (decision::exceeds_capacity()).
template <template <class> class Limiter>
struct rate_and_burst {
  static constexpr bool rejects_oversize = true;
  template <class Clock>
  static auto make(typename Clock::time_point, std::int64_t capacity) {
    return std::make_unique<Limiter<Clock>>(rate::per_second(10), capacity);
  }
};

template <template <class> class Limiter>
struct limit_per_window {
  static constexpr bool rejects_oversize = true;
  template <class Clock>
  static auto make(typename Clock::time_point, std::int64_t capacity) {
    return std::make_unique<Limiter<Clock>>(capacity, 100ms * capacity);
  }
};

struct token_bucket_family : rate_and_burst<admit::basic_token_bucket> {
  static constexpr const char* name = "TokenBucket";
};
struct gcra_family : rate_and_burst<admit::basic_gcra> {
  static constexpr const char* name = "Gcra";
};
struct fixed_window_family : limit_per_window<admit::basic_fixed_window> {
  static constexpr const char* name = "FixedWindow";
};
struct sliding_window_family : limit_per_window<admit::basic_sliding_window> {
  static constexpr const char* name = "SlidingWindow";
};
struct sliding_log_family : limit_per_window<admit::basic_sliding_log> {
  static constexpr const char* name = "SlidingLog";
};

struct pacer_family {
  static constexpr const char* name = "Pacer";
  static constexpr bool rejects_oversize = true;
  template <class Clock>
  static auto make(typename Clock::time_point start_at, std::int64_t capacity) {
    auto p =
        std::make_unique<admit::basic_pacer<Clock>>(rate::per_second(10), admit::pacer_options{.slack = capacity - 1});
    // Pacing starts at the first call (which earns no slack). A query starts it long enough before `start_at` for the
    // whole slack to be banked by then, so that the pacer admits slack + 1 at once as the others admit their capacity.
    (void)p->time_until_available_at(start_at - 100ms * capacity);
    return p;
  }
};

struct warmup_family {
  static constexpr const char* name = "Warmup";
  // Guava's oversize behaviour (warmup.hpp): a request of any size is admitted when no debt is outstanding and its
  // cost is paid by the next one; retry_after is never nanoseconds::max().
  static constexpr bool rejects_oversize = false;
  template <class Clock>
  static auto make(typename Clock::time_point, std::int64_t) {
    return std::make_unique<admit::basic_warmup<Clock>>(rate::per_second(10), 1s);
  }
};

template <class Family>
class LimiterContract : public ::testing::Test {
 protected:
  static auto make(std::int64_t capacity = 5) { return Family::template make<steady>(start, capacity); }

  // The capacity at one instant is the limit the decisions report.
  template <class L>
  static std::int64_t capacity_of(L& lim) {
    return lim.decide_at(start, 0).limit;
  }

  // A pseudo-random request: sizes 0 to capacity + 1, at a time 0 to 60 ms after the previous one.
  struct request {
    tp at;
    std::int64_t n;
  };
  static request next_request(std::mt19937_64& rng, tp previous, std::int64_t capacity) {
    const auto gap = nanoseconds{std::uniform_int_distribution<std::int64_t>(0, 60'000'000)(rng)};
    const bool now_again = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    return {now_again ? previous : previous + gap, std::uniform_int_distribution<std::int64_t>(0, capacity + 1)(rng)};
  }

  // Two limiters with the same history fed `count` pseudo-random requests: each(a, b, now, n, capacity, rng) is called
  // for each and decides it (through decide_both); it may move `now` on.
  template <class Each>
  void for_random_requests(std::uint64_t seed, int count, Each each) {
    auto a = make();
    auto b = make();
    const std::int64_t capacity = capacity_of(*a);
    std::mt19937_64 rng(seed);
    tp now = start;
    for (int i = 0; i < count && !this->HasFailure(); ++i) {
      const request r = next_request(rng, now, capacity);
      now = r.at;
      SCOPED_TRACE("request " + std::to_string(i) + " of " + std::to_string(r.n));
      each(*a, *b, now, r.n, capacity, rng);
    }
  }

  // Requests of one admitted at `now`, until the first refusal.
  template <class L>
  static std::int64_t drain(L& lim, tp now, std::int64_t capacity) {
    std::int64_t admitted = 0;
    while (admitted <= capacity + 1 && lim.try_acquire_at(now)) ++admitted;
    return admitted;
  }

  // The same request to two limiters with the same history: `a` is asked through time_until_available_at (twice) and
  // decide_at, `b` only through try_acquire_at. Checks that the query consumes nothing and equals the decision's
  // retry_after, that both forms decide alike, and what retry_after may be. Returns a's decision.
  template <class L>
  static decision decide_both(L& a, L& b, tp now, std::int64_t n, std::int64_t capacity) {
    const nanoseconds wait = a.time_until_available_at(now, n);
    EXPECT_EQ(a.time_until_available_at(now, n), wait) << "a query consumed something";
    const decision d = a.decide_at(now, n);
    EXPECT_EQ(b.try_acquire_at(now, n), d.admitted) << "decide_at and try_acquire_at disagree";
    EXPECT_EQ(d.limit, capacity);
    if (d.admitted) {
      EXPECT_EQ(d.retry_after, 0ns);
      EXPECT_EQ(wait, 0ns);
    } else {
      EXPECT_GT(d.retry_after, 0ns);
      EXPECT_EQ(wait, d.retry_after) << "time_until_available_at differs from the decision's retry_after";
      EXPECT_EQ(d.exceeds_capacity(), Family::rejects_oversize && n > capacity);
    }
    return d;
  }
};

struct family_name {
  template <class Family>
  static std::string GetName(int) {
    return Family::name;
  }
};

using families = ::testing::Types<token_bucket_family, gcra_family, pacer_family, fixed_window_family,
                                  sliding_window_family, sliding_log_family, warmup_family>;
TYPED_TEST_SUITE(LimiterContract, families, family_name);

TYPED_TEST(LimiterContract, ReportsItsCapacityAsTheLimitAndAdmitsItAtOnce) {
  auto lim = this->make();
  const std::int64_t capacity = this->capacity_of(*lim);
  EXPECT_EQ(capacity, TypeParam::rejects_oversize ? 5 : 1);
  EXPECT_EQ(this->drain(*lim, start, capacity), capacity);
}

// On pseudo-random requests, decide_at (after two time_until_available_at queries) and try_acquire_at take the same
// decisions on two limiters with the same history — so neither the query nor the decision's extra work changes
// anything — and every decision is consistent with its query (see decide_both).
TYPED_TEST(LimiterContract, DecideTryAcquireAndTimeUntilAvailableAgree) {
  std::int64_t admitted = 0;
  std::int64_t refused = 0;
  this->for_random_requests(2024, 3000, [&](auto& a, auto& b, tp& now, std::int64_t n, std::int64_t capacity, auto&) {
    (this->decide_both(a, b, now, n, capacity).admitted ? admitted : refused) += 1;
  });
  EXPECT_GT(admitted, 100);
  EXPECT_GT(refused, 100);
}

// n == 0 is admitted whatever the state — exhausted, or asked at an earlier now — with retry_after zero, and it
// changes nothing: a twin that never sees those requests keeps deciding alike. (Only at the current or an earlier
// now: the token bucket takes any `now` it is given, n == 0 included, as the latest time seen, and a pacer's first
// call of any kind but try_acquire starts its clock — both documented in their headers.)
TYPED_TEST(LimiterContract, ZeroIsAlwaysAdmittedAndChangesNothing) {
  this->for_random_requests(7, 2000, [&](auto& a, auto& b, tp& now, std::int64_t n, std::int64_t capacity, auto& rng) {
    const tp earlier = now - nanoseconds{std::uniform_int_distribution<std::int64_t>(1, 2'000'000'000)(rng)};
    for (const tp at : {now, earlier}) {
      EXPECT_TRUE(a.try_acquire_at(at, 0));
      const decision d = a.decide_at(at, 0);
      EXPECT_TRUE(d.admitted);
      EXPECT_EQ(d.retry_after, 0ns);
      EXPECT_EQ(a.time_until_available_at(at, 0), 0ns);
    }
    this->decide_both(a, b, now, n, capacity);
  });
}

// decision.hpp: retry_after is "how long until the same request would be admitted if nothing else happened". Every
// limiter promises it (token bucket, GCRA, pacer: the time its tokens/slots are there; fixed window: the next window;
// sliding window: the exact nanosecond the weighting lets it in; sliding log: the time its n-th oldest entry leaves;
// warm-up: the outstanding debt), so the same request at now + retry_after is admitted.
TYPED_TEST(LimiterContract, RefusedRequestIsAdmittedAfterWaitingRetryAfter) {
  int waited = 0;
  this->for_random_requests(99, 3000, [&](auto& a, auto& b, tp& now, std::int64_t n, std::int64_t capacity, auto&) {
    const decision d = this->decide_both(a, b, now, n, capacity);
    if (d.admitted || d.exceeds_capacity()) return;
    now += d.retry_after;
    const decision again = this->decide_both(a, b, now, n, capacity);
    EXPECT_TRUE(again.admitted) << "refused again after waiting retry_after " << d.retry_after.count() << "ns";
    ++waited;
  });
  EXPECT_GT(waited, 100);
}

// A request larger than the capacity can never fit: refused with retry_after == nanoseconds::max(), as the query
// says, whenever it comes, and it consumes nothing (the capacity is still admitted at once).
TYPED_TEST(LimiterContract, RequestAboveTheCapacityExceedsCapacity) {
  if constexpr (!TypeParam::rejects_oversize) {
    GTEST_SKIP() << "admits requests of any size (oversize_policy::debt semantics, documented in its header)";
  } else {
    auto lim = this->make();
    const std::int64_t capacity = this->capacity_of(*lim);
    for (const tp at : {start, start + 1h}) {
      const decision d = lim->decide_at(at, capacity + 1);
      EXPECT_TRUE(d.exceeds_capacity());
      EXPECT_EQ(d.retry_after, nanoseconds::max());
      EXPECT_EQ(d.remaining, capacity);
      EXPECT_EQ(d.reset_after, 0ns);  // still full
      EXPECT_EQ(lim->time_until_available_at(at, capacity + 1), nanoseconds::max());
      EXPECT_FALSE(lim->try_acquire_at(at, capacity + 1));
    }
    EXPECT_TRUE(lim->try_acquire_at(start + 1h, capacity));
  }
}

// decision.hpp: remaining is "whole requests of size 1 that would be admitted right after this decision". Checked by
// replaying the history into a fresh limiter and draining it at the same now.
TYPED_TEST(LimiterContract, RemainingIsWhatFitsRightAfterTheDecision) {
  const std::int64_t capacity = this->capacity_of(*this->make());
  std::mt19937_64 rng(5);
  std::vector<typename TestFixture::request> history;
  tp now = start;
  for (int i = 0; i < 300 && !this->HasFailure(); ++i) {
    history.push_back(this->next_request(rng, now, capacity));
    now = history.back().at;
    if (i % 5 != 4) continue;
    SCOPED_TRACE("after request " + std::to_string(i));
    auto lim = this->make();
    decision last;
    for (const auto& r : history) last = lim->decide_at(r.at, r.n);
    EXPECT_EQ(last.remaining, this->drain(*lim, now, capacity));
  }
}

// A `now` earlier than one already seen (a clock going backwards, threads passing slightly stale times) never admits
// more than the latest `now` would: two limiters with the same pseudo-random history, one drained at the latest now,
// the other at an earlier one.
TYPED_TEST(LimiterContract, EarlierNowNeverAdmitsMoreThanTheLatest) {
  const std::int64_t capacity = this->capacity_of(*this->make());
  std::mt19937_64 rng(31);
  for (int round = 0; round < 300 && !this->HasFailure(); ++round) {
    auto late = this->make();
    auto back = this->make();
    tp now = start;
    const int length = std::uniform_int_distribution<int>(1, 20)(rng);
    for (int i = 0; i < length; ++i) {
      const auto r = this->next_request(rng, now, capacity);
      now = r.at;
      (void)late->try_acquire_at(now, r.n);
      (void)back->try_acquire_at(now, r.n);
    }
    const auto delta = nanoseconds{std::uniform_int_distribution<std::int64_t>(1, 2'000'000'000)(rng)};
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(delta.count()) + "ns back");
    EXPECT_LE(this->drain(*back, now - delta, capacity), this->drain(*late, now, capacity));
  }
}

// Four threads at one instant admit exactly the capacity: never more (over-admission) and never less (a lost
// compare-and-swap reported as a refusal). At one instant a refusal means the capacity is spent, so a thread that is
// admitted after it was refused has seen a spurious refusal. Fresh limiters, many rounds, a large capacity for long
// contention and small ones for many races on the last unit.
TYPED_TEST(LimiterContract, FourThreadsAtOneInstantAdmitExactlyTheCapacity) {
  using limiter = typename decltype(this->make())::element_type;
  constexpr int threads = 4;
  for (const auto& [size, rounds] : {std::pair{20000, 1}, std::pair{5, 200}, std::pair{1, 200}, std::pair{3, 200}}) {
    SCOPED_TRACE("capacity " + std::to_string(size));
    std::unique_ptr<limiter> lim;
    std::int64_t attempts = 0;
    std::atomic<std::int64_t> admitted{0};
    std::atomic<std::int64_t> admitted_after_refusal{0};
    std::barrier sync(threads + 1);
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i, rounds = rounds] {
        for (int r = 0; r < rounds; ++r) {
          sync.arrive_and_wait();  // the round's limiter is built
          std::int64_t mine = 0;
          bool refused = false;
          for (std::int64_t j = 0; j < attempts; ++j) {
            const bool ok = i % 2 == 0 ? lim->try_acquire_at(start) : lim->decide_at(start).admitted;
            if (ok && refused) admitted_after_refusal.fetch_add(1);
            refused = refused || !ok;
            mine += ok ? 1 : 0;
          }
          admitted.fetch_add(mine);
          sync.arrive_and_wait();  // the round is over
        }
      });
    }
    for (int r = 0; r < rounds; ++r) {
      lim = TypeParam::template make<steady>(start, size);
      const std::int64_t capacity = this->capacity_of(*lim);
      attempts = capacity / 2 + 2;  // 4 threads: twice the capacity and more
      admitted = 0;
      sync.arrive_and_wait();
      sync.arrive_and_wait();
      EXPECT_EQ(admitted.load(), capacity) << "round " << r;
    }
    EXPECT_EQ(admitted_after_refusal.load(), 0);
  }
}

// The overloads without a time point read Clock::now(): on the manual clock they answer as the `_at` forms at now().
TYPED_TEST(LimiterContract, OverloadsWithoutATimeReadTheClock) {
  using clock = admit::testing::manual_clock;
  clock::reset();
  const clock::time_point begin = clock::time_point{} + 1000h;
  clock::set(begin);
  auto lim = TypeParam::template make<clock>(begin, 5);
  const std::int64_t capacity = lim->decide_at(begin, 0).limit;
  for (std::int64_t i = 0; i < capacity; ++i) EXPECT_TRUE(lim->try_acquire()) << i;
  EXPECT_FALSE(lim->try_acquire());
  const nanoseconds wait = lim->time_until_available();
  EXPECT_GT(wait, 0ns);
  EXPECT_EQ(wait, lim->time_until_available_at(begin));
  const decision d = lim->decide();
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, wait);
  clock::advance(wait);
  EXPECT_EQ(lim->time_until_available(), 0ns);
  EXPECT_TRUE(lim->decide().admitted);
}

// --- Properties checked on the limiters they concern, one at a time
// ---------------------------------------------------

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// A limiter never starts a thread or a timer (a limiter that refills by a background thread and a timer per tick
// costs a thread per limiter that never stops): a limiter is memory and nothing else. Building a thousand of each
// starts no thread, deciding allocates nothing, and a limiter idle for a year answers from the clock alone.
template <class Limiter, class Make>
void expect_no_thread_no_allocation(Make make) {
  const std::size_t threads_before = thread_count();
  std::vector<std::unique_ptr<Limiter>> limiters;
  for (int i = 0; i < 1000; ++i) limiters.push_back(make());
  const std::size_t before = admit_test::allocations();
  for (auto& l : limiters) {
    (void)l->try_acquire_at(start);
    (void)l->decide_at(start + 1ms);
    (void)l->time_until_available_at(start + 2ms);
    (void)l->try_acquire_at(start + 24h * 365);
  }
  EXPECT_EQ(admit_test::allocations(), before);
  EXPECT_EQ(thread_count(), threads_before);
}

TEST(LimiterContract, NoLimiterStartsAThreadOrTimerOrAllocatesToDecide) {
  expect_no_thread_no_allocation<admit::token_bucket>(
      [] { return std::make_unique<admit::token_bucket>(rate::per_second(1000), 10); });
  expect_no_thread_no_allocation<admit::gcra>([] { return std::make_unique<admit::gcra>(rate::per_second(1000), 10); });
  expect_no_thread_no_allocation<admit::pacer>([] { return std::make_unique<admit::pacer>(rate::per_second(1000)); });
  expect_no_thread_no_allocation<admit::fixed_window>([] { return std::make_unique<admit::fixed_window>(10, 1s); });
  expect_no_thread_no_allocation<admit::sliding_window>([] { return std::make_unique<admit::sliding_window>(10, 1s); });
  expect_no_thread_no_allocation<admit::sliding_log>([] { return std::make_unique<admit::sliding_log>(10, 1s); });
  expect_no_thread_no_allocation<admit::warmup>(
      [] { return std::make_unique<admit::warmup>(rate::per_second(1000), 1s); });
}

// High rates are exact (refill driven by a timer cannot tick fast enough for them): refill is arithmetic on the clock.
// At a million and at a hundred million per second, 10 ms of requests every 5 ns admit exactly rate · 10 ms + burst.
TEST(LimiterContract, HighRatesAreExactBecauseRefillIsArithmetic) {
  for (const double per_second : {1e6, 1e8}) {
    admit::token_bucket bucket{rate::per_second(per_second), 100};
    admit::gcra gcra{rate::per_second(per_second), 100};
    std::int64_t by_bucket = 0;
    std::int64_t by_gcra = 0;
    for (auto now = start; now <= start + 10ms; now += 5ns) {
      by_bucket += bucket.try_acquire_at(now) ? 1 : 0;
      by_gcra += gcra.try_acquire_at(now) ? 1 : 0;
    }
    const auto expected = static_cast<std::int64_t>(per_second / 100) + 100;
    EXPECT_EQ(by_bucket, expected) << per_second;
    EXPECT_EQ(by_gcra, expected) << per_second;
  }
}

// A window's limit does not depend on the unit the window is given in (a window sized from its length in the wrong
// unit admits a thousand times too many or too few): the limit is a count per window, and 100 per 1 s, per 1000 ms,
// per 1000000 µs admit the same 100.
TEST(LimiterContract, WindowLimitsDoNotDependOnTheWindowsUnit) {
  for (const std::chrono::nanoseconds window :
       {std::chrono::nanoseconds(1s), std::chrono::nanoseconds(1000ms), std::chrono::nanoseconds(1'000'000us)}) {
    admit::sliding_window counter{100, window};
    admit::sliding_log log{100, window};
    admit::fixed_window fixed{100, window};
    int a = 0;
    int b = 0;
    int c = 0;
    const tp boundary = tp{} + 1000s;  // a window boundary
    for (int i = 0; i < 1000; ++i) {
      const tp now = boundary + i * 1ms;  // 1000 requests spread over one window
      a += counter.try_acquire_at(now) ? 1 : 0;
      b += log.try_acquire_at(now) ? 1 : 0;
      c += fixed.try_acquire_at(now) ? 1 : 0;
    }
    EXPECT_EQ(a, 100);
    EXPECT_EQ(b, 100);
    EXPECT_EQ(c, 100);
  }
}

}  // namespace

}  // namespace limiter_contract_test
