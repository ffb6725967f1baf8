// The transport: how pipeline ranks move bytes, as one small interface that
// every backend implements (in-process threads, MPI processes, NCCL GPUs),
// shaped like gloo's transport and NCCL's API.
//
// A Transport belongs to one rank of a world of size() ranks. It posts
// point-to-point sends and receives and data-parallel collectives; each post
// returns a RequestId that Test() polls and Wait() blocks on, with an explicit
// timeout. Operations posted between GroupStart() and GroupEnd() are issued
// together (NCCL's ncclGroupStart/ncclGroupEnd); backends without grouping
// treat the scope as a no-op.
//
// Matching: a send to peer P with tag T matches the receive posted by P from
// this rank with tag T; sends and receives of one (source, destination, tag)
// match in posting order. Tags must be unique among the operations in flight
// between two ranks (the runtime derives them from stage, microbatch and
// kind).
//
// Completion: a send is complete when its bytes may be reused by the caller
// (MPI's rule); a receive is complete when the bytes have arrived. A backend
// may complete a send before the peer has posted its receive by copying the
// bytes (an eager protocol, as MPI does for small messages); it reports such
// bytes in InFlightBytes().
//
// Collectives run over a group of ranks that every process has requested
// from its world before posting (World::CreateGroups, comm/world.h), over
// the whole world {0, ..., size - 1}, or over the rank alone {rank}; any
// other group, or one without this rank, is InvalidArgument naming it.
//
// Errors: Wait() returns DeadlineExceeded when the timeout passes, naming the
// operation (OpInfo), which stays pending (a later Wait may still complete
// it); Aborted once any rank of the world has called Abort() (a failed
// peer), naming that rank and its reason; InvalidArgument for a receive
// buffer whose size differs from the matching send. Test() and Wait() of a
// request that is unknown, or was already reported complete, are NotFound.
//
// Device backends (comm/cuda, comm/nccl) move device memory on streams:
// their requests are CUDA events. Every operation is ordered after the work
// enqueued so far on the rank's compute stream (device_streams()), whose
// stage calls wrote (or whose allocator allocated) its buffers, and
// StreamWait() turns a request into a stream dependency, so that a driver
// never blocks the host on one in the steady state (stages/exec/
// rank_executor.h). A send's buffer may be released in stream order right
// after it is posted (cudaFreeAsync after StreamWait on a stream of the
// caller's), never reused on the host before Test or Wait reported it.
//
// Thread safety: a Transport may be used from several threads of its rank at
// once (the compute thread and the reduction thread).
#ifndef JITPIPE_COMM_TRANSPORT_H_
#define JITPIPE_COMM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace jitpipe {

// How a rank's failure is told to the others, on every backend and in the
// replay's report: "rank 3 failed: <reason>".
std::string RankFailed(int rank, absl::string_view reason);

// What an operation is for, carried into the flight recorder and error
// messages. Transports do not interpret it.
struct OpInfo {
  int stage = -1;
  int microbatch = -1;
  int program_index = -1;
  std::string action;  // the action's text, e.g. "1SEND_F2"
};

using RequestId = uint64_t;

enum class ReduceOp { kSum, kAverage };

// A set of ranks taking part in a collective, in the same order on every
// member (e.g. one pipeline stage's data-parallel replicas).
// Two groups with the same ranks in another order are different groups:
// a member's index (its reduce-scatter shard) is its position.
// A device backend's rank: its device ordinal and the stream its Stage calls
// enqueue on (a cudaStream_t, opaque so that nothing here depends on CUDA).
struct DeviceStreams {
  int device = -1;
  void* compute = nullptr;
};

struct Group {
  std::vector<int> ranks;
  int IndexOf(int rank) const;  // -1 when not a member
  std::string ToString() const;  // "{0, 2}"
  friend bool operator==(const Group&, const Group&) = default;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Posts a send of `bytes` to `peer`. REQUIRES: `bytes` stays valid and
  // unmodified until the request completes.
  virtual absl::StatusOr<RequestId> PostSend(int peer, uint64_t tag,
                                             absl::Span<const std::byte> bytes,
                                             const OpInfo& info) = 0;

  // Posts a receive from `peer` into `bytes`. REQUIRES: `bytes` stays valid
  // and untouched by the caller until the request completes.
  virtual absl::StatusOr<RequestId> PostRecv(int peer, uint64_t tag, absl::Span<std::byte> bytes,
                                             const OpInfo& info) = 0;

  // Sums (or averages) `data` element-wise over `group`, in place.
  // REQUIRES: every member posts the same group with the same element
  // count, collectives in the same order. Errors: InvalidArgument when this
  // rank is not in the group or the group was not requested (see above).
  virtual absl::StatusOr<RequestId> PostAllReduce(const Group& group, absl::Span<float> data,
                                                  ReduceOp op, const OpInfo& info) = 0;

  // Reduces `input` over `group` and leaves this member's shard (element
  // range [i * n, (i + 1) * n) for group index i, n = output.size()) in
  // `output`. Errors: as PostAllReduce's, and InvalidArgument when
  // input.size() != n * group size.
  virtual absl::StatusOr<RequestId> PostReduceScatter(const Group& group,
                                                      absl::Span<const float> input,
                                                      absl::Span<float> output, ReduceOp op,
                                                      const OpInfo& info) = 0;

  // True once the request has completed; its error if it failed. A completed
  // request is forgotten after the call that reports it.
  virtual absl::StatusOr<bool> Test(RequestId request) = 0;

  // Blocks until the request completes or `timeout` passes.
  virtual absl::Status Wait(RequestId request, absl::Duration timeout) = 0;

  // Device backends: the rank's device and compute stream, owned by the
  // transport; null on host backends, whose requests complete on the host.
  virtual const DeviceStreams* device_streams() const { return nullptr; }

  // Device backends: makes `stream` wait on the device for the request's
  // completion (cudaStreamWaitEvent on its completion event) without
  // blocking the host, and returns true; or returns false, enqueuing
  // nothing, while the operation is not issued to the device yet (one-GPU
  // mode: a transfer is issued once both sides have posted). The request
  // stays pending: Test and Wait still report its completion. Errors:
  // NotFound for an unknown request; Aborted once the world is; a CUDA
  // error; Unimplemented on host backends (the default).
  virtual absl::StatusOr<bool> StreamWait(RequestId request, void* stream);

  // Device backends: a request that completes once the work enqueued so far
  // on the rank's compute stream has (an event recorded there): how a
  // driver learns, at the step end, when the device finished computing.
  // Errors: Aborted once the world is; a CUDA error; Unimplemented on host
  // backends (the default), where compute ends when its call returns.
  virtual absl::StatusOr<RequestId> PostMarker(const OpInfo& info);

  virtual void GroupStart() {}
  virtual absl::Status GroupEnd() { return absl::OkStatus(); }

  // Marks this rank failed: every pending and future operation of every rank
  // in the world fails with Aborted naming this rank and `reason`. Backends
  // spanning processes propagate it as far as they can (MPI: a notice to
  // every other process).
  virtual void Abort(const std::string& reason) = 0;

  // Bytes the transport currently holds on behalf of completed sends whose
  // receives are not posted yet (eager protocol), and the most it held.
  virtual int64_t InFlightBytes() const { return 0; }
  virtual int64_t PeakInFlightBytes() const { return 0; }
};

}  // namespace jitpipe

#endif  // JITPIPE_COMM_TRANSPORT_H_
