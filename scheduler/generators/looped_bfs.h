// LoopedBFS (PyTorch's ScheduleLoopedBFS): breadth first over the local
// stages, all microbatches of a stage before the next stage.
//
// Loop placement: rank r holds stages r, r+p, ..., r+(v-1)p. Rank r's
// program (bubbles as "."):
//
//   r bubbles
//   for each local stage s, ascending:   F0 .. F(m-1) of s
//   2(p-1-r) bubbles
//   for each local stage s, descending:  B(m-1) .. B0 of s
//
//   p = 2, v = 2, m = 2:
//     rank 0: 0F0 0F1 2F0 2F1 .   .   2B1 2B0 0B1 0B0
//     rank 1: .   1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0
#ifndef JITPIPE_SCHEDULER_GENERATORS_LOOPED_BFS_H_
#define JITPIPE_SCHEDULER_GENERATORS_LOOPED_BFS_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1, microbatches >= 1 and stages_per_rank >= 1; never fails.
absl::StatusOr<Schedule> GenerateLoopedBfs(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_LOOPED_BFS_H_
