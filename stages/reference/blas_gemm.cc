#include "stages/reference/blas_gemm.h"

#include <cblas.h>

namespace jitpipe {
namespace {

blasint Int(int64_t v) { return static_cast<blasint>(v); }

}  // namespace

void UseOneBlasThread() {
  // A process-wide setting; cheap when it does not change.
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void MatMul(const float* x, const float* w, float* y, int64_t m, int64_t k, int64_t n,
            bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(m), Int(n), Int(k), 1.0f, x, Int(k),
              w, Int(n), accumulate ? 1.0f : 0.0f, y, Int(n));
}

void MatMulTransposedB(const float* dy, const float* w, float* dx, int64_t m, int64_t n,
                       int64_t k, bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(m), Int(k), Int(n), 1.0f, dy, Int(n),
              w, Int(n), accumulate ? 1.0f : 0.0f, dx, Int(k));
}

void MatMulTransposedAAccumulate(const float* x, const float* dy, float* dw, int64_t m,
                                 int64_t k, int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(k), Int(n), Int(m), 1.0f, x, Int(k),
              dy, Int(n), 1.0f, dw, Int(n));
}

}  // namespace jitpipe
