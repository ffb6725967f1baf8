// The whole chain through the library, as the CLI runs it one command at a
// time (bench/cli_chain.sh times that): generate, lower (receives just in
// time), validate, plan every rank (jit, with the arena) and simulate one
// step, interleaved 1F1B pp 128 v 4 m 1024 (target 1 s), with the example
// model and with every stage's sizes its own (the arena's hardest case).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/validate.h"
#include "stages/predict/predict.h"

namespace jitpipe::bench {
namespace {

constexpr double kChainTargetMs = 1000;

void BM_Chain(benchmark::State& state, Size size, bool distinct, double target_ms) {
  int64_t actions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> generated = Generate({.schedule = size.schedule,
                                                   .pp = size.pp,
                                                   .microbatches = size.microbatches,
                                                   .stages_per_rank = size.stages_per_rank});
    if (!CheckOk(state, generated.status())) break;
    absl::StatusOr<Schedule> lowered = Lower(*generated);
    if (!CheckOk(state, lowered.status())) break;
    if (!CheckOk(state, Validate(*lowered))) break;
    const Model model = distinct ? DistinctModel(lowered->num_stages()) : ExampleModel();
    absl::StatusOr<std::vector<RankMemoryPlan>> plans = PlanMemory(*lowered, model, {});
    if (!CheckOk(state, plans.status())) break;
    // The lowered schedule's last use: moved in, as `jitpipe simulate` does.
    absl::StatusOr<Prediction> prediction = Predict(*std::move(lowered), model);
    if (!CheckOk(state, prediction.status())) break;
    benchmark::DoNotOptimize(prediction->simulation.makespan_us);
    actions = static_cast<int64_t>(prediction->lowered.TotalActions());
  }
  Report(state, absl::StrCat(size.Label(), distinct ? ", distinct model" : ", example model"),
         size.Items(), actions, target_ms);
}

// PlanMemory plans ranks on every hardware thread: wall-clock time.
BENCHMARK_CAPTURE(BM_Chain, large, kLarge, false, kChainTargetMs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Chain, large_distinct, kLarge, true, 0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace jitpipe::bench
