#include "stages/predict/predict.h"

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "memory/liveness.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/pass_utils.h"

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

absl::StatusOr<Schedule> LowerForPrediction(const Schedule& schedule, const Model& model,
                                            bool overlap) {
  if (!schedule.lowered) {
    LowerOptions lower;
    lower.reduce_grad = true;
    lower.overlap = overlap;
    if (overlap) lower.overlap_peak = PlannedPeak(model);
    return Lower(schedule, lower);
  }
  if (!overlap) return schedule;
  return OverlapReduce(schedule, {.rank_peak = PlannedPeak(model)});
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

absl::StatusOr<Prediction> SimulatePlanned(Schedule lowered, const Model& model,
                                           const std::vector<RankBuffers>& buffers,
                                           bool record_timeline) {
  Prediction out;
  out.lowered = std::move(lowered);
  out.reductions_modelled =
      model.dp.size <= 1 || HasAnyKind(out.lowered, {ActionKind::kReduceGrad});
  ASSIGN_OR_RETURN(out.executable, BuildExecutable(out.lowered, model, buffers));
  ASSIGN_OR_RETURN(out.simulation, Simulate(out.lowered, out.executable, model,
                                            {.record_timeline = record_timeline}));
  return out;
}

absl::StatusOr<Prediction> Predict(const Schedule& schedule, const Model& model,
                                   const PredictOptions& options) {
  ASSIGN_OR_RETURN(Schedule lowered, LowerForPrediction(schedule, model, options.overlap));
  std::vector<RankBuffers> buffers;
  buffers.reserve(lowered.pp);
  for (int r = 0; r < lowered.pp; ++r) {
    ASSIGN_OR_RETURN(RankBuffers b,
                     ComputeBufferLifetimes(lowered, model, r, {.policy = options.policy}));
    buffers.push_back(std::move(b));
  }
  return SimulatePlanned(std::move(lowered), model, buffers, options.record_timeline);
}

}  // namespace jitpipe
