// `jitpipe replay --backend cuda --buffers arena --graph`: a step of the
// one-GPU backend run eagerly, then captured once as a CUDA graph
// (comm/cuda/step_graph.h) and replayed, with the host time per step of
// both ways measured and the replayed step checked against the CPU
// reference. One thread drives every rank (RunStepsTogether): the capture
// sees one step of all of them. Part of the device module (replay.h).
//
// Why arena buffers: every buffer has a fixed address (the plan's offset
// in one slab), so the captured work is valid for every later step; the
// parameters are not updated (the reference mlp has no optimizer step), so
// every step computes the same loss and gradients. The stages are any that
// enqueue on the stream they are handed and never synchronise (the cuBLAS
// mlp, the bf16 transformer: stages/reference/cuda_*_stage.h).
#ifndef JITPIPE_RUNTIME_GPU_GRAPH_STEP_H_
#define JITPIPE_RUNTIME_GPU_GRAPH_STEP_H_

#include <cstddef>
#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/cuda/cuda_world.h"
#include "runtime/replay_plan.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_reference.h"

namespace jitpipe::gpu {

struct GraphSteps {
  int steps = 0;             // of each way
  size_t nodes = 0;          // in the captured graph
  double eager_host_us = 0;  // median wall time of an eager step (enqueue + end-of-step wait)
  double graph_host_us = 0;  // median wall time of a graph launch and its completion
  double eager_loss = 0;     // the last eager step's
  double graph_loss = 0;     // after the last replay
  std::optional<MlpComparison> check;  // the replayed step against the reference
};

// A step's loss and the stages' last gradients against a reference;
// REQUIRES: the step has ended and its streams are synchronised.
using StepCheck = std::function<absl::StatusOr<MlpComparison>(double loss)>;

// Runs `steps` eager steps, captures one, replays it `steps` times, over
// `world` (pp ranks, dp 1) with `stages` (borrowed); `check`, when set, checks
// the last replay. Errors: InvalidArgument
// for a plan of dp > 1 or without an arena; the executor's, the stages',
// a CUDA error (a capture that the step's work broke names the call).
absl::StatusOr<GraphSteps> RunGraphSteps(const ReplayPlan& plan, CudaWorld& world,
                                         StageFactory& stages, int steps,
                                         absl::Duration timeout, const StepCheck& check);

}  // namespace jitpipe::gpu

#endif  // JITPIPE_RUNTIME_GPU_GRAPH_STEP_H_
