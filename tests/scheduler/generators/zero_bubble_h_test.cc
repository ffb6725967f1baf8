#include "scheduler/generators/zero_bubble_h.h"

#include <algorithm>
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

namespace jitpipe::zero_bubble_h_test {
namespace {

using ::jitpipe::testing::AnchorProgramText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadOrderText;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;

int MaxPeak(const UnitCostResult& r) {
  return *std::max_element(r.peak_stage_units.begin(), r.peak_stage_units.end());
}

// Both reproduce sail-sg's zb.py order for pp 4, m 8 exactly, and with it the
// anchors' unit-cost figures (makespan 27; spans 27..24 for ZB-H1, 24 for
// ZB-H2; peak 4 and 8 units).
TEST(ZeroBubbleHTest, MatchesUpstreamOrderH1Pp4Mb8) {
  const nlohmann::json anchor = ReadTestdataJson("conformance/anchors/zbpp_zbh1_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZeroBubbleH1(4, 8, 1));
  EXPECT_EQ(ProgramText(s.ranks), AnchorProgramText(anchor));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  const nlohmann::json& sim = anchor["our_sim_unit_costs"];
  EXPECT_EQ(r.makespan, sim["makespan"].get<double>());
  EXPECT_EQ(r.span, sim["per_rank_span_first_to_last"].get<std::vector<double>>());
  EXPECT_EQ(r.busy, sim["per_rank_busy"].get<std::vector<double>>());
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{4, 4, 4, 4}));
}

TEST(ZeroBubbleHTest, MatchesUpstreamOrderH2Pp4Mb8) {
  const nlohmann::json anchor = ReadTestdataJson("conformance/anchors/zbpp_zbh2_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZeroBubbleH2(4, 8, 1));
  EXPECT_EQ(ProgramText(s.ranks), AnchorProgramText(anchor));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  const nlohmann::json& sim = anchor["our_sim_unit_costs"];
  EXPECT_EQ(r.makespan, sim["makespan"].get<double>());
  EXPECT_EQ(r.span, sim["per_rank_span_first_to_last"].get<std::vector<double>>());
  EXPECT_EQ(r.peak_stage_units, (std::vector<int>{8, 8, 8, 8}));
}

// other_schedulers.md section 3: pp 8, m 16 gives makespan 55 for both, the
// longest span 55 / 48 and peaks 8 / 16 units.
TEST(ZeroBubbleHTest, UpstreamFiguresPp8Mb16) {
  ASSERT_OK_AND_ASSIGN(Schedule h1, GenerateZeroBubbleH1(8, 16, 1));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r1, ReplayUnitCosts(h1));
  EXPECT_EQ(r1.makespan, 55);
  EXPECT_EQ(r1.max_span(), 55);
  EXPECT_EQ(r1.peak_stage_units, std::vector<int>(8, 8));
  ASSERT_OK_AND_ASSIGN(Schedule h2, GenerateZeroBubbleH2(8, 16, 1));
  ASSERT_OK_AND_ASSIGN(UnitCostResult r2, ReplayUnitCosts(h2));
  EXPECT_EQ(r2.makespan, 55);
  EXPECT_EQ(r2.max_span(), 48);
  EXPECT_EQ(r2.peak_stage_units, std::vector<int>(8, 16));
}

// Upstream orders at other shapes (tests/testdata/zero_bubble/README.md),
// matched action for action.
struct Golden {
  int pp, microbatches;
  absl::StatusOr<Schedule> (*generate)(int, int, int);
  std::string file;
};

class ZeroBubbleHGoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(ZeroBubbleHGoldenTest, MatchesUpstreamOrder) {
  const Golden& g = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, g.generate(g.pp, g.microbatches, 1));
  EXPECT_EQ(ProgramText(s.ranks), ReadOrderText("zero_bubble/" + g.file));
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, ZeroBubbleHGoldenTest,
    ::testing::Values(Golden{8, 16, &GenerateZeroBubbleH1, "zbh1_pp8_mb16.txt"},
                      Golden{8, 16, &GenerateZeroBubbleH2, "zbh2_pp8_mb16.txt"},
                      Golden{5, 3, &GenerateZeroBubbleH1, "zbh1_pp5_mb3.txt"},
                      Golden{6, 9, &GenerateZeroBubbleH2, "zbh2_pp6_mb9.txt"}));

TEST(ZeroBubbleHTest, Header) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZeroBubbleH2(3, 5, 1));
  EXPECT_EQ(s.name, "zb-h2");
  EXPECT_EQ(s.pp, 3);
  EXPECT_EQ(s.stages_per_rank, 1);
  EXPECT_EQ(s.microbatches, 5);
  EXPECT_EQ(s.chains, 1);
  EXPECT_EQ(s.placement, Placement::kLoop);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(s.lowered);
  EXPECT_OK(ValidateHeader(s));
}

TEST(ZeroBubbleHTest, RefusesMoreThanOneStagePerRank) {
  absl::StatusOr<Schedule> s = GenerateZeroBubbleH1(4, 8, 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "zb-h1: stages per rank must be 1 (one stage per rank), got 2");
  EXPECT_EQ(Message(GenerateZeroBubbleH2(4, 8, 3)),
            "zb-h2: stages per rank must be 1 (one stage per rank), got 3");
}

// Every (pp, m) of the grid gives a valid order with only F, I and W, one
// action per (stage, microbatch, phase), and the published figures.
class ZeroBubbleHGridTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ZeroBubbleHGridTest, H1IsValidAndMeetsTheFormula) {
  const auto [pp, m] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZeroBubbleH1(pp, m, 1));
  ASSERT_OK(ValidateStructure(s));
  for (const RankProgram& program : s.ranks) {
    EXPECT_EQ(program.size(), 3u * m);
    for (const Action& a : program) EXPECT_NE(a.kind, ActionKind::kBackward) << a.ToString();
  }
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  // ZB-H1's memory is 1F1B's: at most pp units (fewer when m < pp).
  EXPECT_EQ(MaxPeak(r), std::min(pp, m));
  // (p-1)(F+B-W) of bubble under unit costs once the pipeline fills.
  if (m >= pp) {
    EXPECT_EQ(r.makespan, 3 * m + pp - 1);
  }
}

TEST_P(ZeroBubbleHGridTest, H2IsValidAndHasNoBubbleInItsSpan) {
  const auto [pp, m] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateZeroBubbleH2(pp, m, 1));
  ASSERT_OK(ValidateStructure(s));
  for (const RankProgram& program : s.ranks) EXPECT_EQ(program.size(), 3u * m);
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_EQ(MaxPeak(r), std::min(2 * pp, m));
  // No idle time between a rank's first F and last W once 2p-1 microbatches
  // keep it busy; ZB-H1's makespan once m >= p.
  if (m >= 2 * pp - 1) {
    EXPECT_EQ(r.max_span(), 3 * m);
  }
  if (m >= pp) {
    EXPECT_EQ(r.makespan, 3 * m + pp - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(PpByMicrobatches, ZeroBubbleHGridTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 9, 12, 16,
                                                              17, 24, 33)));

}  // namespace
}  // namespace jitpipe::zero_bubble_h_test
