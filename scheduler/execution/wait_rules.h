// Who waits for what when a lowered program runs: the execution semantics,
// in one place. The rank cursor (rank_cursor.h) asks ActionWaits() before
// each action, and every driver of a cursor -- the deadlock check, the
// lock-step replay, the simulator, the rank executor over a real transport
// -- only decides how to wait.
//
// A rank runs its program in order; its program counter pc is the number of
// actions it has run (the index of the action it is at, or the program's
// length once it finished). A wait {rank, index, threshold} holds in
// program order once that rank's pc >= threshold, i.e. once it has reached
// (threshold == index) or run (threshold == index + 1) the action at
// `index`. Conditions only ever become true, so the final state (who
// finished, who is stuck where) does not depend on the order in which ranks
// are run.
//
//   model          SEND waits for           RECV waits for       F/I/B wait for
//   kRelaxed       nothing                  nothing              the SEND of each RECV
//                                                                it consumes, run
//   kStrict        its RECV, reached        its SEND, reached    as kRelaxed
//   kBlockingRecv  nothing                  its SEND, run        nothing more
//
// and under every model a compute waits for the UNSHARD of its stage that
// came last before it on its rank (an asynchronous all-gather, complete when
// the rank's own gather stream says so; in program order it always holds).
//
// PyTorch main's explicit waits wait under every model for what they name:
//
//   action               waits for (kind)              holds in program order once
//   sWAIT_SEND_Fm        this rank's sSEND_Fm's        the peer has run
//                        transfer completed            (s+1)RECV_Fm
//                        (kSendDone)
//   sWAIT_SEND_Bm        the same for sSEND_Bm         the peer has run (s-1)RECV_Bm
//   sWAIT_REDUCE_GRAD    this rank's sREDUCE_GRAD's    always (this rank ran it)
//                        reduction completed
//                        (kReduction)
//
// A transfer completes once both its SEND and its RECV are posted (the
// relaxed rule; under kStrict the SEND already waited for its RECV to be
// reached, the RECV for its SEND), so a WAIT_SEND's condition is its RECV
// run; the buffer sent may be freed once the wait is over (memory_events.h).
//
// kRelaxed is PyTorch's runtime and jitpipe's transports (isend/irecv
// matched by tag; the compute waits on the receive), kStrict an ordered
// rendezvous transport (MPI_Ssend, one NCCL stream), whose per-pair order
// rule Validate() checks before these waits apply (pair_order.h),
// kBlockingRecv PyTorch's lock-step dry run _simulate_comms_compute. The
// partner of a SEND or RECV is always the one of the same identity
// (MatchSendRecv). W, RESHARD and REDUCE_GRAD never wait (data-parallel
// collectives are symmetric across replicas and do not involve pipeline
// peers); the step's end waits for everything still in flight that no WAIT
// waited for.
#ifndef JITPIPE_SCHEDULER_EXECUTION_WAIT_RULES_H_
#define JITPIPE_SCHEDULER_EXECUTION_WAIT_RULES_H_

#include <array>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/strings/string_view.h"
#include "scheduler/analysis/comm_matching.h"

