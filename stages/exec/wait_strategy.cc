#include "stages/exec/wait_strategy.h"

#include "base/status_macros.h"

namespace jitpipe {

std::unique_ptr<RankExecutor::WaitStrategy> RankExecutor::WaitStrategy::For(
    RankExecutor& executor) {
  if (executor.transport_->device_streams() != nullptr) {
    return std::make_unique<StreamOrderedWait>(executor);
  }
  return std::make_unique<HostBlockingWait>(executor);
}

// The end of the step, in order: the compute stream's work (device), every
// pending send and receive completed, then every reduction (the exposed
// part measured), then FinishStep (FinishStep per stage with its reduced
// gradients, the step-end buffers released).
absl::StatusOr<bool> RankExecutor::WaitStrategy::EndStep() {
  ASSIGN_OR_RETURN(bool computed, ComputeDone());
  if (!computed) return false;
  ASSIGN_OR_RETURN(bool transferred, x_.TransfersDone());
  if (!transferred) return false;
  if (x_.result_.compute_end_us == 0) x_.result_.compute_end_us = x_.NowUs();
  ASSIGN_OR_RETURN(bool reduced, ReductionsDone());
  if (!reduced) return false;
  RETURN_IF_ERROR(x_.FinishStep());
  return true;
}

}  // namespace jitpipe
