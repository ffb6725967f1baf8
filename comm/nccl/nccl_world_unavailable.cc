// CreateNcclWorld in a build without the NCCL backend (JITPIPE_HAVE_NCCL
// off, or CUDA or MPI absent: the backend needs all three). The factory
// exists in every build, as comm/mpi's does.
#include "comm/nccl/nccl_world.h"

namespace jitpipe {

absl::StatusOr<std::unique_ptr<NcclWorld>> CreateNcclWorld(int* argc, char*** argv,
                                                           const NcclOptions& options) {
  (void)argc;
  (void)argv;
  (void)options;
  return absl::UnavailableError(
      "this build has no NCCL backend (NCCL, the CUDA toolkit or MPI was not found when it was "
      "configured)");
}

}  // namespace jitpipe