namespace jitpipe {

enum class WaitModel { kRelaxed, kStrict, kBlockingRecv };

// "relaxed semantics", "strict rendezvous semantics", ...
absl::string_view WaitModelName(WaitModel model);

enum class WaitKind : uint8_t {
  // A compute's input from another rank: the peer's SEND run (posted), the
  // transfer into this rank's RECV at `local` complete.
  kTransfer,
  // A SEND or RECV waiting for its partner (kStrict: reached; kBlockingRecv:
  // the SEND run); `local` is the waiting action itself.
  kPartner,
  // This rank's own asynchronous UNSHARD at `local`, complete.
  kLocal,
  // A WAIT_SEND_F / WAIT_SEND_B: the transfer of this rank's SEND at
  // `local` complete; {rank, index} is the peer's RECV, which must have run.
  kSendDone,
  // A WAIT_REDUCE_GRAD: this rank's own REDUCE_GRAD at `local`, complete.
  kReduction,
};

struct Wait {
  WaitKind kind = WaitKind::kTransfer;
  int rank = 0;           // the rank waited for (this rank for kLocal)
  int32_t index = 0;      // the action waited for, in that rank's program
  int32_t threshold = 0;  // holds in program order once pc(rank) >= threshold
  int32_t local = kAbsent;  // the action on the waiting rank the wait is for
};

// At most: two compute parts (OVERLAP_F_B), each with a transfer and an
// UNSHARD to wait for.
inline constexpr int kMaxWaits = 4;

struct ActionWaitList {
  std::array<Wait, kMaxWaits> waits;
  int count = 0;
  void Add(const Wait& w) { waits[count++] = w; }
};

// The waits of one compute part (F, I, W or B) of rank `rank`: its stage's
// last UNSHARD, and the transfer of its input from another rank. Written
// without helpers: the deadlock check runs it for millions of actions.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void AddPartWaits(const CommPositions& positions, WaitModel model, int rank,
                         const Action& part, const std::vector<int32_t>& last_unshard,
                         ActionWaitList& out) {
  if (!last_unshard.empty() && last_unshard[part.stage] != kAbsent) {
    const int32_t u = last_unshard[part.stage];
    out.Add({WaitKind::kLocal, rank, u, u + 1, u});
  }
  if (model == WaitModel::kBlockingRecv) return;
  const StageLink& link = positions.stages[part.stage];
  const size_t key = static_cast<size_t>(part.stage) * positions.microbatches + part.microbatch;
  int32_t peer, send, recv;
  switch (part.kind) {
    case ActionKind::kForward:
      if (link.prev_rank == kAbsent || link.prev_rank == link.rank) return;
      peer = link.prev_rank;
      send = positions.send_f[key - positions.microbatches];
      recv = positions.recv_f[key];
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      if (link.next_rank == kAbsent || link.next_rank == link.rank) return;
      peer = link.next_rank;
      send = positions.send_b[key + positions.microbatches];
      recv = positions.recv_b[key];
      break;
    default:  // W consumes nothing from other ranks
      return;
  }
  out.Add({WaitKind::kTransfer, peer, send, send + 1, recv});
}

// The waits of `action`, at `index` of `rank`'s program, under `model`.
// `last_unshard[s]` is the index of the last UNSHARD of stage s run before
// `index` on this rank (kAbsent if none; an empty vector when the program
// has run none). REQUIRES: the action is in the program of the schedule
// that `positions` = MatchSendRecv(schedule) matched.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void ActionWaits(const CommPositions& positions, WaitModel model, int rank, int32_t index,
                        const Action& action, const std::vector<int32_t>& last_unshard,
                        ActionWaitList& out) {
  out.count = 0;
  switch (action.kind) {
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
      AddPartWaits(positions, model, rank, action, last_unshard, out);
      return;
    case ActionKind::kOverlapFB:
      for (const Action& part : action.sub_actions) {
        AddPartWaits(positions, model, rank, part, last_unshard, out);
      }
      return;
    case ActionKind::kSendF:
    case ActionKind::kSendB:
      if (model != WaitModel::kStrict) return;
      break;
    case ActionKind::kRecvF:
    case ActionKind::kRecvB:
      if (model == WaitModel::kRelaxed) return;
      break;
    case ActionKind::kWaitSendF:
    case ActionKind::kWaitSendB: {
      const Endpoint recv = WaitedRecv(positions, action);
      out.Add({WaitKind::kSendDone, recv.rank, recv.index, recv.index + 1,
               WaitedSend(positions, action)});
      return;
    }
    case ActionKind::kWaitReduceGrad: {
      const int32_t reduce = positions.reduce_grad[action.stage];
      out.Add({WaitKind::kReduction, rank, reduce, reduce + 1, reduce});
      return;
    }
    default:  // UNSHARD, RESHARD, REDUCE_GRAD
      return;
  }
  // A SEND or RECV that waits for its partner.
  const Endpoint peer = Partner(positions, action);
  const int32_t past = model == WaitModel::kBlockingRecv ? 1 : 0;
  out.Add({WaitKind::kPartner, peer.rank, peer.index, peer.index + past, index});
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_WAIT_RULES_H_
