// The device replay module (libjitpipe_gpu.so; contract in replay.h):
// makes the device world the request names, the stages it runs on it, runs
// the replay and, for the device mlp, checks it against the cpu reference
// where its gradients are.
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

// The worst step's check of the device mlp's gradients (the steps are
// identical).
absl::StatusOr<MlpComparison> CheckDeviceMlp(const ReplayResult& result,
                                             const CudaMlpStageFactory& stages,
                                             ReduceKind reduce) {
  const MlpReference reference = RunMlpReference(stages.options().mlp, stages.layout());
  std::optional<MlpComparison> worst;
  for (double loss : result.step_loss) {
    ASSIGN_OR_RETURN(MlpComparison c,
                     CompareWithReference(reference, loss, stages.layout(),
                                          [&](int stage, int replica) {
                                            return stages.FinishedGrads(stage, replica);
                                          },
                                          reduce));
    if (!worst || c.loss_error > worst->loss_error) worst = c;
  }
  return *worst;
}

absl::StatusOr<GpuReplayOutcome> Run(const GpuReplayRequest& request) {
  // This module's own abseil: as the CLI does for its own.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const ReplayPlan& plan = *request.plan;
  if (request.device_mlp && (request.backend != "cuda" || request.mlp == nullptr)) {
    return absl::InvalidArgumentError("the device mlp runs on the one-GPU backend (cuda) only");
  }
  if (request.graph && (!request.device_mlp || request.options.buffers != BufferMode::kArena ||
                        request.options.dp != 1)) {
    return absl::InvalidArgumentError(
        "--graph needs --backend cuda, --stage mlp, --buffers arena and --dp 1");
  }
  ASSIGN_OR_RETURN(DeviceReduction reduction, ReductionOf(plan.model));
  ASSIGN_OR_RETURN(std::unique_ptr<World> world, MakeWorld(request, reduction));
  std::unique_ptr<StageFactory> stages;
  CudaMlpStageFactory* device_mlp = nullptr;
  if (request.device_mlp) {
    auto owned = std::make_unique<CudaMlpStageFactory>(
        CudaMlpOptions{request.mlp->options(), Dtype::kFp32}, request.mlp->layout());
    device_mlp = owned.get();
    stages = std::move(owned);
  } else {
    stages = std::make_unique<HostStagedFactory>(request.host_stages);
  }
  std::unique_ptr<TimedStageFactory> timed;
  if (request.measure_costs) timed = std::make_unique<TimedStageFactory>(stages.get());
  GpuReplayOutcome out;
  ASSIGN_OR_RETURN(out.result,
                   RunReplay(plan.schedule, plan.executable, plan.plans,
                             timed != nullptr ? *timed : *stages, *world, request.options));
  if (timed != nullptr) {
    ASSIGN_OR_RETURN(out.costs, timed->Costs());
  }
  if (request.mlp != nullptr && device_mlp == nullptr) {
    RETURN_IF_ERROR(GatherMlpGradients(plan.schedule, *request.mlp, *world, request.options.timeout));
  }
  out.report = world->is_root();
  if (device_mlp != nullptr) {
    ASSIGN_OR_RETURN(MlpComparison check,
                     CheckDeviceMlp(out.result, *device_mlp, plan.model.dp.reduce));
    out.device_check = check;
  }
  if (request.graph) {
    ASSIGN_OR_RETURN(GraphSteps g, RunGraphSteps(plan, static_cast<CudaWorld&>(*world),
                                                 *device_mlp, request.options.steps,
                                                 request.options.timeout));
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
