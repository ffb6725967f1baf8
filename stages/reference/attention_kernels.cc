#include "stages/reference/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace jitpipe {
namespace {

// Where one head of one token lives. Index spaces: sample b in [0, batch),
// query head q in [0, a) with key/value head q / (a / g), positions i (query)
// and j (key) in [0, seq), j <= i.
struct HeadView {
  const TransformerBlockShape& shape;
  int64_t d, width;
  int64_t Row(int64_t sample, int64_t position) const { return sample * shape.seq + position; }
  int64_t Q(int64_t sample, int64_t position, int64_t head) const {
    return Row(sample, position) * width + head * d;
  }
  int64_t K(int64_t sample, int64_t position, int64_t head) const {
    return Row(sample, position) * width + shape.hidden + KvHead(head) * d;
  }
  int64_t V(int64_t sample, int64_t position, int64_t head) const {
    return K(sample, position, head) + shape.kv_heads * d;
  }
  int64_t O(int64_t sample, int64_t position, int64_t head) const {
    return Row(sample, position) * shape.hidden + head * d;
  }
  int64_t Lse(int64_t sample, int64_t position, int64_t head) const {
    return (sample * shape.heads + head) * shape.seq + position;
  }
  int64_t KvHead(int64_t head) const { return head / (shape.heads / shape.kv_heads); }
};

HeadView ViewOf(const TransformerBlockShape& shape) {
  return HeadView{shape, shape.head_dim(), shape.qkv_width()};
}

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void AttentionForward(const TransformerBlockShape& shape, const float* qkv, float* out,
                      float* lse) {
  const HeadView v = ViewOf(shape);
  const float scale = 1.0f / std::sqrt(static_cast<float>(v.d));
  std::vector<float> scores(static_cast<size_t>(shape.seq));
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t head = 0; head < shape.heads; ++head) {
      for (int64_t i = 0; i < shape.seq; ++i) {
        const float* q = qkv + v.Q(b, i, head);
        float top = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          scores[j] = Dot(q, qkv + v.K(b, j, head), v.d) * scale;
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(scores[j] - top));
        const float log_sum = top + static_cast<float>(std::log(sum));
        lse[v.Lse(b, i, head)] = log_sum;
        float* o = out + v.O(b, i, head);
        std::fill_n(o, v.d, 0.0f);
        for (int64_t j = 0; j <= i; ++j) {
          const float p = std::exp(scores[j] - log_sum);
          const float* value = qkv + v.V(b, j, head);
          for (int64_t c = 0; c < v.d; ++c) o[c] += p * value[c];
        }
      }
    }
  }
}

// FlashAttention-2's backward per query i: P_ij = exp(S_ij - lse_i),
// D_i = dO_i . O_i, dV_j += P_ij dO_i, dS_ij = P_ij (dO_i . V_j - D_i),
// dQ_i += scale dS_ij K_j, dK_j += scale dS_ij Q_i. Query heads sharing a
// key/value head add into the same dK, dV.
void AttentionBackward(const TransformerBlockShape& shape, const float* qkv, const float* out,
                       const float* lse, const float* dout, float* dqkv) {
  const HeadView v = ViewOf(shape);
  const float scale = 1.0f / std::sqrt(static_cast<float>(v.d));
  std::fill_n(dqkv, shape.rows() * v.width, 0.0f);
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t head = 0; head < shape.heads; ++head) {
      for (int64_t i = 0; i < shape.seq; ++i) {
        const float* q = qkv + v.Q(b, i, head);
        const float* dout_i = dout + v.O(b, i, head);
        const float delta = Dot(dout_i, out + v.O(b, i, head), v.d);
        const float log_sum = lse[v.Lse(b, i, head)];
        float* dq = dqkv + v.Q(b, i, head);
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = qkv + v.K(b, j, head);
          const float* value = qkv + v.V(b, j, head);
          const float p = std::exp(Dot(q, k, v.d) * scale - log_sum);
          const float ds = p * (Dot(dout_i, value, v.d) - delta) * scale;
          float* dk = dqkv + v.K(b, j, head);
          float* dv = dqkv + v.V(b, j, head);
          for (int64_t c = 0; c < v.d; ++c) {
            dv[c] += p * dout_i[c];
            dq[c] += ds * k[c];
            dk[c] += ds * q[c];
          }
        }
      }
    }
  }
}

}  // namespace jitpipe
