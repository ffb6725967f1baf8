// The per-pair order rule of strict semantics (validate.h): an ordered
// transport (one NCCL stream, MPI without distinct tags) matches the
// transfers between two ranks in posting order, so the k-th SEND from rank
// src to rank dst must be the partner of the k-th RECV on dst from src.
//
// Relaxed semantics do not need it: jitpipe's transports match by tag
// (stage, microbatch, kind), so a RECV may be posted before or after other
// RECVs from the same peer. MatchSendRecv (comm_matching.h) therefore matches
// by identity only, and Validate() runs this check only under strict
// semantics, before the deadlock check.
//
// Example, pp 2: rank 0 sends F0 then F1, rank 1 receives F1 first:
//   rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
//   rank 1: 1RECV_F1 1RECV_F0 1F0 1F1 1B0 1SEND_B0 1B1 1SEND_B1
// is fine under relaxed semantics; under strict ones it is
//   rank 1, index 0 (1RECV_F1): out of order with rank 0: rank 0 sends
//   0SEND_F0 (index 1) before 0SEND_F1 (index 3), but this rank receives
//   1RECV_F1 before 1RECV_F0 (index 1); under strict rendezvous semantics
//   sends and receives between two ranks match in posting order
// (one line).
#ifndef JITPIPE_SCHEDULER_ANALYSIS_PAIR_ORDER_H_
#define JITPIPE_SCHEDULER_ANALYSIS_PAIR_ORDER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/analysis/comm_matching.h"

namespace jitpipe {

// OK when, for every ordered pair of ranks, the RECVs come in the order of
// their SENDs. Otherwise InvalidArgument for the first RECV, in (receiving
// rank, index) order, that breaks it (the message above), with the step x
// rank grid around it attached when grid_rows > 0 (grid_report.h).
// O(transfers): it walks the index's per-rank SEND and RECV lists.
// REQUIRES: positions = MatchSendRecv(schedule).
// `rule` ends the message: why posting order matters.
inline constexpr absl::string_view kStrictPairOrderRule =
    "under strict rendezvous semantics sends and receives between two ranks match in posting "
    "order";
absl::Status CheckPairOrder(const Schedule& schedule, const CommPositions& positions,
                            int grid_rows = 0, absl::string_view rule = kStrictPairOrderRule);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_ANALYSIS_PAIR_ORDER_H_
