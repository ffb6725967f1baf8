// The device-timed stage wrapper (stage_timer.h).
#include "runtime/gpu/stage_timer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <utility>

#include "base/status_macros.h"
#include "comm/cuda/cuda_error.h"

namespace jitpipe::gpu {
namespace {

cudaStream_t StreamOf(const ExecutionContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

class TimedStage final : public Stage {
 public:
  TimedStage(std::unique_ptr<Stage> inner, int stage, TimedStageFactory* factory)
      : inner_(std::move(inner)), stage_(stage), factory_(factory) {}

  StageSizes Sizes() const override { return inner_->Sizes(); }
  absl::Status LoadInput(const ExecutionContext& ctx, int microbatch, MutableBytes input) override {
    return inner_->LoadInput(ctx, microbatch, input);
  }
  absl::Status Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                       MutableBytes output, StashView stash) override {
    return Timed(ctx, 0, [&] { return inner_->Forward(ctx, microbatch, input, output, stash); });
  }
  absl::Status BackwardInput(const ExecutionContext& ctx, int microbatch, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override {
    return Timed(ctx, 1, [&] {
      return inner_->BackwardInput(ctx, microbatch, output_grad, stash, input_grad);
    });
  }
  absl::Status BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                              ConstBytes output_grad, StashView stash,
                              MutableBytes param_grad) override {
    return Timed(ctx, 2, [&] {
      return inner_->BackwardWeight(ctx, microbatch, input, output_grad, stash, param_grad);
    });
  }
  absl::Status Backward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                        ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                        MutableBytes param_grad) override {
    return Timed(ctx, 3, [&] {
      return inner_->Backward(ctx, microbatch, input, output_grad, stash, input_grad, param_grad);
    });
  }
  double Loss(int microbatch) const override { return inner_->Loss(microbatch); }
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override {
    return inner_->FinishStep(ctx, param_grad);
  }

 private:
  template <typename Call>
  absl::Status Timed(const ExecutionContext& ctx, int kind, Call call) {
    cudaEvent_t start = nullptr, end = nullptr;
    CUDA_CALL(cudaEventCreate(&start));
    CUDA_CALL(cudaEventCreate(&end));
    factory_->Record({stage_, kind, start, end});  // the factory destroys them
    CUDA_CALL(cudaEventRecord(start, StreamOf(ctx)));
    RETURN_IF_ERROR(call());
    CUDA_CALL(cudaEventRecord(end, StreamOf(ctx)));
    return absl::OkStatus();
  }

  const std::unique_ptr<Stage> inner_;
  const int stage_;
  TimedStageFactory* const factory_;
};

}  // namespace

TimedStageFactory::TimedStageFactory(StageFactory* inner) : inner_(inner) {}

TimedStageFactory::~TimedStageFactory() {
  absl::MutexLock lock(&mu_);
  for (const Pair& p : pairs_) {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(p.start));
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(p.end));
  }
}

absl::StatusOr<std::unique_ptr<Stage>> TimedStageFactory::Make(int stage, int replica) {
  ASSIGN_OR_RETURN(std::unique_ptr<Stage> inner, inner_->Make(stage, replica));
  return std::unique_ptr<Stage>(std::make_unique<TimedStage>(std::move(inner), stage, this));
}

void TimedStageFactory::Record(Pair pair) {
  absl::MutexLock lock(&mu_);
  pairs_.push_back(pair);
}

absl::StatusOr<std::vector<MeasuredStageCosts>> TimedStageFactory::Costs() const {
  absl::MutexLock lock(&mu_);
  int stages = 0;
  for (const Pair& p : pairs_) stages = std::max(stages, p.stage + 1);
  std::vector<std::array<double, 4>> sum(stages, {0, 0, 0, 0});
  std::vector<std::array<int, 4>> count(stages, {0, 0, 0, 0});
  for (const Pair& p : pairs_) {
    float ms = 0;
    CUDA_CALL(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(p.start),
                                   static_cast<cudaEvent_t>(p.end)));
    sum[p.stage][p.kind] += 1000.0 * ms;
    ++count[p.stage][p.kind];
  }
  std::vector<MeasuredStageCosts> out(stages);
  for (int s = 0; s < stages; ++s) {
    auto mean = [&](int k) { return count[s][k] > 0 ? sum[s][k] / count[s][k] : 0.0; };
    out[s] = {s, mean(0), mean(1), mean(2), mean(3)};
  }
  return out;
}

}  // namespace jitpipe::gpu
