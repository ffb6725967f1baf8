// Generate, lower and validate: the front half of the pipeline.
//
// PyTorch's pure-Python generate + _validate_schedule + _add_send_recv takes
// about 1 s for interleaved-1f1b pp32 v4 m256 on the reference machine; the
// target for the same work here (BM_GenerateLower with the early lowering:
// Lower() runs the structural check _validate_schedule makes, then
// _add_send_recv's round robin) is 100x faster, 10 ms. Generate + lower +
// validate, which also matches every send and proves the lowered program
// deadlock-free, has its target at pp128 v4 m1024 (about 3M lowered
// actions): under 0.5 s.
#include <utility>

#include "absl/status/status.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "scheduler/analysis/validate_structure.h"

namespace jitpipe::bench {
namespace {

constexpr double kMediumTargetMs = 10;  // PyTorch's ~1 s / 100
constexpr double kLargeTargetMs = 500;

GenerateOptions OptionsFor(const Size& size) {
  return {.schedule = size.schedule,
          .pp = size.pp,
          .microbatches = size.microbatches,
          .stages_per_rank = size.stages_per_rank};
}

void BM_Generate(benchmark::State& state, Size size) {
  int64_t actions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> schedule = Generate(OptionsFor(size));
    if (!CheckOk(state, schedule.status())) break;
    actions = static_cast<int64_t>(schedule->TotalActions());
    benchmark::DoNotOptimize(schedule->ranks.data());
  }
  Report(state, size.Label(), size.Items(), actions);
}

void BM_ValidateStructure(benchmark::State& state, Size size) {
  const Schedule& schedule = ComputeOnly(size);
  for (auto _ : state) {
    if (!CheckOk(state, ValidateStructure(schedule))) break;
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(schedule.TotalActions()));
}

void BM_Lower(benchmark::State& state, Size size, RecvPlacement recv) {
  const Schedule& schedule = ComputeOnly(size);
  int64_t actions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> lowered = Lower(schedule, {.recv = recv});
    if (!CheckOk(state, lowered.status())) break;
    actions = static_cast<int64_t>(lowered->TotalActions());
    benchmark::DoNotOptimize(lowered->ranks.data());
  }
  Report(state, size.Label(), size.Items(), actions);
}

// Relaxed semantics validate the default (jit) lowering; strict semantics
// the jit-rendezvous one, the placement made for them (the pure jit
// placement deadlocks under rendezvous by design: lower.h).
void BM_Validate(benchmark::State& state, Size size, CommSemantics semantics) {
  absl::StatusOr<Schedule> rendezvous;
  if (semantics == CommSemantics::kStrict) {
    rendezvous = Lower(Generate(OptionsFor(size)).value(),
                       {.recv = RecvPlacement::kJitRendezvous});
    if (!CheckOk(state, rendezvous.status())) return;
  }
  const Schedule& lowered = rendezvous.ok() ? *rendezvous : Lowered(size);
  for (auto _ : state) {
    if (!CheckOk(state, Validate(lowered, {.semantics = semantics}))) break;
  }
  Report(state, size.Label(), size.Items(), static_cast<int64_t>(lowered.TotalActions()));
}

// Generate, lower and, when `validate`, Validate(). Without Validate() this
// is what PyTorch does when it builds a schedule (see the file comment);
// with it, more: Validate() matches every send and proves the lowered program
// deadlock-free. With RecvPlacement::kEarly the lowering is PyTorch's own
// (_add_send_recv).
void GenerateLowerLoop(benchmark::State& state, Size size, RecvPlacement recv, bool validate,
                       double target_ms) {
  int64_t actions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> schedule = Generate(OptionsFor(size));
    if (!CheckOk(state, schedule.status())) break;
    absl::StatusOr<Schedule> lowered = Lower(*std::move(schedule), {.recv = recv});
    if (!CheckOk(state, lowered.status())) break;
    if (validate && !CheckOk(state, Validate(*lowered))) break;
    actions = static_cast<int64_t>(lowered->TotalActions());
  }
  Report(state, size.Label(), size.Items(), actions, target_ms);
}

void BM_GenerateLower(benchmark::State& state, Size size, RecvPlacement recv, double target_ms) {
  GenerateLowerLoop(state, size, recv, /*validate=*/false, target_ms);
}

void BM_GenerateLowerValidate(benchmark::State& state, Size size, RecvPlacement recv,
                              double target_ms) {
  GenerateLowerLoop(state, size, recv, /*validate=*/true, target_ms);
}

// What PyTorch's runtime does before its first step, the work
// bench/pytorch_side_by_side.py times on PyTorch's side: the order, the
// structure check, UNSHARD/RESHARD and the sends and receives (Lower checks
// the structure first). Here and above the generated schedule is handed to
// Lower() by move, as `jitpipe lower --schedule` does: a copy of it would be
// work that neither the CLI nor PyTorch does.
void BM_PyTorchFrontHalf(benchmark::State& state, Size size) {
  int64_t actions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> schedule = Generate(OptionsFor(size));
    if (!CheckOk(state, schedule.status())) break;
    absl::StatusOr<Schedule> lowered =
        Lower(*std::move(schedule), {.recv = RecvPlacement::kEarly, .fsdp = true});
    if (!CheckOk(state, lowered.status())) break;
    actions = static_cast<int64_t>(lowered->TotalActions());
    benchmark::DoNotOptimize(lowered->ranks.data());
  }
  Report(state, size.Label(), size.Items(), actions);
}

// Sizes x steps. Milliseconds throughout, so the table reads in one unit.
BENCHMARK_CAPTURE(BM_PyTorchFrontHalf, medium, kMedium)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLower, early_medium, kMedium, RecvPlacement::kEarly,
                  kMediumTargetMs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLower, jit_medium, kMedium, RecvPlacement::kJit, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLowerValidate, jit_medium, kMedium, RecvPlacement::kJit, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLowerValidate, early_medium, kMedium, RecvPlacement::kEarly, 0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLowerValidate, jit_large, kLarge, RecvPlacement::kJit,
                  kLargeTargetMs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateLowerValidate, early_large, kLarge, RecvPlacement::kEarly,
                  kLargeTargetMs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, medium, kMedium)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, large, kLarge)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ValidateStructure, medium, kMedium)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ValidateStructure, large, kLarge)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Lower, jit_medium, kMedium, RecvPlacement::kJit)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Lower, jit_large, kLarge, RecvPlacement::kJit)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Lower, early_medium, kMedium, RecvPlacement::kEarly)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Lower, early_large, kLarge, RecvPlacement::kEarly)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Validate, relaxed_medium, kMedium, CommSemantics::kRelaxed)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Validate, relaxed_large, kLarge, CommSemantics::kRelaxed)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Validate, strict_large, kLarge, CommSemantics::kStrict)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace jitpipe::bench
