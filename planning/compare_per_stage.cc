#include "planning/compare_per_stage.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "memory/memory_plan.h"
#include "scheduler/generators/generate.h"
#include "stages/predict/predict.h"

namespace jitpipe {
namespace {

// The worst rank's jit peak and arena, and eager peak, of `lowered`.
absl::Status PlanWorstRanks(const Schedule& lowered, const Model& model, PerStageRow& row) {
  for (int r = 0; r < lowered.pp; ++r) {
    ASSIGN_OR_RETURN(RankMemoryPlan jit,
                     PlanRankMemory(lowered, model, r, {.policy = MemoryPolicy::kJit}));
    ASSIGN_OR_RETURN(RankMemoryPlan eager, PlanRankMemory(lowered, model, r,
                                                          {.policy = MemoryPolicy::kEager,
                                                           .arena = false}));
    row.jit_peak = std::max(row.jit_peak, jit.peak.bytes);
    row.arena = std::max(row.arena, jit.arena.arena_bytes);
    row.eager_peak = std::max(row.eager_peak, eager.peak.bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<PerStageRow> Evaluate(const GeneratorInfo& g, int pp, int microbatches, int v,
                                     const Model& model, bool overlap) {
  ASSIGN_OR_RETURN(Schedule s, Generate({.schedule = g.name,
                                         .pp = pp,
                                         .microbatches = microbatches,
                                         .stages_per_rank = v}));
  ASSIGN_OR_RETURN(Prediction p, Predict(s, model, {.overlap = overlap}));
  PerStageRow row{.schedule = g.name,
                  .stages_per_rank = s.stages_per_rank,
                  .work = int64_t{s.num_stages()} * s.microbatches_per_chain() / s.pp,
                  .simulation = p.simulation};
  for (const RankSimulation& rank : p.simulation.ranks) {
    row.simulated_peak = std::max(row.simulated_peak, rank.peak_bytes);
  }
  RETURN_IF_ERROR(PlanWorstRanks(p.lowered, model, row));
  return row;
}

}  // namespace

absl::StatusOr<PerStageComparison> ComparePerStage(const Model& model, int pp, int microbatches,
                                                   int stages_per_rank, bool overlap) {
  if (pp < 1 || microbatches < 1 || stages_per_rank < 0) {
    return absl::InvalidArgumentError(
        "--pp and --microbatches must be >= 1, --stages-per-rank >= 0");
  }
  PerStageComparison out;
  for (const GeneratorInfo& g : AllGenerators()) {
    absl::StatusOr<PerStageRow> row = Evaluate(g, pp, microbatches, stages_per_rank, model,
                                               overlap);
    if (row.ok()) {
      out.rows.push_back(*std::move(row));
    } else {
      out.skipped.push_back({g.name, std::string(row.status().message())});
    }
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const PerStageRow& a, const PerStageRow& b) {
                     return std::tie(a.simulation.makespan_us, a.schedule) <
                            std::tie(b.simulation.makespan_us, b.schedule);
                   });
  return out;
}

}  // namespace jitpipe
