// The memory planner on a big schedule: interleaved-1f1b, pp 128, v 4, m 1024
// (about 3M actions, 2.6M buffers), lowered with Lower()'s defaults, every rank
// planned under jit with its arena (PlanRankMemory), as `jitpipe plan` does.
#include <cstdint>
#include <string>
#include <tuple>

#include "benchmark/benchmark.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"

namespace jitpipe {
namespace {

const Schedule& BigSchedule() {
  static const Schedule* schedule = [] {
    absl::StatusOr<Schedule> s = Generate({"interleaved-1f1b", 128, 1024, 4});
    if (s.ok()) s = Lower(*s);
    return new Schedule(s.ok() ? *s : Schedule{});
  }();
  return *schedule;
}

// docs/design.md's example model; `skewed` adds uneven stages 1, 2 and 5.
Model BenchModel(bool skewed) {
  Model m;
  m.defaults.input_bytes = 1 << 20;
  m.defaults.output_bytes = 1 << 20;
  m.defaults.stash_bytes = 4 << 20;
  m.defaults.param_bytes = 16 << 20;
  if (skewed) {
    for (auto [stage, stash, input] : {std::tuple{1, 3 << 20, 1 << 20}, {2, 4 << 20, 3 << 19},
                                       {5, 7 << 19, 1 << 20}}) {
      StageOverride o;
      o.index = stage;
      o.spec.stash_bytes = stash;
      o.spec.input_bytes = input;
      m.stages.push_back(o);
    }
  }
  return m;
}

void BM_PlanEveryRank(benchmark::State& state) {
  const Schedule& s = BigSchedule();
  const Model model = BenchModel(state.range(0) != 0);
  int64_t buffers = 0;
  for (auto _ : state) {
    buffers = 0;
    for (int rank = 0; rank < s.pp; ++rank) {
      absl::StatusOr<RankMemoryPlan> plan = PlanRankMemory(s, model, rank, {});
      if (!plan.ok()) {
        state.SkipWithError(std::string(plan.status().message()).c_str());
        return;
      }
      buffers += static_cast<int64_t>(plan->buffers.buffers.size());
      benchmark::DoNotOptimize(plan->arena.arena_bytes);
    }
  }
  state.counters["buffers"] = static_cast<double>(buffers);
}
BENCHMARK(BM_PlanEveryRank)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace jitpipe

BENCHMARK_MAIN();
