// Envoy's RateLimitRequest / RateLimitResponse to and from the engine's values (serve/grpc/rls_convert.hpp): each
// bound of request_limits at its edge, the refusals that name what is wrong, and the response's wire fields.
#include "serve/grpc/rls_convert.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace admit::serve {
namespace {

rls_pb::RateLimitRequest request(int descriptors, int entries = 1, std::size_t value_bytes = 1) {
  rls_pb::RateLimitRequest r;
  r.set_domain("rl");
  for (int d = 0; d < descriptors; ++d) {
    auto* desc = r.add_descriptors();
    for (int e = 0; e < entries; ++e) {
      auto* entry = desc->add_entries();
      entry->set_key(std::string("k").append(std::to_string(e)));
      entry->set_value(std::string(value_bytes, 'v'));
    }
  }
  return r;
}

std::optional<std::string> convert(const rls_pb::RateLimitRequest& in, rls_request& out,
                                   const request_limits& limits = {}) {
  return from_proto(in, limits, out);
}

TEST(RlsConvert, CopiesTheRequest) {
  rls_pb::RateLimitRequest in = request(2, 2);
  in.set_hits_addend(3);
  in.mutable_descriptors(1)->mutable_limit()->set_requests_per_unit(42);
  in.mutable_descriptors(1)->mutable_limit()->set_unit(::envoy::type::v3::HOUR);
  in.mutable_descriptors(1)->mutable_hits_addend()->set_value(0);
  rls_request out;
  ASSERT_EQ(convert(in, out), std::nullopt);
  EXPECT_EQ(out.domain, "rl");
  EXPECT_EQ(out.hits_addend, 3U);
  ASSERT_EQ(out.descriptors.size(), 2U);
  EXPECT_EQ(out.descriptors[0].entries[1].key, "k1");
  EXPECT_EQ(out.descriptors[0].entries[1].value, "v");
  EXPECT_FALSE(out.descriptors[0].limit.has_value());
  EXPECT_FALSE(out.descriptors[0].hits_addend.has_value());
  ASSERT_TRUE(out.descriptors[1].limit.has_value());
  EXPECT_EQ(out.descriptors[1].limit->requests_per_unit, 42U);
  EXPECT_EQ(out.descriptors[1].limit->per, unit::hour);
  // A descriptor's hits_addend of 0 is set (the wrapper is present), unlike an absent one.
  EXPECT_EQ(out.descriptors[1].hits_addend, std::optional<std::uint32_t>(0));
}

TEST(RlsConvert, AcceptsUpToTheBoundsAndRefusesOneMore) {
  const request_limits limits{.max_descriptors = 5, .max_entries = 3, .max_string_bytes = 8};
  rls_request out;
  EXPECT_EQ(convert(request(5, 3, 8), out, limits), std::nullopt);
  EXPECT_EQ(convert(request(6), out, limits), "the request has 6 descriptors; at most 5 are accepted in one request");
  EXPECT_EQ(convert(request(1, 4), out, limits),
            "descriptor 0 has 4 entries; at most 3 are accepted in one descriptor");
  EXPECT_EQ(convert(request(1, 1, 9), out, limits),
            "descriptor 0 entry 0: the value is 9 bytes long; at most 8 bytes are accepted");
  rls_pb::RateLimitRequest long_key = request(2);
  long_key.mutable_descriptors(1)->mutable_entries(0)->set_key(std::string(9, 'k'));
  EXPECT_EQ(convert(long_key, out, limits),
            "descriptor 1 entry 0: the key is 9 bytes long; at most 8 bytes are accepted");
  rls_pb::RateLimitRequest long_domain = request(1);
  long_domain.set_domain(std::string(9, 'd'));
  EXPECT_EQ(convert(long_domain, out, limits), "the domain is 9 bytes long; at most 8 bytes are accepted");
}

TEST(RlsConvert, TheDefaultBoundsLeaveRoomForEnvoy) {
  const request_limits limits;
  EXPECT_EQ(limits.max_descriptors, 1000U);
  EXPECT_EQ(limits.max_entries, 64U);
  EXPECT_EQ(limits.max_string_bytes, 4096U);
  rls_request out;
  EXPECT_EQ(convert(request(1000, 1, 4096), out), std::nullopt);
  EXPECT_NE(convert(request(1001), out), std::nullopt);
}

TEST(RlsConvert, RefusesWhatIsNotARequest) {
  rls_request out;
  rls_pb::RateLimitRequest no_domain = request(1);
  no_domain.clear_domain();
  EXPECT_EQ(convert(no_domain, out), "the request has no domain");
  EXPECT_EQ(convert(request(0), out), "the request has no descriptors");
  // A descriptor with no entries and an entry with an empty key are requests (envoyproxy/ratelimit answers them OK).
  EXPECT_EQ(convert(request(1, 0), out), std::nullopt);
  EXPECT_TRUE(out.descriptors.at(0).entries.empty());
  rls_pb::RateLimitRequest empty_key = request(1);
  empty_key.mutable_descriptors(0)->mutable_entries(0)->clear_key();
  EXPECT_EQ(convert(empty_key, out), std::nullopt);
  rls_pb::RateLimitRequest big_hits = request(1);
  big_hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(std::uint64_t{1} << 32);
  EXPECT_EQ(convert(big_hits, out), "descriptor 0: hits_addend 4294967296 is above the most accepted, 4294967295");
  big_hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(std::numeric_limits<std::uint32_t>::max());
  EXPECT_EQ(convert(big_hits, out), std::nullopt);
  rls_pb::RateLimitRequest bad_unit = request(1);
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_unit(static_cast<::envoy::type::v3::RateLimitUnit>(7));
  EXPECT_EQ(convert(bad_unit, out),
            "descriptor 0: the limit override's unit 7 is not one of SECOND (1), MINUTE, HOUR, DAY, MONTH, YEAR (6)");
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_unit(::envoy::type::v3::UNKNOWN);
  EXPECT_NE(convert(bad_unit, out), std::nullopt);
}

TEST(RlsConvert, WritesTheResponsesWireFields) {
  rls_response in;
  in.overall_code = rls_code::over_limit;
  in.statuses.push_back({rls_code::ok, std::nullopt, 0, std::nullopt});
  in.statuses.push_back({rls_code::over_limit, rls_current_limit{"per_week", 10, unit::week}, 0,
                         std::chrono::nanoseconds(1'500'000'000)});
  in.response_headers_to_add.push_back({"RateLimit-Limit", "10"});
  in.request_headers_to_add.push_back({"x-admit", "1"});
  rls_pb::RateLimitResponse out;
  to_proto(in, out);
  EXPECT_EQ(out.overall_code(), rls_pb::RateLimitResponse::OVER_LIMIT);
  ASSERT_EQ(out.statuses_size(), 2);
  EXPECT_EQ(out.statuses(0).code(), rls_pb::RateLimitResponse::OK);
  EXPECT_FALSE(out.statuses(0).has_current_limit());
  EXPECT_FALSE(out.statuses(0).has_duration_until_reset());
  const auto& s = out.statuses(1);
  EXPECT_EQ(s.code(), rls_pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(s.current_limit().name(), "per_week");
  EXPECT_EQ(s.current_limit().requests_per_unit(), 10U);
  EXPECT_EQ(s.current_limit().unit(), rls_pb::RateLimitResponse::RateLimit::WEEK);
  EXPECT_EQ(s.duration_until_reset().seconds(), 1);
  EXPECT_EQ(s.duration_until_reset().nanos(), 500'000'000);
  ASSERT_EQ(out.response_headers_to_add_size(), 1);
  EXPECT_EQ(out.response_headers_to_add(0).key(), "RateLimit-Limit");
  EXPECT_EQ(out.response_headers_to_add(0).value(), "10");
  ASSERT_EQ(out.request_headers_to_add_size(), 1);
  EXPECT_EQ(out.request_headers_to_add(0).key(), "x-admit");
}

}  // namespace
}  // namespace admit::serve
