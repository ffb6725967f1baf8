// The reference `transformer` stage: an exact, deterministic fp32 decoder-only
// transformer (transformer_layer.h) split across a schedule's stages, with a
// true split backward, so that a replayed step can be checked against an
// unpipelined reference (transformer_reference.h) and the bytes `jitpipe
// model` plans can be checked against what a real block keeps.
//
// Model: an embedding, `layers` decoder layers and a loss head (RMSNorm,
// output projection, cross entropy against the next token), cut into
// stages_per_chain contiguous runs (TransformerStageParts, from the model's
// partition). Stage s of chain c runs part s mod stages_per_chain with its own
// copy of the parameters, initialised identically (transformer_data.h). Data:
// replica k, chain c, microbatch m reads FillTokens(seed, k, c, m). Loss: the
// mean cross entropy over the microbatch's tokens times 1 / (microbatches x
// dp), so the sum of Loss() over a step is the mean loss (as the mlp's).
//
// Buffers per microbatch (Sizes()), R = batch x seq tokens:
//   input   8R bytes of int64 token ids on the part with the embedding, else
//           the hidden states, 4Rh
//   output  the hidden states, 4Rh; on the part with the loss head, the
//           microbatch's loss (one fp32, 4 bytes), as the model's loss layer
//   stash   every layer's DecoderLayerStashTerms, then the head's
//           LossHeadStashTerms: the tensors the backward needs, nothing more;
//           one segment per layer and one for the head (StageSizes::
//           stash_segments, when there are two or more), or the segments
//           back to back in one span
//           (the embedding keeps nothing: its backward reads the token ids,
//           the input W is handed)
//   params  [embedding][layers][head] in transformer_layer.h's layouts
// I leaves in the stash what W needs (transformer_layer.h's table); the
// embedding's W reads the first layer's input gradient from it. The norm
// weights' gradients, reductions over tokens that I already holds, are added
// by I to a per-stage buffer that the stage's next W (or B) moves into
// param_grad: every microbatch's W follows its I, so a step's last W comes
// after its last I and the step's gradients are complete.
//
// Thread safety: a stage is used by one thread. The factory may be called
// from several threads (Make is serialised inside) and keeps each stage's
// last gradients (FinishStep), readable once the run has ended.
#ifndef JITPIPE_STAGES_REFERENCE_TRANSFORMER_STAGE_H_
#define JITPIPE_STAGES_REFERENCE_TRANSFORMER_STAGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_stage.h"  // MlpLayout: the pipeline as a stage sees it
#include "stages/reference/transformer_kernels.h"
#include "stages/reference/transformer_layer.h"

namespace jitpipe {

// What one part of the chain holds: layers [first_layer, first_layer + layers)
// of the model's decoder layers, after the embedding / before the loss head
// when set.
struct TransformerStageParts {
  bool embedding = false;
  int first_layer = 0;
  int layers = 0;
  bool loss = false;
};

struct TransformerOptions {
  TransformerBlockShape shape;
  uint64_t seed = 1;
  std::vector<TransformerStageParts> parts;  // one per stage of a chain, in order
};

// OK when the parts cover embedding, layers 0..L-1 and loss head in order,
// each part holds something, and the shape is one the kernels run (h a
// multiple of a, a of g, d even, every size >= 1). Errors: InvalidArgument
// naming what is wrong.
absl::Status ValidateTransformerOptions(const TransformerOptions& options);

// `layers` decoder layers cut into `stages` contiguous parts as evenly as
// possible (the earlier parts take the remainder), the embedding on the first
// and the loss head on the last. Errors: InvalidArgument when a middle part
// would hold nothing (layers < stages - 2) or stages < 1.
absl::StatusOr<std::vector<TransformerStageParts>> EvenTransformerParts(int layers, int stages);

// Parameter floats of a part: [embedding][layers][head].
int64_t PartParamFloats(const TransformerBlockShape& shape, const TransformerStageParts& part);
// Stash floats of a part per microbatch.
int64_t PartStashFloats(const TransformerBlockShape& shape, const TransformerStageParts& part);
// A part's stash segments (StageSizes::stash_segments), whatever the dtype:
// one of `layer_bytes` per layer, then `head_bytes` on the loss part; empty
// (one buffer) when that makes fewer than two. The CPU and CUDA stages'.
std::vector<int64_t> PartStashSegments(const TransformerStageParts& part, int64_t layer_bytes,
                                       int64_t head_bytes);
// A part's initial parameters.
std::vector<float> PartInitialParams(const TransformerOptions& options, int part);

class TransformerStage final : public Stage {
 public:
  // `finished_grads` (borrowed, may be null) receives the gradients every
  // FinishStep sees. REQUIRES: ValidateTransformerOptions(options) is ok.
  TransformerStage(const TransformerOptions& options, const MlpLayout& layout, int stage,
                   int replica, std::vector<float>* finished_grads);

  StageSizes Sizes() const override;
  // Every call fails with FailedPrecondition in a device context: the
  // reference computes on the host. InvalidArgument for a buffer of the
  // wrong size or a microbatch outside the chain's.
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
  absl::Status Check(absl::string_view role, size_t bytes, int64_t expected,
                     bool may_be_empty) const;
  absl::Status CheckCall(const ExecutionContext& ctx, int microbatch) const;
  // The stash's segments, checked against `sizes` (this stage's Sizes()).
  absl::StatusOr<StashSegments> Segments(StashView stash, const StageSizes& sizes) const;
  // The stash of layer i of this part, and the head's.
  static float* LayerStash(const StashSegments& stash, int i) {
    return reinterpret_cast<float*>(stash[i].data());
  }
  float* HeadStash(const StashSegments& stash) const {
    return reinterpret_cast<float*>(stash[part_.layers].data());
  }
  // The gradient of this part's output as W sees it: the head's input
  // gradient (in the stash) on the loss part, else the output gradient.
  const float* OutputGrad(const StashSegments& stash, ConstBytes output_grad) const;
  // The gradient of layer i's output (the next layer's input gradient).
  const float* LayerOutputGrad(const StashSegments& stash, int i, ConstBytes output_grad) const;

  const TransformerOptions options_;
  const TransformerBlockShape& shape_;
  const MlpLayout layout_;
  const TransformerStageParts part_;
  const int stage_;
  const int replica_;
  const int chain_;
  const int64_t layer_stash_;  // floats per layer
  const std::vector<float> params_;
  DecoderWorkspace workspace_;
  std::vector<int64_t> targets_;      // one microbatch's
  std::vector<float> pending_norms_;  // I's norm weight gradients not yet in param_grad
  std::vector<double> losses_;        // per microbatch of the chain
  std::vector<float>* const finished_grads_;
};

class TransformerStageFactory final : public StageFactory {
 public:
  // REQUIRES: ValidateTransformerOptions(options) is ok and options.parts has
  // layout.stages_per_chain entries.
  TransformerStageFactory(const TransformerOptions& options, const MlpLayout& layout);

  // Errors: InvalidArgument for a stage or replica outside the layout.
  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // What stage `stage` of `replica` saw at its last FinishStep; empty before.
  // REQUIRES: the run has ended.
  const std::vector<float>& FinishedGrads(int stage, int replica) const;

  const TransformerOptions& options() const { return options_; }
  const MlpLayout& layout() const { return layout_; }

 private:
  const TransformerOptions options_;
  const MlpLayout layout_;
  absl::Mutex mu_;
  std::vector<std::vector<float>> finished_;  // by replica * stages + stage
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_TRANSFORMER_STAGE_H_
