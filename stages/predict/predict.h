// From a schedule to its predicted step under a cost model: the steps that
// `jitpipe simulate`, `compare`, `render` and `plan --trace` share.
//
//   compute-only Schedule --Lower(reduce_grad, [overlap])--> lowered Schedule
//   lowered Schedule      --[OverlapReduce]-->               lowered Schedule
//   lowered + Model       --ComputeBufferLifetimes(policy) per rank,
//                           BuildExecutable, Simulate-->     SimulationResult
//
// With `overlap`, the overlap pass's memory limit is PlannedPeak(model) and
// its step time SimulatedStepTime(model).
// Pure functions; thread-compatible.
#ifndef JITPIPE_STAGES_PREDICT_PREDICT_H_
#define JITPIPE_STAGES_PREDICT_PREDICT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/overlap_reduce.h"
#include "stages/exec/rank_executable.h"
#include "stages/predict/simulator.h"

namespace jitpipe {

struct PredictOptions {
  bool overlap = false;  // run the overlap pass (overlap_reduce.h)
  // With overlap: whether the pass may merge the last I and W of the rank
  // that ends the step (overlap_reduce.h, step 4).
  LastBackward last_backward = LastBackward::kMergeWhereShorter;
  MemoryPolicy policy = MemoryPolicy::kJit;
  bool record_timeline = false;
};

struct Prediction {
  Schedule lowered;  // the program simulated
  Executable executable;
  SimulationResult simulation;
  // False when the model has data parallelism (dp.size > 1) but the program
  // has no REDUCE_GRAD: the prediction then leaves reductions out.
  bool reductions_modelled = true;
  // With overlap: the pass's merge decisions (OverlapReduceResult::merges).
  std::vector<BackwardMergeDecision> overlap_merges = {};
};

// Lowers (a compute-only `schedule`, with reduce_grad on so reductions are
// modelled), optionally overlaps, plans buffers and simulates one step.
// Errors: those of Lower(), OverlapReduce() (FailedPrecondition for overlap
// on a lowered program without REDUCE_GRAD), ComputeBufferLifetimes(),
// BuildExecutable() and Simulate() (InvalidArgument for a deadlock).
// `schedule` is taken by value: a caller done with a lowered schedule moves
// it in, and it is simulated without a copy (Prediction::lowered).
absl::StatusOr<Prediction> Predict(Schedule schedule, const Model& model,
                                   const PredictOptions& options = {});

// The last steps of Predict() for a lowered schedule whose buffers are
// planned already (`buffers[r]` from ComputeBufferLifetimes for rank r, any
// policy): BuildExecutable and Simulate. reductions_modelled as in Predict.
// The buffers are taken by value and released once the executable holds
// what it needs of them, before the simulation (a caller done with them
// moves them in: at pp 128 they are over 100 MB).
// Errors: those of BuildExecutable() and Simulate().
// REQUIRES: buffers.size() == lowered.pp.
absl::StatusOr<Prediction> SimulatePlanned(Schedule lowered, const Model& model,
                                           std::vector<RankBuffers> buffers,
                                           bool record_timeline);

// Whether the model gives any compute time (forward, backward, overlap; in
// its defaults or a stage override): without one, every simulated action
// takes no time and a timeline says nothing that program order does not.
bool HasTimes(const Model& model);

// The memory limit the overlap pass keeps under `model`: a rank's peak live
// bytes under the jit plan (ComputeBufferLifetimes, program order). A model
// that gives no byte sizes has no memory plan to keep; it gets
// ActivationUnitPeak instead. The function keeps a copy of `model`.
RankPeakFunction PlannedPeak(const Model& model);

// The overlap pass's step time under `model`: a lowered schedule's makespan
// and each rank's end, simulated with jit buffers. Keeps a copy of `model`.
StepTimeFunction SimulatedStepTime(const Model& model);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_PREDICT_PREDICT_H_
