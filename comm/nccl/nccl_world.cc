#include "comm/nccl/nccl_world.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_device.h"
#include "comm/cuda/cuda_error.h"
#include "comm/cuda/cuda_world.h"
#include "comm/nccl/nccl_error.h"
#include "comm/nccl/nccl_transport.h"

namespace jitpipe {
namespace {

// The process's rank on its host (Open MPI sets it; other launchers their
// own), else its world rank.
int LocalRank(int world_rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    int rank = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &rank)) return rank;
  }
  return world_rank;
}

// This process's device: the option, or its local rank modulo the devices.
absl::StatusOr<int> PickDevice(const NcclOptions& options, int world_rank) {
  RETURN_IF_ERROR(CheckCudaDevice(0));
  int count = 0;
  CUDA_CALL(cudaGetDeviceCount(&count));
  const int device = options.device >= 0 ? options.device : LocalRank(world_rank) % count;
  RETURN_IF_ERROR(CheckCudaDevice(device));
  return device;
}

// Rank 0's outcome of a step every process took, for all: rank 0 gathers
// every process's status and broadcasts the first failure ("" for none), so
// that no process goes on to an NCCL call the others will not make.
absl::Status Agree(MpiWorld& mpi, const absl::Status& mine, absl::Duration timeout) {
  const std::string text =
      mine.ok() ? "" : absl::StrCat("rank ", mpi.rank(), ": ", mine.message());
  ASSIGN_OR_RETURN(std::vector<std::string> all, mpi.Gather(text, timeout));
  std::string first;
  for (const std::string& s : all) {
    if (!s.empty()) {
      first = s;
      break;
    }
  }
  RETURN_IF_ERROR(mpi.Broadcast(&first, timeout));
  if (first.empty()) return absl::OkStatus();
  return mine.ok() ? absl::FailedPreconditionError(first) : mine;
}

// `count` fresh ncclUniqueIds from rank 0, the same bytes on every process.
absl::StatusOr<std::string> BroadcastIds(MpiWorld& mpi, size_t count, absl::Duration timeout) {
  std::string ids;
  absl::Status made = absl::OkStatus();
  if (mpi.rank() == 0) {
    ids.resize(count * sizeof(ncclUniqueId));
    for (size_t k = 0; k < count && made.ok(); ++k) {
      ncclUniqueId id;
      made = NCCL_STATUS(ncclGetUniqueId(&id), nullptr);
      std::memcpy(ids.data() + k * sizeof(ncclUniqueId), &id, sizeof(ncclUniqueId));
    }
  }
  RETURN_IF_ERROR(Agree(mpi, made, timeout));
  RETURN_IF_ERROR(mpi.Broadcast(&ids, timeout));
  return ids;
}

class ProcessWorld final : public NcclWorld {
 public:
  ProcessWorld(std::unique_ptr<MpiWorld> mpi, const NcclOptions& options)
      : mpi_(std::move(mpi)), options_(options) {}
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;
  // What a failed run retained first (device buffers freed on the rank's
  // streams, which must still exist: see OneGpuWorld), then the transport
  // and the communicators, MPI last.
  ~ProcessWorld() override {
    {
      absl::MutexLock lock(&retained_mu_);
      retained_.clear();
    }
    transport_.reset();
    rank_.reset();
  }

  // The bootstrap (nccl_world.h): device, ids, the job's communicator, the
  // plan's streams and connections. Every step is agreed on by all
  // processes before the next, so a failure anywhere ends every process
  // with an error instead of a hang.
  absl::Status Bootstrap() {
    const absl::Duration timeout = options_.setup_timeout;
    absl::StatusOr<int> device = PickDevice(options_, mpi_->rank());
    RETURN_IF_ERROR(Agree(*mpi_, device.status(), timeout));
    device_ = *device;
    absl::StatusOr<CommunicatorPlan> plan =
        PlanCommunicators(options_.mode, mpi_->size(), options_.edges);
    RETURN_IF_ERROR(plan.status());  // the same on every process
    const size_t edge_ids = options_.mode == NcclMode::kLazy ? plan->edges.size() : 0;
    ASSIGN_OR_RETURN(std::string ids, BroadcastIds(*mpi_, 1 + edge_ids, timeout));
    RETURN_IF_ERROR(UseDevice(device_));
    ncclUniqueId world_id;
    std::memcpy(&world_id, ids.data(), sizeof(ncclUniqueId));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    ncclComm_t world_comm = nullptr;
    const absl::Status initialised = NCCL_STATUS(
        ncclCommInitRankConfig(&world_comm, mpi_->size(), world_id, mpi_->rank(), &config),
        nullptr);
    RETURN_IF_ERROR(Agree(*mpi_, initialised, timeout));
    rank_ = std::make_unique<NcclRank>(mpi_.get(), options_, device_, *std::move(plan), world_comm,
                                       ids.substr(sizeof(ncclUniqueId)));
    RETURN_IF_ERROR(Agree(*mpi_, rank_->Setup(), timeout));
    transport_ = NewNcclTransport(rank_.get());
    local_ranks_ = {mpi_->rank()};
    return absl::OkStatus();
  }

