// ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024):
// one stage per rank in loop placement, the backward split into I (input
// gradients, on the critical path) and W (weight gradients, which only the
// same stage's I must precede, so they fill bubbles).
//
// The orders are those of the heuristic scheduler in
// sail-sg/zero-bubble-pipeline-parallelism (scheduler/zb.py, `manual_order`
// tried with each of its eight flag combinations, the shortest longest rank
// span winning, the first on ties), for unit costs F = I = W = 1, free
// communication, and its memory model: an F holds one activation unit, its I
// keeps it, its W frees it. The cap is pp units for ZB-H1 (1F1B's memory) and
// 2*pp for ZB-H2 (zb_manual_order.h runs upstream's algorithm). Example,
// pp 4, m 8, rank 1 of ZB-H1:
//   1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4 1I2 1W1 ... 1I7 1W6 1W7
//
// Unit-cost figures (tests/testing/unit_cost_replay.h): both have makespan
// 3m + p - 1 for m >= p (a bubble of (p-1)(F+I-W)); ZB-H1 peaks at min(m, p)
// units; ZB-H2 at min(m, 2p), and each rank's span (first F to last W) is
// exactly its 3m of work for m >= 2p - 1.
//
// Both accept any pp >= 1 and microbatches >= 1. Thread-safe (pure).
#ifndef JITPIPE_SCHEDULER_GENERATORS_ZERO_BUBBLE_H_H_
#define JITPIPE_SCHEDULER_GENERATORS_ZERO_BUBBLE_H_H_

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Errors: InvalidArgument when stages_per_rank != 1.
// REQUIRES: pp >= 1, microbatches >= 1.
absl::StatusOr<Schedule> GenerateZeroBubbleH1(int pp, int microbatches, int stages_per_rank);
absl::StatusOr<Schedule> GenerateZeroBubbleH2(int pp, int microbatches, int stages_per_rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_GENERATORS_ZERO_BUBBLE_H_H_
