// The planner's zero-bubble heuristic (zero_bubble_heuristic.h) on a model:
// the orders upstream's zb.py gives for the same costs, comm and cap
// (tests/testdata/zero_bubble/costed/), and the auto scheduler never slower
// than it on cases of bench/zb_grid.cc's grid.
#include "planning/zero_bubble_heuristic.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "planning/auto_schedule.h"
#include "planning/partition.h"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "tests/testing/zero_bubble_grid.h"

namespace jitpipe::zero_bubble_heuristic_test {
namespace {

using ::jitpipe::testing::ProgramText;
using ::jitpipe::testing::ReadTestdata;

using Costs = ::jitpipe::testing::GridCosts;
using ::jitpipe::testing::GridModel;
constexpr int64_t kUnit = ::jitpipe::testing::kGridUnit;
constexpr Costs kBalanced = ::jitpipe::testing::kGridBalanced;
constexpr Costs kTypical = ::jitpipe::testing::kGridTypical;
constexpr Costs kHeavy = ::jitpipe::testing::kGridHeavyBackward;

Model OneStagePerRank(const ModelFile& file, int pp) {
  absl::StatusOr<Partition> cut = EvenPartition(file.layers, pp);
  EXPECT_OK(cut);
  absl::StatusOr<Model> model = StageModel(file.layers, *cut);
  EXPECT_OK(model);
  return *model;
}

TrainingMemory Limit(int64_t bytes) {
  return TrainingMemory{.optimizer = {.kind = OptimizerKind::kNone},
                        .device = {.memory_bytes = bytes}};
}

// A golden file's stage lines and upstream's best_time.
struct Golden {
  std::vector<std::vector<std::string>> stages;
  double best_time = 0;
};
Golden ReadGolden(const std::string& file) {
  Golden g;
  for (absl::string_view line :
       absl::StrSplit(ReadTestdata("zero_bubble/costed/" + file), '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) {
      const size_t at = line.find("best_time ");
      if (at != absl::string_view::npos) {
        EXPECT_TRUE(absl::SimpleAtod(line.substr(at + 10), &g.best_time)) << line;
      }
      continue;
    }
    g.stages.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return g;
}

struct Case {
  Costs costs;
  int pp, m, cap_units;
  std::string file;
};

class ZeroBubbleHeuristicGoldenTest : public ::testing::TestWithParam<Case> {};

// The model's stage costs, transfers and activation cap in bytes give the
// order upstream gives in units, and upstream's own span for it.
TEST_P(ZeroBubbleHeuristicGoldenTest, IsUpstreamsOrder) {
  const Case& c = GetParam();
  const Golden golden = ReadGolden(c.file);
  const Model model = OneStagePerRank(GridModel(c.costs, c.pp), c.pp);
  ASSERT_OK_AND_ASSIGN(HeuristicResult h,
                       ZeroBubbleHeuristic(model, Limit(c.cap_units * kUnit), c.pp, c.m));
  EXPECT_EQ(ProgramText(h.schedule.ranks), golden.stages);
  EXPECT_NEAR(h.upstream_span_us, golden.best_time, 1e-9);
  EXPECT_EQ(h.caps_lowered, 0);
  EXPECT_EQ(h.tried, 8);
  EXPECT_TRUE(h.evaluation.fits);
  EXPECT_LE(h.evaluation.memory.Heaviest().total(), c.cap_units * kUnit);
  // Lowered either way, never faster than the compute of a rank.
  EXPECT_GE(h.evaluation.makespan_us, c.m * (c.costs.f + c.costs.i + c.costs.w) - 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, ZeroBubbleHeuristicGoldenTest,
    ::testing::Values(Case{kTypical, 4, 8, 4, "zb_typical_pp4_mb8_cap4.txt"},
                      Case{kTypical, 4, 8, 6, "zb_typical_pp4_mb8_cap6.txt"},
                      Case{kTypical, 4, 8, 8, "zb_typical_pp4_mb8_cap8.txt"},
                      Case{kTypical, 8, 16, 12, "zb_typical_pp8_mb16_cap12.txt"},
                      Case{kHeavy, 4, 8, 6, "zb_heavy_pp4_mb8_cap6.txt"},
                      Case{kHeavy, 8, 16, 16, "zb_heavy_pp8_mb16_cap16.txt"},
                      Case{kBalanced, 8, 32, 8, "zb_balanced_pp8_mb32_cap8.txt"}));

TEST(ZeroBubbleHeuristicTest, NoScheduleUnderAQuarterUnit) {
  const Model model = OneStagePerRank(GridModel(kBalanced, 4), 4);
  EXPECT_EQ(ZeroBubbleHeuristic(model, Limit(kUnit / 4), 4, 8).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ZeroBubbleHeuristic(model, Limit(kUnit), 0, 8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Upstream's graph from stage inputs: the transfer into a stage is its
// neighbour's send; memory F +bytes, I 0, W -bytes.
TEST(ZeroBubbleHeuristicTest, GraphOfStageTimes) {
  const StageTimes t{.forward_us = {1, 2, 3}, .backward_input_us = {4, 5, 6},
                     .backward_weight_us = {7, 8, 9}, .activation_bytes = {10, 20, 30},
                     .send_forward_us = {0.1, 0.2, 0}, .send_backward_us = {0, 0.3, 0.4}};
  const ZbGraph g = ZeroBubbleGraph(t, {100, 200, 300});
  EXPECT_EQ(g.forward_in, (std::vector<double>{0, 0.1, 0.2}));
  EXPECT_EQ(g.backward_in, (std::vector<double>{0.3, 0.4, 0}));
  EXPECT_EQ(g.mem_f, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(g.mem_b, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(g.mem_w, (std::vector<int64_t>{-10, -20, -30}));
  EXPECT_EQ(g.max_mem, (std::vector<int64_t>{100, 200, 300}));
  EXPECT_EQ(g.b, (std::vector<double>{4, 5, 6}));
}

// Correctness, not time: on grid cases the auto scheduler's simulated step
// is no longer than the heuristic's (lowered the better way) on the same
// model and limit, and the heuristic reported is that one.
class AutoVersusHeuristicTest : public ::testing::TestWithParam<Case> {};

TEST_P(AutoVersusHeuristicTest, AutoIsNeverSlower) {
  const Case& c = GetParam();
  const ModelFile file = GridModel(c.costs, c.pp);
  ASSERT_OK_AND_ASSIGN(HeuristicResult h,
                       ZeroBubbleHeuristic(OneStagePerRank(file, c.pp),
                                           Limit(c.cap_units * kUnit), c.pp, c.m));
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult r,
                       AutoSchedule(file, {.pp = c.pp, .microbatches = c.m,
                                           .memory_limit = c.cap_units * kUnit}));
  ASSERT_TRUE(r.heuristic_us.has_value());
  EXPECT_DOUBLE_EQ(*r.heuristic_us, h.evaluation.makespan_us);
  EXPECT_LE(r.evaluation.makespan_us, h.evaluation.makespan_us + 1e-9);
  EXPECT_TRUE(r.evaluation.fits);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, AutoVersusHeuristicTest,
    ::testing::Values(Case{kBalanced, 4, 8, 4, ""}, Case{kTypical, 4, 8, 6, ""},
                      Case{kHeavy, 4, 16, 8, ""}, Case{kTypical, 8, 16, 12, ""},
                      Case{kHeavy, 8, 16, 8, ""}));

}  // namespace
}  // namespace jitpipe::zero_bubble_heuristic_test
