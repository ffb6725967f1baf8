// The device buffer providers (stages/exec/buffer_provider.h) of a rank on a
// device backend (comm/cuda, comm/nccl), whose transport gives the device,
// the compute stream and stream waits (Transport::device_streams,
// StreamWait). Memory comes and goes in stream order; the host never waits
// for it.
//
//   DeviceJitBuffers    the stream-ordered allocator, a memory pool of the
//                       rank's own: a buffer is cudaMallocFromPoolAsync'd
//                       on the compute stream when the plan makes it live
//                       (a receive buffer right before its receive is
//                       posted, which the transport orders after the
//                       compute stream), and cudaFreeAsync'd where the plan
//                       releases it -- on the compute stream, or, for a
//                       sent buffer, right after its send (a release stream
//                       that waits for the send's completion event), so the
//                       bytes are reused only once the transfer has read
//                       them. The pool never makes one stream wait for
//                       another to reuse memory (comm/cuda/cuda_device.h).
//                       allocator_peak_bytes(): the pool's high-water mark
//                       of memory in use (cudaMemPoolAttrUsedMemHigh),
//                       reset with the counted peak at every step's start,
//                       to compare with the plan (what the CPU's
//                       TrackedBuffers measure).
//   DeviceArenaBuffers  one cudaMalloc'd slab of the plan's arena, a buffer
//                       at its planned offset: fixed addresses, so that a
//                       whole step can be captured once as a CUDA graph and
//                       replayed. A sent buffer's bytes are reused only after
//                       its send: an allocation that overlaps them makes the
//                       compute stream wait for the send's completion event
//                       (over NCCL that is a wait for the peer's receive:
//                       the program must be deadlock-free under strict
//                       semantics, as for arena buffers over MPI).
//
// Both count live bytes as the CPU providers do (the planned sizes), with a
// sent buffer counted released when its release is enqueued. Zero() is a
// cudaMemsetAsync on the compute stream. CUDA errors of a release (which
// returns nothing) are reported by the next Allocate.
//
// Thread safety: a provider belongs to one rank's compute thread.
#ifndef JITPIPE_STAGES_DEVICE_DEVICE_BUFFERS_H_
#define JITPIPE_STAGES_DEVICE_DEVICE_BUFFERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/transport.h"
#include "stages/exec/buffer_provider.h"

namespace jitpipe {

// `transport` (borrowed, must outlive the provider) is the rank's device
// transport. Errors: Unavailable in a build without CUDA; InvalidArgument
// when the transport is not a device backend's; a CUDA error.
absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceJitBuffers(
    std::vector<int64_t> buffer_bytes, Transport* transport);

// `offsets[id]` is buffer id's offset in a slab of `arena_bytes`
// (ArenaLayout, memory/memory_plan.h). Errors: as MakeDeviceJitBuffers';
// InvalidArgument when a buffer does not fit the slab.
absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceArenaBuffers(
    std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets, int64_t arena_bytes,
    Transport* transport);

// Makes `device` the calling thread's current CUDA device (the thread that
// drives a device rank calls it first: stage kernels launch on the current
// device). Errors: Unavailable without CUDA; a CUDA error.
absl::Status BindThreadToDevice(int device);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_DEVICE_DEVICE_BUFFERS_H_
