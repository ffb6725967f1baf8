#include "scheduler/passes/add_reduce_grad.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::add_reduce_grad_test {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;
using ::jitpipe::testing::TwoChainsFromRows;

struct Case {
  std::string name;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

class AddReduceGradTest : public ::testing::TestWithParam<Case> {};

TEST_P(AddReduceGradTest, ReducesAfterTheLastBackward) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().in));
  ASSERT_OK_AND_ASSIGN(Schedule reduced, AddReduceGrad(s));
  EXPECT_EQ(Rows(reduced), GetParam().out);
  EXPECT_TRUE(reduced.lowered);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddReduceGradTest,
    ::testing::Values(
        // The header's example (PyTorch's test: ...1B1, 1REDUCE_GRAD, 0B0, 0B1,
        // 0REDUCE_GRAD); the bubble goes.
        Case{"HeaderExample",
             {"0F0 1F0 0F1 1F1 1B0 1B1 0B0 . 0B1"},
             {"0F0 1F0 0F1 1F1 1B0 1B1 1REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD"}},
        // With split backwards the last W completes the stage; I never counts.
        Case{"AfterTheLastW",
             {"0F0 0F1 0I0 0I1 0W0 0W1"},
             {"0F0 0F1 0I0 0I1 0W0 0W1 0REDUCE_GRAD"}},
        // Sub-actions count; a compound completing two stages is followed by
        // both reductions, in sub-action order.
        Case{"CompoundCompletesTwoStages",
             {"0F0 1F0 0F1 1B0 (1F1;0B0)OVERLAP_F_B (1B1;0B1)OVERLAP_F_B"},
             {"0F0 1F0 0F1 1B0 (1F1;0B0)OVERLAP_F_B (1B1;0B1)OVERLAP_F_B 1REDUCE_GRAD "
              "0REDUCE_GRAD"}},
        // UNSHARD/RESHARD pass through (the pass runs after add_unshard_reshard).
        Case{"KeepsUnshardReshard",
             {"0UNSHARD 0F0 0B0 0RESHARD", "1UNSHARD 1F0 1B0 1RESHARD"},
             {"0UNSHARD 0F0 0B0 0REDUCE_GRAD 0RESHARD", "1UNSHARD 1F0 1B0 1REDUCE_GRAD 1RESHARD"}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// M is the microbatches of one chain: with two chains of 1 microbatch each,
// one backward completes a stage.
TEST(AddReduceGradTest, CountsMicrobatchesPerChain) {
  ASSERT_OK_AND_ASSIGN(Schedule s, TwoChainsFromRows({"0F0 3F0 3B0 0B0", "2F0 1F0 1B0 2B0"}));
  ASSERT_OK_AND_ASSIGN(Schedule reduced, AddReduceGrad(s));
  EXPECT_EQ(Rows(reduced),
            (std::vector<std::string>{"0F0 3F0 3B0 3REDUCE_GRAD 0B0 0REDUCE_GRAD",
                                      "2F0 1F0 1B0 1REDUCE_GRAD 2B0 2REDUCE_GRAD"}));
}

TEST(AddReduceGradTest, RefusesAProgramThatHasReductions) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0 0REDUCE_GRAD"}));
  absl::StatusOr<Schedule> reduced = AddReduceGrad(s);
  EXPECT_EQ(reduced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(reduced), "rank 0, index 2 (0REDUCE_GRAD): expected a program without "
                              "REDUCE_GRAD, sends and receives");
}

}  // namespace
}  // namespace jitpipe::add_reduce_grad_test
