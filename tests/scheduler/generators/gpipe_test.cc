#include "scheduler/generators/gpipe.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::gpipe_test {
namespace {

using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using Text = std::vector<std::vector<std::string>>;

TEST(GPipeTest, FillsThenDrainsWithLockStepBubbles) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateGPipe(3, 2, 1));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "0F1", "", "", "", "", "", "", "0B0", "0B1"},
                  {"", "1F0", "1F1", "", "", "", "1B0", "1B1"},
                  {"", "", "2F0", "2F1", "2B0", "2B1"}}));
  EXPECT_EQ(s.name, "gpipe");
  EXPECT_EQ(s.placement, Placement::kLoop);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2}));
}

TEST(GPipeTest, OneRankHasNoBubbles) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateGPipe(1, 2, 1));
  EXPECT_EQ(ProgramText(s.ranks), (Text{{"0F0", "0F1", "0B0", "0B1"}}));
}

TEST(GPipeTest, RefusesMoreThanOneStagePerRank) {
  absl::StatusOr<Schedule> s = GenerateGPipe(4, 8, 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "gpipe: needs exactly 1 stage per rank, got 2");
}

}  // namespace
}  // namespace jitpipe::gpipe_test
