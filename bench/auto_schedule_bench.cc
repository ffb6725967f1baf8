// The auto scheduler (planning/auto_schedule.h): its speed and its quality.
//
// Speed: BM_AutoSchedule/pp8_m32 times one search at pp 8, m 32 (typical
// costs, a cap of 1.5p activation units); target 2 s.
//
// Quality: BM_AutoGrid runs the grid once per case and the main()
// below prints a table and checks, per case:
//   - the auto schedule is never slower than the best built-in schedule that
//     fits, nor than the zero-bubble heuristic, on the same costs and cap;
//   - where the cap allows zero bubble (2p units: what ZB-H2 holds; the V
//     placements need p), it is within 2% of the lower bound.
// Exit status 1 when a check fails.
//
// The grid: costs balanced (F = I = W = 1), typical (F 1, I 1.1, W 0.7, a
// p2p latency of 0.05 per hop) and heavy-backward (F 1, I 2, W 1.5), per
// stage of one stage per rank; pp 4 and 8; m = 2p, 3p, 4p; caps p, 1.5p and
// 2p activation units, a unit being one microbatch's stash on one rank's
// layers. The model has 2p layers (a rank's layers are two of them; in the
// V placements each stage holds one), no parameters, nothing sent but
// latency, so memory is activations alone.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/bench_support.h"
#include "benchmark/benchmark.h"
#include "planning/auto_schedule.h"
#include "planning/transformer.h"
#include "tests/testing/zero_bubble_grid.h"

