// CheckCudaDevice and CreateCudaWorld in a build without CUDA
// (JITPIPE_HAVE_CUDA off: nvcc or the toolkit was not found, or
// JITPIPE_WITH_CUDA=OFF). The backend's factory exists in every build, as
// comm/mpi's does, so that callers need no preprocessor to learn that it is
// absent.
#include "comm/cuda/cuda_world.h"
#include "comm/cuda/step_graph.h"

namespace jitpipe {
namespace {

absl::Status NoCudaBackend() {
  return absl::UnavailableError(
      "this build has no CUDA backend (nvcc or the CUDA toolkit was not found when it was "
      "configured)");
}

}  // namespace

absl::Status CheckCudaDevice(int device) {
  (void)device;
  return NoCudaBackend();
}

absl::StatusOr<std::unique_ptr<CudaWorld>> CreateCudaWorld(int size, const CudaOptions& options) {
  (void)size;
  (void)options;
  return NoCudaBackend();
}

absl::StatusOr<std::unique_ptr<StepGraph>> BeginStepCapture(int device,
                                                            const std::vector<void*>& streams) {
  (void)device;
  (void)streams;
  return NoCudaBackend();
}

}  // namespace jitpipe
