#include "comm/cuda/reduce_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>

namespace jitpipe {
namespace cuda_kernels {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
}

__device__ float Round(float x, bool bf16) {
  return bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

__global__ void InitKernel(float* out, const float* in, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Round(in[i], bf16);
  }
}

__global__ void AccumulateKernel(float* out, const float* in, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Round(out[i] + Round(in[i], bf16), bf16);
  }
}

__global__ void ScaleKernel(float* out, int64_t n, float factor, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Round(out[i] * factor, bf16);
  }
}

__global__ void ToBf16Kernel(__nv_bfloat16* out, const float* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __float2bfloat16_rn(in[i]);
  }
}

__global__ void FromBf16Kernel(float* out, const __nv_bfloat16* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat162float(in[i]);
  }
}

}  // namespace

cudaError_t Init(float* out, const float* in, int64_t n, bool bf16, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  InitKernel<<<Blocks(n), kThreads, 0, stream>>>(out, in, n, bf16);
  return cudaGetLastError();
}

cudaError_t Accumulate(float* out, const float* in, int64_t n, bool bf16, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AccumulateKernel<<<Blocks(n), kThreads, 0, stream>>>(out, in, n, bf16);
  return cudaGetLastError();
}

cudaError_t Scale(float* out, int64_t n, float factor, bool bf16, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(out, n, factor, bf16);
  return cudaGetLastError();
}

cudaError_t ToBf16(uint16_t* out, const float* in, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), in, n);
  return cudaGetLastError();
}

cudaError_t FromBf16(float* out, const uint16_t* in, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FromBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(
      out, reinterpret_cast<const __nv_bfloat16*>(in), n);
  return cudaGetLastError();
}

}  // namespace cuda_kernels
}  // namespace jitpipe
