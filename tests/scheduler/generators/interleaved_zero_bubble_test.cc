#include "scheduler/generators/interleaved_zero_bubble.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::interleaved_zero_bubble_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using Text = std::vector<std::vector<std::string>>;

// p = 2, v = 2, m = 1. Rank 1's W lags its I by one backward. The lock-step
// pass delays 2F0 (waits for 1F0) and 3F0 (waits for 2F0) by one step each.
TEST(InterleavedZeroBubbleTest, SplitsBackwardsAndAddsDependencyBubbles) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateInterleavedZeroBubble(2, 1, 2));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "", "2F0", "", "2I0", "2W0", "0I0", "0W0"},
                  {"", "1F0", "", "3F0", "3I0", "1I0", "3W0", "1W0"}}));
  EXPECT_EQ(s.name, "interleaved-zb");
  EXPECT_EQ(s.placement, Placement::kLoop);
}

// With enough microbatches the Ws fill the cooldown: under unit costs pp4 m8
// v2 takes 51 against interleaved 1F1B's 57 (busy 48 per rank either way),
// every rank holding at most 8 stage activations.
TEST(InterleavedZeroBubbleTest, WeightGradientsFillTheCooldown) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateInterleavedZeroBubble(4, 8, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.busy, (std::vector<double>{48, 48, 48, 48}));
  EXPECT_EQ(r.makespan, 51);
  EXPECT_EQ(r.span, (std::vector<double>{51, 50, 49, 48}));
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{8, 8, 8, 8}));
}

TEST(InterleavedZeroBubbleTest, RefusesMicrobatchesThatDoNotFillTheRounds) {
  absl::StatusOr<Schedule> s = GenerateInterleavedZeroBubble(2, 5, 4);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s),
            "interleaved-zb: 5 microbatches is not a multiple of max(1, 5 // 2) = 2; use 4 or 6");
}

}  // namespace
}  // namespace jitpipe::interleaved_zero_bubble_test
