#include "stages/device/device_buffers.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/cuda/cuda_device.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe {
namespace {

absl::StatusOr<const DeviceStreams*> DeviceOf(const Transport* transport) {
  const DeviceStreams* streams = transport != nullptr ? transport->device_streams() : nullptr;
  if (streams == nullptr || streams->compute == nullptr) {
    return absl::InvalidArgumentError(
        "device buffers need a device backend's transport (cuda, nccl, nccl-lazy)");
  }
  return streams;
}

class DeviceJitBuffers final : public BufferProvider {
 public:
  DeviceJitBuffers(std::vector<int64_t> buffer_bytes, Transport* transport,
                   const DeviceStreams& streams)
      : BufferProvider(std::move(buffer_bytes)),
        transport_(transport),
        device_(streams.device),
        compute_(static_cast<cudaStream_t>(streams.compute)),
        memory_(num_buffers(), nullptr) {}
  DeviceJitBuffers(const DeviceJitBuffers&) = delete;
  DeviceJitBuffers& operator=(const DeviceJitBuffers&) = delete;
  ~DeviceJitBuffers() override {
    (void)cudaSetDevice(device_);
    for (void* p : memory_) {
      if (p != nullptr) (void)cudaFreeAsync(p, compute_);
    }
    for (const Retiring& r : retiring_) (void)cudaFreeAsync(r.data, compute_);
    if (compute_ != nullptr) (void)cudaStreamSynchronize(compute_);
    if (release_.get() != nullptr) (void)cudaStreamSynchronize(release_.get());
    if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
  }

  absl::Status Init() {
    RETURN_IF_ERROR(UseDevice(device_));
    ASSIGN_OR_RETURN(pool_, CreateMemoryPool(device_));
    ASSIGN_OR_RETURN(release_, OwnedStream::Create());
    return absl::OkStatus();
  }

  absl::StatusOr<MutableBytes> Allocate(int32_t id) override {
    RETURN_IF_ERROR(CheckAllocate(id));
    RETURN_IF_ERROR(std::exchange(release_error_, absl::OkStatus()));
    const int64_t bytes = bytes_of(id);
    if (bytes > 0) {
      CUDA_CALL(cudaMallocFromPoolAsync(&memory_[id], static_cast<size_t>(bytes), pool_, compute_));
      CountHeapAllocation();
    }
    CountAllocate(id);
    return MutableBytes(static_cast<std::byte*>(memory_[id]), static_cast<size_t>(bytes));
  }

  void Release(int32_t id) override {
    if (!CountRelease(id)) return;
    Free(std::exchange(memory_[id], nullptr), compute_);
  }

  bool ReusesReleasedBytes() const override { return false; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  void Zero(MutableBytes bytes) override {
    if (bytes.empty()) return;
    Note(CUDA_STATUS(cudaMemsetAsync(bytes.data(), 0, bytes.size(), compute_)));
  }

  // The free goes after the send: the release stream waits for the send's
  // completion, then frees. A send not issued to the device yet (never for
  // this backend's sends, which are issued when posted) is freed once it
  // is reported complete.
  bool ReleasesAfterRequests() const override { return true; }
  void ReleaseAfter(int32_t id, RequestId request) override {
    if (!CountRelease(id)) return;
    void* data = std::exchange(memory_[id], nullptr);
    if (data == nullptr) return;
    absl::StatusOr<bool> ordered = transport_->StreamWait(request, release_.get());
    if (!ordered.ok()) {
      Note(ordered.status());
      retiring_.push_back({request, data});  // freed at the end, after a sync
      return;
    }
    if (*ordered) {
      Free(data, release_.get());
    } else {
      retiring_.push_back({request, data});
    }
  }
  void RequestCompleted(RequestId request) override {
    for (auto it = retiring_.begin(); it != retiring_.end();) {
      if (it->request != request) {
        ++it;
        continue;
      }
      Free(it->data, compute_);  // complete: no dependency needed
      it = retiring_.erase(it);
    }
  }

  int64_t allocator_peak_bytes() const override {
    uint64_t high = 0;
    if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high) != cudaSuccess) return -1;
    return static_cast<int64_t>(high);
  }
  void ResetPeak() override {
    BufferProvider::ResetPeak();
    uint64_t zero = 0;  // the high-water mark restarts at what is in use now
    Note(CUDA_STATUS(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero)));
  }

 private:
  struct Retiring {
    RequestId request;
    void* data;
  };

  void Free(void* data, cudaStream_t stream) {
    if (data != nullptr) Note(CUDA_STATUS(cudaFreeAsync(data, stream)));
  }
  void Note(const absl::Status& status) {
    if (!status.ok() && release_error_.ok()) release_error_ = status;
  }

  Transport* const transport_;
  const int device_;
  const cudaStream_t compute_;
  cudaMemPool_t pool_ = nullptr;
  OwnedStream release_;
  std::vector<void*> memory_;  // per buffer id, null when dead
  std::vector<Retiring> retiring_;
  absl::Status release_error_;
};

