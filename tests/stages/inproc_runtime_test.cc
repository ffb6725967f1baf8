// The in-process driver end to end: every built-in schedule replayed with the
// reference mlp equals the unpipelined reference trainer, measured memory
// equals the plan, the arena runs without per-buffer allocations.
#include "stages/inproc_runtime.h"

#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/ir/schedule_io.h"
#include "stages/mlp_reference.h"
#include "stages/mlp_stage.h"
#include "stages/replay_plan.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe {
namespace {

constexpr double kTolerance = 1e-5;

struct GridCase {
  std::string schedule;
  int pp;
  int microbatches;
  int dp;
};

std::string CaseName(const ::testing::TestParamInfo<std::tuple<GridCase, int>>& info) {
  const GridCase& c = std::get<0>(info.param);
  std::string name = c.schedule + "_pp" + std::to_string(c.pp) + "_m" +
                     std::to_string(c.microbatches) + "_dp" + std::to_string(c.dp) + "_" +
                     std::vector<std::string>{"jit_tracked", "eager_tracked", "jit_arena"}
                         [std::get<1>(info.param)];
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

// Every generator x pp {2, 4} x m {2pp, 3pp} x dp {1, 2}; combinations a
// generator refuses are skipped in the test (GTEST_SKIP names the reason).
std::vector<GridCase> Grid() {
  std::vector<GridCase> cases;
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int pp : {2, 4}) {
      for (int m : {2 * pp, 3 * pp}) {
        for (int dp : {1, 2}) cases.push_back({g.name, pp, m, dp});
      }
    }
  }
  return cases;
}

MlpOptions SmallMlp() {
  MlpOptions options;
  options.shape = MlpShape{8, 3, 2};
  options.seed = 7;
  return options;
}

class ReplayGridTest : public ::testing::TestWithParam<std::tuple<GridCase, int>> {};

// One replayed step: loss and every gradient as the reference's; each
// rank's measured peak exactly the plan's; the arena allocates once.
TEST_P(ReplayGridTest, MatchesTheReferenceAndThePlan) {
  const GridCase& c = std::get<0>(GetParam());
  const int mode = std::get<1>(GetParam());
  absl::StatusOr<Schedule> generated = Generate({c.schedule, c.pp, c.microbatches, 0});
  if (!generated.ok()) GTEST_SKIP() << generated.status();
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(*generated));
  MlpStageFactory factory(SmallMlp(), MlpLayout::Of(lowered, c.dp));
  Model base;
  base.dp.size = c.dp;
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(base, lowered.num_stages(), factory));
  const MemoryPolicy policy = mode == 1 ? MemoryPolicy::kEager : MemoryPolicy::kJit;
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, policy));
  InProcessOptions options;
  options.dp = c.dp;
  options.buffers = mode == 2 ? BufferMode::kArena : BufferMode::kTracked;
  ASSERT_OK_AND_ASSIGN(ReplayResult result,
                       RunInProcess(plan.schedule, plan.executable, plan.plans, factory, options));

  MlpReference reference = RunMlpReference(factory.options(), factory.layout());
  ASSERT_EQ(result.step_loss.size(), 1u);
  ASSERT_OK_AND_ASSIGN(MlpComparison comparison,
                       CompareWithReference(reference, result.step_loss[0], factory,
                                            ReduceKind::kAllReduce));
  EXPECT_TRUE(comparison.Within(kTolerance)) << comparison.ToString();
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(c.pp * c.dp));
  for (const RankReplay& rank : result.ranks) {
    EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "world rank " << rank.world_rank;
    if (options.buffers == BufferMode::kArena) {
      EXPECT_EQ(rank.buffer_heap_allocations, rank.arena_bytes > 0 ? 1 : 0);
    } else {
      EXPECT_GT(rank.buffer_heap_allocations, 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, ReplayGridTest,
                         ::testing::Combine(::testing::ValuesIn(Grid()), ::testing::Values(0, 1, 2)),
                         CaseName);

}  // namespace
}  // namespace jitpipe
