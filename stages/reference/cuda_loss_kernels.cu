#include "stages/reference/cuda_loss_kernels.h"

#include <cmath>

#include "stages/reference/cuda_kernel_util.cuh"

namespace jitpipe::reference_cuda {
namespace {

using namespace kernel_util;  // NOLINT: the launch helpers

// One block per row.
__global__ void CrossEntropyForward(float* logits, const int64_t* targets, int64_t vocab,
                                    float* row_loss) {
  __shared__ float scratch[kThreads];
  float* row = logits + blockIdx.x * vocab;
  float top = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) top = fmaxf(top, row[v]);
  top = BlockReduce(top, Max(), scratch);
  float sum = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(row[v] - top);
  sum = BlockReduce(sum, Sum(), scratch);
  const float log_sum = top + logf(sum);
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) row[v] -= log_sum;
  __syncthreads();
  if (threadIdx.x == 0) row_loss[blockIdx.x] = -row[targets[blockIdx.x]];
}

__global__ void LossSum(const float* row_loss, int64_t rows, double scale, double* loss,
                        float* loss_f32) {
  __shared__ double scratch[kThreads];
  double sum = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += row_loss[r];
  sum = BlockReduce(sum, Sum(), scratch);
  if (threadIdx.x == 0) {
    *loss = sum / static_cast<double>(rows) * scale;
    if (loss_f32 != nullptr) *loss_f32 = static_cast<float>(*loss);
  }
}

__global__ void CrossEntropyBackward(float* log_softmax, const int64_t* targets, int64_t n,
                                     int64_t vocab, float scale, __nv_bfloat16* dlogits) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const int64_t r = k / vocab, v = k % vocab;
    const float g = scale * expf(log_softmax[k]) - (v == targets[r] ? scale : 0.0f);
    log_softmax[k] = g;
    dlogits[k] = B(g);
  }
}

}  // namespace

cudaError_t LaunchCrossEntropyForward(float* logits, const int64_t* targets, int64_t rows,
                                      int64_t vocab, float* row_loss, cudaStream_t stream) {
  ClearStaleError();
  CrossEntropyForward<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets,
                                                                           vocab, row_loss);
  return cudaGetLastError();
}

cudaError_t LaunchLossSum(const float* row_loss, int64_t rows, double scale, double* loss,
                          float* loss_f32, cudaStream_t stream) {
  ClearStaleError();
  LossSum<<<1, kThreads, 0, stream>>>(row_loss, rows, scale, loss, loss_f32);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyBackward(float* log_softmax, const int64_t* targets, int64_t rows,
                                       int64_t vocab, float scale, __nv_bfloat16* dlogits,
                                       cudaStream_t stream) {
  const int64_t n = rows * vocab;
  ClearStaleError();
  CrossEntropyBackward<<<BlocksFor(n), kThreads, 0, stream>>>(log_softmax, targets, n, vocab,
                                                              scale, dlogits);
  return cudaGetLastError();
}

}  // namespace jitpipe::reference_cuda
