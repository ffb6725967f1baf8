// MPI return codes as absl::Status: the one conversion for the MPI domain
// (as NCCL's checks.h is for ncclResult_t), applied at the boundary so that
// nothing above comm/mpi sees an MPI error code.
//
// Internal to comm/mpi: this header includes mpi.h, which nothing outside
// comm/ may include (STYLE.md, house style 9).
//
// Codes by MPI error class: bad arguments and truncated receives
// (MPI_ERR_ARG, _COUNT, _TAG, _RANK, _TYPE, _BUFFER, _TRUNCATE, _COMM,
// _GROUP, _OP, _ROOT) -> InvalidArgument; MPI_ERR_NO_MEM -> ResourceExhausted;
// MPI_ERR_INTERN -> Internal; everything else (a failed peer, a broken link)
// -> Unavailable. The message is
//   "<call>: <MPI error string> (<file>:<line>)"
// with the file relative to the repository ("comm/mpi/mpi_transport.cc").
//
// Every communicator comm/mpi creates has MPI_ERRORS_RETURN, so errors come
// back as return codes instead of aborting the process.
#ifndef JITPIPE_COMM_MPI_MPI_ERROR_H_
#define JITPIPE_COMM_MPI_MPI_ERROR_H_

#include <mpi.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace jitpipe {

// OkStatus() when rc == MPI_SUCCESS; otherwise the status described above.
absl::Status MpiStatus(int rc, absl::string_view call, const char* file, int line);

}  // namespace jitpipe

// RETURN_IF_ERROR for an MPI call: MPI_CALL(MPI_Isend(...));
#define MPI_CALL(call) RETURN_IF_ERROR(::jitpipe::MpiStatus((call), #call, __FILE__, __LINE__))

// The status of an MPI call, for callers that do not return at once.
#define MPI_STATUS(call) ::jitpipe::MpiStatus((call), #call, __FILE__, __LINE__)

#endif  // JITPIPE_COMM_MPI_MPI_ERROR_H_