  std::string name() const override {
    return options_.mode == NcclMode::kLazy ? "NCCL (lazy)" : "NCCL";
  }
  int size() const override { return mpi_->size(); }
  const std::vector<int>& local_ranks() const override { return local_ranks_; }
  int rank() const override { return mpi_->rank(); }
  int device() const override { return device_; }
  const CommunicatorPlan& plan() const override { return rank_->plan(); }
  absl::Status CheckSize(int needed, absl::string_view needed_by) const override {
    return mpi_->CheckSize(needed, needed_by);
  }

  // MPI checks that every process asks for the same list; then every new
  // group gets a communicator, ids from rank 0.
  absl::Status CreateGroups(absl::Span<const Group> groups, absl::Duration timeout) override {
    RETURN_IF_ERROR(mpi_->CreateGroups(groups, timeout));
    const std::vector<Group> fresh = rank_->NewGroups(groups);
    if (fresh.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(std::string ids, BroadcastIds(*mpi_, fresh.size(), timeout));
    return Agree(*mpi_, rank_->AddGroups(fresh, ids), timeout);
  }
  Transport& transport(int world_rank) override {
    (void)world_rank;
    return *transport_;
  }
  Transport& transport() override { return *transport_; }
  SendCompletion send_completion() const override { return SendCompletion::kRendezvous; }
  P2pOrdering p2p_ordering() const override {
    return options_.mode == NcclMode::kLazy ? P2pOrdering::kFifoPerEdge
                                            : P2pOrdering::kFifoPerRank;
  }
  void StartWatchdog(absl::Duration timeout, TimeoutHandler handler) override {
    rank_->StartWatchdog(timeout, std::move(handler));
  }
  absl::Status Barrier(int world_rank, absl::Duration timeout) override {
    return mpi_->Barrier(world_rank, timeout);
  }
  absl::StatusOr<std::vector<std::string>> Gather(absl::Span<const std::string> local,
                                                  absl::Duration timeout) override {
    return mpi_->Gather(local, timeout);
  }
  std::vector<std::optional<std::string>> CollectAfterFailure(absl::Span<const std::string> local,
                                                              absl::Duration grace) override {
    return mpi_->CollectAfterFailure(local, grace);
  }
  void Abort(int world_rank, const std::string& reason) override {
    rank_->Abort(world_rank, reason, /*notify=*/true);
  }
  bool aborted() override { return rank_->aborted() || mpi_->aborted(); }
  void RetainUntilEnd(std::shared_ptr<const void> object) override {
    absl::MutexLock lock(&retained_mu_);
    retained_.push_back(std::move(object));
  }
  void LeaveBeforeExit() override { mpi_->LeaveBeforeExit(); }
  int64_t PeakInFlightBytes() const override { return 0; }

 private:
  std::unique_ptr<MpiWorld> mpi_;
  const NcclOptions options_;
  int device_ = -1;
  std::vector<int> local_ranks_;
  std::unique_ptr<NcclRank> rank_;
  std::unique_ptr<Transport> transport_;
  absl::Mutex retained_mu_;
  std::vector<std::shared_ptr<const void>> retained_ ABSL_GUARDED_BY(retained_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<NcclWorld>> CreateNcclWorld(int* argc, char*** argv,
                                                           const NcclOptions& options) {
  if (options.reduction.buckets < 1 || options.setup_timeout <= absl::ZeroDuration() ||
      options.watchdog_interval <= absl::ZeroDuration() ||
      options.poll_sleep < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "NCCL options out of range: buckets >= 1, positive timeout and intervals");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MpiWorld> mpi, CreateMpiWorld(argc, argv, options.mpi));
  auto world = std::make_unique<ProcessWorld>(std::move(mpi), options);
  RETURN_IF_ERROR(world->Bootstrap());
  return std::unique_ptr<NcclWorld>(std::move(world));
}

}  // namespace jitpipe
