#include "comm/nccl/nccl_transport.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"
#include "comm/cuda/reduce_kernels.h"
#include "comm/nccl/nccl_error.h"
#include "comm/op_label.h"
#include "comm/stream_plan.h"

namespace jitpipe {
namespace {

ncclRedOp_t OpOf(ReduceOp op) { return op == ReduceOp::kAverage ? ncclAvg : ncclSum; }

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(NcclRank* rank) : rank_(rank) {}
  int rank() const override { return rank_->rank(); }
  int size() const override { return rank_->size(); }
  absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag, absl::Span<const std::byte> bytes,
                                     const OpInfo& info) override {
    (void)tag;  // recorded by the flight recorder; NCCL matches in order
    // NCCL reads a send's buffer only; the span's constness is restored
    // there.
    return rank_->PostP2p(true, peer,
                          absl::Span<std::byte>(const_cast<std::byte*>(bytes.data()), bytes.size()),
                          info);
  }
  absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                     const OpInfo& info) override {
    (void)tag;
    return rank_->PostP2p(false, peer, bytes, info);
  }
  absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data, ReduceOp op,
                                          const OpInfo& info) override {
    return rank_->PostCollective(group, false, data, data, op, info);
  }
  absl::StatusOr<RequestId> PostReduceScatter(const Group& group, absl::Span<const float> input,
                                              absl::Span<float> output, ReduceOp op,
                                              const OpInfo& info) override {
    return rank_->PostCollective(group, true, input, output, op, info);
  }
  absl::StatusOr<bool> Test(RequestId request) override { return rank_->Test(request); }
  absl::Status Wait(RequestId request, absl::Duration timeout) override {
    return rank_->Wait(request, timeout);
  }
  const DeviceStreams* device_streams() const override { return &rank_->streams(); }
  absl::StatusOr<bool> StreamWait(RequestId request, void* stream) override {
    return rank_->StreamWait(request, stream);
  }
  absl::StatusOr<RequestId> PostMarker(const OpInfo& info) override {
    return rank_->PostMarker(info);
  }
  void Abort(const std::string& reason) override {
    rank_->Abort(rank_->rank(), reason, /*notify=*/true);
  }

 private:
  NcclRank* const rank_;
};

}  // namespace

NcclRank::NcclRank(MpiWorld* mpi, const NcclOptions& options, int device, CommunicatorPlan plan,
                   ncclComm_t world_comm, std::string edge_ids)
    : mpi_(mpi),
      options_(options),
      rank_(mpi->rank()),
      size_(mpi->size()),
      device_(device),
      plan_(std::move(plan)),
      edge_ids_(std::move(edge_ids)),
      requests_(options.poll_sleep) {
  absl::MutexLock lock(&mu_);
  world_comm_ = world_comm;
}

NcclRank::~NcclRank() {
  (void)cudaSetDevice(device_);
  if (!comms_aborted_) {
    for (OwnedStream* s : {&compute_, &reduce_}) {
      if (s->get() != nullptr) (void)cudaStreamSynchronize(s->get());
    }
    for (OwnedStream& s : p2p_) (void)cudaStreamSynchronize(s.get());
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& [ranks, comm] : group_comms_) {
      if (comm != nullptr) (void)ncclCommDestroy(comm);
    }
    for (auto& [edge, comm] : edge_comms_) {
      if (comm != nullptr) (void)ncclCommDestroy(comm);
    }
    if (world_comm_ != nullptr) (void)ncclCommDestroy(world_comm_);
  }
  if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
}

absl::Status NcclRank::Setup() {
  RETURN_IF_ERROR(UseDevice(device_));
  ASSIGN_OR_RETURN(compute_, OwnedStream::Create());
  ASSIGN_OR_RETURN(reduce_, OwnedStream::Create());
  for (int s = 0; s < plan_.NumStreams(rank_); ++s) {
    ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create());
    p2p_.push_back(std::move(stream));
  }
  streams_ = {device_, compute_.get()};
  ASSIGN_OR_RETURN(pool_, CreateMemoryPool(device_));
  if (!options_.connect_before_first_step) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return plan_.mode == NcclMode::kLazy ? ConnectEdges() : WarmUpNeighbours();
}

