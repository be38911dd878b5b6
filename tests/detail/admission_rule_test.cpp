// admit::detail::admission_pick: the share rule of admit::admission on plain values — which head goes next.
#include "admit/detail/admission_rule.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "admit/rate.hpp"

namespace {

using admit::detail::admission_free;
using admit::detail::admission_head;
using admit::detail::admission_pick;

admission_head head(std::int64_t n, std::uint64_t arrival, bool permit_entitled, bool token_entitled) {
  admission_head h;
  h.present = true;
  h.n = n;
  h.arrival = arrival;
  h.permit_entitled = permit_entitled;
  h.token_entitled = token_entitled;
  return h;
}

// Permits only (infinite rate): `free_permits` free.
admission_free permits_only(std::int64_t free_permits, const admit::detail::token_bucket_config& inf) {
  return {true, free_permits, &inf, 0, 0};
}

TEST(AdmissionRule, TheEarliestArrivedAdmissibleHeadGoesFirst) {
  const auto inf = admit::detail::make_token_bucket_config(admit::rate::inf(), 0, 0);
  const std::vector<admission_head> heads{head(1, 5, true, true), head(1, 3, true, true), {}};
  EXPECT_EQ(admission_pick(heads, permits_only(2, inf)), 1u);
}

TEST(AdmissionRule, ABorrowerLeavesWhatEntitledHeadsClaim) {
  const auto inf = admit::detail::make_token_bucket_config(admit::rate::inf(), 0, 0);
  // The borrower (class 0) arrived first, but one free permit is all the entitled head (class 1) asks for.
  const std::vector<admission_head> heads{head(1, 1, false, true), head(1, 2, true, true)};
  EXPECT_EQ(admission_pick(heads, permits_only(1, inf)), 1u);
  EXPECT_EQ(admission_pick(heads, permits_only(2, inf)), 0u);  // enough for both: arrival order
  EXPECT_EQ(admission_pick(heads, permits_only(0, inf)), 2u);  // none: nobody
}

TEST(AdmissionRule, AgainstABorrowerAnEntitledClassClaimsWhatAllItsWaitersMayTake) {
  const auto inf = admit::detail::make_token_bucket_config(admit::rate::inf(), 0, 0);
  // Class 1 is entitled to 2 more permits and has 2 waiting: the borrower (class 0, first to arrive) gets none of 2.
  std::vector<admission_head> heads{head(1, 1, false, true), head(1, 2, true, true)};
  heads[1].permit_claim = 2;
  EXPECT_EQ(admission_pick(heads, permits_only(2, inf)), 1u);
  EXPECT_EQ(admission_pick(heads, permits_only(3, inf)), 0u);  // a surplus over the claim: arrival order
  // Against an entitled head that arrived earlier, only the later head's own n counts.
  heads[0].permit_entitled = true;
  EXPECT_EQ(admission_pick(heads, permits_only(1, inf)), 0u);
}

TEST(AdmissionRule, AnEntitledHeadShortOfItsResourceHoldsBackBorrowersButNotEarlierEntitledHeads) {
  const auto inf = admit::detail::make_token_bucket_config(admit::rate::inf(), 0, 0);
  std::vector<admission_head> heads{head(1, 1, false, true), head(3, 2, true, true), head(1, 3, true, true)};
  heads[1].permits_free = false;  // asks for 3 of the 2 free
  // Class 2 is entitled but arrived after class 1, which claims the permits: nobody goes.
  EXPECT_EQ(admission_pick(heads, permits_only(2, inf)), 3u);
  heads[2].arrival = 0;  // arrived before class 1: it goes, class 0 (a borrower) still does not
  EXPECT_EQ(admission_pick(heads, permits_only(2, inf)), 2u);
}

TEST(AdmissionRule, TwoHeadsEachBorrowingWhatTheOtherIsEntitledToGoInArrivalOrder) {
  // One permit and one token are free: class 0 is entitled to permits and borrows tokens, class 1 the reverse.
  const auto bucket = admit::detail::make_token_bucket_config(admit::rate::every(std::chrono::seconds(1)), 1, 0);
  const admission_free free{true, 1, &bucket, admit::detail::ns_min, 0};
  std::vector<admission_head> heads{head(1, 2, true, false), head(1, 1, false, true)};
  EXPECT_EQ(admission_pick(heads, free), 1u);
  heads[0].arrival = 0;
  EXPECT_EQ(admission_pick(heads, free), 0u);
}

TEST(AdmissionRule, AssuredBucketsChargeIntoDebtAndSayWhenAWholeTokenIsBack) {
  const auto c = admit::detail::make_token_bucket_config(admit::rate::every(std::chrono::nanoseconds(10)), 2, 0);
  std::int64_t tat = admit::detail::ns_min;
  EXPECT_EQ(admit::detail::assured_wait(c, tat, 100), 0);
  tat = admit::detail::assured_charge(c, tat, 100, 3);  // full (2), charged 3: one in debt
  EXPECT_EQ(admit::detail::assured_wait(c, tat, 100), 20);
  const auto none = admit::detail::make_token_bucket_config(admit::rate{}, 0, 0);
  EXPECT_EQ(admit::detail::assured_wait(none, admit::detail::ns_min, 100), admit::detail::ns_max);
}

}  // namespace
