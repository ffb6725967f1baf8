// A Stage that forwards every call to another, for tests that change one
// call of a real stage (fail it, block it) and keep the rest as they are.
#ifndef JITPIPE_TESTS_TESTING_WRAPPED_STAGE_H_
#define JITPIPE_TESTS_TESTING_WRAPPED_STAGE_H_

#include <memory>
#include <utility>

#include "stages/exec/stage.h"

namespace jitpipe::testing {

class WrappedStage : public Stage {
 public:
  explicit WrappedStage(std::unique_ptr<Stage> inner) : inner_(std::move(inner)) {}

  StageSizes Sizes() const override { return inner_->Sizes(); }
  absl::Status LoadInput(const ExecutionContext& ctx, int m, MutableBytes input) override {
    return inner_->LoadInput(ctx, m, input);
  }
  absl::Status Forward(const ExecutionContext& ctx, int m, ConstBytes input, MutableBytes output,
                       StashView stash) override {
    return inner_->Forward(ctx, m, input, output, stash);
  }
  absl::Status BackwardInput(const ExecutionContext& ctx, int m, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override {
    return inner_->BackwardInput(ctx, m, output_grad, stash, input_grad);
  }
  absl::Status BackwardWeight(const ExecutionContext& ctx, int m, ConstBytes input,
                              ConstBytes output_grad, StashView stash,
                              MutableBytes param_grad) override {
    return inner_->BackwardWeight(ctx, m, input, output_grad, stash, param_grad);
  }
  absl::Status Backward(const ExecutionContext& ctx, int m, ConstBytes input,
                        ConstBytes output_grad, StashView stash, MutableBytes input_grad,
                        MutableBytes param_grad) override {
    return inner_->Backward(ctx, m, input, output_grad, stash, input_grad, param_grad);
  }
  double Loss(int m) const override { return inner_->Loss(m); }
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override {
    return inner_->FinishStep(ctx, param_grad);
  }

 private:
  std::unique_ptr<Stage> inner_;
};

}  // namespace jitpipe::testing

#endif  // JITPIPE_TESTS_TESTING_WRAPPED_STAGE_H_
