// The reference `mlp` stage: an exact, deterministic fp32 MLP split across a
// schedule's stages, with a true split backward, so that a replayed step can
// be checked against an unpipelined reference (mlp_reference.h).
//
// Model: stages_per_chain blocks of MlpShape::layers Linear + tanh layers
// (the very last layer linear), mlp_kernels.h. Stage s of chain c runs block
// s mod stages_per_chain with its own copy of the parameters, initialised
// identically from the seed (DualPipe's two chains hold two copies of every
// block). Data: replica k, chain c, microbatch m reads the input and target
// MlpFill(seed, k, c, m). Loss: MSE at each chain's last stage; every
// microbatch's loss and gradient carry 1 / (microbatches x dp), so the sum of
// Loss() over a step's microbatches and replicas is the mean loss and the
// reduced gradients are its gradients.
//
// Split backward: I (BackwardInput) computes the input gradient and leaves
// every layer's d loss / d z in the stash; W (BackwardWeight) turns those
// and the saved activations into weight gradients; B does both.
//
// Buffers per microbatch (Sizes()): input and output rows x hidden floats;
// stash 2 x layers x rows x hidden floats (each layer's output, then each
// layer's dz); parameter gradients block_params floats.
//
// Thread safety: a stage is used by one thread. The factory may be called
// from several threads (Make is serialised inside) and keeps each stage's
// last gradients (FinishStep), readable once the run has ended.
#ifndef JITPIPE_STAGES_REFERENCE_MLP_STAGE_H_
#define JITPIPE_STAGES_REFERENCE_MLP_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/ir/schedule.h"
#include "stages/reference/mlp_kernels.h"
#include "stages/exec/stage.h"

namespace jitpipe {

struct MlpOptions {
  MlpShape shape;
  uint64_t seed = 1;
};

// The pipeline as the mlp sees it.
struct MlpLayout {
  int stages_per_chain = 1;
  int chains = 1;
  int microbatches = 1;  // over all chains (Schedule::microbatches)
  int dp = 1;

  static MlpLayout Of(const Schedule& schedule, int dp);
  int microbatches_per_chain() const { return microbatches / chains; }
  int num_stages() const { return stages_per_chain * chains; }
  // The factor each microbatch's loss carries: 1 / (microbatches x dp).
  double loss_scale() const { return 1.0 / (static_cast<double>(microbatches) * dp); }
};

class MlpStage final : public Stage {
 public:
  // `finished_grads` (borrowed, may be null) receives the gradients every
  // FinishStep sees.
  MlpStage(const MlpOptions& options, const MlpLayout& layout, int stage, int replica,
           std::vector<float>* finished_grads);

  StageSizes Sizes() const override;
  // Every call fails with FailedPrecondition in a device context or with a
  // stream: the reference computes on the host.
  absl::Status LoadInput(const ExecutionContext& ctx, int microbatch, MutableBytes input) override;
  absl::Status Forward(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                       MutableBytes output, StashView stash) override;
  absl::Status BackwardInput(const ExecutionContext& ctx, int microbatch, ConstBytes output_grad,
                             StashView stash, MutableBytes input_grad) override;
  absl::Status BackwardWeight(const ExecutionContext& ctx, int microbatch, ConstBytes input,
                              ConstBytes output_grad, StashView stash,
                              MutableBytes param_grad) override;
  double Loss(int microbatch) const override;
  absl::Status FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) override;

 private:
  // InvalidArgument unless `bytes` holds `floats` floats (or may be empty
  // and is).
  absl::Status Check(absl::string_view role, size_t bytes, int64_t floats, bool may_be_empty) const;
  // RequireHost (execution_context.h), then InvalidArgument for a
  // microbatch outside the chain's.
  absl::Status CheckCall(const ExecutionContext& ctx, int microbatch) const;

  const MlpOptions options_;
  const MlpLayout layout_;
  const int stage_;
  const int replica_;
  const int chain_;
  const bool first_;  // the chain's first block: no input gradient
  const bool last_;   // the chain's last block: loss, linear head
  const std::vector<float> params_;
  std::vector<float> target_;        // workspace: one microbatch's target
  std::vector<double> losses_;       // per microbatch of the chain
  std::vector<float>* const finished_grads_;
};

class MlpStageFactory final : public StageFactory {
 public:
  MlpStageFactory(const MlpOptions& options, const MlpLayout& layout);

  // Errors: InvalidArgument for a stage or replica outside the layout.
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // The gradients stage `stage` of `replica` saw at its last FinishStep;
  // empty before. REQUIRES: the run has ended.
  const std::vector<float>& FinishedGrads(int stage, int replica) const;

  const MlpOptions& options() const { return options_; }
  const MlpLayout& layout() const { return layout_; }

 private:
  const MlpOptions options_;
  const MlpLayout layout_;
  absl::Mutex mu_;
  std::vector<std::vector<float>> finished_;  // by replica * stages + stage
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_MLP_STAGE_H_
