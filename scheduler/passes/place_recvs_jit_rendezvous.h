// PlaceRecvsJitRendezvous: the just-in-time receive placement for ordered
// rendezvous transports (`--recv jit-rendezvous`,
// RecvPlacement::kJitRendezvous): every RECV as late as it can go while the
// program stays deadlock-free under strict semantics (validate.h: messages
// between two ranks match in posting order, and a SEND also waits for its
// RECV, as on one NCCL stream or with MPI_Ssend), and hence under relaxed
// semantics too.
//
// Placement rules:
//   1. A RECV goes immediately before its consumer: RECV_F before the F,
//      RECV_B before the I or B; an OVERLAP_F_B's RECVs, in sub-action order,
//      right in front of it. W never consumes a RECV.
//   2. Messages between two ranks match in order, so RECVs from one peer
//      keep that peer's SEND order: a consumer whose message has an earlier,
//      still unposted message from the same peer posts that one first.
//   3. Everything but RECVs keeps its order; SENDs stay right after their
//      producers, where LowerSendRecvEarly put them.
//   4. Minimal repair. Rule 1 alone can deadlock when a SEND also waits for
//      its RECV: rank 0 sends to rank 1 while rank 1 sends to rank 0, each
//      posting its RECV only after its SEND. The pass replays the program
//      with the ranks' cursors under strict semantics (the rank state
//      machine, scheduler/execution/rank_cursor.h, the validator's rules);
//      whenever ranks wait on each other in a cycle, one receiver of a SEND
//      in the cycle posts that RECV where it is blocked: the latest point at which it can go, so only RECVs that must
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
// The result is deadlock-free under strict semantics by construction (the
// replay completes). The price is memory: a RECV posted early (rules 2 and
// 4) holds its buffer before it is needed, so the jit memory plan's peak may
// exceed the liveness lower bound that PlaceRecvsJustInTime reaches; the
// planner reports by how much (`jitpipe plan`).
//
// Before (LowerSendRecvEarly of 0F0 0F1 0B0 0B1 / 1F0 1B0 1F1 1B1):
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1
// After:
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1
// (Rank 0 sends F1 while rank 1 sends B0: one must receive first. Both
// consumers are one action ahead; rank 1 has just run a backward, so it
// receives F1 before it sends B0, and rank 0's peak stays where it was.)
//
// Does nothing to a program without RECVs (pp = 1) or whose RECVs already
// stand right before their consumers, in per-pair order, without a cycle;
// UNSHARD, RESHARD and REDUCE_GRAD keep their places. Pure and
// thread-compatible; about O(actions) plus the cycles' repairs (each the
// distance its RECV moves, and a look at every rank).
#ifndef JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JIT_RENDEZVOUS_H_
#define JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JIT_RENDEZVOUS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kPlaceRecvsJitRendezvousPass = "place_recvs_jit_rendezvous";

// Returns the program with its RECVs moved (same actions, lowered = true).
// Errors: those of PlaceRecvsJustInTime (MessageIndex::Build: the input is
// not a lowered program whose sends and receives match one to one); and
// InvalidArgument when the computes themselves wait on each other in a
// cycle, naming each rank's index and action.
absl::StatusOr<Schedule> PlaceRecvsJitRendezvous(const Schedule& in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JIT_RENDEZVOUS_H_
