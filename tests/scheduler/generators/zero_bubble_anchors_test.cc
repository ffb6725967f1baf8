#include "tests/scheduler/generators/zero_bubble_anchors.h"

#include <string>
#include <vector>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace jitpipe::testing {
namespace {

struct Case {
  std::string anchor;
  int rank, pp;
  std::string ours;
};

class AnchorActionTextTest : public ::testing::TestWithParam<Case> {};

TEST_P(AnchorActionTextTest, Converts) {
  const Case& c = GetParam();
  EXPECT_EQ(AnchorActionText(c.anchor, c.rank, c.pp), c.ours);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, AnchorActionTextTest,
    ::testing::Values(Case{"F3", 2, 4, "2F3"}, Case{"B0", 1, 4, "1I0"}, Case{"W12", 3, 4, "3W12"},
                      Case{"BW5", 0, 4, "0B5"}, Case{"F2c0", 1, 4, "1F2"},
                      Case{"B7c1", 1, 4, "6I7"}, Case{"W0c1", 0, 8, "15W0"},
                      Case{"F3c0&BW1c1", 0, 4, "(0F3;7B1)OVERLAP_F_B"},
                      Case{"F2c1&BW0c0", 3, 4, "(4F2;3B0)OVERLAP_F_B"}));

TEST(AnchorActionTextTest, FailsOnUnknownText) {
  EXPECT_NONFATAL_FAILURE(AnchorActionText("X1", 0, 4), "unknown anchor action X1");
  EXPECT_NONFATAL_FAILURE(AnchorActionText("F1c2", 0, 4), "unreadable anchor action F1c2");
}

TEST(AnchorProgramTextTest, ConvertsEveryRank) {
  const nlohmann::json anchor = nlohmann::json::parse(
      R"({"params": {"pp": 2}, "ranks": [["F0c0", "F0c1"], ["F0c0&BW0c1"]]})");
  EXPECT_EQ(AnchorProgramText(anchor), (std::vector<std::vector<std::string>>{
                                           {"0F0", "3F0"}, {"(1F0;2B0)OVERLAP_F_B"}}));
}

TEST(ReadOrderTextTest, ReadsOneRankPerLine) {
  const std::vector<std::vector<std::string>> order = ReadOrderText("zero_bubble/zbh1_pp5_mb3.txt");
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[4], (std::vector<std::string>{"4F0", "4I0", "4F1", "4I1", "4F2", "4I2", "4W0",
                                                "4W1", "4W2"}));
}

}  // namespace
}  // namespace jitpipe::testing
