// Small pieces shared by the code that calls the CUDA runtime (comm/cuda,
// comm/nccl, the device buffer providers): event queries and a pool of
// events, owned streams, the check that a buffer is device memory, and a
// stream-ordered memory pool. Errors come back as Status through
// cuda_error.h.
//
// This header includes cuda_runtime_api.h: for device code only, never for
// an interface header.
#ifndef JITPIPE_COMM_CUDA_CUDA_DEVICE_H_
#define JITPIPE_COMM_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "comm/stream_plan.h"

namespace jitpipe {

// True once the work before the event's last record has completed (or it
// was never recorded); false while it has not (cudaErrorNotReady, which is
// no error); the CUDA error otherwise. Never blocks.
absl::StatusOr<bool> QueryEvent(cudaEvent_t event);

// Events without timing (the cheapest), handed out and taken back; created
// on the current device when the pool is empty. An event handed back may
// still be waited on by work enqueued earlier: CUDA waits for the record
// that was last when the wait was enqueued, so recording it again later is
// safe. Thread-safe.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool();  // destroys every event it holds

  absl::StatusOr<cudaEvent_t> Take() ABSL_LOCKS_EXCLUDED(mu_);
  void Give(cudaEvent_t event) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
};

// A non-blocking stream of its own, destroyed with the object.
class OwnedStream {
 public:
  static absl::StatusOr<OwnedStream> Create();  // on the current device
  OwnedStream() = default;
  OwnedStream(OwnedStream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  OwnedStream& operator=(OwnedStream&& other) noexcept;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream();

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// OK when [data, data + bytes) is device memory (or managed memory) that
// kernels can touch; InvalidArgument "<who>: the buffer is host memory; the
// device backends reduce device memory" otherwise. An empty buffer is OK.
absl::Status RequireDeviceMemory(const void* data, size_t bytes, absl::string_view who);

// A stream-ordered memory pool on `device` that keeps what it reserved
// (release threshold: unlimited) and reuses freed memory only in stream
// order or once the free has completed -- never by inserting a dependency
// of one stream on another (cudaMemPoolReuseAllowInternalDependencies off),
// which could make a compute stream wait for a transfer. Destroy with
// cudaMemPoolDestroy.
absl::StatusOr<cudaMemPool_t> CreateMemoryPool(int device);

// Makes `device` current on the calling thread (cudaSetDevice).
absl::Status UseDevice(int device);

// Carries out a stream/event plan (comm/stream_plan.h): kRecord ->
// cudaEventRecord(event(slot), stream(ref)); kWait ->
// cudaStreamWaitEvent(stream(ref), event(slot)); kWork -> work(step,
// stream(ref)). A null event is not recorded or waited for. Stops at the
// first error.
absl::Status CarrySteps(absl::Span<const DeviceStep> steps,
                        absl::FunctionRef<cudaStream_t(const StreamRef&)> stream,
                        absl::FunctionRef<cudaEvent_t(EventSlot)> event,
                        absl::FunctionRef<absl::Status(const DeviceStep&, cudaStream_t)> work);

}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_CUDA_DEVICE_H_
