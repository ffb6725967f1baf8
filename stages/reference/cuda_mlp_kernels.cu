#include "stages/reference/cuda_mlp_kernels.h"

namespace jitpipe::reference_cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover the rest

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

int BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

// Clears an error an earlier runtime call left behind (it was returned to
// that call's caller; sticky errors stay and show again), so that the check
// after a launch reports the launch itself.
void ClearStaleError() { static_cast<void>(cudaGetLastError()); }

__device__ __forceinline__ int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename T>
__global__ void BiasActivation(const float* z, const T* bias, T* out, int64_t n, int hidden,
                               bool use_tanh) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const float v = z[k] + ToFloat(bias[k % hidden]);
    out[k] = FromFloat<T>(use_tanh ? tanhf(v) : v);
  }
}

template <typename G, typename T>
__global__ void ActivationGrad(const G* grad, const T* act, T* dz, int64_t n, bool use_tanh) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const float g = ToFloat(grad[k]);
    const float a = ToFloat(act[k]);
    dz[k] = FromFloat<T>(use_tanh ? g * (1.0f - a * a) : g);
  }
}

// One thread per column, rows in order.
template <typename T>
__global__ void BiasGrad(const T* dz, float* bias_grad, int rows, int hidden) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= hidden) return;
  float sum = 0;
  for (int r = 0; r < rows; ++r) sum += ToFloat(dz[static_cast<int64_t>(r) * hidden + o]);
  bias_grad[o] += sum;
}

// One block: per-thread partial sums, then a tree in shared memory.
template <typename T>
__global__ void Loss(const T* y, const float* target, int64_t n, double scale, double* loss) {
  __shared__ double partial[kThreads];
  double sum = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float d = ToFloat(y[k]) - target[k];
    sum += static_cast<double>(d) * d;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = scale * partial[0] / static_cast<double>(n);
}

template <typename T>
__global__ void LossGrad(const T* y, const float* target, int64_t n, float g, T* dy) {
  for (int64_t k = First(); k < n; k += Stride()) {
    const float d = ToFloat(y[k]) - target[k];
    dy[k] = FromFloat<T>(g * d);
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchBiasActivation(const float* z, const T* bias, T* out, int rows, int hidden,
                                 bool use_tanh, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(rows) * hidden;
  ClearStaleError();
  BiasActivation<T><<<BlocksFor(n), kThreads, 0, stream>>>(z, bias, out, n, hidden, use_tanh);
  return cudaGetLastError();
}

template <typename G, typename T>
cudaError_t LaunchActivationGrad(const G* grad, const T* act, T* dz, int64_t n, bool use_tanh,
                                 cudaStream_t stream) {
  ClearStaleError();
  ActivationGrad<G, T><<<BlocksFor(n), kThreads, 0, stream>>>(grad, act, dz, n, use_tanh);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBiasGrad(const T* dz, float* bias_grad, int rows, int hidden,
                           cudaStream_t stream) {
  ClearStaleError();
  BiasGrad<T><<<BlocksFor(hidden), kThreads, 0, stream>>>(dz, bias_grad, rows, hidden);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLoss(const T* y, const float* target, int64_t n, double scale, double* loss,
                       cudaStream_t stream) {
  ClearStaleError();
  Loss<T><<<1, kThreads, 0, stream>>>(y, target, n, scale, loss);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLossGrad(const T* y, const float* target, int64_t n, float g, T* dy,
                           cudaStream_t stream) {
  ClearStaleError();
  LossGrad<T><<<BlocksFor(n), kThreads, 0, stream>>>(y, target, n, g, dy);
  return cudaGetLastError();
}

// The instantiations cuda_mlp_stage.cc uses.
#define JITPIPE_INSTANTIATE_(T)                                                                   \
  template cudaError_t LaunchBiasActivation<T>(const float*, const T*, T*, int, int, bool,       \
                                               cudaStream_t);                                     \
  template cudaError_t LaunchActivationGrad<float, T>(const float*, const T*, T*, int64_t, bool, \
                                                      cudaStream_t);                              \
  template cudaError_t LaunchBiasGrad<T>(const T*, float*, int, int, cudaStream_t);              \
  template cudaError_t LaunchLoss<T>(const T*, const float*, int64_t, double, double*,           \
                                     cudaStream_t);                                               \
  template cudaError_t LaunchLossGrad<T>(const T*, const float*, int64_t, float, T*, cudaStream_t);
JITPIPE_INSTANTIATE_(float)
JITPIPE_INSTANTIATE_(__nv_bfloat16)
#undef JITPIPE_INSTANTIATE_
template cudaError_t LaunchActivationGrad<__nv_bfloat16, __nv_bfloat16>(const __nv_bfloat16*,
                                                                        const __nv_bfloat16*,
                                                                        __nv_bfloat16*, int64_t,
                                                                        bool, cudaStream_t);

}  // namespace jitpipe::reference_cuda
