// admit/asio/error_code.hpp and the one error vocabulary (admit/errc.hpp): every failure the library reports is an
// admit::errc of the "admit" category, with its own message, and crosses Asio's edge (boost::system::error_code)
// and back without losing what it is.
#include "admit/asio/error_code.hpp"

#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <set>
#include <string>
#include <system_error>

#include "admit/errc.hpp"

namespace {

using admit::errc;

constexpr int first_value = 1;
constexpr int last_value = static_cast<int>(errc::definition_conflict);

TEST(AdmitErrc, EveryValueHasItsOwnMessageInTheAdmitCategory) {
  std::set<std::string> messages;
  for (int v = first_value; v <= last_value; ++v) {
    const std::error_code ec = static_cast<errc>(v);
    EXPECT_STREQ(ec.category().name(), "admit");
    EXPECT_EQ(ec.message().find("unknown admit error"), std::string::npos) << v << " has no message";
    EXPECT_TRUE(messages.insert(ec.message()).second) << v << " repeats the message " << ec.message();
  }
  EXPECT_EQ(std::error_code(static_cast<errc>(last_value + 1)).message(),
            "unknown admit error " + std::to_string(last_value + 1));
}

TEST(AdmitErrc, MessagesSayWhatHappened) {
  EXPECT_EQ(std::error_code(errc::timeout).message(), "timed out");  // a wait's deadline or a Redis call's
  EXPECT_EQ(std::error_code(errc::closed).message(), "closed");      // a semaphore or a Redis connection
  EXPECT_EQ(std::error_code(errc::connection_refused).message(), "connection to redis refused");
  EXPECT_EQ(std::error_code(errc::circuit_open).message(), "circuit breaker open: redis was not called");
}

TEST(AsioErrorCode, AnAdmitErrcCrossesTheEdgeAndComesBackUnchanged) {
  for (int v = first_value; v <= last_value; ++v) {
    const auto e = static_cast<errc>(v);
    if (e == errc::cancelled) continue;  // below: Asio's own code
    const boost::system::error_code at_edge = admit::asio::to_error_code(e);
    EXPECT_EQ(at_edge, e) << v;  // a completion handler compares with admit::errc directly
    EXPECT_EQ(admit::asio::from_error_code(at_edge), std::error_code(e)) << v;
    EXPECT_EQ(admit::asio::to_error_code(std::error_code(e)), at_edge) << v;
  }
}

TEST(AsioErrorCode, CancelledIsAsiosOperationAbortedAtTheEdge) {
  EXPECT_EQ(admit::asio::to_error_code(errc::cancelled), boost::asio::error::operation_aborted);
  EXPECT_EQ(admit::asio::to_error_code(std::error_code(errc::cancelled)), boost::asio::error::operation_aborted);
  EXPECT_EQ(admit::asio::from_error_code(boost::asio::error::operation_aborted), errc::cancelled);
  // Without the helper, Boost's own conversion keeps the system category: it is std::errc::operation_canceled.
  const std::error_code converted = boost::system::error_code(boost::asio::error::operation_aborted);
  EXPECT_EQ(converted, std::errc::operation_canceled);
}

TEST(AsioErrorCode, SuccessAndForeignErrorsPassThrough) {
  EXPECT_FALSE(admit::asio::to_error_code(std::error_code{}));
  EXPECT_FALSE(admit::asio::to_error_code(errc{}));
  EXPECT_FALSE(admit::asio::from_error_code(boost::system::error_code{}));
  const std::error_code refused = admit::asio::from_error_code(boost::asio::error::connection_refused);
  EXPECT_EQ(refused, std::errc::connection_refused);
  EXPECT_NE(refused, errc::connection_refused);  // the system's code, not admit's reading of it
}

}  // namespace
