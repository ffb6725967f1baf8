// The device replay module (libjitpipe_gpu.so; contract in replay.h):
// makes the device world the request names, the stages it runs on it, runs
// the replay and, for the device mlp and transformer, checks it against the
// cpu reference where its gradients are.
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_world.h"
#include "comm/nccl/nccl_world.h"
#include "stages/reference/mlp_gradients.h"
#include "stages/device/host_staged_stage.h"
#include "stages/reference/cuda_mlp_stage.h"
#if JITPIPE_HAVE_BLAS
#include "stages/reference/cuda_transformer_stage.h"
#include "stages/reference/transformer_reference.h"
#endif
#include "runtime/gpu/graph_step.h"
#include "runtime/gpu/replay.h"
#include "runtime/gpu/stage_timer.h"

namespace jitpipe::gpu {
namespace {

// The reductions of the model's dtype policy (reduce_dtype, else the
// gradients'), in its buckets.
absl::StatusOr<DeviceReduction> ReductionOf(const Model& model) {
  DeviceReduction reduction;
  switch (model.dp.EffectiveReduceDtype()) {
    case Dtype::kFp32:
      reduction.wire = WireType::kFp32;
      break;
    case Dtype::kBf16:
      reduction.wire = WireType::kBf16;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("the device backends reduce in fp32 or bf16, not ",
                       DtypeName(model.dp.EffectiveReduceDtype())));
  }
  reduction.buckets = model.dp.buckets;
  return reduction;
}

absl::StatusOr<std::unique_ptr<World>> MakeWorld(const GpuReplayRequest& request,
                                                 const DeviceReduction& reduction) {
  const ReplayPlan& plan = *request.plan;
  if (request.backend == "cuda") {
    CudaOptions options;
    options.reduction = reduction;
    ASSIGN_OR_RETURN(std::unique_ptr<CudaWorld> world,
                     CreateCudaWorld(plan.schedule.pp * request.options.dp, options));
    return std::unique_ptr<World>(std::move(world));
  }
  NcclOptions options;
  options.mode = request.backend == "nccl-lazy" ? NcclMode::kLazy : NcclMode::kEager;
  options.edges = P2pEdges(plan.executable, plan.schedule.pp, request.options.dp);
  options.reduction = reduction;
  ASSIGN_OR_RETURN(std::unique_ptr<NcclWorld> world, CreateNcclWorld(nullptr, nullptr, options));
  return std::unique_ptr<World>(std::move(world));
}

// A step's check of the device stages against the cpu reference (a
// StepCheck, graph_step.h), or nullptr with no check to make. The
// reference runs once, at the first call.
absl::StatusOr<StepCheck> DeviceCheck(const GpuReplayRequest& request, const StageFactory* stages,
                                      ReduceKind reduce) {
  if (request.device_mlp) {
    const auto* mlp = static_cast<const CudaMlpStageFactory*>(stages);
    auto reference = std::make_shared<std::optional<MlpReference>>();
    return StepCheck([mlp, reference, reduce](double loss) {
      if (!reference->has_value()) {
        *reference = RunMlpReference(mlp->options().mlp, mlp->layout());
      }
      return CompareWithReference(
          **reference, loss, mlp->layout(),
          [mlp](int stage, int replica) { return mlp->FinishedGrads(stage, replica); }, reduce);
    });
  }
#if JITPIPE_HAVE_BLAS
  if (request.transformer != nullptr && request.reference_check) {
    const auto* device = static_cast<const CudaTransformerStageFactory*>(stages);
    auto reference = std::make_shared<std::optional<MlpReference>>();
    return StepCheck([device, reference, reduce](double loss) {
      if (!reference->has_value()) {
        *reference = RunTransformerReference(device->options(), device->layout());
      }
      return CompareWithReference(
          **reference, loss, device->layout(),
          [device](int stage, int replica) { return device->FinishedGrads(stage, replica); },
          reduce);
    });
  }
#endif
  return StepCheck();
}

#if JITPIPE_HAVE_BLAS
// The CLI plans the device transformer with the model file's sizes (it
// cannot ask the device stage without loading cuBLAS): each stage's sizes
// must be the plan's, else the plan's buffers do not fit the stage.
// FailedPrecondition naming the first stage that differs.
absl::Status CheckPlannedSizes(const ReplayPlan& plan, const TransformerOptions& options,
                               const MlpLayout& layout) {
  const int grad_bytes = DtypeBytes(plan.model.dp.grad_dtype);
  const int param_bytes = DtypeBytes(plan.model.dp.param_dtype);
  for (int s = 0; s < plan.schedule.num_stages(); ++s) {
    const StageSizes d = CudaTransformerSizes(options, s % layout.stages_per_chain);
    const StageCost c = plan.model.ForStage(s);
    const int64_t params = d.param_grad_bytes / grad_bytes * param_bytes;
    if (d.input_bytes != c.input_bytes || d.output_bytes != c.output_bytes ||
        d.stash_bytes != c.stash_bytes || d.stash_segments != c.stash_segments ||
        params != c.param_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", s, " of the model (input ", c.input_bytes, ", output ", c.output_bytes,
          ", stash ", c.stash_bytes, " in ", std::max<size_t>(1, c.stash_segments.size()),
          " segments, params ", c.param_bytes,
          " bytes) differs from the cuda transformer stage's (", d.input_bytes, ", ",
          d.output_bytes, ", ", d.stash_bytes, " in ", std::max<size_t>(1, d.stash_segments.size()),
          ", ", params,
          "); write the model with `jitpipe model ... --dtype bf16`"));
    }
  }
  return absl::OkStatus();
}
#endif

