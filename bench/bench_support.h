// Inputs and reporting shared by the benchmark suites.
//
// Every suite times one step of the pipeline (generate, lower, validate,
// plan, build, simulate, run) on schedules built once per process, so an
// iteration measures the step under test only. Each benchmark reports:
//   label       the size, e.g. "interleaved-1f1b pp128 v4 m1024"
//   items/s     stage x microbatch units of work (S * m) per second
//   actions/s   actions in the program the step produces or consumes
//   "actions"   that action count (per iteration)
//   "target_ms" the time per iteration it must stay under (absent: none)
// table_reporter.h turns these into the README's performance table.
//
// Not thread-safe: benchmarks run one at a time.
#ifndef JITPIPE_BENCH_BENCH_SUPPORT_H_
#define JITPIPE_BENCH_BENCH_SUPPORT_H_

#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe::bench {

// A built-in schedule at one size.
struct Size {
  const char* schedule;
  int pp;
  int stages_per_rank;
  int microbatches;

  std::string Label() const;
  // S * m: the units of work (each stage sees each microbatch once).
  int64_t Items() const {
    return int64_t{pp} * stages_per_rank * microbatches;
  }
};

// The sizes the issues name: PyTorch's pure-Python generate + validate +
// lower takes about 1 s at kMedium; kLarge is about 3M lowered actions.
inline constexpr Size kMedium = {"interleaved-1f1b", 32, 4, 256};
inline constexpr Size kLarge = {"interleaved-1f1b", 128, 4, 1024};

// The compute-only schedule Generate() returns for `size`, and its lowering
// with Lower()'s defaults (receives just in time). Built on first use and
// kept for the life of the process; aborts the benchmark binary if the
// schedule cannot be built (a benchmark of nothing would mislead).
const Schedule& ComputeOnly(const Size& size);
const Schedule& Lowered(const Size& size);

// docs/design.md's example model: 1 us per F, I and W; 1 MiB inputs and outputs,
// 4 MiB stash, 16 MiB parameters; free point-to-point links; no data
// parallelism.
Model ExampleModel();

// ExampleModel with uneven stages (a transformer's embedding and head are
// not its middle layers): over every `num_stages` stages, stash 2, 4, 6 or
// 3 MiB and inputs and outputs 1, 2 or 3 MiB in a fixed pattern, so buffers
// of different sizes compete for the arena.
Model SkewedModel(int num_stages);

// ExampleModel with every stage's stash and output sizes its own (stash 3
// MiB + a stage-dependent multiple of 4099 B, output 1 MiB + a multiple of
// 8191 B; a stage's input is its predecessor's output), none of them a
// multiple of the arena's alignment: the arena's hardest case, where the
// start-order sweep rarely comes within the slack of the peak.
// bench/cli_chain.sh writes the same model as a file.
Model DistinctModel(int num_stages);

// Sets the label, items/s, actions/s and the counters above. `target_ms` <= 0
// means no target. Call after the timing loop.
void Report(benchmark::State& state, const std::string& label, int64_t items, int64_t actions,
            double target_ms = 0);

// Fails the benchmark run (SkipWithError) when `status` is not OK; returns
// whether it was OK.
bool CheckOk(benchmark::State& state, const absl::Status& status);

}  // namespace jitpipe::bench

#endif  // JITPIPE_BENCH_BENCH_SUPPORT_H_
