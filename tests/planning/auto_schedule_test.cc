// The list scheduler, the zero-bubble heuristic and the auto scheduler:
// valid programs within the memory cap, never slower than the built-ins and
// the heuristic, the lower bound by hand, the explanation, the errors.
#include "planning/auto_schedule.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planning/list_scheduler.h"
#include "planning/partition.h"
#include "planning/zero_bubble_heuristic.h"
#include "planning/transformer.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/place_recvs_ahead.h"
#include "scheduler/analysis/validate_structure.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::auto_schedule_test {
namespace {

using ::jitpipe::testing::Message;
using ::testing::HasSubstr;

constexpr int64_t kUnit = 1 << 20;  // one microbatch's stash on one rank's layers

// 2p layers, a rank's worth (two layers) costing F = I = W = 1 and one unit
// of stash; nothing sent; no parameters.
ModelFile UnitModel(int pp, double latency = 0) {
  LayeredModel m;
  for (int l = 0; l < 2 * pp; ++l) {
    m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = 0.5, .backward_input_us = 0.5,
                        .backward_weight_us = 0.5, .stash_bytes = kUnit / 2});
  }
  m.optimizer.kind = OptimizerKind::kNone;
  m.p2p.latency_us = latency;
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = m};
}

Model Staged(const ModelFile& file, int stages) {
  absl::StatusOr<Partition> cut = EvenPartition(file.layers, stages);
  EXPECT_OK(cut);
  absl::StatusOr<Model> model = StageModel(file.layers, *cut);
  EXPECT_OK(model);
  return *model;
}

TrainingMemory Limit(int64_t bytes) {
  return TrainingMemory{.optimizer = {.kind = OptimizerKind::kNone},
                        .device = {.memory_bytes = bytes}};
}

// Every F, I and W once, in dependency order on each rank, within the cap.
TEST(ListSchedulerTest, BuildsValidProgramsWithinTheCap) {
  const ModelFile file = UnitModel(4);
  for (Placement placement : {Placement::kLoop, Placement::kV}) {
    const int v = placement == Placement::kV ? 2 : 1;
    const Model model = Staged(file, 4 * v);
    ListScheduleParams p{.pp = 4, .microbatches = 8, .stages_per_rank = v,
                         .placement = placement};
    p.cap_bytes.assign(4, 3 * kUnit);
    const StageTimes times = StageTimesOf(model, StageToRank(placement, 4, v));
    ASSERT_OK_AND_ASSIGN(Schedule s, BuildListSchedule(p, times));
    EXPECT_EQ(s.name, "auto");
    EXPECT_EQ(s.TotalActions(), 3u * 4 * v * 8);
    EXPECT_OK(ValidateStructure(s));
    ASSERT_OK_AND_ASSIGN(Evaluation e,
                         EvaluateSchedule(s, model, Limit(3 * kUnit), RecvPlacement::kJit));
    EXPECT_TRUE(e.fits) << PlacementName(placement);
    EXPECT_LE(e.memory.Heaviest().activations, 3 * kUnit);
    ASSERT_OK_AND_ASSIGN(Schedule again, BuildListSchedule(p, times));
    EXPECT_EQ(again, s);  // deterministic
  }
}

TEST(ListSchedulerTest, FullBackwardAndErrors) {
  const Model model = Staged(UnitModel(2), 2);
  const StageTimes times = StageTimesOf(model, StageToRank(Placement::kLoop, 2, 1));
  ListScheduleParams p{.pp = 2, .microbatches = 4, .split_backward = false};
  ASSERT_OK_AND_ASSIGN(Schedule s, BuildListSchedule(p, times));
  for (const RankProgram& program : s.ranks) {
    for (const Action& a : program) {
      EXPECT_TRUE(a.kind == ActionKind::kForward || a.kind == ActionKind::kBackward)
          << a.ToString();
    }
  }
  p.cap_bytes = {kUnit / 4, kUnit / 4};  // below one microbatch
  EXPECT_EQ(BuildListSchedule(p, times).status().code(), absl::StatusCode::kResourceExhausted);
  p.cap_bytes = {kUnit};
  EXPECT_EQ(Message(BuildListSchedule(p, times)), "cap_bytes has 1 ranks; pp is 2");
  EXPECT_EQ(Message(BuildListSchedule({.pp = 0, .microbatches = 4}, times)),
            "pp, microbatches and stages per rank must be >= 1, got 0, 4, 1");
  EXPECT_EQ(Message(BuildListSchedule({.pp = 2, .microbatches = 4, .stages_per_rank = 3,
                                       .placement = Placement::kV},
                                      times)),
            "the list scheduler places stages in a loop, or in a V with 2 stages per rank");
}

