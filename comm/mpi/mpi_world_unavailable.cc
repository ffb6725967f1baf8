// CreateMpiWorld in a build without MPI (JITPIPE_HAVE_MPI off: Open MPI was
// not found, or JITPIPE_WITH_MPI=OFF). The backend's one factory exists in
// every build, so that callers -- the CLI, the conformance suites' one line
// per backend -- need no preprocessor to learn that the backend is absent.
#include "absl/status/status.h"
#include "comm/mpi/mpi_world.h"

namespace jitpipe {

absl::StatusOr<std::unique_ptr<MpiWorld>> CreateMpiWorld(int* argc, char*** argv,
                                                         const MpiOptions& options) {
  (void)argc;
  (void)argv;
  (void)options;
  return absl::UnavailableError(
      "this build has no MPI backend (Open MPI was not found when it was configured)");
}

}  // namespace jitpipe
