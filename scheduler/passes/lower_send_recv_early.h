// LowerSendRecvEarly: PyTorch's _add_send_recv, exactly. Adds a SEND after
// every compute whose result another rank needs, and the matching RECV on
// that rank at the same moment, which is "early": a RECV is posted as soon as
// its sender computes, not when its consumer runs.
//
// Algorithm (a round-robin over ranks, ascending, until every program is
// placed): a rank's next action is placed when it is ready against that
// rank's own placed actions:
//   F of stage s (not a chain's first):   s RECV_F mb, or F of s-1 on this rank
//   I/B of stage s (not a chain's last):  s RECV_B mb, or I/B of s+1 on this rank
//   anything else (W, UNSHARD, ...):      always
//   OVERLAP_F_B:                          all its sub-actions
// A bubble is popped in its turn without being placed (it costs the rank that
// round, which is why the IR keeps bubbles until here). After a placed action
// follow, per sub-action in order, a SEND to the rank of the next stage (for
// F) or previous stage (for I/B) in the chain when that rank differs, and the
// matching RECV is appended to that rank's program right away. A rank not
// ready skips its turn; a round in which no rank is ready is PyTorch's
// "Malformed compute schedule, can't schedule sends/recvs".
//
// Before (pp 2, one stage per rank; "." is a bubble):
//   rank 0: 0F0 0F1 0B0 0B1
//   rank 1: .   1F0 1B0 1F1 1B1
// After:
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1
//
// Adds nothing (beyond dropping bubbles and marking the result lowered):
//   - for a stage whose neighbour in its chain lives on the same rank (the
//     turn of a V placement, every stage when pp = 1): that hand-over is local;
//   - after F of a chain's last stage and I/B of a chain's first stage (with
//     two chains, as in DualPipe, each chain ends on its own);
//   - after W, UNSHARD, RESHARD and REDUCE_GRAD, which are placed as they come.
#ifndef JITPIPE_SCHEDULER_PASSES_LOWER_SEND_RECV_EARLY_H_
#define JITPIPE_SCHEDULER_PASSES_LOWER_SEND_RECV_EARLY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kLowerSendRecvEarlyPass = "lower_send_recv_early";

// Returns the lowered schedule (lowered = true, no bubbles). The input may
// hold UNSHARD, RESHARD and REDUCE_GRAD (they are placed as they come).
// Errors: InvalidArgument for a bad stage or microbatch index (CheckIndices)
// or when no rank can make progress, naming every stuck rank's index, action
// and what it waits for; FailedPrecondition when the input already holds a
// SEND or RECV.
// REQUIRES for exact PyTorch results: ValidateStructure(in) passes.
absl::StatusOr<Schedule> LowerSendRecvEarly(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_LOWER_SEND_RECV_EARLY_H_
