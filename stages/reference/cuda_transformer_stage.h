// The reference `transformer` stage on a CUDA device: the model, data, parts
// and split backward of transformer_stage.h in bf16 with fp32 accumulation
// (cuda_transformer_layer.h), on the stream the runtime hands each call, so
// that a replay on a GPU runs a real decoder block (Llama-shaped at real
// size) and, at a small shape, is checked against the CPU reference.
//
// Same model: stage s of chain c runs part s mod stages_per_chain, its
// parameters PartInitialParams (the CPU generator) rounded once to bf16 and
// copied to the device at creation; data FillTokens (every microbatch of the
// chain made on the host and copied once: the part with the embedding keeps
// the tokens, the one with the loss the targets); the loss as the CPU's.
//
// Precision and tolerance: activations, stash (but its fp32 terms) and
// parameters bf16; products CUBLAS_COMPUTE_32F; norms, softmax, log-sum-exp,
// cross entropy in fp32; parameter gradients fp32 (main_grad). Against the
// fp32 CPU block, as MlpComparison's relative errors: gradients within
// kCudaTransformerBf16Tolerance, the loss within
// kCudaTransformerBf16LossTolerance. Why: bf16 keeps 8 significant bits
// (unit roundoff 2^-9 = 2e-3 per rounding; 4e-3 one ulp); a tensor is
// rounded at every stored term and twice more inside the attention (P and
// dS are bf16 products' inputs), and a layer's gradient passes through about
// ten rounded tensors: the MLP stage's measured bf16 chain error (1.4e-2 for
// 4 to 9 layers, cuda_mlp_stage.h) doubled for the attention's extra
// roundings gives 5e-2; the loss, a mean over tokens of a log-softmax in
// fp32, moves by the logits' rounding only (1e-2 bounds it).
//
// Buffers per microbatch (Sizes(), CudaTransformerSizes()): device memory.
//   input   8R bytes of int64 token ids on the part with the embedding, else
//           the hidden states in bf16, 2Rh
//   output  2Rh bf16; the part with the loss head: the loss, one fp32
//   stash   the CPU stage's terms in its order, bf16 but the fp32 ones: the
//           planner's bytes at --dtype bf16 (planning/transformer.h)
//   params  fp32 gradients, the CPU stage's layout
// The stage's own device memory (parameters, data, workspaces: the fp32
// products, one K/V head group's s x s scores, the loss head's bf16 logits)
// is allocated once at creation, outside the plan's buffers, as the CUDA mlp
// stage's is.
//
// Streams, losses, gradients: as cuda_mlp_stage.h (enqueue only, never
// synchronise; Loss() valid after the caller's synchronisation; FinishStep
// enqueues the copy of the gradients into the factory's pinned memory).
// Token ids are not range-checked on the device: they are the stage's own
// (LoadInput) or the previous stage's hidden states.
//
// Thread safety: a stage is used by one thread; its calls share one
// workspace and one cuBLAS handle.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_STAGE_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_STAGE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "stages/exec/stage.h"
#include "stages/reference/mlp_stage.h"
#include "stages/reference/transformer_stage.h"

namespace jitpipe {

inline constexpr double kCudaTransformerBf16Tolerance = 5e-2;
inline constexpr double kCudaTransformerBf16LossTolerance = 1e-2;

// ValidateTransformerOptions, and what the device layout needs: rows x ffn
// even (so that every fp32 stash term is 4-byte aligned after the bf16 ones),
// every product's dimensions below 2^31. Errors: InvalidArgument naming it.
absl::Status ValidateCudaTransformerOptions(const TransformerOptions& options);

// The sizes a stage of part `part` reports (see above).
StageSizes CudaTransformerSizes(const TransformerOptions& options, int part);

namespace reference_cuda {
struct TransformerDevice;     // cuda_transformer_stage.cc: device memory, cuBLAS handle
struct TransformerGradSlot;   // cuda_transformer_stage.cc: pinned gradients of one stage
}  // namespace reference_cuda

class CudaTransformerStage final : public Stage {
 public:
  // Makes stage `stage` of `replica` on the calling thread's current device.
  // Errors: InvalidArgument (options, a stage or replica outside the layout),
  // Unavailable "cuda transformer stage <s>: no usable CUDA device (...)",
  // ResourceExhausted, Internal (as CudaMlpStage::Create).
  static absl::StatusOr<std::unique_ptr<CudaTransformerStage>> Create(
      const TransformerOptions& options, const MlpLayout& layout, int stage, int replica,
      reference_cuda::TransformerGradSlot* finished);
  ~CudaTransformerStage() override;
  CudaTransformerStage(const CudaTransformerStage&) = delete;
  CudaTransformerStage& operator=(const CudaTransformerStage&) = delete;

  // Every call requires a device context on the stage's device with a
  // stream (FailedPrecondition, RequireDeviceStream's words), a microbatch
  // of the chain and buffers of the sizes above (InvalidArgument).
  StageSizes Sizes() const override;
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
  CudaTransformerStage(const TransformerOptions& options, const MlpLayout& layout, int stage,
                       int replica, reference_cuda::TransformerGradSlot* finished);
  absl::Status Check(absl::string_view role, size_t bytes, int64_t expected,
                     bool may_be_empty) const;
  absl::Status CheckCall(const ExecutionContext& ctx, int microbatch) const;
  absl::Status Bind(const ExecutionContext& ctx) const;
  // The stash's segments, checked against `sizes` (this stage's Sizes()).
  absl::StatusOr<StashSegments> Segments(StashView stash, const StageSizes& sizes) const;
  // Layer i's stash; i == part's layers: the head's.
  static std::byte* LayerStash(const StashSegments& stash, int i) { return stash[i].data(); }
  // The gradient of layer i's output as W and I read it (bf16).
  const std::byte* LayerOutputGrad(const StashSegments& stash, int i,
                                   ConstBytes output_grad) const;

  const TransformerOptions options_;
  const MlpLayout layout_;
  const TransformerStageParts part_;
  const int stage_;
  const int replica_;
  const int chain_;
  reference_cuda::TransformerGradSlot* const finished_;
  std::unique_ptr<reference_cuda::TransformerDevice> device_;
};

// Mirrors TransformerStageFactory for CudaTransformerStage.
class CudaTransformerStageFactory final : public StageFactory {
 public:
  CudaTransformerStageFactory(const TransformerOptions& options, const MlpLayout& layout);
  ~CudaTransformerStageFactory() override;
  CudaTransformerStageFactory(const CudaTransformerStageFactory&) = delete;
  CudaTransformerStageFactory& operator=(const CudaTransformerStageFactory&) = delete;

  absl::StatusOr<std::unique_ptr<Stage>> Make(int stage, int replica) override;

  // What stage `stage` of `replica` saw at its last FinishStep; empty
  // before. REQUIRES: the run has ended and its streams are synchronised.
  std::vector<float> FinishedGrads(int stage, int replica) const;

  const TransformerOptions& options() const { return options_; }
  const MlpLayout& layout() const { return layout_; }

 private:
  const TransformerOptions options_;
  const MlpLayout layout_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<reference_cuda::TransformerGradSlot>> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_STAGE_H_
