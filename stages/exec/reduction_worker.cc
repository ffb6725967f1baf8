#include "stages/exec/reduction_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {

ReductionWorker::ReductionWorker(Transport* transport, Group group, ReduceKind kind,
                                 absl::Duration timeout,
                                 std::chrono::steady_clock::time_point origin)
    : transport_(transport),
      group_(std::move(group)),
      member_(group_.IndexOf(transport->rank())),
      kind_(kind),
      timeout_(timeout),
      origin_(origin),
      thread_([this] { Loop(); }) {}

ReductionWorker::~ReductionWorker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

double ReductionWorker::NowUs() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

int64_t ReductionWorker::Start(absl::Span<float> data, const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({data, info});
  ++unfinished_;
  return started_++;
}

bool ReductionWorker::Ended(int64_t ticket) {
  absl::MutexLock lock(&mu_);
  return ended_ > ticket;
}

absl::Status ReductionWorker::WaitFor(int64_t ticket, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_ > ticket; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ended), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::FormatDuration(timeout), " waiting for a gradient reduction"));
  }
  return status_;
}

absl::Status ReductionWorker::WaitAll(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unfinished_ == 0; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::FormatDuration(timeout), " waiting for ", unfinished_,
        " gradient reduction(s); the first is ",
        in_progress_.has_value() ? *in_progress_ : queue_.front().info.action,
        in_progress_.has_value() ? " (in progress)" : " (not started)"));
  }
  absl::Status status = std::move(status_);
  status_ = absl::OkStatus();
  return status;
}

bool ReductionWorker::Idle() {
  absl::MutexLock lock(&mu_);
  return unfinished_ == 0;
}

std::vector<ReductionSpan> ReductionWorker::TakeSpans() {
  absl::MutexLock lock(&mu_);
  return std::exchange(spans_, {});
}

void ReductionWorker::Loop() {
  while (true) {
    Work work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      if (!status_.ok()) {  // an earlier reduction failed: skip the rest
        --unfinished_;
        ++ended_;
        continue;
      }
      in_progress_ = work.info.action;
    }
    const double start = NowUs();
    absl::Status status = Reduce(work);
    const double end = NowUs();
    absl::MutexLock lock(&mu_);
    spans_.push_back({work.info.program_index, start, end});
    in_progress_.reset();
    if (!status.ok() && status_.ok()) {
      status_ = absl::Status(status.code(), absl::StrCat(work.info.action, ": ", status.message()));
    }
    --unfinished_;
    ++ended_;
  }
}

absl::Status ReductionWorker::Reduce(const Work& work) {
  absl::StatusOr<RequestId> id;
  if (kind_ == ReduceKind::kAllReduce) {
    id = transport_->PostAllReduce(group_, work.data, ReduceOp::kSum, work.info);
  } else {
    const size_t members = group_.ranks.size();
    const size_t shard = work.data.size() / members;
    id = transport_->PostReduceScatter(group_, work.data.subspan(0, shard * members),
                                       work.data.subspan(member_ * shard, shard), ReduceOp::kSum,
                                       work.info);
  }
  RETURN_IF_ERROR(id.status());
  return transport_->Wait(*id, timeout_);
}

}  // namespace jitpipe
