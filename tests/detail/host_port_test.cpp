// admit::detail::host_port: "host:port" with an IPv6 literal in brackets, as every message and address of admit
// writes an endpoint.
#include "admit/detail/host_port.hpp"

#include <gtest/gtest.h>

namespace {

using admit::detail::host_port;

TEST(HostPort, NamesAndIpv4AsTheyAre) {
  EXPECT_EQ(host_port("127.0.0.1", 6379), "127.0.0.1:6379");
  EXPECT_EQ(host_port("redis.internal", 26379), "redis.internal:26379");
  EXPECT_EQ(host_port("localhost", 0), "localhost:0");
}

TEST(HostPort, Ipv6InBracketsOnce) {
  EXPECT_EQ(host_port("::1", 6379), "[::1]:6379");
  EXPECT_EQ(host_port("fe80::1%eth0", 8081), "[fe80::1%eth0]:8081");
  EXPECT_EQ(host_port("[::1]", 6379), "[::1]:6379");  // already bracketed: kept
}

}  // namespace
