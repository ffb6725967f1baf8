#include "comm/cuda/cuda_world.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_transport.h"
#include "comm/inproc/inproc_world.h"

namespace jitpipe {
namespace {

// The job-level calls (barrier, gather, failure collection) are the
// in-process world's, whose ranks are this world's: every rank is a thread
// of this process either way. An abort of either reaches both.
class OneGpuWorld final : public CudaWorld {
 public:
  static absl::StatusOr<std::unique_ptr<OneGpuWorld>> Create(int size, const CudaOptions& options) {
    std::unique_ptr<OneGpuWorld> world(new OneGpuWorld(size));
    OneGpuWorld* self = world.get();
    // The fabric's abort releases the host world's barrier with the same
    // message ("rank <r> failed: <reason>").
    ASSIGN_OR_RETURN(world->fabric_,
                     CudaFabric::Create(size, options, [self](int rank, const std::string& reason) {
                       self->host_->Abort(rank, reason);
                     }));
    for (int r = 0; r < size; ++r) world->transports_.push_back(NewCudaTransport(world->fabric_.get(), r));
    return world;
  }
  OneGpuWorld(const OneGpuWorld&) = delete;
  OneGpuWorld& operator=(const OneGpuWorld&) = delete;
  // What a failed run retained (device buffers allocated and freed on the
  // fabric's streams) goes first, once the device work is done, while those
  // streams exist: freed after them, a buffer's cudaFreeAsync took a
  // destroyed stream (a segfault in the driver, seen on an H100 after a
  // failed stage). Then the transports and the fabric.
  ~OneGpuWorld() override {
    if (fabric_ != nullptr) fabric_->SynchronizeStreams();
    retained_.clear();
    transports_.clear();
    fabric_.reset();  // waits for the device work, then frees
  }

  std::string name() const override { return "CUDA (one GPU)"; }
  int size() const override { return host_->size(); }
  const std::vector<int>& local_ranks() const override { return host_->local_ranks(); }
  int device() const override { return fabric_->device(); }
  absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) override {
    RETURN_IF_ERROR(fabric_->AbortStatus());
    RETURN_IF_ERROR(fabric_->AddGroups(groups));
    return host_->CreateGroups(groups, timeout);
  }
  Transport& transport(int world_rank) override { return *transports_[world_rank]; }
  SendCompletion send_completion() const override { return SendCompletion::kEager; }
  P2pOrdering p2p_ordering() const override { return P2pOrdering::kByTag; }
  void StartWatchdog(absl::Duration timeout, TimeoutHandler handler) override {
    fabric_->StartWatchdog(timeout, std::move(handler));
  }
  absl::Status Barrier(int world_rank, absl::Duration timeout) override {
    return host_->Barrier(world_rank, timeout);
  }
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    return host_->Gather(local, timeout);
  }
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    return host_->CollectAfterFailure(local, grace);
  }
  void Abort(int world_rank, const std::string& reason) override {
    fabric_->Abort(world_rank, reason);  // tells the host world too (the fabric's hook)
  }
  bool aborted() override { return !fabric_->AbortStatus().ok(); }
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    absl::MutexLock lock(&retained_mu_);
    retained_.push_back(std::move(object));
  }
  void LeaveBeforeExit() override {}
  int64_t InFlightBytes() const override { return fabric_->InFlightBytes(); }
  std::vector<void*> streams() const override { return fabric_->AllStreams(); }
  int64_t PeakInFlightBytes() const override { return fabric_->PeakInFlightBytes(); }

 private:
  explicit OneGpuWorld(int size) : host_(CreateInProcessWorld(size)) {}

  std::unique_ptr<InProcessWorld> host_;
  std::unique_ptr<CudaFabric> fabric_;
  std::vector<std::unique_ptr<Transport>> transports_;  // const after Create
  absl::Mutex retained_mu_;
  std::vector<std::shared_ptr<const void>> retained_ ABSL_GUARDED_BY(retained_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaWorld>> CreateCudaWorld(int size, const CudaOptions& options) {
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat("a world of ", size, " ranks"));
  if (options.reduction.buckets < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reductions in ", options.reduction.buckets, " buckets"));
  }
  if (options.poll_sleep < absl::ZeroDuration() ||
      options.watchdog_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the poll sleep and the watchdog interval must be positive");
  }
  RETURN_IF_ERROR(CheckCudaDevice(options.device));
  ASSIGN_OR_RETURN(std::unique_ptr<OneGpuWorld> world, OneGpuWorld::Create(size, options));
  return std::unique_ptr<CudaWorld>(std::move(world));
}

}  // namespace jitpipe
