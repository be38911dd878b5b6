// admit::redis::admission against a real redis-server: a rate and a concurrency limit decided in one step (the tokens
// and the permits taken together, a waiter holding neither), FIFO across objects, the rate's deadlines failing at
// once, the definition stored and conflicts refused until set_limits, and what is not supported refused by name.
// Time is Redis's own: the tests use rates slow enough (one token a minute) that no refill happens while they run,
// or fast ones whose only assertion is an order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/admission.hpp"
#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "limiter_testing.hpp"
#include "redis_server.hpp"
#include "semaphore_testing.hpp"

namespace {

using namespace std::chrono_literals;
using admit::admission_options;
using admit::redis::admission;
using admit::redis::connection;
using admit::redis::testing::eventually;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::waiter_count;

// One token a minute: nothing refills while a test runs.
admission_options slow(std::int64_t burst, std::int64_t max_in_flight) {
  return {.rate = admit::rate::parse("1/min"), .burst = burst, .max_in_flight = max_in_flight};
}

TEST(RedisAdmission, TakesTokensAndPermitsInOneDecision) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "both", slow(/*burst=*/3, /*max_in_flight=*/2));
  auto first = a.try_acquire(0);
  ASSERT_TRUE(first) << first.error().message();
  auto second = a.try_acquire(0);
  ASSERT_TRUE(second) << second.error().message();
  // Permits are the limit now: one token is left, and it is not spent by the refusal.
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::would_block);
  auto [s, ec] = a.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(s.available, 0);
  EXPECT_EQ(s.tokens, 1);
  EXPECT_EQ(s.burst, 3);
  EXPECT_EQ(s.token_interval, 60s);
  EXPECT_EQ(admit::redis::describe(s), "rate 1/min, burst 3, max_in_flight 2");
  // A release frees a permit; the last token goes with it. Then tokens are the limit, with a permit free.
  (void)first->release();
  auto third = a.try_acquire(0);
  ASSERT_TRUE(third) << third.error().message();
  (void)second->release();
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::would_block);
  std::tie(s, ec) = a.inspect();
  EXPECT_EQ(s.available, 1);
  EXPECT_EQ(s.tokens, 0);
  EXPECT_GT(third->fencing_token(), 0);
  // The next token is less than a minute away (the first was taken a moment ago), and nearer at each look: what
  // `admit run` counts down while it waits for the rate (it showed the whole interval, unchanged).
  EXPECT_GT(s.next_token, 0s);
  EXPECT_LE(s.next_token, 60s);
  const auto [later, later_ec] = a.inspect();
  ASSERT_FALSE(later_ec) << later_ec.message();
  EXPECT_LE(later.next_token, s.next_token);
}

// A semaphore's call reads the rate's and the classes' fields only when its stored definition names a rate or classes.
// One made by an older admit kept no definition: its rate must still be read, and kept.
TEST(RedisAdmission, ARateStoredWithoutADefinitionIsStillTheRate) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "older", slow(/*burst=*/2, /*max_in_flight=*/4));
  auto first = a.try_acquire(0);
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(server.admin({"HDEL", "{older}:meta", "definition"}), "1");
  auto second = a.try_acquire(0);
  ASSERT_TRUE(second) << second.error().message();
  // Two permits free, no token left: the rate decides, as the fields say.
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::would_block);
  const auto [s, ec] = a.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(s.tokens, 0);
  EXPECT_EQ(s.burst, 2);
  EXPECT_EQ(s.available, 2);
}

TEST(RedisAdmission, TheNextTokenIsSetWhileTheBucketIsShortAndZeroWithoutARate) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "full", slow(/*burst=*/3, /*max_in_flight=*/2));
  auto held = a.try_acquire(0);  // makes the admission; one of its 3 tokens taken
  ASSERT_TRUE(held) << held.error().message();
  auto [s, ec] = a.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(s.tokens, 2);
  EXPECT_GT(s.next_token, 0s);
  admission none(conn, "none", admission_options{.max_in_flight = 2});
  ASSERT_TRUE(none.try_acquire(0));
  std::tie(s, ec) = none.inspect();
  EXPECT_EQ(s.next_token, 0s);  // no rate
}

TEST(RedisAdmission, ARequestTheRateCannotAdmitByItsDeadlineFailsAtOnceAndTakesNothing) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "deadline", slow(1, 4));
  auto held = a.try_acquire(0);
  ASSERT_TRUE(held);
  // The next token comes in a minute: a wait of 30 s cannot be admitted, and is refused without waiting for it.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(a.try_acquire_for(30s, 0).error(), admit::errc::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_EQ(waiter_count(a), 0);
  const auto [s, ec] = a.inspect();
  EXPECT_EQ(s.available, 3);
}

