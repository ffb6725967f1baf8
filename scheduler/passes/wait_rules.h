// Who waits for what when a lowered program runs: the execution semantics,
// in one place, for the deadlock detector (deadlock.h) and the lock-step
// replay (lock_step.h).
//
// A rank runs its program in order; rank r's program counter pc[r] is the
// index of the action it is at (its program's length once it finished).
// An action may start once every one of its waits holds; a wait
// {rank, index, threshold} holds once pc[rank] >= threshold, i.e. once that
// rank has reached (threshold == index) or run past (threshold == index + 1)
// the action at `index`. Conditions only ever become true, so the final
// state (who finished, who is stuck where) does not depend on the order in
// which ranks are run.
//
//   model          SEND waits for           RECV waits for       F/I/B wait for
//   kRelaxed       nothing                  nothing              the SEND of each RECV
//                                                                it consumes, run
//   kStrict        its RECV, reached        its SEND, reached    as kRelaxed
//   kBlockingRecv  nothing                  its SEND, run        nothing more
//
// kRelaxed is PyTorch's runtime and jitpipe's transports (isend/irecv
// matched by tag; the compute waits on the receive), kStrict an ordered
// rendezvous transport (MPI_Ssend, one NCCL stream), whose per-pair order
// rule Validate() checks before these waits apply (pair_order.h),
// kBlockingRecv PyTorch's lock-step dry run _simulate_comms_compute. The
// partner of a SEND or RECV is always the one of the same identity
// (MatchSendRecv).
// W, UNSHARD, RESHARD and REDUCE_GRAD never wait (data-parallel collectives
// are symmetric across replicas and do not involve pipeline peers).
#ifndef JITPIPE_SCHEDULER_PASSES_WAIT_RULES_H_
#define JITPIPE_SCHEDULER_PASSES_WAIT_RULES_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "scheduler/passes/comm_matching.h"
#include "scheduler/passes/validate.h"

namespace jitpipe {

enum class WaitModel { kRelaxed, kStrict, kBlockingRecv };

WaitModel ToWaitModel(CommSemantics semantics);

// "relaxed semantics", "strict rendezvous semantics", ...
absl::string_view WaitModelName(WaitModel model);

struct Wait {
  int rank = 0;           // the rank waited for
  int32_t index = 0;      // the action waited for, in that rank's program
  int32_t threshold = 0;  // holds once pc[rank] >= threshold
};

// Calls fn(const Wait&) for each wait of `action` under `model`.
// REQUIRES: `action` is in the program of the schedule that `positions` =
// MatchSendRecv(schedule) matched.
template <typename Fn>
void ForEachWait(const CommPositions& positions, WaitModel model, const Action& action,
                 Fn&& fn) {
  if (IsTransfer(action.kind)) {
    if (model == WaitModel::kRelaxed) return;
    if (model == WaitModel::kBlockingRecv &&
        (action.kind == ActionKind::kSendF || action.kind == ActionKind::kSendB)) {
      return;
    }
    const Endpoint peer = Partner(positions, action);
    const int32_t past = model == WaitModel::kBlockingRecv ? 1 : 0;
    fn(Wait{peer.rank, peer.index, peer.index + past});
    return;
  }
  if (model == WaitModel::kBlockingRecv) return;
  ForEachComputePartFast(action, [&](const Action& part) {
    if (auto send = AwaitedSend(positions, part)) {
      fn(Wait{send->rank, send->index, send->index + 1});
    }
  });
}

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_WAIT_RULES_H_
