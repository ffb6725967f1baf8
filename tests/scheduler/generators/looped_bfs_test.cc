#include "scheduler/generators/looped_bfs.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::looped_bfs_test {
namespace {

using ::jitpipe::testing::ProgramText;
using Text = std::vector<std::vector<std::string>>;

TEST(LoopedBfsTest, AllMicrobatchesOfAStageBeforeTheNextAndBackwardsReversed) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateLoopedBfs(2, 2, 2));
  EXPECT_EQ(ProgramText(s.ranks),
            (Text{{"0F0", "0F1", "2F0", "2F1", "", "", "2B1", "2B0", "0B1", "0B0"},
                  {"", "1F0", "1F1", "3F0", "3F1", "3B1", "3B0", "1B1", "1B0"}}));
  EXPECT_EQ(s.name, "looped-bfs");
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
}

TEST(LoopedBfsTest, ThreeStagesPerRank) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateLoopedBfs(1, 1, 3));
  EXPECT_EQ(ProgramText(s.ranks), (Text{{"0F0", "1F0", "2F0", "2B0", "1B0", "0B0"}}));
}

}  // namespace
}  // namespace jitpipe::looped_bfs_test
