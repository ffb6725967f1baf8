#include "stages/reference/transformer_layer.h"

#include <algorithm>
#include <array>

#include "stages/reference/attention_kernels.h"
#include "stages/reference/blas_gemm.h"

namespace jitpipe {
namespace {

// The stash slots of a decoder layer, in DecoderLayerStashTerms' order.
enum Slot { kX, kRstd1, kN1, kQkv, kLse, kO, kMid, kRstd2, kN2, kGate, kUp, kAct, kSlots };
// The parameters of a decoder layer, in their layout's order.
enum Param { kW1, kWqkv, kWo, kW2, kWg, kWu, kWd, kParams };
// The loss head's slots and parameters.
enum HeadSlot { kHeadX, kHeadRstd, kHeadN, kHeadLogits, kHeadSlots };

template <size_t N>
std::array<int64_t, N> Offsets(const std::array<int64_t, N>& sizes) {
  std::array<int64_t, N> out{};
  int64_t at = 0;
  for (size_t i = 0; i < N; ++i) {
    out[i] = at;
    at += sizes[i];
  }
  return out;
}

std::array<int64_t, kParams> ParamSizes(const TransformerBlockShape& s) {
  const int64_t h = s.hidden, f = s.ffn;
  return {h, h * s.qkv_width(), h * h, h, h * f, h * f, f * h};
}

template <typename T>
std::array<T*, kParams> Params(const TransformerBlockShape& s, T* base) {
  const auto offsets = Offsets(ParamSizes(s));
  std::array<T*, kParams> out{};
  for (int i = 0; i < kParams; ++i) out[i] = base + offsets[i];
  return out;
}

template <typename T>
std::array<T*, kSlots> Slots(const TransformerBlockShape& s, T* base) {
  const std::vector<StashTerm> terms = DecoderLayerStashTerms(s);
  std::array<T*, kSlots> out{};
  int64_t at = 0;
  for (int i = 0; i < kSlots; ++i) {
    out[i] = base + at;
    at += terms[i].floats;
  }
  return out;
}

template <typename T>
std::array<T*, kHeadSlots> HeadSlots(const TransformerBlockShape& s, T* base) {
  const std::vector<StashTerm> terms = LossHeadStashTerms(s);
  std::array<T*, kHeadSlots> out{};
  int64_t at = 0;
  for (int i = 0; i < kHeadSlots; ++i) {
    out[i] = base + at;
    at += terms[i].floats;
  }
  return out;
}

int64_t Sum(const std::vector<StashTerm>& terms) {
  int64_t floats = 0;
  for (const StashTerm& t : terms) floats += t.floats;
  return floats;
}

}  // namespace

// The names are the model's (planning/transformer.cc, BodyTerms with
// rmsnorm, swiglu and fused attention), so that a test can match them.
std::vector<StashTerm> DecoderLayerStashTerms(const TransformerBlockShape& s) {
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn;
  return {{"attention norm: input", r * h},
          {"attention norm: 1/rms (fp32 per token)", r},
          {"attention: QKV projection input (the norm's output)", r * h},
          {"attention: Q, K, V (the core's inputs; K and V of g heads)", r * s.qkv_width()},
          {"attention core: log-sum-exp (fp32 per head and query)", AttentionLseFloats(s)},
          {"attention: output projection input (the core's output O)", r * h},
          {"MLP norm: input", r * h},
          {"MLP norm: 1/rms (fp32 per token)", r},
          {"MLP: first projections' input (the norm's output)", r * h},
          {"MLP: gate projection (SwiGLU)", r * f},
          {"MLP: up projection (SwiGLU)", r * f},
          {"MLP: down projection input (silu(gate) · up)", r * f}};
}

std::vector<StashTerm> LossHeadStashTerms(const TransformerBlockShape& s) {
  const int64_t r = s.rows();
  return {{"final norm: input", r * s.hidden},
          {"final norm: 1/rms (fp32 per token)", r},
          {"output layer input (the norm's output)", r * s.hidden},
          {"cross entropy: log-softmax of the logits (fp32)", r * s.vocab}};
}

int64_t DecoderLayerStashFloats(const TransformerBlockShape& s) {
  return Sum(DecoderLayerStashTerms(s));
}
int64_t LossHeadStashFloats(const TransformerBlockShape& s) { return Sum(LossHeadStashTerms(s)); }

int64_t DecoderLayerParamFloats(const TransformerBlockShape& s) {
  int64_t floats = 0;
  for (int64_t size : ParamSizes(s)) floats += size;
  return floats;
}
int64_t LossHeadParamFloats(const TransformerBlockShape& s) {
  return s.hidden + s.hidden * s.vocab;
}
int64_t EmbeddingParamFloats(const TransformerBlockShape& s) { return s.vocab * s.hidden; }

DecoderWorkspace::DecoderWorkspace(const TransformerBlockShape& s)
    : ffn(static_cast<size_t>(s.rows() * s.ffn)),
      hidden(static_cast<size_t>(s.rows() * s.hidden)),
      qkv(static_cast<size_t>(s.rows() * s.qkv_width())) {}

void DecoderLayerForward(const TransformerBlockShape& s, const float* params, const float* x,
                         float* stash, float* y) {
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn;
  const auto p = Params(s, params);
  const auto t = Slots(s, stash);
  if (x != t[kX]) std::copy_n(x, r * h, t[kX]);
  RmsNormForward(t[kX], p[kW1], r, h, t[kN1], t[kRstd1]);
  MatMul(t[kN1], p[kWqkv], t[kQkv], r, h, s.qkv_width(), false);
  RotaryInPlace(s, t[kQkv], /*inverse=*/false);
  AttentionForward(s, t[kQkv], t[kO], t[kLse]);
  std::copy_n(t[kX], r * h, t[kMid]);
  MatMul(t[kO], p[kWo], t[kMid], r, h, h, /*accumulate=*/true);  // the residual
  RmsNormForward(t[kMid], p[kW2], r, h, t[kN2], t[kRstd2]);
  MatMul(t[kN2], p[kWg], t[kGate], r, h, f, false);
  MatMul(t[kN2], p[kWu], t[kUp], r, h, f, false);
  SwiGluForward(t[kGate], t[kUp], r * f, t[kAct]);
  std::copy_n(t[kMid], r * h, y);
  MatMul(t[kAct], p[kWd], y, r, f, h, /*accumulate=*/true);
}

// Backward in reverse, each gradient written over the tensor it replaces
// once nothing later reads that tensor (the header's table).
void DecoderLayerBackwardInput(const TransformerBlockShape& s, const float* params,
                               const float* dy, float* stash, float* norm_grads,
                               DecoderWorkspace& ws) {
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn, w = s.qkv_width();
  const auto p = Params(s, params);
  const auto t = Slots(s, stash);
  MatMulTransposedB(dy, p[kWd], ws.ffn.data(), r, h, f, false);                  // d act
  SwiGluBackward(t[kGate], t[kUp], ws.ffn.data(), r * f, t[kGate], t[kUp]);      // dgate, dup
  MatMulTransposedB(t[kGate], p[kWg], ws.hidden.data(), r, f, h, false);         // d n2
  MatMulTransposedB(t[kUp], p[kWu], ws.hidden.data(), r, f, h, true);
  RmsNormBackward(t[kMid], p[kW2], t[kRstd2], ws.hidden.data(), dy, r, h, t[kMid],
                  norm_grads + h);                                               // d mid
  MatMulTransposedB(t[kMid], p[kWo], ws.hidden.data(), r, h, h, false);          // d o
  AttentionBackward(s, t[kQkv], t[kO], t[kLse], ws.hidden.data(), ws.qkv.data());
  RotaryInPlace(s, ws.qkv.data(), /*inverse=*/true);
  std::copy_n(ws.qkv.data(), r * w, t[kQkv]);                                    // d qkv
  MatMulTransposedB(t[kQkv], p[kWqkv], ws.hidden.data(), r, w, h, false);        // d n1
  RmsNormBackward(t[kX], p[kW1], t[kRstd1], ws.hidden.data(), t[kMid], r, h, t[kX],
                  norm_grads);                                                   // dx
}

void DecoderLayerBackwardWeight(const TransformerBlockShape& s, const float* dy,
                                const float* stash, float* grads) {
  const int64_t r = s.rows(), h = s.hidden, f = s.ffn;
  const auto g = Params(s, grads);
  const auto t = Slots(s, stash);
  MatMulTransposedAAccumulate(t[kAct], dy, g[kWd], r, f, h);
  MatMulTransposedAAccumulate(t[kN2], t[kGate], g[kWg], r, h, f);
  MatMulTransposedAAccumulate(t[kN2], t[kUp], g[kWu], r, h, f);
  MatMulTransposedAAccumulate(t[kO], t[kMid], g[kWo], r, h, h);
  MatMulTransposedAAccumulate(t[kN1], t[kQkv], g[kWqkv], r, h, s.qkv_width());
}

void AddDecoderNormGrads(const TransformerBlockShape& s, const float* norm_grads, float* grads) {
  const auto g = Params(s, grads);
  for (int64_t j = 0; j < s.hidden; ++j) {
    g[kW1][j] += norm_grads[j];
    g[kW2][j] += norm_grads[s.hidden + j];
  }
}

double LossHeadForward(const TransformerBlockShape& s, const float* params, const float* x,
                       const int64_t* targets, float* stash) {
  const int64_t r = s.rows(), h = s.hidden;
  const auto t = HeadSlots(s, stash);
  if (x != t[kHeadX]) std::copy_n(x, r * h, t[kHeadX]);
  RmsNormForward(t[kHeadX], params, r, h, t[kHeadN], t[kHeadRstd]);
  MatMul(t[kHeadN], params + h, t[kHeadLogits], r, h, s.vocab, false);
  return CrossEntropyForward(t[kHeadLogits], targets, r, s.vocab);
}

void LossHeadBackwardInput(const TransformerBlockShape& s, const float* params,
                           const int64_t* targets, float scale, float* stash, float* norm_grad,
                           DecoderWorkspace& ws) {
  const int64_t r = s.rows(), h = s.hidden;
  const auto t = HeadSlots(s, stash);
  CrossEntropyBackward(t[kHeadLogits], targets, r, s.vocab, scale);              // d logits
  MatMulTransposedB(t[kHeadLogits], params + h, ws.hidden.data(), r, s.vocab, h, false);
  RmsNormBackward(t[kHeadX], params, t[kHeadRstd], ws.hidden.data(), nullptr, r, h, t[kHeadX],
                  norm_grad);                                                    // dx
}

void LossHeadBackwardWeight(const TransformerBlockShape& s, const float* stash, float* grads) {
  const auto t = HeadSlots(s, stash);
  MatMulTransposedAAccumulate(t[kHeadN], t[kHeadLogits], grads + s.hidden, s.rows(), s.hidden,
                              s.vocab);
}

}  // namespace jitpipe
