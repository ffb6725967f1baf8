#include "scheduler/analysis/action_error.h"

#include "absl/strings/str_cat.h"

namespace jitpipe {

std::string Where(int rank, size_t index, const Action& action) {
  return WhereInProgram(rank, static_cast<int64_t>(index), action.ToString());
}

absl::Status ActionError(int rank, size_t index, const Action& action, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Where(rank, index, action), ": ", what));
}

absl::Status CheckPartIndices(const Schedule& schedule, int rank, size_t index,
                              const Action& top, const Action& part) {
  if (part.stage < 0 || part.stage >= schedule.num_stages()) {
    return ActionError(rank, index, top,
                       absl::StrCat("stage ", part.stage, " does not exist; the schedule has ",
                                    schedule.num_stages(), " stages"));
  }
  if (schedule.RankOf(part.stage) != rank) {
    return ActionError(rank, index, top,
                       absl::StrCat("stage ", part.stage, " lives on rank ",
                                    schedule.RankOf(part.stage), ", not on this rank"));
  }
  const int mbs = schedule.microbatches_per_chain();
  if (HasMicrobatch(part.kind) && (part.microbatch < 0 || part.microbatch >= mbs)) {
    return ActionError(rank, index, top,
                       absl::StrCat("microbatch ", part.microbatch,
                                    " is out of range; each stage runs ", mbs, " microbatches (0..",
                                    mbs - 1, ")"));
  }
  return absl::OkStatus();
}

absl::string_view PhaseName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "forward";
    case ActionKind::kBackward:
      return "full backward";
    case ActionKind::kBackwardInput:
      return "input backward";
    case ActionKind::kBackwardWeight:
      return "weight backward";
    default:
      return "action";
  }
}

std::string RepeatWhat(const Action& part, int32_t first) {
  std::string subject;
  switch (part.kind) {
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
      subject = absl::StrCat(PhaseName(part.kind), " of stage ", part.stage, " microbatch ",
                             part.microbatch);
      break;
    case ActionKind::kReduceGrad:
      subject = absl::StrCat("gradient reduction of stage ", part.stage);
      break;
    case ActionKind::kWaitReduceGrad:
      subject = absl::StrCat("wait for the gradient reduction of stage ", part.stage);
      break;
    default:
      subject = part.ToString();
  }
  return absl::StrCat("a second ", subject, "; the first is at index ", first);
}

std::string ShardOrderWhat(const Action& shard, int32_t open) {
  if (shard.kind == ActionKind::kUnshard && open >= 0) {
    return absl::StrCat("stage ", shard.stage, " is already unsharded (UNSHARD at index ", open,
                        ", no RESHARD since)");
  }
  if (shard.kind == ActionKind::kReshard && open < 0) {
    return absl::StrCat("stage ", shard.stage, " is not unsharded (no UNSHARD before it)");
  }
  return "";
}

}  // namespace jitpipe
