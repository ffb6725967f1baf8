// Memory per rank, all of it: parameters, gradients, optimizer state,
// activations from the planner, the limit and the heaviest rank.
#include "planning/rank_memory.h"

#include "gtest/gtest.h"
#include "planning/partition.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::rank_memory_test {
namespace {

// Two layers of 200 bf16 parameters (400 bytes) and 1000 bytes of stash
// each; nothing sent between stages; fp32 gradients; Adam with fp32 master
// weights, sharded over dp 4; 4000 bytes per rank.
LayeredModel TwoLayers() {
  LayeredModel m;
  for (int i = 0; i < 2; ++i) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 1, .backward_input_us = 1,
                        .backward_weight_us = 1, .stash_bytes = 1000, .param_bytes = 400});
  }
  m.dp.size = 4;
  m.dp.param_dtype = Dtype::kBf16;
  m.dp.grad_dtype = Dtype::kFp32;
  m.optimizer.shard_over_dp = true;
  m.device.rank_memory_bytes = {4000, 5000};
  return m;
}

// 1F1B, pp 2, m 2: rank 0 holds both microbatches' stashes at once (2000),
// rank 1 one (1000). Per rank: 400 parameters + 800 gradients (200 fp32) +
// 200 x 12 / 4 = 600 optimizer.
TEST(RankMemoryTest, CountsEveryPartAgainstEachRanksLimit) {
  const LayeredModel layered = TwoLayers();
  ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(layered, 2));
  ASSERT_OK_AND_ASSIGN(Model model, StageModel(layered, p));
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(MemoryReport report,
                       PlanRankMemories(lowered, model, TrainingMemoryOf(layered)));
  ASSERT_EQ(report.ranks.size(), 2u);
  const RankMemory& r0 = report.ranks[0];
  EXPECT_EQ(r0.parameters, 400);
  EXPECT_EQ(r0.gradients, 800);
  EXPECT_EQ(r0.optimizer, 600);
  EXPECT_EQ(r0.activations, 2000);
  EXPECT_EQ(r0.total(), 3800);
  EXPECT_EQ(r0.limit, 4000);
  EXPECT_EQ(r0.margin(), 200);
  const RankMemory& r1 = report.ranks[1];
  EXPECT_EQ(r1.activations, 1000);
  EXPECT_EQ(r1.total(), 2800);
  EXPECT_EQ(report.heaviest, 0);
  EXPECT_TRUE(report.fits());
  // Unsharded: 200 x 12 = 2400 optimizer bytes; rank 0 misses by 1600.
  TrainingMemory whole = TrainingMemoryOf(layered);
  whole.optimizer.shard_over_dp = false;
  ASSERT_OK_AND_ASSIGN(MemoryReport big, PlanRankMemories(lowered, model, whole));
  EXPECT_EQ(big.ranks[0].total(), 5600);
  EXPECT_EQ(big.ranks[0].margin(), -1600);
  EXPECT_FALSE(big.fits());
  EXPECT_EQ(big.Tightest().rank, 0);
  // Rank 1 (4600 of 5000) fits by 400 on its own limit.
  EXPECT_TRUE(big.ranks[1].fits());
}

