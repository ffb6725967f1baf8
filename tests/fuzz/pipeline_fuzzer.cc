// The pipeline on whatever parses: a schedule (jitpipe JSON when the input
// starts with "{", else PyTorch CSV) goes through Validate(); a compute-only
// one through Lower() with options picked from a hash of the input; every
// lowered program that validates through the memory planner, the executable
// builder and the simulator.
//
// Properties checked (the headers' contracts):
//   - no step returns Internal (a bug, by the house rules);
//   - what Lower() returns passes Validate() under the semantics its receive
//     placement promises (lower.h): relaxed for jit, strict too for early
//     and jit-rendezvous;
//   - a lowered program that Validate() accepts can be planned, built and
//     simulated without error (buffer_lifetimes.h, rank_executable.h:
//     "expected to pass Validate()"), and the simulator, which follows the
//     same execution semantics, never finds a deadlock the validator missed;
//   - after a jit lowering, the jit plan's peak equals the liveness lower
//     bound (lower.h, memory_plan.h); arena >= peak >= lower bound on every
//     rank;
//   - the simulation's bubble fractions lie in [0, 1].
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "memory/buffer_lifetimes.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/format_grid.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/ir/schedule_csv.h"
#include "scheduler/ir/schedule_json.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/validate.h"
#include "stages/exec/rank_executable.h"
#include "stages/predict/simulator.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_limits.h"

namespace jitpipe::fuzz {
namespace {

Model FuzzModel() {
  Model model;
  model.defaults.forward_us = 2;
  model.defaults.backward_input_us = 3;
  model.defaults.backward_weight_us = 1;
  model.defaults.input_bytes = 1000;
  model.defaults.output_bytes = 1000;
  model.defaults.stash_bytes = 4000;
  model.defaults.param_bytes = 16000;
  model.p2p.latency_us = 1;
  model.p2p.gb_per_s = 1;
  return model;
}

// FNV-1a of the input: deterministic, unlike absl::Hash (seeded per
// process), so that a crashing input replays with the same options.
uint64_t Fnv1a(absl::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

// Lowering options from bits of a hash of the input: libFuzzer reaches
// every combination without a format of its own for them.
LowerOptions OptionsFrom(uint64_t hash) {
  LowerOptions options;
  options.recv = (hash & 1)          ? RecvPlacement::kEarly
                 : ((hash >> 5) & 1) ? RecvPlacement::kJitRendezvous
                                     : RecvPlacement::kJit;
  options.backward = static_cast<BackwardForm>((hash >> 1) % 3);
  options.fsdp = (hash >> 3) & 1;
  options.reduce_grad = (hash >> 4) & 1;
  options.check_invariants = true;  // a broken invariant is Internal: caught below
  return options;
}

std::string Describe(const Schedule& schedule) { return FormatPipelineOrder(schedule.ranks); }

// Plans, builds and simulates a lowered schedule that passed Validate().
void PlanBuildSimulate(const Schedule& lowered, bool jit_lowering) {
  const Model model = FuzzModel();
  absl::StatusOr<std::vector<RankMemoryPlan>> plans = PlanMemory(lowered, model, {});
  Check(plans.ok(), "a validated program can be planned",
        absl::StrCat(plans.status().ToString(), "\n", Describe(lowered)));
  std::vector<RankBuffers> buffers;
  for (const RankMemoryPlan& plan : *plans) {
    Check(plan.arena.arena_bytes >= plan.peak.bytes && plan.peak.bytes >= plan.lower_bound.bytes,
          "arena >= peak >= lower bound", plan.ToString());
    if (jit_lowering) {
      Check(plan.peak.bytes == plan.lower_bound.bytes,
            "a just-in-time lowering's jit peak equals the lower bound", plan.ToString());
    }
    buffers.push_back(plan.buffers);
  }
  absl::StatusOr<Executable> executable = BuildExecutable(lowered, model, buffers);
  Check(executable.ok(), "a validated program can be built",
        absl::StrCat(executable.status().ToString(), "\n", Describe(lowered)));
  absl::StatusOr<SimulationResult> result = Simulate(lowered, *executable, model);
  Check(result.ok(), "the simulator finds no deadlock in a validated program",
        absl::StrCat(result.status().ToString(), "\n", Describe(lowered)));
  Check(result->bubble_fraction >= 0 && result->bubble_fraction <= 1 &&
            result->span_bubble_fraction >= 0 && result->span_bubble_fraction <= 1,
        "bubble fractions in [0, 1]", Describe(lowered));
}

void LowerAndCheck(const Schedule& schedule, uint64_t hash) {
  const LowerOptions options = OptionsFrom(hash);
  absl::StatusOr<Schedule> lowered = Lower(schedule, options);
  if (!lowered.ok()) {
    CheckNotInternal(lowered.status(), "Lower");
    return;
  }
  // lower.h: jit validates under relaxed semantics, early and
  // jit-rendezvous under strict ones too; planning and simulating need
  // relaxed validity only.
  const bool jit = options.recv == RecvPlacement::kJit;
  for (CommSemantics semantics : {CommSemantics::kRelaxed, CommSemantics::kStrict}) {
    const absl::Status valid = Validate(*lowered, {.semantics = semantics, .grid_rows = 0});
    CheckNotInternal(valid, "Validate(Lower())");
    if (!jit || semantics == CommSemantics::kRelaxed) {
      Check(valid.ok(), "a lowering validates (jit: relaxed; early, jit-rendezvous: strict too)",
            absl::StrCat(RecvPlacementName(options.recv), ": ", valid.ToString(), "\n",
                         Describe(*lowered)));
    }
    if (!valid.ok() && semantics == CommSemantics::kRelaxed) return;
  }
  PlanBuildSimulate(*lowered, jit);
}

}  // namespace
}  // namespace jitpipe::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace jitpipe;  // NOLINT: a fuzz entry point
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Schedule> schedule =
      !text.empty() && text[0] == '{' ? ParseScheduleJson(text) : ParseScheduleCsv(text);
  if (!schedule.ok() || !fuzz::SmallEnough(*schedule)) return 0;
  const absl::Status valid = Validate(*schedule, {.grid_rows = 0});
  fuzz::CheckNotInternal(valid, "Validate");
  if (!valid.ok()) return 0;
  if (schedule->lowered) {
    fuzz::PlanBuildSimulate(*schedule, /*jit_lowering=*/false);
  } else {
    fuzz::LowerAndCheck(*schedule, fuzz::Fnv1a(text));
  }
  return 0;
}
