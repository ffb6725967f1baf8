#include "stages/reference/mlp_kernels.h"

#include <cmath>

namespace jitpipe {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

float MlpUniform(uint64_t seed, MlpData what, uint64_t a, uint64_t b, uint64_t c,
                 uint64_t index) {
  uint64_t h = SplitMix64(seed);
  for (uint64_t v : {static_cast<uint64_t>(what), a, b, c, index}) h = SplitMix64(h ^ v);
  // 24 random bits: exact in a float.
  return static_cast<float>(static_cast<double>(h >> 40) / static_cast<double>(1 << 23) - 1.0);
}

std::vector<float> MlpInitialParams(const MlpShape& shape, uint64_t seed, int block) {
  std::vector<float> params(static_cast<size_t>(shape.block_params()));
  const float weight_scale = 1.5f / std::sqrt(static_cast<float>(shape.hidden));
  const int64_t weights = static_cast<int64_t>(shape.hidden) * shape.hidden;
  for (int l = 0; l < shape.layers; ++l) {
    float* w = params.data() + l * shape.layer_params();
    const uint64_t layer = static_cast<uint64_t>(block) * shape.layers + l;
    for (int64_t k = 0; k < weights; ++k) {
      w[k] = weight_scale * MlpUniform(seed, MlpData::kWeight, layer, 0, 0, k);
    }
    for (int k = 0; k < shape.hidden; ++k) {
      w[weights + k] = 0.1f * MlpUniform(seed, MlpData::kBias, layer, 0, 0, k);
    }
  }
  return params;
}

void MlpFill(const MlpShape& shape, uint64_t seed, MlpData what, int replica, int chain,
             int microbatch, float* out) {
  for (int64_t k = 0; k < shape.activation_floats(); ++k) {
    out[k] = MlpUniform(seed, what, replica, chain, microbatch, k);
  }
}

// Layers: l in [0, layers); within a layer, rows r, inputs i, outputs o.
void MlpBlockForward(const MlpShape& shape, const float* params, const float* x, float* acts,
                     bool linear_head) {
  const int h = shape.hidden;
  const int64_t n = shape.activation_floats();
  for (int l = 0; l < shape.layers; ++l) {
    const float* w = params + l * shape.layer_params();
    const float* bias = w + static_cast<int64_t>(h) * h;
    const float* in = l == 0 ? x : acts + (l - 1) * n;
    float* out = acts + l * n;
    const bool tanh_layer = !(linear_head && l == shape.layers - 1);
    for (int r = 0; r < shape.rows; ++r) {
      float* z = out + static_cast<int64_t>(r) * h;
      for (int o = 0; o < h; ++o) z[o] = bias[o];
      for (int i = 0; i < h; ++i) {
        const float a = in[static_cast<int64_t>(r) * h + i];
        const float* wi = w + static_cast<int64_t>(i) * h;
        for (int o = 0; o < h; ++o) z[o] += a * wi[o];
      }
      if (tanh_layer) {
        for (int o = 0; o < h; ++o) z[o] = std::tanh(z[o]);
      }
    }
  }
}

double MlpLoss(const MlpShape& shape, const float* y, const float* t, double scale, float* grad) {
  const int64_t n = shape.activation_floats();
  double sum = 0;
  const float g = static_cast<float>(2.0 * scale / static_cast<double>(n));
  for (int64_t k = 0; k < n; ++k) {
    const float d = y[k] - t[k];
    sum += static_cast<double>(d) * d;
    if (grad != nullptr) grad[k] = g * d;
  }
  return scale * sum / static_cast<double>(n);
}

// Layers backwards, l = layers-1 .. 0: dz_l = g * tanh'(z_l) with
// tanh' = 1 - a_l^2 (identity for a linear head), then g = dz_l W_l^T.
void MlpBlockBackwardInput(const MlpShape& shape, const float* params, const float* acts,
                           const float* grad_out, float* dz, float* grad_in, bool linear_head) {
  const int h = shape.hidden;
  const int64_t n = shape.activation_floats();
  for (int l = shape.layers - 1; l >= 0; --l) {
    const float* g = l == shape.layers - 1 ? grad_out : dz + l * n;  // see below
    const float* a = acts + l * n;
    float* d = dz + l * n;
    const bool tanh_layer = !(linear_head && l == shape.layers - 1);
    for (int64_t k = 0; k < n; ++k) d[k] = tanh_layer ? g[k] * (1.0f - a[k] * a[k]) : g[k];
    if (l > 0) {
      // The next g (for layer l-1) is dz_l W_l^T; store it in the place of
      // dz_{l-1}, which the next iteration overwrites element by element.
      const float* w = params + l * shape.layer_params();
      float* next = dz + (l - 1) * n;
      for (int r = 0; r < shape.rows; ++r) {
        for (int i = 0; i < h; ++i) {
          const float* wi = w + static_cast<int64_t>(i) * h;
          const float* dr = d + static_cast<int64_t>(r) * h;
          float s = 0;
          for (int o = 0; o < h; ++o) s += dr[o] * wi[o];
          next[static_cast<int64_t>(r) * h + i] = s;
        }
      }
    }
  }
  if (grad_in == nullptr) return;
  const float* w = params;
  for (int r = 0; r < shape.rows; ++r) {
    for (int i = 0; i < h; ++i) {
      const float* wi = w + static_cast<int64_t>(i) * h;
      const float* dr = dz + static_cast<int64_t>(r) * h;
      float s = 0;
      for (int o = 0; o < h; ++o) s += dr[o] * wi[o];
      grad_in[static_cast<int64_t>(r) * h + i] = s;
    }
  }
}

void MlpBlockBackwardWeight(const MlpShape& shape, const float* x, const float* acts,
                            const float* dz, float* grads) {
  const int h = shape.hidden;
  const int64_t n = shape.activation_floats();
  for (int l = 0; l < shape.layers; ++l) {
    const float* in = l == 0 ? x : acts + (l - 1) * n;
    const float* d = dz + l * n;
    float* gw = grads + l * shape.layer_params();
    float* gb = gw + static_cast<int64_t>(h) * h;
    for (int r = 0; r < shape.rows; ++r) {
      const float* dr = d + static_cast<int64_t>(r) * h;
      for (int i = 0; i < h; ++i) {
        const float a = in[static_cast<int64_t>(r) * h + i];
        float* gwi = gw + static_cast<int64_t>(i) * h;
        for (int o = 0; o < h; ++o) gwi[o] += a * dr[o];
      }
      for (int o = 0; o < h; ++o) gb[o] += dr[o];
    }
  }
}

}  // namespace jitpipe
