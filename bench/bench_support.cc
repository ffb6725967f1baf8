#include "bench/bench_support.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "scheduler/generators/generate.h"
#include "scheduler/passes/lower.h"

namespace jitpipe::bench {
namespace {

using SizeKey = std::tuple<std::string, int, int, int>;

SizeKey KeyOf(const Size& size) {
  return {size.schedule, size.pp, size.stages_per_rank, size.microbatches};
}

// Cached schedules; node-based, so references stay valid as it grows.
std::map<SizeKey, std::unique_ptr<Schedule>>& Cache(bool lowered) {
  static auto* compute_only = new std::map<SizeKey, std::unique_ptr<Schedule>>();
  static auto* lowered_cache = new std::map<SizeKey, std::unique_ptr<Schedule>>();
  return lowered ? *lowered_cache : *compute_only;
}

[[noreturn]] void Die(const Size& size, const absl::Status& status) {
  std::fprintf(stderr, "benchmark input %s: %s\n", size.Label().c_str(),
               std::string(status.message()).c_str());
  std::abort();
}

}  // namespace

std::string Size::Label() const {
  return absl::StrCat(schedule, " pp", pp, " v", stages_per_rank, " m", microbatches);
}

const Schedule& ComputeOnly(const Size& size) {
  std::unique_ptr<Schedule>& slot = Cache(false)[KeyOf(size)];
  if (slot == nullptr) {
    absl::StatusOr<Schedule> generated = Generate({.schedule = size.schedule,
                                                   .pp = size.pp,
                                                   .microbatches = size.microbatches,
                                                   .stages_per_rank = size.stages_per_rank});
    if (!generated.ok()) Die(size, generated.status());
    slot = std::make_unique<Schedule>(*std::move(generated));
  }
  return *slot;
}

const Schedule& Lowered(const Size& size) {
  std::unique_ptr<Schedule>& slot = Cache(true)[KeyOf(size)];
  if (slot == nullptr) {
    absl::StatusOr<Schedule> lowered = Lower(ComputeOnly(size));
    if (!lowered.ok()) Die(size, lowered.status());
    slot = std::make_unique<Schedule>(*std::move(lowered));
  }
  return *slot;
}

Model ExampleModel() {
  Model model;
  model.defaults.forward_us = 1;
  model.defaults.backward_input_us = 1;
  model.defaults.backward_weight_us = 1;
  model.defaults.input_bytes = int64_t{1} << 20;
  model.defaults.output_bytes = int64_t{1} << 20;
  model.defaults.stash_bytes = int64_t{4} << 20;
  model.defaults.param_bytes = int64_t{16} << 20;
  return model;
}

Model SkewedModel(int num_stages) {
  Model model = ExampleModel();
  constexpr int64_t kMiB = int64_t{1} << 20;
  constexpr int64_t kStash[] = {2, 4, 6, 3};
  constexpr int64_t kActivation[] = {1, 2, 3};
  for (int stage = 0; stage < num_stages; ++stage) {
    StageOverride o;
    o.index = stage;
    o.spec.stash_bytes = kStash[stage % 4] * kMiB;
    o.spec.output_bytes = kActivation[stage % 3] * kMiB;
    // A stage's input is its predecessor's output.
    o.spec.input_bytes = kActivation[(stage + 2) % 3] * kMiB;
    model.stages.push_back(o);
  }
  return model;
}

Model DistinctModel(int num_stages) {
  Model model = ExampleModel();
  constexpr int64_t kMiB = int64_t{1} << 20;
  auto output = [](int stage) { return kMiB + (int64_t{stage} * 104729 % 53) * 8191; };
  for (int stage = 0; stage < num_stages; ++stage) {
    StageOverride o;
    o.index = stage;
    o.spec.stash_bytes = 3 * kMiB + (int64_t{stage} * 7919 % 61) * 4099;
    o.spec.output_bytes = output(stage);
    o.spec.input_bytes = stage > 0 ? output(stage - 1) : kMiB;
    model.stages.push_back(o);
  }
  return model;
}

void Report(benchmark::State& state, const std::string& label, int64_t items, int64_t actions,
            double target_ms) {
  state.SetLabel(label);
  state.SetItemsProcessed(state.iterations() * items);
  state.counters["actions"] = benchmark::Counter(static_cast<double>(actions));
  state.counters["actions/s"] = benchmark::Counter(static_cast<double>(actions),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  if (target_ms > 0) state.counters["target_ms"] = benchmark::Counter(target_ms);
}

bool CheckOk(benchmark::State& state, const absl::Status& status) {
  if (status.ok()) return true;
  state.SkipWithError(std::string(status.message()).c_str());
  return false;
}

}  // namespace jitpipe::bench
