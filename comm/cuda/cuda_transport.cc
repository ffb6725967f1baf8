#include "comm/cuda/cuda_transport.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"
#include "comm/cuda/reduce_kernels.h"
#include "comm/fabric_transport.h"
#include "comm/op_label.h"
#include "comm/stream_plan.h"

namespace jitpipe {
namespace {

// Rank r's view of the fabric: the shared forwarding, plus the device's
// streams, stream waits and markers.
class CudaTransport final : public FabricTransport<CudaFabric> {
 public:
  using FabricTransport::FabricTransport;

  const DeviceStreams* device_streams() const override { return &fabric()->streams(rank()); }
  absl::StatusOr<bool> StreamWait(RequestId request, void* stream) override {
    return fabric()->StreamWait(request, stream);
  }
  absl::StatusOr<RequestId> PostMarker(const OpInfo& info) override {
    return fabric()->Marker(rank(), info);
  }
};

}  // namespace

CudaFabric::CudaFabric(int size, const CudaOptions& options, AbortHook on_abort)
    : size_(size), options_(options), on_abort_(std::move(on_abort)),
      requests_(options.poll_sleep) {}

absl::StatusOr<std::unique_ptr<CudaFabric>> CudaFabric::Create(int size, const CudaOptions& options,
                                                               AbortHook on_abort) {
  RETURN_IF_ERROR(UseDevice(options.device));
  std::unique_ptr<CudaFabric> fabric(new CudaFabric(size, options, std::move(on_abort)));
  fabric->ranks_.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    RankStreams& s = fabric->ranks_[r];
    ASSIGN_OR_RETURN(s.compute, OwnedStream::Create());
    ASSIGN_OR_RETURN(s.p2p, OwnedStream::Create());
    ASSIGN_OR_RETURN(s.reduce, OwnedStream::Create());
    s.streams = {options.device, s.compute.get()};
  }
  ASSIGN_OR_RETURN(fabric->staging_pool_, CreateMemoryPool(options.device));
  return fabric;
}

CudaFabric::~CudaFabric() {
  SynchronizeStreams();
  absl::MutexLock lock(&mu_);
  mailbox_.ForEachSend([&](PendingSend& send) {
    if (send.staging != nullptr) (void)cudaFree(send.staging);
    requests_.events().Give(send.staged);
  });
  mailbox_.ForEachRecv([&](PendingRecv& recv) { requests_.events().Give(recv.ready); });
  for (auto& [key, c] : collectives_) {
    for (cudaEvent_t e : c.ready) requests_.events().Give(e);
  }
  if (staging_pool_ != nullptr) (void)cudaMemPoolDestroy(staging_pool_);
}

absl::Status CudaFabric::AddGroups(absl::Span<const Group> groups) {
  RETURN_IF_ERROR(CheckGroups(groups, size_));
  absl::MutexLock lock(&mu_);
  for (const Group& group : groups) groups_.insert(group.ranks);
  return absl::OkStatus();
}

void CudaFabric::Abort(int rank, const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (!requests_.AbortStatus().ok()) return;
    requests_.Abort(RankFailed(rank, reason));
  }
  if (on_abort_) on_abort_(rank, reason);
}

absl::Status CudaFabric::AbortStatus() const { return requests_.AbortStatus(); }

int64_t CudaFabric::InFlightBytes() const {
  absl::MutexLock lock(&mu_);
  return mailbox_.in_flight();
}

int64_t CudaFabric::PeakInFlightBytes() const {
  absl::MutexLock lock(&mu_);
  return mailbox_.peak_in_flight();
}

void CudaFabric::StartWatchdog(absl::Duration timeout, World::TimeoutHandler handler) {
  requests_.StartWatchdog(
      timeout, options_.watchdog_interval,
      [this, handler = std::move(handler)](int owner, const absl::Status& status) {
        if (handler) handler(owner, status);
        Abort(owner, std::string(status.message()));
      });
}

absl::Status CudaFabric::CheckPeer(int self, int peer) const {
  RETURN_IF_ERROR(requests_.AbortStatus());
  if (peer < 0 || peer >= size_ || peer == self) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", self, ": invalid peer ", peer));
  }
  return absl::OkStatus();
}

absl::Status CudaFabric::CheckGroup(int self, const Group& group) const {
  RETURN_IF_ERROR(requests_.AbortStatus());
  if (group.IndexOf(self) < 0) return NotAMemberError(self, group);
  if (!IsImplicitGroup(group, size_) && !groups_.contains(group.ranks)) {
    return NotRequestedError(self, group);
  }
  return absl::OkStatus();
}

