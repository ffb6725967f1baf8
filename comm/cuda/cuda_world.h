// The CUDA backend's World (comm/world.h) in one-GPU mode: every rank of the
// job is a set of streams on one device of this process -- NCCL refuses two
// ranks on one device -- and transfers are device-to-device copies ordered
// by events (comm/stream_plan.h), so that the whole just-in-time, overlap
// and CUDA-graph path runs on a machine with a single GPU. The rank threads
// of the replay driver (or one thread for all of them) post; the device
// moves the bytes. Mirrors comm/inproc/inproc_world.h, which it follows
// wherever the device does not change a rule.
//
// Per rank: a compute stream (the Stage calls; Transport::device_streams),
// a p2p stream and a reduction stream, all non-blocking, on options.device.
//
// Point-to-point: matched by (source, destination, tag), in posting order
// within a tag, as in process (P2pOrdering::kByTag: relaxed semantics).
// A send whose receive is already posted is issued at once as one copy on
// the receiver's p2p stream after both ready events; otherwise its bytes
// are staged now into a buffer of the backend's own memory pool, on the
// sender's p2p stream (the send is complete once staged, as the in-process
// eager send: SendCompletion::kEager), and copied out when the receive is
// posted. A receive posted before its send is not issued until the send is
// (Transport::StreamWait says false meanwhile). Staged bytes are
// InFlightBytes(). Buffers may be device memory or host memory
// (cudaMemcpyDefault); a receive whose matching send has another size
// fails naming both, as in process.
//
// Collectives: once every member has posted, the last one to post enqueues
// on its reduction stream, after every member's ready event, the sum of the
// members' buffers in group order (one kernel per member and bucket) into a
// scratch buffer, in the world's wire dtype (a bf16 wire rounds every
// operand and partial sum), and copies the result (or each member's shard)
// back; every member's done event is recorded there. Collectives reduce
// device memory only: a host buffer is InvalidArgument.
//
// Completion: requests are events. Test is cudaEventQuery; Wait polls it,
// sleeping options.poll_sleep between polls, until the timeout
// (DeadlineExceeded naming the operation) or an abort (Aborted "rank R
// failed: <reason> (while waiting for ...)"). The watchdog
// (World::StartWatchdog, comm/watchdog.h) probes the same events.
//
// Abort: every pending and later operation of every rank fails with Aborted
// naming the rank; what the device already runs is not cancelled (nothing
// in this backend can hang on the device: copies and kernels only).
//
// Thread safety: the world and its transports may be used from any thread.
#ifndef JITPIPE_COMM_CUDA_CUDA_WORLD_H_
#define JITPIPE_COMM_CUDA_CUDA_WORLD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/stream_plan.h"
#include "comm/world.h"

namespace jitpipe {

struct CudaOptions {
  int device = 0;               // the CUDA device every rank runs on
  DeviceReduction reduction;    // wire dtype and buckets of every reduction
  absl::Duration poll_sleep = absl::Microseconds(20);         // Wait's sleep between polls
  absl::Duration watchdog_interval = absl::Milliseconds(50);  // between watchdog rounds
};

class CudaWorld : public World {
 public:
  virtual int device() const = 0;
  // Bytes staged for sends whose receives were not posted yet, now.
  virtual int64_t InFlightBytes() const = 0;
  // Every rank's streams (cudaStream_t: compute, p2p, reduction, rank by
  // rank), owned by the world: what a step captured as a CUDA graph forks
  // into and joins (comm/cuda/step_graph.h).
  virtual std::vector<void*> streams() const = 0;
};

// OK when this build has the CUDA backend and CUDA device `device` exists.
// Errors: Unavailable "no CUDA device (<the CUDA error>)" on a machine
// without a usable device or driver, or "this build has no CUDA backend
// (nvcc or the CUDA toolkit was not found when it was configured)";
// InvalidArgument "CUDA device 3 does not exist (1 device)".
absl::Status CheckCudaDevice(int device);

// Creates a world of `size` ranks on options.device, all of them local.
// Errors: CheckCudaDevice's; InvalidArgument for size < 1 or options out of
// range; a CUDA error creating the streams or the memory pool.
absl::StatusOr<std::unique_ptr<CudaWorld>> CreateCudaWorld(int size, const CudaOptions& options);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_CUDA_WORLD_H_
