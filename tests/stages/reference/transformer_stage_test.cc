// The transformer stage: its sizes, its refusals, and a pipelined in-process
// replay of every built-in schedule whose loss and every parameter gradient
// equal the unpipelined reference's (transformer_reference.h) to 1e-5
// relative, with each rank's measured peak memory equal to its plan's.
#include "stages/reference/transformer_stage.h"

#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/transformer_reference.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::transformer_stage_test {
namespace {

constexpr double kTolerance = 1e-5;

TransformerBlockShape TinyShape() {
  TransformerBlockShape s;
  s.hidden = 16;
  s.heads = 4;
  s.kv_heads = 2;
  s.ffn = 24;
  s.seq = 6;
  s.batch = 2;
  s.vocab = 23;
  return s;
}

TransformerOptions Options(int layers, int stages) {
  TransformerOptions o;
  o.shape = TinyShape();
  o.seed = 5;
  absl::StatusOr<std::vector<TransformerStageParts>> parts = EvenTransformerParts(layers, stages);
  EXPECT_TRUE(parts.ok()) << parts.status();
  if (parts.ok()) o.parts = *parts;
  return o;
}

TEST(TransformerStageTest, ReportsItsSizes) {
  const TransformerOptions o = Options(4, 2);  // E + 2 layers | 2 layers + head
  ASSERT_TRUE(ValidateTransformerOptions(o).ok());
  const TransformerBlockShape& s = o.shape;
  const int64_t r = s.rows(), h = s.hidden;
  TransformerStage first(o, MlpLayout{2, 1, 2, 1}, 0, 0, nullptr);
  TransformerStage last(o, MlpLayout{2, 1, 2, 1}, 1, 0, nullptr);
  EXPECT_EQ(first.Sizes().input_bytes, 8 * r);  // token ids
  EXPECT_EQ(first.Sizes().output_bytes, 4 * r * h);
  EXPECT_EQ(last.Sizes().input_bytes, 4 * r * h);
  EXPECT_EQ(last.Sizes().output_bytes, 4);  // the loss
  EXPECT_EQ(first.Sizes().stash_bytes, 4 * 2 * DecoderLayerStashFloats(s));
  EXPECT_EQ(last.Sizes().stash_bytes, 4 * (2 * DecoderLayerStashFloats(s) + LossHeadStashFloats(s)));
  EXPECT_EQ(first.Sizes().param_grad_bytes,
            4 * (s.vocab * h + 2 * DecoderLayerParamFloats(s)));
  EXPECT_EQ(last.Sizes().param_grad_bytes,
            4 * (2 * DecoderLayerParamFloats(s) + h + h * s.vocab));
}

TEST(TransformerStageTest, RefusesBadPartsAndBuffers) {
  TransformerOptions o = Options(4, 2);
  o.parts[1].first_layer = 3;
  EXPECT_FALSE(ValidateTransformerOptions(o).ok());
  EXPECT_FALSE(EvenTransformerParts(1, 4).ok());  // a middle stage would be empty
  o = Options(4, 2);
  o.shape.hidden = 12;  // head size 3: odd, no rotary pairs
  EXPECT_FALSE(ValidateTransformerOptions(o).ok());
  o = Options(4, 2);
  TransformerStage stage(o, MlpLayout{2, 1, 2, 1}, 1, 0, nullptr);
  std::vector<std::byte> small(8);
  ExecutionContext host;
  const absl::Status s = stage.Forward(host, 0, small, {}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input buffer has 8 bytes"), std::string::npos) << s;
}

struct Case {
  std::string schedule;
  int dp;
};

class TransformerReplayTest : public ::testing::TestWithParam<Case> {};

// One replayed step of pp 2, 4 microbatches: the loss and every gradient as
// the reference's; each rank's measured peak exactly the plan's.
TEST_P(TransformerReplayTest, MatchesTheReferenceAndThePlan) {
  const Case& c = GetParam();
  absl::StatusOr<Schedule> generated = Generate({c.schedule, 2, 4, 0});
  if (!generated.ok()) GTEST_SKIP() << generated.status();
  ASSERT_OK_AND_ASSIGN(Schedule lowered, LowerForReplay(*generated));
  const MlpLayout layout = MlpLayout::Of(lowered, c.dp);
  const TransformerOptions options = Options(layout.stages_per_chain + 1, layout.stages_per_chain);
  ASSERT_TRUE(ValidateTransformerOptions(options).ok());
  TransformerStageFactory factory(options, layout);
  Model base;
  base.dp.size = c.dp;
  ASSERT_OK_AND_ASSIGN(Model model, ModelWithStageSizes(base, lowered.num_stages(), factory));
  ASSERT_OK_AND_ASSIGN(ReplayPlan plan, PlanReplay(lowered, model, MemoryPolicy::kJit));
  ReplayOptions run;
  run.dp = c.dp;
  ASSERT_OK_AND_ASSIGN(ReplayResult result,
                       RunInProcess(plan.schedule, plan.executable, plan.plans, factory, run));
  const MlpReference reference = RunTransformerReference(options, layout);
  ASSERT_EQ(result.step_loss.size(), 1u);
  ASSERT_OK_AND_ASSIGN(
      MlpComparison comparison,
      CompareWithReference(
          reference, result.step_loss[0], layout,
          [&](int stage, int replica) { return factory.FinishedGrads(stage, replica); },
          ReduceKind::kAllReduce));
  EXPECT_TRUE(comparison.Within(kTolerance)) << comparison.ToString();
  EXPECT_GT(reference.loss, 1.0);  // cross entropy of ~uniform predictions: ~log(23)
  for (const RankReplay& rank : result.ranks) {
    EXPECT_EQ(rank.measured_peak_bytes, rank.planned_peak_bytes) << "rank " << rank.world_rank;
  }
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int dp : {1, 2}) out.push_back({g.name, dp});
  }
  return out;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& param) {
  std::string name = param.param.schedule + "_dp" + std::to_string(param.param.dp);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, TransformerReplayTest, ::testing::ValuesIn(Cases()),
                         CaseName);

}  // namespace
}  // namespace jitpipe::transformer_stage_test
