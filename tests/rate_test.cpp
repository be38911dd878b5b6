// Tests of admit/rate.hpp: construction, parsing, formatting, and the invalid inputs that must throw naming the value.
#include "admit/rate.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "admit/testing/invalid_argument_message.hpp"

namespace {

using namespace std::chrono_literals;
using admit::rate;
using admit::testing::invalid_argument_message;

void expect_invalid(const std::string& text) {
  const std::string message = invalid_argument_message([&] { (void)rate::parse(text); });
  EXPECT_NE(message.find("\"" + text + "\""), std::string::npos) << "parse(\"" << text << "\"): " << message;
}

TEST(Rate, PerSecondAndEveryAgree) {
  EXPECT_EQ(rate::per_second(100), rate::every(10ms));
  EXPECT_DOUBLE_EQ(rate::per_second(100).interval_ns(), 1e7);
  EXPECT_DOUBLE_EQ(rate::every(2s).per_second(), 0.5);
  EXPECT_EQ(rate::per(5, 500ms), rate::per_second(10));
}

TEST(Rate, ZeroIsValidAndNeverRefills) {
  const rate zero = rate::per_second(0);
  EXPECT_TRUE(zero.is_zero());
  EXPECT_EQ(zero, rate{});
  EXPECT_EQ(zero.per_second(), 0);
  EXPECT_EQ(zero.tokens_for(1h), 0);
  EXPECT_EQ(rate::parse("0/s"), zero);
}

TEST(Rate, InfinityAdmitsEverything) {
  EXPECT_TRUE(rate::inf().is_inf());
  EXPECT_TRUE(rate::parse("inf").is_inf());
  EXPECT_TRUE(rate::per_second(std::numeric_limits<double>::infinity()).is_inf());
  EXPECT_TRUE(rate::every(0s).is_inf());
  EXPECT_EQ(rate::inf().duration_for(1e9), 0ns);
  EXPECT_GT(rate::inf(), rate::per_second(1e12));
}

TEST(Rate, ParsesEveryDocumentedUnit) {
  EXPECT_EQ(rate::parse("100/s"), rate::per_second(100));
  EXPECT_EQ(rate::parse("2/ms"), rate::per_second(2000));
  EXPECT_EQ(rate::parse("30/min"), rate::per_second(0.5));
  EXPECT_EQ(rate::parse("3600/h"), rate::per_second(1));
  EXPECT_EQ(rate::parse("5/500ms"), rate::per_second(10));
  EXPECT_EQ(rate::parse("1/10s"), rate::per_second(0.1));
  EXPECT_EQ(rate::parse("2.5/s"), rate::per_second(2.5));
  EXPECT_EQ(rate::parse("1/us"), rate::per_second(1e6));
}

// The units of Envoy's rate limit service, in its spelling and in short: month = 30 days, year = 365 days.
TEST(Rate, ParsesDaysWeeksMonthsYearsAndSpelledOutUnits) {
  constexpr double day_s = 86400;
  EXPECT_EQ(rate::parse("100/day"), rate::per(100, std::chrono::hours(24)));
  EXPECT_EQ(rate::parse("100/d"), rate::parse("100/day"));
  EXPECT_EQ(rate::parse("100/DAY"), rate::parse("100/day"));
  EXPECT_EQ(rate::parse("5/hour"), rate::parse("5/h"));
  EXPECT_EQ(rate::parse("5/HOUR"), rate::parse("5/h"));
  EXPECT_EQ(rate::parse("100/second"), rate::per_second(100));
  EXPECT_EQ(rate::parse("100/SECOND"), rate::per_second(100));
  EXPECT_EQ(rate::parse("100/minute"), rate::parse("100/min"));
  EXPECT_EQ(rate::parse("100/MINUTE"), rate::parse("100/min"));
  EXPECT_DOUBLE_EQ(rate::parse("1/week").interval_ns(), 7 * day_s * 1e9);
  EXPECT_DOUBLE_EQ(rate::parse("1/WEEK").interval_ns(), 7 * day_s * 1e9);
  EXPECT_DOUBLE_EQ(rate::parse("1/month").interval_ns(), 30 * day_s * 1e9);
  EXPECT_DOUBLE_EQ(rate::parse("1/year").interval_ns(), 365 * day_s * 1e9);
  EXPECT_DOUBLE_EQ(rate::parse("1/YEAR").interval_ns(), 365 * day_s * 1e9);
  EXPECT_EQ(rate::parse("2/2day"), rate::parse("1/day"));
  for (const char* bad : {"1/Day", "1/days", "1/weeks", "1/w", "1/mo", "1/y", "1/fortnight"}) expect_invalid(bad);
}

// Rates print in a readable unit that parses back: per day, or one per a whole number of ms, not "1/70000000ns".
TEST(Rate, ToStringIsReadable) {
  EXPECT_EQ(rate::parse("100/day").to_string(), "100/d");
  EXPECT_EQ(rate::parse("1/70ms").to_string(), "1/70ms");
  EXPECT_EQ(rate::parse("1/1500ms").to_string(), "40/min");
  EXPECT_EQ(rate::parse("1/7s").to_string(), "1/7s");
  EXPECT_EQ(rate::parse("1/13min").to_string(), "1/13min");
  EXPECT_EQ(rate::parse("1/7ns").to_string(), "1/7ns");
  // Slower than the whole hours: Envoy's long units (10/year printed as 0.0000003170979198376459/s).
  EXPECT_EQ(rate::parse("10/year").to_string(), "10/year");
  EXPECT_EQ(rate::parse("1/year").to_string(), "1/year");
  EXPECT_EQ(rate::parse("7/MONTH").to_string(), "7/month");
  EXPECT_EQ(rate::parse("1/week").to_string(), "1/168h");
}

TEST(Rate, RejectsMalformedInputNamingIt) {
  for (const char* bad : {"", "100", "100/", "/s", "-1/s", "abc/s", "1/sec", "1/0s", "nan/s", "1e3/s", "1/ 1s", " 1/s",
                          "+1/s", "1/s ", "inf/s", "1/-5ms", "1//s"}) {
    expect_invalid(bad);
  }
  // A negative count is a number, and says the range (it said "the count is not a number").
  const std::string negative = invalid_argument_message([] { (void)rate::parse("-3/s"); });
  EXPECT_NE(negative.find("the count must be finite and >= 0"), std::string::npos) << negative;
  // Every unit is named, not five of them (a user of "1/sec" learns that "second" is accepted).
  const std::string unit = invalid_argument_message([] { (void)rate::parse("1/sec"); });
  EXPECT_NE(unit.find("unknown time unit"), std::string::npos) << unit;
  for (const char* named : {"ns", "us", "second", "minute", "hour", "day", "week", "month", "year", "inf"}) {
    EXPECT_NE(unit.find(named), std::string::npos) << named << ": " << unit;
  }
  const std::string exponent = invalid_argument_message([] { (void)rate::parse("1e3/s"); });
  EXPECT_NE(exponent.find("not a plain decimal number"), std::string::npos) << exponent;
}

// Found by fuzz/rate_parse_fuzz: a count of 1e300 per ns parsed to an interval of 1e-306 ns that printed as "inf/s".
TEST(Rate, RatesAbove1e18PerSecondAreRefused) {
  EXPECT_THROW((void)rate::parse("77504888888888888888888888888/ns"), std::invalid_argument);
  EXPECT_THROW((void)rate::per_second(2e18), std::invalid_argument);
  EXPECT_THROW((void)rate::per(1e30, std::chrono::seconds(1)), std::invalid_argument);
  EXPECT_EQ(rate::per_second(1e18).interval_ns(), 1e-9);
  EXPECT_EQ(rate::parse(rate::per_second(1e18).to_string()), rate::per_second(1e18));
}

TEST(Rate, NegativeOrNanThrowsNamingTheValue) {
  const std::string message = invalid_argument_message([] { (void)rate::per_second(-2.5); });
  EXPECT_NE(message.find("-2.5"), std::string::npos) << message;
  EXPECT_THROW((void)rate::per_second(std::nan("")), std::invalid_argument);
  EXPECT_THROW((void)rate::every(-1ms), std::invalid_argument);
  EXPECT_THROW((void)rate::per(-1, 1s), std::invalid_argument);
  EXPECT_THROW((void)rate::per(1, 0s), std::invalid_argument);
}

TEST(Rate, ToStringRoundTripsThroughParse) {
  for (const char* text : {"100/s", "5/min", "7/h", "3/ms", "inf", "0/s", "1/1500ms", "2.5/s"}) {
    const rate r = rate::parse(text);
    EXPECT_EQ(rate::parse(r.to_string()), r) << text << " -> " << r.to_string();
  }
  EXPECT_EQ(rate::parse("100/s").to_string(), "100/s");
  EXPECT_EQ(rate::parse("60/min").to_string(), "1/s");
  EXPECT_EQ(rate::parse("5/500ms").to_string(), "10/s");
}

// Found by fuzz/rate_parse_fuzz: to_string() printed "1e+06/s", which parse() refuses.
TEST(Rate, ToStringNeverUsesScientificNotation) {
  for (const char* text : {"1000000/s", "3/2ns", "1/1499ms", "1/3s", "7/9h", "123456789/ms"}) {
    const rate r = rate::parse(text);
    const std::string shown = r.to_string();
    EXPECT_EQ(shown.find('e'), std::string::npos) << text << " -> " << shown;
    EXPECT_EQ(rate::parse(shown), r) << text << " -> " << shown;
  }
}

// Found by fuzz/rate_parse_fuzz: "1111.01/0550000001s" printed as a count per second that parses back one ulp away
// (no count parses back to that interval exactly), and the result printed in another form. The round trip is exact
// to the last bits, and after one round trip it is a fixed point.
TEST(Rate, ToStringRoundTripsToAFixedPoint) {
  for (const char* text : {"1111.01/0550000001s", "3/7s", "1/3h", "0.1/9ms", "123.456/789min"}) {
    const rate r = rate::parse(text);
    const rate back = rate::parse(r.to_string());
    EXPECT_NEAR(back.interval_ns(), r.interval_ns(), 1e-15 * r.interval_ns()) << text << " -> " << r.to_string();
    EXPECT_EQ(rate::parse(back.to_string()), back) << text;
    EXPECT_EQ(back.to_string(), rate::parse(back.to_string()).to_string()) << text;
  }
}

TEST(Rate, MessagesEscapeUnprintableInput) {
  const std::string message = invalid_argument_message([] { (void)rate::parse(std::string_view("1\0/s", 4)); });
  EXPECT_NE(message.find("1\\x00/s"), std::string::npos) << message;
}

TEST(Rate, DurationsRoundUpSoLimitersNeverOverAdmit) {
  const rate three = rate::per_second(3);
  EXPECT_EQ(three.duration_for(1), 333'333'334ns);
  EXPECT_EQ(three.duration_for(3), 1s);
  EXPECT_EQ(rate{}.duration_for(1), std::chrono::nanoseconds::max());
  EXPECT_DOUBLE_EQ(three.tokens_for(1s), 3.0);
}

}  // namespace
