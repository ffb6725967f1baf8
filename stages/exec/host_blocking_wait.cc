// HostBlockingWait (wait_strategy.h): the CPU transports' mode. The host
// tests and, in RunStep, blocks for every wait; a REDUCE_GRAD goes to the
// rank's reduction thread, and the time a WAIT_REDUCE_GRAD or the step's
// end spends waiting for it is the exposed reduction.
#include <algorithm>

#include "base/status_macros.h"
#include "stages/exec/wait_strategy.h"

namespace jitpipe {

RankExecutor::HostBlockingWait::HostBlockingWait(RankExecutor& executor)
    : WaitStrategy(executor),
      reductions_(std::make_unique<ReductionWorker>(x_.transport_, x_.dp_group_,
                                                    x_.options_.reduce, x_.options_.timeout,
                                                    x_.options_.origin)),
      reduce_ticket_(x_.exe_.steps.size(), -1) {}

void RankExecutor::HostBlockingWait::BeginStep() {
  std::fill(reduce_ticket_.begin(), reduce_ticket_.end(), -1);
  reduce_blocked_since_us_ = -1;
}

absl::StatusOr<bool> RankExecutor::HostBlockingWait::ReachRecv(int32_t slot) {
  ASSIGN_OR_RETURN(bool done, x_.RecvDone(slot));
  if (!done) return x_.Block(Blocked::Kind::kRecv, slot);
  return true;
}

absl::Status RankExecutor::HostBlockingWait::StartReduction(int32_t i, MutableBytes grads) {
  reduce_ticket_[i] = reductions_->Start(
      {reinterpret_cast<float*>(grads.data()), grads.size() / sizeof(float)}, x_.infos_[i]);
  return absl::OkStatus();
}

// The reduction the REDUCE_GRAD at `reduce` started has ended (none was
// started when the stage has no planned gradients or the group is one).
absl::StatusOr<bool> RankExecutor::HostBlockingWait::ReachReduction(int32_t reduce) {
  const int64_t ticket = reduce_ticket_[reduce];
  if (ticket < 0 || reductions_->Ended(ticket)) {
    if (reduce_blocked_since_us_ >= 0) {
      x_.waited_reduce_us_ += x_.NowUs() - reduce_blocked_since_us_;
      reduce_blocked_since_us_ = -1;
    }
    return true;
  }
  if (reduce_blocked_since_us_ < 0) reduce_blocked_since_us_ = x_.NowUs();
  return x_.Block(Blocked::Kind::kReduction, reduce);
}

void RankExecutor::HostBlockingWait::AddLoss(int stage, int mb) {
  x_.result_.loss += x_.stages_[stage]->Loss(mb);
}

absl::StatusOr<bool> RankExecutor::HostBlockingWait::ReductionsDone() {
  if (!reductions_->Idle()) return x_.Block(Blocked::Kind::kReductions, 0);
  RETURN_IF_ERROR(reductions_->WaitAll(x_.options_.timeout));
  return true;
}

std::vector<ReductionSpan> RankExecutor::HostBlockingWait::TakeReductionSpans() {
  return reductions_->TakeSpans();
}

absl::Status RankExecutor::HostBlockingWait::WaitBlocked(const Blocked& blocked) {
  switch (blocked.kind) {
    case Blocked::Kind::kReduction:
      return reductions_->WaitFor(reduce_ticket_[blocked.slot], x_.options_.timeout);
    case Blocked::Kind::kReductions:
      return reductions_->WaitAll(x_.options_.timeout);
    default:
      return absl::InternalError("the host-blocking mode does not wait for this");
  }
}

}  // namespace jitpipe
