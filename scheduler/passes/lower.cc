#include "scheduler/passes/lower.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/passes/add_reduce_grad.h"
#include "scheduler/passes/add_unshard_reshard.h"
#include "scheduler/passes/add_wait_send.h"
#include "scheduler/passes/add_wait_send_budget.h"
#include "scheduler/passes/defer_reduce_wait.h"
#include "scheduler/passes/lower_send_recv_early.h"
#include "scheduler/passes/merge_backward.h"
#include "scheduler/passes/overlap_reduce.h"
#include "scheduler/analysis/pass_utils.h"
#include "scheduler/passes/place_recvs_jit_rendezvous.h"
#include "scheduler/passes/place_recvs_just_in_time.h"
#include "scheduler/passes/split_backward.h"
#include "scheduler/analysis/validate.h"
#include "scheduler/analysis/validate_structure.h"

namespace jitpipe {
namespace {

// What holds after every lowering pass: the structure is valid; once sends
// and receives exist they match and cannot deadlock under relaxed semantics,
// nor, when `strict_too`, under strict ones (a pass between
// add_unshard_reshard and lower_send_recv_early holds lowered programs
// without them, which Validate() would refuse).
absl::Status CheckLoweringInvariant(const Schedule& s, bool strict_too,
                                    std::optional<CommLayout> comms) {
  RETURN_IF_ERROR(ValidateStructure(s));
  if (!HasAnyKind(s, {ActionKind::kSendF, ActionKind::kRecvF, ActionKind::kSendB,
                      ActionKind::kRecvB})) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Validate(s, {.semantics = CommSemantics::kRelaxed, .comms = comms}));
  if (!strict_too) return absl::OkStatus();
  return Validate(s, {.semantics = CommSemantics::kStrict});
}

// The placement that runs: kJit over FIFO communicators is kJitRendezvous
// (lower.h).
RecvPlacement EffectivePlacement(const LowerOptions& options) {
  if (options.recv == RecvPlacement::kJit && options.comms.has_value()) {
    return RecvPlacement::kJitRendezvous;
  }
  return options.recv;
}

// The placements that are deadlock-free under relaxed semantics only.
bool RelaxedOnly(RecvPlacement recv) {
  return recv == RecvPlacement::kJit || recv == RecvPlacement::kOffset;
}

PassPipeline LoweringPipeline(const LowerOptions& options) {
  const RecvPlacement recv = EffectivePlacement(options);
  PassPipeline pipeline("lower");
  if (options.backward == BackwardForm::kSplit) {
    pipeline.AddPass(std::string(kSplitBackwardPass), SplitBackward);
  } else if (options.backward == BackwardForm::kMerge) {
    pipeline.AddPass(std::string(kMergeBackwardPass), MergeBackward);
  }
  if (options.fsdp) {
    pipeline.AddPass(std::string(kAddUnshardReshardPass),
                     [fsdp = UnshardReshardOptions{options.max_active_stages,
                                                   options.unshard_lookahead}](
                         const Schedule& s) { return AddUnshardReshard(s, fsdp); });
  }
  if (options.reduce_grad) pipeline.AddPass(std::string(kAddReduceGradPass), AddReduceGrad);
  pipeline.AddPass(std::string(kLowerSendRecvEarlyPass), LowerSendRecvEarly);
  if (recv == RecvPlacement::kJit) {
    pipeline.AddInPlacePass(std::string(kPlaceRecvsJustInTimePass), PlaceRecvsJustInTime);
  } else if (recv == RecvPlacement::kJitRendezvous) {
    pipeline.AddPass(std::string(kPlaceRecvsJitRendezvousPass), PlaceRecvsJitRendezvous);
  } else if (recv == RecvPlacement::kOffset) {
    pipeline.AddPass(std::string(kPlaceRecvsAheadPass),
                     [choose = options.recv_offsets](const Schedule& s) -> absl::StatusOr<Schedule> {
                       ASSIGN_OR_RETURN(const RecvOffsets offsets, choose(s));
                       return PlaceRecvsAhead(s, offsets);
                     });
  }
  if (options.overlap) {
    pipeline.AddPass(std::string(kOverlapReducePass),
                     [peak = options.overlap_peak, time = options.overlap_step_time,
                      last = options.overlap_last_backward](const Schedule& s) {
                       return OverlapReduce(
                           s, {.rank_peak = peak, .step_time = time, .last_backward = last});
                     });
  }
  if (options.defer_reduce_wait) {
    pipeline.AddPass(std::string(kDeferReduceWaitPass), DeferReduceWait);
  }
  if (options.wait_send) pipeline.AddPass(std::string(kAddWaitSendPass), AddWaitSend);
  if (options.send_budget > 0) {
    // The walk runs the semantics the placement is safe for.
    const SendBudgetOptions budget{options.send_budget, RelaxedOnly(recv)
                                                            ? WaitModel::kRelaxed
                                                            : WaitModel::kStrict};
    pipeline.AddPass(std::string(kAddWaitSendBudgetPass),
                     [budget](const Schedule& s) { return AddWaitSendBudget(s, budget); });
  }
  // The pure placements are safe under relaxed semantics only (lower.h).
  pipeline.SetInvariantChecker([strict_too = !RelaxedOnly(recv),
                                comms = options.comms](const Schedule& s) {
    return CheckLoweringInvariant(s, strict_too, comms);
  });
  return pipeline;
}

}  // namespace

