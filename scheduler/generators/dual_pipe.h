// DualPipe (DeepSeek-V3 technical report; deepseek-ai/DualPipe): two
// pipelines in opposite directions over the same p ranks, each running half
// of the microbatches, with a forward of one direction overlapped with a
// full backward of the other in the steady phase.
//
// IR: two chains (Schedule::chains = 2), two stages per rank, placement v.
//   chain 0 = stages 0..p-1, the forward-direction pipeline: stage r on rank r;
//   chain 1 = stages p..2p-1, the reverse direction: stage p+j on rank p-1-j.
// So rank r holds stages r and 2p-1-r (stage_to_rank = StageToRank(kV, p, 2)).
// Each chain runs microbatches 0 .. m/2-1. An overlapped slot is the compound
// "(F;B)OVERLAP_F_B" (forward first, as upstream); backwards are full B,
// except where upstream defers weight gradients (its zero-bubble steps):
// there the action is I and its W follows later, in FIFO order.
//
// The order is upstream's `DualPipe.step()` (dualpipe.py) action for action,
// eight steps per rank: nF0, nF0F1, nB1W1F1, the main nF0B1F1B0, nB1F1B0,
// nB1B0, nWB0, nW. Example, p 4, m 8, rank 0:
//   0F0 0F1 0F2 7F0 7I0 7W0 7F1 (0F3;7B1)OVERLAP_F_B (7F2;0B0)OVERLAP_F_B 7B2 ...
//
// Unit-cost figures (tests/testing/unit_cost_replay.h, an overlapped pair
// costing F + B = 3): makespan = busy + (p/2 - 1)(F&B + B - 3W) = 3m + p - 2;
// peak p + 1 stage-units of activations on every rank.
//
// Thread-safe (pure).
#ifndef JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_H_
#define JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Errors: InvalidArgument, stating the constraint and a valid alternative,
// when stages_per_rank != 2, pp is odd, microbatches is odd or
// microbatches < 2 * pp (upstream's constraints).
// REQUIRES: pp >= 1, microbatches >= 1.
absl::StatusOr<Schedule> GenerateDualPipe(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_DUAL_PIPE_H_
