#include "scheduler/generators/compute_schedule.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::compute_schedule_test {
namespace {

using ::jitpipe::testing::Message;

TEST(ComputeScheduleTest, FillsTheHeader) {
  Schedule s = NewComputeSchedule("zbv", Placement::kV, 3, 2, 5);
  EXPECT_EQ(s.name, "zbv");
  EXPECT_EQ(s.pp, 3);
  EXPECT_EQ(s.stages_per_rank, 2);
  EXPECT_EQ(s.microbatches, 5);
  EXPECT_EQ(s.chains, 1);
  EXPECT_EQ(s.placement, Placement::kV);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 2, 1, 0}));
  EXPECT_FALSE(s.lowered);
  EXPECT_EQ(s.ranks.size(), 3u);
  EXPECT_OK(ValidateHeader(s));
}

TEST(ComputeScheduleTest, RequireStagesPerRank) {
  EXPECT_OK(RequireStagesPerRank("gpipe", 1, 1));
  EXPECT_EQ(Message(RequireStagesPerRank("gpipe", 1, 2)),
            "gpipe: needs exactly 1 stage per rank, got 2");
  EXPECT_EQ(RequireStagesPerRank("zbv", 2, 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(RequireStagesPerRank("zbv", 2, 3)),
            "zbv: needs exactly 2 stages per rank, got 3");
}

TEST(ComputeScheduleTest, CountOf) {
  EXPECT_EQ(CountOf(1, "rank", "ranks"), "1 rank");
  EXPECT_EQ(CountOf(4, "rank", "ranks"), "4 ranks");
}

}  // namespace
}  // namespace jitpipe::compute_schedule_test