absl::string_view RecvPlacementName(RecvPlacement recv) {
  switch (recv) {
    case RecvPlacement::kEarly:
      return "early";
    case RecvPlacement::kJit:
      return "jit";
    case RecvPlacement::kJitRendezvous:
      return "jit-rendezvous";
    case RecvPlacement::kOffset:
      return "offset";
  }
  return "?";
}

absl::StatusOr<RecvPlacement> ParseRecvPlacement(absl::string_view name) {
  for (RecvPlacement recv : {RecvPlacement::kEarly, RecvPlacement::kJit,
                             RecvPlacement::kJitRendezvous, RecvPlacement::kOffset}) {
    if (name == RecvPlacementName(recv)) return recv;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown receive placement \"", name, "\"; expected early, jit, jit-rendezvous or offset"));
}

std::vector<std::string> LoweringPassNames(const LowerOptions& options) {
  return LoweringPipeline(options).PassNames();
}

namespace {

// LowerWithDump() over `schedule`, or over `*owned` when it is set (then
// released as soon as the first pass has read it).
absl::StatusOr<LowerResult> LowerOn(const Schedule& schedule, Schedule* owned,
                                    const LowerOptions& options) {
  if (schedule.lowered) {
    return absl::FailedPreconditionError(
        "the schedule is already lowered (it holds sends, receives or reductions); lowering "
        "takes a compute-only schedule");
  }
  if (options.overlap && !options.reduce_grad) {
    return absl::InvalidArgumentError("overlap needs reduce_grad (there is nothing to overlap)");
  }
  if (options.defer_reduce_wait && !options.reduce_grad) {
    return absl::InvalidArgumentError(
        "defer_reduce_wait needs reduce_grad (there is no reduction to wait for)");
  }
  if (!options.fsdp && (options.max_active_stages != kDefaultMaxActiveStages ||
                        options.unshard_lookahead.kind != UnshardLookahead::Kind::kFull)) {
    return absl::InvalidArgumentError(
        "max_active_stages and unshard_lookahead need fsdp (they place UNSHARD and RESHARD)");
  }
  if (options.fsdp) {
    RETURN_IF_ERROR(CheckUnshardReshardOptions(
        {options.max_active_stages, options.unshard_lookahead}, schedule.pp));
  }
  if (options.recv == RecvPlacement::kOffset && options.recv_offsets == nullptr) {
    return absl::InvalidArgumentError(
        "recv offset needs recv_offsets: what chooses each receive's offset (a cost model)");
  }
  if (options.recv == RecvPlacement::kOffset && options.comms.has_value()) {
    return absl::InvalidArgumentError(
        "recv offset is safe under relaxed semantics only, not over FIFO communicators; use "
        "jit (which lowers as jit-rendezvous there) or early");
  }
  if (options.send_budget < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("send_budget must be 0 (none) or at least 1, not ", options.send_budget));
  }
  RETURN_IF_ERROR(ValidateStructure(schedule));
  const PipelineRunOptions run{.check_invariants = options.check_invariants,
                               .dump_after = options.dump_after};
  const PassPipeline pipeline = LoweringPipeline(options);
  ASSIGN_OR_RETURN(PipelineResult result, owned != nullptr
                                              ? pipeline.Run(std::move(*owned), run)
                                              : pipeline.Run(schedule, run));
  if (options.comms.has_value()) {
    // The placement's guarantee, checked: a failure here is a bug.
    if (absl::Status fifo = Validate(result.schedule, {.comms = options.comms}); !fifo.ok()) {
      return absl::InternalError(absl::StrCat("lowered for communicators ",
                                              CommLayoutName(*options.comms), ": ",
                                              fifo.message()));
    }
  }
  return LowerResult{std::move(result.schedule), std::move(result.dumped)};
}

}  // namespace

absl::StatusOr<LowerResult> LowerWithDump(const Schedule& schedule, const LowerOptions& options) {
  return LowerOn(schedule, nullptr, options);
}

absl::StatusOr<LowerResult> LowerWithDump(Schedule&& schedule, const LowerOptions& options) {
  return LowerOn(schedule, &schedule, options);
}

absl::StatusOr<Schedule> Lower(const Schedule& schedule, const LowerOptions& options) {
  ASSIGN_OR_RETURN(LowerResult result, LowerWithDump(schedule, options));
  return std::move(result.lowered);
}

absl::StatusOr<Schedule> Lower(Schedule&& schedule, const LowerOptions& options) {
  ASSIGN_OR_RETURN(LowerResult result, LowerWithDump(std::move(schedule), options));
  return std::move(result.lowered);
}

}  // namespace jitpipe
