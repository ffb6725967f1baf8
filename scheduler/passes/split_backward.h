// SplitBackward: every full backward B becomes an input backward I followed
// by its weight backward W, the form zero-bubble runtimes execute.
//
// Before:
//   0F0 0B0 (2F1;1B0)OVERLAP_F_B 0F1 .
// After:
//   0F0 0I0 0W0 (2F1;1I0)OVERLAP_F_B 1W0 0F1 .
// Inside an OVERLAP_F_B the B becomes I in place and its W follows the
// compound (in sub-action order when there are several).
//
// Does nothing to a program without B (one already split, such as the
// zero-bubble schedules' I and W); F, I, W and bubbles are kept in place.
#ifndef JITPIPE_SCHEDULER_PASSES_SPLIT_BACKWARD_H_
#define JITPIPE_SCHEDULER_PASSES_SPLIT_BACKWARD_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kSplitBackwardPass = "split_backward";

// Returns the split schedule (still compute-only).
// Errors: InvalidArgument for a bad stage or microbatch index;
// FailedPrecondition when the input holds anything but compute actions and
// bubbles.
absl::StatusOr<Schedule> SplitBackward(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_SPLIT_BACKWARD_H_
