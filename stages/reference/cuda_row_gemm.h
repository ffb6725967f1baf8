// Row-major products as cuBLAS's column-major calls, for the CUDA
// transformer (cuda_transformer_layer.cc): a row-major [r x c] matrix is, in
// the same memory, the column-major [c x r] matrix of its transpose, so
// C = op(A) op(B) (row-major) is C^T = op(B)^T op(A)^T (column-major): the
// call swaps A and B, and m and n, and keeps each operand's transpose flag.
// Batched products (strided: one K/V head's group of query heads) give each
// operand's stride between batch entries, 0 for one shared by every entry.
//
// Header-only, no CUDA types (checked on the host by
// cuda_transformer_stage_test): pure functions, thread-safe.
#ifndef JITPIPE_STAGES_REFERENCE_CUDA_ROW_GEMM_H_
#define JITPIPE_STAGES_REFERENCE_CUDA_ROW_GEMM_H_

#include <cstdint>

namespace jitpipe::reference_cuda {

// Row-major C [m x n] = alpha op(A) [m x k] op(B) [k x n] + beta C, each
// operand with its leading dimension (elements between rows) and batch
// stride.
struct RowGemm {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
};

// The column-major call: first operand (`a`) is the row-major B.
struct ColumnGemm {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  bool swapped = true;  // the call's A is the product's B
};

inline ColumnGemm ToColumnMajor(const RowGemm& g) {
  return ColumnGemm{g.transpose_b, g.transpose_a, g.n,        g.m,        g.k,
                    g.ldb,         g.lda,         g.ldc,      g.stride_b, g.stride_a,
                    g.stride_c,    g.batch,       g.alpha,    g.beta,     true};
}

// Dense row-major products (leading dimension = the column count):
// y [m x n] = x [m x k] w [k x n].
inline RowGemm DenseForward(int64_t m, int64_t k, int64_t n, float beta) {
  RowGemm g;
  g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = n, g.ldc = n, g.beta = beta;
  return g;
}
// dx [m x k] = dy [m x n] w [k x n]^T.
inline RowGemm DenseInputGrad(int64_t m, int64_t n, int64_t k, float beta) {
  RowGemm g;
  g.transpose_b = true;
  g.m = m, g.n = k, g.k = n, g.lda = n, g.ldb = n, g.ldc = k, g.beta = beta;
  return g;
}
// dw [k x n] += x [m x k]^T dy [m x n].
inline RowGemm DenseWeightGrad(int64_t m, int64_t k, int64_t n) {
  RowGemm g;
  g.transpose_a = true;
  g.m = k, g.n = n, g.k = m, g.lda = k, g.ldb = n, g.ldc = n, g.beta = 1.0f;
  return g;
}

}  // namespace jitpipe::reference_cuda

#endif  // JITPIPE_STAGES_REFERENCE_CUDA_ROW_GEMM_H_
