// Every rank of a program planned, as `jitpipe plan` reports it: each rank
// under the options' policy (with its arena) and the other policy's peak, a
// batch of ranks at a time on the machine's threads, handed to the caller
// in rank order. A batch's plans are dropped once visited, so a program of
// hundreds of ranks holds only a batch of full plans at once.
//
// Thread-compatible; the visitor runs on the calling thread.
#ifndef JITPIPE_MEMORY_PLAN_EVERY_RANK_H_
#define JITPIPE_MEMORY_PLAN_EVERY_RANK_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/memory_plan.h"
#include "scheduler/ir/model.h"
#include "scheduler/ir/schedule.h"

namespace jitpipe {

// One rank's figures: the peak under the plan's policy, both policies'
// peaks, the lower bound and the arena.
struct RankPlanSummary {
  int rank = 0;
  int64_t peak = 0;  // under the plan's policy (and send completion model)
  int64_t post_peak = 0;  // RankMemoryPlan::post_peak: peak had sends completed when posted
  int peak_index = -1;
  std::string peak_action;
  int64_t jit_peak = 0;
  int64_t eager_peak = 0;
  int64_t lower_bound = 0;
  int64_t arena = 0;
  std::string arena_algorithm;
  size_t buffers = 0;
};

// Plans `rank` of the inputs' schedule under `options` into `plan` and
// summarises it. Under jit the eager peak comes from the same buffers
// (EagerLiveBytes); under eager the jit lifetimes need a second pass over
// the program (reading the same shared order). Errors: those of
// SharedRankInputs::PlanRank.
// REQUIRES: `inputs` built for options.send_completion.
absl::StatusOr<RankPlanSummary> PlanAndSummarizeRank(const SharedRankInputs& inputs,
                                                     const Model& model, int rank,
                                                     const PlanOptions& options,
                                                     RankMemoryPlan& plan);

// Plans every rank, `threads` at a time (<= 0: one per hardware thread),
// with the program-wide inputs (SharedRankInputs: under kReceive the
// happens-before order) built once for them all, and calls
// visit(summary, plan) for rank 0, 1, ... in order. Stops at the first
// error: building the order's, a rank's planning error (as PlanRankMemory
// words it, naming the rank) or the visitor's.
absl::Status PlanEveryRank(
    const Schedule& schedule, const Model& model, const PlanOptions& options, int threads,
    absl::FunctionRef<absl::Status(const RankPlanSummary&, RankMemoryPlan&)> visit);

}  // namespace jitpipe

#endif  // JITPIPE_MEMORY_PLAN_EVERY_RANK_H_
