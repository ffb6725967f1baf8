// AddWaitSend: PyTorch main's _add_wait_send. Names, in a lowered program,
// the point where each forward send is known to have completed, so that the
// activation it sent can be freed there (a stream-ordered wait, legal under
// CUDA-graph capture where polling is not).
//
// For every sSEND_Fm of a rank, sWAIT_SEND_Fm goes immediately after the
// action holding the local backward of (s, m) -- its I or B, also as a
// sub-action of an OVERLAP_F_B. That backward consumes the gradient stage
// s+1 computed, which it could only compute after receiving this very
// activation, so the wait never waits for anything new: it adds no edge to
// the program's wait graph, and a program deadlock-free under relaxed (or
// strict) semantics stays so.
//
// Backward sends (SEND_B) get no wait: no answering traffic proves they
// completed; they are drained at the step's end (or by a budget,
// add_wait_send_budget.h).
//
// Before (rank 0 of 1F1B pp 2, m 2, lowered just in time):
//   0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
// After:
//   0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0WAIT_SEND_F0 0RECV_B1 0B1 0WAIT_SEND_F1
// With split backwards the wait follows the I; inside a compound it follows
// the compound: (7F4;6B2)OVERLAP_F_B 6WAIT_SEND_F2.
//
// Does nothing to a rank without SEND_F (the last stage of a chain, a stage
// whose successor is on the same rank), nor to a SEND_F that already has its
// WAIT_SEND_F.
#ifndef JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_H_
#define JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kAddWaitSendPass = "add_wait_send";

// Returns the schedule with the waits added.
// Errors: FailedPrecondition for a compute-only schedule; InvalidArgument
// from ValidateStructure and MatchSendRecv (the schedule's sends and
// receives must match), or
// naming a SEND_F whose stage has no backward of that microbatch after it on
// the rank (no point where its completion is known).
absl::StatusOr<Schedule> AddWaitSend(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_ADD_WAIT_SEND_H_
