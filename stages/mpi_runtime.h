// The MPI driver: the in-process runtime's run (inproc_runtime.h) with every
// world rank a process of an MPI job (comm/mpi) instead of a thread. Every
// process calls RunMpiReplay with the same schedule, executable, plans and
// options; each runs its own world rank w = context.rank() -- pipeline rank
// w mod pp of replica w / pp, the in-process layout -- with one RankExecutor
// over the MPI transport and a flight recorder.
//
// Steps: a job barrier before each step, bounded by the timeout. Time zero
// is taken on every process right after the first barrier, so the merged
// timeline lines up to the barrier's release skew (microseconds on one
// host; clocks are never compared across hosts).
//
// Results: each process sends its outcome (per step: loss, times, exposed
// reduction, peak bytes; its allocations; its timeline) to world rank 0
// (MpiContext::Gather), which merges them into what RunInProcess returns:
// the loss summed over ranks, a step from the first rank's start to the last
// rank's end, the exposed reduction the worst rank's (median over steps),
// one RankReplay per world rank, the timeline of every rank.
// peak_in_flight_bytes is 0: Open MPI buffers eager messages itself. A
// rendezvous send completes only once its receive is posted, so a rank's
// measured peak may exceed its plan's program-order peak (it never does in
// process, where sends complete when posted). Other processes return their
// own part: their RankReplay, step losses and times, and timeline.
//
// Failure: a process whose rank fails -- a Stage error, a timeout, another
// process's abort, SIGTERM from mpirun -- aborts the job (every other process
// fails at its next transport call), writes its flight record to
// options.flight_dir/rank_<w>.json when set, and hands its status and record
// to world rank 0 (MpiContext::CollectAfterFailure; grace: the timeout plus
// options.stuck_grace). Rank 0 writes the records it received into its
// flight_dir (on many hosts it then holds them all) and returns the root
// failure as RunInProcess does: the earliest failure that is not an abort,
// then how the other ranks stopped -- "aborted (0, 1)", "timed out (2)",
// "failed (4)", "stuck in a stage call (5)", "no report, died or did not
// answer (3)" -- and, for a timeout, the first line of the flight analysis of
// the records:
//   rank 2, index 5 (2RECV_F1): timed out after 2s waiting for receive
//   2RECV_F1 from rank 1 (index 5); other ranks: aborted (0, 1, 3); flight
//   analysis (records in DIR): rank 2 waits at index 5 (2RECV_F1) for ...
// Other processes return their own failure. After a failure the rank's
// buffers go to MpiContext::RetainUntilEnd (MPI cannot cancel a gradient
// reduction in flight), and the process is expected to end.
//
// A stage call that never returns (a hung kernel): each process has a
// watchdog thread. Once the job has been aborted for options.stuck_grace
// and this process's rank is still running, the watchdog writes its flight
// record and hands rank 0 a report marked stuck ("stuck in a stage call
// (1)" among the other ranks), so the analysis sees where it stands; rank 0
// then ends the job with MPI_Abort after its report (the stuck process
// never reaches MPI_Finalize), and the stuck process exits 1 if that abort
// does not come within the timeout. options.on_stuck is not used here.
//
// Thread safety: one call per process; the executor owns its reduction
// thread, the run its watchdog thread.
#ifndef JITPIPE_STAGES_MPI_RUNTIME_H_
#define JITPIPE_STAGES_MPI_RUNTIME_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/mpi/mpi_transport.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/schedule.h"
#include "stages/inproc_runtime.h"
#include "stages/mlp_stage.h"
#include "stages/rank_executable.h"
#include "stages/stage.h"

namespace jitpipe {

// Runs this process's world rank of `executable` (BuildExecutable of
// `schedule` with plans[r].buffers) for options.steps steps; options.dp must
// be context.dp(); options.on_step is called on world rank 0 only.
// `factory` makes this process's stages only. With BufferMode::kArena the
// executor completes sends before reusing their bytes, and a large
// MPI_Isend completes only once its receive is posted: the schedule must be
// deadlock-free under strict (rendezvous) semantics, validate.h, e.g.
// LowerForReplay(..., RecvPlacement::kJitRendezvous). Errors, the same on
// every process: InvalidArgument when the world is not pp x dp processes
// ("the MPI world has 6 processes but pp 4 x dp 2 needs 8 (mpirun -np 8)"),
// for options out of range, plans that do not fit the executable, or arena
// buffers with a schedule that deadlocks under strict semantics. Otherwise
// the failure of the run as described above.
absl::StatusOr<ReplayResult> RunMpiReplay(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, MpiContext& context,
                                          const InProcessOptions& options);

// For the reference mlp (mlp_stage.h): gathers at world rank 0 the
// gradients every process's stages saw at their last FinishStep and records
// them in rank 0's `factory`, through Make(stage, replica)->FinishStep, as if
// those stages had run there; CompareWithReference at rank 0 then checks the
// whole world. Every process calls it after RunMpiReplay succeeded, with the
// factory it ran. The bytes go as they are: the hosts of a job share their
// float format, as the activations sent between them already assume.
// Errors: the gather's (DeadlineExceeded, Aborted); at rank 0 a stage's
// FinishStep's (InvalidArgument for a gradient of the wrong size).
absl::Status GatherMlpGradients(const Schedule& schedule, MlpStageFactory& factory,
                                MpiContext& context, absl::Duration timeout);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_MPI_RUNTIME_H_
