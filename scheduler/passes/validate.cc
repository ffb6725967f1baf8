#include "scheduler/passes/validate.h"

#include "base/status_macros.h"
#include "scheduler/passes/comm_matching.h"
#include "scheduler/passes/deadlock.h"
#include "scheduler/passes/pair_order.h"
#include "scheduler/passes/validate_structure.h"
#include "scheduler/passes/wait_rules.h"

namespace jitpipe {

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
