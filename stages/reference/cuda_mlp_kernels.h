// The element-wise and reduction kernels of the CUDA MLP stage
// (cuda_mlp_stage.h): what cuBLAS does not cover. The matrix products are
// cuBLAS calls in cuda_mlp_stage.cc.
//
// Storage type T is float (fp32) or __nv_bfloat16 (bf16). Every kernel
// computes in fp32 (the loss sum in double), reads T and rounds once to
// nearest-even when it stores T. Tensors are row-major [rows x hidden], as
// in mlp_kernels.h; n = rows x hidden.
//
// Each launcher enqueues one kernel on `stream` and returns the launch's
// error (cudaGetLastError, cleared just before the launch: an earlier call's
// error was that call's to report); it never synchronises. Pointers are device
// pointers that must stay valid until the kernel has run.
//
// Compiled by nvcc as C++17 (reference/ecosystem.md 6.2): keep this header
// C++17-clean.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_MLP_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_MLP_KERNELS_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace jitpipe::reference_cuda {

// out = act(z + bias) per row: z is the fp32 product of the layer's input and
// weights, bias [hidden]; act is tanh, or the identity when !use_tanh (the
// model's linear head).
template <typename T>
cudaError_t LaunchBiasActivation(const float* z, const T* bias, T* out, int rows, int hidden,
                                 bool use_tanh, cudaStream_t stream);

// dz = grad * (1 - act^2) (tanh' from the layer's saved output act), or
// dz = grad when !use_tanh. G is float (an fp32 product) or T (a stored gradient).
template <typename G, typename T>
cudaError_t LaunchActivationGrad(const G* grad, const T* act, T* dz, int64_t n, bool use_tanh,
                                 cudaStream_t stream);

// bias_grad[o] += sum over rows of dz[r][o], in fp32.
template <typename T>
cudaError_t LaunchBiasGrad(const T* dz, float* bias_grad, int rows, int hidden,
                           cudaStream_t stream);

// *loss = scale * sum((y - target)^2) / n, summed in double in a fixed
// order (one block): deterministic.
template <typename T>
cudaError_t LaunchLoss(const T* y, const float* target, int64_t n, double scale, double* loss,
                       cudaStream_t stream);

// dy = g * (y - target), with g = 2 * scale / n as a float (mlp_kernels.h
// MlpLoss).
template <typename T>
cudaError_t LaunchLossGrad(const T* y, const float* target, int64_t n, float g, T* dy,
                           cudaStream_t stream);

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_MLP_KERNELS_H_
