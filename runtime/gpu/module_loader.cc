// The CLI's side of the device replay (replay.h): the device check,
// then the module, loaded on first use.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/shared_module.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_world.h"
#include "runtime/gpu/replay.h"

#ifndef JITPIPE_GPU_MODULE
#define JITPIPE_GPU_MODULE ""  // a build without CUDA has none
#endif

namespace jitpipe::gpu {
namespace {

// The module's entry (base/shared_module.h: next to the executable, or the
// installation's library directory). Loaded once, never unloaded.
absl::StatusOr<GpuReplayFn> LoadModule() {
  static GpuReplayFn loaded = nullptr;
  if (loaded != nullptr) return loaded;
  const std::string name = JITPIPE_GPU_MODULE;
  if (name.empty()) {
    return absl::UnavailableError("this build has no device replay module (built without CUDA)");
  }
  ASSIGN_OR_RETURN(const SharedModule module,
                   LoadSharedModule(name, "the device replay module", ModuleSearchPath(),
                                    /*global=*/false));
  ASSIGN_OR_RETURN(void* abi, module.Symbol("jitpipe_gpu_replay_abi"));
  ASSIGN_OR_RETURN(void* run, module.Symbol("jitpipe_gpu_replay"));
  if (reinterpret_cast<GpuReplayAbiFn>(abi)() != kGpuReplayAbi) {
    return absl::FailedPreconditionError(
        absl::StrCat(module.path, " is not this jitpipe's device module (another version)"));
  }
  loaded = reinterpret_cast<GpuReplayFn>(run);
  return loaded;
}

}  // namespace

absl::StatusOr<GpuReplayOutcome> RunGpuReplay(const GpuReplayRequest& request) {
  RETURN_IF_ERROR(CheckCudaDevice(0));
  ASSIGN_OR_RETURN(GpuReplayFn run, LoadModule());
  return run(request);
}

}  // namespace jitpipe::gpu