// A deadline already passed does not wait: one call decides, as the local admission's "only admits at once" — the
// tokens and a permit there now: admitted; the bucket empty: errc::timeout, nothing queued. (It timed out without
// asking Redis, also with the bucket full and every permit free.)
TEST(RedisAdmission, ADeadlineAlreadyPassedAdmitsWhatTheRateAndThePermitsGiveNow) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "passed", slow(1, 4));
  const auto past = std::chrono::steady_clock::now() - 1s;
  auto first = a.try_acquire_until(past, 0);
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(a.try_acquire_until(past, 0).error(), admit::errc::timeout);  // the next token comes in a minute
  EXPECT_EQ(waiter_count(a), 0);
}

TEST(RedisAdmission, ARequestWaitingForTheRateHoldsNoPermit) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "holds-nothing", slow(1, 2));
  auto held = a.try_acquire(0);
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return a.acquire(stop.get_token(), 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(a) == 1; }));
  const auto [s, ec] = a.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(s.holder_count, 1);  // only the first: the waiter holds nothing while the rate holds it back
  EXPECT_EQ(s.available, 1);
  // A try_acquire does not overtake it, although a permit is free.
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::would_block);
  stop.request_stop();
  EXPECT_EQ(waiting.get().error(), admit::errc::cancelled);
  EXPECT_EQ(waiter_count(a), 0);
}

TEST(RedisAdmission, TheRateAdmitsWaitersInArrivalOrderAcrossObjects) {
  redis_server server;
  io_thread io;
  connection c1(io.executor(), server.url());
  connection c2(io.executor(), server.url());
  // A token every 20 ms, one at a time: each waiter asks again at its tokens' time (no release wakes it), and the call
  // that finds them there admits it. The poll interval, the backstop, is longer than the waits may take.
  const admission_options limits{.rate = admit::rate::every(20ms), .burst = 1};
  const admit::redis::semaphore_options options{.poll_interval = 30s};
  admission a(c1, "order", limits, options), b(c2, "order", limits, options);
  auto first = a.try_acquire(0);
  ASSERT_TRUE(first);
  // Each waiter queues once the one before it has queued (or been admitted); the fencing tokens say the grant order.
  std::vector<std::future<std::int64_t>> runs;
  std::atomic<int> admitted{0};
  for (int i = 0; i < 6; ++i) {
    admission& by = i % 2 == 0 ? a : b;
    runs.push_back(std::async(std::launch::async, [&by, &admitted] {
      auto l = by.try_acquire_for(20s, 0);
      ++admitted;
      return l ? l->fencing_token() : std::int64_t{-1};
    }));
    ASSERT_TRUE(eventually([&] { return admitted + waiter_count(a) == i + 1; }));
  }
  std::vector<std::int64_t> tokens;
  for (auto& r : runs) tokens.push_back(r.get());
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_GT(tokens[i], tokens[i - 1]) << "waiter " << i;
  EXPECT_GT(tokens.front(), first->fencing_token());
}

TEST(RedisAdmission, AReleaseHandsTheFreedPermitToTheHeadWhenItsTokensAreThere) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "handoff", slow(/*burst=*/2, /*max_in_flight=*/1), {.poll_interval = 10s});
  auto held = a.try_acquire(0);
  ASSERT_TRUE(held);
  auto waiting = std::async(std::launch::async, [&] { return a.try_acquire_for(20s, 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(a) == 1; }));
  (void)held->release();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);  // by the release's hand-off, not a poll (10 s)
  auto l = waiting.get();
  ASSERT_TRUE(l) << l.error().message();
  const auto [s, ec] = a.inspect();
  EXPECT_EQ(s.tokens, 0);
}

// A rate set while requests wait for permits: their permits count as the tokens ahead of the next request, whose
// deadline the rate then cannot meet (one token now, the next in a minute).
TEST(RedisAdmission, ARateSetWhileRequestsWaitCountsTheirTokens) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "rate-later", {.max_in_flight = 1});
  auto held = a.try_acquire(0);
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return a.acquire(stop.get_token(), 0); });
  ASSERT_TRUE(eventually([&] { return waiter_count(a) == 1; }));
  ASSERT_FALSE(a.set_limits(slow(/*burst=*/1, /*max_in_flight=*/1)));
  auto late = std::async(std::launch::async, [&] { return a.try_acquire_for(30s, 0); });
  ASSERT_EQ(late.wait_for(10s), std::future_status::ready);  // refused at once, not after 30 s
  EXPECT_EQ(late.get().error(), admit::errc::timeout);
  stop.request_stop();
  EXPECT_EQ(waiting.get().error(), admit::errc::cancelled);
}