// The device stages the request asks for (the cuBLAS mlp or transformer),
// or the host ones staged through host memory.
absl::StatusOr<std::unique_ptr<StageFactory>> MakeStages(const GpuReplayRequest& request) {
  if (request.device_mlp) {
    return std::unique_ptr<StageFactory>(std::make_unique<CudaMlpStageFactory>(
        CudaMlpOptions{request.mlp->options(), Dtype::kFp32}, request.mlp->layout()));
  }
  if (request.transformer != nullptr) {
#if JITPIPE_HAVE_BLAS
    RETURN_IF_ERROR(ValidateCudaTransformerOptions(*request.transformer));
    const MlpLayout layout = MlpLayout::Of(request.plan->schedule, request.options.dp);
    RETURN_IF_ERROR(CheckPlannedSizes(*request.plan, *request.transformer, layout));
    return std::unique_ptr<StageFactory>(std::make_unique<CudaTransformerStageFactory>(
        *request.transformer, layout));
#else
    return absl::UnavailableError(
        "the cuda transformer stage is not in this module: OpenBLAS was not found when it was "
        "configured");
#endif
  }
  return std::unique_ptr<StageFactory>(std::make_unique<HostStagedFactory>(request.host_stages));
}

absl::StatusOr<GpuReplayOutcome> Run(const GpuReplayRequest& request) {
  // This module's own abseil: as the CLI does for its own.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const ReplayPlan& plan = *request.plan;
  const bool device_stages = request.device_mlp || request.transformer != nullptr;
  if (request.device_mlp && (request.backend != "cuda" || request.mlp == nullptr)) {
    return absl::InvalidArgumentError("the device mlp runs on the one-GPU backend (cuda) only");
  }
  if (request.transformer != nullptr && (request.backend != "cuda" || request.device_mlp)) {
    return absl::InvalidArgumentError(
        "the device transformer runs on the one-GPU backend (cuda) only");
  }
  if (request.graph && (!device_stages || request.options.buffers != BufferMode::kArena ||
                        request.options.dp != 1)) {
    return absl::InvalidArgumentError(
        "--graph needs --backend cuda, --stage mlp or transformer, --buffers arena and --dp 1");
  }
  ASSIGN_OR_RETURN(DeviceReduction reduction, ReductionOf(plan.model));
  ASSIGN_OR_RETURN(std::unique_ptr<World> world, MakeWorld(request, reduction));
  ASSIGN_OR_RETURN(std::unique_ptr<StageFactory> stages, MakeStages(request));
  ASSIGN_OR_RETURN(StepCheck check, DeviceCheck(request, stages.get(), plan.model.dp.reduce));
  std::unique_ptr<TimedStageFactory> timed;
  if (request.measure_costs) timed = std::make_unique<TimedStageFactory>(stages.get());
  GpuReplayOutcome out;
  ASSIGN_OR_RETURN(out.result,
                   RunReplay(plan.schedule, plan.executable, plan.plans,
                             timed != nullptr ? *timed : *stages, *world, request.options));
  if (timed != nullptr) {
    ASSIGN_OR_RETURN(out.costs, timed->Costs());
  }
  if (request.mlp != nullptr && !device_stages) {
    RETURN_IF_ERROR(GatherMlpGradients(plan.schedule, *request.mlp, *world, request.options.timeout));
  }
  out.report = world->is_root();
  if (check) {
    // The worst step's (the steps are identical).
    std::optional<MlpComparison> worst;
    for (double loss : out.result.step_loss) {
      ASSIGN_OR_RETURN(MlpComparison c, check(loss));
      if (!worst || c.loss_error > worst->loss_error) worst = c;
    }
    out.device_check = worst;
  }
  if (request.graph) {
    ASSIGN_OR_RETURN(GraphSteps g, RunGraphSteps(plan, static_cast<CudaWorld&>(*world), *stages,
                                                 request.options.steps, request.options.timeout,
                                                 check));
    out.graph = GraphStepsReport{g.steps,        g.nodes,      g.eager_host_us, g.graph_host_us,
                                 g.eager_loss, g.graph_loss, g.check};
  }
  return out;
}

}  // namespace
}  // namespace jitpipe::gpu

extern "C" __attribute__((visibility("default"))) int jitpipe_gpu_replay_abi() {
  return jitpipe::gpu::kGpuReplayAbi;
}

extern "C" __attribute__((visibility("default")))
absl::StatusOr<jitpipe::gpu::GpuReplayOutcome>
jitpipe_gpu_replay(const jitpipe::gpu::GpuReplayRequest& request) {
  return jitpipe::gpu::Run(request);
}