// nccl-lazy: the rank's edge communicators in the plan's order (disjoint
// rounds, the same on every rank: no deadlock), each warmed up with one byte
// from src to dst so that NCCL's connection is made here, not in a step.
absl::Status NcclRank::ConnectEdges() {
  if (connected_) return absl::OkStatus();
  RETURN_IF_ERROR(UseDevice(device_));
  void* warm = nullptr;
  CUDA_CALL(cudaMalloc(&warm, 1));
  absl::Status status = absl::OkStatus();
  const std::vector<Edge> order = plan_.OrderOf(rank_);
  for (size_t slot = 0; slot < order.size() && status.ok(); ++slot) {
    const Edge& e = order[slot];
    const size_t index = static_cast<size_t>(
        std::lower_bound(plan_.edges.begin(), plan_.edges.end(), e) - plan_.edges.begin());
    ncclUniqueId id;
    std::memcpy(&id, edge_ids_.data() + index * sizeof(ncclUniqueId), sizeof(ncclUniqueId));
    ncclComm_t comm = nullptr;
    status = NCCL_STATUS(ncclCommInitRank(&comm, 2, id, e.src == rank_ ? 0 : 1), nullptr);
    if (!status.ok()) break;
    edge_comms_[e] = comm;
    cudaStream_t stream = p2p_[slot].get();
    status = e.src == rank_ ? NCCL_STATUS(ncclSend(warm, 1, ncclUint8, 1, comm, stream), comm)
                            : NCCL_STATUS(ncclRecv(warm, 1, ncclUint8, 0, comm, stream), comm);
    if (status.ok()) status = CUDA_STATUS(cudaStreamSynchronize(stream));
  }
  (void)cudaFree(warm);
  RETURN_IF_ERROR(status);
  connected_ = true;
  return absl::OkStatus();
}

// nccl: one byte each way with every neighbour, pair by pair in the plan's
// rounds, so that NCCL's connections exist before the first step.
absl::Status NcclRank::WarmUpNeighbours() {
  RETURN_IF_ERROR(UseDevice(device_));
  void* warm = nullptr;
  CUDA_CALL(cudaMalloc(&warm, 2));
  absl::Status status = absl::OkStatus();
  cudaStream_t stream = p2p_[0].get();
  for (const Edge& pair : plan_.OrderOf(rank_)) {
    const int peer = pair.src == rank_ ? pair.dst : pair.src;
    status = NCCL_STATUS(ncclGroupStart(), world_comm_);
    if (status.ok()) status = NCCL_STATUS(ncclSend(warm, 1, ncclUint8, peer, world_comm_, stream), world_comm_);
    if (status.ok()) {
      status = NCCL_STATUS(
          ncclRecv(static_cast<char*>(warm) + 1, 1, ncclUint8, peer, world_comm_, stream),
          world_comm_);
    }
    const absl::Status ended = NCCL_STATUS(ncclGroupEnd(), world_comm_);
    if (status.ok()) status = ended;
    if (status.ok()) status = CUDA_STATUS(cudaStreamSynchronize(stream));
    if (!status.ok()) break;
  }
  (void)cudaFree(warm);
  return status;
}

std::vector<Group> NcclRank::NewGroups(absl::Span<const Group> groups) const {
  absl::MutexLock lock(&mu_);
  std::vector<Group> fresh;
  for (const Group& g : groups) {
    if (IsImplicitGroup(g, size_) || group_comms_.contains(g.ranks)) continue;
    if (std::find(fresh.begin(), fresh.end(), g) == fresh.end()) fresh.push_back(g);
  }
  return fresh;
}

absl::Status NcclRank::AddGroups(absl::Span<const Group> groups, const std::string& ids) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(UseDevice(device_));
  for (size_t k = 0; k < groups.size(); ++k) {
    const Group& g = groups[k];
    const int index = g.IndexOf(rank_);
    ncclComm_t comm = nullptr;
    if (index >= 0) {
      ncclUniqueId id;
      std::memcpy(&id, ids.data() + k * sizeof(ncclUniqueId), sizeof(ncclUniqueId));
      NCCL_CALL(ncclCommInitRank(&comm, static_cast<int>(g.ranks.size()), id, index), nullptr);
    }
    group_comms_[g.ranks] = comm;  // null where this rank is not a member
  }
  return absl::OkStatus();
}

