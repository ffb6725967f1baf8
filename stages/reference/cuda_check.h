// CUDA runtime and cuBLAS return codes as absl::Status: the one conversion
// per foreign domain for the reference CUDA stage (as comm/mpi/mpi_error.h
// is for MPI), applied where the stage calls CUDA, with the file and line.
//
// Private to stages/reference (jitpipe::reference_cuda): the CUDA backend
// has its own conversion beside its transport; the two can become one
// shared helper later. The names live in namespace jitpipe::reference_cuda
// and the macros carry a REF_ prefix so that both can be linked and
// included together meanwhile.
//
// Codes:
//   cudaError_t     cudaErrorMemoryAllocation -> ResourceExhausted; no
//                   usable device or driver (cudaErrorNoDevice,
//                   cudaErrorInsufficientDriver, cudaErrorInvalidDevice,
//                   cudaErrorDevicesUnavailable, cudaErrorNoKernelImageForDevice,
//                   cudaErrorUnsupportedPtxVersion, cudaErrorCallRequiresNewerDriver)
//                   -> FailedPrecondition; everything else -> Internal.
//   cublasStatus_t  CUBLAS_STATUS_ALLOC_FAILED -> ResourceExhausted;
//                   CUBLAS_STATUS_NOT_INITIALIZED, _ARCH_MISMATCH,
//                   _NOT_SUPPORTED -> FailedPrecondition; everything else
//                   -> Internal.
// The message is
//   "<call>: <error name> (<description>) (<file>:<line>)"
// with the call's name without its arguments and the file relative to the
// repository ("stages/reference/cuda_mlp_stage.cc").
//
// Thread-safe: pure functions of their arguments.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_CHECK_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe::reference_cuda {

// OkStatus() for cudaSuccess; otherwise the status described above.
absl::Status CudaStatus(cudaError_t error, absl::string_view call, const char* file, int line);

// OkStatus() for CUBLAS_STATUS_SUCCESS; otherwise the status described above.
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call, const char* file,
                          int line);

}  // namespace jitpipe::reference_cuda

// RETURN_IF_ERROR for a CUDA runtime call: REF_CUDA_CALL(cudaMalloc(&p, n));
#define REF_CUDA_CALL(call) \
  RETURN_IF_ERROR(::jitpipe::reference_cuda::CudaStatus((call), #call, __FILE__, __LINE__))

// RETURN_IF_ERROR for a cuBLAS call: REF_CUBLAS_CALL(cublasGemmEx(...));
#define REF_CUBLAS_CALL(call) \
  RETURN_IF_ERROR(::jitpipe::reference_cuda::CublasStatus((call), #call, __FILE__, __LINE__))

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_CHECK_H_
