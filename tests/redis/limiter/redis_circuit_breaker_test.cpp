// admit::redis::circuit_breaker with explicit times: opens after the threshold of consecutive failures, refuses while
// open, lets exactly one probe through after open_for, closes on the probe's success and reopens on its failure.
#include "admit/redis/circuit_breaker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/error.hpp>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"

namespace {

using namespace std::chrono_literals;
using admit::errc;
using admit::redis::breaker_change;
using admit::redis::breaker_pass;
using admit::redis::breaker_state;
using admit::redis::circuit_breaker;
using tp = circuit_breaker::clock::time_point;

constexpr tp breaker_at(std::chrono::milliseconds ms) { return tp{ms}; }

TEST(RedisCircuitBreaker, OpensAfterTheThresholdOfConsecutiveFailures) {
  circuit_breaker b({.failure_threshold = 3, .open_for = 1s});
  EXPECT_EQ(b.allow(breaker_at(0ms)), breaker_pass::call);
  EXPECT_FALSE(b.on_failure(breaker_at(0ms), breaker_pass::call));
  EXPECT_FALSE(b.on_failure(breaker_at(1ms), breaker_pass::call));
  EXPECT_FALSE(b.on_success());  // a success in between resets the count
  EXPECT_FALSE(b.on_failure(breaker_at(2ms), breaker_pass::call));
  EXPECT_FALSE(b.on_failure(breaker_at(3ms), breaker_pass::call));
  EXPECT_EQ(b.state(breaker_at(3ms)), breaker_state::closed);
  EXPECT_TRUE(b.on_failure(breaker_at(4ms), breaker_pass::call));   // the third in a row opens it
  EXPECT_FALSE(b.on_failure(breaker_at(5ms), breaker_pass::call));  // already open: reported once
  EXPECT_EQ(b.state(breaker_at(5ms)), breaker_state::open);
  EXPECT_EQ(b.allow(breaker_at(5ms)), breaker_pass::refused);
  EXPECT_EQ(b.allow(breaker_at(1003ms)), breaker_pass::refused);  // open_for counts from the opening failure
}

TEST(RedisCircuitBreaker, OneProbeAfterOpenForThenCloseOnSuccess) {
  circuit_breaker b({.failure_threshold = 1, .open_for = 100ms});
  EXPECT_TRUE(b.on_failure(breaker_at(0ms), breaker_pass::call));
  EXPECT_EQ(b.allow(breaker_at(99ms)), breaker_pass::refused);
  EXPECT_EQ(b.allow(breaker_at(100ms)), breaker_pass::probe);
  EXPECT_EQ(b.allow(breaker_at(100ms)), breaker_pass::refused);  // only one probe at a time
  EXPECT_EQ(b.allow(breaker_at(500ms)), breaker_pass::refused);
  EXPECT_EQ(b.state(breaker_at(500ms)), breaker_state::half_open);
  EXPECT_TRUE(b.on_success());  // the probe answered: closed
  EXPECT_EQ(b.state(breaker_at(500ms)), breaker_state::closed);
  EXPECT_EQ(b.allow(breaker_at(500ms)), breaker_pass::call);
  EXPECT_FALSE(b.on_success());
}

TEST(RedisCircuitBreaker, AFailedProbeReopensForAnotherOpenFor) {
  circuit_breaker b({.failure_threshold = 2, .open_for = 100ms});
  b.on_failure(breaker_at(0ms), breaker_pass::call);
  ASSERT_TRUE(b.on_failure(breaker_at(0ms), breaker_pass::call));
  ASSERT_EQ(b.allow(breaker_at(150ms)), breaker_pass::probe);
  EXPECT_FALSE(b.on_failure(breaker_at(160ms), breaker_pass::probe));  // reopened, not "opened" again
  EXPECT_EQ(b.state(breaker_at(161ms)), breaker_state::open);
  EXPECT_EQ(b.allow(breaker_at(259ms)), breaker_pass::refused);
  EXPECT_EQ(b.allow(breaker_at(260ms)), breaker_pass::probe);
  b.cancel_probe();  // the probe was cancelled: another may go
  EXPECT_EQ(b.allow(breaker_at(261ms)), breaker_pass::probe);
}

TEST(RedisCircuitBreaker, OnlyOutagesCountAgainstIt) {
  using admit::redis::is_outage;
  EXPECT_TRUE(is_outage(make_error_code(errc::timeout)));
  EXPECT_TRUE(is_outage(make_error_code(errc::outcome_unknown)));
  EXPECT_TRUE(is_outage(make_error_code(errc::connection_refused)));
  EXPECT_TRUE(is_outage(make_error_code(errc::connection_lost)));
  EXPECT_TRUE(is_outage(admit::asio::from_error_code(boost::asio::error::connection_refused)));
  EXPECT_FALSE(is_outage({}));
  EXPECT_FALSE(is_outage(make_error_code(errc::error_reply)));  // Redis answered
  EXPECT_FALSE(is_outage(make_error_code(errc::unexpected_reply)));
  EXPECT_FALSE(is_outage(make_error_code(errc::circuit_open)));  // Redis was not called
  // Ended by the caller or by the connection's owner, in either error type.
  EXPECT_FALSE(is_outage(make_error_code(errc::cancelled)));
  EXPECT_FALSE(is_outage(make_error_code(errc::closed)));
  EXPECT_FALSE(is_outage(std::error_code(boost::system::error_code(boost::asio::error::operation_aborted))));
  EXPECT_FALSE(is_outage(std::error_code(admit::asio::to_error_code(errc::closed))));
}

TEST(RedisCircuitBreaker, ReportSaysWhatAnOutcomeDid) {
  circuit_breaker b({.failure_threshold = 2, .open_for = 100ms});
  EXPECT_EQ(b.report(make_error_code(errc::timeout), breaker_pass::call, breaker_at(0ms)), breaker_change::none);
  // An error reply is an answer: the consecutive count starts again.
  EXPECT_EQ(b.report(make_error_code(errc::error_reply), breaker_pass::call, breaker_at(0ms)), breaker_change::none);
  EXPECT_EQ(b.report(make_error_code(errc::timeout), breaker_pass::call, breaker_at(1ms)), breaker_change::none);
  EXPECT_EQ(b.report(make_error_code(errc::timeout), breaker_pass::call, breaker_at(1ms)), breaker_change::opened);
  EXPECT_EQ(b.allow(breaker_at(101ms)), breaker_pass::probe);
  EXPECT_EQ(b.report(make_error_code(errc::error_reply), breaker_pass::probe, breaker_at(102ms)),
            breaker_change::closed);
  EXPECT_EQ(b.allow(breaker_at(102ms)), breaker_pass::call);
}

// Every way a probe can end without an answer leaves the breaker able to probe again: a probe that stays "under way"
// for ever would refuse every later call.
TEST(RedisCircuitBreaker, AProbeEndedWithoutAnAnswerLetsTheNextCallerProbe) {
  const std::error_code endings[] = {make_error_code(errc::cancelled), make_error_code(errc::closed),
                                     std::error_code(boost::system::error_code(boost::asio::error::operation_aborted)),
                                     std::error_code(admit::asio::to_error_code(errc::closed))};
  for (const std::error_code& ending : endings) {
    circuit_breaker b({.failure_threshold = 1, .open_for = 100ms});
    ASSERT_EQ(b.report(make_error_code(errc::timeout), breaker_pass::call, breaker_at(0ms)), breaker_change::opened);
    ASSERT_EQ(b.allow(breaker_at(100ms)), breaker_pass::probe);
    EXPECT_EQ(b.allow(breaker_at(100ms)), breaker_pass::refused);
    EXPECT_EQ(b.report(ending, breaker_pass::probe, breaker_at(101ms)), breaker_change::none) << ending.message();
    EXPECT_EQ(b.allow(breaker_at(101ms)), breaker_pass::probe) << ending.message();
  }
}

TEST(RedisCircuitBreaker, ThresholdZeroNeverOpens) {
  circuit_breaker b({.failure_threshold = 0, .open_for = 1ms});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(b.on_failure(breaker_at(0ms), breaker_pass::call));
  EXPECT_EQ(b.allow(breaker_at(0ms)), breaker_pass::call);
}

TEST(RedisCircuitBreaker, InvalidOptionsNameTheValue) {
  try {
    circuit_breaker b({.failure_threshold = -1, .open_for = 1s});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(circuit_breaker({.failure_threshold = 1, .open_for = 0ns}), std::invalid_argument);
}

TEST(RedisCircuitBreaker, ConcurrentCallersGetExactlyOneProbe) {
  for (int round = 0; round < 200; ++round) {
    circuit_breaker b({.failure_threshold = 1, .open_for = 10ms});
    b.on_failure(breaker_at(0ms), breaker_pass::call);
    std::atomic<int> probes{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) {
          if (b.allow(breaker_at(20ms)) == breaker_pass::probe) probes.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(probes.load(), 1) << "round " << round;
  }
}

}  // namespace
