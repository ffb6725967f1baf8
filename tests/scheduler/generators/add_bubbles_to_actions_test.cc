#include "scheduler/generators/add_bubbles_to_actions.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::add_bubbles_to_actions_test {
namespace {

using ::jitpipe::testing::JsonText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramsFromJson;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;
using Text = std::vector<std::vector<std::string>>;

std::vector<RankProgram> Programs(const Text& text) {
  std::vector<RankProgram> programs;
  for (const auto& row : text) {
    programs.emplace_back();
    for (const std::string& a : row) {
      programs.back().push_back(a.empty() ? Action::Bubble() : ParseAction(a).value());
    }
  }
  return programs;
}

// What runs on a step is visible from the next step on, so a chain of
// forwards across ranks advances one stage per step.
TEST(AddBubblesToActionsTest, DelaysForwardsUntilTheirPredecessorRan) {
  ASSERT_OK_AND_ASSIGN(auto out,
                       AddBubblesToActions(Programs({{"0F0", "2F0"}, {"1F0", "3F0"}}), 4, 1));
  EXPECT_EQ(ProgramText(out), (Text{{"0F0", "", "2F0"}, {"", "1F0", "", "3F0"}}));
}

TEST(AddBubblesToActionsTest, CopiesBubblesAndNeverDelaysIOrW) {
  ASSERT_OK_AND_ASSIGN(auto out, AddBubblesToActions(
                                     Programs({{"", "1I0", "0W0"}, {"1W0", "", "0I0"}}), 2, 1));
  EXPECT_EQ(ProgramText(out), (Text{{"", "1I0", "0W0"}, {"1W0", "", "0I0"}}));
}

// A full backward waits for the next stage's, or on the last stage for its
// own forward.
TEST(AddBubblesToActionsTest, DelaysFullBackwards) {
  ASSERT_OK_AND_ASSIGN(auto out, AddBubblesToActions(
                                     Programs({{"0F0", "0B0"}, {"1F0", "1B0"}}), 2, 1));
  EXPECT_EQ(ProgramText(out), (Text{{"0F0", "", "", "0B0"}, {"", "1F0", "1B0"}}));
}

TEST(AddBubblesToActionsTest, ReportsWhenNoRankCanAdvance) {
  absl::StatusOr<std::vector<RankProgram>> out =
      AddBubblesToActions(Programs({{"0F0", "2F0"}, {"3F0", "1F0"}}), 4, 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(out),
            "no rank can make progress; waiting: rank 0, index 1 (2F0); rank 1, index 0 (3F0)");
}

// Every InterleavedZeroBubble golden: PyTorch's order before the pass becomes
// its final order, with the recorded number of bubbles added per rank.
TEST(AddBubblesToActionsTest, ReproducesPyTorchOnEveryZeroBubbleGolden) {
  int checked = 0;
  for (const std::string& name : PytorchConformanceNames()) {
    nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + name + ".json");
    if (d["schedule"] != "InterleavedZeroBubble" || d.contains("error")) continue;
    SCOPED_TRACE(name);
    ++checked;
    const std::vector<RankProgram> before = ProgramsFromJson(d["ranks_before_add_bubbles"]);
    ASSERT_OK_AND_ASSIGN(auto out, AddBubblesToActions(before, d["num_stages"], d["microbatches"]));
    EXPECT_EQ(ProgramText(out), JsonText(d["ranks"]));
    for (size_t r = 0; r < out.size(); ++r) {
      EXPECT_EQ(out[r].size() - before[r].size(), d["bubbles_added"][std::to_string(r)]) << r;
    }
  }
  EXPECT_EQ(checked, 22);
}

}  // namespace
}  // namespace jitpipe::add_bubbles_to_actions_test
