// The lock-step replay of a matched lowered program: PyTorch's
// _simulate_comms_compute, under any wait model (wait_rules.h).
//
// Time advances in steps. In each step every unfinished rank, in ascending
// order, runs its next action if that action's waits hold -- seeing what
// lower ranks ran earlier in the same step -- or idles (a bubble); then each
// rank that idled tries once more, again in ascending order. The replay ends
// when every rank has finished or a step runs nothing (a deadlock).
//
// Under WaitModel::kBlockingRecv this is PyTorch's dry run exactly: the same
// grid, bubbles and step count (e.g. GPipe pp2 m2 lowered by _add_send_recv
// takes 12 steps, its rank 0 idling in steps 4-6 and 8). Under kRelaxed
// and kStrict it is the view of a hang that the deadlock report prints.
//
// The replay is O(steps x ranks): meant for reports and tests, not for
// checking big programs (deadlock.h does that in O(actions)).
#ifndef JITPIPE_SCHEDULER_EXECUTION_LOCK_STEP_H_
#define JITPIPE_SCHEDULER_EXECUTION_LOCK_STEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/ir/schedule.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/wait_rules.h"

namespace jitpipe {

struct LockStepReplay {
  // Per rank, one entry per step until it finished or got stuck: the action
  // it ran, or a bubble where it waited.
  std::vector<RankProgram> steps;
  // Per rank, the index of the action it is stuck at; kAbsent when it
  // finished.
  std::vector<int32_t> stuck_at;

  bool deadlocked() const;
  // The length of the longest row of `steps`.
  int num_steps() const;
};

// REQUIRES: `positions` is MatchSendRecv(schedule).
LockStepReplay ReplayLockStep(const Schedule& schedule, const CommPositions& positions,
                              WaitModel model);

// The grid of a deadlocked replay: its steps, then one more row, marked
// "<-- ERROR HERE", holding the action each stuck rank is blocked at (blank
// for the ranks that finished); at most `max_rows` step rows, the last ones
// (grid_report.h). REQUIRES: replay.deadlocked(), max_rows >= 1.
std::string FormatStuckGrid(const Schedule& schedule, const LockStepReplay& replay,
                            int max_rows);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_LOCK_STEP_H_
