// `jitpipe replay --backend cuda|nccl|nccl-lazy`: the device replay, which
// lives in a module of its own (libjitpipe_gpu.so, replay.cc) that the
// CLI loads with dlopen only when a device backend is asked for
// (module_loader.cc). Why: libnccl and libcublas cost the process about a
// second to load (measured here: a program linked against both starts in
// 1.2 s instead of 16 ms), which every other subcommand must not pay. The
// CLI itself links the CUDA runtime statically (no libcudart at start-up,
// libcuda is opened at the first CUDA call) and checks for a device first
// (CheckCudaDevice), so that a machine without one fails fast, with "no
// CUDA device", without loading the module.
//
// The module is built from this tree with the same compiler and flags as
// the CLI and is found next to the executable (the build tree) or in
// ../lib (an install). Both sides pass C++ objects of this header across;
// kGpuReplayAbi changes with any change of it or of the types it names.
// The module carries its own copies of the project's static libraries:
// objects cross by pointer and virtual call only, and what it returns is
// plain data.
#ifndef JITPIPE_RUNTIME_GPU_REPLAY_H_
#define JITPIPE_RUNTIME_GPU_REPLAY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/replay.h"
#include "runtime/replay_plan.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_reference.h"
#include "stages/reference/mlp_stage.h"
#include "stages/reference/transformer_stage.h"
#include "runtime/gpu/stage_timer.h"

namespace jitpipe::gpu {

inline constexpr int kGpuReplayAbi = 2;

// What `--graph` measured (graph_step.h, GraphSteps).
struct GraphStepsReport {
  int steps = 0;
  size_t nodes = 0;
  double eager_host_us = 0;
  double graph_host_us = 0;
  double eager_loss = 0;
  double graph_loss = 0;
  std::optional<MlpComparison> check;  // without a check: none
};

struct GpuReplayRequest {
  std::string backend;  // cuda | nccl | nccl-lazy
  const ReplayPlan* plan = nullptr;
  // The CLI's host stages (the cpu mlp or the cost stage), run staged
  // through host memory (stages/device/host_staged_stage.h) unless
  // `device_mlp` is set.
  StageFactory* host_stages = nullptr;
  // Set with --stage mlp: the cpu mlp whose options and layout the check
  // uses (and, when staged, the stages that ran).
  MlpStageFactory* mlp = nullptr;
  // --stage mlp on the one-GPU backend: the cuBLAS mlp
  // (stages/reference/cuda_mlp_stage.h) in fp32, checked against the cpu
  // reference through its own gradients.
  bool device_mlp = false;
  // --stage transformer on the one-GPU backend: the bf16 cuBLAS transformer
  // (stages/reference/cuda_transformer_stage.h) of these options (borrowed),
  // run instead of host_stages.
  const TransformerOptions* transformer = nullptr;
  // With `transformer`: check the step against the fp32 CPU reference
  // trainer (device_check). Off at a real size, where the reference is
  // hundreds of TFLOPs on the CPU.
  bool reference_check = true;
  // Time every stage call on the device (stage_timer.h): the costs to
  // simulate with.
  bool measure_costs = false;
  // Then, with the device mlp or transformer and arena buffers at dp 1: options.steps
  // eager steps, one captured as a CUDA graph, options.steps replays of it
  // (graph_step.h), timed and checked.
  bool graph = false;
  ReplayOptions options;
};

struct GpuReplayOutcome {
  ReplayResult result;
  // False on an NCCL process other than world rank 0: it reports nothing.
  bool report = true;
  // With a device mlp, or the device transformer and reference_check: the
  // worst step's check (computed in the module, where the device gradients
  // are).
  std::optional<MlpComparison> device_check;
  // With measure_costs: each of this process's stages' mean device times.
  std::vector<MeasuredStageCosts> costs;
  // With graph: the eager and graph-replayed steps.
  std::optional<GraphStepsReport> graph;
};

// The module's entry point, exported as "jitpipe_gpu_replay" with C
// linkage (a function of this type).
using GpuReplayFn = absl::StatusOr<GpuReplayOutcome> (*)(const GpuReplayRequest& request);
// Exported as "jitpipe_gpu_replay_abi".
using GpuReplayAbiFn = int (*)();

// In the CLI's process (module_loader.cc): the device check, then the module's replay.
// Errors: Unavailable "no CUDA device (...)" or "this build has no CUDA
// backend ..."; FailedPrecondition when the module cannot be loaded or is
// of another ABI; the replay's.
absl::StatusOr<GpuReplayOutcome> RunGpuReplay(const GpuReplayRequest& request);

}  // namespace jitpipe::gpu

#endif  // JITPIPE_RUNTIME_GPU_REPLAY_H_
