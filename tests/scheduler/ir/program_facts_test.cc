#include "scheduler/ir/program_facts.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::program_facts_test {
namespace {

// Programs from action text; "" is a bubble.
std::vector<RankProgram> Programs(const std::vector<std::vector<std::string>>& text) {
  std::vector<RankProgram> ranks;
  for (const auto& row : text) {
    RankProgram program;
    for (const std::string& cell : row) {
      program.push_back(cell.empty() ? Action::Bubble() : *ParseAction(cell));
    }
    ranks.push_back(std::move(program));
  }
  return ranks;
}

std::string At(ActionPosition at) { return absl::StrCat("r", at.rank, "i", at.index); }

TEST(ProgramFactsTest, FindsTheFirstCommunicationAndWhereStagesAre) {
  ASSERT_OK_AND_ASSIGN(ProgramFacts facts,
                       ScanPrograms(Programs({{"0F0", "", "0SEND_F0", "0F1"},
                                              {"1RECV_F0", "(1F1;1B0)OVERLAP_F_B"}}),
                                    {}, At));
  ASSERT_TRUE(facts.first_comm.has_value());
  EXPECT_EQ(facts.first_comm->rank, 0);
  EXPECT_EQ(facts.first_comm->index, 2u);
  EXPECT_EQ(facts.stage_to_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(facts.max_microbatch, 1);
}

TEST(ProgramFactsTest, ComputeOnlyProgramsHaveNoCommunication) {
  ASSERT_OK_AND_ASSIGN(ProgramFacts facts,
                       ScanPrograms(Programs({{"0F0", "", "0B0"}, {"1F0", "1I0", "1W0"}}), {}, At));
  EXPECT_FALSE(facts.first_comm.has_value());
}

TEST(ProgramFactsTest, KnownStageCountLeavesUnnamedStagesOpenAndSkipsLargerOnes) {
  ASSERT_OK_AND_ASSIGN(
      ProgramFacts facts,
      ScanPrograms(Programs({{"0F0", "9F0"}, {"2F0"}}), {.num_stages = 4}, At));
  EXPECT_EQ(facts.stage_to_rank, (std::vector<int>{0, kNoRank, 1, kNoRank}));
}

TEST(ProgramFactsTest, ZeroStagesScansForCommunicationOnly) {
  ASSERT_OK_AND_ASSIGN(ProgramFacts facts,
                       ScanPrograms(Programs({{"0F0", "0UNSHARD"}, {"0F0"}}), {.num_stages = 0},
                                    At));
  EXPECT_TRUE(facts.stage_to_rank.empty());
  ASSERT_TRUE(facts.first_comm.has_value());
  EXPECT_EQ(facts.first_comm->index, 1u);
}

TEST(ProgramFactsTest, AStageOnTwoRanksIsAnError) {
  absl::StatusOr<ProgramFacts> facts = ScanPrograms(Programs({{"0F0"}, {"1F0", "0B0"}}), {}, At);
  ASSERT_FALSE(facts.ok());
  EXPECT_EQ(::jitpipe::testing::Message(facts.status()),
            "r1i1: stage 0 is also on rank 0 (index 0); a stage lives on exactly one rank");
}

// A gap is an error when the stage count is unknown, also for a stage number
// far beyond the programs' size (which must not size a table).
TEST(ProgramFactsTest, AGapIsAnErrorWhenTheStageCountIsUnknown) {
  for (int far : {2, 2000000000}) {
    absl::StatusOr<ProgramFacts> facts =
        ScanPrograms(Programs({{"0F0"}, {absl::StrCat(far, "F0")}}), {}, At);
    ASSERT_FALSE(facts.ok()) << far;
    EXPECT_EQ(::jitpipe::testing::Message(facts.status()),
              absl::StrCat("stage 1 appears on no rank, but stage ", far,
                           " does; stages must be numbered 0.. without gaps"));
  }
}

}  // namespace
}  // namespace jitpipe::program_facts_test
