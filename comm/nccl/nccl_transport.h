// The NCCL backend's Transport (comm/transport.h): one rank's communicators
// (the job's, the requested groups', and in nccl-lazy one per directed
// edge), its streams, its requests and events (comm/cuda/device_requests.h)
// and its abort. The world (nccl_world.h) bootstraps the communicators over
// MPI and owns this. Mirrors comm/mpi/mpi_transport.h.
//
// Internal to comm/nccl: includes nccl.h.
//
// - Point-to-point: ncclSend / ncclRecv of bytes (ncclUint8) on the rank's
//   p2p stream for the peer (communicator_plan.h, StreamOf): the job's
//   communicator and stream 0 in nccl, the edge's communicator (src is its
//   rank 0, dst its rank 1) and stream in nccl-lazy; ordered after the
//   compute stream (stream_plan.h, PlanPointToPoint). Tags are recorded,
//   not matched: NCCL pairs the k-th send with the k-th receive per
//   communicator and peer. A transfer between ranks the plan has no edge
//   for is InvalidArgument.
// - Collectives: ncclAllReduce, or one ncclReduce per member (rooted at the
//   shard's owner, grouped) for a reduce-scatter that leaves each shard at
//   its place, per bucket, on the reduction stream, in the wire dtype (bf16:
//   converted into a buffer of the backend's pool and back;
//   PlanReductionSteps); kAverage is ncclAvg. The rank alone reduces
//   nothing (a reduce-scatter copies its shard).
// - Every NCCL enqueue happens under one lock. Abort (the rank's failure,
//   the watchdog, an abort notice from another process over MPI, seen by
//   Test and Wait) fails every pending request and calls ncclCommAbort on
//   every communicator, which ends NCCL kernels waiting for a dead peer.
#ifndef JITPIPE_COMM_NCCL_NCCL_TRANSPORT_H_
#define JITPIPE_COMM_NCCL_NCCL_TRANSPORT_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/cuda/cuda_device.h"
#include "comm/cuda/device_requests.h"
#include "comm/mpi/mpi_world.h"
#include "comm/nccl/communicator_plan.h"
#include "comm/nccl/nccl_world.h"
#include "comm/transport.h"

namespace jitpipe {

class NcclRank {
 public:
  // Borrows `mpi` (the job's bootstrap and abort notices), which must
  // outlive it. `world_comm` is the job's communicator, owned from now on.
  NcclRank(MpiWorld* mpi, const NcclOptions& options, int device, CommunicatorPlan plan,
           ncclComm_t world_comm, std::string edge_ids);
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;
  // Waits for the streams (unless aborted), then destroys the communicators.
  ~NcclRank();

  // Creates the streams and, with options.connect_before_first_step, the
  // edge communicators (nccl-lazy) or the warmed-up connections (nccl).
  absl::Status Setup();

  // The group communicators, one per group of `groups` not made yet, from
  // `ids` (one ncclUniqueId per new group, in order); this rank takes part
  // in those it is a member of.
  absl::Status AddGroups(absl::Span<const Group> groups, const std::string& ids)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Which of `groups` need a communicator made (neither made nor implicit).
  std::vector<Group> NewGroups(absl::Span<const Group> groups) const ABSL_LOCKS_EXCLUDED(mu_);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  const CommunicatorPlan& plan() const { return plan_; }
  const DeviceStreams& streams() const { return streams_; }

  // Transport's contract (nccl_transport.h's file comment).
  absl::StatusOr<RequestId> PostP2p(bool send, int peer, absl::Span<std::byte> bytes,
                                    const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> PostCollective(const Group& group, bool reduce_scatter,
                                           absl::Span<const float> input,
                                           absl::Span<float> output, ReduceOp op,
                                           const OpInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RequestId> PostMarker(const OpInfo& info);
  absl::StatusOr<bool> Test(RequestId id);
  absl::Status Wait(RequestId id, absl::Duration timeout);
  absl::StatusOr<bool> StreamWait(RequestId id, void* stream);

  // Fails every pending request with Aborted "rank <rank> failed: <reason>
  // (...)" and aborts the communicators; `notify`: tells the other
  // processes too (MpiWorld::Abort). The first call wins.
  void Abort(int rank, const std::string& reason, bool notify);
  bool aborted() const { return !requests_.AbortStatus().ok(); }
  void StartWatchdog(absl::Duration timeout, World::TimeoutHandler handler);

 private:
  // A notice from another process (seen through MPI) aborts here too.
  absl::Status CheckRemoteAbort();
  absl::Status ConnectEdges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WarmUpNeighbours() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ncclComm_t> GroupComm(const Group& group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EnqueueReduction(const ReductionPlan& plan, ncclComm_t comm, int member,
                                const float* input, float* output, ReduceOp op,
                                cudaEvent_t ready, cudaEvent_t done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortCommunicators();

  MpiWorld* const mpi_;
  const NcclOptions options_;
  const int rank_;
  const int size_;
  const int device_;
  const CommunicatorPlan plan_;
  const std::string edge_ids_;  // one ncclUniqueId per plan edge (nccl-lazy)
  DeviceRequests requests_;
  cudaMemPool_t pool_ = nullptr;  // bf16 wire buffers
  OwnedStream compute_, reduce_;
  std::vector<OwnedStream> p2p_;  // by plan stream slot
  DeviceStreams streams_;
  std::atomic<bool> comms_aborted_{false};
  absl::Time next_notice_poll_ = absl::InfinitePast();  // by the posting threads only

  mutable absl::Mutex mu_;  // every NCCL enqueue
  ncclComm_t world_comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::vector<int>, ncclComm_t> group_comms_ ABSL_GUARDED_BY(mu_);
  std::map<Edge, ncclComm_t> edge_comms_ ABSL_GUARDED_BY(mu_);
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
};

// The rank's Transport over `rank`, which must outlive it.
std::unique_ptr<Transport> NewNcclTransport(NcclRank* rank);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_NCCL_NCCL_TRANSPORT_H_
