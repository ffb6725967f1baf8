// Structural validation of a schedule's programs: PyTorch's
// _validate_schedule, made exact.
//
// Checks, beyond the header (ValidateHeader):
//   - every action names a stage in [0, S) held by the rank whose program it
//     is in, and a microbatch in [0, m / chains) where the kind has one;
//   - per (stage, microbatch): exactly one F; then either one B, or one I
//     followed by one W; nothing before its F, no W before its I, no W after
//     a full B (which already computes weight gradients);
//   - per stage: at most one REDUCE_GRAD, and at most one WAIT_REDUCE_GRAD,
//     after it; UNSHARD and RESHARD alternate, starting with an UNSHARD (the
//     last UNSHARD may stay open);
//   - a compute-only program holds only F, B, I, W, OVERLAP_F_B and bubbles;
//     a lowered one holds no bubbles.
// Send/receive matching (a WAIT_SEND after its SEND among it) and deadlock
// freedom are checked by Validate() (validate.h).
//
// The first violation is returned as InvalidArgument naming the rank, the
// index in that rank's program and the action, e.g.
//   rank 3, index 0 (3B0): full backward of stage 3 microbatch 0 comes before its forward
// or, for something missing, the stage and microbatch:
//   rank 2: stage 2 has no forward for microbatch 5
#ifndef JITPIPE_SCHEDULER_ANALYSIS_VALIDATE_STRUCTURE_H_
#define JITPIPE_SCHEDULER_ANALYSIS_VALIDATE_STRUCTURE_H_

#include "absl/status/status.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// Cost: one sweep with a byte of state per (stage, microbatch) (the program
// index, program_index.h, keeps four int32 positions there: for a program
// nobody indexes next, this check is the cheaper); the checker that tracks
// indices and builds the message runs only when a rule fails.
absl::Status ValidateStructure(const Schedule& schedule);

// The same result through the per-action checker alone: the reference the
// tests hold ValidateStructure to.
absl::Status ValidateStructurePerAction(const Schedule& schedule);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_VALIDATE_STRUCTURE_H_
