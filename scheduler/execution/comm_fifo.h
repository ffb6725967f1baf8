// Communicator ordering: a lowered program run over NCCL-like communicators,
// whose operations complete in FIFO order, as opposed to the tag-matched
// transports relaxed semantics describes (wait_rules.h).
//
// On a communicator, each rank's sends and receives complete in the order
// the rank posted them, and a send and its receive complete together, once
// each is at the head of its rank's queue on that communicator. Posting
// never blocks (a rank moves on, as under relaxed semantics); what waits is
// a compute that consumes a receive (until that receive completed) and a
// WAIT_SEND (until its send completed). Two layouts (PyTorch's
// pipeline_per_edge_p2p and its default):
//
//   CommLayout::kPerEdge   one communicator per directed pair of ranks
//                          (src -> dst carries src's sends to dst and dst's
//                          receives from src)
//   CommLayout::kPerGroup  one communicator for the whole pipeline group:
//                          every send and receive of a rank in one queue
//
// A shared FIFO can form a cycle that tag matching does not show (pt
// #195760): rank 0 posts 0RECV_B0 then 0SEND_F1, rank 1 posts 1RECV_F1 then
// 1SEND_B0; per edge both transfers complete, on one group communicator
// each receive waits behind a send whose receive waits behind it.
//
// CheckFifoDeadlockFree runs the ranks' cursors (rank_cursor.h, relaxed
// model) with each rank's queues beside them, until everything completed or
// nothing moves; a stuck run is reported like the other deadlock checks
// (deadlock.h): the cycle through the queues, then every other stuck rank,
// e.g. for the example above
//   deadlock under FIFO completion on one communicator for the pipeline
//   group: wait cycle 0 -> 1 -> 0: 0RECV_B0 (rank 0, index 3) waits for its
//   partner 1SEND_B0 (rank 1, index 4), queued on the group communicator
//   behind 1RECV_F1 (index 3); 1RECV_F1 (rank 1, index 3) waits for its
//   partner 0SEND_F1 (rank 0, index 4), queued on the group communicator
//   behind 0RECV_B0 (index 3); stuck: rank 0 at index 5 (0B0) waits for
//   0RECV_B0 (index 3) to complete; rank 1 at index 5 (1F1) waits for
//   1RECV_F1 (index 3) to complete
// (one line). Sends and receives must also match in posting order on each
// communicator (NCCL matches a pair of ranks' operations in order); that
// rule is CheckPairOrder's (pair_order.h), which Validate() runs first.
//
// Lazily created communicators (nccl-lazy, Megatron's 2-rank groups) are
// created at their first use, a collective of their members: with
// `lazy_creation` a rank's first SEND or RECV on a communicator also waits
// until every member has reached its own first use of it. Two ranks that
// first use a pair's two communicators in opposite orders then hang (mg PR
// #5240), reported as a cycle through "creates communicator ...".
// FirstUses() lists that order per rank.
//
// Cost: every instruction and operation once, plus a look at a rank each
// time one of its partners moves.
#ifndef JITPIPE_SCHEDULER_EXECUTION_COMM_FIFO_H_
#define JITPIPE_SCHEDULER_EXECUTION_COMM_FIFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class CommLayout : uint8_t { kPerEdge, kPerGroup };

// "per-edge", "per-group": what `validate --comms` takes.
absl::string_view CommLayoutName(CommLayout layout);
// Errors: InvalidArgument
//   unknown communicator layout "x"; expected per-edge or per-group
absl::StatusOr<CommLayout> ParseCommLayout(absl::string_view name);

// A communicator of a layout: the directed pair src -> dst (kPerEdge), or
// the group (src = dst = -1).
struct Communicator {
  int src = -1;
  int dst = -1;
  // "0->1", or "group".
  std::string ToString() const;
  friend bool operator==(const Communicator&, const Communicator&) = default;
};

// The communicator that carries SEND/RECV `action` of `rank`'s program.
// REQUIRES: as Partner (comm_matching.h).
Communicator CommunicatorOf(const CommPositions& positions, CommLayout layout, int rank,
                            const Action& action);

struct FirstUse {
  Communicator communicator;
  int32_t index = 0;  // the rank's first SEND or RECV on it
};

// Per rank, the communicators it uses in the order of their first use.
// REQUIRES: positions = MatchSendRecv(schedule).
std::vector<std::vector<FirstUse>> FirstUses(const Schedule& schedule,
                                             const CommPositions& positions, CommLayout layout);

// OK when every rank runs to its end and every operation completes; else
// InvalidArgument with the report above. REQUIRES: positions =
// MatchSendRecv(schedule), and CheckPairOrder(schedule, positions) passed
// (every communicator's operations match in posting order).
absl::Status CheckFifoDeadlockFree(const Schedule& schedule, const CommPositions& positions,
                                   CommLayout layout, bool lazy_creation = false);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_EXECUTION_COMM_FIFO_H_
