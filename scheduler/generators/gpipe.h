// GPipe (PyTorch's ScheduleGPipe): every forward, then every backward.
//
// One stage per rank (stage r on rank r). Rank r's program, as PyTorch's
// _get_pipeline_order emits it before _add_reduce_grad (bubbles as "."):
//
//   r bubbles | F0 .. F(m-1) | 3(p-1-r) bubbles | B0 .. B(m-1)
//
//   p = 2, m = 3:   rank 0: 0F0 0F1 0F2 .   .   .   0B0 0B1 0B2
//                   rank 1: .   1F0 1F1 1F2 1B0 1B1 1B2
//
// Gradient reduction (PyTorch appends rREDUCE_GRAD) is a lowering pass's job.
#ifndef JITPIPE_SCHEDULER_GENERATORS_GPIPE_H_
#define JITPIPE_SCHEDULER_GENERATORS_GPIPE_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Any pp >= 1 and microbatches >= 1. Errors: InvalidArgument unless
// stages_per_rank == 1.
absl::StatusOr<Schedule> GenerateGPipe(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_GPIPE_H_
