#include "comm/cuda/cuda_error.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidDevice:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return absl::StatusCode::kUnavailable;
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
    case cudaErrorNotPermitted:
    case cudaErrorNotSupported:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorIllegalAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

// The leftmost "/<top-level folder>/" of the path starts the repository's
// part ("/work/x/tests/comm/a.cc" -> "tests/comm/a.cc").
absl::string_view RepoRelativePath(absl::string_view file) {
  size_t best = absl::string_view::npos;
  for (absl::string_view root : {"comm/", "stages/", "runtime/", "tools/", "tests/"}) {
    if (file.substr(0, root.size()) == root) return file;
    const size_t at = file.find(absl::StrCat("/", root));
    if (at < best) best = at;
  }
  return best == absl::string_view::npos ? file : file.substr(best + 1);
}

absl::Status CudaStatus(cudaError_t error, absl::string_view call, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const absl::string_view name = call.substr(0, call.find('('));
  return absl::Status(CudaErrorCode(error),
                      absl::StrCat(name, ": ", cudaGetErrorName(error), ": ",
                                   cudaGetErrorString(error), " (", RepoRelativePath(file), ":",
                                   line, ")"));
}

}  // namespace jitpipe
