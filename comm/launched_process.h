// Who a launcher started this process as, known before any world exists:
// the world rank mpirun (or srun, or MPICH's Hydra) put in the environment
// and the host's name. A process of a multi-host job that fails before
// MPI_Init -- a schedule missing on one host -- has no world to report
// through; its own error line is all the user sees, so it says which rank
// and which host it comes from ("rank 5 on node-b: s.json: no such file").
//
// Thread safety: the functions may be called from any thread.
#ifndef JITPIPE_COMM_LAUNCHED_PROCESS_H_
#define JITPIPE_COMM_LAUNCHED_PROCESS_H_

#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"

namespace jitpipe {

struct LaunchedProcess {
  int world_rank = 0;
  std::string host;

  // "rank 5 on node-b".
  std::string ToString() const;
};

// The world rank the launcher gave, read through `getenv` (returns null for
// an unset name) from the first variable set of OMPI_COMM_WORLD_RANK (Open
// MPI), PMIX_RANK (PMIx launchers), PMI_RANK (MPICH's Hydra) and
// SLURM_PROCID (srun). nullopt when none is set or the value is not a
// non-negative integer: the process was not started by a launcher.
std::optional<int> LauncherRank(absl::FunctionRef<const char*(const char*)> getenv);

// This process: LauncherRank from the environment and gethostname(); nullopt
// outside a launcher.
std::optional<LaunchedProcess> ThisLaunchedProcess();

// How long a process of an Open MPI job may still work after mpirun's
// SIGTERM: mpirun sends SIGKILL odls_base_sigkill_timeout seconds later (1
// by default; `--mca odls_base_sigkill_timeout N` reaches the processes as
// OMPI_MCA_odls_base_sigkill_timeout), so this is that timeout less half a
// second for the exit itself, and never under half a second. The failure
// exchange after SIGTERM ends by then: rank 0 then aborts the job, which
// ends the processes still writing their flight records, so a grace longer
// than needed costs nothing but one shorter than allowed loses records.
absl::Duration GraceAfterLauncherSigterm(absl::FunctionRef<const char*(const char*)> getenv);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_LAUNCHED_PROCESS_H_
