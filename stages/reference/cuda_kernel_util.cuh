// Launch helpers shared by the CUDA reference stages' kernels (.cu files
// only): grid-stride loops, the fp32 <-> bf16 conversions, block
// reductions. Device code; C++17.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_KERNEL_UTIL_CUH_
#define JITPIPE_STAGES_REFERENCE_CUDA_KERNEL_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace jitpipe::reference_cuda::kernel_util {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover the rest

inline int BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// Clears an earlier call's error (it was that call's to report; sticky
// errors show again), so that the check after a launch reports the launch.
inline void ClearStaleError() { static_cast<void>(cudaGetLastError()); }

__device__ __forceinline__ int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
__device__ __forceinline__ float F(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float F(float v) { return v; }
__device__ __forceinline__ __nv_bfloat16 B(float v) { return __float2bfloat16_rn(v); }

// The sum (or max) of one value per thread of a block of kThreads threads,
// returned to every thread; a fixed tree (deterministic).
template <typename T, typename Op>
__device__ T BlockReduce(T value, Op op, T* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + half]);
    __syncthreads();
  }
  const T out = scratch[0];
  __syncthreads();
  return out;
}

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};

}  // namespace jitpipe::reference_cuda::kernel_util

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_KERNEL_UTIL_CUH_
