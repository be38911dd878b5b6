// How a failed name resolution is classified: a name that does not exist is unknown_host (waiting will not fix it), a
// resolver that could not answer now (EAI_AGAIN, EAI_FAIL) or any other failure is connection_failed (it may pass).
// Asio's own codes, as its resolver reports getaddrinfo's: a real EAI_AGAIN cannot be produced on demand.
#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include "admit/errc.hpp"
#include "admit/redis/client/connection.hpp"

namespace {

using admit::errc;
using admit::redis::detail::resolve_failure;
namespace error = boost::asio::error;

TEST(RedisResolveFailure, ANameThatDoesNotExistIsUnknownHost) {
  EXPECT_EQ(resolve_failure(error::host_not_found), errc::unknown_host);     // EAI_NONAME, EAI_NODATA
  EXPECT_EQ(resolve_failure(error::no_data), errc::unknown_host);            // gethostbyname's NO_DATA
  EXPECT_EQ(resolve_failure(error::service_not_found), errc::unknown_host);  // EAI_SERVICE
}

TEST(RedisResolveFailure, AResolverThatCannotAnswerNowIsTransient) {
  EXPECT_EQ(resolve_failure(error::host_not_found_try_again), errc::connection_failed);  // EAI_AGAIN
  EXPECT_EQ(resolve_failure(error::no_recovery), errc::connection_failed);               // EAI_FAIL
  EXPECT_EQ(resolve_failure(error::no_memory), errc::connection_failed);                 // EAI_MEMORY
  EXPECT_EQ(resolve_failure(boost::system::error_code(EIO, boost::system::system_category())),
            errc::connection_failed);  // EAI_SYSTEM
}

}  // namespace
