// Send/receive matching of a lowered program: which SEND each RECV pairs
// with, checked to be a one-to-one matching that a real transport can run.
//
// A transfer is named by the stage and microbatch of its sender:
//
//   sSEND_Fm on rank(s), after sFm        ->  (s+1)RECV_Fm on rank(s+1)
//   sSEND_Bm on rank(s), after sIm / sBm  ->  (s-1)RECV_Bm on rank(s-1)
//
// e.g. with pp = 2, loop placement: 1SEND_F3 on rank 1 is received by
// 2RECV_F3 on rank 0, which 2F3 then consumes.
//
// MatchSendRecv checks, for every action of every rank:
//   - no SEND/RECV between two stages on the same rank (the V turn hands
//     over locally) and none past a chain's end (nothing forward from a
//     chain's last stage, nothing backward from its first);
//   - each transfer end appears once; a SEND comes after the compute that
//     produces its data;
//   - every SEND has its RECV on the peer and every RECV its SEND;
//   - every compute that needs data from another rank (F of a non-first
//     stage whose previous stage is remote, I/B of a non-last stage whose
//     next stage is remote) has that RECV earlier in its rank's program, and
//     one that needs data from a co-located stage (the V turn) has that
//     stage's F (or I/B) earlier.
// and PyTorch main's explicit waits:
//   - a WAIT_SEND_F / WAIT_SEND_B of (stage, microbatch) comes after the SEND
//     it waits for, in the same rank's program, at most once;
//   - (REDUCE_GRAD before its WAIT_REDUCE_GRAD is a structure rule,
//     validate_structure.h; its position is recorded here).
// Transfers match by identity (stage, microbatch, direction: what a
// transport's tag encodes), so the receives from one peer may come in any
// order. Ordered transports need them in the peer's send order; that rule
// belongs to strict semantics (CheckPairOrder, pair_order.h).
//
// The first violation, in (rank, index) order, is returned as
// InvalidArgument naming the rank, the index and the action, e.g.
//   rank 1, index 4 (1SEND_F2): no matching 2RECV_F2 on rank 2
// with the program's step x rank grid around that index attached
// (grid_report.h).
//
// Cost: the program index (one sweep), then one pass over its dense
// (stage, microbatch) tables that checks the rules there; the per-action
// checker runs only when the index has a fault or that pass fails, to name
// the first violation.
#ifndef JITPIPE_SCHEDULER_ANALYSIS_COMM_MATCHING_H_
#define JITPIPE_SCHEDULER_ANALYSIS_COMM_MATCHING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// The positions MatchSendRecv hands out: the program index (program_index.h)
// whose transfer tables (send_f, recv_f, send_b, recv_b by the action's own
// stage and microbatch), stage links and reduce_grad it checked. A plain
// value; cheap to query from hot loops.
using CommPositions = ProgramIndex;

// Inline forms of action.h's IsSendRecv and ForEachComputePart, for the
// loops here that run over millions of actions (action.h's predicates are
// out of line).
inline bool IsTransfer(ActionKind kind) {
  switch (kind) {
    case ActionKind::kSendF:
    case ActionKind::kRecvF:
    case ActionKind::kSendB:
    case ActionKind::kRecvB:
      return true;
    default:
      return false;
  }
}

template <typename Fn>
void ForEachComputePartFast(const Action& action, Fn&& fn) {
  switch (action.kind) {
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
      fn(action);
      return;
    case ActionKind::kOverlapFB:
      for (const Action& sub : action.sub_actions) fn(sub);
      return;
    default:
      return;
  }
}

// One end of a transfer: a rank and an index in its program.
struct Endpoint {
  int rank = 0;
  int32_t index = kAbsent;
};

// Matches a lowered schedule's sends and receives (see the file comment).
// REQUIRES: ValidateStructure(schedule) is ok. Errors: FailedPrecondition if
// the schedule is not lowered; InvalidArgument for the first violation, with
// a grid of at most `grid_rows` step rows attached (0: none).
absl::StatusOr<CommPositions> MatchSendRecv(const Schedule& schedule, int grid_rows = 0);

// The same result through the per-action checker alone, without the table
// pass: the reference the tests hold MatchSendRecv to.
absl::StatusOr<CommPositions> MatchSendRecvPerAction(const Schedule& schedule,
                                                     int grid_rows = 0);

// The other end of a SEND or RECV. REQUIRES: `comm` is a SEND/RECV of the
// schedule that `positions` = MatchSendRecv(schedule) matched.
inline Endpoint Partner(const CommPositions& positions, const Action& comm) {
  const int s = comm.stage, mb = comm.microbatch;
  const StageLink& link = positions.stages[s];
  switch (comm.kind) {
    case ActionKind::kSendF:
      return {link.next_rank, positions.At(positions.recv_f, s + 1, mb)};
    case ActionKind::kSendB:
      return {link.prev_rank, positions.At(positions.recv_b, s - 1, mb)};
    case ActionKind::kRecvF:
      return {link.prev_rank, positions.At(positions.send_f, s - 1, mb)};
    default:  // kRecvB
      return {link.next_rank, positions.At(positions.send_b, s + 1, mb)};
  }
}

// For a WAIT_SEND_F / WAIT_SEND_B: the index of the SEND it waits for in its
// own rank's program. REQUIRES: as Partner.
inline int32_t WaitedSend(const CommPositions& positions, const Action& wait) {
  return positions.At(wait.kind == ActionKind::kWaitSendF ? positions.send_f : positions.send_b,
                      wait.stage, wait.microbatch);
}

// For a WAIT_SEND_F / WAIT_SEND_B: the RECV on the peer that the waited
// SEND's transfer needs (the transfer completes once both are posted).
// REQUIRES: as Partner.
inline Endpoint WaitedRecv(const CommPositions& positions, const Action& wait) {
  return Partner(positions, Action::Make(WaitedSendKind(wait.kind), wait.stage, wait.microbatch));
}

// For a compute part (F, B, I, W): the SEND on another rank whose data it
// consumes through a RECV earlier in its own program; nullopt when it needs
// none (W, a chain's end, a co-located neighbour). REQUIRES: as Partner.
inline std::optional<Endpoint> AwaitedSend(const CommPositions& positions, const Action& part) {
  const int s = part.stage;
  const StageLink& link = positions.stages[s];
  switch (part.kind) {
    case ActionKind::kForward:
      if (link.prev_rank == kAbsent || link.prev_rank == link.rank) return std::nullopt;
      return Endpoint{link.prev_rank, positions.At(positions.send_f, s - 1, part.microbatch)};
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      if (link.next_rank == kAbsent || link.next_rank == link.rank) return std::nullopt;
      return Endpoint{link.next_rank, positions.At(positions.send_b, s + 1, part.microbatch)};
    default:
      return std::nullopt;
  }
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_COMM_MATCHING_H_
