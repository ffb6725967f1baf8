// DualPipeV (PyTorch's ScheduleDualPipeV, after DeepSeek's DualPipe "cut in
// half"): two stages per rank in V placement (rank r holds s0 = r and
// s1 = 2p-1-r), forwards of one stage overlapped with full backwards of the
// other as OVERLAP_F_B compounds "(F;B)".
//
// Counters per stage: F counts forwards, I counts backwards (a full B counts
// as an I too). Each I queues (stage, mb) for a later W; "W?" emits the oldest
// queued W, or nothing when none is queued. X is B until zero-bubble mode
// switches on, I after. Rank r:
//
//   1. 2(p-r-1) x F(s0)
//   2. r+1 x      F(s0) F(s1)
//   3. p-r-1 x    I(s1) W? F(s1)
//   4. m-2p+r+1 x (F(s0);B(s1)) (F(s1);B(s0))
//                 [the last rank's first pair is plain: F(s0) B(s1)]
//   5. p-r-1 x    B(s1) (F(s1);B(s0))
//   6. r+1 x      X(s1) X(s0); zero-bubble mode switches on in iteration
//                 (r+1)/2, before X(s1) on odd ranks, between the two on even
//   7. p-r-1 x    W? X(s0)
//   8. r+1 x      W?
//
// No bubbles.
#ifndef JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_V_H_
#define JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_V_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Errors: InvalidArgument unless stages_per_rank == 2 and microbatches >= 2p
// (the number of stages), e.g.
//   dualpipev: needs at least 2 x pp = 8 microbatches (2 stages per rank x 4 ranks), got 5
absl::StatusOr<Schedule> GenerateDualPipeV(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_V_H_
