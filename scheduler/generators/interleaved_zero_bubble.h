// Interleaved zero bubble, ZB1P (PyTorch's ScheduleInterleavedZeroBubble):
// interleaved 1F1B with backwards split into I (input gradients) and W
// (weight gradients), the Ws filling what would be bubbles.
//
// Loop placement, v stages per rank; forwards and backwards are numbered and
// mapped to stages as in interleaved_rounds.h. With
//   w = min((v-1)*mpr + (p-1-r), m*v)   warmup forwards on rank r,
// rank r's program is (bubbles as "."):
//
//   r bubbles
//   F(0) .. F(w-1), then p-1-r bubbles                       [if w > 0]
//   for j in [0, m*v):  F(w + j) [while forwards remain]  I(j)  W(j - r) [if j >= r]
//   W(j) for the backwards whose W is still due, oldest first
//
// A W carries its backward's stage and microbatch. Then PyTorch's lock-step
// pass (add_bubbles_to_actions.h) delays every forward whose predecessor
// stage has not run yet, which adds bubbles when m is small against p.
#ifndef JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ZERO_BUBBLE_H_
#define JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ZERO_BUBBLE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1 and stages_per_rank >= 1. Errors: InvalidArgument when m is not
// a multiple of max(1, m // p) (InterleavedRounds::Create states the nearest
// valid counts).
absl::StatusOr<Schedule> GenerateInterleavedZeroBubble(int pp, int microbatches,
                                                       int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_ZERO_BUBBLE_H_