TEST(RedisAdmission, ATooLargeRequestIsRefusedByTheBurstOrTheLimit) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "large", slow(/*burst=*/2, /*max_in_flight=*/5));
  EXPECT_EQ(a.try_acquire(0, 3).error(), admit::errc::exceeds_capacity);  // above the burst
  EXPECT_EQ(a.try_acquire_for(1s, 0, 3).error(), admit::errc::exceeds_capacity);
  admission unlimited(conn, "unlimited", {.rate = admit::rate::parse("1/min"), .burst = 3});
  auto l = unlimited.try_acquire(0, 3);
  ASSERT_TRUE(l) << l.error().message();
  const auto [s, ec] = unlimited.inspect();
  EXPECT_EQ(admit::redis::describe(s), "rate 1/min, burst 3, no concurrency limit");
  admission permits_only(conn, "permits", {.max_in_flight = 2});
  EXPECT_EQ(permits_only.try_acquire(0, 3).error(), admit::errc::exceeds_capacity);
  EXPECT_TRUE(permits_only.try_acquire(0, 2));
}

TEST(RedisAdmission, AnotherDefinitionIsRefusedUntilSetLimitsChangesIt) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "defined", slow(2, 4));
  ASSERT_TRUE(a.try_acquire(0));
  admission b(conn, "defined", slow(5, 4));
  EXPECT_EQ(b.try_acquire(0).error(), admit::errc::definition_conflict);
  EXPECT_EQ(b.try_acquire_for(1s, 0).error(), admit::errc::definition_conflict);
  const auto [stored, ec] = b.inspect();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(admit::redis::describe(stored), "rate 1/min, burst 2, max_in_flight 4");
  EXPECT_EQ(admit::redis::describe(b.limits()), "rate 1/min, burst 5, max_in_flight 4");
  ASSERT_FALSE(b.set_limits(slow(5, 4)));
  // The bucket keeps its one token (the new burst is larger): b takes it; a now asks with an old definition.
  EXPECT_TRUE(b.try_acquire(0));
  EXPECT_EQ(b.try_acquire(0).error(), admit::errc::would_block);
  EXPECT_EQ(a.try_acquire(0).error(), admit::errc::definition_conflict);
  // Without a rate too (the script's short way for a free permit checks the definition as well).
  admission five(conn, "permits", {.max_in_flight = 5});
  ASSERT_TRUE(five.try_acquire(0));
  admission one(conn, "permits", {.max_in_flight = 1});
  EXPECT_EQ(one.try_acquire(0).error(), admit::errc::definition_conflict);
  // A semaphore of the same name keeps the stored definition, the rate included: one limit, one implementation.
  admit::redis::semaphore s(conn, "defined", 100);
  EXPECT_EQ(s.try_acquire().error(), admit::errc::would_block);
}

// set_limits_until gives up by its deadline when Redis does not answer (errc::timeout; set_limits waits for the
// semaphore's call timeout, 5 s here, or for Redis's answer once its 1 s pause ends), and this object keeps asking
// with its old definition.
TEST(RedisAdmission, SetLimitsUntilADeadlineEndsByItWhenRedisDoesNotAnswer) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  admission a(conn, "deadline", slow(2, 4), {.timeout = 5s});
  ASSERT_TRUE(a.try_acquire(0));
  server.pause(1000ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(a.set_limits_until(slow(3, 4), start + 200ms), admit::errc::timeout);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 900ms);
  EXPECT_EQ(admit::redis::describe(a.limits()), "rate 1/min, burst 2, max_in_flight 4");
  // Answered in time (once the pause is over), it is the definition (the call above may or may not have reached Redis:
  // it is made again).
  ASSERT_FALSE(a.set_limits_until(slow(3, 4), std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(admit::redis::describe(a.limits()), "rate 1/min, burst 3, max_in_flight 4");
}

TEST(RedisAdmission, BadLimitsAndWhatIsNotSupportedAreRefusedByName) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const auto refused = [&](admission_options o, const std::string& says) {
    try {
      admission a(conn, "refused", std::move(o));
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({.max_in_flight = 4, .classes = {{"interactive", 0.7}, {"batch", 0.5}}}, "shares must sum to at most 1");
  refused({.rate = admit::rate::per_second(10), .burst = 0}, "burst must be at least 1");
  refused({.rate = admit::rate::per_second(0), .burst = 1}, "must not be zero");
  refused({.max_in_flight = -1}, "max_in_flight must be in [0, 2^50]");
  refused({.max_in_flight = 1, .on_admitted = [](const admit::admission_event&) {}}, "on_admitted");
  admission a(conn, "priorities", {.max_in_flight = 1});
  EXPECT_THROW((void)a.try_acquire(1), std::invalid_argument);
  EXPECT_THROW((void)a.try_acquire(0, 0), std::invalid_argument);
}

}  // namespace
