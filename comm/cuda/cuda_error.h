// CUDA runtime errors as absl::Status: the one conversion for the CUDA
// domain (as comm/mpi/mpi_error.h is for MPI and NCCL's checks.h for
// ncclResult_t), applied at the boundary so that nothing above the code
// calling the CUDA runtime sees a cudaError_t.
//
// This header includes cuda_runtime_api.h; it is for the code that calls
// the CUDA runtime (comm/cuda, comm/nccl, device buffer providers and device
// stages), never for an interface header (those carry streams as void*).
//
// Codes: a bad argument or handle (cudaErrorInvalidValue, _InvalidDevicePointer,
// _InvalidResourceHandle, _InvalidConfiguration, _InvalidPitchValue,
// _InvalidSymbol, _InvalidMemcpyDirection, _InvalidDevice) -> InvalidArgument;
// out of memory (cudaErrorMemoryAllocation) -> ResourceExhausted; no usable
// device or driver (cudaErrorNoDevice, _InsufficientDriver,
// _DevicesUnavailable, _SystemDriverMismatch, _CallRequiresNewerDriver, and
// no kernel image or PTX for this device: _NoKernelImageForDevice,
// _UnsupportedPtxVersion) -> Unavailable; a call not allowed now (stream capture, an operation not
// permitted, not supported) -> FailedPrecondition; a fault of a kernel (an
// illegal address or instruction, a launch failure, a device assert)
// -> Internal; everything else -> Unavailable. The message is
//   "<call>: <error name>: <error string> (<file>:<line>)"
// e.g. "cudaMallocAsync: cudaErrorMemoryAllocation: out of memory
// (stages/device/device_buffers.cc:88)", the file relative to the repository.
//
// cudaErrorNotReady is not an error of a query (cudaEventQuery,
// cudaStreamQuery): callers test for it before converting.
#ifndef JITPIPE_COMM_CUDA_CUDA_ERROR_H_
#define JITPIPE_COMM_CUDA_CUDA_ERROR_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {

// OkStatus() when error == cudaSuccess; otherwise the status described above.
absl::Status CudaStatus(cudaError_t error, absl::string_view call, const char* file, int line);

// The status code the file comment gives for `error` (kOk for cudaSuccess).
absl::StatusCode CudaErrorCode(cudaError_t error);

// The path from the repository root: __FILE__ may be absolute. Shared with
// comm/nccl/nccl_error.h.
absl::string_view RepoRelativePath(absl::string_view file);

}  // namespace jitpipe

// RETURN_IF_ERROR for a CUDA runtime call: CUDA_CALL(cudaMallocAsync(...));
#define CUDA_CALL(call) RETURN_IF_ERROR(::jitpipe::CudaStatus((call), #call, __FILE__, __LINE__))

// The status of a CUDA runtime call, for callers that do not return at once.
#define CUDA_STATUS(call) ::jitpipe::CudaStatus((call), #call, __FILE__, __LINE__)

#endif  // JITPIPE_COMM_CUDA_CUDA_ERROR_H_
