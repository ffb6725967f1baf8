// PyTorch's _add_bubbles_to_actions: a lock-step replay that delays each
// action until what it depends on ran on an earlier step, inserting bubbles.
//
// Step t visits every rank in ascending order and looks at the rank's next
// action:
//   - a bubble is copied through;
//   - F(s, mb) with s > 0 waits for F(s-1, mb);
//     B(s, mb) waits for B(s+1, mb), or on the last stage for F(s, mb);
//     if that did not run on a step before t, a bubble is emitted instead and
//     the action is retried on step t+1;
//   - everything else (I, W, OVERLAP_F_B) never waits.
// What runs on step t becomes visible only at the end of step t. Stages are
// global: "s-1" need not live on a neighbouring rank.
//
// Example (p = 2, loop placement, 4 stages; "." a bubble):
//   in:   rank 0: 0F0 2F0          out:  rank 0: 0F0 .   2F0
//         rank 1: 1F0 3F0                rank 1: .   1F0 .   3F0
// (1F0 waits a step for 0F0, 2F0 for 1F0, 3F0 for 2F0.)
//
// The InterleavedZeroBubble generator runs this after building its orders; it
// only changes anything when m is small against p.
#ifndef JITPIPE_SCHEDULER_GENERATORS_ADD_BUBBLES_TO_ACTIONS_H_
#define JITPIPE_SCHEDULER_GENERATORS_ADD_BUBBLES_TO_ACTIONS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Returns the programs with bubbles inserted; a program that needs none is
// returned as it came, without copying (the common case: PyTorch's orders only
// need bubbles when m is small). Errors: InvalidArgument when a step lets no
// rank advance (an F or B whose dependency never runs), naming each stuck
// rank's index and action.
// REQUIRES: every F and B names a stage in [0, num_stages) and a microbatch in
// [0, microbatches).
absl::StatusOr<std::vector<RankProgram>> AddBubblesToActions(std::vector<RankProgram> programs,
                                                             int num_stages, int microbatches);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_ADD_BUBBLES_TO_ACTIONS_H_
