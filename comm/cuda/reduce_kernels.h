// The device side of the device backends' reductions (comm/stream_plan.h):
// the only kernels of comm/, kept to what NCCL does not do -- fp32 <-> bf16
// conversion for a bf16 wire, and the one-GPU backend's sums of its ranks'
// buffers. Each launch is enqueued on `stream` and returns the launch's
// error (cudaGetLastError); nothing blocks.
//
// "r" below is rounding to bf16 (round to nearest even) when `bf16` is set,
// and nothing otherwise: a bf16 reduction rounds each operand and each
// partial sum, as a bf16 ring reduction does.
//
// Internal to comm/cuda and comm/nccl. C++17 (CUDA sources are compiled as
// C++17, reference/ecosystem.md 6.2).
#ifndef JITPIPE_COMM_CUDA_REDUCE_KERNELS_H_
#define JITPIPE_COMM_CUDA_REDUCE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace jitpipe {
namespace cuda_kernels {

// out[i] = r(in[i])
cudaError_t Init(float* out, const float* in, int64_t n, bool bf16, cudaStream_t stream);
// out[i] = r(out[i] + r(in[i]))
cudaError_t Accumulate(float* out, const float* in, int64_t n, bool bf16, cudaStream_t stream);
// out[i] = r(out[i] * factor)
cudaError_t Scale(float* out, int64_t n, float factor, bool bf16, cudaStream_t stream);
// bf16 bits of in[i] (round to nearest even), and back.
cudaError_t ToBf16(uint16_t* out, const float* in, int64_t n, cudaStream_t stream);
cudaError_t FromBf16(float* out, const uint16_t* in, int64_t n, cudaStream_t stream);

}  // namespace cuda_kernels
}  // namespace jitpipe

#endif  // JITPIPE_COMM_CUDA_REDUCE_KERNELS_H_
