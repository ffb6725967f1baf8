// Causal self-attention with grouped K/V heads, computed as a fused
// (flash-style) kernel does [FlashAttention-2, Alg. 1 and 2]: the forward
// keeps only the output O and, per head and query, the log-sum-exp of its
// scores; the backward recomputes the probabilities from Q, K and the
// log-sum-exp, so no s x s matrix outlives a call. That is what `jitpipe
// model --attention fused` counts (planning/transformer.h).
//
// Layouts (transformer_kernels.h): qkv [rows x qkv_width], per row the a query
// heads, then the g key heads, then the g value heads, d values each; query
// head q reads key/value head q / (a / g). O [rows x h] (heads side by side);
// lse [batch x a x seq] floats. Scores are q.k / sqrt(d), key position <= query
// position within the same sample.
//
// Pure apart from their outputs; thread-safe; pointers borrowed for the call.
#ifndef JITPIPE_STAGES_REFERENCE_ATTENTION_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_ATTENTION_KERNELS_H_

#include <cstdint>

#include "stages/reference/transformer_kernels.h"

namespace jitpipe {

// Floats of the log-sum-exp a forward keeps: batch x heads x seq.
inline int64_t AttentionLseFloats(const TransformerBlockShape& shape) {
  return shape.batch * shape.heads * shape.seq;
}

// O = softmax(causal(Q K^T / sqrt(d))) V and lse per head and query.
void AttentionForward(const TransformerBlockShape& shape, const float* qkv, float* out,
                      float* lse);

// From dO and what the forward kept (qkv, O, lse): dqkv [rows x qkv_width],
// the gradients of Q, K and V in qkv's layout (overwritten, not added).
// dqkv must not alias qkv.
void AttentionBackward(const TransformerBlockShape& shape, const float* qkv, const float* out,
                       const float* lse, const float* dout, float* dqkv);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_ATTENTION_KERNELS_H_
