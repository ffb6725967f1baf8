// The arena on the models `jitpipe model` writes (issue 37 item 4): an
// embedding, decoder layers and a loss head whose fp32 logits make its
// stage's stash 2-4x a layer stage's, parameter gradients allocated at each
// stage's first W. Every built-in schedule (and, for Llama, the auto
// schedule) at pp 4, m 16, lowered as `jitpipe plan` lowers a compute-only
// file, the model cut evenly: arena <= 1.05 x jit peak on every rank.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/memory_plan.h"
#include "planning/auto_schedule.h"
#include "planning/model_for_schedule.h"
#include "planning/transformer.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// `jitpipe model --layers 24 --hidden 2048 --heads 16 --ffn 8192 --vocab
// 50257 --seq 2048 --tflops 400 --device-memory 40GiB --dp 4`.
ModelFile Gpt() {
  TransformerShape shape{.layers = 24, .hidden = 2048, .heads = 16, .ffn = 8192,
                         .vocab = 50257, .seq = 2048, .tflops = 400};
  absl::StatusOr<LayeredModel> layers = BuildTransformerModel(shape);
  EXPECT_OK(layers);
  layers->dp.size = 4;
  layers->device.memory_bytes = 40 * kGiB;
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = *layers};
}

// `jitpipe model --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn
// 14336 --vocab 128256 --seq 8192 --tflops 400 --swiglu --rmsnorm
// --recompute selective --dp 2 --device-memory 80GiB` (Llama 3 8B).
ModelFile Llama3_8b() {
  TransformerShape shape{.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8,
                         .ffn = 14336, .vocab = 128256, .seq = 8192, .swiglu = true,
                         .rmsnorm = true, .recompute = Recompute::kSelective, .tflops = 400};
  absl::StatusOr<LayeredModel> layers = BuildTransformerModel(shape);
  EXPECT_OK(layers);
  layers->dp.size = 2;
  layers->device.memory_bytes = 80 * kGiB;
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = *layers};
}

// Each layer's stash is a buffer of its own (a stage's stash in segments,
// planning/partition.cc): whole, ZB-V's rank 0 could not get below 1.068
// (GPT) and 1.085 (Llama) of its peak, since a loss stash twice a layer
// stage's needs the hole one freed layer stash leaves, and a FIFO of layer
// stashes keeps its oldest next to that hole for fewer steps than the 9 at
// the peak (docs/memory.md says why). In segments every row is within 1.05.
constexpr double kBound = 1.05;

struct Case {
  std::string model;
  std::string schedule;  // a built-in, or "auto"
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string model : {"gpt", "llama"}) {
    for (const GeneratorInfo& info : AllGenerators()) cases.push_back({model, info.name});
  }
  cases.push_back({"llama", "auto"});
  return cases;
}

class ArenaRealModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(ArenaRealModelTest, ArenaWithinBoundOfPeakOnEveryRank) {
  const Case& c = GetParam();
  const ModelFile file = c.model == "gpt" ? Gpt() : Llama3_8b();
  Schedule lowered;
  if (c.schedule == "auto") {
    ASSERT_OK_AND_ASSIGN(AutoScheduleResult r, AutoSchedule(file, {.pp = 4, .microbatches = 16}));
    lowered = r.schedule;
  } else {
    ASSERT_OK_AND_ASSIGN(Schedule generated,
                         Generate({.schedule = c.schedule, .pp = 4, .microbatches = 16}));
    ASSERT_OK_AND_ASSIGN(lowered, Lower(generated));
  }
  ASSERT_OK_AND_ASSIGN(StagedModel staged, ModelForSchedule(file, lowered));
  ASSERT_OK_AND_ASSIGN(std::vector<RankMemoryPlan> plans, PlanMemory(lowered, staged.model, {}));
  ASSERT_EQ(plans.size(), 4u);
  for (size_t rank = 0; rank < plans.size(); ++rank) {
    const RankMemoryPlan& plan = plans[rank];
    ASSERT_GT(plan.peak.bytes, 0);
    EXPECT_OK(VerifyArenaLayout(ArenaIntervals(plan.buffers), plan.arena, kDefaultArenaAlignment));
    const double ratio = static_cast<double>(plan.arena.arena_bytes) / plan.peak.bytes;
    EXPECT_LE(ratio, kBound) << "rank " << rank << ": arena " << plan.arena.arena_bytes
                              << " B (" << plan.arena.algorithm << "), peak "
                              << plan.peak.bytes << " B";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ArenaRealModelTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.model + "_" + param.param.schedule;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace jitpipe
