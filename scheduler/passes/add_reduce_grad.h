// AddReduceGrad: PyTorch's _add_reduce_grad. Puts a stage's REDUCE_GRAD (the
// data-parallel reduction of its gradients over all microbatches) right after
// the action that completes them: the stage's M-th B or W, M = microbatches
// per chain, counting the sub-actions of an OVERLAP_F_B. A stage's reduction
// can then overlap the other local stages' remaining backwards.
//
// Before (one rank holding stages 0 and 1, M = 2):
//   0F0 1F0 0F1 1F1 1B0 1B1 0B0 . 0B1
// After:
//   0F0 1F0 0F1 1F1 1B0 1B1 1REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD
// With split backwards the W completes a stage: ... 1I1 1W1 1REDUCE_GRAD ...;
// inside a compound: (2F1;1B1)OVERLAP_F_B 1REDUCE_GRAD.
//
// Adds nothing for I (an input gradient is not a weight gradient) and drops
// every bubble, as PyTorch does; an empty program stays empty.
#ifndef JITPIPE_SCHEDULER_PASSES_ADD_REDUCE_GRAD_H_
#define JITPIPE_SCHEDULER_PASSES_ADD_REDUCE_GRAD_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kAddReduceGradPass = "add_reduce_grad";

// Returns the schedule with REDUCE_GRAD added and bubbles dropped; it is
// marked lowered (it holds a non-compute action). The input may hold UNSHARD
// and RESHARD.
// Errors: InvalidArgument for a bad stage or microbatch index;
// FailedPrecondition when the input already holds a REDUCE_GRAD, SEND or RECV.
absl::StatusOr<Schedule> AddReduceGrad(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_ADD_REDUCE_GRAD_H_
