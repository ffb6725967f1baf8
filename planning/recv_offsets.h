// Choosing each receive's offset for `--recv offset` (place_recvs_ahead.h):
// post a receive k compute actions ahead of its consumer, with k the
// smallest whose lead time hides the transfer, as long as the rank's
// planned memory stays within a cap.
//
// Per rank, receives in program order of the just-in-time program (the one
// all k = 0 gives), for each receive whose transfer takes time:
//   transfer  = p2p.latency_us + bytes / p2p bandwidth (Link::TransferUs;
//               the sender stage's output bytes for RECV_F, input bytes for
//               RECV_B: what the simulator moves);
//   lead(k)   = the compute times (Model::ComputeUs) of the k compute
//               actions before its consumer on this rank;
//   k grows from 0 while lead(k) < transfer, while the receive can still
//   move (never earlier than LowerSendRecvEarly posts it: reaching that
//   position is k = kRecvAheadAll) and while its buffer, live from the new
//   position on, keeps every action's planned live bytes within the cap.
// The live bytes are the jit memory plan's (buffer_lifetimes.h, prefetch 0)
// of the just-in-time program plus the receive buffers already moved
// earlier: moving a RECV changes only its own buffer's allocation (sends,
// frees and every other buffer stay), so the chosen program's jit peak is
// max(the just-in-time peak, at most the cap) exactly.
//
// Why the smallest k: the simulator starts a transfer once both ends are
// posted and the consumer waits for it; posting k computes ahead gives the
// transfer those computes' time (when the send is already posted), and any
// earlier holds the buffer for nothing.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_RECV_OFFSETS_H_
#define JITPIPE_PLANNING_RECV_OFFSETS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "planning/rank_memory.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/lower.h"
#include "scheduler/passes/place_recvs_ahead.h"

namespace jitpipe {

inline constexpr int64_t kNoRecvCap = std::numeric_limits<int64_t>::max();

// Offsets for every receive of `early` (LowerSendRecvEarly's output, or any
// lowered program: its positions are the earliest allowed), fallback 0.
// `caps[r]` bounds rank r's planned live bytes (kNoRecvCap: none; empty:
// none on any rank). Errors: InvalidArgument when caps is neither empty
// nor one per rank, or a cap is negative; those of PlaceRecvsJustInTime
// and ComputeBufferLifetimes for a program they refuse.
absl::StatusOr<RecvOffsets> ChooseRecvOffsets(const Schedule& early, const Model& model,
                                              const std::vector<int64_t>& caps);

// The caps that keep RankMemory::fits: per rank, its usable limit less its
// parameters and optimizer state (what it holds besides the planned
// buffers, rank_memory.h), 0 when that leaves nothing; kNoRecvCap for a
// rank without a limit.
std::vector<int64_t> PlannedBytesCaps(const Schedule& lowered, const Model& model,
                                      const TrainingMemory& training);

// LowerOptions::recv_offsets under `model` and `training`'s limits:
// ChooseRecvOffsets with PlannedBytesCaps. Keeps copies of both.
RecvOffsetFunction RecvOffsetChooser(const Model& model, const TrainingMemory& training);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_RECV_OFFSETS_H_
