#include "scheduler/ir/schedule.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::schedule_test {
namespace {

TEST(StageToRankTest, LoopPutsStageSOnRankSModP) {
  EXPECT_EQ(StageToRank(Placement::kLoop, 4, 2), (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(StageToRankTest, VTurnsAtEachMultipleOfP) {
  EXPECT_EQ(StageToRank(Placement::kV, 4, 2), (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(StageToRank(Placement::kV, 2, 4), (std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(StageToRank(Placement::kV, 1, 2), (std::vector<int>{0, 0}));
}

TEST(StageToRankTest, RankToStagesInvertsAndSorts) {
  EXPECT_EQ(RankToStages(StageToRank(Placement::kV, 2, 2), 2),
            (std::vector<std::vector<int>>{{0, 3}, {1, 2}}));
}

TEST(DetectPlacementTest, RecognisesLoopVAndCustom) {
  EXPECT_EQ(DetectPlacement({0, 1, 0, 1}, 2), Placement::kLoop);
  EXPECT_EQ(DetectPlacement({0, 1, 1, 0}, 2), Placement::kV);
  EXPECT_EQ(DetectPlacement({1, 0, 0, 1}, 2), Placement::kCustom);
}

Schedule TwoStages() {
  Schedule s;
  s.pp = 2;
  s.stages_per_rank = 1;
  s.microbatches = 2;
  s.stage_to_rank = {0, 1};
  s.ranks = {{}, {}};
  return s;
}

TEST(ScheduleTest, ChainsSplitStagesAndMicrobatches) {
  Schedule s = TwoStages();
  s.stages_per_rank = 2;
  s.stage_to_rank = {0, 1, 1, 0};
  s.placement = Placement::kV;
  s.microbatches = 8;
  s.chains = 2;
  EXPECT_OK(ValidateHeader(s));
  EXPECT_EQ(s.stages_per_chain(), 2);
  EXPECT_EQ(s.microbatches_per_chain(), 4);
  EXPECT_TRUE(s.IsFirstStage(2));
  EXPECT_TRUE(s.IsLastStage(1));
  EXPECT_FALSE(s.IsLastStage(2));
}

TEST(ScheduleTest, HeaderErrorsNameTheField) {
  Schedule s = TwoStages();
  s.ranks.pop_back();
  EXPECT_EQ(::jitpipe::testing::Message(ValidateHeader(s)), "the schedule has 1 rank programs but pp is 2");
  s = TwoStages();
  s.stage_to_rank = {0, 0};
  EXPECT_EQ(::jitpipe::testing::Message(ValidateHeader(s)),
            "rank 0 holds 2 stages in stage_to_rank; every rank must hold stages_per_rank = 1");
  s = TwoStages();
  s.chains = 2;
  s.microbatches = 3;
  EXPECT_EQ(::jitpipe::testing::Message(ValidateHeader(s)),
            "chains (2) must divide the stages (2) and the microbatches (3)");
}

}  // namespace
}  // namespace jitpipe::schedule_test