absl::StatusOr<ncclComm_t> NcclRank::GroupComm(const Group& group) const {
  if (group.IndexOf(rank_) < 0) return NotAMemberError(rank_, group);
  if (group.ranks.size() == 1) return nullptr;  // the rank alone: no communicator
  if (IsImplicitGroup(group, size_)) return world_comm_;
  auto it = group_comms_.find(group.ranks);
  if (it == group_comms_.end()) return NotRequestedError(rank_, group);
  return it->second;
}

absl::Status NcclRank::CheckRemoteAbort() {
  RETURN_IF_ERROR(requests_.AbortStatus());
  const absl::Time now = absl::Now();
  if (now < next_notice_poll_) return absl::OkStatus();
  next_notice_poll_ = now + absl::Milliseconds(10);
  if (mpi_->aborted()) {
    Abort(rank_, "another process of the job failed (its notice came over MPI)", false);
    return requests_.AbortStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> NcclRank::PostP2p(bool send, int peer, absl::Span<std::byte> bytes,
                                            const OpInfo& info) {
  RETURN_IF_ERROR(CheckRemoteAbort());
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": invalid peer ", peer));
  }
  const std::string what =
      (send ? OpLabel::Send(peer, info) : OpLabel::Receive(peer, info)).ToString();
  const int slot = plan_.StreamOf(rank_, peer, send);
  if (slot < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": ", what, ": the communicator plan has no edge ",
        send ? Edge{rank_, peer}.ToString() : Edge{peer, rank_}.ToString(),
        " (NcclOptions::edges)"));
  }
  RETURN_IF_ERROR(RequireDeviceMemory(bytes.data(), bytes.size(), absl::StrCat("rank ", rank_, ": ", what)));
  absl::MutexLock lock(&mu_);
  if (comms_aborted_) return requests_.AbortStatus();
  if (plan_.mode == NcclMode::kLazy) RETURN_IF_ERROR(ConnectEdges());  // once: on first use
  ncclComm_t comm = world_comm_;
  int peer_in_comm = peer;
  if (plan_.mode == NcclMode::kLazy) {
    const Edge e = send ? Edge{rank_, peer} : Edge{peer, rank_};
    comm = edge_comms_.at(e);
    peer_in_comm = send ? 1 : 0;
  }
  ASSIGN_OR_RETURN(RequestId id, requests_.New(rank_, what));
  absl::StatusOr<cudaEvent_t> ready = requests_.events().Take();
  if (!ready.ok()) {
    requests_.Drop(id);
    return ready.status();
  }
  const cudaEvent_t done = requests_.done(id);
  const absl::Status carried = CarrySteps(
      PlanPointToPoint(send ? P2pDirection::kSend : P2pDirection::kRecv, slot),
      [&](const StreamRef& s) {
        return s.kind == StreamKind::kCompute ? compute_.get() : p2p_[s.index].get();
      },
      [&](EventSlot e) { return e == EventSlot::kReady ? *ready : done; },
      [&](const DeviceStep&, cudaStream_t stream) -> absl::Status {
        return send ? NCCL_STATUS(ncclSend(bytes.data(), bytes.size(), ncclUint8, peer_in_comm,
                                           comm, stream),
                                  comm)
                    : NCCL_STATUS(ncclRecv(bytes.data(), bytes.size(), ncclUint8, peer_in_comm,
                                           comm, stream),
                                  comm);
      });
  requests_.events().Give(*ready);
  if (!carried.ok()) {
    requests_.Drop(id);
    return carried;
  }
  requests_.Issued(id);
  return id;
}

