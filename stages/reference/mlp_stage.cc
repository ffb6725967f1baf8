#include "stages/reference/mlp_stage.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

const float* Floats(ConstBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<const float*>(bytes.data());
}
float* Floats(MutableBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<float*>(bytes.data());
}

}  // namespace

MlpLayout MlpLayout::Of(const Schedule& schedule, int dp) {
  return MlpLayout{schedule.stages_per_chain(), schedule.chains, schedule.microbatches, dp};
}

MlpStage::MlpStage(const MlpOptions& options, const MlpLayout& layout, int stage, int replica,
                   std::vector<float>* finished_grads)
    : options_(options),
      layout_(layout),
      stage_(stage),
      replica_(replica),
      chain_(stage / layout.stages_per_chain),
      first_(stage % layout.stages_per_chain == 0),
      last_(stage % layout.stages_per_chain == layout.stages_per_chain - 1),
      params_(MlpInitialParams(options.shape, options.seed, stage % layout.stages_per_chain)),
      target_(static_cast<size_t>(options.shape.activation_floats())),
      losses_(static_cast<size_t>(layout.microbatches_per_chain()), 0.0),
      finished_grads_(finished_grads) {}

StageSizes MlpStage::Sizes() const {
  const MlpShape& s = options_.shape;
  const int64_t activation = s.activation_floats() * static_cast<int64_t>(sizeof(float));
  return StageSizes{activation, activation, 2 * s.layers * activation,
                    s.block_params() * static_cast<int64_t>(sizeof(float))};
}

absl::Status MlpStage::Check(absl::string_view role, size_t bytes, int64_t floats,
                             bool may_be_empty) const {
  if (bytes == static_cast<size_t>(floats) * sizeof(float) || (may_be_empty && bytes == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("mlp stage ", stage_, ": the ", role,
                                                 " buffer has ", bytes, " bytes; expected ",
                                                 floats * static_cast<int64_t>(sizeof(float))));
}

absl::Status MlpStage::CheckCall(const ExecutionContext& ctx, int microbatch) const {
  RETURN_IF_ERROR(RequireHost(ctx, absl::StrCat("mlp stage ", stage_)));
  if (microbatch >= 0 && microbatch < layout_.microbatches_per_chain()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("mlp stage ", stage_, ": microbatch ",
                                                 microbatch, " is outside 0..",
                                                 layout_.microbatches_per_chain() - 1));
}

absl::Status MlpStage::LoadInput(const ExecutionContext& ctx, int microbatch, MutableBytes input) {
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), options_.shape.activation_floats(), false));
  MlpFill(options_.shape, options_.seed, MlpData::kInput, replica_, chain_, microbatch,
          Floats(input));
  return absl::OkStatus();
}

absl::Status MlpStage::Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                               MutableBytes output, StashView stash_view) {
  const MutableBytes stash = stash_view.Single();
  const MlpShape& s = options_.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), n, false));
  RETURN_IF_ERROR(Check("output", output.size(), n, last_));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, false));
  float* acts = Floats(stash);
  MlpBlockForward(s, params_.data(), Floats(input), acts, last_);
  const float* y = acts + (s.layers - 1) * n;
  if (!output.empty()) std::memcpy(output.data(), y, static_cast<size_t>(n) * sizeof(float));
  if (last_) {
    MlpFill(s, options_.seed, MlpData::kTarget, replica_, chain_, microbatch, target_.data());
    losses_[microbatch] = MlpLoss(s, y, target_.data(), layout_.loss_scale(), nullptr);
  }
  return absl::OkStatus();
}

// The chain's last stage has no output gradient: it derives d loss / d y
// from the saved output and the target, straight into its last dz.
absl::Status MlpStage::BackwardInput(const ExecutionContext& ctx, int microbatch,
                                     ConstBytes output_grad, StashView stash_view,
                                     MutableBytes input_grad) {
  const MutableBytes stash = stash_view.Single();
  const MlpShape& s = options_.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), last_ ? 0 : n, last_));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, false));
  RETURN_IF_ERROR(Check("input_grad", input_grad.size(), first_ ? 0 : n, first_));
  const float* acts = Floats(stash);
  float* dz = Floats(stash) + s.layers * n;
  const float* grad_out = Floats(output_grad);
  if (last_) {
    float* dy = dz + (s.layers - 1) * n;
    MlpFill(s, options_.seed, MlpData::kTarget, replica_, chain_, microbatch, target_.data());
    MlpLoss(s, acts + (s.layers - 1) * n, target_.data(), layout_.loss_scale(), dy);
    grad_out = dy;
  }
  MlpBlockBackwardInput(s, params_.data(), acts, grad_out, dz, Floats(input_grad), last_);
  return absl::OkStatus();
}

absl::Status MlpStage::BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                                      ConstBytes /*output_grad*/, StashView stash_view,
                                      MutableBytes param_grad) {
  const ConstBytes stash = stash_view.Single();
  const MlpShape& s = options_.shape;
  const int64_t n = s.activation_floats();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), n, false));
  RETURN_IF_ERROR(Check("stash", stash.size(), 2 * s.layers * n, false));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), s.block_params(), false));
  const float* acts = Floats(stash);
  MlpBlockBackwardWeight(s, Floats(input), acts, acts + s.layers * n, Floats(param_grad));
  return absl::OkStatus();
}

double MlpStage::Loss(int microbatch) const {
  if (!last_ || microbatch < 0 || microbatch >= static_cast<int>(losses_.size())) return 0;
  return losses_[microbatch];
}

absl::Status MlpStage::FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) {
  RETURN_IF_ERROR(RequireHost(ctx, absl::StrCat("mlp stage ", stage_)));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), options_.shape.block_params(), false));
  if (finished_grads_ != nullptr) {
    const float* g = Floats(param_grad);
    finished_grads_->assign(g, g + options_.shape.block_params());
  }
  return absl::OkStatus();
}

MlpStageFactory::MlpStageFactory(const MlpOptions& options, const MlpLayout& layout)
    : options_(options),
      layout_(layout),
      finished_(static_cast<size_t>(layout.num_stages()) * layout.dp) {}

absl::StatusOr<std::unique_ptr<Stage>> MlpStageFactory::Make(int stage, int replica) {
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) {
    return absl::InvalidArgumentError(absl::StrCat("mlp: no stage ", stage, " of replica ",
                                                   replica, " in a pipeline of ",
                                                   layout_.num_stages(), " stages x dp ",
                                                   layout_.dp));
  }
  absl::MutexLock lock(&mu_);
  std::vector<float>* slot = &finished_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
  return std::unique_ptr<Stage>(new MlpStage(options_, layout_, stage, replica, slot));
}

const std::vector<float>& MlpStageFactory::FinishedGrads(int stage, int replica) const {
  return finished_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
}

}  // namespace jitpipe
