// The GEMMs of the reference transformer (transformer_kernels.h), row-major
// fp32 through OpenBLAS's cblas_sgemm.
//
// Why OpenBLAS: its sgemm is multithreaded and tuned per CPU, Debian packages
// it (libopenblas-dev, tools/install-deps.sh), and it has the standard cblas
// interface plus openblas_set_num_threads. A replay runs every rank as a
// thread of one process, so each GEMM must run on its caller's thread only:
// UseOneBlasThread() sets OpenBLAS to one thread (a process-wide setting) and
// every stage calls it when it is made.
//
// Shapes name rows x columns; every matrix is dense (leading dimension = its
// column count). Pointers are borrowed for the call. Thread-safe once
// UseOneBlasThread() has run.
#ifndef JITPIPE_STAGES_REFERENCE_BLAS_GEMM_H_
#define JITPIPE_STAGES_REFERENCE_BLAS_GEMM_H_

#include <cstdint>

namespace jitpipe {

// Makes OpenBLAS run every call on the calling thread. Idempotent.
void UseOneBlasThread();

// y[m x n] = x[m x k] w[k x n] (+ y when `accumulate`).
void MatMul(const float* x, const float* w, float* y, int64_t m, int64_t k, int64_t n,
            bool accumulate);

// dx[m x k] = dy[m x n] w[k x n]^T (+ dx when `accumulate`): a product's input
// gradient.
void MatMulTransposedB(const float* dy, const float* w, float* dx, int64_t m, int64_t n,
                       int64_t k, bool accumulate);

// dw[k x n] += x[m x k]^T dy[m x n]: a product's weight gradient, accumulated.
void MatMulTransposedAAccumulate(const float* x, const float* dy, float* dw, int64_t m,
                                 int64_t k, int64_t n);

}  // namespace jitpipe

#endif  // JITPIPE_STAGES_REFERENCE_BLAS_GEMM_H_
