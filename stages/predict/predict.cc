#include "stages/predict/predict.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/parallel_for.h"
#include "base/status_macros.h"
#include "memory/liveness.h"
#include "scheduler/passes/lower.h"
#include "scheduler/analysis/pass_utils.h"

namespace jitpipe {
namespace {

bool HasByteSizes(const StageSpec& spec) {
  for (const std::optional<int64_t>* bytes :
       {&spec.input_bytes, &spec.output_bytes, &spec.stash_bytes, &spec.param_bytes}) {
    if (bytes->value_or(0) > 0) return true;
  }
  return false;
}

bool HasByteSizes(const Model& model) {
  if (HasByteSizes(model.defaults)) return true;
  for (const StageOverride& o : model.stages) {
    if (HasByteSizes(o.spec)) return true;
  }
  return false;
}

// The program Predict() simulates, and the overlap pass's merge decisions.
// A compute-only schedule is lowered with reduce_grad, then overlapped: the
// overlap pass is the last one Lower() would run with these options.
absl::StatusOr<OverlapReduceResult> LowerForPrediction(Schedule schedule, const Model& model,
                                                       const PredictOptions& options) {
  if (!schedule.lowered) {
    ASSIGN_OR_RETURN(schedule, Lower(std::move(schedule), {.reduce_grad = true}));
  }
  // Moved: the caller's copy, if any, was made at the call.
  if (!options.overlap) return OverlapReduceResult{std::move(schedule), {}};
  return OverlapReduceWithReport(schedule, {.rank_peak = PlannedPeak(model),
                                            .step_time = SimulatedStepTime(model),
                                            .last_backward = options.last_backward});
}

// Every rank's buffers, ranks side by side (each a pure function of the
// schedule); the first failing rank's error, as rank order would give it.
absl::StatusOr<std::vector<RankBuffers>> LifetimesOfEveryRank(const Schedule& s,
                                                              const Model& model,
                                                              const LifetimeOptions& options) {
  return ParallelMap<RankBuffers>(s.pp, /*threads=*/0, [&](int r) {
    return ComputeBufferLifetimes(s, model, r, options);
  });
}

bool HasTimes(const StageSpec& spec) {
  for (const std::optional<double>* us : {&spec.forward_us, &spec.backward_input_us,
                                          &spec.backward_weight_us, &spec.backward_us,
                                          &spec.overlap_f_b_us}) {
    if (us->value_or(0) > 0) return true;
  }
  return false;
}

}  // namespace

bool HasTimes(const Model& model) {
  if (HasTimes(model.defaults)) return true;
  for (const StageOverride& o : model.stages) {
    if (HasTimes(o.spec)) return true;
  }
  return false;
}

RankPeakFunction PlannedPeak(const Model& model) {
  if (!HasByteSizes(model)) {
    return [](const Schedule& s, int rank) -> absl::StatusOr<int64_t> {
      return ActivationUnitPeak(s, rank);
    };
  }
  return [model](const Schedule& s, int rank) -> absl::StatusOr<int64_t> {
    ASSIGN_OR_RETURN(RankBuffers buffers,
                     ComputeBufferLifetimes(s, model, rank, {.policy = MemoryPolicy::kJit}));
    return PeakOf(LiveBytes(buffers)).bytes;
  };
}

StepTimeFunction SimulatedStepTime(const Model& model) {
  return [model](const Schedule& s) -> absl::StatusOr<StepTime> {
    ASSIGN_OR_RETURN(std::vector<RankBuffers> buffers,
                     LifetimesOfEveryRank(s, model, {.policy = MemoryPolicy::kJit}));
    ASSIGN_OR_RETURN(Executable executable, BuildExecutable(s, model, std::move(buffers)));
    ASSIGN_OR_RETURN(SimulationResult sim, Simulate(s, executable, model));
    StepTime out{.makespan_us = sim.makespan_us, .rank_end_us = {}};
    for (const RankSimulation& rank : sim.ranks) out.rank_end_us.push_back(rank.end_us);
    return out;
  };
}

absl::StatusOr<Prediction> SimulatePlanned(Schedule lowered, const Model& model,
                                           std::vector<RankBuffers> buffers,
                                           bool record_timeline) {
  Prediction out;
  out.lowered = std::move(lowered);
  out.reductions_modelled =
      model.dp.size <= 1 || HasAnyKind(out.lowered, {ActionKind::kReduceGrad});
  // Each rank's buffers go once its executable has what the simulation needs.
  ASSIGN_OR_RETURN(out.executable, BuildExecutable(out.lowered, model, std::move(buffers)));
  ASSIGN_OR_RETURN(out.simulation, Simulate(out.lowered, out.executable, model,
                                            {.record_timeline = record_timeline}));
  return out;
}

absl::StatusOr<Prediction> Predict(Schedule schedule, const Model& model,
                                   const PredictOptions& options) {
  ASSIGN_OR_RETURN(OverlapReduceResult lowered,
                   LowerForPrediction(std::move(schedule), model, options));
  ASSIGN_OR_RETURN(std::vector<RankBuffers> buffers,
                   LifetimesOfEveryRank(lowered.schedule, model, {.policy = options.policy}));
  ASSIGN_OR_RETURN(Prediction out, SimulatePlanned(std::move(lowered.schedule), model,
                                                   std::move(buffers), options.record_timeline));
  out.overlap_merges = std::move(lowered.merges);
  return out;
}

}  // namespace jitpipe
