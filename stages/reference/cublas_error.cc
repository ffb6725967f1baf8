#include "stages/reference/cublas_error.h"

#include "absl/strings/str_cat.h"
#include "comm/cuda/cuda_error.h"  // RepoRelativePath

namespace jitpipe {
namespace {

absl::StatusCode CodeOf(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::StatusCode::kFailedPrecondition;
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "cublasGemmEx(h, ...)" -> "cublasGemmEx"; "(Launch<T, U>(x))"
// (parenthesised for the macro) -> "Launch<T, U>".
absl::string_view CallName(absl::string_view call) {
  while (!call.empty() && call.front() == '(') call.remove_prefix(1);
  return call.substr(0, call.find('('));
}

}  // namespace

absl::Status CublasStatus(cublasStatus_t status, absl::string_view call, const char* file,
                          int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::Status(CodeOf(status),
                      absl::StrCat(CallName(call), ": ", cublasGetStatusName(status), ": ",
                                   cublasGetStatusString(status), " (", RepoRelativePath(file),
                                   ":", line, ")"));
}

}  // namespace jitpipe
