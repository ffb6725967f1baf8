// PlanMemory plans ranks on several threads: the plans must not depend on
// how many. Runs under ThreadSanitizer too (label "threads").
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/skewed_model.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::memory_plan_parallel_test {
namespace {

void ExpectSamePlans(const std::vector<RankMemoryPlan>& a, const std::vector<RankMemoryPlan>& b,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t r = 0; r < a.size(); ++r) {
    const std::string where = absl::StrCat(what, " rank ", r);
    EXPECT_EQ(a[r].rank, static_cast<int>(r)) << where;
    EXPECT_EQ(b[r].rank, static_cast<int>(r)) << where;
    EXPECT_EQ(a[r].peak.bytes, b[r].peak.bytes) << where;
    EXPECT_EQ(a[r].peak.index, b[r].peak.index) << where;
    EXPECT_EQ(a[r].lower_bound.bytes, b[r].lower_bound.bytes) << where;
    EXPECT_EQ(a[r].arena.algorithm, b[r].arena.algorithm) << where;
    EXPECT_EQ(a[r].arena.arena_bytes, b[r].arena.arena_bytes) << where;
    EXPECT_EQ(a[r].arena.offsets, b[r].arena.offsets) << where;
  }
}

TEST(MemoryPlanParallelTest, PlansDoNotDependOnTheThreadCount) {
  for (const char* schedule : {"interleaved-1f1b", "zbv", "dualpipev"}) {
    ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({schedule, 8, 16, 0}));
    ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
    // Stage sizes that differ, so the threads do unequal work.
    const Model model = testing::SkewedModel(lowered.num_stages());
    ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> one, PlanMemory(lowered, model, {}, 1));
    for (int threads : {0, 2, 3, 16}) {
      ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> many,
                           PlanMemory(lowered, model, {}, threads));
      ExpectSamePlans(one, many, absl::StrCat(schedule, ", ", threads, " threads"));
    }
  }
}

// A failure is the lowest failing rank's, as when planning one rank at a
// time: here ranks 1 and 3 hold a bubble, which a lowered program may not.
TEST(MemoryPlanParallelTest, ReportsTheLowestFailingRanksError) {
  ASSERT_OK_AND_ASSIGN(Schedule generated, Generate({"1f1b", 4, 8, 0}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(generated));
  for (int rank : {3, 1}) lowered.ranks[rank].insert(lowered.ranks[rank].begin() + 2, Action{});
  for (int threads : {1, 4}) {
    absl::StatusOr<std::vector<RankMemoryPlan>> planned =
        PlanMemory(lowered, Model{}, {}, threads);
    EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(testing::Message(planned), "rank 1, index 2 (): a bubble in a lowered program")
        << threads << " threads";
  }
}

}  // namespace
}  // namespace jitpipe::memory_plan_parallel_test
