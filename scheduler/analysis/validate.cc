#include "scheduler/analysis/validate.h"

#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/comm_fifo.h"
#include "scheduler/execution/deadlock.h"
#include "scheduler/analysis/pair_order.h"
#include "scheduler/analysis/validate_structure.h"
#include "scheduler/execution/wait_rules.h"

namespace jitpipe {
namespace {

constexpr absl::string_view kFifoPairOrderRule =
    "on NCCL communicators a pair of ranks' sends and receives match in posting order";

WaitModel ToWaitModel(CommSemantics semantics) {
  return semantics == CommSemantics::kStrict ? WaitModel::kStrict : WaitModel::kRelaxed;
}

}  // namespace

absl::Status Validate(const Schedule& schedule, const ValidateOptions& options) {
  if (!schedule.lowered) return ValidateStructure(schedule);
  return ValidateLowered(schedule, options).status();
}

absl::StatusOr<CommPositions> ValidateLowered(const Schedule& schedule,
                                              const ValidateOptions& options) {
  RETURN_IF_ERROR(ValidateStructure(schedule));
  ASSIGN_OR_RETURN(CommPositions positions, MatchSendRecv(schedule, options.grid_rows));
  if (options.semantics == CommSemantics::kStrict) {
    RETURN_IF_ERROR(CheckPairOrder(schedule, positions, options.grid_rows));
  }
  RETURN_IF_ERROR(CheckDeadlockFree(schedule, positions, ToWaitModel(options.semantics),
                                    options.grid_rows));
  if (!options.comms.has_value()) return positions;
  RETURN_IF_ERROR(CheckPairOrder(schedule, positions, options.grid_rows, kFifoPairOrderRule));
  RETURN_IF_ERROR(CheckFifoDeadlockFree(schedule, positions, *options.comms, options.lazy_comms));
  return positions;
}

}  // namespace jitpipe
