#include "scheduler/passes/add_unshard_reshard.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/passes/pass_test_util.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

using ::jitpipe::testing::FromRows;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::Rows;

struct Case {
  std::string name;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

class AddUnshardReshardTest : public ::testing::TestWithParam<Case> {};

TEST_P(AddUnshardReshardTest, PrefetchesThreeStages) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows(GetParam().in));
  ASSERT_OK_AND_ASSIGN(Schedule fsdp, AddUnshardReshard(s));
  EXPECT_EQ(Rows(fsdp), GetParam().out);
  EXPECT_TRUE(fsdp.lowered);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddUnshardReshardTest,
    ::testing::Values(
        // The header's example: four stages on one rank, three active at a time.
        Case{"HeaderExample",
             {"0F0 1F0 2F0 3F0 3B0 2B0 1B0 0B0"},
             {"0UNSHARD 1UNSHARD 2UNSHARD 0F0 0RESHARD 3UNSHARD 1F0 2F0 3F0 3B0 3RESHARD "
              "0UNSHARD 2B0 2RESHARD 1B0 1RESHARD 0B0 0RESHARD"}},
        // At most three stages per rank: all unsharded up front, each
        // resharded right before the action after its last; bubbles go.
        Case{"FewStagesNeverEvictEarly",
             {"0F0 . 2F0 2B0 . 0B0", "1F0 3F0 3B0 . 1B0"},
             {"0UNSHARD 2UNSHARD 0F0 2F0 2B0 2RESHARD 0B0 0RESHARD",
              "1UNSHARD 3UNSHARD 1F0 3F0 3B0 3RESHARD 1B0 1RESHARD"}},
        // A compound adds all its stages to the lookahead before the count
        // is checked, so four stages can be active.
        Case{"CompoundMayReachFour",
             {"0F0 1F0 (2F0;3F0)OVERLAP_F_B 3B0 2B0 1B0 0B0"},
             {"0UNSHARD 1UNSHARD 2UNSHARD 3UNSHARD 0F0 0RESHARD 1F0 (2F0;3F0)OVERLAP_F_B 3B0 "
              "3RESHARD 0UNSHARD 2B0 2RESHARD 1B0 1RESHARD 0B0 0RESHARD"}}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

// RESHARDs follow the iteration order of PyTorch's Python set: on pp 8 in V
// placement rank 5 holds stages 5 and 10, and Python lists {5, 10} as
// [10, 5] (10 hashes to slot 2 of 8, 5 to slot 5).
TEST(AddUnshardReshardTest, ReshardsInPythonSetOrder) {
  Schedule s;
  s.pp = 8;
  s.stages_per_rank = 2;
  s.microbatches = 2;
  s.placement = Placement::kV;
  s.stage_to_rank = StageToRank(Placement::kV, 8, 2);
  s.ranks.resize(8);
  for (const char* text : {"5F0", "10F0", "(5F1;10B0)OVERLAP_F_B"}) {
    ASSERT_OK_AND_ASSIGN(Action a, ParseAction(text));
    s.ranks[5].push_back(a);
  }
  ASSERT_OK_AND_ASSIGN(Schedule fsdp, AddUnshardReshard(s));
  EXPECT_EQ(Rows(fsdp)[5],
            "5UNSHARD 10UNSHARD 5F0 10F0 (5F1;10B0)OVERLAP_F_B 10RESHARD 5RESHARD");
}

TEST(AddUnshardReshardTest, LookaheadIsAParameter) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 1F0 1B0 0B0"}));
  ASSERT_OK_AND_ASSIGN(Schedule one, AddUnshardReshard(s, 1));
  EXPECT_EQ(Rows(one), (std::vector<std::string>{
                           "0UNSHARD 0F0 0RESHARD 1UNSHARD 1F0 1B0 1RESHARD 0UNSHARD 0B0 "
                           "0RESHARD"}));
  EXPECT_EQ(Message(AddUnshardReshard(s, 0)), "max_active_stages must be at least 1, not 0");
}

TEST(AddUnshardReshardTest, RefusesALoweredProgram) {
  ASSERT_OK_AND_ASSIGN(Schedule s, FromRows({"0F0 0B0 0REDUCE_GRAD"}));
  absl::StatusOr<Schedule> fsdp = AddUnshardReshard(s);
  EXPECT_EQ(fsdp.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Message(fsdp), "rank 0, index 2 (0REDUCE_GRAD): expected a compute-only program (F, "
                           "B, I, W, OVERLAP_F_B and bubbles)");
}

}  // namespace
}  // namespace jitpipe
