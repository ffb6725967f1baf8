// The element-wise and row-wise kernels of the CUDA transformer block
// (cuda_transformer_stage.h), each the device twin of one function of
// transformer_kernels.h: RMSNorm, rotary positions, SwiGLU, the token
// embedding, and the conversions and sums the block needs between cuBLAS
// calls. The attention's kernels are in cuda_attention_kernels.h, the cross
// entropy's in cuda_loss_kernels.h; the products are cuBLAS calls
// (cuda_row_gemm.h).
//
// Storage: bf16 (`Bf16` below) for stored activations, fp32 for the norms'
// 1/rms, the products' fp32 results and every gradient of a parameter. Every
// kernel computes in fp32 (the RMSNorm's sums too) and rounds once to
// nearest even when it stores bf16. Tensors are row-major [rows x width] as
// in transformer_kernels.h.
//
// Each launcher enqueues its kernel(s) on `stream` and returns the launch's
// error (cudaGetLastError, cleared just before); it never synchronises.
// Pointers are device pointers valid until the kernels have run. Compiled by
// nvcc as C++17: keep this header C++17-clean.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_KERNELS_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_KERNELS_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace jitpipe::reference_cuda {

using Bf16 = __nv_bfloat16;

// y = x / rms(x) * w per row; rstd[r] = 1 / rms(row r) (transformer_kernels.h).
cudaError_t LaunchRmsNormForward(const Bf16* x, const Bf16* w, int64_t rows, int64_t width,
                                 Bf16* y, float* rstd, cudaStream_t stream);

// dx = rstd (w dy - x rstd² (sum_j dy_j w_j x_j) / width) (+ residual when not
// null), from the fp32 dy. dx may be x itself or residual itself (a row is
// read before it is written). Enqueue RmsNormBackwardWeight first when dx
// overwrites x.
cudaError_t LaunchRmsNormBackwardInput(const Bf16* x, const Bf16* w, const float* rstd,
                                       const float* dy, const Bf16* residual, int64_t rows,
                                       int64_t width, Bf16* dx, cudaStream_t stream);

// dw[j] += sum over rows of dy[r][j] x[r][j] rstd[r], rows in order (one
// thread per column: deterministic).
cudaError_t LaunchRmsNormBackwardWeight(const Bf16* x, const float* rstd, const float* dy,
                                        int64_t rows, int64_t width, float* dw,
                                        cudaStream_t stream);

// The fused QKV rows [rows x qkv_width] of `in` (fp32) rotated by position
// (row mod seq) into `out` (bf16): the first rotated_heads heads of head_dim
// values (GPT-NeoX half-split pairs, angle pos x base^(-2i/d), computed in
// double as the CPU does), the rest copied; `inverse` rotates back (the
// backward).
cudaError_t LaunchRotary(const float* in, Bf16* out, int64_t rows, int64_t seq, int64_t width,
                         int64_t rotated_heads, int64_t head_dim, bool inverse,
                         cudaStream_t stream);

// act = silu(gate) up; n elements.
cudaError_t LaunchSwiGluForward(const Bf16* gate, const Bf16* up, int64_t n, Bf16* act,
                                cudaStream_t stream);

// From d act (fp32): d gate and d up, written over gate and up.
cudaError_t LaunchSwiGluBackward(const float* dact, int64_t n, Bf16* gate, Bf16* up,
                                 cudaStream_t stream);

// y[r] = table[tokens[r]]. REQUIRES: tokens in [0, vocab).
cudaError_t LaunchEmbeddingForward(const int64_t* tokens, const Bf16* table, int64_t rows,
                                   int64_t width, Bf16* y, cudaStream_t stream);

// dtable[tokens[r]] += dy[r], rows in order per column (deterministic).
cudaError_t LaunchEmbeddingBackwardWeight(const int64_t* tokens, const Bf16* dy, int64_t rows,
                                          int64_t width, float* dtable, cudaStream_t stream);

// out = bf16(in); n elements.
cudaError_t LaunchToBf16(const float* in, int64_t n, Bf16* out, cudaStream_t stream);

// dst += src, n fp32 elements.
cudaError_t LaunchAddInto(const float* src, int64_t n, float* dst, cudaStream_t stream);

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_TRANSFORMER_KERNELS_H_
