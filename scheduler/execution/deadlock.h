// Deadlock detection, and the one report of a deadlock that every driver of
// a program gives (the validator, the simulator, the receive placements).
//
// CheckDeadlockFree runs the ranks' cursors (rank_cursor.h) with no clock
// (RunRanks, run_ranks.h). A deadlock is a set of ranks each waiting for
// something its peer has not reached. Every stuck rank waits for another
// stuck rank (a wait always names an action that exists, which a finished
// rank has passed), so following the waits from the lowest stuck rank
// always closes a cycle. The report names that cycle, starting at its
// lowest rank, then any other stuck rank (blocked behind the cycle or in
// another one):
//
//   deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: rank 0 at
//   index 3 (0B0) waits for rank 1 to post 1SEND_B0 (index 6); rank 1 at
//   index 2 (1F1) waits for rank 0 to post 0SEND_F1 (index 5); also stuck:
//   rank 2 at index 4 (2F1) waits for rank 1 to post 1SEND_F1 (index 7)
//
// (one line). "Post" is the wait's threshold: run past a SEND the compute
// consumes, or reach the partner of a strict SEND/RECV. The code is always
// InvalidArgument: the program, not its runner, is wrong.
//
// Cost: O(actions) plus, each time a rank stops, a look at the ranks parked
// on it: a lowered interleaved-1f1b pp128 x v4 x m1024 program (3.1M
// actions) takes tens of milliseconds.
#ifndef JITPIPE_SCHEDULER_EXECUTION_DEADLOCK_H_
#define JITPIPE_SCHEDULER_EXECUTION_DEADLOCK_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/rank_cursor.h"
#include "scheduler/execution/wait_rules.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// OK when every rank runs to the end of its program under `model`.
// Otherwise DeadlockStatus(). REQUIRES: `positions` is MatchSendRecv(schedule).
absl::Status CheckDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                               WaitModel model, int grid_rows = 0);

// The report above, as InvalidArgument, for cursors that RunRanks() left
// stuck (some not done, each of those at a kWait that does not hold); when
// grid_rows > 0, with the lock-step replay's grid under the cursors' model
// attached (FormatStuckGrid, at most grid_rows rows; grid_report.h).
// Internal if a stuck rank waits on a finished one (a bug in the driver).
// REQUIRES: cursors[r] is rank r's, over `schedule` and `positions`.
absl::Status DeadlockStatus(const Schedule& schedule, const CommPositions& positions,
                            absl::Span<const RankCursor> cursors, int grid_rows = 0);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_DEADLOCK_H_
