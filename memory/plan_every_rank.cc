#include "memory/plan_every_rank.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "base/parallel_for.h"
#include "base/status_macros.h"

namespace jitpipe {

absl::StatusOr<RankPlanSummary> PlanAndSummarizeRank(const SharedRankInputs& inputs,
                                                     const Model& model, int rank,
                                                     const PlanOptions& options,
                                                     RankMemoryPlan& plan) {
  ASSIGN_OR_RETURN(plan, inputs.PlanRank(model, rank, options));
  const bool jit = options.policy == MemoryPolicy::kJit;
  int64_t other_peak = 0;
  if (jit) {
    other_peak = PeakOf(EagerLiveBytes(plan.buffers)).bytes;
  } else {
    PlanOptions other;
    other.arena = false;
    other.policy = MemoryPolicy::kJit;
    other.send_completion = options.send_completion;
    ASSIGN_OR_RETURN(RankMemoryPlan second, inputs.PlanRank(model, rank, other));
    other_peak = second.peak.bytes;
  }
  return RankPlanSummary{.rank = rank,
                         .peak = plan.peak.bytes,
                         .post_peak = plan.post_peak.bytes,
                         .peak_index = plan.peak.index,
                         .peak_action = plan.peak_action,
                         .jit_peak = jit ? plan.peak.bytes : other_peak,
                         .eager_peak = jit ? other_peak : plan.peak.bytes,
                         .lower_bound = plan.lower_bound.bytes,
                         .arena = plan.arena.arena_bytes,
                         .arena_algorithm = plan.arena.algorithm,
                         .buffers = plan.buffers.buffers.size()};
}

absl::Status PlanEveryRank(
    const Schedule& schedule, const Model& model, const PlanOptions& options, int threads,
    absl::FunctionRef<absl::Status(const RankPlanSummary&, RankMemoryPlan&)> visit) {
  // Under --send-completion receive every rank reads the whole program's
  // happens-before order: built once here, not once per rank.
  ASSIGN_OR_RETURN(std::unique_ptr<const SharedRankInputs> inputs,
                   SharedRankInputs::Build(schedule, options.send_completion));
  const int batch = threads > 0 ? threads : DefaultThreads();
  for (int first = 0; first < schedule.pp; first += batch) {
    const int count = std::min(batch, schedule.pp - first);
    std::vector<RankMemoryPlan> plans(count);
    std::vector<absl::StatusOr<RankPlanSummary>> summaries(count, RankPlanSummary{});
    ParallelFor(count, count, [&](int k) {
      summaries[k] = PlanAndSummarizeRank(*inputs, model, first + k, options, plans[k]);
    });
    for (int k = 0; k < count; ++k) {
      if (!summaries[k].ok()) return summaries[k].status();
      RETURN_IF_ERROR(visit(*summaries[k], plans[k]));
    }
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