absl::StatusOr<RequestId> NcclRank::PostCollective(const Group& group, bool reduce_scatter,
                                                   absl::Span<const float> input,
                                                   absl::Span<float> output, ReduceOp op,
                                                   const OpInfo& info) {
  RETURN_IF_ERROR(CheckRemoteAbort());
  const size_t members = group.ranks.size();
  const OpLabel label = OpLabel::Collective(reduce_scatter, members, info);
  if (reduce_scatter) {
    RETURN_IF_ERROR(CheckReduceScatterSizes(rank_, label, input.size(), output.size(), members));
  }
  const std::string what = label.ToString();
  const std::string who = absl::StrCat("rank ", rank_, ": ", what);
  RETURN_IF_ERROR(RequireDeviceMemory(input.data(), input.size() * sizeof(float), who));
  RETURN_IF_ERROR(RequireDeviceMemory(output.data(), output.size() * sizeof(float), who));
  absl::MutexLock lock(&mu_);
  if (comms_aborted_) return requests_.AbortStatus();
  ASSIGN_OR_RETURN(ncclComm_t comm, GroupComm(group));
  ASSIGN_OR_RETURN(
      ReductionPlan plan,
      PlanReduction(reduce_scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                    options_.reduction.wire, static_cast<int64_t>(input.size()),
                    static_cast<int>(members), options_.reduction.buckets));
  ASSIGN_OR_RETURN(RequestId id, requests_.New(rank_, what));
  absl::StatusOr<cudaEvent_t> ready = requests_.events().Take();
  if (!ready.ok()) {
    requests_.Drop(id);
    return ready.status();
  }
  const absl::Status enqueued = EnqueueReduction(plan, comm, group.IndexOf(rank_), input.data(),
                                                 output.data(), op, *ready, requests_.done(id));
  requests_.events().Give(*ready);
  if (!enqueued.ok()) {
    requests_.Drop(id);
    return enqueued;
  }
  requests_.Issued(id);
  return id;
}

