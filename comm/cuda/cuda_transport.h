// The CUDA backend's Transport (comm/transport.h) in one-GPU mode: the
// fabric every rank's transport posts into -- the ranks' streams, the
// matching of transfers, the collectives, the requests and their events,
// the staging pool, the watchdog and the job's abort state: the device
// counterpart of comm/inproc/inproc_transport.h, whose rules it keeps (see
// cuda_world.h for what the device changes). The world (cuda_world.h) owns
// the fabric and one transport per rank.
//
// Internal to comm/cuda: nothing else includes this header.
//
// Thread safety: the fabric and all its transports may be used from any
// number of threads. Every enqueue happens under the fabric's lock, so the
// order of the matching decisions is the order of the device work.
#ifndef JITPIPE_COMM_CUDA_CUDA_TRANSPORT_H_
#define JITPIPE_COMM_CUDA_CUDA_TRANSPORT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/p2p_mailbox.h"
#include "comm/cuda/cuda_device.h"
#include "comm/cuda/device_requests.h"
#include "comm/cuda/cuda_world.h"
#include "comm/transport.h"
#include "comm/world.h"

namespace jitpipe {

class CudaFabric {
 public:
  // A fabric for `size` ranks on options.device: three streams per rank and
  // a staging pool. on_abort(rank, reason) runs once, without the
  // fabric's lock, when the job is aborted. Errors: a CUDA error.
  using AbortHook = std::function<void(int rank, const std::string& reason)>;
  static absl::StatusOr<std::unique_ptr<CudaFabric>> Create(int size, const CudaOptions& options,
                                                            AbortHook on_abort);
  CudaFabric(const CudaFabric&) = delete;
  CudaFabric& operator=(const CudaFabric&) = delete;
  // Stops the watchdog, waits for the device work of every rank and frees
  // what is still staged.
  ~CudaFabric();

  int size() const { return size_; }
  int device() const { return options_.device; }
  const DeviceStreams& streams(int rank) const { return ranks_[rank].streams; }
  // Every rank's compute, p2p and reduction streams (cudaStream_t), in rank
  // order: what a captured step forks into (comm/cuda/step_graph.h).
  std::vector<void*> AllStreams() const;
  // Waits for the device work queued on every rank's streams (errors
  // ignored: for teardown).
  void SynchronizeStreams() const;

  absl::Status AddGroups(absl::Span<const Group> groups) ABSL_LOCKS_EXCLUDED(mu_);
  void Abort(int rank, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AbortStatus() const;
  int64_t InFlightBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t PeakInFlightBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // World::StartWatchdog: once.
  void StartWatchdog(absl::Duration timeout, World::TimeoutHandler handler);

  // The transports' side (Transport's contract, for rank `self`).
  absl::StatusOr<RequestId> Send(int self, int peer, uint64_t tag,
                                 absl::Span<const std::byte> bytes, const OpInfo& info)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> Recv(int self, int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                 const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> PostCollective(int self, const Group& group, bool reduce_scatter,
                                           absl::Span<const float> input,
                                           absl::Span<float> output, ReduceOp op,
                                           const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> Marker(int self, const OpInfo& info);
  absl::StatusOr<bool> Test(RequestId id);
  absl::Status Wait(RequestId id, absl::Duration timeout);
  absl::StatusOr<bool> StreamWait(RequestId id, void* stream);

 private:
  struct RankStreams {
    OwnedStream compute, p2p, reduce;
    DeviceStreams streams;
  };
  struct PendingRecv {
    RequestId id = 0;
    absl::Span<std::byte> bytes;
    cudaEvent_t ready = nullptr;  // recorded on the receiver's compute stream at the post
  };
  struct PendingSend {  // posted while its receive was not: staged
    RequestId id = 0;
    void* staging = nullptr;
    size_t size = 0;
    cudaEvent_t staged = nullptr;  // recorded after the staging copy
    std::string what;
  };
  struct Collective {
    bool reduce_scatter = false;
    ReduceOp op = ReduceOp::kSum;
    size_t count = 0;  // input elements per member
    std::vector<RequestId> ids;
    std::vector<const float*> inputs;
    std::vector<float*> outputs;
    std::vector<cudaEvent_t> ready;
    int posted = 0;
  };

  CudaFabric(int size, const CudaOptions& options, AbortHook on_abort);

  absl::Status CheckPeer(int self, int peer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckGroup(int self, const Group& group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An event recorded now on rank's compute stream.
  absl::StatusOr<cudaEvent_t> ReadyEvent(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copy of a matched transfer into the receive (PlanOneGpuCopy), or
  // the failure of a receive of another size; `send` is the send's request
  // when it is still pending (not staged), else 0.
  absl::Status Deliver(int dst, const PendingRecv& recv, const void* source, size_t size,
                       cudaEvent_t source_ready, RequestId send, const std::string& send_what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Stage(int self, RequestId id, const P2pKey& key, absl::Span<const std::byte> bytes,
                     cudaEvent_t ready, const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The sum of a complete collective, on `last`'s reduction stream.
  absl::Status Reduce(int last, Collective& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int size_;
  const CudaOptions options_;
  const AbortHook on_abort_;
  std::vector<RankStreams> ranks_;  // const after Create
  cudaMemPool_t staging_pool_ = nullptr;
  DeviceRequests requests_;  // locked after mu_ where both are

  // Ordered before requests_' lock.
  mutable absl::Mutex mu_;
  P2pMailbox<PendingRecv, PendingSend> mailbox_ ABSL_GUARDED_BY(mu_);
  std::set<std::vector<int>> groups_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, std::vector<int>>, uint64_t> next_collective_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::vector<int>, uint64_t>, Collective> collectives_ ABSL_GUARDED_BY(mu_);
};

// Rank `rank`'s Transport over `fabric`, which must outlive it.
std::unique_ptr<Transport> NewCudaTransport(CudaFabric* fabric, int rank);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_CUDA_TRANSPORT_H_
