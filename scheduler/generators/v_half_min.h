// V-Half and V-Min ("Pipeline Parallelism with Controllable Memory", Qi et
// al., NeurIPS 2024): two stages per rank in V placement (rank r holds
// stages r and 2p-1-r, so rank 0 holds the first stage and the loss), the
// backward split into I and W, memory held to about 1/2 (V-Half) or 1/3
// (V-Min) of 1F1B's.
//
// The orders are those of sail-sg/zero-bubble-pipeline-parallelism's
// scheduler/zbv_greedy.py for unit costs and free communication: one
// building block per microbatch (the slots of F chunk 0, F chunk 1, I chunk
// 1 and I chunk 0 on each rank within a period of 6), repeated m times, W
// placed in free slots, warmup and cooldown squeezed without raising the
// peak, and the result run eagerly (building_block.h). Example, pp 4, m 8,
// rank 3 of V-Min: 3F0 4F0 3F1 4F1 4I0 3I0 4W0 3W0 3F2 4F2 ...
//
// Unit-cost figures (tests/testing/unit_cost_replay.h; one unit = one
// microbatch through both of a rank's stages = 2 stage-units):
//   V-Half: peak (p+2)//2 units; makespan 53 for pp 4, m 8 and 113 for pp 8, m 16.
//   V-Min:  peak about (p+4)//3 units (pp 8: 3.5 on rank 0, 4 elsewhere, as
//           upstream); makespan 59 for pp 4, m 8 and 123 for pp 8, m 16.
//
// Both accept any pp >= 1 and microbatches >= 1. Thread-safe (pure).
#ifndef JITPIPE_SCHEDULER_GENERATORS_V_HALF_MIN_H_
#define JITPIPE_SCHEDULER_GENERATORS_V_HALF_MIN_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Errors: InvalidArgument when stages_per_rank != 2.
// REQUIRES: pp >= 1, microbatches >= 1.
absl::StatusOr<Schedule> GenerateVHalf(int pp, int microbatches, int stages_per_rank);
absl::StatusOr<Schedule> GenerateVMin(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_V_HALF_MIN_H_
