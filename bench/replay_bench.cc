// The runtime on the in-process backend (runtime/replay.h):
//   BM_InterpreterOverhead  empty stages and zero-byte buffers, so a step is
//                           pure interpretation: per-action cost of the rank
//                           executor, the transport and the flight recorder
//                           (target 2 us per action);
//   BM_CostVsSimulate       `cost` stages spending the model's times: the
//                           measured step against the simulator's makespan
//                           (target: within 5% on 2 ranks; more ranks than
//                           cores oversubscribe the machine). The model's
//                           transfers are free, while the in-process backend
//                           copies every activation on the ranks' threads
//                           (1 MiB: ~50-100 us out of cache here); the /4k
//                           cases move 4 KiB, the runtime's own fidelity.
// Each iteration runs kSteps steps on fresh threads; the manual time is the
// sum of the step times (thread start-up excluded). Both run the process as
// `jitpipe replay` does (AsJitpipeReplay): with glibc's defaults every
// 1 MiB buffer freed is unmapped or trimmed and faulted in again at its
// next allocation, which on this VM (~10 us a page) made the cost stages'
// step 1.5-2.8x the simulated one where the CLI measured 1.13x.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/process_heap.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "stages/reference/cost_stage.h"
#include "tests/testing/noop_stage.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "stages/predict/simulator.h"

namespace jitpipe::bench {
namespace {

constexpr int kSteps = 20;


absl::StatusOr<ReplayPlan> PlanFor(const Size& size, const Model& model) {
  absl::StatusOr<Schedule> lowered = LowerForReplay(ComputeOnly(size));
  if (!lowered.ok()) return lowered.status();
  return PlanReplay(*std::move(lowered), model, MemoryPolicy::kJit);
}

size_t MostActionsOnARank(const Schedule& s) {
  size_t most = 0;
  for (const RankProgram& program : s.ranks) most = std::max(most, program.size());
  return most;
}

// What tools/main.cc and `jitpipe replay` set for the process: the CLI's
// heap policy, and no abseil deadlock detection (on in this build), which
// would add a graph lookup to every transport and recorder lock.
void AsJitpipeReplay() {
  static const bool heap = UseLargeProgramHeap(size_t{1} << 30);
  benchmark::DoNotOptimize(heap);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void BM_InterpreterOverhead(benchmark::State& state, Size size, BufferMode buffers) {
  AsJitpipeReplay();
  absl::StatusOr<ReplayPlan> plan = PlanFor(size, Model());
  if (!CheckOk(state, plan.status())) return;
  testing::NoopStageFactory factory;
  ReplayOptions options;
  options.steps = kSteps;
  options.buffers = buffers;
  double total_us = 0;
  for (auto _ : state) {
    absl::StatusOr<ReplayResult> r =
        RunInProcess(plan->schedule, plan->executable, plan->plans, factory, options);
    if (!CheckOk(state, r.status())) break;
    double us = 0;
    for (double step : r->step_us) us += step;
    state.SetIterationTime(us / 1e6);
    total_us += us;
  }
  const double actions = static_cast<double>(MostActionsOnARank(plan->schedule));
  state.counters["us_per_action"] =
      total_us / (static_cast<double>(state.iterations()) * kSteps * actions);
  state.counters["target_us_per_action"] = 2;  // bench_table's "target" column
  Report(state, absl::StrCat(size.Label(), buffers == BufferMode::kArena ? " arena" : " tracked"),
         size.Items() * kSteps, static_cast<int64_t>(plan->schedule.TotalActions()) * kSteps);
}

// A model whose F, I and W each take `unit_us`, with `bytes` in every buffer.
Model TimedModel(double unit_us, int64_t bytes) {
  Model model;
  model.defaults.forward_us = unit_us;
  model.defaults.backward_input_us = unit_us;
  model.defaults.backward_weight_us = unit_us;
  model.defaults.input_bytes = bytes;
  model.defaults.output_bytes = bytes;
  model.defaults.stash_bytes = bytes;
  model.defaults.param_bytes = bytes;
  return model;
}

void BM_CostVsSimulate(benchmark::State& state, Size size, double unit_us, int64_t bytes) {
  AsJitpipeReplay();
  const Model model = TimedModel(unit_us, bytes);
  absl::StatusOr<ReplayPlan> plan = PlanFor(size, model);
  if (!CheckOk(state, plan.status())) return;
  absl::StatusOr<SimulationResult> sim = Simulate(plan->schedule, plan->executable, model);
  if (!CheckOk(state, sim.status())) return;
  CostStageFactory factory(plan->schedule, model);
  ReplayOptions options;
  options.steps = kSteps;
  std::vector<double> medians;
  for (auto _ : state) {
    absl::StatusOr<ReplayResult> r =
        RunInProcess(plan->schedule, plan->executable, plan->plans, factory, options);
    if (!CheckOk(state, r.status())) break;
    double us = 0;
    for (double step : r->step_us) us += step;
    state.SetIterationTime(us / 1e6);
    medians.push_back(r->median_step_us());
  }
  std::sort(medians.begin(), medians.end());
  const double measured = medians.empty() ? 0 : medians[medians.size() / 2];
  state.counters["measured_us"] = measured;
  state.counters["simulated_us"] = sim->makespan_us;
  state.counters["measured_over_simulated"] = measured / sim->makespan_us;
  Report(state, size.Label(), size.Items() * kSteps,
         static_cast<int64_t>(plan->schedule.TotalActions()) * kSteps);
}

constexpr Size kInterleaved2 = {"interleaved-1f1b", 2, 2, 64};
constexpr Size kOneFOneB2 = {"1f1b", 2, 1, 8};
constexpr Size kInterleavedCost2 = {"interleaved-1f1b", 2, 2, 8};
constexpr Size kOneFOneB4 = {"1f1b", 4, 1, 8};
constexpr Size kOneFOneB8 = {"1f1b", 8, 1, 16};

BENCHMARK_CAPTURE(BM_InterpreterOverhead, tracked, kInterleaved2, BufferMode::kTracked)
    ->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_InterpreterOverhead, arena, kInterleaved2, BufferMode::kArena)
    ->UseManualTime()->Unit(benchmark::kMillisecond);
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t k4KiB = 4096;

BENCHMARK_CAPTURE(BM_CostVsSimulate, 1f1b_pp2, kOneFOneB2, 1000.0, kMiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CostVsSimulate, interleaved_pp2, kInterleavedCost2, 1000.0, kMiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CostVsSimulate, 1f1b_pp2/4k, kOneFOneB2, 1000.0, k4KiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CostVsSimulate, interleaved_pp2/4k, kInterleavedCost2, 1000.0, k4KiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CostVsSimulate, 1f1b_pp4, kOneFOneB4, 1000.0, kMiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CostVsSimulate, 1f1b_pp8, kOneFOneB8, 1000.0, kMiB)
    ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jitpipe::bench
