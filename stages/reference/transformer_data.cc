#include "stages/reference/transformer_data.h"

#include <cmath>

#include "stages/reference/transformer_layer.h"

namespace jitpipe {
namespace {

enum class Stream : uint64_t { kEmbedding = 11, kLayer = 12, kHead = 13, kTokens = 14 };

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t seed, Stream what, uint64_t a, uint64_t b, uint64_t c, uint64_t index) {
  uint64_t h = Mix(seed ^ Mix(static_cast<uint64_t>(what)));
  h = Mix(h ^ a);
  h = Mix(h ^ b);
  h = Mix(h ^ c);
  return Mix(h ^ index);
}

// Uniform in [-1, 1) from the hash's top 24 bits.
float Uniform(uint64_t seed, Stream what, uint64_t a, uint64_t index) {
  return static_cast<float>(Hash(seed, what, a, 0, 0, index) >> 40) / 8388608.0f - 1.0f;
}

void FillMatrix(uint64_t seed, Stream what, uint64_t a, int64_t offset, int64_t count,
                int64_t fan_in, float* out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = scale * Uniform(seed, what, a, static_cast<uint64_t>(offset + i));
  }
}

void FillNorm(uint64_t seed, Stream what, uint64_t a, int64_t offset, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = 1.0f + 0.1f * Uniform(seed, what, a, static_cast<uint64_t>(offset + i));
  }
}

}  // namespace

void InitEmbeddingParams(const TransformerBlockShape& s, uint64_t seed, float* out) {
  FillMatrix(seed, Stream::kEmbedding, 0, 0, EmbeddingParamFloats(s), 1, out);
}

// The layout of transformer_layer.h: w1, Wqkv, Wo, w2, Wg, Wu, Wd.
void InitDecoderLayerParams(const TransformerBlockShape& s, uint64_t seed, int layer,
                            float* out) {
  const int64_t h = s.hidden, f = s.ffn;
  const uint64_t id = static_cast<uint64_t>(layer);
  int64_t at = 0;
  auto norm = [&](int64_t count) {
    FillNorm(seed, Stream::kLayer, id, at, count, out + at);
    at += count;
  };
  auto matrix = [&](int64_t rows, int64_t cols) {
    FillMatrix(seed, Stream::kLayer, id, at, rows * cols, rows, out + at);
    at += rows * cols;
  };
  norm(h);
  matrix(h, s.qkv_width());
  matrix(h, h);
  norm(h);
  matrix(h, f);
  matrix(h, f);
  matrix(f, h);
}

void InitLossHeadParams(const TransformerBlockShape& s, uint64_t seed, float* out) {
  FillNorm(seed, Stream::kHead, 0, 0, s.hidden, out);
  FillMatrix(seed, Stream::kHead, 0, s.hidden, s.hidden * s.vocab, s.hidden, out + s.hidden);
}

void FillTokens(const TransformerBlockShape& s, uint64_t seed, int replica, int chain,
                int microbatch, int64_t* tokens, int64_t* targets) {
  const uint64_t vocab = static_cast<uint64_t>(s.vocab);
  auto token = [&](int64_t sample, int64_t position) {
    return static_cast<int64_t>(Hash(seed, Stream::kTokens, static_cast<uint64_t>(replica),
                                     static_cast<uint64_t>(chain),
                                     static_cast<uint64_t>(microbatch),
                                     static_cast<uint64_t>(sample * (s.seq + 1) + position)) %
                                vocab);
  };
  for (int64_t k = 0; k < s.batch; ++k) {
    for (int64_t p = 0; p < s.seq; ++p) {
      if (tokens != nullptr) tokens[k * s.seq + p] = token(k, p);
      if (targets != nullptr) targets[k * s.seq + p] = token(k, p + 1);
    }
  }
}

}  // namespace jitpipe
