#include "scheduler/ir/format_grid.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/conformance.h"
#include "tests/testing/testdata.h"

namespace jitpipe::format_grid_test {
namespace {

using ::jitpipe::testing::ProgramsFromJson;
using ::jitpipe::testing::PytorchConformanceNames;
using ::jitpipe::testing::ReadTestdataJson;

class FormatGridConformanceTest : public ::testing::TestWithParam<std::string> {};

// Every "formatted*" golden is PyTorch's _format_pipeline_order of the
// matching "ranks*" order.
TEST_P(FormatGridConformanceTest, MatchesPyTorchByteForByte) {
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/" + GetParam() + ".json");
  int checked = 0;
  for (const auto& [formatted_key, ranks_key] :
       {std::pair<std::string, std::string>{"formatted", "ranks"},
        {"formatted_before_reduce_grad", "ranks_before_reduce_grad"}}) {
    if (!d.contains(formatted_key) || d[ranks_key].is_null()) continue;
    EXPECT_EQ(FormatPipelineOrder(ProgramsFromJson(d[ranks_key])),
              d[formatted_key].get<std::string>())
        << formatted_key;
    ++checked;
  }
  if (d.contains("error")) GTEST_SKIP() << "PyTorch refuses these parameters";
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Pytorch, FormatGridConformanceTest,
                         ::testing::ValuesIn(PytorchConformanceNames()));

TEST(FormatGridTest, MarksTheErrorStep) {
  std::vector<RankProgram> ranks = {
      {Action::Make(ActionKind::kForward, 0, 0), Action::Make(ActionKind::kBackward, 0, 0)},
      {Action::Bubble(), Action::Make(ActionKind::kForward, 1, 0)}};
  EXPECT_EQ(FormatPipelineOrder(ranks, 1),
            "        Rank 0 Rank 1\n"
            "Step 0: 0F0          \n"
            "Step 1: 0B0    1F0    <-- ERROR HERE\n");
}

TEST(FormatGridTest, PadsStepLabelsToTheLastStep) {
  RankProgram program;
  for (int i = 0; i < 11; ++i) program.push_back(Action::Make(ActionKind::kForward, 0, i));
  std::string grid = FormatPipelineOrder({program});
  EXPECT_EQ(grid.substr(0, grid.find('\n', grid.find('\n') + 1) + 1),
            "         Rank 0 \n"
            "Step 00: 0F0    \n");
}

}  // namespace
}  // namespace jitpipe::format_grid_test
