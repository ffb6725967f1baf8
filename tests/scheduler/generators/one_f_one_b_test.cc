#include "scheduler/generators/one_f_one_b.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::one_f_one_b_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;
using Text = std::vector<std::vector<std::string>>;

// PyTorch's runtime order: the last rank starts its 1F1B right away (PyTorch's
// IR would emit 2F1 2B0 2F2 ... there).
TEST(OneFOneBTest, EmitsTheRuntimeOrder) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateOneFOneB(3, 4, 1));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "0F1", "0F2", "0B0", "0F3", "0B1", "0B2", "0B3"},
                  {"1F0", "1F1", "1B0", "1F2", "1B1", "1F3", "1B2", "1B3"},
                  {"2F0", "2B0", "2F1", "2B1", "2F2", "2B2", "2F3", "2B3"}}));
}

// m < p, accepted as Megatron's runtime does: warmup min(m, p - r) leaves the
// early ranks with all forwards, then all backwards.
TEST(OneFOneBTest, FewerMicrobatchesThanRanksDegeneratesGracefully) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateOneFOneB(4, 2, 1));
  EXPECT_EQ(ProgramText(s.ranks), (Text{{"0F0", "0F1", "0B0", "0B1"},
                                        {"1F0", "1F1", "1B0", "1B1"},
                                        {"2F0", "2F1", "2B0", "2B1"},
                                        {"3F0", "3B0", "3F1", "3B1"}}));
  ASSERT_OK(ReplayUnitCosts(s));
}

// The anchors' 1F1B pp4 m8: makespan m(F+B) + (p-1)(F+B) = 24 + 9 = 33, and
// rank r holds at most p - r activations.
TEST(OneFOneBTest, MatchesTheUnitCostAnchor) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateOneFOneB(4, 8, 1));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 33);
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{4, 3, 2, 1}));
}

TEST(OneFOneBTest, RefusesMoreThanOneStagePerRank) {
  absl::StatusOr<Schedule> s = GenerateOneFOneB(4, 8, 3);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "1f1b: needs exactly 1 stage per rank, got 3");
}

}  // namespace
}  // namespace jitpipe::one_f_one_b_test
