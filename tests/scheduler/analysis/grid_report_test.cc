#include "scheduler/analysis/grid_report.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/ir/format_grid.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::grid_report_test {
namespace {

// Rank 0 runs 0F0 .. 0F<n-1>, rank 1 has one action.
std::vector<RankProgram> TwoRanks(int n) {
  std::vector<RankProgram> ranks(2);
  for (int i = 0; i < n; ++i) ranks[0].push_back(Action::Make(ActionKind::kForward, 0, i));
  ranks[1].push_back(Action::Make(ActionKind::kForward, 1, 0));
  return ranks;
}

TEST(GridReportTest, PayloadRoundTrips) {
  absl::Status status = WithGrid(absl::InvalidArgumentError("bad"), "grid\n");
  EXPECT_EQ(status.message(), "bad");
  ASSERT_TRUE(GridOf(status).has_value());
  EXPECT_EQ(*GridOf(status), "grid\n");
  EXPECT_FALSE(GridOf(absl::InvalidArgumentError("bad")).has_value());
}

TEST(GridReportTest, SmallGridIsPytorchsGridUnchanged) {
  const std::vector<RankProgram> ranks = TwoRanks(3);
  EXPECT_EQ(FormatGridExcerpt(ranks, 1, 3), FormatPipelineOrder(ranks, 1));
}

TEST(GridReportTest, WindowAroundTheErrorKeepsStepNumbers) {
  EXPECT_EQ(FormatGridExcerpt(TwoRanks(12), 6, 3),
            "         Rank 0 Rank 1\n"
            "  (steps 0-4 not shown)\n"
            "Step 05: 0F5          \n"
            "Step 06: 0F6           <-- ERROR HERE\n"
            "Step 07: 0F7          \n"
            "  (steps 8-11 not shown)\n");
}

TEST(GridReportTest, WindowStopsAtEitherEnd) {
  EXPECT_EQ(FormatGridExcerpt(TwoRanks(12), 0, 2),
            "         Rank 0 Rank 1\n"
            "Step 00: 0F0    1F0    <-- ERROR HERE\n"
            "Step 01: 0F1          \n"
            "  (steps 2-11 not shown)\n");
  EXPECT_EQ(FormatGridExcerpt(TwoRanks(12), 11, 2),
            "         Rank 0 Rank 1\n"
            "  (steps 0-9 not shown)\n"
            "Step 10: 0F10         \n"
            "Step 11: 0F11          <-- ERROR HERE\n");
}

}  // namespace
}  // namespace jitpipe::grid_report_test
