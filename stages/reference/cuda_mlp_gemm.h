// The three matrix products of an MLP layer (mlp_kernels.h) as the
// column-major GEMM calls the CUDA stage makes (cublasGemmEx, C = op(A)
// op(B) + beta C), so that their operands, transposes and leading dimensions
// are checked on the host (cuda_mlp_stage_test.cc) before any GPU runs them.
//
// The tensors are row-major: an activation [rows x hidden], W [in x out].
// A row-major [r x c] matrix is, in the same memory, the column-major
// [c x r] matrix of its transpose, so each product is computed transposed:
//
//   product         row-major        column-major call     A    B    beta
//   forward         z  = a W         z^T  = W^T a^T        W    a    0
//   input gradient  g  = dz W^T      g^T  = W dz^T         W    dz   0
//   weight gradient gW += a^T dz     gW^T = dz^T a  (+)    dz   a    1
//
// Header-only, C++17, no CUDA types: pure functions, thread-safe.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_MLP_GEMM_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_MLP_GEMM_H_

#include "stages/reference/mlp_kernels.h"

namespace jitpipe::reference_cuda {

// One column-major GEMM: C [m x n] (ldc) = op(A) [m x k] op(B) [k x n]
// + beta C, where op(X) is X, or X^T when transpose_x (A stored [k x m],
// B stored [n x k]).
struct GemmCall {
  bool transpose_a = false;
  bool transpose_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  float beta = 0;
};

// A = W, B = the layer's input a, C = z.
inline GemmCall ForwardGemm(const MlpShape& s) {
  return GemmCall{false, false, s.hidden, s.rows, s.hidden, s.hidden, s.hidden, s.hidden, 0.0f};
}

// A = W, B = the layer's dz, C = the gradient of the layer's input.
inline GemmCall InputGradGemm(const MlpShape& s) {
  return GemmCall{true, false, s.hidden, s.rows, s.hidden, s.hidden, s.hidden, s.hidden, 0.0f};
}

// A = the layer's dz, B = the layer's input a, C = gW (accumulated).
inline GemmCall WeightGradGemm(const MlpShape& s) {
  return GemmCall{false, true, s.hidden, s.hidden, s.rows, s.hidden, s.hidden, s.hidden, 1.0f};
}

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_MLP_GEMM_H_
