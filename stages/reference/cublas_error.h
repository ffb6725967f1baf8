// cuBLAS return codes as absl::Status: the one conversion for the cuBLAS
// domain, beside comm/cuda/cuda_error.h (the CUDA runtime's, which the
// reference CUDA stage uses for its runtime calls), in the same shape:
//   "<call>: <status name>: <status string> (<file>:<line>)"
// with the call's name without its arguments and the file relative to the
// repository.
//
// Codes: CUBLAS_STATUS_ALLOC_FAILED -> ResourceExhausted;
// CUBLAS_STATUS_NOT_INITIALIZED, _ARCH_MISMATCH, _NOT_SUPPORTED ->
// FailedPrecondition; CUBLAS_STATUS_INVALID_VALUE -> InvalidArgument;
// everything else -> Internal.
//
// Thread-safe: pure functions of their arguments.
#ifndef JITPIPE_STAGES_REFERENCE_CUBLAS_ERROR_H_
#define JITPIPE_STAGES_REFERENCE_CUBLAS_ERROR_H_

#include <cublas_v2.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {

// OkStatus() for CUBLAS_STATUS_SUCCESS; otherwise the status described above.
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call, const char* file,
                          int line);

}  // namespace jitpipe

// RETURN_IF_ERROR for a cuBLAS call: CUBLAS_CALL(cublasGemmEx(...));
#define CUBLAS_CALL(call) \
  RETURN_IF_ERROR(::jitpipe::CublasStatus((call), #call, __FILE__, __LINE__))

#endif  // JITPIPE_STAGES_REFERENCE_CUBLAS_ERROR_H_
