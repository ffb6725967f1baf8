// The merge half of OverlapReduce (overlap_reduce.h): on a schedule with
// split backwards (the zero-bubble ones) the rank that ends the step
// finishes with a W, so the stage that completes there streams its gradient
// buckets over one short W and most of its reduction follows the compute.
// PyTorch's runtime runs both backward forms, a full B or I then W, so that
// rank's last I and its W may become one B: the B ends the rank and streams
// the buckets over I + W.
//
// The candidate on a rank whose compute ends "I, then only Ws": the Ws after
// the I move, in order, right before it (before the receives posted for it,
// which stay just in time); the I and its
// own W become one B at the I's place; each moved stage's REDUCE_GRAD then
// follows its last W or B. Rank 0 of interleaved ZB (stage 0 sends no
// gradient, so nothing waits for the B):
//   before: ... 0RECV_B15 0I15 0W15 0REDUCE_GRAD
//   after:  ... 0RECV_B15 0B15 0REDUCE_GRAD
// With Ws of other microbatches after the I:
//   before: 2RECV_B15 2I15 2SEND_B15 5W15 5REDUCE_GRAD 2W14 2W15 2REDUCE_GRAD
//   after:  5W15 5REDUCE_GRAD 2W14 2RECV_B15 2B15 2SEND_B15 2REDUCE_GRAD
// The I's sends now wait for the whole B and the moved Ws, which may delay a
// peer; so the step-time function decides: the merge is kept only if the
// step (makespan) does not get longer, the merged rank ends earlier and its
// peak stays within the limit. Otherwise the split is kept and the decision
// says why.
//
// Rounds: the rank that ends the step last is tried; after a kept merge the
// W hoisting (overlap_hoist.h) runs again and the next latest rank not yet
// tried is (ranks that end together each need their merge). The search stops
// at the first rank that keeps its split (the step ends there, so no other
// merge shortens it) or has no candidate (its
// last compute is not a W, its last I is inside an OVERLAP_F_B or followed
// by other compute, its stage has no REDUCE_GRAD, or an UNSHARD/RESHARD
// lies after that I). If the step is then no shorter than before the first
// merge, every merge is undone: the program changes only where the step
// gets shorter.
//
// Memory: B reads what I and W read, so the stage input, stash and output
// gradient of (stage, microbatch) are freed at the B's end (the liveness
// analysis reads B as both parts), and the moved Ws free theirs earlier;
// the peak check still runs, as a sent input gradient now lives from the
// B's start.
//
// Internal to scheduler/passes; pure and thread-compatible.
#ifndef JITPIPE_SCHEDULER_PASSES_OVERLAP_MERGE_H_
#define JITPIPE_SCHEDULER_PASSES_OVERLAP_MERGE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/overlap_hoist.h"

namespace jitpipe {

// One rank's merge, tried: kept, or the split kept and why.
struct BackwardMergeDecision {
  int rank = 0;
  int stage = 0;       // of the I and W merged (or not)
  int microbatch = 0;
  bool merged = false;
  double makespan_split_us = 0;   // the step with the split
  double makespan_merged_us = 0;  // with the merge (0 when the peak refused it first)
  bool raises_peak = false;       // the merged program's peak is above the rank's limit
  // Merged on its own, but undone: the search ended without a shorter step
  // (another rank ending at the same time kept its split).
  bool undone = false;
  // e.g. "rank 0: 0I15 0W15 merged into 0B15: step 111770.73 us -> 111592.96 us" or
  // "rank 2: 2I15 2W15 kept split: merging lengthens the step from 110415.19 us to
  // 114415.19 us".
  std::string ToString() const;
};

struct BackwardMergeResult {
  Schedule schedule;
  std::vector<BackwardMergeDecision> decisions;  // in the order tried
};

// `peak(schedule, rank)` and `limit[rank]`: the memory check of a candidate.
// Errors: those of the two functions and of HoistWeightGradients.
absl::StatusOr<BackwardMergeResult> MergeLastBackwards(
    Schedule schedule, const StepTimeFunction& step_time,
    const std::function<absl::StatusOr<int64_t>(const Schedule&, int)>& peak,
    const std::vector<int64_t>& limit);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_OVERLAP_MERGE_H_
