// Interleaved 1F1B (PyTorch's ScheduleInterleaved1F1B): depth first over the
// local stages, Megatron's interleaved schedule with flexible rounds.
//
// Loop placement, v stages per rank; forwards and backwards are numbered and
// mapped to stages as in interleaved_rounds.h. With
//   w = min((v-1)*mpr + 2(p-1-r), m*v)   warmup forwards on rank r,
// rank r's program is (bubbles as "."):
//
//   r bubbles
//   F(0) .. F(w-1), then max(0, v*p + 2(p-1-r) - (w + r)) bubbles   [if w > 0]
//   for j in [0, m*v - w):    F(w + j)  B(j)                        (steady)
//   for j in [m*v - w, m*v):  .  B(j)                                (cooldown)
//
// The bubbles line the ranks up in lock step: where the warmup leaves room for
// the padding, rank r's first backward lands on step v*p + 2(p-1-r) + 1.
#ifndef JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_1F1B_H_
#define JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_1F1B_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1 and stages_per_rank >= 1. Errors: InvalidArgument when m is not
// a multiple of max(1, m // p) (InterleavedRounds::Create states the nearest
// valid counts).
absl::StatusOr<Schedule> GenerateInterleaved1F1B(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_INTERLEAVED_1F1B_H_