// FSDP counts each stage's parameters once: the resident shard (400 / dp 4
// = 100) and, from each UNSHARD to its RESHARD, the working copy (400), as
// "unsharded" at the activations' peak -- never as activations too (the
// same program used to count 400 + 400). ZeRO-3 without UNSHARD in the
// program keeps the working copy the whole step. Gradients stay whole under
// every stage (accumulated over the microbatches); ZeRO-1 and up shard the
// optimizer.
TEST(RankMemoryTest, ShardedParametersAreCountedOnce) {
  const LayeredModel layered = TwoLayers();
  ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(layered, 2));
  ASSERT_OK_AND_ASSIGN(Model model, StageModel(layered, p));
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule fsdp, Lower(s, {.fsdp = true, .reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(MemoryReport report,
                       PlanRankMemories(fsdp, model, TrainingMemoryOf(layered)));
  const RankMemory& r0 = report.ranks[0];
  EXPECT_EQ(r0.parameters, 100);
  EXPECT_EQ(r0.unsharded, 400);  // unsharded at the peak (both microbatches' stashes)
  EXPECT_EQ(r0.activations, 2000);
  EXPECT_EQ(r0.gradients, 800);
  EXPECT_EQ(r0.optimizer, 600);
  EXPECT_EQ(r0.total(), 100 + 400 + 2000 + 800 + 600);
  // ZeRO-3 in the model, no UNSHARD in the program: shard + whole copy.
  ASSERT_OK_AND_ASSIGN(Schedule plain, Lower(s, {.reduce_grad = true}));
  TrainingMemory zero3 = TrainingMemoryOf(layered);
  zero3.optimizer.zero = 3;
  ASSERT_OK_AND_ASSIGN(MemoryReport held, PlanRankMemories(plain, model, zero3));
  EXPECT_EQ(held.ranks[0].parameters, 100 + 400);
  EXPECT_EQ(held.ranks[0].unsharded, 0);
  // ZeRO-2 saves nothing at the peak: gradients whole, as ZeRO-1.
  TrainingMemory zero2 = TrainingMemoryOf(layered);
  zero2.optimizer.zero = 2;
  ASSERT_OK_AND_ASSIGN(MemoryReport two, PlanRankMemories(plain, model, zero2));
  ASSERT_OK_AND_ASSIGN(MemoryReport one, PlanRankMemories(plain, model, TrainingMemoryOf(layered)));
  EXPECT_EQ(two.ranks[0].total(), one.ranks[0].total());
  EXPECT_EQ(two.ranks[0].gradients, 800);
}

// A rank's own (smaller) limit can make a lighter rank the tight one.
TEST(RankMemoryTest, TightestIsTheSmallestMargin) {
  LayeredModel layered = TwoLayers();
  layered.device.rank_memory_bytes = {10000, 2900};
  ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(layered, 2));
  ASSERT_OK_AND_ASSIGN(Model model, StageModel(layered, p));
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(MemoryReport report,
                       PlanRankMemories(lowered, model, TrainingMemoryOf(layered)));
  EXPECT_EQ(report.heaviest, 0);
  EXPECT_EQ(report.Tightest().rank, 1);
  EXPECT_EQ(report.Tightest().margin(), 100);
  // No limit at all: the heaviest is the tightest, and everything fits.
  ASSERT_OK_AND_ASSIGN(MemoryReport free, PlanRankMemories(lowered, model, TrainingMemory{}));
  EXPECT_EQ(free.ranks[0].optimizer, 0);  // TrainingMemory{} has no optimizer
  EXPECT_TRUE(free.fits());
  EXPECT_EQ(free.Tightest().rank, 0);
}

// The planner's reduction buffer (reduce dtype other than the gradients')
// counts with activations; parameter gradients never twice.
TEST(RankMemoryTest, ReductionBuffersAreActivationsGradientsAreNot) {
  LayeredModel layered = TwoLayers();
  for (LayerCost& layer : layered.layers) layer.param_bytes = 40000;  // 20000 bf16 elements
  layered.dp.reduce_dtype = Dtype::kBf16;  // a 40000-byte reduction buffer per stage
  ASSERT_OK_AND_ASSIGN(Partition p, EvenPartition(layered, 2));
  ASSERT_OK_AND_ASSIGN(Model model, StageModel(layered, p));
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "1f1b", .pp = 2, .microbatches = 2}));
  ASSERT_OK_AND_ASSIGN(Schedule lowered, Lower(s, {.reduce_grad = true}));
  ASSERT_OK_AND_ASSIGN(int64_t peak, ActivationPeak(lowered, model, 1));
  // The reduction buffer (40000) outweighs the stash (1000, freed by the
  // last W before REDUCE_GRAD allocates it); the 80000 bytes of fp32
  // gradients are not in it.
  EXPECT_EQ(peak, 40000);
  ASSERT_OK_AND_ASSIGN(MemoryReport report,
                       PlanRankMemories(lowered, model, TrainingMemoryOf(layered)));
  EXPECT_EQ(report.ranks[1].gradients, 80000);
  EXPECT_EQ(report.ranks[1].activations, 40000);
}

}  // namespace
}  // namespace jitpipe::rank_memory_test