absl::StatusOr<cudaEvent_t> CudaFabric::ReadyEvent(int rank) {
  ASSIGN_OR_RETURN(cudaEvent_t ready, requests_.events().Take());
  if (absl::Status s = CUDA_STATUS(cudaEventRecord(ready, ranks_[rank].compute.get())); !s.ok()) {
    requests_.events().Give(ready);
    return s;
  }
  return ready;
}

absl::Status CudaFabric::Deliver(int dst, const PendingRecv& recv, const void* source,
                                 size_t size, cudaEvent_t source_ready, RequestId send,
                                 const std::string& send_what) {
  if (size != recv.bytes.size()) {
    requests_.Fail(recv.id, absl::InvalidArgumentError(absl::StrCat(
                                requests_.what(recv.id), " expects ", recv.bytes.size(),
                                " bytes but the matching ", send_what, " has ", size)));
    if (send != 0) requests_.Complete(send);  // the sender's part is done
    return absl::OkStatus();
  }
  const cudaEvent_t recv_done = requests_.done(recv.id);
  const cudaEvent_t send_done = send != 0 ? requests_.done(send) : nullptr;
  const absl::Status carried = CarrySteps(
      PlanOneGpuCopy(send != 0), [&](const StreamRef&) { return ranks_[dst].p2p.get(); },
      [&](EventSlot slot) -> cudaEvent_t {
        switch (slot) {
          case EventSlot::kReady:
            return recv.ready;
          case EventSlot::kPeerReady:
            return source_ready;
          case EventSlot::kDone:
            return recv_done;
          case EventSlot::kPeerDone:
            return send_done;
        }
        return nullptr;
      },
      [&](const DeviceStep&, cudaStream_t stream) -> absl::Status {
        if (size == 0) return absl::OkStatus();
        return CUDA_STATUS(
            cudaMemcpyAsync(recv.bytes.data(), source, size, cudaMemcpyDefault, stream));
      });
  RETURN_IF_ERROR(carried);
  requests_.Issued(recv.id);
  if (send != 0) requests_.Issued(send);
  return absl::OkStatus();
}

absl::StatusOr<RequestId> CudaFabric::Send(int self, int peer, uint64_t tag,
                                           absl::Span<const std::byte> bytes, const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPeer(self, peer));
  const std::string what = OpLabel::Send(peer, info).ToString();
  ASSIGN_OR_RETURN(RequestId id, requests_.New(self, what));
  absl::StatusOr<cudaEvent_t> ready = ReadyEvent(self);
  if (!ready.ok()) {
    requests_.Drop(id);
    return ready.status();
  }
  const P2pKey key{self, peer, tag};
  absl::Status issued;
  if (std::optional<PendingRecv> recv = mailbox_.TakeRecv(key); recv.has_value()) {
    issued = Deliver(peer, *recv, bytes.data(), bytes.size(), *ready, id, what);
    requests_.events().Give(recv->ready);
  } else {
    issued = Stage(self, id, key, bytes, *ready, what);
  }
  requests_.events().Give(*ready);  // what waits on it is enqueued
  if (!issued.ok()) {
    requests_.Drop(id);
    return issued;
  }
  return id;
}

// The send's receive is not posted: its bytes go into a staging buffer now
// (PlanOneGpuStagedSend), and the send is complete once they are there.
absl::Status CudaFabric::Stage(int self, RequestId id, const P2pKey& key,
                               absl::Span<const std::byte> bytes, cudaEvent_t ready,
                               const std::string& what) {
  PendingSend staged{id, nullptr, bytes.size(), nullptr, what};
  cudaStream_t stream = ranks_[self].p2p.get();
  ASSIGN_OR_RETURN(staged.staged, requests_.events().Take());
  const cudaEvent_t done = requests_.done(id);
  absl::Status carried = absl::OkStatus();
  if (staged.size > 0) {
    carried = CUDA_STATUS(
        cudaMallocFromPoolAsync(&staged.staging, staged.size, staging_pool_, stream));
  }
  if (carried.ok()) {
    carried = CarrySteps(
        PlanOneGpuStagedSend(), [&](const StreamRef&) { return stream; },
        [&](EventSlot slot) { return slot == EventSlot::kReady ? ready : done; },
        [&](const DeviceStep&, cudaStream_t s) -> absl::Status {
          if (staged.size == 0) return absl::OkStatus();
          return CUDA_STATUS(
              cudaMemcpyAsync(staged.staging, bytes.data(), staged.size, cudaMemcpyDefault, s));
        });
  }
  if (carried.ok()) carried = CUDA_STATUS(cudaEventRecord(staged.staged, stream));
  if (!carried.ok()) {
    requests_.events().Give(staged.staged);
    return carried;
  }
  requests_.Issued(id);
  mailbox_.AddSend(key, staged, static_cast<int64_t>(staged.size));
  return absl::OkStatus();
}

