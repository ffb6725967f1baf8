#include "comm/cuda/cuda_device.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "comm/cuda/cuda_error.h"
#include "comm/cuda/cuda_world.h"

namespace jitpipe {

absl::StatusOr<bool> QueryEvent(cudaEvent_t event) {
  const cudaError_t e = cudaEventQuery(event);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  return CUDA_STATUS(e);
}

EventPool::~EventPool() {
  absl::MutexLock lock(&mu_);
  for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
}

absl::StatusOr<cudaEvent_t> EventPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void EventPool::Give(cudaEvent_t event) {
  if (event == nullptr) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(event);
}

absl::StatusOr<OwnedStream> OwnedStream::Create() {
  OwnedStream s;
  CUDA_CALL(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

OwnedStream::~OwnedStream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

absl::Status RequireDeviceMemory(const void* data, size_t bytes, absl::string_view who) {
  if (bytes == 0) return absl::OkStatus();
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, data);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: an unknown pointer is an answer here
    attributes.type = cudaMemoryTypeUnregistered;
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      who, ": the buffer is host memory; the device backends reduce device memory"));
}

absl::StatusOr<cudaMemPool_t> CreateMemoryPool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CUDA_CALL(cudaMemPoolCreate(&pool, &props));
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  int no = 0;
  absl::Status set = CUDA_STATUS(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  if (set.ok()) {
    set = CUDA_STATUS(
        cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
  }
  if (!set.ok()) {
    (void)cudaMemPoolDestroy(pool);
    return set;
  }
  return pool;
}

absl::Status UseDevice(int device) {
  CUDA_CALL(cudaSetDevice(device));
  return absl::OkStatus();
}

absl::Status CarrySteps(absl::Span<const DeviceStep> steps,
                        absl::FunctionRef<cudaStream_t(const StreamRef&)> stream,
                        absl::FunctionRef<cudaEvent_t(EventSlot)> event,
                        absl::FunctionRef<absl::Status(const DeviceStep&, cudaStream_t)> work) {
  for (const DeviceStep& step : steps) {
    switch (step.kind) {
      case DeviceStep::Kind::kRecord:
        if (cudaEvent_t e = event(step.event); e != nullptr) {
          CUDA_CALL(cudaEventRecord(e, stream(step.stream)));
        }
        break;
      case DeviceStep::Kind::kWait:
        if (cudaEvent_t e = event(step.event); e != nullptr) {
          CUDA_CALL(cudaStreamWaitEvent(stream(step.stream), e, 0));
        }
        break;
      case DeviceStep::Kind::kWork:
        RETURN_IF_ERROR(work(step, stream(step.stream)));
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCudaDevice(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    const absl::Status why = CudaStatus(e, "cudaGetDeviceCount", __FILE__, __LINE__);
    return absl::UnavailableError(
        why.ok() ? "no CUDA device" : absl::StrCat("no CUDA device (", why.message(), ")"));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " does not exist (",
                                                   count, count == 1 ? " device)" : " devices)"));
  }
  return absl::OkStatus();
}

}  // namespace jitpipe
