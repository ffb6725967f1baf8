// The CLI's side of the device replay (gpu_replay.h): the device check,
// then the module, loaded on first use.
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_world.h"
#include "tools/gpu_replay.h"

#ifndef JITPIPE_GPU_MODULE
#define JITPIPE_GPU_MODULE ""  // a build without CUDA has none
#endif

namespace jitpipe::cli {
namespace {

std::string ExecutableDir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string dir(path, static_cast<size_t>(n));
  return dir.substr(0, dir.rfind('/'));
}

// The module's entry, from next to the executable (the build tree) or
// ../lib (an install). Loaded once, never unloaded.
absl::StatusOr<GpuReplayFn> LoadModule() {
  static GpuReplayFn loaded = nullptr;
  if (loaded != nullptr) return loaded;
  const std::string name = JITPIPE_GPU_MODULE;
  if (name.empty()) {
    return absl::UnavailableError("this build has no device replay module (built without CUDA)");
  }
  const std::string dir = ExecutableDir();
  std::vector<std::string> errors;
  for (const std::string& path : {absl::StrCat(dir, "/", name), absl::StrCat(dir, "/../lib/", name)}) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      errors.push_back(dlerror());
      continue;
    }
    auto abi = reinterpret_cast<GpuReplayAbiFn>(dlsym(handle, "jitpipe_gpu_replay_abi"));
    auto run = reinterpret_cast<GpuReplayFn>(dlsym(handle, "jitpipe_gpu_replay"));
    if (abi == nullptr || run == nullptr || abi() != kGpuReplayAbi) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is not this jitpipe's device module (another version)"));
    }
    loaded = run;
    return loaded;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot load the device replay module: ", absl::StrJoin(errors, "; ")));
}

}  // namespace

P2pOrdering GpuBackendOrdering(const std::string& backend) {
  if (backend == "nccl") return P2pOrdering::kFifoPerRank;
  if (backend == "nccl-lazy") return P2pOrdering::kFifoPerEdge;
  return P2pOrdering::kByTag;
}

absl::StatusOr<GpuReplayOutcome> RunGpuReplay(const GpuReplayRequest& request) {
  RETURN_IF_ERROR(CheckCudaDevice(0));
  ASSIGN_OR_RETURN(GpuReplayFn run, LoadModule());
  return run(request);
}

}  // namespace jitpipe::cli