// Unit costs, pp 4, m 8: ZB-H2's 27 when two units fit per rank... and the
// same step when one unit must do (the heuristic trades warm-up for W).
TEST(ZeroBubbleHeuristicTest, ReachesZeroBubbleMakespansUnderUnitCosts) {
  const Model model = Staged(UnitModel(4), 4);
  ASSERT_OK_AND_ASSIGN(HeuristicResult wide, ZeroBubbleHeuristic(model, Limit(8 * kUnit), 4, 8));
  EXPECT_EQ(wide.evaluation.makespan_us, 27);
  EXPECT_TRUE(wide.evaluation.fits);
  EXPECT_GT(wide.tried, 0);
  ASSERT_OK_AND_ASSIGN(HeuristicResult tight, ZeroBubbleHeuristic(model, Limit(4 * kUnit), 4, 8));
  EXPECT_LE(tight.evaluation.makespan_us, 33);  // never worse than 1F1B's
  EXPECT_LE(tight.evaluation.memory.Heaviest().total(), 4 * kUnit);
  EXPECT_EQ(ZeroBubbleHeuristic(model, Limit(kUnit / 4), 4, 8).status().code(),
            absl::StatusCode::kNotFound);
}

// By hand, pp 2, one stage per rank, F = I = W = 1 per stage, m = 4, 0.5 us
// per hop: rank 1 starts at 1 + 0.5 and is busy 12 (13.5); one microbatch's
// path is F 1 + 0.5 + F 1 + I 1 + 0.5 + I 1 + W 1 = 6.
TEST(AutoScheduleTest, LowerBoundByHand) {
  StageTimes t{.forward_us = {1, 1}, .backward_input_us = {1, 1}, .backward_weight_us = {1, 1},
               .activation_bytes = {0, 0}, .send_forward_us = {0.5, 0.5},
               .send_backward_us = {0.5, 0.5}};
  int rank = -2;
  EXPECT_DOUBLE_EQ(PipelineLowerBound(t, {0, 1}, 2, 4, &rank), 13.5);
  EXPECT_EQ(rank, 1);
  EXPECT_DOUBLE_EQ(PipelineLowerBound(t, {0, 1}, 2, 1, &rank), 6);
  EXPECT_EQ(rank, -1);  // one microbatch: the critical path
}

// Unit costs, pp 4, m 8, two units per rank: the V placement reaches its
// lower bound (3 half-stage forwards of start-up + 24 busy = 25.5), never
// slower than the best built-in and the heuristic.
TEST(AutoScheduleTest, ReachesTheBoundAndBeatsBuiltInsAndTheHeuristic) {
  const ModelFile file = UnitModel(4);
  AutoScheduleOptions o{.pp = 4, .microbatches = 8, .memory_limit = 8 * kUnit};
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult r, AutoSchedule(file, o));
  EXPECT_DOUBLE_EQ(r.evaluation.makespan_us, 25.5);
  EXPECT_DOUBLE_EQ(r.best_lower_bound_us, 25.5);
  EXPECT_TRUE(r.evaluation.fits);
  EXPECT_FALSE(r.best_builtin.empty());
  EXPECT_LE(r.evaluation.makespan_us, r.best_builtin_us);
  ASSERT_TRUE(r.heuristic_us.has_value());
  EXPECT_LE(r.evaluation.makespan_us, *r.heuristic_us);
  EXPECT_EQ(r.schedule.name, "auto");
  EXPECT_OK(ValidateStructure(r.schedule));
  EXPECT_FALSE(r.budget_exhausted);
  const std::string why = r.Explain();
  EXPECT_THAT(why, HasSubstr("chose: "));
  EXPECT_THAT(why, HasSubstr("step: 25.5 us; lower bound 25.5 us"));
  EXPECT_THAT(why, HasSubstr("binding constraint: "));
  EXPECT_THAT(why, HasSubstr("best built-in schedule that fits: "));
  EXPECT_THAT(why, HasSubstr("zero-bubble heuristic: 27 us"));
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult again, AutoSchedule(file, o));
  EXPECT_EQ(again.schedule, r.schedule);  // deterministic
}

