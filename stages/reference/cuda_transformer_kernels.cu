#include "stages/reference/cuda_transformer_kernels.h"

#include "stages/reference/cuda_kernel_util.cuh"
#include "stages/reference/transformer_kernels.h"  // kRmsNormEpsilon, kRotaryBase

namespace jitpipe::reference_cuda {
namespace {

using namespace kernel_util;  // NOLINT: the launch helpers

// One block per row.
__global__ void RmsNormForward(const Bf16* x, const Bf16* w, int64_t width, Bf16* y,
                               float* rstd) {
  __shared__ float scratch[kThreads];
  const int64_t o = blockIdx.x * width;
  float squares = 0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float v = F(x[o + j]);
    squares += v * v;
  }
  squares = BlockReduce(squares, Sum(), scratch);
  const float inv = rsqrtf(squares / static_cast<float>(width) + kRmsNormEpsilon);
  if (threadIdx.x == 0) rstd[blockIdx.x] = inv;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    y[o + j] = B(F(x[o + j]) * inv * F(w[j]));
  }
}

__global__ void RmsNormBackwardInput(const Bf16* x, const Bf16* w, const float* rstd,
                                     const float* dy, const Bf16* residual, int64_t width,
                                     Bf16* dx) {
  __shared__ float scratch[kThreads];
  const int64_t o = blockIdx.x * width;
  const float inv = rstd[blockIdx.x];
  float dot = 0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) dot += dy[o + j] * F(w[j]) * F(x[o + j]);
  dot = BlockReduce(dot, Sum(), scratch);  // every thread has read its x before any writes
  const float k = dot / static_cast<float>(width) * inv * inv;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float r = residual != nullptr ? F(residual[o + j]) : 0.0f;
    dx[o + j] = B(inv * (F(w[j]) * dy[o + j] - F(x[o + j]) * k) + r);
  }
}

__global__ void RmsNormBackwardWeight(const Bf16* x, const float* rstd, const float* dy,
                                      int64_t rows, int64_t width, float* dw) {
  for (int64_t j = First(); j < width; j += Stride()) {
    float sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * width + j] * F(x[r * width + j]) * rstd[r];
    dw[j] += sum;
  }
}

__global__ void Rotary(const float* in, Bf16* out, int64_t n, int64_t seq, int64_t width,
                       int64_t rotated, int64_t d, bool inverse) {
  const int64_t half = d / 2;
  for (int64_t k = First(); k < n; k += Stride()) {
    const int64_t row = k / width, c = k % width;
    if (c >= rotated * d) {
      out[k] = B(in[k]);
      continue;
    }
    const int64_t i = c % d;
    const int64_t pair = i < half ? i : i - half;
    const double frequency =
        pow(static_cast<double>(kRotaryBase), -2.0 * static_cast<double>(pair) / static_cast<double>(d));
    const double angle = static_cast<double>(row % seq) * frequency;
    const float cs = static_cast<float>(cos(angle));
    const float sn = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    if (i < half) {
      out[k] = B(in[k] * cs - in[k + half] * sn);
    } else {
      out[k] = B(in[k - half] * sn + in[k] * cs);
    }
  }
}

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void SwiGluForward(const Bf16* gate, const Bf16* up, int64_t n, Bf16* act) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const float g = F(gate[k]);
    act[k] = B(g * Sigmoid(g) * F(up[k]));
  }
}

__global__ void SwiGluBackward(const float* dact, int64_t n, Bf16* gate, Bf16* up) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const float g = F(gate[k]), u = F(up[k]), da = dact[k];
    const float sig = Sigmoid(g);
    gate[k] = B(da * u * sig * (1.0f + g * (1.0f - sig)));
    up[k] = B(da * g * sig);
  }
}

__global__ void EmbeddingForward(const int64_t* tokens, const Bf16* table, int64_t n,
                                 int64_t width, Bf16* y) {
  for (int64_t k = First(); k < n; k += Stride()) {
    y[k] = table[tokens[k / width] * width + k % width];
  }
}

