// PlaceRecvsJustInTime: moves every RECV to just before the compute that
// consumes it, so that a receive buffer exists only from then on. This is
// jitpipe's default receive placement (`--recv jit`, RecvPlacement::kJit).
//
// Placement rules, and nothing else:
//   1. A RECV goes immediately before its consumer: RECV_F before the F,
//      RECV_B before the I or B; an OVERLAP_F_B's RECVs, in sub-action order,
//      right in front of it. W never consumes a RECV.
//   2. Every other action keeps its order; SENDs stay where they are (right
//      after their producers, where LowerSendRecvEarly puts them).
//
// Relaxed semantics (validate.h) are the model: SENDs and RECVs match by
// identity (stage, microbatch, kind: what a transport's tag encodes) and
// never wait; a compute waits for the SENDs of the data it consumes. That is
// how jitpipe's transports behave (comm/transport.h) and PyTorch's runtime.
// Under it a RECV never waits, so moving RECVs changes no wait: the result is
// deadlock-free exactly when the input is (always, for LowerSendRecvEarly's
// output, which refuses a compute order that waits on itself). With every
// RECV right before its consumer and every SEND right after its producer,
// the jit memory plan's peak equals the liveness lower bound (memory_plan.h).
//
// Not for ordered rendezvous transports (strict semantics: one NCCL stream,
// MPI_Ssend): RECVs from one peer may come in another order than its SENDs,
// and two ranks may each SEND to the other before either RECVs.
// PlaceRecvsJitRendezvous (place_recvs_jit_rendezvous.h) handles those, at a
// memory cost.
//
// Before (LowerSendRecvEarly of 0F0 0F1 0B0 0B1 / 1F0 1B0 1F1 1B1):
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1
// After:
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1
// (Rank 1 no longer holds F1's input across 1B0. Under strict semantics this
// hangs: rank 0 at 0SEND_F1 waits for 1RECV_F1, rank 1 at 1SEND_B0 for
// 0RECV_B0.)
//
// Does nothing to a program without RECVs (pp = 1) or whose RECVs already
// stand right before their consumers. One sweep over the actions (plus the
// message index's); pure and thread-compatible. Takes the program by value
// and reorders it in its own storage (pass an rvalue to avoid a copy).
#ifndef JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_
#define JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kPlaceRecvsJustInTimePass = "place_recvs_just_in_time";

// Returns the program with its RECVs moved (same actions, lowered = true).
// Errors (MessageIndex::Build, message_index.h): InvalidArgument, as
// Validate() words it, for a program that is not well formed (a bad header,
// stage or microbatch index, a bubble, an action twice, ...);
// FailedPrecondition for a well-formed one that is not a lowered program
// whose sends and receives match one to one: not lowered, a SEND without its
// RECV on the receiving stage's rank (or the reverse), a SEND to the same
// rank, a RECV no compute on its rank consumes.
absl::StatusOr<Schedule> PlaceRecvsJustInTime(Schedule in);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_JUST_IN_TIME_H_
