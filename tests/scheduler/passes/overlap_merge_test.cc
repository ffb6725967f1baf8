// The overlap pass's merge of the last I and W of the rank that ends the
// step (overlap_merge.h), judged by the simulator as the pass is driven
// under a model (stages/predict: Predict with overlap).
#include "scheduler/passes/overlap_merge.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/analysis/validate.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/overlap_reduce.h"
#include "stages/predict/predict.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::overlap_merge_test {
namespace {

// F = I = W = 1 us per stage; a stage's reduction takes 1 us (stage 0:
// `stage0_reduce_us`, every other stage: `reduce_us`) in 8 buckets: fp32
// gradients over dp 2 at 2 GB/s, no latency.
Model Unit(double reduce_us, double stage0_reduce_us) {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1;
  m.defaults.backward_weight_us = 1;
  m.defaults.param_bytes = static_cast<int64_t>(reduce_us * 2000);
  StageOverride stage0;
  stage0.index = 0;
  stage0.spec.param_bytes = static_cast<int64_t>(stage0_reduce_us * 2000);
  m.stages.push_back(stage0);
  m.dp.size = 2;
  m.dp.link.gb_per_s = 2;
  m.dp.buckets = 8;
  return m;
}

struct Case {
  std::string name;
  std::string schedule;  // pp 4, 16 microbatches, 2 stages per rank
  double reduce_us;
  double stage0_reduce_us;
  int merged_rank;           // the rank whose last I and W merge; -1: none
  double exposed_split_us;   // exposed reduction with every I and W split
  double exposed_merged_us;  // with the merge allowed
  // The explanation of the last decision (the rank that keeps its split).
  std::string last_decision;
};

class OverlapMergeTest : public ::testing::TestWithParam<Case> {};

int LastCompute(const RankProgram& program) {
  for (int p = static_cast<int>(program.size()) - 1; p >= 0; --p) {
    if (IsCompute(program[p].kind)) return p;
  }
  return -1;
}

TEST_P(OverlapMergeTest, MergesOnlyWhereTheStepGetsShorter) {
  const Case& c = GetParam();
  const Model model = Unit(c.reduce_us, c.stage0_reduce_us);
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = c.schedule, .pp = 4,
                                             .microbatches = 16, .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Prediction split,
                       Predict(s, model, {.overlap = true,
                                          .last_backward = LastBackward::kKeepSplit}));
  ASSERT_OK_AND_ASSIGN(Prediction merged, Predict(s, model, {.overlap = true}));
  EXPECT_TRUE(split.overlap_merges.empty());
  EXPECT_DOUBLE_EQ(split.simulation.exposed_reduce_us, c.exposed_split_us);
  EXPECT_DOUBLE_EQ(merged.simulation.exposed_reduce_us, c.exposed_merged_us);
  // The step never gets longer, and the program stays valid.
  EXPECT_LE(merged.simulation.makespan_us, split.simulation.makespan_us + 1e-9);
  EXPECT_OK(Validate(merged.lowered));
  ASSERT_FALSE(merged.overlap_merges.empty());
  EXPECT_EQ(merged.overlap_merges.back().ToString(), c.last_decision);
  if (c.merged_rank < 0) {
    EXPECT_EQ(merged.lowered.ranks, split.lowered.ranks);  // the split, unchanged
    return;
  }
  EXPECT_TRUE(merged.overlap_merges.front().merged);
  EXPECT_LT(merged.simulation.makespan_us, split.simulation.makespan_us);
  // The merged rank ends with the B, and the stage's reduction follows it.
  const RankProgram& program = merged.lowered.ranks[c.merged_rank];
  const int b_at = LastCompute(program);
  ASSERT_GE(b_at, 0);
  const Action& b = program[b_at];
  EXPECT_EQ(b.kind, ActionKind::kBackward) << b.ToString();
  auto reduce = std::find_if(program.begin() + b_at, program.end(), [&](const Action& a) {
    return a.kind == ActionKind::kReduceGrad && a.stage == b.stage;
  });
  ASSERT_NE(reduce, program.end());
  for (auto it = program.begin() + b_at + 1; it != reduce; ++it) {
    EXPECT_TRUE(IsSendRecv(it->kind)) << it->ToString();
  }
  EXPECT_EQ(std::count_if(program.begin(), program.end(),
                          [&](const Action& a) {
                            return a.stage == b.stage && a.microbatch == b.microbatch &&
                                   (a.kind == ActionKind::kBackwardInput ||
                                    a.kind == ActionKind::kBackwardWeight);
                          }),
            0);
  // The memory plan: the B's stage input and stash are freed at its end.
  ASSERT_OK_AND_ASSIGN(RankBuffers buffers,
                       ComputeBufferLifetimes(merged.lowered, model, c.merged_rank,
                                              {.policy = MemoryPolicy::kJit}));
  int checked = 0;
  for (const Buffer& buffer : buffers.buffers) {
    if (buffer.stage != b.stage || buffer.microbatch != b.microbatch) continue;
    if (buffer.kind != BufferKind::kStash && buffer.kind != BufferKind::kInput) continue;
    EXPECT_EQ(buffer.free_index, b_at) << buffer.ToString();
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OverlapMergeTest,
    ::testing::Values(
        // Stage 0 reduces for 2 us, the others for 1: rank 0 (stages 0 and
        // 4) ends the step with 0I15 0W15, and stage 0 sends nothing, so its
        // B costs no peer anything: 1.125 us exposed (2 - 7/8 streamed over
        // the W) becomes one bucket, 0.25 us, and the step 0.875 us shorter.
        // Rank 1 then ends it; its B would hold 1SEND_B15 back by 2 us.
        Case{"InterleavedZbMerges", "interleaved-zb", 1, 2, 0, 1.125, 0.25,
             "rank 1: 1I15 1W15 kept split: merging lengthens the step from 99.25 us to "
             "101.25 us"},
        // The regime (every stage's reduction 2 us, W 1 us): ZB-V's
        // rank 3 ends with 3I15 and five Ws; the B would hold 3SEND_B15 back
        // by 6 us, so the split stays and 1.125 us (28%) stays exposed.
        Case{"ZbvKeepsTheSplit", "zbv", 2, 2, -1, 1.125, 1.125,
             "rank 3: 3I15 3W15 kept split: merging lengthens the step from 100.12 us to "
             "106.12 us"},
        // Every rank ends at the same time: rank 0's merge ends rank 0
        // earlier, but rank 1 cannot merge without lengthening the step, so
        // the step is no shorter and rank 0's merge is undone.
        Case{"InterleavedZbTiedRanksUndo", "interleaved-zb", 2, 2, -1, 1.125, 1.125,
             "rank 1: 1I15 1W15 kept split: merging lengthens the step from 100.12 us to "
             "101.25 us"}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

TEST(OverlapMergeTest, UndoneMergesSayWhy) {
  const Model model = Unit(2, 2);
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "interleaved-zb", .pp = 4,
                                             .microbatches = 16, .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(s, model, {.overlap = true}));
  ASSERT_EQ(p.overlap_merges.size(), 2u);
  EXPECT_TRUE(p.overlap_merges[0].undone);
  EXPECT_FALSE(p.overlap_merges[0].merged);
  EXPECT_EQ(p.overlap_merges[0].ToString(),
            "rank 0: 0I15 0W15 kept split: merging ends the rank earlier but not the step, "
            "which another rank that keeps its split also ends (step 100.12 us)");
}

// Without a step-time function (lower --overlap) nothing is merged.
TEST(OverlapMergeTest, NeedsAStepTime) {
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({.schedule = "interleaved-zb", .pp = 4,
                                             .microbatches = 16, .stages_per_rank = 2}));
  ASSERT_OK_AND_ASSIGN(Prediction lowered, Predict(s, Unit(1, 2)));
  ASSERT_OK_AND_ASSIGN(OverlapReduceResult r, OverlapReduceWithReport(lowered.lowered));
  EXPECT_TRUE(r.merges.empty());
  for (const RankProgram& program : r.schedule.ranks) {
    EXPECT_EQ(std::count_if(program.begin(), program.end(),
                            [](const Action& a) { return a.kind == ActionKind::kBackward; }),
              0);
  }
}

}  // namespace
}  // namespace jitpipe::overlap_merge_test
