// The kernels between the cuBLAS products of the CUDA transformer's causal
// attention (cuda_transformer_layer.cc): the softmax that keeps the
// log-sum-exp, its recomputation in the backward, the row sums D = dO . O and
// the scores' gradient, as attention_kernels.h computes them (FlashAttention-2
// Alg. 1 and 2, unfused: the s x s scores of one K/V head group at a time
// live in a workspace, never in the stash).
//
// A "row" is one query of one query head: scores [heads x seq x seq] fp32
// row-major, row (t, i) at (t x seq + i) x seq; only keys j <= i count, the
// rest are written as 0. lse and delta hold one fp32 per row, head t's at
// t x seq (the stash's [batch x heads x seq] layout, offset to the group's
// first head by the caller).
//
// Launchers as cuda_transformer_kernels.h's: enqueue on `stream`, return the
// launch's error, never synchronise. C++17.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_ATTENTION_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_ATTENTION_KERNELS_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace jitpipe::reference_cuda {

// From scaled scores S: lse[row] = log sum_{j<=i} exp(S_ij) and P_ij =
// exp(S_ij - lse) (bf16, the P V product's input); `heads` x seq rows.
cudaError_t LaunchCausalSoftmax(const float* scores, int64_t heads, int64_t seq, float* lse,
                                __nv_bfloat16* probs, cudaStream_t stream);

// The backward's recomputation from the forward's lse: scores becomes P (fp32,
// in place) and probs its bf16 copy.
cudaError_t LaunchCausalProbabilities(float* scores, const float* lse, int64_t heads,
                                      int64_t seq, __nv_bfloat16* probs, cudaStream_t stream);

// delta[(b x heads + q) x seq + i] = dO . O over head q's d values of row
// b x seq + i; o and dout [rows x (heads x d)].
cudaError_t LaunchAttentionDelta(const __nv_bfloat16* out, const __nv_bfloat16* dout,
                                 int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
                                 float* delta, cudaStream_t stream);

// dS_ij = P_ij (dP_ij - delta_i) scale (0 above the diagonal), into dscores
// (bf16, the dQ and dK products' input); P and dP fp32.
cudaError_t LaunchScoresGrad(const float* probs, const float* dprobs, const float* delta,
                             int64_t heads, int64_t seq, float scale,
                             __nv_bfloat16* dscores, cudaStream_t stream);

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_ATTENTION_KERNELS_H_
