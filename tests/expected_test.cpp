// admit::expected: the result type shared by every call that can fail in an expected way.
#include "admit/expected.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "admit/acquire_result.hpp"
#include "admit/errc.hpp"

namespace {

using int_result = admit::expected<int, admit::errc>;
using move_only_result = admit::expected<std::unique_ptr<int>, std::error_code>;

static_assert(std::is_same_v<admit::acquire_result, admit::expected<admit::permit, admit::errc>>);
static_assert(std::is_copy_constructible_v<int_result> && std::is_copy_assignable_v<int_result>);
static_assert(!std::is_copy_constructible_v<move_only_result> &&
              std::is_nothrow_move_constructible_v<move_only_result>);
static_assert(!std::is_convertible_v<int_result, bool>);  // operator bool is explicit
static_assert(std::is_convertible_v<admit::errc, int_result> && std::is_convertible_v<int, int_result>);
static_assert(std::is_convertible_v<admit::errc, move_only_result>);  // an errc becomes a std::error_code

TEST(Expected, HoldsTheValueAndReportsNoError) {
  int_result r = 7;
  EXPECT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.error(), admit::errc{});
  *r = 8;
  EXPECT_EQ(std::as_const(r).value(), 8);
}

TEST(Expected, HoldsTheErrorAndValueThrowsItAsSystemError) {
  int_result r = admit::errc::timeout;
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error(), admit::errc::timeout);
  try {
    (void)r.value();
    FAIL() << "value() of an error did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), admit::errc::timeout);
  }
  EXPECT_THROW((void)std::as_const(r).value(), std::system_error);
  EXPECT_THROW((void)std::move(r).value(), std::system_error);
}

TEST(Expected, ErrorCodeErrorAcceptsAnErrcAndThrowsTheSameCode) {
  move_only_result r = admit::errc::queue_full;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), admit::errc::queue_full);
  EXPECT_EQ(r.error().category(), admit::error_category());
  try {
    (void)r.value();
    FAIL() << "value() of an error did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), admit::errc::queue_full);
  }
  move_only_result io = std::make_error_code(std::errc::connection_refused);
  EXPECT_EQ(io.error(), std::errc::connection_refused);
  EXPECT_EQ(move_only_result(std::make_unique<int>(1)).error(), std::error_code{});
}

// admit's codes that have a portable condition compare equal to it, so that generic code that tests std::errc sees
// them; the others compare equal to none. The code itself still says admit's own words and compares as its errc.
TEST(Expected, AdmitCodesMatchTheirPortableConditions) {
  const std::error_code timeout = admit::errc::timeout;
  EXPECT_EQ(timeout, std::errc::timed_out);
  EXPECT_EQ(timeout, admit::errc::timeout);
  EXPECT_EQ(timeout.message(), "timed out");
  EXPECT_EQ(std::error_code(admit::errc::connect_timeout), std::errc::timed_out);
  EXPECT_EQ(std::error_code(admit::errc::cancelled), std::errc::operation_canceled);
  EXPECT_EQ(std::error_code(admit::errc::would_block), std::errc::operation_would_block);
  EXPECT_EQ(std::error_code(admit::errc::connection_refused), std::errc::connection_refused);
  EXPECT_EQ(std::error_code(admit::errc::connection_lost), std::errc::connection_reset);
  EXPECT_NE(std::error_code(admit::errc::queue_full), std::errc::timed_out);
  EXPECT_NE(std::error_code(admit::errc::queue_full), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(std::error_code(admit::errc::queue_full).default_error_condition().category(), admit::error_category());
}

TEST(Expected, MovesTheValueOutAndArrowReachesIt) {
  move_only_result r = std::make_unique<int>(5);
  ASSERT_TRUE(r);
  EXPECT_EQ(**r, 5);
  EXPECT_EQ(*r->get(), 5);
  std::unique_ptr<int> out = std::move(r).value();
  EXPECT_EQ(*out, 5);

  struct point {
    int x;
  };
  const admit::expected<point, admit::errc> p = point{3};
  EXPECT_EQ(p->x, 3);
}

TEST(Expected, AssignmentReplacesValueWithErrorAndBack) {
  auto counter = std::make_shared<int>(0);
  admit::expected<std::shared_ptr<int>, admit::errc> r = counter;
  EXPECT_EQ(counter.use_count(), 2);
  r = admit::errc::closed;  // destroys the held value
  EXPECT_EQ(counter.use_count(), 1);
  EXPECT_EQ(r.error(), admit::errc::closed);
  r = counter;
  EXPECT_EQ(counter.use_count(), 2);
  auto copy = r;
  EXPECT_EQ(counter.use_count(), 3);
  copy = admit::errc::timeout;
  EXPECT_EQ(counter.use_count(), 2);
  copy = std::move(r);
  EXPECT_EQ(counter.use_count(), 2);
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->get(), counter.get());
}

// expected<void, E>: success by default, a failure from an E; value() throws the error; copies and assigns.
TEST(Expected, VoidIsSuccessOrAnError) {
  admit::expected<void, admit::errc> ok;
  EXPECT_TRUE(ok);
  EXPECT_TRUE(ok.has_value());
  EXPECT_EQ(ok.error(), admit::errc{});
  EXPECT_NO_THROW(ok.value());

  admit::expected<void, admit::errc> full = admit::errc::queue_full;
  EXPECT_FALSE(full);
  EXPECT_EQ(full.error(), admit::errc::queue_full);
  try {
    full.value();
    ADD_FAILURE() << "value() of an error did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::error_code(admit::errc::queue_full));
  }
  ok = full;
  EXPECT_EQ(ok.error(), admit::errc::queue_full);

  const admit::expected<void, std::error_code> code = admit::errc::timeout;  // any error code enum converts
  EXPECT_EQ(code.error(), std::error_code(admit::errc::timeout));
}

}  // namespace
