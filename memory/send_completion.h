// When a sent buffer may be counted free: the planner's model of a
// transport's send completion.
//
//   kPost     the send completes when it is posted: the transport copies
//             (the in-process backend stages the bytes) or sends eagerly.
//             A sent buffer is planned live through its SEND only.
//   kReceive  rendezvous: the send completes only once the matching RECV
//             has been posted on the peer (MPI's large messages, NCCL).
//             The sender cannot know when that is, so the planner holds
//             the buffer until the first action of the sending rank that
//             the program's happens-before order puts after the peer's
//             RECV: the bound on what the runtime holds, whatever the
//             timing.
//
// Happens-before is the relaxed semantics' (scheduler/execution/
// wait_rules.h, what the deadlock proof runs): program order, a SEND run
// before each compute that consumes its transfer, and the peer's RECV run
// before a WAIT_SEND of the transfer. An action X "comes after" the peer's
// RECV at j when a path of those edges leads from (peer, j) into X: j has
// finished before X starts, in every execution.
//
//   rank 0: 0F0 0SEND_F0 1RECV_B0 1B0 ...      rank 1: 1RECV_F0 1F0 1SEND_B0 ...
//   0SEND_F0 (index 1) is received by 1RECV_F0 (rank 1, index 0); the first
//   rank-0 action after it is 1B0 (index 3, through 1SEND_B0 -> 1B0), so
//   under kReceive the output of 0F0 is live over [0, 3], under kPost [0, 1].
//
// A SEND with no such action before the step's end is held to the step's
// end (the step waits for every transfer there). A bound never ends before
// the SEND itself. Pure; the order is built once and read by many threads.
#ifndef JITPIPE_MEMORY_SEND_COMPLETION_H_
#define JITPIPE_MEMORY_SEND_COMPLETION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/buffer_lifetimes.h"
#include "scheduler/analysis/program_index.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

enum class SendCompletionModel : uint8_t { kPost, kReceive };

// "post", "receive". Parse errors: InvalidArgument
//   --send-completion must be post or receive, not "x"
absl::string_view SendCompletionModelName(SendCompletionModel model);
absl::StatusOr<SendCompletionModel> ParseSendCompletionModel(absl::string_view name);

// The happens-before order of a lowered program, as one topological order
// of its (rank, index) actions. Thread-compatible; const methods may run on
// many threads.
class HappensBefore {
 public:
  // Builds the order over `index` = ProgramIndex::Build(schedule) (every
  // rank indexed). Errors: FailedPrecondition for a compute-only schedule;
  // InvalidArgument naming rank, index and action for a consumer or
  // WAIT_SEND whose partner is missing, or when no action can run (the
  // program deadlocks under relaxed semantics; Validate() names the cycle).
  static absl::StatusOr<HappensBefore> Build(const Schedule& schedule, const ProgramIndex& index);

  // For each action of `rank`'s program: kAbsent, or for a SEND the last
  // index during which kReceive holds its buffer (see the file comment):
  // at least the SEND's own index, at most the program's last.
  // REQUIRES: 0 <= rank < pp of the schedule it was built from.
  std::vector<int32_t> SendHolds(int rank) const;

 private:
  HappensBefore(const Schedule& schedule, const ProgramIndex& index)
      : schedule_(&schedule), index_(&index) {}

  // For every action (by global id: rank_start_[rank] + index), the latest
  // index of `peer`'s program that has run before it finishes (kAbsent:
  // none); the peer's own actions hold their index.
  std::vector<int32_t> LatestOf(int peer) const;

  const Schedule* schedule_;   // borrowed: must outlive the order
  const ProgramIndex* index_;  // borrowed: ditto
  std::vector<int32_t> rank_start_;  // global id of each rank's index 0; pp + 1 entries
  std::vector<int32_t> order_;       // global ids, topological
  // The cross-rank predecessors (global ids) of global id g:
  // preds_[pred_offsets_[g] .. pred_offsets_[g + 1]).
  std::vector<int32_t> preds_;
  std::vector<int32_t> pred_offsets_;
};

// `buffers` with every sent buffer released on completion
// (FreeTiming::kAfterSend) held through holds[send_index] (SendHolds of its
// rank) instead of its SEND: free_index moves, send_index stays. Buffers
// freed otherwise (after a WAIT_SEND, at step end) are unchanged.
// REQUIRES: holds.size() == buffers.num_actions, a hold at every such SEND.
RankBuffers HoldSentBuffers(RankBuffers buffers, const std::vector<int32_t>& holds);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_SEND_COMPLETION_H_
