// StreamOrderedWait (wait_strategy.h): the device transports' mode. A wait
// on a transfer or a reduction becomes a dependency of the compute stream
// (Transport::StreamWait) and the cursor moves on at once; only a transfer
// not yet issued to the device (one-GPU mode: its sender has not posted)
// holds the host, until it is. Reductions are posted from the executor's
// thread (the transport orders them after the compute stream, on its
// reduction stream: no reduction thread). Nothing is polled mid-step (the
// step may be captured into a CUDA graph, where an event query is illegal)
// unless the provider releases sent buffers only on completion. The host
// waits at the step's end: for a marker behind the compute stream, then
// every transfer and reduction, then what FinishStep enqueued.
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "stages/exec/wait_strategy.h"

namespace jitpipe {

void RankExecutor::StreamOrderedWait::BeginStep() {
  reductions_.clear();
  reduction_spans_.clear();
  marker_state_ = MarkerState::kNone;
}

// The compute stream waits on the device for the receive at `slot`
// instead of the host waiting for it.
absl::StatusOr<bool> RankExecutor::StreamOrderedWait::ReachRecv(int32_t slot) {
  const RecvState state = x_.recv_state_[slot];
  if (state == RecvState::kDone || state == RecvState::kStreamOrdered) return true;
  if (state == RecvState::kNotPosted) {
    return absl::InternalError("consumes a transfer whose RECV was not posted");
  }
  ASSIGN_OR_RETURN(bool ordered, x_.transport_->StreamWait(x_.recv_request_[slot],
                                                           x_.context_.stream));
  if (!ordered) return x_.Block(Blocked::Kind::kRecvIssue, slot);
  x_.recv_state_[slot] = RecvState::kStreamOrdered;
  return true;
}

// As ReductionWorker::Reduce, posted from this thread: the device
// transport orders it after the compute stream, on its reduction stream.
absl::Status RankExecutor::StreamOrderedWait::StartReduction(int32_t i, MutableBytes grads) {
  const absl::Span<float> data(reinterpret_cast<float*>(grads.data()),
                               grads.size() / sizeof(float));
  const Group& group = x_.dp_group_;
  const double start = x_.NowUs();
  absl::StatusOr<RequestId> id;
  if (x_.options_.reduce == ReduceKind::kAllReduce) {
    id = x_.transport_->PostAllReduce(group, data, ReduceOp::kSum, x_.infos_[i]);
  } else {
    const size_t members = group.ranks.size();
    const size_t shard = data.size() / members;
    id = x_.transport_->PostReduceScatter(group, data.subspan(0, shard * members),
                                          data.subspan(x_.dp_member_ * shard, shard),
                                          ReduceOp::kSum, x_.infos_[i]);
  }
  if (!id.ok()) {
    return absl::Status(id.status().code(),
                        absl::StrCat(x_.texts_[i], ": ", id.status().message()));
  }
  reductions_.push_back({*id, x_.exe_.steps[i].index, start});
  return absl::OkStatus();
}

// The compute stream waits on the device for the reduction's stream
// (posted from this thread: already issued).
absl::StatusOr<bool> RankExecutor::StreamOrderedWait::ReachReduction(int32_t reduce) {
  for (const PendingReduction& r : reductions_) {
    if (r.index != reduce) continue;
    ASSIGN_OR_RETURN(bool ordered, x_.transport_->StreamWait(r.request, x_.context_.stream));
    if (!ordered) return absl::InternalError("a posted reduction is not issued to the device");
  }
  return true;
}

bool RankExecutor::StreamOrderedWait::PollsAfterAction() const {
  return !x_.release_after_requests_ && !x_.pending_sends_.empty();
}

absl::StatusOr<bool> RankExecutor::StreamOrderedWait::ComputeDone() {
  if (marker_state_ == MarkerState::kDone) return true;
  if (marker_state_ == MarkerState::kNone) {
    ASSIGN_OR_RETURN(marker_, x_.transport_->PostMarker(OpInfo{-1, -1, -1, "step end"}));
    marker_state_ = MarkerState::kPosted;
  }
  ASSIGN_OR_RETURN(bool done, x_.transport_->Test(marker_));
  if (!done) return x_.Block(Blocked::Kind::kMarker, 0);
  marker_state_ = MarkerState::kDone;
  x_.result_.compute_end_us = x_.NowUs();
  for (const auto& [stage, mb] : loss_reads_) x_.result_.loss += x_.stages_[stage]->Loss(mb);
  loss_reads_.clear();
  return true;
}

absl::StatusOr<bool> RankExecutor::StreamOrderedWait::ReductionsDone() {
  while (!reductions_.empty()) {
    const PendingReduction& r = reductions_.front();
    absl::StatusOr<bool> done = x_.transport_->Test(r.request);
    if (!done.ok()) {  // steps[i] is the action at index i
      return absl::Status(done.status().code(),
                          absl::StrCat(x_.texts_[r.index], ": ", done.status().message()));
    }
    if (!*done) return x_.Block(Blocked::Kind::kReductions, 0);
    reduction_spans_.push_back({r.index, r.start_us, x_.NowUs()});
    reductions_.erase(reductions_.begin());
  }
  return true;
}

// What FinishStep enqueued (a device stage's copy of its gradients to the
// host) is complete when the step returns: one host wait, at the step's
// end only.
absl::Status RankExecutor::StreamOrderedWait::AfterStagesFinished() {
  ASSIGN_OR_RETURN(RequestId finished,
                   x_.transport_->PostMarker(OpInfo{-1, -1, -1, "step results"}));
  return x_.transport_->Wait(finished, x_.options_.timeout);
}

std::vector<ReductionSpan> RankExecutor::StreamOrderedWait::TakeReductionSpans() {
  std::vector<ReductionSpan> spans = std::move(reduction_spans_);
  reduction_spans_.clear();
  return spans;
}

absl::Status RankExecutor::StreamOrderedWait::WaitBlocked(const Blocked& blocked) {
  switch (blocked.kind) {
    case Blocked::Kind::kRecvIssue: {  // the sender's post, seen by polling
      const absl::Time give_up = absl::Now() + x_.options_.timeout;
      while (true) {
        ASSIGN_OR_RETURN(bool ordered, x_.transport_->StreamWait(x_.recv_request_[blocked.slot],
                                                                 x_.context_.stream));
        if (ordered) {
          x_.recv_state_[blocked.slot] = RecvState::kStreamOrdered;
          return absl::OkStatus();
        }
        if (absl::Now() > give_up) return x_.TimedOut();
        absl::SleepFor(absl::Microseconds(50));
      }
    }
    case Blocked::Kind::kReductions: {
      const PendingReduction r = reductions_.front();
      RETURN_IF_ERROR(x_.transport_->Wait(r.request, x_.options_.timeout));
      reduction_spans_.push_back({r.index, r.start_us, x_.NowUs()});
      reductions_.erase(reductions_.begin());
      return absl::OkStatus();
    }
    case Blocked::Kind::kMarker:
      RETURN_IF_ERROR(x_.transport_->Wait(marker_, x_.options_.timeout));
      marker_state_ = MarkerState::kDone;
      x_.result_.compute_end_us = x_.NowUs();
      return absl::OkStatus();
    default:
      return absl::InternalError("the stream-ordered mode does not wait for this");
  }
}

}  // namespace jitpipe
