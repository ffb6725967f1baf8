// The receive-offset chooser: free transfers give jit, no cap gives the
// smallest hiding k, and within a cap that forbids posting every receive
// early a per-receive k beats both jit and early on the simulated step.
#include "planning/recv_offsets.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "planning/schedule_eval.h"
#include "scheduler/analysis/validate.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::recv_offsets_test {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// F 1, I 1.1, W 0.7; 1 MiB activations sent, 4 MiB stashed; a latency.
Model Costs(double latency_us) {
  Model m;
  m.defaults.forward_us = 1;
  m.defaults.backward_input_us = 1.1;
  m.defaults.backward_weight_us = 0.7;
  m.defaults.input_bytes = kMiB;
  m.defaults.output_bytes = kMiB;
  m.defaults.stash_bytes = 4 * kMiB;
  m.p2p.latency_us = latency_us;
  return m;
}

TrainingMemory Limit(int64_t bytes) {
  return TrainingMemory{.optimizer = {.kind = OptimizerKind::kNone},
                        .device = {.memory_bytes = bytes}};
}

Schedule Early(const GenerateOptions& spec) {
  absl::StatusOr<Schedule> s = Generate(spec);
  EXPECT_OK(s);
  absl::StatusOr<Schedule> early = Lower(*s, {.recv = RecvPlacement::kEarly});
  EXPECT_OK(early);
  return *early;
}

int64_t WorstPlannedPeak(const Schedule& lowered, const Model& model) {
  absl::StatusOr<std::vector<RankMemoryPlan>> plans =
      PlanMemory(lowered, model, {.arena = false}, 1);
  EXPECT_OK(plans);
  int64_t worst = 0;
  for (const RankMemoryPlan& p : *plans) worst = std::max(worst, p.peak.bytes);
  return worst;
}

struct Case {
  std::string schedule;
  int v = 1;
};

class ChooserTest : public ::testing::TestWithParam<Case> {};

// Free transfers: nothing to hide, every k is 0 (the jit program).
TEST_P(ChooserTest, FreeTransfersGiveJustInTime) {
  const Schedule early = Early({GetParam().schedule, 4, 8, GetParam().v});
  ASSERT_OK_AND_ASSIGN(RecvOffsets offsets, ChooseRecvOffsets(early, Costs(0), {}));
  for (const auto& [key, k] : offsets.ahead) EXPECT_EQ(k, 0);
  EXPECT_FALSE(offsets.ahead.empty());
}

