#include "scheduler/passes/split_backward.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::split_backward_test {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

struct Case {
  std::string name;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

class SplitBackwardTest : public ::testing::TestWithParam<Case> {};

TEST_P(SplitBackwardTest, Splits) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().in));
  ASSERT_OK_AND_ASSIGN(Schedule split, SplitBackward(s));
  EXPECT_EQ(Rows(split), GetParam().out);
  EXPECT_FALSE(split.lowered);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SplitBackwardTest,
    ::testing::Values(
        // The header's example: bubbles stay; a compound's B becomes I in
        // place and its W follows the compound.
        Case{"HeaderExample",
             {"0F0 0B0 (2F1;1B0)OVERLAP_F_B 0F1 ."},
             {"0F0 0I0 0W0 (2F1;1I0)OVERLAP_F_B 1W0 0F1 ."}},
        Case{"TwoRanks",
             {"0F0 . 0B0", ". 1F0 1B0"},
             {"0F0 . 0I0 0W0", ". 1F0 1I0 1W0"}},
        Case{"CompoundOfTwoBackwards",
             {"0F0 1F0 (1B0;0B0)OVERLAP_F_B"},
             {"0F0 1F0 (1I0;0I0)OVERLAP_F_B 1W0 0W0"}},
        // Already split: nothing to do.
        Case{"NothingToSplit", {"0F0 . 0I0 0W0"}, {"0F0 . 0I0 0W0"}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(SplitBackwardErrorTest, RefusesALoweredProgram) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0SEND_F0 0RECV_B0 0B0",
                                             "1RECV_F0 1F0 1B0 1SEND_B0"}));
  absl::StatusOr<Schedule> split = SplitBackward(s);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(split), "rank 0, index 1 (0SEND_F0): expected a compute-only program (F, B, "
                            "I, W, OVERLAP_F_B and bubbles)");
}

}  // namespace
}  // namespace jitpipe::split_backward_test
