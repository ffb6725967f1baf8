// stages/device in a build without CUDA: the factories exist and say that
// the device parts are absent, as comm/cuda's do.
#include "absl/status/status.h"
#include "stages/device/device_buffers.h"
#include "stages/device/host_staged_stage.h"

namespace jitpipe {
namespace {

absl::Status NoCuda() {
  return absl::UnavailableError(
      "this build has no CUDA backend (nvcc or the CUDA toolkit was not found when it was "
      "configured)");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceJitBuffers(
    std::vector<int64_t> buffer_bytes, Transport* transport) {
  (void)buffer_bytes;
  (void)transport;
  return NoCuda();
}

absl::StatusOr<std::unique_ptr<BufferProvider>> MakeDeviceArenaBuffers(
    std::vector<int64_t> buffer_bytes, absl::Span<const int64_t> offsets, int64_t arena_bytes,
    Transport* transport) {
  (void)buffer_bytes;
  (void)offsets;
  (void)arena_bytes;
  (void)transport;
  return NoCuda();
}

absl::Status BindThreadToDevice(int device) {
  (void)device;
  return NoCuda();
}

absl::StatusOr<std::unique_ptr<Stage>> HostStagedFactory::Make(int stage, int replica) {
  (void)stage;
  (void)replica;
  (void)inner_;
  return NoCuda();
}

}  // namespace jitpipe
