// NCCL results as absl::Status: the one conversion for the NCCL domain (as
// comm/mpi/mpi_error.h is for MPI and comm/cuda/cuda_error.h for the CUDA
// runtime), applied at the boundary so that nothing above comm/nccl sees an
// ncclResult_t.
//
// Internal to comm/nccl: this header includes nccl.h, which nothing outside
// comm/ may include (STYLE.md, house style 9).
//
// Codes: ncclInvalidArgument -> InvalidArgument; ncclInvalidUsage ->
// FailedPrecondition; ncclInternalError -> Internal; ncclUnhandledCudaError,
// ncclSystemError, ncclRemoteError (a peer failed or a link broke) and
// ncclInProgress (never returned by a blocking communicator, which is all
// comm/nccl creates) -> Unavailable. The message is
//   "<call>: <ncclGetErrorString>[: <ncclGetLastError>] (<file>:<line>)"
// e.g. "ncclCommInitRankConfig: unhandled cuda error (run with NCCL_DEBUG=INFO
// for details): Cuda failure 'no CUDA-capable device is detected'
// (comm/nccl/nccl_world.cc:120)", the last-error text only when NCCL has one.
#ifndef JITPIPE_COMM_NCCL_NCCL_ERROR_H_
#define JITPIPE_COMM_NCCL_NCCL_ERROR_H_

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {

// OkStatus() when result == ncclSuccess; otherwise the status described
// above. `comm` (may be null) is asked for its last error.
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view call,
                        const char* file, int line);

// The status code the file comment gives for `result` (kOk for ncclSuccess).
absl::StatusCode NcclErrorCode(ncclResult_t result);

}  // namespace jitpipe

// RETURN_IF_ERROR for an NCCL call: NCCL_CALL(ncclSend(...), comm);
#define NCCL_CALL(call, comm) \
  RETURN_IF_ERROR(::jitpipe::NcclStatus((call), (comm), #call, __FILE__, __LINE__))

// The status of an NCCL call, for callers that do not return at once.
#define NCCL_STATUS(call, comm) ::jitpipe::NcclStatus((call), (comm), #call, __FILE__, __LINE__)

#endif  // JITPIPE_COMM_NCCL_NCCL_ERROR_H_
