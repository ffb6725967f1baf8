// The transformer stage: its sizes, its refusals, and a pipelined in-process
// replay of every built-in schedule whose loss and every parameter gradient
// equal the unpipelined reference's (transformer_reference.h) to 1e-5
// relative, with each rank's measured peak memory equal to its plan's.
#include "stages/reference/transformer_stage.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/reference/transformer_reference.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::transformer_stage_test {
namespace {

using ::jitpipe::testing::Message;

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
  // One stash segment per layer, and the head's: the arena places them apart.
  const int64_t layer = 4 * DecoderLayerStashFloats(s);
  EXPECT_EQ(first.Sizes().stash_segments, (std::vector<int64_t>{layer, layer}));
  EXPECT_EQ(last.Sizes().stash_segments,
            (std::vector<int64_t>{layer, layer, 4 * LossHeadStashFloats(s)}));
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

// The stash handed over in its segments, anywhere in memory, computes what
// the same stash back to back in one span does: bit for bit, forward and
// both backward halves, on the head's stage.
TEST(TransformerStageTest, AStashInSegmentsComputesAsOneSpan) {
  const TransformerOptions o = Options(4, 2);
  const MlpLayout layout{2, 1, 2, 1};
  TransformerStage whole_stage(o, layout, 1, 0, nullptr);
  TransformerStage split_stage(o, layout, 1, 0, nullptr);
  const StageSizes z = whole_stage.Sizes();
  ASSERT_EQ(z.stash_segments.size(), 3u);
  std::vector<std::byte> input(static_cast<size_t>(z.input_bytes));
  for (size_t i = 0; i < input.size() / sizeof(float); ++i) {
    const float x = 0.01f * static_cast<float>(i % 37) - 0.2f;
    std::memcpy(input.data() + i * sizeof(float), &x, sizeof(float));
  }
  std::vector<std::byte> out_a(4), out_b(4), whole(static_cast<size_t>(z.stash_bytes));
  std::vector<std::vector<std::byte>> pieces;
  std::vector<MutableBytes> spans;
  for (int64_t bytes : z.stash_segments) pieces.emplace_back(static_cast<size_t>(bytes));
  for (auto& piece : pieces) spans.push_back(absl::MakeSpan(piece));
  const StashView split(spans);
  const ExecutionContext host;
  ASSERT_OK(whole_stage.Forward(host, 0, input, absl::MakeSpan(out_a), absl::MakeSpan(whole)));
  ASSERT_OK(split_stage.Forward(host, 0, input, absl::MakeSpan(out_b), split));
  EXPECT_EQ(out_a, out_b);
  std::vector<std::byte> ig_a(input.size()), ig_b(input.size());
  ASSERT_OK(whole_stage.BackwardInput(host, 0, {}, absl::MakeSpan(whole), absl::MakeSpan(ig_a)));
  ASSERT_OK(split_stage.BackwardInput(host, 0, {}, split, absl::MakeSpan(ig_b)));
  EXPECT_EQ(ig_a, ig_b);
  std::vector<std::byte> pg_a(static_cast<size_t>(z.param_grad_bytes)), pg_b(pg_a.size());
  ASSERT_OK(whole_stage.BackwardWeight(host, 0, input, {}, absl::MakeSpan(whole),
                                       absl::MakeSpan(pg_a)));
  ASSERT_OK(split_stage.BackwardWeight(host, 0, input, {}, split, absl::MakeSpan(pg_b)));
  EXPECT_EQ(pg_a, pg_b);
  size_t at = 0;  // the segments' bytes are the whole span's, in order
  for (const auto& piece : pieces) {
    EXPECT_TRUE(std::equal(piece.begin(), piece.end(), whole.begin() + static_cast<long>(at)));
    at += piece.size();
  }
  EXPECT_EQ(Message(split_stage.Forward(host, 0, input, absl::MakeSpan(out_b),
                                        StashView(absl::MakeConstSpan(spans).subspan(0, 2)))),
            absl::StrCat("transformer stage 1: the stash has 2 segments (", z.stash_segments[0],
                         ", ", z.stash_segments[1], " bytes); expected 3 segments (",
                         z.stash_segments[0], ", ", z.stash_segments[1], ", ",
                         z.stash_segments[2], " bytes) or one of ", z.stash_bytes));
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
  // dp 2 through the arena, its stash segments placed apart; dp 1 tracked.
  if (c.dp == 2) run.buffers = BufferMode::kArena;
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
