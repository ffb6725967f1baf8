// MergeBackward: PyTorch's _merge_bw. An input backward I immediately
// followed by the weight backward W of the same stage and microbatch becomes
// one full backward B (bubbles between them do not count; every bubble is
// dropped, as PyTorch does).
//
// Before:
//   0F0 0I0 . 0W0 0F1 0I1 1F0 0W1
// After:
//   0F0 0B0 0F1 0I1 1F0 0W1
//
// Does nothing (beyond dropping bubbles) to an I whose next action is not
// its own W, to an I inside an OVERLAP_F_B, and to a program without I.
#ifndef JITPIPE_SCHEDULER_PASSES_MERGE_BACKWARD_H_
#define JITPIPE_SCHEDULER_PASSES_MERGE_BACKWARD_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kMergeBackwardPass = "merge_backward";

// Returns the merged schedule (still compute-only, without bubbles).
// Errors: InvalidArgument for a bad stage or microbatch index;
// FailedPrecondition when the input holds anything but compute actions and
// bubbles.
absl::StatusOr<Schedule> MergeBackward(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_MERGE_BACKWARD_H_