// PlanReductionSteps on the reduction stream. `comm` is null for the rank
// alone, which has nothing to reduce (a reduce-scatter copies its shard).
absl::Status NcclRank::EnqueueReduction(const ReductionPlan& plan, ncclComm_t comm, int member,
                                        const float* input, float* output, ReduceOp op,
                                        cudaEvent_t ready, cudaEvent_t done) {
  cudaStream_t stream = reduce_.get();
  const bool bf16 = plan.converts();
  const ncclDataType_t dtype = bf16 ? ncclBfloat16 : ncclFloat32;
  uint16_t* wire = nullptr;
  // The collective's operand: the wire buffer, or the fp32 buffer itself.
  auto at = [&](int64_t element) -> void* {
    return bf16 ? static_cast<void*>(wire + element)
                : static_cast<void*>(const_cast<float*>(input) + element);
  };
  auto bucket = [&](const ReductionBucket& b) -> absl::Status {
    if (comm == nullptr) {  // the rank alone
      if (plan.kind == CollectiveKind::kReduceScatter && output != input && b.count > 0) {
        CUDA_CALL(cudaMemcpyAsync(output + b.offset, input + b.offset,
                                  static_cast<size_t>(b.count) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
      }
      return absl::OkStatus();
    }
    if (plan.kind == CollectiveKind::kAllReduce) {
      return NCCL_STATUS(ncclAllReduce(at(b.offset), at(b.offset), static_cast<size_t>(b.count),
                                       dtype, OpOf(op), comm, stream),
                         comm);
    }
    // Each member's shard reduced onto it, where it lies.
    NCCL_CALL(ncclGroupStart(), comm);
    absl::Status status = absl::OkStatus();
    const int members = static_cast<int>(plan.elements / std::max<int64_t>(plan.shard, 1));
    for (int j = 0; j < members && status.ok(); ++j) {
      void* send = at(j * plan.shard + b.offset);
      void* recv = j != member ? send : bf16 ? send : static_cast<void*>(output + b.offset);
      status = NCCL_STATUS(ncclReduce(send, recv, static_cast<size_t>(b.count), dtype, OpOf(op), j,
                                      comm, stream),
                           comm);
    }
    const absl::Status ended = NCCL_STATUS(ncclGroupEnd(), comm);
    return status.ok() ? ended : status;
  };
  for (const DeviceStep& step : PlanReductionSteps(plan)) {
    switch (step.kind) {
      case DeviceStep::Kind::kRecord:
        CUDA_CALL(cudaEventRecord(step.event == EventSlot::kReady ? ready : done,
                                  step.stream.kind == StreamKind::kCompute ? compute_.get()
                                                                           : stream));
        break;
      case DeviceStep::Kind::kWait:
        CUDA_CALL(cudaStreamWaitEvent(stream, ready, 0));
        break;
      case DeviceStep::Kind::kWork:
        if (step.work == DeviceWork::kToWire && comm != nullptr && plan.elements > 0) {
          CUDA_CALL(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&wire),
                                            static_cast<size_t>(plan.elements) * 2, pool_, stream));
          CUDA_CALL(cuda_kernels::ToBf16(wire, input, plan.elements, stream));
        } else if (step.work == DeviceWork::kCollective) {
          RETURN_IF_ERROR(bucket(plan.buckets[step.bucket]));
        } else if (step.work == DeviceWork::kFromWire && wire != nullptr) {
          if (plan.kind == CollectiveKind::kAllReduce) {
            CUDA_CALL(cuda_kernels::FromBf16(output, wire, plan.elements, stream));
          } else {
            CUDA_CALL(cuda_kernels::FromBf16(output, wire + member * plan.shard, plan.shard,
                                             stream));
          }
          CUDA_CALL(cudaFreeAsync(wire, stream));
        }
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> NcclRank::PostMarker(const OpInfo& info) {
  RETURN_IF_ERROR(CheckRemoteAbort());
  ASSIGN_OR_RETURN(RequestId id,
                   requests_.New(rank_, info.action.empty() ? "the compute stream" : info.action));
  if (absl::Status s = CUDA_STATUS(cudaEventRecord(requests_.done(id), compute_.get())); !s.ok()) {
    requests_.Drop(id);
    return s;
  }
  requests_.Issued(id);
  return id;
}

absl::StatusOr<bool> NcclRank::Test(RequestId id) {
  absl::StatusOr<bool> done = requests_.Test(id);
  if (done.ok() && !*done) {
    if (absl::Status notice = CheckRemoteAbort(); !notice.ok()) return requests_.Test(id);
  }
  return done;
}

// The requests' Wait in slices of 10 ms, looking for another process's
// abort notice in between.
absl::Status NcclRank::Wait(RequestId id, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = std::max(give_up - absl::Now(), absl::ZeroDuration());
    const absl::Status waited = requests_.Wait(id, std::min(left, absl::Milliseconds(10)));
    if (waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
    if (!CheckRemoteAbort().ok()) continue;  // the request fails with Aborted now
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError(absl::StrCat("timed out after ",
                                                      absl::FormatDuration(timeout),
                                                      " waiting for ", requests_.what(id)));
    }
  }
}

absl::StatusOr<bool> NcclRank::StreamWait(RequestId id, void* stream) {
  return requests_.StreamWait(id, static_cast<cudaStream_t>(stream));
}

void NcclRank::Abort(int rank, const std::string& reason, bool notify) {
  if (!requests_.AbortStatus().ok()) return;
  requests_.Abort(RankFailed(rank, reason));
  AbortCommunicators();
  if (notify) mpi_->Abort(rank, reason);
}

// ncclCommAbort on every communicator. A thread may be inside an NCCL call
// that waits for a dead peer (the lock is then held): after a second the
// communicators are aborted without the lock -- that call is what the abort
// is for.
void NcclRank::AbortCommunicators() {
  comms_aborted_ = true;
  bool locked = false;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(1); absl::Now() < give_up;) {
    if ((locked = mu_.TryLock())) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto abort = [](ncclComm_t& comm) {
    if (comm != nullptr) (void)ncclCommAbort(comm);
    comm = nullptr;
  };
  [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& [ranks, comm] : group_comms_) abort(comm);
    for (auto& [edge, comm] : edge_comms_) abort(comm);
    abort(world_comm_);
  }();
  if (locked) mu_.Unlock();
}

void NcclRank::StartWatchdog(absl::Duration timeout, World::TimeoutHandler handler) {
  requests_.StartWatchdog(timeout, options_.watchdog_interval,
                          [this, handler = std::move(handler)](int owner, const absl::Status& s) {
                            if (handler) handler(owner, s);
                            Abort(owner, std::string(s.message()), /*notify=*/true);
                          });
}

std::unique_ptr<Transport> NewNcclTransport(NcclRank* rank) {
  return std::make_unique<NcclTransport>(rank);
}

}  // namespace jitpipe
