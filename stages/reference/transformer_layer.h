// One decoder layer and the loss head of the reference transformer, composed
// from the kernels (transformer_kernels.h, attention_kernels.h, blas_gemm.h),
// with a split backward: I (BackwardInput) computes the input gradient, W
// (BackwardWeight) the weight GEMMs' gradients. The stage
// (transformer_stage.h) and the unpipelined reference
// (transformer_reference.h) both run these, so they compute every microbatch
// with the very same float operations.
//
// A decoder layer (pre-norm, Llama-style):
//   n1 = rmsnorm(x) w1; qkv = rotary(n1 Wqkv); o = attention(qkv);
//   mid = x + o Wo; n2 = rmsnorm(mid) w2; gate = n2 Wg; up = n2 Wu;
//   act = silu(gate) up; y = mid + act Wd.
// Parameters, in this order: w1 [h], Wqkv [h x (h + 2gd)], Wo [h x h],
// w2 [h], Wg [h x f], Wu [h x f], Wd [f x h] (in x out, row-major).
//
// Its stash is exactly the tensors its backward needs, in the order and
// under the names of the model's terms (planning/transformer.h,
// BodyLayerActivations with rmsnorm, swiglu, fused attention, no dropout):
// x, 1/rms, n1, qkv (rotated: the core's inputs), lse, o, mid, 1/rms, n2,
// gate, up, act. The loss head's: x, 1/rms, n (the output layer's input),
// log_softmax [rows x V].
//
// What I hands to W lives in the same stash, over tensors I has used up:
//   x slot    <- dx     (the layer input's gradient; the previous layer's dy)
//   mid slot  <- dmid   (Wo's output gradient)
//   qkv slot  <- dqkv   (Wqkv's output gradient, rotation undone)
//   gate, up  <- dgate, dup
//   head: log_softmax <- dlogits; x slot <- dx
// W also reads dy (the next layer's x slot, or the stage's output gradient)
// for Wd. The norm weights' gradients are reductions over tokens of tensors
// I holds (no GEMM), so I computes them and adds them to `norm_grads`, which
// the caller carries to its next W (transformer_stage.h): the stash holds
// nothing beyond the model's terms.
//
// Pure apart from outputs; thread-compatible (the workspace is the caller's).
#ifndef JITPIPE_STAGES_REFERENCE_TRANSFORMER_LAYER_H_
#define JITPIPE_STAGES_REFERENCE_TRANSFORMER_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stages/reference/transformer_kernels.h"

namespace jitpipe {

// One stored tensor: its name (the model's term, planning/transformer.h) and
// its float count per microbatch.
struct StashTerm {
  std::string name;
  int64_t floats = 0;
};

std::vector<StashTerm> DecoderLayerStashTerms(const TransformerBlockShape& shape);
std::vector<StashTerm> LossHeadStashTerms(const TransformerBlockShape& shape);
int64_t DecoderLayerStashFloats(const TransformerBlockShape& shape);
int64_t LossHeadStashFloats(const TransformerBlockShape& shape);

int64_t DecoderLayerParamFloats(const TransformerBlockShape& shape);
int64_t LossHeadParamFloats(const TransformerBlockShape& shape);  // w [h], Wout [h x V]
int64_t EmbeddingParamFloats(const TransformerBlockShape& shape);  // table [V x h]

// Scratch for a backward, sized once for a shape and reused.
struct DecoderWorkspace {
  explicit DecoderWorkspace(const TransformerBlockShape& shape);
  std::vector<float> ffn;     // rows x f
  std::vector<float> hidden;  // rows x h
  std::vector<float> qkv;     // rows x qkv_width
};

// x [rows x h] -> y [rows x h], filling `stash` (DecoderLayerStashFloats). x
// may be the stash's first slot itself (then it is not copied); y may be the
// next layer's stash.
void DecoderLayerForward(const TransformerBlockShape& shape, const float* params, const float* x,
                         float* stash, float* y);

// From dy: leaves dx in the stash's x slot (DecoderLayerInputGrad) and what W
// needs in the stash (above); adds the two norm weights' gradients to
// norm_grads [2h] (w1's, then w2's). dy must outlive the layer's W.
void DecoderLayerBackwardInput(const TransformerBlockShape& shape, const float* params,
                               const float* dy, float* stash, float* norm_grads,
                               DecoderWorkspace& ws);

// Where a stash holds dx after DecoderLayerBackwardInput (its first slot).
inline const float* DecoderLayerInputGrad(const float* stash) { return stash; }

// Adds the weight GEMMs' gradients (Wqkv, Wo, Wg, Wu, Wd) to `grads` (the
// parameter layout; the norm weights' entries are left alone) from the stash
// after DecoderLayerBackwardInput and the same dy.
void DecoderLayerBackwardWeight(const TransformerBlockShape& shape, const float* dy,
                                const float* stash, float* grads);

// Copies the norm weights' gradients [2h] into their places in a layer's
// gradient layout, adding.
void AddDecoderNormGrads(const TransformerBlockShape& shape, const float* norm_grads,
                         float* grads);

// x [rows x h] -> log-softmax of the logits in the stash; returns the sum over
// rows of the cross entropy against `targets` [rows].
double LossHeadForward(const TransformerBlockShape& shape, const float* params, const float* x,
                       const int64_t* targets, float* stash);

// For loss = scale x that sum: leaves dlogits and dx in the stash (dx at its
// start) and adds the final norm weight's gradient to norm_grad [h].
void LossHeadBackwardInput(const TransformerBlockShape& shape, const float* params,
                           const int64_t* targets, float scale, float* stash, float* norm_grad,
                           DecoderWorkspace& ws);

// Adds Wout's gradient to grads (the head's layout; the norm weight's entries
// are left alone).
void LossHeadBackwardWeight(const TransformerBlockShape& shape, const float* stash, float* grads);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_TRANSFORMER_LAYER_H_
