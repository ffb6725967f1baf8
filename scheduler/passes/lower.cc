#include "scheduler/passes/lower.h"

#include <string>
#include <utility>

#include "base/status_macros.h"
#include "scheduler/passes/add_reduce_grad.h"
#include "scheduler/passes/add_unshard_reshard.h"
#include "scheduler/passes/lower_send_recv_early.h"
#include "scheduler/passes/merge_backward.h"
#include "scheduler/passes/overlap_reduce.h"
#include "scheduler/passes/pass_utils.h"
#include "scheduler/passes/place_recvs_just_in_time.h"
#include "scheduler/passes/split_backward.h"
#include "scheduler/passes/validate.h"
#include "scheduler/passes/validate_structure.h"

namespace jitpipe {
namespace {

// What holds after every lowering pass: the structure is valid; once sends
// and receives exist they match and cannot deadlock, even under rendezvous
// semantics (a pass between add_unshard_reshard and lower_send_recv_early
// holds lowered programs without them, which Validate() would refuse).
absl::Status CheckLoweringInvariant(const Schedule& s) {
  RETURN_IF_ERROR(ValidateStructure(s));
  if (!HasAnyKind(s, {ActionKind::kSendF, ActionKind::kRecvF, ActionKind::kSendB,
                      ActionKind::kRecvB})) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Validate(s, {.semantics = CommSemantics::kRelaxed}));
  return Validate(s, {.semantics = CommSemantics::kStrict});
}

PassPipeline LoweringPipeline(const LowerOptions& options) {
  PassPipeline pipeline("lower");
  if (options.backward == BackwardForm::kSplit) {
    pipeline.AddPass(std::string(kSplitBackwardPass), SplitBackward);
  } else if (options.backward == BackwardForm::kMerge) {
    pipeline.AddPass(std::string(kMergeBackwardPass), MergeBackward);
  }
  if (options.fsdp) {
    pipeline.AddPass(std::string(kAddUnshardReshardPass),
                     [](const Schedule& s) { return AddUnshardReshard(s); });
  }
  if (options.reduce_grad) pipeline.AddPass(std::string(kAddReduceGradPass), AddReduceGrad);
  pipeline.AddPass(std::string(kLowerSendRecvEarlyPass), LowerSendRecvEarly);
  if (options.recv == RecvPlacement::kJit) {
    pipeline.AddPass(std::string(kPlaceRecvsJustInTimePass), PlaceRecvsJustInTime);
  }
  if (options.overlap) {
    pipeline.AddPass(std::string(kOverlapReducePass),
                     [peak = options.overlap_peak](const Schedule& s) {
                       return OverlapReduce(s, {.rank_peak = peak});
                     });
  }
  pipeline.SetInvariantChecker(CheckLoweringInvariant);
  return pipeline;
}

}  // namespace

std::vector<std::string> LoweringPassNames(const LowerOptions& options) {
  return LoweringPipeline(options).PassNames();
}

absl::StatusOr<LowerResult> LowerWithDump(const Schedule& schedule, const LowerOptions& options) {
  if (schedule.lowered) {
    return absl::FailedPreconditionError(
        "the schedule is already lowered (it holds sends, receives or reductions); lowering "
        "takes a compute-only schedule");
  }
  if (options.overlap && !options.reduce_grad) {
    return absl::InvalidArgumentError("overlap needs reduce_grad (there is nothing to overlap)");
  }
  RETURN_IF_ERROR(ValidateStructure(schedule));
  ASSIGN_OR_RETURN(PipelineResult result,
                   LoweringPipeline(options).Run(
                       schedule, {.check_invariants = options.check_invariants,
                                  .dump_after = options.dump_after}));
  return LowerResult{std::move(result.schedule), std::move(result.dumped)};
}

absl::StatusOr<Schedule> Lower(const Schedule& schedule, const LowerOptions& options) {
  ASSIGN_OR_RETURN(LowerResult result, LowerWithDump(schedule, options));
  return std::move(result.lowered);
}

}  // namespace jitpipe
