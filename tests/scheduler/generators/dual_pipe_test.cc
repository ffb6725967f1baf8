#include "scheduler/generators/dual_pipe.h"

#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/analysis/validate_structure.h"
#include "tests/scheduler/generators/zero_bubble_anchors.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/unit_cost_replay.h"

namespace jitpipe::dual_pipe_test {
namespace {

using ::jitpipe::testing::AnchorActionText;
using ::jitpipe::testing::AnchorProgramText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;

// Reproduces DeepSeek's step() order for p 4, m 8 exactly (every rank,
// every action, overlapped pairs included) and the anchor's figures:
// makespan 26, spans 26 25 25 26, peak p+1 = 5 stage-units on every rank.
TEST(DualPipeTest, MatchesUpstreamOrderPp4Mb8) {
  const nlohmann::json anchor =
      ReadTestdataJson("conformance/anchors/deepseek_dualpipe_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipe(4, 8, 2));
  EXPECT_EQ(ProgramText(s.ranks), AnchorProgramText(anchor));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  const nlohmann::json& sim = anchor["our_sim_unit_costs"];
  EXPECT_EQ(r.makespan, sim["makespan"].get<double>());
  EXPECT_EQ(r.span, sim["per_rank_span_first_to_last"].get<std::vector<double>>());
  EXPECT_EQ(r.busy, sim["per_rank_busy"].get<std::vector<double>>());
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{5, 5, 5, 5}));
}

// DualPipeV is DualPipe cut in half: DualPipe p 8, m 16 runs on ranks 0-3
// exactly DualPipeV's order for 4 ranks and 8 microbatches (chunk 1 of rank
// r being stage 15 - r here). other_schedulers.md section 4: makespan 54,
// peak 9 stage-units.
TEST(DualPipeTest, FirstHalfOfPp8Mb16IsDualPipeVPp4Mb8) {
  const nlohmann::json anchor =
      ReadTestdataJson("conformance/anchors/deepseek_dualpipev_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipe(8, 16, 2));
  std::vector<std::vector<std::string>> ours = ProgramText(s.ranks);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> expected;
    for (const auto& item : anchor["ranks"][rank]) {
      expected.push_back(AnchorActionText(item.get<std::string>(), rank, 8));
    }
    EXPECT_EQ(ours[rank], expected) << "rank " << rank;
  }
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(r.makespan, 54);
  EXPECT_EQ(r.peak_stage_units, std::vector<int>(8, 9));
}

TEST(DualPipeTest, Header) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipe(4, 10, 2));
  EXPECT_EQ(s.name, "dualpipe");
  EXPECT_EQ(s.pp, 4);
  EXPECT_EQ(s.stages_per_rank, 2);
  EXPECT_EQ(s.microbatches, 10);
  EXPECT_EQ(s.chains, 2);
  EXPECT_EQ(s.microbatches_per_chain(), 5);
  EXPECT_EQ(s.placement, Placement::kV);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_FALSE(s.lowered);
  EXPECT_OK(ValidateHeader(s));
}

struct Refusal {
  int pp, microbatches, stages_per_rank;
  std::string message;
};

class DualPipeRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(DualPipeRefusalTest, StatesTheConstraintAndAnAlternative) {
  const Refusal& c = GetParam();
  absl::StatusOr<Schedule> s = GenerateDualPipe(c.pp, c.microbatches, c.stages_per_rank);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, DualPipeRefusalTest,
    ::testing::Values(
        Refusal{4, 8, 1,
                "dualpipe: stages per rank must be 2 (one stage of each direction), got 1"},
        Refusal{1, 8, 2, "dualpipe: pp must be even (rank r pairs with rank pp-1-r), got 1; use 2"},
        Refusal{5, 20, 2,
                "dualpipe: pp must be even (rank r pairs with rank pp-1-r), got 5; use 4 or 6"},
        Refusal{4, 9, 2,
                "dualpipe: microbatches must be even (half run in each direction), got 9; "
                "use 8 or 10"},
        Refusal{4, 6, 2,
                "dualpipe: microbatches must be at least 2 * pp = 8, got 6; use 8 or more"},
        Refusal{8, 2, 2,
                "dualpipe: microbatches must be at least 2 * pp = 16, got 2; use 16 or more"}));

// Every valid (pp, m) gives a valid order with DeepSeek's figures: makespan
// = busy + (p/2 - 1)(F&B + B - 3W) = 3m + (p/2 - 1) * 2 and p + 1
// stage-units of activations on every rank.
class DualPipeGridTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(DualPipeGridTest, IsValidAndMeetsTheFormula) {
  const auto [pp, extra] = GetParam();
  const int m = 2 * pp + extra;
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateDualPipe(pp, m, 2));
  ASSERT_OK(ValidateStructure(s));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  for (int rank = 0; rank < pp; ++rank) EXPECT_EQ(r.busy[rank], 3 * m) << "rank " << rank;
  EXPECT_EQ(r.makespan, 3 * m + (pp / 2 - 1) * (3 + 2 - 3));
  EXPECT_EQ(r.peak_stage_units, std::vector<int>(pp, pp + 1));
}

INSTANTIATE_TEST_SUITE_P(PpByExtraMicrobatches, DualPipeGridTest,
                         ::testing::Combine(::testing::Values(2, 4, 6, 8, 12),
                                            ::testing::Values(0, 2, 4, 6, 10, 24)));

}  // namespace
}  // namespace jitpipe::dual_pipe_test
