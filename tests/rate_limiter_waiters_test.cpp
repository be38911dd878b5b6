// The waiter bound of the rate limiters that block (token bucket, pacer, warm-up): set_max_waiters(k) lets k callers
// wait at once; the next that would have to wait fails at once with errc::queue_full, taking nothing; a request
// admitted at once never counts and is never refused. Deterministic on the manual clock, plus an exactness test under
// threads (run under ThreadSanitizer by the tsan preset). The Asio form is in tests/asio/asio_async_wait_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/detail/waiter_gate.hpp"
#include "admit/errc.hpp"
#include "admit/limiter_metrics.hpp"
#include "admit/pacer.hpp"
#include "admit/rate.hpp"
#include "admit/testing/manual_clock.hpp"
#include "admit/token_bucket.hpp"
#include "admit/wait_result.hpp"
#include "admit/warmup.hpp"

// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace rate_limiter_waiters_test {

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::rate;
using clock_type = admit::testing::manual_clock;

// Each family builds a limiter of 10 per second whose capacity at time zero is spent by spend(): the next request of
// one waits 100 ms, the one after it 200 ms, and so on.
struct token_bucket_family {
  static constexpr const char* name = "TokenBucket";
  using limiter = admit::basic_token_bucket<clock_type>;
  static std::unique_ptr<limiter> make() { return std::make_unique<limiter>(rate::per_second(10), 1); }
};
struct pacer_family {
  static constexpr const char* name = "Pacer";
  using limiter = admit::basic_pacer<clock_type>;
  static std::unique_ptr<limiter> make() {
    return std::make_unique<limiter>(rate::per_second(10), admit::pacer_options::without_slack());
  }
};
struct warmup_family {
  static constexpr const char* name = "Warmup";
  using limiter = admit::basic_warmup<clock_type>;
  // No warm-up period: a smooth limiter, one request every 100 ms.
  static std::unique_ptr<limiter> make() { return std::make_unique<limiter>(rate::per_second(10), 0s); }
};

template <class Family>
class RateLimiterWaiters : public ::testing::Test {
 protected:
  void SetUp() override { clock_type::reset(); }
  static std::unique_ptr<typename Family::limiter> make_spent() {
    auto l = Family::make();
    EXPECT_TRUE(l->try_acquire());
    EXPECT_FALSE(l->try_acquire());
    return l;
  }
};

struct family_name {
  template <class Family>
  static std::string GetName(int) {
    return Family::name;
  }
};

using families = ::testing::Types<token_bucket_family, pacer_family, warmup_family>;
TYPED_TEST_SUITE(RateLimiterWaiters, families, family_name);

TYPED_TEST(RateLimiterWaiters, UnboundedByDefault) {
  auto l = TypeParam::make();
  EXPECT_EQ(l->max_waiters(), admit::detail::waiter_gate::unbounded);
  EXPECT_EQ(l->waiting(), 0U);
  l->set_max_waiters(3);
  EXPECT_EQ(l->max_waiters(), 3U);
}

// max_waiters wait; the next fails at once with queue_full (through every waiting member) and takes nothing; when one
// leaves, the next can wait again.
TYPED_TEST(RateLimiterWaiters, BeyondMaxWaitersFailsAtOnceWithQueueFull) {
  auto l = this->make_spent();
  l->set_max_waiters(2);
  std::stop_source leave_first;
  admit::wait_result first, second, third;
  std::jthread t1([&] { first = l->acquire(1, leave_first.get_token()); });  // due at 100 ms
  clock_type::wait_for_sleepers(1);
  std::jthread t2([&] { second = l->try_acquire_for(1h); });  // due at 200 ms
  clock_type::wait_for_sleepers(2);
  EXPECT_EQ(l->waiting(), 2U);

  const auto due_before = l->time_until_available();
  EXPECT_EQ(l->acquire().error(), errc::queue_full);
  EXPECT_EQ(l->try_acquire_for(1h).error(), errc::queue_full);
  EXPECT_EQ(l->try_acquire_until(clock_type::now() + 1h).error(), errc::queue_full);
  EXPECT_EQ(l->time_until_available(), due_before) << "a refused waiter took something";
  EXPECT_EQ(l->waiting(), 2U);

  leave_first.request_stop();  // one leaves
  t1.join();
  EXPECT_EQ(first.error(), errc::cancelled);
  EXPECT_EQ(l->waiting(), 1U);
  std::jthread t3([&] { third = l->acquire(); });  // the next can wait again
  clock_type::wait_for_sleepers(2);
  EXPECT_EQ(l->waiting(), 2U);
  clock_type::advance(1s);
  t2.join();
  t3.join();
  EXPECT_TRUE(second.has_value()) << second.error();
  EXPECT_TRUE(third.has_value()) << third.error();
  EXPECT_EQ(l->waiting(), 0U);
}

