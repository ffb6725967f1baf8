#include "scheduler/generators/zbv_zero_bubble.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::zbv_zero_bubble_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using Text = std::vector<std::vector<std::string>>;

// p = 1: both stages on rank 0, the V's turn inside the rank.
TEST(ZbvZeroBubbleTest, OneRankHoldsTheWholeV) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZbvZeroBubble(1, 2, 2));
  // warmup: F(c0); F(c1) I(c1) W(c1). steady: F(c0) I(c0) W(c0) F(c1) I(c1)
  // W(c1). cooldown: I(c0) W(c0).
  EXPECT_EQ(ProgramText(s.ranks), (Text{{"0F0", "1F0", "1I0", "1W0", "0F1", "0I0", "0W0",
                                         "1F1", "1I1", "1W1", "0I1", "0W1"}}));
  EXPECT_EQ(s.placement, Placement::kV);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 0}));
}

// PyTorch computes the order for max(2p-1, m) = 3 microbatches and replaces
// everything on microbatches 1 and 2 by bubbles, trailing ones included.
TEST(ZbvZeroBubbleTest, SmallMicrobatchCountsLeaveBubblesWherePyTorchDrops) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZbvZeroBubble(2, 1, 2));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "", "", "3F0", "3I0", "3W0", "", "", "", "0I0", "0W0", "", "", "", "", "",
                   "", ""},
                  {"", "1F0", "2F0", "", "", "2I0", "2W0", "", "1I0", "1W0", "", "", "", "", "",
                   "", "", "", ""}}));
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 1, 0}));
}

// The zero-bubble repository's ZB-V anchor, pp4 m8: makespan 51, every rank
// busy 48 with a first-to-last span of 48, and at most 8 stage activations
// live per rank (4 full-rank units of 2 stages).
TEST(ZbvZeroBubbleTest, MatchesTheZeroBubbleAnchor) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZbvZeroBubble(4, 8, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 51);
  EXPECT_EQ(r.max_span(), 48);
  EXPECT_EQ(r.busy, (std::vector<double>{48, 48, 48, 48}));
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{8, 8, 8, 8}));
}

TEST(ZbvZeroBubbleTest, RefusesAnythingButTwoStagesPerRank) {
  absl::StatusOr<Schedule> s = GenerateZbvZeroBubble(4, 8, 4);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "zbv: needs exactly 2 stages per rank, got 4");
}

}  // namespace
}  // namespace jitpipe::zbv_zero_bubble_test
