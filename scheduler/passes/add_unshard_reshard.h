// AddUnshardReshard: PyTorch's _add_unshard_reshard (FSDP parameter
// prefetch and release), with PyTorch's lookahead of 3 stages.
//
// Per rank, before each action: look ahead from it (bubbles skipped) for the
// first `max_active_stages` distinct stages (an OVERLAP_F_B adds all its
// sub-actions' stages before the count is checked, so it may reach one more);
// RESHARD every active stage not among them, then UNSHARD those not active,
// in lookahead order; then the action. After the last action the stages
// still active are RESHARDed. RESHARDs come in the iteration order of the
// Python set PyTorch keeps the active stages in (CPythonIntSet), so that the
// result equals PyTorch's exactly, also where stage numbers collide in the
// set's hash table.
//
// Before (one rank holding stages 0..3, M = 1):
//   0F0 1F0 2F0 3F0 3B0 2B0 1B0 0B0
// After:
//   0UNSHARD 1UNSHARD 2UNSHARD 0F0 0RESHARD 3UNSHARD 1F0 2F0 3F0 3B0
//   3RESHARD 0UNSHARD 2B0 2RESHARD 1B0 1RESHARD 0B0 0RESHARD
//
// With at most `max_active_stages` stages on a rank nothing is ever evicted
// early: every stage is UNSHARDed before the rank's first action and
// RESHARDed just before the action after its last. Bubbles are dropped (as
// PyTorch does); an empty program stays empty.
#ifndef JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_
#define JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kAddUnshardReshardPass = "add_unshard_reshard";
inline constexpr int kDefaultMaxActiveStages = 3;  // PyTorch's default

// Returns the schedule with UNSHARD/RESHARD added and bubbles dropped; it is
// marked lowered (it holds non-compute actions).
// Errors: InvalidArgument for a bad stage or microbatch index, or
// max_active_stages < 1; FailedPrecondition when the input holds anything but
// compute actions and bubbles.
absl::StatusOr<Schedule> AddUnshardReshard(const Schedule& in,
                                           int max_active_stages = kDefaultMaxActiveStages);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_ADD_UNSHARD_RESHARD_H_