absl::StatusOr<RequestId> CudaFabric::Recv(int self, int peer, uint64_t tag,
                                           absl::Span<std::byte> bytes, const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPeer(self, peer));
  const std::string what = OpLabel::Receive(peer, info).ToString();
  ASSIGN_OR_RETURN(RequestId id, requests_.New(self, what));
  absl::StatusOr<cudaEvent_t> ready = ReadyEvent(self);
  if (!ready.ok()) {
    requests_.Drop(id);
    return ready.status();
  }
  const P2pKey key{peer, self, tag};
  std::optional<PendingSend> taken = mailbox_.TakeSend(key);
  if (!taken.has_value()) {
    mailbox_.AddRecv(key, {id, bytes, *ready});
    return id;
  }
  const PendingSend& send = *taken;
  absl::Status issued =
      Deliver(self, {id, bytes, *ready}, send.staging, send.size, send.staged, 0, send.what);
  if (send.staging != nullptr) {  // after the copy out, in the receiver's p2p order
    const absl::Status freed = CUDA_STATUS(cudaFreeAsync(send.staging, ranks_[self].p2p.get()));
    if (issued.ok()) issued = freed;
  }
  requests_.events().Give(send.staged);
  requests_.events().Give(*ready);
  if (!issued.ok()) {
    requests_.Drop(id);
    return issued;
  }
  return id;
}

absl::StatusOr<RequestId> CudaFabric::PostCollective(int self, const Group& group,
                                                     bool reduce_scatter,
                                                     absl::Span<const float> input,
                                                     absl::Span<float> output, ReduceOp op,
                                                     const OpInfo& info) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckGroup(self, group));
  const size_t members = group.ranks.size();
  const OpLabel label = OpLabel::Collective(reduce_scatter, members, info);
  if (reduce_scatter) {
    RETURN_IF_ERROR(CheckReduceScatterSizes(self, label, input.size(), output.size(), members));
  }
  const std::string what = label.ToString();
  const std::string who = absl::StrCat("rank ", self, ": ", what);
  RETURN_IF_ERROR(RequireDeviceMemory(input.data(), input.size() * sizeof(float), who));
  RETURN_IF_ERROR(RequireDeviceMemory(output.data(), output.size() * sizeof(float), who));
  ASSIGN_OR_RETURN(RequestId id, requests_.New(self, what));
  absl::StatusOr<cudaEvent_t> ready = ReadyEvent(self);
  if (!ready.ok()) {
    requests_.Drop(id);
    return ready.status();
  }
  const int index = group.IndexOf(self);
  const uint64_t seq = next_collective_[{self, group.ranks}]++;
  Collective& c = collectives_[{group.ranks, seq}];
  if (c.ids.empty()) {
    c.reduce_scatter = reduce_scatter;
    c.op = op;
    c.count = input.size();
    c.ids.assign(members, 0);
    c.inputs.assign(members, nullptr);
    c.outputs.assign(members, nullptr);
    c.ready.assign(members, nullptr);
  }
  if (c.reduce_scatter != reduce_scatter || c.count != input.size()) {
    requests_.events().Give(*ready);
    requests_.Fail(id, absl::InvalidArgumentError(absl::StrCat(
                           "rank ", self, " posted a different collective or size at position ",
                           seq, " of group ", group.ToString())));
    return id;
  }
  c.ids[index] = id;
  c.inputs[index] = input.data();
  c.outputs[index] = output.data();
  c.ready[index] = *ready;
  if (++c.posted < static_cast<int>(members)) return id;
  const absl::Status reduced = Reduce(self, c);
  for (cudaEvent_t e : c.ready) requests_.events().Give(e);
  for (RequestId member : c.ids) {
    if (reduced.ok()) {
      requests_.Issued(member);
    } else {
      requests_.Fail(member, reduced);
    }
  }
  collectives_.erase({group.ranks, seq});
  return id;
}