__global__ void EmbeddingBackwardWeight(const int64_t* tokens, const Bf16* dy, int64_t rows,
                                        int64_t width, float* dtable) {
  for (int64_t j = First(); j < width; j += Stride()) {
    for (int64_t r = 0; r < rows; ++r) dtable[tokens[r] * width + j] += F(dy[r * width + j]);
  }
}

__global__ void ToBf16(const float* in, int64_t n, Bf16* out) {
  for (int64_t k = First(); k < n; k += Stride()) out[k] = B(in[k]);
}

__global__ void AddInto(const float* src, int64_t n, float* dst) {
  for (int64_t k = First(); k < n; k += Stride()) dst[k] += src[k];
}

}  // namespace

cudaError_t LaunchRmsNormForward(const Bf16* x, const Bf16* w, int64_t rows, int64_t width,
                                 Bf16* y, float* rstd, cudaStream_t stream) {
  ClearStaleError();
  RmsNormForward<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, width, y, rstd);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormBackwardInput(const Bf16* x, const Bf16* w, const float* rstd,
                                       const float* dy, const Bf16* residual, int64_t rows,
                                       int64_t width, Bf16* dx, cudaStream_t stream) {
  ClearStaleError();
  RmsNormBackwardInput<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, w, rstd, dy, residual, width, dx);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormBackwardWeight(const Bf16* x, const float* rstd, const float* dy,
                                        int64_t rows, int64_t width, float* dw,
                                        cudaStream_t stream) {
  ClearStaleError();
  RmsNormBackwardWeight<<<BlocksFor(width), kThreads, 0, stream>>>(x, rstd, dy, rows, width, dw);
  return cudaGetLastError();
}

cudaError_t LaunchRotary(const float* in, Bf16* out, int64_t rows, int64_t seq, int64_t width,
                         int64_t rotated_heads, int64_t head_dim, bool inverse,
                         cudaStream_t stream) {
  const int64_t n = rows * width;
  ClearStaleError();
  Rotary<<<BlocksFor(n), kThreads, 0, stream>>>(in, out, n, seq, width, rotated_heads, head_dim,
                                                inverse);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluForward(const Bf16* gate, const Bf16* up, int64_t n, Bf16* act,
                                cudaStream_t stream) {
  ClearStaleError();
  SwiGluForward<<<BlocksFor(n), kThreads, 0, stream>>>(gate, up, n, act);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluBackward(const float* dact, int64_t n, Bf16* gate, Bf16* up,
                                 cudaStream_t stream) {
  ClearStaleError();
  SwiGluBackward<<<BlocksFor(n), kThreads, 0, stream>>>(dact, n, gate, up);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingForward(const int64_t* tokens, const Bf16* table, int64_t rows,
                                   int64_t width, Bf16* y, cudaStream_t stream) {
  const int64_t n = rows * width;
  ClearStaleError();
  EmbeddingForward<<<BlocksFor(n), kThreads, 0, stream>>>(tokens, table, n, width, y);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackwardWeight(const int64_t* tokens, const Bf16* dy, int64_t rows,
                                          int64_t width, float* dtable, cudaStream_t stream) {
  ClearStaleError();
  EmbeddingBackwardWeight<<<BlocksFor(width), kThreads, 0, stream>>>(tokens, dy, rows, width,
                                                                     dtable);
  return cudaGetLastError();
}

cudaError_t LaunchToBf16(const float* in, int64_t n, Bf16* out, cudaStream_t stream) {
  ClearStaleError();
  ToBf16<<<BlocksFor(n), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchAddInto(const float* src, int64_t n, float* dst, cudaStream_t stream) {
  ClearStaleError();
  AddInto<<<BlocksFor(n), kThreads, 0, stream>>>(src, n, dst);
  return cudaGetLastError();
}

}  // namespace jitpipe::reference_cuda