// Latency 0.1 < one compute: without a cap each receive is posted one
// compute ahead or, where early posts it later, there (k 0 where early
// posts it right before its consumer); the step equals early's, never
// slower than jit's (equal for GPipe, whose step the latency does not set
// once REDUCE_GRAD is modelled).
TEST_P(ChooserTest, WithoutACapTheStepIsEarlys) {
  const Model model = Costs(0.1);
  const Schedule early = Early({GetParam().schedule, 4, 8, GetParam().v});
  ASSERT_OK_AND_ASSIGN(RecvOffsets offsets, ChooseRecvOffsets(early, model, {}));
  for (const auto& [key, k] : offsets.ahead) {
    EXPECT_TRUE(k <= 1 || k == kRecvAheadAll) << KindName(key.kind) << key.stage;
  }
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({GetParam().schedule, 4, 8, GetParam().v}));
  const TrainingMemory none = Limit(int64_t{1} << 40);
  ASSERT_OK_AND_ASSIGN(Evaluation jit, EvaluateSchedule(s, model, none, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(Evaluation at_early,
                       EvaluateSchedule(s, model, none, RecvPlacement::kEarly));
  ASSERT_OK_AND_ASSIGN(Evaluation offset,
                       EvaluateSchedule(s, model, none, RecvPlacement::kOffset));
  EXPECT_DOUBLE_EQ(offset.makespan_us, at_early.makespan_us);
  EXPECT_LE(offset.makespan_us, jit.makespan_us);
}

INSTANTIATE_TEST_SUITE_P(Pp4, ChooserTest,
                         ::testing::Values(Case{"1f1b"}, Case{"gpipe"}, Case{"zb-h1"},
                                           Case{"zbv", 2}, Case{"interleaved-1f1b", 2}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.schedule;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ZB-V at pp 4, m 8, latency 0.1: jit's worst planned peak is 43 MiB;
// posting every receive early needs 44 MiB on rank 1. With 43 MiB per rank
// early does not fit, jit exposes the latency on every receive, and the
// per-receive offsets hide it where the cap allows: faster than jit,
// within the cap, deadlock-free.
TEST(ChooserTest, PerReceiveOffsetsBeatJitAndEarlyWithinACap) {
  const Model model = Costs(0.1);
  ASSERT_OK_AND_ASSIGN(Schedule s, Generate({"zbv", 4, 8, 2}));
  const int64_t cap = 43 * kMiB;
  const TrainingMemory limit = Limit(cap);
  ASSERT_OK_AND_ASSIGN(Evaluation jit, EvaluateSchedule(s, model, limit, RecvPlacement::kJit));
  ASSERT_OK_AND_ASSIGN(Evaluation early,
                       EvaluateSchedule(s, model, limit, RecvPlacement::kEarly, true));
  ASSERT_OK_AND_ASSIGN(Evaluation offset,
                       EvaluateSchedule(s, model, limit, RecvPlacement::kOffset));
  EXPECT_TRUE(jit.fits);
  EXPECT_FALSE(early.fits);
  EXPECT_TRUE(offset.fits);
  EXPECT_LT(offset.makespan_us, jit.makespan_us);
  EXPECT_LE(offset.makespan_us, early.makespan_us);

  ASSERT_OK_AND_ASSIGN(Schedule lowered,
                       Lower(s, EvaluationLowering(model, limit, RecvPlacement::kOffset)));
  EXPECT_OK(Validate(lowered, {.semantics = CommSemantics::kRelaxed}));
  EXPECT_LE(WorstPlannedPeak(lowered, model), cap);
  // Some receives are ahead, not all of them as early as early posts them.
  ASSERT_OK_AND_ASSIGN(RecvOffsets leads, RecvLeads(lowered));
  ASSERT_OK_AND_ASSIGN(Schedule early_program, Lower(s, {.recv = RecvPlacement::kEarly}));
  ASSERT_OK_AND_ASSIGN(RecvOffsets early_leads, RecvLeads(early_program));
  int ahead = 0, short_of_early = 0;
  for (const auto& [key, k] : leads.ahead) {
    ahead += k > 0 ? 1 : 0;
    short_of_early += k < early_leads.ahead.at(key) ? 1 : 0;
  }
  EXPECT_GT(ahead, 0);
  EXPECT_GT(short_of_early, 0);
}

// A cap below what jit itself needs moves nothing over the actions that
// exceed it: the planned peak stays jit's.
TEST(ChooserTest, ACapBelowJitKeepsJitsPeak) {
  const Model model = Costs(1.5);
  const Schedule early = Early({"gpipe", 4, 8, 1});
  ASSERT_OK_AND_ASSIGN(Schedule jit_program, Lower(*Generate({"gpipe", 4, 8, 1})));
  const int64_t jit_peak = WorstPlannedPeak(jit_program, model);
  ASSERT_OK_AND_ASSIGN(RecvOffsets offsets,
                       ChooseRecvOffsets(early, model, std::vector<int64_t>(4, 0)));
  for (const auto& [key, k] : offsets.ahead) EXPECT_EQ(k, 0);
  ASSERT_OK_AND_ASSIGN(Schedule placed, PlaceRecvsAhead(early, offsets));
  EXPECT_EQ(WorstPlannedPeak(placed, model), jit_peak);
}

TEST(ChooserTest, RefusesCapsOfTheWrongCount) {
  const Schedule early = Early({"1f1b", 4, 8, 1});
  absl::StatusOr<RecvOffsets> bad = ChooseRecvOffsets(early, Costs(0.1), {1, 2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<RecvOffsets> negative =
      ChooseRecvOffsets(early, Costs(0.1), {1, -2, 3, 4});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace jitpipe::recv_offsets_test
