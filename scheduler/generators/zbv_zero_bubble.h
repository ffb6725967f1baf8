// ZB-V (PyTorch's ScheduleZBVZeroBubble): the zero-bubble V schedule, exactly
// two stages per rank in V placement (rank r holds chunk 0 = stage r and
// chunk 1 = stage 2p-1-r), backwards split into I and W.
//
// PyTorch builds the order for n = max(2p-1, m) microbatches, then replaces
// every action on a microbatch >= m by a bubble, so a small m leaves orders
// full of bubbles (trailing ones included). Rank r, counting each chunk's F,
// I and W from 0 (F0 = F of chunk 0, I1 = I of chunk 1, ...):
//
//   r bubbles
//   warmup:   2(p-r)-1 x F0;   r x [F1 F0];   p-r x [F1 I1 W1]
//   steady:   while F1 < F0 or F0 < n:  [F0 if F0 < n]  I0 W0 F1 I1 W1
//   cooldown: (each chunk has as many Ws as Is here)
//             r x [I0 I1];   p-r x [I0 W0];   the remaining W1s;   the remaining W0s
//
//   p = 2, m = 1 (n = 3):
//     rank 0: 0F0 .   .   3F0 3I0 3W0 .   .   .   0I0 0W0, then 7 bubbles
//     rank 1: .   1F0 2F0 .   .   2I0 2W0 .   1I0 1W0,     then 9 bubbles
#ifndef JITPIPE_SCHEDULER_GENERATORS_ZBV_ZERO_BUBBLE_H_
#define JITPIPE_SCHEDULER_GENERATORS_ZBV_ZERO_BUBBLE_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1 and microbatches >= 1. Errors: InvalidArgument unless
// stages_per_rank == 2.
absl::StatusOr<Schedule> GenerateZbvZeroBubble(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_ZBV_ZERO_BUBBLE_H_
