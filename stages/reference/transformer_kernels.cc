#include "stages/reference/transformer_kernels.h"

#include <algorithm>
#include <cmath>

namespace jitpipe {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Rotates one head's d values at `position` (forward, or back).
void RotateHead(float* v, int64_t d, int64_t position, bool inverse) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double frequency =
        std::pow(static_cast<double>(kRotaryBase), -2.0 * static_cast<double>(i) / d);
    const double angle = static_cast<double>(position) * frequency;
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = a * s + b * c;
  }
}

}  // namespace

void RmsNormForward(const float* x, const float* w, int64_t rows, int64_t width, float* y,
                    float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    double squares = 0;
    for (int64_t j = 0; j < width; ++j) squares += static_cast<double>(xr[j]) * xr[j];
    const float inv = static_cast<float>(1.0 / std::sqrt(squares / width + kRmsNormEpsilon));
    rstd[r] = inv;
    for (int64_t j = 0; j < width; ++j) y[r * width + j] = xr[j] * inv * w[j];
  }
}

// y_j = w_j x_j r with r = (mean x² + eps)^(-1/2), dr/dx_k = -r³ x_k / width:
//   dx_k = r (w_k dy_k - x_k r² (sum_j dy_j w_j x_j) / width),
//   dw_j = sum over rows of dy_j x_j r.
void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy,
                     const float* residual_grad, int64_t rows, int64_t width, float* dx,
                     float* dw) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * width;
    const float inv = rstd[r];
    double dot = 0;
    for (int64_t j = 0; j < width; ++j) dot += static_cast<double>(dy[o + j]) * w[j] * x[o + j];
    const float k = static_cast<float>(dot / width) * inv * inv;
    for (int64_t j = 0; j < width; ++j) {
      const float xj = x[o + j], dyj = dy[o + j];
      const float residual = residual_grad != nullptr ? residual_grad[o + j] : 0.0f;
      dw[j] += dyj * xj * inv;
      dx[o + j] = inv * (w[j] * dyj - xj * k) + residual;
    }
  }
}

void RotaryInPlace(const TransformerBlockShape& shape, float* qkv, bool inverse) {
  const int64_t d = shape.head_dim(), width = shape.qkv_width();
  const int64_t rotated_heads = shape.heads + shape.kv_heads;  // q heads, then k heads
  for (int64_t r = 0; r < shape.rows(); ++r) {
    for (int64_t head = 0; head < rotated_heads; ++head) {
      RotateHead(qkv + r * width + head * d, d, r % shape.seq, inverse);
    }
  }
}

void SwiGluForward(const float* gate, const float* up, int64_t n, float* act) {
  for (int64_t i = 0; i < n; ++i) act[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

// silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
void SwiGluBackward(const float* gate, const float* up, const float* dact, int64_t n,
                    float* dgate, float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], u = up[i], da = dact[i];
    const float sig = Sigmoid(g);
    dgate[i] = da * u * sig * (1.0f + g * (1.0f - sig));
    dup[i] = da * g * sig;
  }
}

void EmbeddingForward(const int64_t* tokens, const float* table, int64_t rows, int64_t width,
                      float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(table + tokens[r] * width, width, y + r * width);
  }
}

void EmbeddingBackwardWeight(const int64_t* tokens, const float* dy, int64_t rows,
                             int64_t width, float* dtable) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = dtable + tokens[r] * width;
    for (int64_t j = 0; j < width; ++j) row[j] += dy[r * width + j];
  }
}

double CrossEntropyForward(float* logits, const int64_t* targets, int64_t rows, int64_t vocab) {
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits + r * vocab;
    const float top = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - top));
    const float log_sum = top + static_cast<float>(std::log(sum));
    for (int64_t v = 0; v < vocab; ++v) row[v] -= log_sum;
    loss -= row[targets[r]];
  }
  return loss;
}

void CrossEntropyBackward(float* log_softmax, const int64_t* targets, int64_t rows,
                          int64_t vocab, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = log_softmax + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) row[v] = scale * std::exp(row[v]);
    row[targets[r]] -= scale;
  }
}

}  // namespace jitpipe
