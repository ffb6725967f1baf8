// The NCCL backend's World (comm/world.h): one rank per process and per GPU,
// launched by mpirun, point-to-point and collectives over NCCL, the job
// bootstrapped over MPI (nccl-tests' way: rank 0 calls ncclGetUniqueId and
// broadcasts the id, every rank calls ncclCommInitRankConfig). The world
// owns an MpiWorld (comm/mpi/mpi_world.h) for everything that is not
// device traffic -- the barrier, gathering results, collecting reports after
// a failure, aborting the other processes -- and the rank's Transport
// (nccl_transport.h). This header includes neither nccl.h nor mpi.h.
//
// Modes (communicator_plan.h): nccl (eager: one communicator over the job,
// bound to the rank's device at creation, one p2p stream, neighbour
// connections warmed up before the first step) and nccl-lazy (a 2-rank
// communicator and a stream per directed edge of options.edges, created in
// disjoint rounds before the first step or at the first transfer). In both
// modes the whole job has a communicator for collectives over the world,
// and CreateGroups makes one per requested group (ids broadcast by rank 0,
// members initialising in the list's order).
//
// Matching is NCCL's: in posting order per communicator and peer, never by
// tag (P2pOrdering::kFifoPerRank for nccl, kFifoPerEdge for nccl-lazy);
// programs are checked for it before they run (runtime/replay_plan.h). A
// receive of another size than its send is not detected (NCCL's contract
// is equal counts); the replay's programs come from one plan on every
// rank. Sends complete once their receive ran (kRendezvous). Buffers are
// device memory.
//
// Streams, events, completion and the watchdog are the one-GPU backend's
// (comm/cuda/cuda_world.h), with NCCL work on the p2p and reduction
// streams: ncclSend / ncclRecv, ncclAllReduce / ncclReduce in the world's
// wire dtype and buckets (comm/stream_plan.h). Abort: the watchdog's
// timeout or any rank's failure calls ncclCommAbort on every communicator
// of the process (NCCL kernels waiting for a dead peer end), notifies the
// other processes over MPI, and fails every pending operation with Aborted.
//
// Thread safety: the world and its transport may be used from any thread.
#ifndef JITPIPE_COMM_NCCL_NCCL_WORLD_H_
#define JITPIPE_COMM_NCCL_NCCL_WORLD_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/mpi/mpi_world.h"
#include "comm/nccl/communicator_plan.h"
#include "comm/stream_plan.h"
#include "comm/transport.h"
#include "comm/world.h"

namespace jitpipe {

struct NcclOptions {
  NcclMode mode = NcclMode::kEager;
  // The directed pairs of world ranks that exchange data (the replay's:
  // runtime/replay_plan.h, P2pEdges); empty: every pair.
  std::vector<Edge> edges;
  // nccl-lazy: create the edge communicators before the first step (true),
  // or when the rank first posts a transfer (all of its edges, in the
  // plan's order). nccl: warm up the neighbour connections before the first
  // step (true) or not at all.
  bool connect_before_first_step = true;
  // The rank's CUDA device; -1: the process's local rank on its host
  // (OMPI_COMM_WORLD_LOCAL_RANK) modulo the devices there.
  int device = -1;
  DeviceReduction reduction;
  MpiOptions mpi;
  absl::Duration poll_sleep = absl::Microseconds(20);
  absl::Duration watchdog_interval = absl::Milliseconds(50);
  absl::Duration setup_timeout = absl::Seconds(120);  // bootstrap and communicator creation
};

class NcclWorld : public World {
 public:
  virtual int rank() const = 0;  // world rank
  virtual int device() const = 0;
  virtual const CommunicatorPlan& plan() const = 0;
  // The rank's transport; owned by the world, valid while it lives.
  virtual Transport& transport() = 0;
  using World::transport;
};

// The backend's factory: starts MPI (CreateMpiWorld with options.mpi),
// picks and checks the device, bootstraps the communicators of the plan.
// Call it once per process. Errors: Unavailable when this build has no NCCL
// backend, or "no CUDA device (...)" (comm/cuda/cuda_world.h,
// CheckCudaDevice); InvalidArgument for options out of range or edges
// outside the world; CreateMpiWorld's; an NCCL, CUDA or MPI error of the
// bootstrap (naming the call, file and line).
absl::StatusOr<std::unique_ptr<NcclWorld>> CreateNcclWorld(int* argc, char*** argv,
                                                           const NcclOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_NCCL_NCCL_WORLD_H_
