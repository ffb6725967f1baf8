// The arena algorithms (MakeGreedyBestFit: by size, by duration, each with
// and without refinement, and by start) give exactly the offsets of the plain
// scan in arena_reference.h: on random intervals, and on every rank of every
// built-in schedule planned with stage sizes that differ.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/arena.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/memory/arena_reference.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/skewed_model.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::arena_equivalence_test {
namespace {

struct Algorithm {
  PlacementOrder order;
  int refine_rounds;
};
constexpr Algorithm kAlgorithms[] = {
    {PlacementOrder::kDecreasingSize, 0},
    {PlacementOrder::kDecreasingSize, kDefaultRefineRounds},
    {PlacementOrder::kDecreasingDuration, 0},
    {PlacementOrder::kDecreasingDuration, kDefaultRefineRounds},
    {PlacementOrder::kStart, 0},
};

// Places `intervals` with every algorithm and compares with the reference.
void ExpectSameAsReference(const std::vector<LiveInterval>& intervals, int num_times,
                           int64_t alignment, const std::string& where) {
  for (const Algorithm& a : kAlgorithms) {
    const ArenaLayout fast =
        MakeGreedyBestFit(a.order, a.refine_rounds)->Place(intervals, num_times, alignment);
    const ArenaLayout plain =
        testing::ReferenceGreedy(intervals, a.order, a.refine_rounds, alignment);
    const std::string what = absl::StrCat(where, ", ", fast.algorithm, " rounds ", a.refine_rounds);
    EXPECT_EQ(fast.algorithm, plain.algorithm) << what;
    EXPECT_EQ(fast.arena_bytes, plain.arena_bytes) << what;
    EXPECT_EQ(fast.offsets, plain.offsets) << what;
    EXPECT_OK(VerifyArenaLayout(intervals, fast, alignment)) << what;
  }
}

// Sizes from a few classes (so gaps are reused, exact fits happen and
// refinement has work to do) plus odd and empty ones; lifetimes short and
// long.
std::vector<LiveInterval> RandomIntervals(std::mt19937& rng, int count, int num_times) {
  const int64_t kSizes[] = {0, 1, 63, 64, 100, 192, 1000, 4096, 4097, 12288, 30000};
  std::uniform_int_distribution<int> size_index(0, std::size(kSizes) - 1);
  std::uniform_int_distribution<int> time(0, num_times - 1);
  std::uniform_int_distribution<int> length(0, 3);
  std::vector<LiveInterval> out;
  for (int k = 0; k < count; ++k) {
    const int a = time(rng);
    // Half short (a few points), half anywhere.
    const int b = k % 2 == 0 ? std::min(num_times - 1, a + length(rng)) : time(rng);
    out.push_back({kSizes[size_index(rng)], std::min(a, b), std::max(a, b)});
  }
  return out;
}

TEST(ArenaEquivalenceTest, RandomIntervals) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 400; ++trial) {
    const int num_times = 1 + trial % 37;
    const int count = 1 + (trial * 7) % 120;
    const int64_t alignment = int64_t{1} << (trial % 4 * 3);  // 1, 8, 64, 512
    ExpectSameAsReference(RandomIntervals(rng, count, num_times), num_times, alignment,
                          absl::StrCat("trial ", trial));
  }
}

// Every stage its own sizes, none of them a multiple of the alignment.
Model DistinctModel(int num_stages) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  Model m;
  auto output = [](int stage) { return kMiB + (stage * 104729 % 53) * 8191; };
  for (int stage = 0; stage < num_stages; ++stage) {
    StageOverride o;
    o.index = stage;
    o.spec.stash_bytes = 3 * kMiB + (stage * 7919 % 61) * 4099;
    o.spec.output_bytes = output(stage);
    o.spec.input_bytes = stage > 0 ? output(stage - 1) : kMiB;
    m.stages.push_back(o);
  }
  return m;
}

// Every built-in schedule at pp 2, 4, 8, lowered with Lower()'s defaults;
// every rank under jit and eager (eager up to pp 4: its step-long receive
// buffers make the reference slow), with the skewed and the distinct model.
// Under a sanitizer pp 2 and 4 with one microbatch count (the volume is
// what costs there: 26 s of the ASan suite; the checks are the same).
TEST(ArenaEquivalenceTest, EveryRankOfEveryBuiltInSchedule) {
  int ranks = 0;
  const std::vector<int> pps =
      testing::kSanitized ? std::vector<int>{2, 4} : std::vector<int>{2, 4, 8};
  for (const GeneratorInfo& generator : AllGenerators()) {
    for (int pp : pps) {
      for (int m : {2 * pp, 3 * pp + 1}) {
        if (testing::kSanitized && m != 2 * pp) continue;
        absl::StatusOr<Schedule> generated = Generate({generator.name, pp, m, 0});
        if (!generated.ok()) continue;  // parameters the schedule does not support
        ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(*generated));
        for (const Model& model :
             {testing::SkewedModel(lowered.num_stages()), DistinctModel(lowered.num_stages())}) {
          for (MemoryPolicy policy : {MemoryPolicy::kJit, MemoryPolicy::kEager}) {
            if (policy == MemoryPolicy::kEager && pp > 4) continue;
            for (int rank = 0; rank < pp; ++rank, ++ranks) {
              ASSERT_OK_AND_ASSIGN(
                  RankMemoryPlan plan,
                  PlanRankMemory(lowered, model, rank, {.policy = policy, .arena = false}));
              ExpectSameAsReference(
                  ArenaIntervals(plan.buffers), plan.buffers.num_actions, kDefaultArenaAlignment,
                  absl::StrCat(generator.name, " pp", pp, " m", m, " ",
                               MemoryPolicyName(policy), " rank ", rank));
            }
          }
        }
      }
    }
  }
  EXPECT_GE(ranks, testing::kSanitized ? 100 : 500);
}

}  // namespace
}  // namespace jitpipe::arena_equivalence_test