namespace jitpipe::bench {
namespace {

using Costs = ::jitpipe::testing::GridCosts;
using ::jitpipe::testing::GridModel;
constexpr int64_t kUnit = ::jitpipe::testing::kGridUnit;
constexpr Costs kBalanced = ::jitpipe::testing::kGridBalanced;
constexpr Costs kTypical = ::jitpipe::testing::kGridTypical;
// Heavier than the grid's heavy-backward (1.6, 1.2, latency 0.1): this
// suite's reference case since issue 18.
constexpr Costs kHeavy = {"heavy-backward", 1, 2, 1.5, 0};

struct Case {
  Costs costs;
  int pp, m;
  double cap_units;
  std::string Label() const {
    return absl::StrFormat("%s pp%d m%d cap %.3gp", costs.name, pp, m, cap_units / pp);
  }
};

struct Outcome {
  Case c;
  absl::StatusOr<AutoScheduleResult> result = absl::UnknownError("not run");
};
std::vector<Outcome>& Outcomes() {
  static auto* outcomes = new std::vector<Outcome>;
  return *outcomes;
}

AutoScheduleOptions Options(const Case& c) {
  return AutoScheduleOptions{.pp = c.pp, .microbatches = c.m,
                             .memory_limit = static_cast<int64_t>(c.cap_units * kUnit),
                             .time_budget = absl::Seconds(60)};
}

void BM_AutoSchedule(benchmark::State& state) {
  const Case c{kTypical, 8, 32, 12};
  const ModelFile model = GridModel(c.costs, c.pp);
  int judged = 0;
  for (auto _ : state) {
    absl::StatusOr<AutoScheduleResult> r = AutoSchedule(model, Options(c));
    if (!CheckOk(state, r.status())) return;
    judged = r->judged;
    benchmark::DoNotOptimize(r->evaluation.makespan_us);
  }
  state.counters["judged"] = judged;
  Report(state, c.Label(), int64_t{c.pp} * c.m, 0, /*target_ms=*/2000);
}
BENCHMARK(BM_AutoSchedule)->Name("BM_AutoSchedule/pp8_m32")->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// What `jitpipe model` writes for Llama 3 8B (32 layers, an embedding and a
// loss head whose logits outweigh a layer; 80 GiB, the standard reserve):
// the search with the balanced partition (every built-in on its own cut).
// Target 2 s at pp 8, m 32; at pp 64, m 256 (a 2-layer-per-rank model of
// 128 layers) the search ends within its time budget, 10 s.
ModelFile LlamaModel(int layers) {
  TransformerShape shape{.layers = layers, .hidden = 4096, .heads = 32, .kv_heads = 8,
                         .ffn = 14336, .vocab = 128256, .seq = 8192, .swiglu = true,
                         .rmsnorm = true, .tflops = 400};
  absl::StatusOr<LayeredModel> m = BuildTransformerModel(shape);
  if (!m.ok()) std::abort();
  m->device.memory_bytes = int64_t{80} << 30;
  m->device.reserve = StandardReserve();
  return ModelFile{.version = kLayeredModelVersion, .stages = {}, .layers = *std::move(m)};
}

void BM_AutoScheduleLlama(benchmark::State& state, int pp, int m, int layers, double budget_s,
                          double target_ms) {
  const ModelFile model = LlamaModel(layers);
  const AutoScheduleOptions options{.pp = pp, .microbatches = m,
                                    .time_budget = absl::Seconds(budget_s)};
  absl::StatusOr<AutoScheduleResult> r = absl::UnknownError("not run");
  for (auto _ : state) {
    r = AutoSchedule(model, options);
    if (!CheckOk(state, r.status())) return;
  }
  state.counters["judged"] = r->judged;
  const double step_ms = r->evaluation.makespan_us / 1e3;
  state.counters["step_ms"] = benchmark::Counter(step_ms);
  state.counters["budget_ended"] = r->budget_exhausted;
  Report(state, absl::StrFormat("llama3-8b-shaped, %d layers, pp%d m%d, balanced cut", layers,
                                pp, m),
         int64_t{pp} * m, 0, target_ms);
}
BENCHMARK_CAPTURE(BM_AutoScheduleLlama, pp8_m32, 8, 32, 32, 60.0, 2000)
    ->Name("BM_AutoSchedule/llama8b_pp8_m32")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_AutoScheduleLlama, pp64_m256, 64, 256, 128, 10.0, 10000)
    ->Name("BM_AutoSchedule/llama_pp64_m256_budget10s")->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_AutoGrid(benchmark::State& state, Case c) {
  const ModelFile model = GridModel(c.costs, c.pp);
  absl::StatusOr<AutoScheduleResult> r = absl::UnknownError("not run");
  for (auto _ : state) r = AutoSchedule(model, Options(c));
  if (!CheckOk(state, r.status())) return;
  state.SetLabel(c.Label());
  state.counters["auto_us"] = r->evaluation.makespan_us;
  state.counters["lower_bound_us"] = r->best_lower_bound_us;
  Outcomes().push_back({c, std::move(r)});
}

void RegisterGrid() {
  for (const Costs& costs : {kBalanced, kTypical, kHeavy}) {
    for (int pp : {4, 8}) {
      for (int m : {2 * pp, 3 * pp, 4 * pp}) {
        for (double cap : {1.0, 1.5, 2.0}) {
          const Case c{costs, pp, m, cap * pp};
          benchmark::RegisterBenchmark(("BM_AutoGrid/" + c.Label()).c_str(), BM_AutoGrid, c)
              ->Iterations(1)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

// The table and the checks; returns whether every check passed.
bool PrintGrid() {
  bool ok = true;
  std::printf("\n| case | auto | best built-in that fits | zero-bubble heuristic | lower bound | "
              "auto / bound | checks |\n|---|---|---|---|---|---|---|\n");
  for (const Outcome& o : Outcomes()) {
    if (!o.result.ok()) {
      std::printf("| %s | error: %s |\n", o.c.Label().c_str(),
                  std::string(o.result.status().message()).c_str());
      ok = false;
      continue;
    }
    const AutoScheduleResult& r = *o.result;
    const double t = r.evaluation.makespan_us;
    const double ratio = t / r.best_lower_bound_us;
    std::string checks;
    if (!r.best_builtin.empty() && t > r.best_builtin_us * (1 + 1e-9)) {
      checks += "SLOWER THAN BUILT-IN ";
    }
    if (r.heuristic_us.has_value() && t > *r.heuristic_us * (1 + 1e-9)) {
      checks += "SLOWER THAN HEURISTIC ";
    }
    if (o.c.cap_units >= 2 * o.c.pp && ratio > 1.02) checks += "OVER 2% FROM THE BOUND ";
    if (checks.empty()) checks = "ok";
    ok = ok && checks == "ok";
    std::printf("| %s | %.4g | %s %.4g | %s | %.4g | %.4f | %s |\n", o.c.Label().c_str(), t,
                r.best_builtin.empty() ? "none" : r.best_builtin.c_str(), r.best_builtin_us,
                r.heuristic_us ? absl::StrFormat("%.4g", *r.heuristic_us).c_str() : "none",
                r.best_lower_bound_us, ratio, checks.c_str());
  }
  return ok;
}

}  // namespace
}  // namespace jitpipe::bench

int main(int argc, char** argv) {
  jitpipe::bench::RegisterGrid();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (jitpipe::bench::Outcomes().empty()) return 0;
  return jitpipe::bench::PrintGrid() ? 0 : 1;
}
