// The stream and event plan of the device backends (comm/cuda, comm/nccl):
// which stream each operation of a rank runs on, which events order it after
// what, and how a gradient reduction is cut into buckets and carried in its
// wire dtype -- as plain data, built by pure functions, so that the rules
// are written once, tested on the CPU, and the transports only carry out
// the steps (cudaEventRecord, cudaStreamWaitEvent, the work itself).
//
// A device rank has three kinds of stream:
//   compute   the Stage calls and the buffer provider's allocations
//   p2p[i]    point-to-point traffic: one stream (nccl, cuda), or one per
//             directed edge of the rank (nccl-lazy), so that a FIFO is one
//             communicator's, as the validator proves programs for
//   reduce    gradient reductions, one after the other
// and every operation has two events: `ready`, recorded on the compute
// stream when the operation is posted (its buffer is written, or allocated,
// in compute order), and `done`, recorded after its work. Nothing waits on
// the host: the compute stream waits for a receive with cudaStreamWaitEvent
// on its `done` (Transport::StreamWait), and the host looks at `done` only at
// the step end and in the watchdog.
//
//   send     record ready on compute; wait ready on p2p[i]; send on p2p[i];
//            record done on p2p[i]
//   recv     record ready on compute; wait ready on p2p[i]; recv on p2p[i];
//            record done on p2p[i]
//   one-GPU transfer (comm/cuda: ranks are streams of one device; the copy
//            is enqueued once both sides have posted, on the receiver's
//            p2p stream, after the receive's ready event and the send's --
//            peer-ready: its ready event, or its staging copy's end):
//            wait ready on p2p[0]; wait peer-ready on p2p[0]; copy on p2p[0];
//            record done on p2p[0][; record peer-done on p2p[0]: the send's
//            completion, when it was not staged]
//   one-GPU staged send (the receive is not posted yet: the bytes go to a
//            staging buffer now, as the in-process backend's eager send):
//            wait ready on p2p[0]; stage on p2p[0]; record done on p2p[0]
//   reduction (see PlanReduction):
//            record ready on compute; wait ready on reduce; [to-wire on
//            reduce;] per bucket: collective b on reduce; [from-wire on
//            reduce;] record done on reduce
//
// Thread-compatible value types and pure functions.
#ifndef JITPIPE_COMM_STREAM_PLAN_H_
#define JITPIPE_COMM_STREAM_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace jitpipe {

enum class StreamKind : uint8_t { kCompute, kP2p, kReduce };

struct StreamRef {
  StreamKind kind = StreamKind::kCompute;
  int index = 0;  // kP2p: the rank's p2p stream slot
  friend bool operator==(const StreamRef&, const StreamRef&) = default;
};

enum class EventSlot : uint8_t { kReady, kPeerReady, kDone, kPeerDone };

enum class DeviceWork : uint8_t {
  kSend,        // ncclSend
  kRecv,        // ncclRecv
  kCopy,        // one device-to-device copy into the receive buffer
  kStage,       // one copy into a staging buffer (the receive is not posted yet)
  kToWire,      // fp32 gradients converted to the wire dtype (bf16)
  kCollective,  // one bucket's collective
  kFromWire,    // the reduced values converted back to fp32
};

struct DeviceStep {
  enum class Kind : uint8_t { kRecord, kWait, kWork };
  Kind kind = Kind::kWork;
  StreamRef stream;
  EventSlot event = EventSlot::kReady;  // kRecord, kWait
  DeviceWork work = DeviceWork::kSend;  // kWork
  int bucket = -1;                      // kCollective: the bucket
};

// "record ready on compute; wait ready on p2p[1]; send on p2p[1]; record
// done on p2p[1]".
std::string StepsToString(absl::Span<const DeviceStep> steps);

enum class P2pDirection : uint8_t { kSend, kRecv };

// A send or receive on NCCL stream slot `p2p`.
std::vector<DeviceStep> PlanPointToPoint(P2pDirection direction, int p2p);
// The one-GPU transfers (file comment): the copy once both sides posted,
// or the send's staging copy.
std::vector<DeviceStep> PlanOneGpuCopy(bool send_pending);
std::vector<DeviceStep> PlanOneGpuStagedSend();

// ---- Gradient reductions ----------------------------------------------------

// The dtype a reduction moves (DataParallelSpec::EffectiveReduceDtype:
// reduce_dtype, or the grad dtype when it is null). Gradients are fp32 in
// memory; a bf16 wire converts them before and after, so the reduction moves
// half the bytes, as the cost model charges.
enum class WireType : uint8_t { kFp32, kBf16 };
absl::string_view WireTypeName(WireType wire);  // "fp32", "bf16"
int WireTypeBytes(WireType wire);               // 4, 2

// How a device world reduces: the wire dtype and the buckets of every
// reduction (DataParallelSpec: EffectiveReduceDtype, buckets).
struct DeviceReduction {
  WireType wire = WireType::kFp32;
  int buckets = 1;
};

enum class CollectiveKind : uint8_t { kAllReduce, kReduceScatter };

// A bucket: elements [offset, offset + count) of the buffer (all-reduce),
// or of every member's shard (reduce-scatter: member i's elements
// [i * shard + offset, i * shard + offset + count)).
struct ReductionBucket {
  int64_t offset = 0;
  int64_t count = 0;
  friend bool operator==(const ReductionBucket&, const ReductionBucket&) = default;
};

struct ReductionPlan {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  WireType wire = WireType::kFp32;
  int64_t elements = 0;  // reduced: all-reduce the buffer, reduce-scatter members x shard
  int64_t shard = 0;     // reduce-scatter: elements per member; all-reduce: 0
  std::vector<ReductionBucket> buckets;
  // The operand's bytes in the wire dtype (Model::ReduceBytes for the
  // stage), before the algorithm's traffic fraction.
  int64_t wire_bytes = 0;
  bool converts() const { return wire != WireType::kFp32; }
};

// The reduction of `elements` fp32 gradients over `members` ranks in
// `buckets` buckets, as the simulator charges it (model.h, "Reduction
// buckets"): equal buckets, the last one taking the remainder, none empty
// (fewer buckets when there are fewer elements). A reduce-scatter reduces
// the first members x (elements / members) elements and buckets each shard.
// Errors: InvalidArgument when elements < 0, members < 1 or buckets < 1.
absl::StatusOr<ReductionPlan> PlanReduction(CollectiveKind kind, WireType wire, int64_t elements,
                                            int members, int buckets);

// The stream steps of `plan` (file comment).
std::vector<DeviceStep> PlanReductionSteps(const ReductionPlan& plan);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_STREAM_PLAN_H_
