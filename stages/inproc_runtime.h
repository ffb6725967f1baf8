// The in-process driver: runs a lowered, planned schedule for real, every
// rank a thread of this process, over one InProcessWorld (comm/inproc).
//
// Rank layout: pp x dp threads. World rank w is pipeline rank w mod pp of
// data-parallel replica w / pp (w = replica * pp + rank); the data-parallel
// group of pipeline rank r is {r, r + pp, ..., r + (dp - 1) pp}, one group
// per pipeline rank, reducing the gradients of that rank's stages. Each
// world rank has its own Stages (StageFactory::Make(stage, replica)), buffer
// provider, flight recorder and RankExecutor, and its executor its own
// reduction thread: 2 x pp x dp threads in all.
//
// Steps: every rank runs options.steps steps; a barrier separates them, so a
// step's time is from the first rank's start to the last rank's end.
//
// Failure: the first failing rank (a Stage error, or DeadlineExceeded when a
// wait outlives options.timeout) is the root. It takes every rank's flight
// record as it stands at that moment, writes them into options.flight_dir
// (when set; DIR/rank_<world rank>.json, each atomically), then aborts the
// world, so every other rank's pending wait fails at once with Aborted and
// no thread hangs; every wait is bounded by the timeout. (Records taken
// after the abort would show its side effects, e.g. sends refused because
// the world is down, instead of where the ranks stood.) The run returns the
// root failure's code and message, followed by which ranks stopped how and,
// for a timeout, the first line of the flight analysis of those records:
//   rank 1, index 3 (1F1): timed out after 2s waiting for receive 1RECV_F1
//   from rank 0 (index 2); other ranks: aborted (0); flight analysis: rank 1
//   waits at index 2 (1RECV_F1) for rank 0; ...
// A barrier also ends the last step, so a rank that finished waits at most
// the timeout for the others too. A stage call that never returns is
// bounded only by the others' timeouts: see InProcessOptions::on_stuck.
//
// Memory: with the in-process backend's eager protocol a send completes when
// it is posted, so each rank's measured peak equals its plan's peak exactly
// (TrackedBuffers; ArenaBuffers reports the same count without allocating).
#ifndef JITPIPE_STAGES_INPROC_RUNTIME_H_
#define JITPIPE_STAGES_INPROC_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "stages/rank_executable.h"
#include "stages/stage.h"
#include "stages/timeline.h"

namespace jitpipe {

enum class BufferMode {
  kTracked,  // TrackedBuffers: one heap allocation per buffer, measured peak
  kArena,    // ArenaBuffers: the plan's arena, no allocation per buffer
};

struct InProcessOptions {
  int dp = 1;
  int steps = 1;
  ReduceKind reduce = ReduceKind::kAllReduce;
  BufferMode buffers = BufferMode::kTracked;
  absl::Duration timeout = absl::Seconds(60);
  std::string flight_dir;  // "": no dump files
  bool record_timeline = false;
  // Called by world rank 0's thread after each of its steps, with the
  // number of steps it has finished.
  std::function<void(int)> on_step;
  // A rank thread still running `stuck_grace` after the run failed is in a
  // call that does not return (a stage stuck in a kernel or a loop). No
  // thread can be stopped from outside, and the run cannot return while
  // that thread still uses the run's arguments, so, like PyTorch's NCCL
  // watchdog, it ends the process: it calls on_stuck from the calling
  // thread with the failure report, which names the stuck ranks (the flight
  // records are written by then). Empty: the report goes to stderr and the
  // process exits with status 1 (std::_Exit, so that no destructor runs
  // under the stuck thread). If on_stuck returns, the run waits for the
  // threads after all and returns the same report.
  absl::Duration stuck_grace = absl::Seconds(2);
  std::function<void(const absl::Status&)> on_stuck;
};

struct RankReplay {
  int world_rank = 0;
  int rank = 0;  // pipeline rank
  int replica = 0;
  int64_t measured_peak_bytes = 0;  // the provider's peak over all steps
  int64_t planned_peak_bytes = 0;   // RankMemoryPlan::peak
  int64_t arena_bytes = 0;          // the plan's arena
  int64_t buffer_heap_allocations = 0;  // by the provider, all steps
  double exposed_reduce_us = 0;     // the median over steps
};

struct ReplayResult {
  std::vector<double> step_loss;  // per step: sum of Stage::Loss over ranks and replicas
  std::vector<double> step_us;    // per step: first rank's start to last rank's end
  // Per step, the longest time a rank waited at its end for reductions
  // still running: what the compute did not hide, including the wait for
  // the other replicas to join the collective (their skew); the median over
  // steps. With dp = 1 it is the cost of the 1-member collectives.
  double exposed_reduce_us = 0;
  int64_t peak_in_flight_bytes = 0;  // staged by the eager protocol, whole world
  std::vector<RankReplay> ranks;     // by world rank
  // Measured spans and memory of every step, times since the run's start;
  // span ranks are world ranks (program = schedule.ranks[rank mod pp]).
  Timeline timeline;

  double median_step_us() const;
};

// Runs `executable` (BuildExecutable of `schedule` with plans[r].buffers)
// for options.steps steps. `plans` must have an arena for BufferMode::kArena.
// Errors: InvalidArgument for options out of range or plans that do not fit
// the executable; otherwise the root failure of the run as described above.
absl::StatusOr<ReplayResult> RunInProcess(const Schedule& schedule, const Executable& executable,
                                          absl::Span<const RankMemoryPlan> plans,
                                          StageFactory& factory, const InProcessOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_INPROC_RUNTIME_H_
