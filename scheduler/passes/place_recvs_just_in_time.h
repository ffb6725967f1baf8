// PlaceRecvsJustInTime: moves every RECV to just before the compute that
// consumes it, so that a receive buffer exists only from then on (jitpipe's
// "jit" receive placement), and keeps the program deadlock-free under relaxed
// and strict (rendezvous) semantics (validate.h).
//
// Placement rules:
//   1. A RECV goes immediately before its consumer: RECV_F before the F,
//      RECV_B before the I or B; an OVERLAP_F_B's RECVs, in sub-action order,
//      right in front of it. W never consumes a RECV.
//   2. Messages between two ranks match in order (as one NCCL stream or MPI
//      without tags matches them), so RECVs from one peer keep that peer's
//      SEND order: a consumer whose message has an earlier, still unposted
//      message from the same peer posts that one first.
//   3. Everything but RECVs keeps its order; SENDs stay right after their
//      producers, where LowerSendRecvEarly put them.
//   4. Minimal repair. Rule 1 alone can deadlock when a SEND also waits for
//      its RECV (rendezvous): rank 0 sends to rank 1 while rank 1 sends to
//      rank 0, each posting its RECV only after its SEND. The pass replays the
//      program under rendezvous semantics; whenever ranks wait on each other
//      in a cycle, one receiver of a SEND in the cycle posts that RECV where it
//      is blocked: the latest point at which it can go, so only RECVs that must
//      come early do. It picks the cheapest: the receiver whose consumer of
//      the message is fewest of its actions ahead, then the one furthest below
//      its most held forward stashes (a rank that has just run a backward has
//      room for the buffer), then the lowest rank.
//      PyTorch's _defer_recv_ops uses rank parity instead: a lower rank
//      posts the RECVs it already holds from a peer before a SEND to that
//      peer. That moves RECVs early where no cycle would form, and it does not
//      make PyTorch's 1F1B (or most schedules) deadlock-free under rendezvous
//      semantics, since the RECV that would break a cycle often sits after the
//      SEND in _add_send_recv's order, out of the rule's reach.
// The result is deadlock-free under rendezvous semantics by construction
// (the replay completes), and hence under relaxed semantics too.
//
// Before (LowerSendRecvEarly of 0F0 0F1 0B0 0B1 / 1F0 1B0 1F1 1B1):
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1
// After:
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1
// (Rank 0 sends F1 while rank 1 sends B0: one must receive first. Both
// consumers are one action ahead; rank 1 has just run a backward, so it
// receives F1 before it sends B0, and rank 0's peak stays where it was.)
//
// Does nothing to a program without RECVs (pp = 1) or whose RECVs already
// stand right before their consumers without a cycle; UNSHARD, RESHARD and
// REDUCE_GRAD keep their places.
#ifndef JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_
#define JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kPlaceRecvsJustInTimePass = "place_recvs_just_in_time";

// Returns the program with its RECVs moved (same actions, lowered = true).
// Errors:
//   FailedPrecondition when the input is not a lowered program whose sends
//   and receives match one to one: not lowered, a bubble, a RECV or SEND
//   twice, a SEND without its RECV on the receiving stage's rank (or the
//   reverse), a SEND to the same rank, a RECV no compute on its rank consumes;
//   InvalidArgument for a bad stage or microbatch index, or when the computes
//   themselves wait on each other in a cycle (naming each rank's index and
//   action).
absl::StatusOr<Schedule> PlaceRecvsJustInTime(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_
