#include "stages/device/host_staged_stage.h"

#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe {
namespace {

// Host copies of one call's device buffers.
class Mirror {
 public:
  explicit Mirror(const ExecutionContext& ctx) : stream_(static_cast<cudaStream_t>(ctx.stream)) {}

  // A host copy of `device`, filled from it once the stream's work so far
  // is done.
  absl::StatusOr<MutableBytes> Read(ConstBytes device) {
    host_.emplace_back(device.size());
    MutableBytes host = absl::MakeSpan(host_.back());
    if (!device.empty()) {
      CUDA_CALL(cudaMemcpyAsync(host.data(), device.data(), device.size(), cudaMemcpyDeviceToHost,
                                stream_));
      CUDA_CALL(cudaStreamSynchronize(stream_));
    }
    return host;
  }
  // A host buffer for `device`, written back by Flush.
  absl::StatusOr<MutableBytes> Write(MutableBytes device, bool read_first) {
    MutableBytes host;
    if (read_first) {
      ASSIGN_OR_RETURN(host, Read(device));
    } else {
      host_.emplace_back(device.size());
      host = absl::MakeSpan(host_.back());
    }
    writes_.push_back({device, host});
    return host;
  }
  // Host copies of a stash's segments: written back by Flush unless
  // `read_only`, filled from the device first when `read_first`.
  absl::StatusOr<StashSegments> Stash(StashView device, bool read_first, bool read_only) {
    StashSegments host;
    for (size_t i = 0; i < device.count(); ++i) {
      MutableBytes segment;
      if (read_only) {
        ASSIGN_OR_RETURN(segment, Read(device.segment(i)));
      } else {
        ASSIGN_OR_RETURN(segment, Write(device.segment(i), read_first));
      }
      host.push_back(segment);
    }
    return host;
  }
  // Copies the written buffers back and waits for the copies.
  absl::Status Flush() {
    for (const auto& [device, host] : writes_) {
      if (device.empty()) continue;
      CUDA_CALL(cudaMemcpyAsync(device.data(), host.data(), device.size(), cudaMemcpyHostToDevice,
                                stream_));
    }
    CUDA_CALL(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

 private:
  const cudaStream_t stream_;
  // Spans point into the elements, whose bytes stay put when the vector grows.
  std::vector<std::vector<std::byte>> host_;
  std::vector<std::pair<MutableBytes, MutableBytes>> writes_;
};

class HostStagedStage final : public Stage {
 public:
  explicit HostStagedStage(std::unique_ptr<Stage> inner) : inner_(std::move(inner)) {}

  StageSizes Sizes() const override { return inner_->Sizes(); }
  absl::Status LoadInput(const ExecutionContext& ctx, int m, MutableBytes input) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes in, mirror.Write(input, false));
    RETURN_IF_ERROR(inner_->LoadInput(kHost, m, in));
    return mirror.Flush();
  }
  absl::Status Forward(const ExecutionContext& ctx, int m, ConstBytes input, MutableBytes output,
                       StashView stash) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes in, mirror.Read(input));
    ASSIGN_OR_RETURN(MutableBytes out, mirror.Write(output, false));
    ASSIGN_OR_RETURN(StashSegments st, mirror.Stash(stash, false, false));
    RETURN_IF_ERROR(inner_->Forward(kHost, m, in, out, StashView(st)));
    return mirror.Flush();
  }
  absl::Status BackwardInput(const ExecutionContext& ctx, int m, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes og, mirror.Read(output_grad));
    ASSIGN_OR_RETURN(StashSegments st, mirror.Stash(stash, true, false));
    ASSIGN_OR_RETURN(MutableBytes ig, mirror.Write(input_grad, false));
    RETURN_IF_ERROR(inner_->BackwardInput(kHost, m, og, StashView(st), ig));
    return mirror.Flush();
  }
  absl::Status BackwardWeight(const ExecutionContext& ctx, int m, ConstBytes input,
                              ConstBytes output_grad, StashView stash,
                              MutableBytes param_grad) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes in, mirror.Read(input));
    ASSIGN_OR_RETURN(MutableBytes og, mirror.Read(output_grad));
    ASSIGN_OR_RETURN(StashSegments st, mirror.Stash(stash, true, true));
    ASSIGN_OR_RETURN(MutableBytes pg, mirror.Write(param_grad, true));
    RETURN_IF_ERROR(inner_->BackwardWeight(kHost, m, in, og, StashView(st), pg));
    return mirror.Flush();
  }
  absl::Status Backward(const ExecutionContext& ctx, int m, ConstBytes input,
                        ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                        MutableBytes param_grad) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes in, mirror.Read(input));
    ASSIGN_OR_RETURN(MutableBytes og, mirror.Read(output_grad));
    ASSIGN_OR_RETURN(StashSegments st, mirror.Stash(stash, true, false));
    ASSIGN_OR_RETURN(MutableBytes ig, mirror.Write(input_grad, false));
    ASSIGN_OR_RETURN(MutableBytes pg, mirror.Write(param_grad, true));
    RETURN_IF_ERROR(inner_->Backward(kHost, m, in, og, StashView(st), ig, pg));
    return mirror.Flush();
  }
  double Loss(int m) const override { return inner_->Loss(m); }
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override {
    Mirror mirror(ctx);
    ASSIGN_OR_RETURN(MutableBytes pg, mirror.Read(param_grad));
    return inner_->FinishStep(kHost, pg);
  }

 private:
  static constexpr ExecutionContext kHost{};
  std::unique_ptr<Stage> inner_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Stage>> HostStagedFactory::Make(int stage, int replica) {
  ASSIGN_OR_RETURN(std::unique_ptr<Stage> inner, inner_->Make(stage, replica));
  return std::unique_ptr<Stage>(std::make_unique<HostStagedStage>(std::move(inner)));
}

}  // namespace jitpipe
