// The exact verdict on a compute-only schedule under a per-stage cost model
// and per-rank memory limits: lowered (REDUCE_GRAD on, receives placed as
// asked), planned (memory per rank, all of it: rank_memory.h) and, when it
// fits, simulated (stages/simulator.h). The auto scheduler and the
// zero-bubble heuristic judge every candidate with it.
#ifndef JITPIPE_PLANNING_SCHEDULE_EVAL_H_
#define JITPIPE_PLANNING_SCHEDULE_EVAL_H_

#include <limits>

#include "absl/status/statusor.h"
#include "planning/rank_memory.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/lower.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

struct Evaluation {
  RecvPlacement recv = RecvPlacement::kJit;
  MemoryReport memory = {};
  bool fits = false;
  // Simulated only when it fits, or when simulate_if_over is set;
  // infinity otherwise.
  double makespan_us = std::numeric_limits<double>::infinity();
  SimulationResult simulation = {};
};

// How EvaluateSchedule lowers for `recv`: REDUCE_GRAD on; for kOffset the
// offsets chosen under `training`'s limits (recv_offsets.h). Keeps copies.
LowerOptions EvaluationLowering(const Model& model, const TrainingMemory& training,
                                RecvPlacement recv);

// `training.device` gives the limits. Errors: those of Lower,
// ComputeBufferLifetimes and Simulate.
absl::StatusOr<Evaluation> EvaluateSchedule(const Schedule& compute_only, const Model& model,
                                            const TrainingMemory& training, RecvPlacement recv,
                                            bool simulate_if_over = false);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_SCHEDULE_EVAL_H_
