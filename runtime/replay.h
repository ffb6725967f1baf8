// The replay driver: runs a lowered, planned schedule for real over any
// World (comm/world.h) -- every rank a thread of this process
// (CreateInProcessWorld), one rank per process of an MPI job (CreateMpiWorld) --
// with one RankRunner (rank_runner.h) per local rank, each on a thread of
// its own, and the same merge, failure report and flight records whatever
// the backend.
//
// Layout: pp x dp world ranks; world rank w is pipeline rank w mod pp of
// data-parallel replica w / pp (w = replica * pp + rank); the data-parallel
// group of pipeline rank r is {r, r + pp, ..., r + (dp - 1) pp}, reducing
// the gradients of that rank's stages; every process requests these groups
// from the world (World::CreateGroups, DataParallelGroups in
// rank_runner.h) before the first step. Each rank has its own Stages
// (StageFactory::Make(stage, replica)), buffer provider, flight recorder and
// executor, and its executor its own reduction thread.
//
// Steps: a world barrier before each step and after the last, each bounded
// by the timeout. Time zero is taken by each process when its first rank
// leaves the first barrier, so ranks line up to the barrier's release skew
// (microseconds on one host; clocks are never compared across hosts).
//
// Results: each rank's outcome (per step: loss, times, exposed reduction;
// its peak and allocations; its timeline) goes to world rank 0 (World::
// Gather), which merges them: the loss summed over ranks, a step from the
// first rank's start to the last rank's end, the exposed reduction the
// worst rank's (median over steps), one RankReplay per world rank, every
// rank's timeline. A process without rank 0 returns its own ranks' part.
//
// Failure: a rank that fails -- a Stage error, a timeout, another rank's
// abort, SIGTERM from mpirun -- makes its process take the flight record of
// every local rank as it stands (before the abort disturbs it; once per
// process), write them into options.flight_dir (DIR/rank_<w>.json, each
// atomically), then abort the world, so every other rank's pending wait
// fails at once with Aborted and nothing hangs. Once its ranks have ended,
// the process hands their failures and records to world rank 0 (World::
// CollectAfterFailure; grace: the timeout plus stuck_grace), which writes
// the records it received into its flight_dir (on many hosts it then holds
// them all) and returns the root failure -- the earliest failure that is
// not an abort -- then how the other ranks stopped and, for a timeout, the
// first line of the flight analysis of the records:
//   rank 1, index 3 (1F1): timed out after 2s waiting for receive 1RECV_F1
//   from rank 0 (index 2); other ranks: aborted (0, 2, 3); flight analysis
//   (records in DIR): rank 1 waits at index 2 (1RECV_F1) for rank 0; ...
// Other processes return their own ranks' root failure. After a failure
// each rank's buffers go to World::RetainUntilEnd (MPI cannot cancel a
// gradient reduction in flight).
//
// A stage call that never returns (a hung kernel): a rank still running
// options.stuck_grace after the job was aborted is reported as "stuck in a
// stage call (1)" among the other ranks, with its record as it stood when
// the process's first rank failed (or when the grace ended, if none did);
// the process that holds the stuck rank hands its report to rank 0 like
// every process, then ends through options.on_stuck, leaving the world in
// order first (World::LeaveBeforeExit), so no launcher has to end the job
// by force.
//
// Memory: over the in-process backend's eager protocol a send completes
// when posted, so each rank's measured peak equals its plan's peak exactly
// (TrackedBuffers; ArenaBuffers reports the same count without
// allocating). Over a rendezvous backend (MPI) a send completes only once
// its receive is posted, so a rank's measured peak may exceed its plan's
// program-order peak; with arena buffers the executor completes sends
// before their bytes are reused, so the program must be deadlock-free under
// strict semantics (validate.h; LowerForReplay(..., kJitRendezvous)).
#ifndef JITPIPE_RUNTIME_REPLAY_H_
#define JITPIPE_RUNTIME_REPLAY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/world.h"
#include "memory/memory_plan.h"
#include "runtime/replay_options.h"
#include "scheduler/ir/schedule.h"
#include "stages/exec/rank_executable.h"
#include "stages/exec/stage.h"
#include "traces/timeline.h"

namespace jitpipe {

struct RankReplay {
  int world_rank = 0;
  int rank = 0;  // pipeline rank
  int replica = 0;
  int64_t measured_peak_bytes = 0;  // the provider's peak over all steps
  int64_t planned_peak_bytes = 0;   // RankMemoryPlan::peak (a bound under kReceive)
  int64_t planned_post_peak_bytes = 0;  // RankMemoryPlan::post_peak
  int64_t arena_bytes = 0;          // the plan's arena
  int64_t buffer_heap_allocations = 0;  // by the provider, all steps
  double exposed_reduce_us = 0;     // the median over steps
  // The device allocator's own high-water mark of bytes in use in the last
  // step (the rank's memory pool: cudaMemPoolAttrUsedMemHigh; the slab's
  // size with arena buffers); -1 on the CPU backends.
  int64_t allocator_peak_bytes = -1;
};

struct ReplayResult {
  std::vector<double> step_loss;  // per step: sum of Stage::Loss over ranks and replicas
  std::vector<double> step_us;    // per step: first rank's start to last rank's end
  // Per step, the longest time a rank waited at its end for reductions
  // still running: what the compute did not hide, including the wait for
  // the other replicas to join the collective (their skew); the median over
  // steps. With dp = 1 it is the cost of the 1-member collectives.
  double exposed_reduce_us = 0;
  // Staged by an eager backend, this process's world (0 for MPI, whose
  // buffering is its own).
  int64_t peak_in_flight_bytes = 0;
  std::vector<RankReplay> ranks;  // by world rank (rank 0's process: all)
  // Measured spans and memory of every step, times since the run's start;
  // span ranks are world ranks (program = schedule.ranks[rank mod pp]).
  Timeline timeline;

  double median_step_us() const;
};

// Runs `executable` (BuildExecutable of `schedule` with plans[r].buffers)
// for options.steps steps over `world`. Every process of the world calls it
// with the same arguments; `factory` makes this process's stages only (it
// need not be thread-safe). Errors, the same on every process:
// InvalidArgument when the world is not pp x dp ranks ("the world has 6
// ranks but pp 4 x dp 2 needs 8"), for options out of range, plans that do
// not fit the executable, or arena buffers over a rendezvous backend with a
// schedule that deadlocks under strict semantics; the world's error,
// prefixed "requesting the data-parallel groups: ", when CreateGroups
// fails; otherwise the failure of the run as described above.
absl::StatusOr<ReplayResult> RunReplay(const Schedule& schedule, const Executable& executable,
                                       absl::Span<const RankMemoryPlan> plans,
                                       StageFactory& factory, World& world,
                                       const ReplayOptions& options);

// The most world ranks (pp x dp) a replay runs: threads of one process, or
// processes of one MPI job.
inline constexpr int kMaxReplayRanks = 4096;

// Checks a replay's world: dp >= 1 and pp x dp <= kMaxReplayRanks.
// Errors: InvalidArgument, e.g.
//   "pp 4 x dp 2147483647 = 8589934588 ranks exceeds the limit of 4096 replayed ranks"
absl::Status CheckReplayWorld(int pp, int dp);

// RunReplay over a new in-process world of pp x options.dp ranks.
absl::StatusOr<ReplayResult> RunInProcess(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, const ReplayOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_REPLAY_H_
