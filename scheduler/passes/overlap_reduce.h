// OverlapReduce: lets gradient reduction hide under the compute that follows
// it. A stage's REDUCE_GRAD can start only once its last W (or B) has run;
// the reduction then runs on the rank's reduction stream beside the rank's
// remaining compute and is waited for at the end of the step (the simulator
// and the runtimes do that wait). Two changes bring it forward:
//
//   1. W actions of different stages on one rank are independent, so the
//      pass reorders them: at each position that holds a W, it takes the
//      next W of the stage that completes its gradients first in the input
//      (the stage whose reduction can hide under the most compute), as long
//      as that W's I has already run. Per stage the Ws keep their order; F,
//      I, B, OVERLAP_F_B, sends, receives and stage-wide actions keep their
//      positions, so communication and deadlock freedom are unchanged.
//   2. Each stage's REDUCE_GRAD is issued right after its last W or B (and
//      the sends and receives posted right after that action).
//
// One rank holding stages 0 and 3 (two microbatches; sends omitted):
//   before: 3I0 3I1 0I0 3W0 0W0 0I1 3W1 3REDUCE_GRAD 0W1 0REDUCE_GRAD
//   after:  3I0 3I1 0I0 3W0 3W1 3REDUCE_GRAD 0I1 0W0 0W1 0REDUCE_GRAD
// Stage 3's reduction now runs beside 0I1 0W0 0W1.
//
// Within the memory plan's limits: a W moved later keeps its buffers alive
// longer, so each rank's reordered program is kept only if its peak does not
// rise; otherwise the pass keeps the input's Ws on a prefix of the W
// positions, as short as the peak allows (bisection), and reorders the rest.
// A stage's W never moves ahead of the stage's first W or B (where its
// parameter gradients are allocated) and never across an UNSHARD or RESHARD.
//
// The pass changes nothing on a rank with one stage or whose stages' Ws are
// already in this order, except moving a REDUCE_GRAD that came later up to
// its stage's last W or B. Stages without a REDUCE_GRAD get none.
//
// 3. With a step-time function (a simulator; stages/predict.h gives one),
//    Ws move earlier on the rank that ends the step last, one swap with the
//    compute action before them at a time, while the step gets shorter and
//    the peak stays within the limit (overlap_hoist.h). This is what hides
//    reductions on schedules whose Ws are already in completion order (the
//    zero-bubble ones) where the remaining compute can hide them.
//
// 4. Also with a step-time function, and unless options.last_backward is
//    kKeepSplit: the rank that ends the step last may merge its last I and
//    W into one full B that ends the rank, so that the stage completing
//    there streams its buckets over I + W instead of one W
//    (overlap_merge.h). A merge is kept only if the step does not get
//    longer and that rank ends earlier; the result says, per rank tried,
//    whether it merged or kept the split and why.
//
// The least exposed reduction any such order can reach is bounded below by
// the rank that finishes its compute last: its last compute action is a W
// or B, which completes some stage s's gradients; with k buckets of b =
// R_s / k, that stage's buckets stream during that action of duration d, so
// at least max(b, R_s - d (k - 1) / k) of its reduction follows the compute
// (planning/reduction_floor.h computes it; `simulate --compare-overlap`
// prints it).
//
// Pure; thread-compatible. O(actions x stages per rank), plus the peak
// function's cost for each rank that changes (and ~log2(Ws) more calls for
// a rank whose reordered peak rises).
#ifndef JITPIPE_SCHEDULER_PASSES_OVERLAP_REDUCE_H_
#define JITPIPE_SCHEDULER_PASSES_OVERLAP_REDUCE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/schedule.h"
#include "scheduler/passes/overlap_hoist.h"
#include "scheduler/passes/overlap_merge.h"

namespace jitpipe {

inline constexpr absl::string_view kOverlapReducePass = "overlap_reduce";

// The peak memory of rank `rank`'s program in `schedule` (a lowered
// schedule) under the caller's memory plan, in any unit. The schedule passed
// is a probe that lives only for the call.
using RankPeakFunction = std::function<absl::StatusOr<int64_t>(const Schedule& schedule, int rank)>;

// Whether step 4 above may merge a rank's last I and W into a B.
enum class LastBackward {
  kMergeWhereShorter,  // merge where the simulated step does not get longer
  kKeepSplit,          // never merge
};

struct OverlapReduceOptions {
  // The memory limit. Unset: ActivationUnitPeak, which needs no model.
  RankPeakFunction rank_peak = nullptr;
  // The step's time (3. and 4. above). Unset: both are skipped.
  StepTimeFunction step_time = nullptr;
  LastBackward last_backward = LastBackward::kMergeWhereShorter;
};

struct OverlapReduceResult {
  Schedule schedule;
  // Step 4's decisions, in the order the ranks were tried; empty without a
  // step-time function, with kKeepSplit, or when the latest rank does not
  // end with "I, then only Ws".
  std::vector<BackwardMergeDecision> merges;
};

// Returns the schedule with Ws reordered and REDUCE_GRADs moved as above.
// Errors: FailedPrecondition for a compute-only schedule or one without any
// REDUCE_GRAD ("lower with reduce_grad first"); InvalidArgument naming rank,
// index and action for a bad stage or microbatch, a REDUCE_GRAD repeated
// for a stage, or a W whose I is not before it; the peak and step-time
// functions' errors.
absl::StatusOr<Schedule> OverlapReduce(const Schedule& in, const OverlapReduceOptions& options = {});
// The same, with step 4's decisions.
absl::StatusOr<OverlapReduceResult> OverlapReduceWithReport(
    const Schedule& in, const OverlapReduceOptions& options = {});

// A model-free memory measure: the peak number of (stage, microbatch)
// activations live on the rank, each from its F to its last backward part (W,
// or B, or an I without a W), the unit the zero-bubble schedules' memory
// limits are stated in. REQUIRES: `schedule` passes CheckIndices().
int64_t ActivationUnitPeak(const Schedule& schedule, int rank);

}  // namespace jitpipe

#endif  // JITPIPE_SCHEDULER_PASSES_OVERLAP_REDUCE_H_
