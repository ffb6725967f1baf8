// One decoder layer and the loss head of the reference transformer on a CUDA
// device in bf16 with fp32 accumulation: transformer_layer.h's functions,
// operation for operation, enqueued on one stream. Products are cuBLAS calls
// (cuda_row_gemm.h: bf16 operands, CUBLAS_COMPUTE_32F, fp32 or bf16
// results); the attention is per K/V head, its group of query heads one
// strided-batched product (scores, P V, dP, dQ; dK and dV add head by head)
// around the kernels of cuda_attention_kernels.h, and the backward
// recomputes P from the stashed log-sum-exp as the CPU block does.
//
// Stash: the CPU block's terms in the same order (transformer_layer.h), each
// in bf16 except the fp32 ones (the names say "fp32": 1/rms, log-sum-exp,
// log-softmax), so the bytes are the planner's at --dtype bf16
// (planning/transformer.h). What I hands to W lives in the same slots as on
// the CPU (dx over x, dmid over mid, dqkv over qkv, dgate and dup over gate
// and up, the head's dlogits over its fp32 log-softmax). The norm weights'
// gradients go to a caller's fp32 buffer, as on the CPU.
//
// Parameters: transformer_layer.h's layouts in bf16. Gradients: fp32,
// accumulated (beta 1).
//
// Every function only enqueues work on ctx.stream (no host synchronisation,
// no allocation) and returns the first CUDA or cuBLAS error met.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_LAYER_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_LAYER_H_

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "stages/reference/transformer_kernels.h"
#include "stages/reference/transformer_layer.h"

namespace jitpipe::reference_cuda {

using Bf16 = __nv_bfloat16;

// Bytes of a stash term at bf16: 4 per float for the fp32 terms, else 2.
int64_t StashTermBf16Bytes(const StashTerm& term);
int64_t CudaDecoderLayerStashBytes(const TransformerBlockShape& shape);
int64_t CudaLossHeadStashBytes(const TransformerBlockShape& shape);

// Device scratch a layer's calls share (elements; fp32 unless Bf16). The
// attention's s x s buffers hold one K/V head's group (heads / kv_heads).
struct CudaLayerWorkspace {
  float* ffn = nullptr;       // rows x f
  float* hidden = nullptr;    // rows x h
  float* qkv = nullptr;       // rows x qkv_width
  Bf16* hidden_b = nullptr;   // rows x h (dO)
  float* scores = nullptr;    // group x s x s
  float* dprobs = nullptr;    // group x s x s
  Bf16* probs = nullptr;      // group x s x s
  float* delta = nullptr;     // batch x heads x s
  Bf16* logits_b = nullptr;   // rows x V: the loss head only
  float* row_loss = nullptr;  // rows: the loss head only
};

// Element counts of the workspace's buffers, in its order.
std::vector<int64_t> CudaLayerWorkspaceElements(const TransformerBlockShape& shape,
                                                bool loss_head);

struct CudaLayerContext {
  const TransformerBlockShape* shape = nullptr;
  cublasHandle_t blas = nullptr;  // bound to `stream`
  cudaStream_t stream = nullptr;
  const CudaLayerWorkspace* ws = nullptr;
};

// x [rows x h] (may be the stash's first slot) -> y, filling the stash.
absl::Status CudaDecoderForward(const CudaLayerContext& ctx, const Bf16* params, const Bf16* x,
                                std::byte* stash, Bf16* y);
// From dy (bf16): dx in the stash's first slot, what W needs in the stash;
// adds the norm weights' gradients to norm_grads [2h] (fp32).
absl::Status CudaDecoderBackwardInput(const CudaLayerContext& ctx, const Bf16* params,
                                      const Bf16* dy, std::byte* stash, float* norm_grads);
// Adds the weight products' gradients to grads (the layer's layout, fp32).
absl::Status CudaDecoderBackwardWeight(const CudaLayerContext& ctx, const Bf16* dy,
                                       const std::byte* stash, float* grads);
// Adds the norm weights' gradients [2h] into their places in grads.
absl::Status CudaAddDecoderNormGrads(const CudaLayerContext& ctx, const float* norm_grads,
                                     float* grads);

// x -> the log-softmax in the stash; *loss = the mean cross entropy over rows
// times scale (double), and *loss_f32 the same as a float when not null.
absl::Status CudaLossHeadForward(const CudaLayerContext& ctx, const Bf16* params, const Bf16* x,
                                 const int64_t* targets, double scale, std::byte* stash,
                                 double* loss, float* loss_f32);
// For loss = scale x the sum over rows: dlogits and dx (the first slot) in
// the stash; adds the final norm weight's gradient to norm_grad [h].
absl::Status CudaLossHeadBackwardInput(const CudaLayerContext& ctx, const Bf16* params,
                                       const int64_t* targets, float scale, std::byte* stash,
                                       float* norm_grad);
// Adds Wout's gradient to grads (the head's layout; its norm entries left).
absl::Status CudaLossHeadBackwardWeight(const CudaLayerContext& ctx, const std::byte* stash,
                                        float* grads);

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_LAYER_H_
