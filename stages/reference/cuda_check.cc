#include "stages/reference/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace jitpipe::reference_cuda {
namespace {

absl::StatusCode CodeOf(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorCallRequiresNewerDriver:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CodeOf(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// The path from the repository root: __FILE__ may be absolute.
absl::string_view RepoPath(absl::string_view file) {
  const size_t at = file.rfind("stages/reference/");
  return at == absl::string_view::npos ? file : file.substr(at);
}

// "cudaMalloc(&p, n)" -> "cudaMalloc"; "(Launch<T, U>(x))" (parenthesised
// for the macro) -> "Launch<T, U>".
absl::string_view CallName(absl::string_view call) {
  while (!call.empty() && call.front() == '(') call.remove_prefix(1);
  return call.substr(0, call.find('('));
}

absl::Status Describe(absl::StatusCode code, absl::string_view call, const char* name,
                      const char* description, const char* file, int line) {
  return absl::Status(code, absl::StrCat(CallName(call), ": ", name, " (", description, ") (",
                                         RepoPath(file), ":", line, ")"));
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view call, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return Describe(CodeOf(error), call, cudaGetErrorName(error), cudaGetErrorString(error), file,
                  line);
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view call, const char* file,
                          int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return Describe(CodeOf(status), call, cublasGetStatusName(status), cublasGetStatusString(status),
                  file, line);
}

}  // namespace jitpipe::reference_cuda
