// How a replay runs (replay.h), whatever the backend.
#ifndef JITPIPE_RUNTIME_REPLAY_OPTIONS_H_
#define JITPIPE_RUNTIME_REPLAY_OPTIONS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/world.h"
#include "scheduler/ir/model.h"

namespace jitpipe {

enum class BufferMode {
  kTracked,  // TrackedBuffers: one heap allocation per buffer, measured peak
  kArena,    // ArenaBuffers: the plan's arena, no allocation per buffer
};

struct ReplayOptions {
  int dp = 1;  // data-parallel replicas: the world is pp x dp ranks
  int steps = 1;
  ReduceKind reduce = ReduceKind::kAllReduce;
  BufferMode buffers = BufferMode::kTracked;
  absl::Duration timeout = absl::Seconds(60);  // bounds every wait
  std::string flight_dir;  // "": no dump files
  bool record_timeline = false;
  // Called by world rank 0's thread after each of its steps, with the
  // number of steps it has finished (only where rank 0 is local).
  std::function<void(int)> on_step;
  // A rank still in a stage call `stuck_grace` after the job was aborted is
  // in a call that does not return (a stage stuck in a kernel or a loop).
  // No thread can be stopped from outside, and the run cannot return while
  // that thread still uses the run's arguments, so, like PyTorch's NCCL
  // watchdog, the process ends: the driver calls on_stuck with the failure
  // report (naming the stuck ranks; flight records are written by then)
  // and the world, which on_stuck leaves (World::LeaveBeforeExit) once the
  // report is out, right before std::_Exit -- so that no destructor runs
  // under the stuck thread, and the other processes of a job end in order.
  // Empty: the report goes to stderr, then the same with status 1. If
  // on_stuck returns, the run waits for the threads after all.
  absl::Duration stuck_grace = absl::Seconds(2);
  std::function<void(const absl::Status& report, World& world)> on_stuck;
};

}  // namespace jitpipe

#endif  // JITPIPE_RUNTIME_REPLAY_OPTIONS_H_