// A request admitted at once does not wait, so the bound does not refuse it: max_waiters 0 means "never wait".
TYPED_TEST(RateLimiterWaiters, ZeroMaxWaitersAdmitsAtOnceButNeverWaits) {
  auto l = TypeParam::make();
  l->set_max_waiters(0);
  EXPECT_TRUE(l->acquire());  // capacity is there: admitted without waiting
  EXPECT_EQ(l->acquire().error(), errc::queue_full);
  EXPECT_EQ(l->try_acquire_for(1h).error(), errc::queue_full);
  clock_type::advance(100ms);
  EXPECT_TRUE(l->try_acquire_for(1h));
}

// A deadline that cannot be met is timeout (at once, as before), checked before the bound.
TYPED_TEST(RateLimiterWaiters, AnImpossibleDeadlineIsTimeoutNotQueueFull) {
  auto l = this->make_spent();
  l->set_max_waiters(0);
  EXPECT_EQ(l->try_acquire_for(50ms).error(), errc::timeout);
  EXPECT_EQ(l->try_acquire_for(100ms).error(), errc::queue_full);
}

// Exactness under threads: `threads` callers race to wait on a spent limiter with max_waiters = k. Nobody leaves
// before all have tried (the manual clock does not move), so exactly k must wait and the others be refused — each
// refusal while k really wait. A bound that counts refused callers even for a moment (increment, then undo) lets one
// refuse another while fewer than k wait: then fewer than k wait in the end, or a refusal sees more than k.
TYPED_TEST(RateLimiterWaiters, TheBoundIsExactUnderConcurrency) {
  constexpr std::size_t threads = 12;
  constexpr std::size_t k = 4;
  for (int round = 0; round < 30 && !this->HasFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    clock_type::reset();
    auto l = this->make_spent();
    l->set_max_waiters(k);
    std::atomic<std::size_t> refused{0};
    std::atomic<std::size_t> bad_refusals{0};  // refused while not k waited
    std::atomic<std::size_t> admitted{0};
    auto* lp = l.get();
    l->enable_metrics([lp, &bad_refusals](const admit::limiter_event& e) {
      // Runs on the refused thread right after the refusal: k wait, and nobody can have left yet.
      if (e.outcome == admit::acquire_outcome::queue_full && lp->waiting() != k) bad_refusals.fetch_add(1);
    });
    std::latch go(threads);
    std::vector<std::jthread> pool;
    for (std::size_t i = 0; i < threads; ++i) {
      pool.emplace_back([&] {
        go.arrive_and_wait();
        const admit::wait_result r = l->acquire();
        if (r) {
          admitted.fetch_add(1);
        } else if (r.error() == errc::queue_full) {
          refused.fetch_add(1);
        }
      });
    }
    // Every caller has either been refused or is asleep on the clock.
    while (refused.load() + clock_type::sleepers() < threads) std::this_thread::yield();
    EXPECT_EQ(clock_type::sleepers(), k);
    EXPECT_EQ(l->waiting(), k);
    EXPECT_EQ(refused.load(), threads - k);
    EXPECT_EQ(bad_refusals.load(), 0U);
    clock_type::advance(1h);
    pool.clear();  // joins
    EXPECT_EQ(admitted.load(), k);
    EXPECT_EQ(l->waiting(), 0U);
    EXPECT_EQ(l->metrics().waited, k);
    EXPECT_EQ(l->metrics().rejected, threads - k);
  }
}

// The gate itself, with many threads entering and leaving at random: never more than its bound inside at once.
TEST(WaiterGate, NeverAdmitsMoreThanItsBound) {
  admit::detail::waiter_gate gate;
  gate.set_max(3);
  std::atomic<std::size_t> inside{0};
  std::atomic<std::size_t> most{0};
  std::atomic<std::size_t> entered{0};
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < 8; ++t) {
      pool.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) {
          auto place = gate.enter();
          if (!place) continue;
          entered.fetch_add(1);
          const std::size_t now = inside.fetch_add(1) + 1;
          std::size_t m = most.load();
          while (now > m && !most.compare_exchange_weak(m, now)) {
          }
          inside.fetch_sub(1);
        }
      });
    }
  }
  EXPECT_LE(most.load(), 3U);
  EXPECT_GT(entered.load(), 0U);
  EXPECT_EQ(gate.waiting(), 0U);
}

}  // namespace

}  // namespace rate_limiter_waiters_test
