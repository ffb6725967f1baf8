#include "scheduler/passes/validate.h"

#include "base/status_macros.h"
#include "scheduler/analysis/comm_matching.h"
#include "scheduler/execution/deadlock.h"
#include "scheduler/passes/pair_order.h"
#include "scheduler/passes/validate_structure.h"
#include "scheduler/execution/wait_rules.h"

namespace jitpipe {
namespace {

WaitModel ToWaitModel(CommSemantics semantics) {
  return semantics == CommSemantics::kStrict ? WaitModel::kStrict : WaitModel::kRelaxed;
}

}  // namespace

absl::Status Validate(const Schedule& schedule, const ValidateOptions& options) {
  RETURN_IF_ERROR(ValidateStructure(schedule));
  if (!schedule.lowered) return absl::OkStatus();
  ASSIGN_OR_RETURN(const CommPositions positions, MatchSendRecv(schedule, options.grid_rows));
  if (options.semantics == CommSemantics::kStrict) {
    RETURN_IF_ERROR(CheckPairOrder(schedule, positions, options.grid_rows));
  }
  return CheckDeadlockFree(schedule, positions, ToWaitModel(options.semantics),
                           options.grid_rows);
}

}  // namespace jitpipe
