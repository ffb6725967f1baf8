// The whole chain through the library, as the CLI runs it one command at a
// time (bench/cli_chain.sh times that): generate, lower (receives just in
// time), validate, plan every rank (jit, with the arena) and simulate one
// step, interleaved 1F1B pp 128 v 4 m 1024 (target 1 s), with the example
// model and with every stage's sizes its own (the arena's hardest case);
// and what first touching that much fresh memory costs on this machine.
//
// As the CLI runs it: the process uses the CLI's heap policy
// (base/process_heap.h: freed memory kept, the heap advised for huge pages),
// and each step's results are dropped once the next step has what it needs,
// as each CLI process's memory goes when it exits. Memory first touched
// costs 0.3-0.9 GB/s on this VM (BM_FirstTouch), so what a step can reuse
// from the one before is most of the difference: the same chain with
// glibc's defaults and every step's results held took 2.3-2.5 s.
#include <sys/mman.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/process_heap.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "stages/predict/predict.h"

namespace jitpipe::bench {
namespace {

constexpr double kChainTargetMs = 1000;

void BM_Chain(benchmark::State& state, Size size, bool distinct, double target_ms) {
  int64_t actions = 0;
  static const bool heap = UseLargeProgramHeap(size_t{1} << 30);  // as tools/main.cc
  benchmark::DoNotOptimize(heap);
  for (auto _ : state) {
    absl::StatusOr<Schedule> lowered = absl::UnknownError("not lowered");
    {
      absl::StatusOr<Schedule> generated = Generate({.schedule = size.schedule,
                                                     .pp = size.pp,
                                                     .microbatches = size.microbatches,
                                                     .stages_per_rank = size.stages_per_rank});
      if (!CheckOk(state, generated.status())) break;
      lowered = Lower(*std::move(generated));
    }
    if (!CheckOk(state, lowered.status())) break;
    if (!CheckOk(state, Validate(*lowered))) break;
    const Model model = distinct ? DistinctModel(lowered->num_stages()) : ExampleModel();
    {
      absl::StatusOr<std::vector<RankMemoryPlan>> plans = PlanMemory(*lowered, model, {});
      if (!CheckOk(state, plans.status())) break;
      benchmark::DoNotOptimize(plans->front().arena.arena_bytes);
    }
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

// What the chain's memory costs before any work: mapping 512 MiB (the
// chain's peak is 0.6-0.8 GB), writing one byte per 4 KiB page (the first
// touch: the kernel zeroes each page, and a virtual machine's host may have
// to back it), and unmapping, with and without transparent huge pages; and
// the same bytes written a second time. On this project's VM the first
// touch runs at 0.3-0.9 GB/s and the second at ~20 GB/s: a cold process
// pays about a second for the chain's memory alone.
void BM_FirstTouch(benchmark::State& state, bool huge_pages) {
  constexpr size_t kBytes = size_t{512} << 20;
  for (auto _ : state) {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    if (huge_pages) madvise(p, kBytes, MADV_HUGEPAGE);
    auto* bytes = static_cast<volatile char*>(p);
    for (size_t i = 0; i < kBytes; i += 4096) bytes[i] = 1;
    munmap(p, kBytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBytes);
}
BENCHMARK_CAPTURE(BM_FirstTouch, huge_pages, true)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FirstTouch, small_pages, false)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TouchAgain(benchmark::State& state) {
  std::vector<char> memory(size_t{512} << 20, 1);
  for (auto _ : state) {
    std::memset(memory.data(), 2, memory.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * memory.size()));
}
BENCHMARK(BM_TouchAgain)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace jitpipe::bench
