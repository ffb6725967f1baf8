// DeferReduceWait: PyTorch main's defer_reduce_grad_wait. Each REDUCE_GRAD
// stays where it is; its wait, a WAIT_REDUCE_GRAD, goes just before the next
// REDUCE_GRAD of the same rank (the last one's at the end of the rank's
// program), so at most one stage's reduction is outstanding at a time and
// it overlaps the compute of the rank's next stage.
//
// Before (one rank holding stages 0 and 1, lowered with REDUCE_GRAD):
//   0F0 1F0 1B0 1REDUCE_GRAD 0B0 0REDUCE_GRAD
// After:
//   0F0 1F0 1B0 1REDUCE_GRAD 0B0 1WAIT_REDUCE_GRAD 0REDUCE_GRAD 0WAIT_REDUCE_GRAD
//
// Without it a reduction is waited for only at the step's end (jitpipe's
// default: every reduction may be outstanding at once); PyTorch's own
// default waits inside REDUCE_GRAD.
//
// Does nothing to a rank without REDUCE_GRAD.
#ifndef JITPIPE_SCHEDULER_PASSES_DEFER_REDUCE_WAIT_H_
#define JITPIPE_SCHEDULER_PASSES_DEFER_REDUCE_WAIT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kDeferReduceWaitPass = "defer_reduce_wait";

// Returns the schedule with the waits added.
// Errors: InvalidArgument for a schedule with one stage per rank (nothing
// can run between a reduction and its wait; PyTorch refuses the option for
// single-stage schedules); FailedPrecondition when the schedule has no
// REDUCE_GRAD (lower with reduce_grad) or already has a WAIT_REDUCE_GRAD.
absl::StatusOr<Schedule> DeferReduceWait(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_DEFER_REDUCE_WAIT_H_
