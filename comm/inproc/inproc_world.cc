#include "comm/inproc/inproc_world.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "comm/inproc/inproc_transport.h"

namespace jitpipe {
namespace {

class ThreadsWorld final : public InProcessWorld {
 public:
  explicit ThreadsWorld(int size) : fabric_(size, [this] { OnAbort(); }) {
    for (int r = 0; r < size; ++r) {
      transports_.push_back(NewInProcessTransport(&fabric_, r));
      local_ranks_.push_back(r);
    }
    absl::MutexLock lock(&mu_);
    barrier_calls_.assign(static_cast<size_t>(size), 0);
  }
  ThreadsWorld(const ThreadsWorld&) = delete;
  ThreadsWorld& operator=(const ThreadsWorld&) = delete;

  std::string name() const override { return "in-process"; }
  int size() const override { return fabric_.size(); }
  const std::vector<int>& local_ranks() const override { return local_ranks_; }
  absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) override {
    (void)timeout;  // nothing to wait for: every rank is here
    RETURN_IF_ERROR(fabric_.AbortStatus());
    return fabric_.AddGroups(groups);
  }
  Transport& transport(int world_rank) override { return *transports_[world_rank]; }
  SendCompletion send_completion() const override { return SendCompletion::kEager; }

  absl::Status Barrier(int world_rank, absl::Duration timeout) override;

  // Every payload is here already: nothing moves.
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    (void)timeout;
    if (local.size() != transports_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gather: ", local.size(), " payloads for ", size(), " local ranks"));
    }
    RETURN_IF_ERROR(fabric_.AbortStatus());
    return std::vector<std::string>(local.begin(), local.end());
  }
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    (void)grace;
    std::vector<std::optional<std::string>> all(transports_.size());
    for (size_t w = 0; w < local.size() && w < all.size(); ++w) all[w] = local[w];
    return all;
  }

  void Abort(int world_rank, const std::string& reason) override {
    fabric_.Abort(world_rank, reason);
  }
  bool aborted() override { return !fabric_.AbortStatus().ok(); }

  // Every operation completes or fails before the rank threads end, so
  // nothing writes into a buffer once the run has returned; the objects are
  // kept until the world goes all the same, as the contract says.
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    absl::MutexLock lock(&mu_);
    retained_.push_back(std::move(object));
  }
  void LeaveBeforeExit() override {}
  int64_t InFlightBytes() const override { return fabric_.InFlightBytes(); }
  int64_t PeakInFlightBytes() const override { return fabric_.PeakInFlightBytes(); }

 private:
  // The fabric's abort hook: releases the barrier.
  void OnAbort() {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
  }

  InProcessFabric fabric_;
  std::vector<std::unique_ptr<Transport>> transports_;  // const after construction
  std::vector<int> local_ranks_;                        // 0 .. size - 1

  absl::Mutex mu_;  // ordered before the fabric's
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> barrier_calls_ ABSL_GUARDED_BY(mu_);  // by world rank
  std::map<int64_t, int> barrier_arrived_ ABSL_GUARDED_BY(mu_);  // by barrier
  int64_t barriers_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<const void>> retained_ ABSL_GUARDED_BY(mu_);
};

// Every rank is local: the barrier counts arrivals. Rank w's k-th call
// takes part in barrier k, as each MPI_Ibarrier of a rank matches the
// others' in order: a call that timed out stays counted, and the others'
// k-th calls complete barrier k. Barriers complete in order (every rank
// makes its k-th call before its next).
absl::Status ThreadsWorld::Barrier(int world_rank, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // The fabric first: it is aborted before its hook tells the barrier.
  if (absl::Status abort = fabric_.AbortStatus(); !abort.ok()) return abort;
  const int64_t barrier = barrier_calls_[world_rank]++;
  if (++barrier_arrived_[barrier] == size()) {
    barrier_arrived_.erase(barrier);
    barriers_done_ = barrier + 1;
    return absl::OkStatus();
  }
  auto released = [this, barrier]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return aborted_ || barriers_done_ > barrier;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&released), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                     " waiting at the step barrier for the other ranks"));
  }
  if (barriers_done_ > barrier) return absl::OkStatus();
  const absl::Status abort = fabric_.AbortStatus();
  return absl::AbortedError(
      absl::StrCat(abort.message(), " (while waiting at the step barrier)"));
}

}  // namespace

std::unique_ptr<InProcessWorld> CreateInProcessWorld(int size) {
  return std::make_unique<ThreadsWorld>(size);
}

}  // namespace jitpipe
