// 1F1B (PyTorch's Schedule1F1B), in the order its runtime executes.
//
// One stage per rank (stage r on rank r). PyTorch's _get_pipeline_order for
// 1F1B is off by one on the last rank (it emits F1..Fm there), so this
// generator emits what Schedule1F1B._step_microbatches actually runs:
//
//   warmup:  w = min(m, p - r) forwards F0 .. F(w-1)
//   steady:  B(next), then F(next) while forwards remain
//   cooldown: the remaining backwards
//
//   p = 4, m = 5:  rank 0: 0F0 0F1 0F2 0F3 0B0 0F4 0B1 0B2 0B3 0B4
//                  rank 3: 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4
//
// No bubbles: the runtime's order has none. m < p is accepted, as Megatron's
// runtime accepts it: the early ranks then run all forwards, then all
// backwards (PyTorch at 00722e6 refuses it with a ValueError).
#ifndef JITPIPE_SCHEDULER_GENERATORS_ONE_F_ONE_B_H_
#define JITPIPE_SCHEDULER_GENERATORS_ONE_F_ONE_B_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1 and microbatches >= 1. Errors: InvalidArgument unless
// stages_per_rank == 1.
absl::StatusOr<Schedule> GenerateOneFOneB(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_ONE_F_ONE_B_H_