class DeviceArenaBuffers final : public BufferProvider {
 public:
  DeviceArenaBuffers(std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets,
                     int64_t arena_bytes, Transport* transport, const DeviceStreams& streams)
      : BufferProvider(std::move(buffer_bytes)),
        offsets_(offsets.begin(), offsets.end()),
        arena_bytes_(arena_bytes),
        transport_(transport),
        device_(streams.device),
        compute_(static_cast<cudaStream_t>(streams.compute)) {}
  DeviceArenaBuffers(const DeviceArenaBuffers&) = delete;
  DeviceArenaBuffers& operator=(const DeviceArenaBuffers&) = delete;
  ~DeviceArenaBuffers() override {
    if (slab_ != nullptr) {
      (void)cudaSetDevice(device_);
      (void)cudaFree(slab_);  // synchronises with the device work on it
    }
  }

  absl::Status Init() {
    for (size_t id = 0; id < offsets_.size(); ++id) {
      if (offsets_[id] < 0 || offsets_[id] + bytes_of(static_cast<int32_t>(id)) > arena_bytes_) {
        return absl::InvalidArgumentError(absl::StrCat("buffer ", id, " at offset ", offsets_[id],
                                                       " does not fit the arena of ",
                                                       arena_bytes_, " bytes"));
      }
    }
    if (offsets_.size() != num_buffers()) {
      return absl::InvalidArgumentError("one arena offset per buffer is needed");
    }
    RETURN_IF_ERROR(UseDevice(device_));
    if (arena_bytes_ > 0) {
      CUDA_CALL(cudaMalloc(&slab_, static_cast<size_t>(arena_bytes_)));
      CountHeapAllocation();
    }
    return absl::OkStatus();
  }

  // The bytes of a buffer sent earlier are reused after that send only: the
  // compute stream waits for each overlapping send's completion.
  absl::StatusOr<MutableBytes> Allocate(int32_t id) override {
    RETURN_IF_ERROR(CheckAllocate(id));
    RETURN_IF_ERROR(std::exchange(zero_error_, absl::OkStatus()));
    const int64_t begin = offsets_[id], end = begin + bytes_of(id);
    for (auto it = sent_.begin(); it != sent_.end();) {
      if (it->end <= begin || end <= it->begin) {
        ++it;
        continue;
      }
      ASSIGN_OR_RETURN(bool ordered, transport_->StreamWait(it->request, compute_));
      if (!ordered) {
        return absl::FailedPreconditionError(absl::StrCat(
            "buffer ", id, " reuses the bytes of a send that is not issued to the device yet"));
      }
      it = sent_.erase(it);
    }
    CountAllocate(id);
    if (end == begin) return MutableBytes();
    return MutableBytes(static_cast<std::byte*>(slab_) + begin, static_cast<size_t>(end - begin));
  }
  void Release(int32_t id) override { CountRelease(id); }
  bool ReusesReleasedBytes() const override { return true; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  void Zero(MutableBytes bytes) override {
    if (bytes.empty()) return;
    const absl::Status zeroed = CUDA_STATUS(cudaMemsetAsync(bytes.data(), 0, bytes.size(), compute_));
    if (!zeroed.ok() && zero_error_.ok()) zero_error_ = zeroed;
  }
  bool ReleasesAfterRequests() const override { return true; }
  void ReleaseAfter(int32_t id, RequestId request) override {
    if (!CountRelease(id)) return;
    sent_.push_back({offsets_[id], offsets_[id] + bytes_of(id), request});
  }
  void RequestCompleted(RequestId request) override {
    sent_.erase(std::remove_if(sent_.begin(), sent_.end(),
                               [request](const Sent& s) { return s.request == request; }),
                sent_.end());
  }
  int64_t allocator_peak_bytes() const override { return arena_bytes_; }

 private:
  struct Sent {
    int64_t begin, end;
    RequestId request;
  };

  const std::vector<int64_t> offsets_;
  const int64_t arena_bytes_;
  Transport* const transport_;
  const int device_;
  const cudaStream_t compute_;
  void* slab_ = nullptr;
  std::vector<Sent> sent_;  // released sent buffers whose sends may still read them
  absl::Status zero_error_;
};

}  // namespace

absl::Status BindThreadToDevice(int device) { return UseDevice(device); }

absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceJitBuffers(
    std::vector<int64_t> buffer_bytes, Transport* transport) {
  ASSIGN_OR_RETURN(const DeviceStreams* streams, DeviceOf(transport));
  auto buffers = std::make_unique<DeviceJitBuffers>(std::move(buffer_bytes), transport, *streams);
  RETURN_IF_ERROR(buffers->Init());
  return std::unique_ptr<BufferProvider>(std::move(buffers));
}

absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceArenaBuffers(
    std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets, int64_t arena_bytes,
    Transport* transport) {
  ASSIGN_OR_RETURN(const DeviceStreams* streams, DeviceOf(transport));
  auto buffers = std::make_unique<DeviceArenaBuffers>(std::move(buffer_bytes), offsets,
                                                      arena_bytes, transport, *streams);
  RETURN_IF_ERROR(buffers->Init());
  return std::unique_ptr<BufferProvider>(std::move(buffers));
}

}  // namespace jitpipe
