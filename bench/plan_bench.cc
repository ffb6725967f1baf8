// Plan + arena: buffer lifetimes, peak, lower bound and the static
// arena for every rank (pp128 v4 m1024 under 1 s), and how close the arena
// comes to the peak on every built-in schedule.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "memory/memory_plan.h"
#include "planning/model_for_schedule.h"
#include "planning/transformer.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"

namespace jitpipe::bench {
namespace {

constexpr double kPlanTargetMs = 1000;

// Worst and overall arena / peak of a plan (1 when nothing is allocated).
struct ArenaRatios {
  double worst = 1;
  double overall = 1;
};

ArenaRatios RatiosOf(const std::vector<RankMemoryPlan>& plans) {
  ArenaRatios ratios;
  int64_t arena = 0, peak = 0;
  for (const RankMemoryPlan& plan : plans) {
    arena += plan.arena.arena_bytes;
    peak += plan.peak.bytes;
    if (plan.peak.bytes > 0) {
      ratios.worst = std::max(
          ratios.worst, static_cast<double>(plan.arena.arena_bytes) / plan.peak.bytes);
    }
  }
  if (peak > 0) ratios.overall = static_cast<double>(arena) / peak;
  return ratios;
}

void BM_PlanMemory(benchmark::State& state, Size size, MemoryPolicy policy, bool arena,
                   double target_ms) {
  const Schedule& lowered = Lowered(size);
  const Model model = ExampleModel();
  for (auto _ : state) {
    absl::StatusOr<std::vector<RankMemoryPlan>> planned =
        PlanMemory(lowered, model, {.policy = policy, .arena = arena});
    if (!CheckOk(state, planned.status())) break;
    benchmark::DoNotOptimize(planned->data());
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(lowered.TotalActions()),
         target_ms);
}

// PlanMemory plans ranks on every hardware thread: wall-clock time.
BENCHMARK_CAPTURE(BM_PlanMemory, jit_arena_large, kLarge, MemoryPolicy::kJit, true,
                  kPlanTargetMs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanMemory, jit_arena_medium, kMedium, MemoryPolicy::kJit, true, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanMemory, jit_no_arena_large, kLarge, MemoryPolicy::kJit, false, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_PlanMemory, eager_arena_large, kLarge, MemoryPolicy::kEager, true, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The arena / peak ratio (counters "arena_over_peak", worst rank, and
// "arena_over_peak_all", summed over ranks) of a schedule lowered with
// Lower()'s defaults and planned under jit, with the example model (even
// stages), the skewed one and the distinct one (every stage its own sizes):
// of every built-in schedule at pp 8, m 32 (its default stages per rank),
// and of the large size.
constexpr int kRatioPp = 8;
constexpr int kRatioMicrobatches = 32;

enum class ModelKind { kExample, kSkewed, kDistinct };

const char* ModelName(ModelKind kind) {
  switch (kind) {
    case ModelKind::kExample: return "example";
    case ModelKind::kSkewed: return "skewed";
    case ModelKind::kDistinct: return "distinct";
  }
  return "?";
}

Model ModelOf(ModelKind kind, int num_stages) {
  switch (kind) {
    case ModelKind::kExample: return ExampleModel();
    case ModelKind::kSkewed: return SkewedModel(num_stages);
    case ModelKind::kDistinct: return DistinctModel(num_stages);
  }
  return ExampleModel();
}

void BM_ArenaRatio(benchmark::State& state, std::string schedule, int pp, int microbatches,
                   int stages_per_rank, ModelKind kind) {
  absl::StatusOr<Schedule> generated = Generate({.schedule = schedule,
                                                 .pp = pp,
                                                 .microbatches = microbatches,
                                                 .stages_per_rank = stages_per_rank});
  if (!CheckOk(state, generated.status())) return;
  absl::StatusOr<Schedule> lowered = Lower(*generated);
  if (!CheckOk(state, lowered.status())) return;
  const Model model = ModelOf(kind, lowered->num_stages());
  std::vector<RankMemoryPlan> plans;
  for (auto _ : state) {
    absl::StatusOr<std::vector<RankMemoryPlan>> planned = PlanMemory(*lowered, model, {});
    if (!CheckOk(state, planned.status())) break;
    plans = *std::move(planned);
  }
  const Size size = {generated->name.c_str(), generated->pp, generated->stages_per_rank,
                     generated->microbatches};
  Report(state, absl::StrCat(size.Label(), ", ", ModelName(kind), " model"),
         size.Items(), static_cast<int64_t>(lowered->TotalActions()));
  if (plans.empty()) return;
  const ArenaRatios ratios = RatiosOf(plans);
  state.counters["arena_over_peak"] = benchmark::Counter(ratios.worst);
  state.counters["arena_over_peak_all"] = benchmark::Counter(ratios.overall);
}

// One arena algorithm alone on one rank's buffers (rank 0 of the large size,
// jit, skewed model): where BM_ArenaRatio/large/skewed spends its time.
void BM_ArenaAlgorithm(benchmark::State& state, PlacementOrder order, int refine_rounds) {
  const Schedule& lowered = Lowered(kLarge);
  const Model model = SkewedModel(lowered.num_stages());
  absl::StatusOr<RankMemoryPlan> plan =
      PlanRankMemory(lowered, model, /*rank=*/0, {.arena = false});
  if (!CheckOk(state, plan.status())) return;
  const std::vector<LiveInterval> intervals = ArenaIntervals(plan->buffers);
  const std::unique_ptr<ArenaAlgorithm> algorithm = MakeGreedyBestFit(order, refine_rounds);
  ArenaLayout layout;
  for (auto _ : state) {
    layout = algorithm->Place(intervals, plan->buffers.num_actions, kDefaultArenaAlignment);
  }
  state.SetLabel(absl::StrCat(intervals.size(), " intervals over ", plan->buffers.num_actions,
                              " time points"));
  state.counters["arena_over_peak"] =
      benchmark::Counter(static_cast<double>(layout.arena_bytes) / plan->peak.bytes);
}

BENCHMARK_CAPTURE(BM_ArenaAlgorithm, by_start, PlacementOrder::kStart, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ArenaAlgorithm, by_size, PlacementOrder::kDecreasingSize, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ArenaAlgorithm, by_size_refined, PlacementOrder::kDecreasingSize,
                  kDefaultRefineRounds)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ArenaAlgorithm, by_duration, PlacementOrder::kDecreasingDuration, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ArenaAlgorithm, by_duration_refined, PlacementOrder::kDecreasingDuration,
                  kDefaultRefineRounds)
    ->Unit(benchmark::kMillisecond);

// The arena / peak ratio on the models `jitpipe model` writes (issue 37):
// every built-in schedule at pp 4, m 16 with its default stages per rank,
// lowered with Lower()'s defaults, the layers cut evenly, planned under jit
// as `jitpipe plan` does. "gpt": --layers 24 --hidden 2048 --heads 16 --ffn
// 8192 --vocab 50257 --seq 2048 --dp 4; "llama": Llama 3 8B (--layers 32
// --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 --seq
// 8192 --swiglu --rmsnorm --recompute selective --dp 2). Their loss head's
// stash is 2-4x a layer stage's: the dominant-order search's case.
absl::StatusOr<ModelFile> RealModel(const std::string& name) {
  TransformerShape shape{.layers = 24, .hidden = 2048, .heads = 16, .ffn = 8192,
                         .vocab = 50257, .seq = 2048, .tflops = 400};
  int dp = 4;
  if (name == "llama") {
    shape = {.layers = 32, .hidden = 4096, .heads = 32, .kv_heads = 8, .ffn = 14336,
             .vocab = 128256, .seq = 8192, .swiglu = true, .rmsnorm = true,
             .recompute = Recompute::kSelective, .tflops = 400};
    dp = 2;
  }
  absl::StatusOr<LayeredModel> layers = BuildTransformerModel(shape);
  if (!layers.ok()) return layers.status();
  layers->dp.size = dp;
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = *layers};
}

void BM_ArenaRatioRealModel(benchmark::State& state, std::string schedule, std::string name) {
  absl::StatusOr<Schedule> generated =
      Generate({.schedule = schedule, .pp = 4, .microbatches = 16});
  if (!CheckOk(state, generated.status())) return;
  absl::StatusOr<Schedule> lowered = Lower(*generated);
  if (!CheckOk(state, lowered.status())) return;
  absl::StatusOr<ModelFile> file = RealModel(name);
  if (!CheckOk(state, file.status())) return;
  absl::StatusOr<StagedModel> staged = ModelForSchedule(*file, *lowered);
  if (!CheckOk(state, staged.status())) return;
  std::vector<RankMemoryPlan> plans;
  for (auto _ : state) {
    absl::StatusOr<std::vector<RankMemoryPlan>> planned =
        PlanMemory(*lowered, staged->model, {});
    if (!CheckOk(state, planned.status())) break;
    plans = *std::move(planned);
  }
  const Size size = {generated->name.c_str(), generated->pp, generated->stages_per_rank,
                     generated->microbatches};
  Report(state, absl::StrCat(size.Label(), ", ", name, " model"), size.Items(),
         static_cast<int64_t>(lowered->TotalActions()));
  if (plans.empty()) return;
  const ArenaRatios ratios = RatiosOf(plans);
  state.counters["arena_over_peak"] = benchmark::Counter(ratios.worst);
  state.counters["arena_over_peak_all"] = benchmark::Counter(ratios.overall);
}

// One benchmark per built-in schedule and model, named after them, then the
// large size, then the real models.
const bool kArenaRatiosRegistered = [] {
  for (ModelKind kind : {ModelKind::kExample, ModelKind::kSkewed, ModelKind::kDistinct}) {
    const char* model = ModelName(kind);
    for (const GeneratorInfo& info : AllGenerators()) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_ArenaRatio/", info.name, "/", model).c_str(),
                                   BM_ArenaRatio, info.name, kRatioPp, kRatioMicrobatches, 0,
                                   kind)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark(absl::StrCat("BM_ArenaRatio/large/", model).c_str(),
                                 BM_ArenaRatio, kLarge.schedule, kLarge.pp, kLarge.microbatches,
                                 kLarge.stages_per_rank, kind)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const char* model : {"gpt", "llama"}) {
    for (const GeneratorInfo& info : AllGenerators()) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_ArenaRatio/", info.name, "/", model).c_str(), BM_ArenaRatioRealModel,
          info.name, std::string(model))
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
}  // namespace jitpipe::bench
