// Deadlock detection: runs a matched lowered program under a wait model
// (wait_rules.h) and, when ranks get stuck, names the wait cycle.
//
// Each rank runs as far as its waits allow; a rank that cannot go on is
// parked on the rank it waits for and resumed once that rank has moved far
// enough. The cost is O(actions) plus, each time a rank stops, a look at the
// ranks parked on it (its pipeline neighbours), with dense per-rank arrays
// only: a lowered interleaved-1f1b pp128 x v4 x m1024 program (3.1M actions)
// takes about 25 ms relaxed, 55 ms strict (where every SEND and RECV stops).
//
// A deadlock is a set of ranks each waiting for something its peer has not
// reached. Every stuck rank waits for another stuck rank (a wait always
// names an action that exists, which a finished rank has passed), so
// following the waits from the lowest stuck rank always closes a cycle. The
// report names that cycle, starting at its lowest rank, then any other
// stuck rank (blocked behind the cycle or in another one):
//
//   deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: rank 0 at
//   index 3 (0B0) waits for rank 1 to post 1SEND_B0 (index 6); rank 1 at
//   index 2 (1F1) waits for rank 0 to post 0SEND_F1 (index 5); also stuck:
//   rank 2 at index 4 (2F1) waits for rank 1 to post 1SEND_F1 (index 7)
//
// (one line). "Post" is the wait's threshold: run past a SEND the compute
// consumes, or reach the partner of a strict SEND/RECV.
#ifndef JITPIPE_SCHEDULER_PASSES_DEADLOCK_H_
#define JITPIPE_SCHEDULER_PASSES_DEADLOCK_H_

#include "absl/status/status.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/comm_matching.h"
#include "scheduler/passes/wait_rules.h"

namespace jitpipe {

// OK when every rank runs to the end of its program under `model`.
// Otherwise InvalidArgument with the report above and, when grid_rows > 0,
// the lock-step replay's grid (FormatStuckGrid, at most grid_rows rows)
// attached (grid_report.h). REQUIRES: `positions` is MatchSendRecv(schedule).
absl::Status CheckDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                               WaitModel model, int grid_rows = 0);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_DEADLOCK_H_
