// PlanEveryRank hands every rank's plan and summary to its visitor in rank
// order whatever the batch size, with both policies' peaks; a visitor's
// error stops it.
#include "memory/plan_every_rank.h"

#include <vector>

#include "gtest/gtest.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/skewed_model.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::plan_every_rank_test {
namespace {

TEST(PlanEveryRankTest, VisitsEveryRankInOrderWithBothPolicies) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"interleaved-1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
  const Model model = testing::SkewedModel(lowered.num_stages());
  for (MemoryPolicy policy : {MemoryPolicy::kJit, MemoryPolicy::kEager}) {
    PlanOptions options;
    options.policy = policy;
    for (int threads : {1, 3, 0}) {
      std::vector<RankPlanSummary> seen;
      ASSERT_OK(PlanEveryRank(lowered, model, options, threads,
                              [&](const RankPlanSummary& s, RankMemoryPlan& plan) {
                                EXPECT_EQ(plan.rank, s.rank);
                                seen.push_back(s);
                                return absl::OkStatus();
                              }));
      ASSERT_EQ(seen.size(), 4u);
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(seen[r].rank, r);
        ASSERT_OK_AND_ASSIGN(RankMemoryPlan jit,
                             PlanRankMemory(lowered, model, r, {.policy = MemoryPolicy::kJit}));
        ASSERT_OK_AND_ASSIGN(RankMemoryPlan eager,
                             PlanRankMemory(lowered, model, r, {.policy = MemoryPolicy::kEager}));
        EXPECT_EQ(seen[r].jit_peak, jit.peak.bytes) << r;
        EXPECT_EQ(seen[r].eager_peak, eager.peak.bytes) << r;
        EXPECT_EQ(seen[r].peak, policy == MemoryPolicy::kJit ? jit.peak.bytes : eager.peak.bytes);
        EXPECT_LT(seen[r].jit_peak, seen[r].eager_peak) << r;
      }
    }
  }
  int visits = 0;
  const absl::Status stopped = PlanEveryRank(lowered, model, {}, 1,
                                             [&](const RankPlanSummary&, RankMemoryPlan&) {
                                               ++visits;
                                               return absl::CancelledError("enough");
                                             });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(visits, 1);
}

// Under the receive bound the order shared by every rank gives each rank
// the plan it gets alone (PlanRankMemory builds its own).
TEST(PlanEveryRankTest, TheSharedReceiveOrderGivesEachRanksOwnPlan) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"zbv", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
  const Model model = testing::SkewedModel(lowered.num_stages());
  PlanOptions options;
  options.send_completion = SendCompletionModel::kReceive;
  for (int threads : {1, 2}) {
    int visits = 0;
    ASSERT_OK(PlanEveryRank(lowered, model, options, threads,
                            [&](const RankPlanSummary& s, RankMemoryPlan& plan) {
                              ++visits;
                              absl::StatusOr<RankMemoryPlan> alone =
                                  PlanRankMemory(lowered, model, s.rank, options);
                              EXPECT_OK(alone);
                              if (!alone.ok()) return alone.status();
                              EXPECT_EQ(plan.peak.bytes, alone->peak.bytes) << s.rank;
                              EXPECT_EQ(plan.arena.arena_bytes, alone->arena.arena_bytes);
                              EXPECT_EQ(plan.arena.offsets, alone->arena.offsets) << s.rank;
                              return absl::OkStatus();
                            }));
    EXPECT_EQ(visits, 4);
  }
}

}  // namespace
}  // namespace jitpipe::plan_every_rank_test