// PlanReductionSteps carried out on `last`'s reduction stream, with the
// one-GPU meaning of each step: the ready events were recorded at each
// member's post and "wait ready" waits for every member's; a collective is
// the sum of the members' slices in group order into a scratch buffer,
// rounded to the wire dtype (so to-wire and from-wire have nothing left to
// do), averaged if asked, copied back to every member (all-reduce) or to
// each shard's owner (reduce-scatter); "record done" records every
// member's done event, after the scratch buffer's free.
absl::Status CudaFabric::Reduce(int last, Collective& c) {
  const int members = static_cast<int>(c.ids.size());
  ASSIGN_OR_RETURN(
      ReductionPlan plan,
      PlanReduction(c.reduce_scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                    options_.reduction.wire, static_cast<int64_t>(c.count), members,
                    options_.reduction.buckets));
  const bool bf16 = plan.wire == WireType::kBf16;
  cudaStream_t stream = ranks_[last].reduce.get();
  float* scratch = nullptr;
  if (plan.elements > 0) {
    CUDA_CALL(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&scratch),
                                      static_cast<size_t>(plan.elements) * sizeof(float),
                                      staging_pool_, stream));
  }
  // The sum of one slice [begin, begin + n) into the scratch buffer.
  auto sum = [&](int64_t begin, int64_t n) -> absl::Status {
    CUDA_CALL(cuda_kernels::Init(scratch + begin, c.inputs[0] + begin, n, bf16, stream));
    for (int m = 1; m < members; ++m) {
      CUDA_CALL(cuda_kernels::Accumulate(scratch + begin, c.inputs[m] + begin, n, bf16, stream));
    }
    if (c.op == ReduceOp::kAverage) {
      CUDA_CALL(cuda_kernels::Scale(scratch + begin, n, 1.0f / static_cast<float>(members), bf16,
                                    stream));
    }
    return absl::OkStatus();
  };
  auto copy = [&](float* to, int64_t begin, int64_t n) -> absl::Status {
    return CUDA_STATUS(cudaMemcpyAsync(to, scratch + begin, static_cast<size_t>(n) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, stream));
  };
  for (const DeviceStep& step : PlanReductionSteps(plan)) {
    if (step.kind == DeviceStep::Kind::kWait) {
      for (cudaEvent_t ready : c.ready) CUDA_CALL(cudaStreamWaitEvent(stream, ready, 0));
    } else if (step.kind == DeviceStep::Kind::kRecord && step.event == EventSlot::kDone) {
      if (scratch != nullptr) CUDA_CALL(cudaFreeAsync(scratch, stream));
      for (RequestId member : c.ids) CUDA_CALL(cudaEventRecord(requests_.done(member), stream));
    } else if (step.kind == DeviceStep::Kind::kWork && step.work == DeviceWork::kCollective) {
      const ReductionBucket& b = plan.buckets[step.bucket];
      if (!c.reduce_scatter) {
        RETURN_IF_ERROR(sum(b.offset, b.count));
        for (int m = 0; m < members; ++m) {
          RETURN_IF_ERROR(copy(c.outputs[m] + b.offset, b.offset, b.count));
        }
        continue;
      }
      for (int j = 0; j < members; ++j) {
        const int64_t begin = j * plan.shard + b.offset;
        RETURN_IF_ERROR(sum(begin, b.count));
        RETURN_IF_ERROR(copy(c.outputs[j] + b.offset, begin, b.count));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> CudaFabric::Marker(int self, const OpInfo& info) {
  const std::string what = info.action.empty() ? "the compute stream" : info.action;
  ASSIGN_OR_RETURN(RequestId id, requests_.New(self, what));
  if (absl::Status s =
          CUDA_STATUS(cudaEventRecord(requests_.done(id), ranks_[self].compute.get()));
      !s.ok()) {
    requests_.Drop(id);
    return s;
  }
  requests_.Issued(id);
  return id;
}

absl::StatusOr<bool> CudaFabric::Test(RequestId id) { return requests_.Test(id); }

absl::Status CudaFabric::Wait(RequestId id, absl::Duration timeout) {
  return requests_.Wait(id, timeout);
}

absl::StatusOr<bool> CudaFabric::StreamWait(RequestId id, void* stream) {
  return requests_.StreamWait(id, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<Transport> NewCudaTransport(CudaFabric* fabric, int rank) {
  return std::make_unique<CudaTransport>(fabric, rank);
}

std::vector<void*> CudaFabric::AllStreams() const {
  std::vector<void*> out;
  for (const RankStreams& r : ranks_) {
    out.push_back(r.compute.get());
    out.push_back(r.p2p.get());
    out.push_back(r.reduce.get());
  }
  return out;
}

void CudaFabric::SynchronizeStreams() const {
  (void)cudaSetDevice(options_.device);
  for (const RankStreams& s : ranks_) {
    for (const OwnedStream* stream : {&s.compute, &s.p2p, &s.reduce}) {
      if (stream->get() != nullptr) (void)cudaStreamSynchronize(stream->get());
    }
  }
}

}  // namespace jitpipe
