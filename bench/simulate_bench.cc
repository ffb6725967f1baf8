// The simulator: building the executable form of a lowered, planned
// schedule and the discrete-event run over it (pp128 v4 m1024 under 1 s).
#include <vector>

#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "memory/buffer_lifetimes.h"
#include "stages/exec/rank_executable.h"
#include "stages/predict/simulator.h"

namespace jitpipe::bench {
namespace {

constexpr double kSimulateTargetMs = 1000;

absl::StatusOr<std::vector<RankBuffers>> LifetimesOf(const Schedule& lowered,
                                                     const Model& model) {
  std::vector<RankBuffers> buffers;
  buffers.reserve(lowered.pp);
  for (int rank = 0; rank < lowered.pp; ++rank) {
    absl::StatusOr<RankBuffers> rank_buffers =
        ComputeBufferLifetimes(lowered, model, rank, LifetimeOptions{});
    if (!rank_buffers.ok()) return rank_buffers.status();
    buffers.push_back(*std::move(rank_buffers));
  }
  return buffers;
}

void BM_BuildExecutable(benchmark::State& state, Size size) {
  const Schedule& lowered = Lowered(size);
  const Model model = ExampleModel();
  absl::StatusOr<std::vector<RankBuffers>> buffers = LifetimesOf(lowered, model);
  if (!CheckOk(state, buffers.status())) return;
  for (auto _ : state) {
    absl::StatusOr<Executable> executable = BuildExecutable(lowered, model, *buffers);
    if (!CheckOk(state, executable.status())) break;
    benchmark::DoNotOptimize(executable->ranks.data());
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(lowered.TotalActions()));
}

void BM_Simulate(benchmark::State& state, Size size) {
  const Schedule& lowered = Lowered(size);
  const Model model = ExampleModel();
  absl::StatusOr<std::vector<RankBuffers>> buffers = LifetimesOf(lowered, model);
  if (!CheckOk(state, buffers.status())) return;
  absl::StatusOr<Executable> executable = BuildExecutable(lowered, model, *buffers);
  if (!CheckOk(state, executable.status())) return;
  for (auto _ : state) {
    absl::StatusOr<SimulationResult> result = Simulate(lowered, *executable, model);
    if (!CheckOk(state, result.status())) break;
    benchmark::DoNotOptimize(result->makespan_us);
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(lowered.TotalActions()));
}

// What `jitpipe simulate` does after loading and lowering: lifetimes,
// executable, simulation.
void BM_PlanBuildSimulate(benchmark::State& state, Size size, double target_ms) {
  const Schedule& lowered = Lowered(size);
  const Model model = ExampleModel();
  for (auto _ : state) {
    absl::StatusOr<std::vector<RankBuffers>> buffers = LifetimesOf(lowered, model);
    if (!CheckOk(state, buffers.status())) break;
    absl::StatusOr<Executable> executable = BuildExecutable(lowered, model, *buffers);
    if (!CheckOk(state, executable.status())) break;
    absl::StatusOr<SimulationResult> result = Simulate(lowered, *executable, model);
    if (!CheckOk(state, result.status())) break;
    benchmark::DoNotOptimize(result->makespan_us);
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(lowered.TotalActions()),
         target_ms);
}

BENCHMARK_CAPTURE(BM_PlanBuildSimulate, large, kLarge, kSimulateTargetMs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, large, kLarge)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, medium, kMedium)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildExecutable, large, kLarge)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jitpipe::bench