// With latency and a tight cap, still never slower than either reference.
TEST(AutoScheduleTest, NeverSlowerThanTheReferencesUnderATightCap) {
  for (double cap : {4.0, 6.0}) {
    ASSERT_OK_AND_ASSIGN(AutoScheduleResult r,
                         AutoSchedule(UnitModel(4, 0.1), {.pp = 4, .microbatches = 12,
                                                          .memory_limit = cap * kUnit}));
    EXPECT_LE(r.evaluation.memory.Heaviest().total(), cap * kUnit);
    if (!r.best_builtin.empty()) {
      EXPECT_LE(r.evaluation.makespan_us, r.best_builtin_us);
    }
    if (r.heuristic_us) {
      EXPECT_LE(r.evaluation.makespan_us, *r.heuristic_us);
    }
    EXPECT_GE(r.evaluation.makespan_us, r.best_lower_bound_us);
  }
}

// A version 1 model (per-stage costs) searches one stage per rank.
TEST(AutoScheduleTest, VersionOneModelsAndTheBudget) {
  ModelFile v1;
  v1.stages.defaults.forward_us = 1;
  v1.stages.defaults.backward_input_us = 1;
  v1.stages.defaults.backward_weight_us = 1;
  v1.stages.defaults.stash_bytes = 1024;
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult r,
                       AutoSchedule(v1, {.pp = 4, .microbatches = 8, .memory_limit = 8 * 1024}));
  EXPECT_EQ(r.schedule.stages_per_rank, 1);
  EXPECT_EQ(r.evaluation.makespan_us, 27);
  // A budget of nothing ends the search at the first schedule that fits.
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult quick,
                       AutoSchedule(UnitModel(4), {.pp = 4, .microbatches = 8,
                                                   .memory_limit = 8 * kUnit,
                                                   .time_budget = absl::Nanoseconds(1)}));
  EXPECT_TRUE(quick.budget_exhausted);
  EXPECT_TRUE(quick.evaluation.fits);
  EXPECT_THAT(quick.Explain(), HasSubstr("the time budget ended the search early"));
}

// The result is the program judged: the compute order lowered as it was
// judged, with the cut and the model's fingerprint recorded.
TEST(AutoScheduleTest, TheResultIsTheLoweredProgramJudged) {
  ModelFile file = UnitModel(4, 0.1);
  file.fingerprint = "fnv1a64:0123456789abcdef";
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult r,
                       AutoSchedule(file, {.pp = 4, .microbatches = 8, .memory_limit = 6 * kUnit}));
  EXPECT_FALSE(r.compute_only.lowered);
  EXPECT_TRUE(r.schedule.lowered);
  ASSERT_OK_AND_ASSIGN(Schedule lowered,
                       Lower(r.compute_only,
                             EvaluationLowering(Staged(file, 4), Limit(6 * kUnit),
                                                r.evaluation.recv)));
  if (r.evaluation.recv != RecvPlacement::kOffset) {
    EXPECT_EQ(lowered.ranks, r.schedule.ranks);
  } else {
    // The offsets depend on the cut's costs: the same actions per rank.
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(lowered.ranks[rank].size(), r.schedule.ranks[rank].size());
    }
  }
  EXPECT_EQ(r.schedule.layout, r.layout);
  EXPECT_FALSE(r.layout.empty());
  EXPECT_EQ(r.cut_method, "balanced");
  EXPECT_EQ(r.schedule.model_fingerprint, file.fingerprint);
  // A given layout is every candidate's cut.
  AutoScheduleOptions laid{.pp = 4, .microbatches = 8, .memory_limit = 6 * kUnit};
  laid.partition.layout = "t*3|t*2|t*2|t";
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult l, AutoSchedule(file, laid));
  EXPECT_EQ(l.layout, "t*3|t*2|t*2|t");
  EXPECT_EQ(l.cut_method, "layout");
}

