#include "scheduler/generators/v_half_min.h"

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

namespace jitpipe::v_half_min_test {
namespace {

using ::jitpipe::testing::AnchorProgramText;
using ::jitpipe::testing::Message;
using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadOrderText;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::ReplayUnitCosts;
using ::jitpipe::testing::UnitCostResult;

// Peaks in the anchors' unit: one microbatch through both of a rank's
// stages, i.e. half a stage-unit per chunk activation.
std::vector<double> PeakUnits(const UnitCostResult& r) {
  std::vector<double> units;
  for (int stage_units : r.peak_stage_units) units.push_back(stage_units / 2.0);
  return units;
}

double MaxPeakUnits(const UnitCostResult& r) {
  const std::vector<double> units = PeakUnits(r);
  return *std::max_element(units.begin(), units.end());
}

void ExpectAnchorFigures(const Schedule& s, const nlohmann::json& anchor) {
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  const nlohmann::json& sim = anchor["our_sim_unit_costs"];
  EXPECT_EQ(r.makespan, sim["makespan"].get<double>());
  EXPECT_EQ(r.span, sim["per_rank_span_first_to_last"].get<std::vector<double>>());
  EXPECT_EQ(r.busy, sim["per_rank_busy"].get<std::vector<double>>());
  EXPECT_EQ(PeakUnits(r), anchor["peak_activation_units_per_rank"].get<std::vector<double>>());
}

// Both reproduce sail-sg's zbv_greedy.py order for pp 4, m 8 exactly, every
// rank and action, and so the anchors' figures (V-Half: makespan 53, peak 3
// units; V-Min: 59, peak 2).
TEST(VHalfMinTest, VHalfMatchesUpstreamOrderPp4Mb8) {
  const nlohmann::json anchor = ReadTestdataJson("conformance/anchors/zbpp_vhalf_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateVHalf(4, 8, 2));
  EXPECT_EQ(ProgramText(s.ranks), AnchorProgramText(anchor));
  ExpectAnchorFigures(s, anchor);
}

TEST(VHalfMinTest, VMinMatchesUpstreamOrderPp4Mb8) {
  const nlohmann::json anchor = ReadTestdataJson("conformance/anchors/zbpp_vmin_pp4_mb8.json");
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateVMin(4, 8, 2));
  EXPECT_EQ(ProgramText(s.ranks), AnchorProgramText(anchor));
  ExpectAnchorFigures(s, anchor);
}

// other_schedulers.md section 3, pp 8, m 16: V-Half makespan 113, peak 5
// units; V-Min 123, peak 3.5 on rank 0 and 4 elsewhere, as upstream.
TEST(VHalfMinTest, UpstreamFiguresPp8Mb16) {
  ASSERT_OK_AND_ASSIGN(Schedule half, GenerateVHalf(8, 16, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult rh, ReplayUnitCosts(half));
  EXPECT_EQ(rh.makespan, 113);
  EXPECT_EQ(rh.max_span(), 113);
  EXPECT_EQ(PeakUnits(rh), std::vector<double>(8, 5));
  ASSERT_OK_AND_ASSIGN(Schedule min, GenerateVMin(8, 16, 2));
  ASSERT_OK_AND_ASSIGN(UnitCostResult rm, ReplayUnitCosts(min));
  EXPECT_EQ(rm.makespan, 123);
  EXPECT_EQ(rm.max_span(), 123);
  EXPECT_EQ(PeakUnits(rm), (std::vector<double>{3.5, 4, 4, 4, 4, 4, 4, 4}));
}

// Upstream orders at other shapes (tests/testdata/zero_bubble/README.md),
// matched action for action: pp 8, m 16, and both forms of each block (with
// and without the extra interval).
struct Golden {
  int pp, microbatches;
  absl::StatusOr<Schedule> (*generate)(int, int, int);
  std::string file;
};

class VHalfMinGoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(VHalfMinGoldenTest, MatchesUpstreamOrder) {
  const Golden& g = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, g.generate(g.pp, g.microbatches, 2));
  EXPECT_EQ(ProgramText(s.ranks), ReadOrderText("zero_bubble/" + g.file));
}

INSTANTIATE_TEST_SUITE_P(Upstream, VHalfMinGoldenTest,
                         ::testing::Values(Golden{8, 16, &GenerateVHalf, "vhalf_pp8_mb16.txt"},
                                           Golden{8, 16, &GenerateVMin, "vmin_pp8_mb16.txt"},
                                           Golden{5, 7, &GenerateVHalf, "vhalf_pp5_mb7.txt"},
                                           Golden{6, 9, &GenerateVMin, "vmin_pp6_mb9.txt"}));

TEST(VHalfMinTest, Header) {
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateVMin(3, 5, 2));
  EXPECT_EQ(s.name, "v-min");
  EXPECT_EQ(s.pp, 3);
  EXPECT_EQ(s.stages_per_rank, 2);
  EXPECT_EQ(s.microbatches, 5);
  EXPECT_EQ(s.chains, 1);
  EXPECT_EQ(s.placement, Placement::kV);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 2, 1, 0}));
  EXPECT_FALSE(s.lowered);
  EXPECT_OK(ValidateHeader(s));
  ASSERT_OK_AND_ASSIGN(Schedule h, GenerateVHalf(3, 5, 2));
  EXPECT_EQ(h.name, "v-half");
}

TEST(VHalfMinTest, RefusesOtherThanTwoStagesPerRank) {
  absl::StatusOr<Schedule> s = GenerateVHalf(4, 8, 1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(s), "v-half: stages per rank must be 2 (a V of two stages per rank), got 1");
  EXPECT_EQ(Message(GenerateVMin(4, 8, 4)),
            "v-min: stages per rank must be 2 (a V of two stages per rank), got 4");
}

// Every (pp, m) of the grid gives a valid I/W order that keeps to the
// schedule's memory: (p+2)//2 units for V-Half, (p+4)//3 for V-Min, reached
// once m >= p.
class VHalfMinGridTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

void ExpectValidWithPeak(const Schedule& s, int m, double peak_units) {
  ASSERT_OK(ValidateStructure(s));
  for (const RankProgram& program : s.ranks) {
    EXPECT_EQ(program.size(), 6u * m);
    for (const Action& a : program) EXPECT_NE(a.kind, ActionKind::kBackward) << a.ToString();
  }
  ASSERT_OK_AND_ASSIGN(UnitCostResult r, ReplayUnitCosts(s));
  EXPECT_LE(MaxPeakUnits(r), peak_units);
  if (m >= s.pp) {
    EXPECT_EQ(MaxPeakUnits(r), peak_units);
  }
}

TEST_P(VHalfMinGridTest, VHalf) {
  const auto [pp, m] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateVHalf(pp, m, 2));
  ExpectValidWithPeak(s, m, (pp + 2) / 2);
}

TEST_P(VHalfMinGridTest, VMin) {
  const auto [pp, m] = GetParam();
  ASSERT_OK_AND_ASSIGN(Schedule s, GenerateVMin(pp, m, 2));
  ExpectValidWithPeak(s, m, (pp + 4) / 3);
}

INSTANTIATE_TEST_SUITE_P(PpByMicrobatches, VHalfMinGridTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 12, 16),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 9, 12, 16,
                                                              17, 24, 33)));

}  // namespace
}  // namespace jitpipe::v_half_min_test
