// PlaceRecvsAhead: posts each RECV k compute actions ahead of the compute
// that consumes it, with k chosen per receive (`--recv offset`,
// RecvPlacement::kOffset). k = 0 is PlaceRecvsJustInTime's placement; a k
// past the receive's position in the input leaves it where the input posts
// it, which for LowerSendRecvEarly's output is `--recv early`. Between the
// two, a receive whose transfer takes time can be posted just early enough
// for the compute before its consumer to hide it, and no earlier: its buffer
// is then live for those k computes only (recv_offsets.h in planning/
// chooses the k's with the cost model and a memory cap).
//
// Placement rules, and nothing else:
//   1. A RECV whose consumer is compute c goes before the k-th compute
//      action before c (counting computes of its rank's program: F, I, W,
//      B, OVERLAP_F_B), or at the program's start when fewer precede; never
//      earlier than the input has it, never after its consumer.
//   2. Where several RECVs land before one action: first those with k > 0,
//      in input order; then those with k = 0 (just in time), in its
//      consumer's sub-action order, as PlaceRecvsJustInTime orders them.
//      So all k = 0 is exactly PlaceRecvsJustInTime, and all k past their
//      input positions is exactly the input.
//   3. Every other action keeps its order; SENDs stay where they are.
//
// Relaxed semantics only (validate.h), like PlaceRecvsJustInTime: a RECV
// never waits there, so where it stands changes no wait and the result is
// deadlock-free exactly when the input is. Not for ordered rendezvous
// transports or FIFO communicators (lower.h).
//
// Before (LowerSendRecvEarly of 0F0 0F1 0F2 0B0 0B1 0B2 / 1F0 1B0 1F1 1B1
// 1F2 1B2), k = 1 for 1RECV_F1 and 1RECV_F2, 0 for the rest:
//   rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1RECV_F2 1F1 1B1 1SEND_B1 ...
// After:
//   rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1RECV_F2 1B1 1SEND_B1 ...
// (1RECV_F1 stays before 1B0, one compute ahead of 1F1; 1RECV_F2 moves to
// one compute ahead of 1F2. With k = 0 both would stand right before their
// F, as PlaceRecvsJustInTime puts them.)
//
// Does nothing to a program without RECVs. Pure and thread-compatible; one
// sweep over each rank's actions plus a sort of its ahead-posted RECVs.
#ifndef JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_AHEAD_H_
#define JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_AHEAD_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

inline constexpr absl::string_view kPlaceRecvsAheadPass = "place_recvs_ahead";

// "As early as the input posts it": LowerSendRecvEarly's position.
inline constexpr int kRecvAheadAll = std::numeric_limits<int>::max();

// A receive, by what a transport's tag encodes: RECV_F or RECV_B, stage,
// microbatch.
struct RecvKey {
  ActionKind kind = ActionKind::kRecvF;
  int32_t stage = 0;
  int32_t microbatch = 0;

  static RecvKey Of(const Action& recv) { return {recv.kind, recv.stage, recv.microbatch}; }
  friend bool operator<(const RecvKey& a, const RecvKey& b) {
    return std::tie(a.kind, a.stage, a.microbatch) < std::tie(b.kind, b.stage, b.microbatch);
  }
};

// Per receive, how many compute actions ahead of its consumer it is posted.
struct RecvOffsets {
  int fallback = 0;                // for a receive `ahead` does not list
  std::map<RecvKey, int> ahead = {};  // each >= 0; kRecvAheadAll: as the input posts it

  int For(const Action& recv) const {
    auto it = ahead.find(RecvKey::Of(recv));
    return it == ahead.end() ? fallback : it->second;
  }
  // e.g. "k=0: 12, k=1: 5, k=3: 1" over the listed receives.
  std::string Histogram() const;
};

// Returns the program with its RECVs moved (same actions, lowered = true).
// Errors: InvalidArgument for a negative offset (naming the receive);
// those of MessageIndex::Build, as PlaceRecvsJustInTime words them
// (InvalidArgument for a malformed program, FailedPrecondition for one that
// is not lowered or whose sends and receives do not match one to one).
absl::StatusOr<Schedule> PlaceRecvsAhead(const Schedule& in, const RecvOffsets& offsets);

// What a lowered program's placement is, per receive: the number of compute
// actions between each RECV and its first consumer on its rank (0 for
// `--recv jit`). Errors: those of MessageIndex::Build.
absl::StatusOr<RecvOffsets> RecvLeads(const Schedule& lowered);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_PLACE_RECVS_AHEAD_H_
