#include "stages/reference/cuda_attention_kernels.h"

#include <cmath>

#include "stages/reference/cuda_kernel_util.cuh"

namespace jitpipe::reference_cuda {
namespace {

using namespace kernel_util;  // NOLINT: the launch helpers

// One block per row (t, i), blockIdx.x = t x seq + i.
__global__ void CausalSoftmax(const float* scores, int64_t seq, float* lse,
                              __nv_bfloat16* probs) {
  __shared__ float scratch[kThreads];
  const int64_t row = blockIdx.x, i = row % seq;
  const float* s = scores + row * seq;
  float top = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) top = fmaxf(top, s[j]);
  top = BlockReduce(top, Max(), scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(s[j] - top);
  sum = BlockReduce(sum, Sum(), scratch);
  const float log_sum = top + logf(sum);
  if (threadIdx.x == 0) lse[row] = log_sum;
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
    probs[row * seq + j] = B(j <= i ? expf(s[j] - log_sum) : 0.0f);
  }
}

__global__ void CausalProbabilities(float* scores, const float* lse, int64_t n, int64_t seq,
                                    __nv_bfloat16* probs) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const int64_t row = k / seq, j = k % seq;
    const float p = j <= row % seq ? expf(scores[k] - lse[row]) : 0.0f;
    scores[k] = p;
    probs[k] = B(p);
  }
}

// One thread per (sample, head, position).
__global__ void AttentionDelta(const __nv_bfloat16* out, const __nv_bfloat16* dout,
                               int64_t n, int64_t heads, int64_t seq, int64_t d,
                               float* delta) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const int64_t i = k % seq, q = (k / seq) % heads, b = k / (seq * heads);
    const int64_t at = (b * seq + i) * heads * d + q * d;
    float sum = 0;
    for (int64_t c = 0; c < d; ++c) sum += F(dout[at + c]) * F(out[at + c]);
    delta[k] = sum;
  }
}

__global__ void ScoresGrad(const float* probs, const float* dprobs, const float* delta,
                           int64_t n, int64_t seq, float scale, __nv_bfloat16* dscores) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const int64_t row = k / seq, j = k % seq;
    dscores[k] = B(j <= row % seq ? probs[k] * (dprobs[k] - delta[row]) * scale : 0.0f);
  }
}

}  // namespace

cudaError_t LaunchCausalSoftmax(const float* scores, int64_t heads, int64_t seq, float* lse,
                                __nv_bfloat16* probs, cudaStream_t stream) {
  ClearStaleError();
  CausalSoftmax<<<static_cast<unsigned>(heads * seq), kThreads, 0, stream>>>(scores, seq, lse,
                                                                            probs);
  return cudaGetLastError();
}

cudaError_t LaunchCausalProbabilities(float* scores, const float* lse, int64_t heads,
                                      int64_t seq, __nv_bfloat16* probs, cudaStream_t stream) {
  const int64_t n = heads * seq * seq;
  ClearStaleError();
  CausalProbabilities<<<BlocksFor(n), kThreads, 0, stream>>>(scores, lse, n, seq, probs);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionDelta(const __nv_bfloat16* out, const __nv_bfloat16* dout,
                                 int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
                                 float* delta, cudaStream_t stream) {
  const int64_t n = batch * heads * seq;
  ClearStaleError();
  AttentionDelta<<<BlocksFor(n), kThreads, 0, stream>>>(out, dout, n, heads, seq, head_dim,
                                                        delta);
  return cudaGetLastError();
}

cudaError_t LaunchScoresGrad(const float* probs, const float* dprobs, const float* delta,
                             int64_t heads, int64_t seq, float scale,
                             __nv_bfloat16* dscores, cudaStream_t stream) {
  const int64_t n = heads * seq * seq;
  ClearStaleError();
  ScoresGrad<<<BlocksFor(n), kThreads, 0, stream>>>(probs, dprobs, delta, n, seq, scale, dscores);
  return cudaGetLastError();
}

}  // namespace jitpipe::reference_cuda