// With latency, every candidate is judged under jit, early and per-receive
// offsets; the explanation names the placement chosen and how many of its
// receives stand how many computes ahead, which adds up to its RECVs.
TEST(AutoScheduleTest, ExplainsTheReceivePlacementAndItsOffsets) {
  for (double cap : {4.0, 5.0, 8.0}) {
    ASSERT_OK_AND_ASSIGN(AutoScheduleResult r,
                         AutoSchedule(UnitModel(4, 0.1), {.pp = 4, .microbatches = 8,
                                                          .memory_limit = cap * kUnit}));
    EXPECT_TRUE(r.schedule.lowered);
    const std::string why = r.Explain();
    EXPECT_THAT(why, HasSubstr(absl::StrCat("--recv ", RecvPlacementName(r.evaluation.recv))));
    EXPECT_THAT(why, HasSubstr(absl::StrCat("computes ahead of the consumer: ", r.recv_leads)));
    int recvs = 0;
    for (const RankProgram& program : r.schedule.ranks) {
      for (const Action& a : program) recvs += IsRecv(a.kind) ? 1 : 0;
    }
    int counted = 0;
    for (absl::string_view part : absl::StrSplit(r.recv_leads, ", ")) {
      int n = 0;
      ASSERT_TRUE(absl::SimpleAtoi(part.substr(part.find(": ") + 2), &n)) << r.recv_leads;
      counted += n;
    }
    EXPECT_EQ(counted, recvs) << r.recv_leads;
    ASSERT_OK_AND_ASSIGN(RecvOffsets leads, RecvLeads(r.schedule));
    EXPECT_EQ(leads.Histogram(), r.recv_leads);
    if (r.evaluation.recv == RecvPlacement::kJit) {
      EXPECT_EQ(r.recv_leads, absl::StrCat("k=0: ", recvs));
    }
  }
}

// A shape `jitpipe model` writes (an embedding, decoder layers, a loss head
// heavier than a layer): the step judged is the lowered program's simulated
// step under the recorded cut.
TEST(AutoScheduleTest, ARealShapeSimulatesToItsStep) {
  TransformerShape shape{.layers = 8, .hidden = 1024, .heads = 8, .kv_heads = 2, .ffn = 2816,
                         .vocab = 32000, .seq = 2048, .swiglu = true, .rmsnorm = true,
                         .tflops = 400};
  ASSERT_OK_AND_ASSIGN(LayeredModel layers, BuildTransformerModel(shape));
  layers.device.memory_bytes = int64_t{2} << 30;
  const ModelFile file{.version = kLayeredModelVersion, .stages = {}, .layers = layers};
  ASSERT_OK_AND_ASSIGN(AutoScheduleResult r, AutoSchedule(file, {.pp = 4, .microbatches = 8}));
  EXPECT_GT(r.evaluation.makespan_us, 0);
  EXPECT_TRUE(r.evaluation.fits);
  ASSERT_OK_AND_ASSIGN(StagedModel staged, ModelForSchedule(file, r.schedule));
  EXPECT_EQ(staged.how, "recorded");
  ASSERT_OK_AND_ASSIGN(Prediction p, Predict(r.schedule, staged.model));
  EXPECT_DOUBLE_EQ(p.simulation.makespan_us, r.evaluation.makespan_us);
}

TEST(AutoScheduleTest, Errors) {
  const ModelFile file = UnitModel(2);
  EXPECT_EQ(Message(AutoSchedule(file, {.pp = 2, .microbatches = 4})),
            "the auto scheduler needs a memory limit: give one, or a model with device memory");
  EXPECT_EQ(Message(AutoSchedule(file, {.pp = 0, .microbatches = 4, .memory_limit = 1})),
            "pp and microbatches must be >= 1, got 0 and 4");
  EXPECT_EQ(Message(AutoSchedule(file, {.pp = 2, .microbatches = 4, .memory_limit = 1 << 30,
                                        .stages_per_rank = {4}})),
            "the auto scheduler places 1 or 2 stages per rank, not 4");
  EXPECT_EQ(Message(AutoSchedule(file, {.pp = 2, .microbatches = 4, .memory_limit = -1})),
            "the memory limit must be > 0 bytes, got -1");
  ModelFile v1;
  v1.stages.defaults.forward_us = 1;
  AutoScheduleOptions laid{.pp = 2, .microbatches = 4, .memory_limit = 1 << 30};
  laid.partition.layout = "t|t";
  EXPECT_EQ(Message(AutoSchedule(v1, laid)),
            "a layout needs a version 2 model (layers); this one gives per-stage costs");
  absl::StatusOr<AutoScheduleResult> none =
      AutoSchedule(file, {.pp = 2, .microbatches = 4, .memory_limit = 1000});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(none), HasSubstr("no schedule fits the memory limit: the lightest "
                                       "candidate needs "));
}

}  // namespace
}  // namespace jitpipe::auto_schedule_test
