// Every backward of the reference transformer checked against central
// differences of its forward (finite_differences.h), on a tiny shape: 2
// samples of 5 tokens, hidden 8, 2 query heads sharing 1 K/V head (GQA),
// SwiGLU width 12, vocabulary 11.
//
// Tolerance: errors relative to each input's largest gradient stay below
// kTolerance; measured they are at most 1.1e-4 (fp32 forward, eps 1e-2; the cross entropy and the whole layer the largest). The
// check is shown to fail on wrong backwards (WrongBackwardsFail), so a
// passing case means something.
#include "stages/reference/transformer_kernels.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "stages/reference/attention_kernels.h"
#include "stages/reference/blas_gemm.h"
#include "stages/reference/transformer_layer.h"
#include "tests/stages/reference/finite_differences.h"

namespace jitpipe::transformer_kernels_test {
namespace {

using ::jitpipe::testing::CheckGradients;
using ::jitpipe::testing::Differentiable;
using ::jitpipe::testing::FdError;
using ::jitpipe::testing::Tensors;
using ::jitpipe::testing::Uniform;

constexpr double kTolerance = 1e-3;

TransformerBlockShape Tiny() {
  TransformerBlockShape s;
  s.hidden = 8;
  s.heads = 2;
  s.kv_heads = 1;
  s.ffn = 12;
  s.seq = 5;
  s.batch = 2;
  s.vocab = 11;
  return s;
}

std::vector<int64_t> Tokens(const TransformerBlockShape& s, unsigned seed) {
  std::vector<int64_t> out(static_cast<size_t>(s.rows()));
  const std::vector<float> u = Uniform(s.rows(), 0, 1, seed);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = std::min<int64_t>(s.vocab - 1, static_cast<int64_t>(u[i] * s.vocab));
  }
  return out;
}

// A decoder layer's parameters: norm weights near 1, matrices ~ 1/sqrt(in).
std::vector<float> LayerParams(const TransformerBlockShape& s, unsigned seed) {
  std::vector<float> p = Uniform(DecoderLayerParamFloats(s), -0.5f, 0.5f, seed);
  const int64_t h = s.hidden, w1 = 0, w2 = h + h * s.qkv_width() + h * h;
  for (int64_t j = 0; j < h; ++j) {
    p[w1 + j] = 1.0f + 0.2f * p[w1 + j];
    p[w2 + j] = 1.0f + 0.2f * p[w2 + j];
  }
  return p;
}

Differentiable RmsNorm() {
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), h = s.hidden;
  return {"rmsnorm",
          {Uniform(r * h, -1, 1, 1), Uniform(h, 0.5f, 1.5f, 2)},
          [=](const Tensors& in) {
            std::vector<float> y(r * h), rstd(r);
            RmsNormForward(in[0].data(), in[1].data(), r, h, y.data(), rstd.data());
            return y;
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> y(r * h), rstd(r), dx(r * h), dw(h, 0.0f);
            RmsNormForward(in[0].data(), in[1].data(), r, h, y.data(), rstd.data());
            RmsNormBackward(in[0].data(), in[1].data(), rstd.data(), dy.data(), nullptr, r, h,
                            dx.data(), dw.data());
            return Tensors{dx, dw};
          }};
}

Differentiable Rotary() {
  const TransformerBlockShape s = Tiny();
  const int64_t n = s.rows() * s.qkv_width();
  return {"rotary",
          {Uniform(n, -1, 1, 3)},
          [=](const Tensors& in) {
            std::vector<float> y = in[0];
            RotaryInPlace(s, y.data(), false);
            return y;
          },
          [=](const Tensors&, const std::vector<float>& dy) {
            std::vector<float> dx = dy;
            RotaryInPlace(s, dx.data(), true);
            return Tensors{dx};
          }};
}

Differentiable Attention() {
  const TransformerBlockShape s = Tiny();
  const int64_t n = s.rows() * s.qkv_width();
  return {"causal GQA attention",
          {Uniform(n, -1.5f, 1.5f, 4)},
          [=](const Tensors& in) {
            std::vector<float> o(s.rows() * s.hidden), lse(AttentionLseFloats(s));
            AttentionForward(s, in[0].data(), o.data(), lse.data());
            return o;
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> o(s.rows() * s.hidden), lse(AttentionLseFloats(s)), dqkv(n);
            AttentionForward(s, in[0].data(), o.data(), lse.data());
            AttentionBackward(s, in[0].data(), o.data(), lse.data(), dy.data(), dqkv.data());
            return Tensors{dqkv};
          }};
}

Differentiable SwiGlu() {
  const int64_t n = 40;
  return {"swiglu",
          {Uniform(n, -3, 3, 5), Uniform(n, -1, 1, 6)},
          [=](const Tensors& in) {
            std::vector<float> y(n);
            SwiGluForward(in[0].data(), in[1].data(), n, y.data());
            return y;
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            Tensors g = in;  // in place, as the layer runs it
            SwiGluBackward(g[0].data(), g[1].data(), dy.data(), n, g[0].data(), g[1].data());
            return g;
          }};
}

Differentiable CrossEntropy() {
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), v = s.vocab;
  const std::vector<int64_t> targets = Tokens(s, 7);
  return {"cross entropy",
          {Uniform(r * v, -2, 2, 8)},
          [=](const Tensors& in) {
            std::vector<float> logits = in[0];
            return std::vector<float>{
                static_cast<float>(CrossEntropyForward(logits.data(), targets.data(), r, v))};
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> g = in[0];
            CrossEntropyForward(g.data(), targets.data(), r, v);
            CrossEntropyBackward(g.data(), targets.data(), r, v, dy[0]);
            return Tensors{g};
          }};
}

Differentiable Embedding() {
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), h = s.hidden;
  const std::vector<int64_t> tokens = Tokens(s, 9);
  return {"embedding",
          {Uniform(EmbeddingParamFloats(s), -1, 1, 10)},
          [=](const Tensors& in) {
            std::vector<float> y(r * h);
            EmbeddingForward(tokens.data(), in[0].data(), r, h, y.data());
            return y;
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> dtable(in[0].size(), 0.0f);
            EmbeddingBackwardWeight(tokens.data(), dy.data(), r, h, dtable.data());
            return Tensors{dtable};
          }};
}

// The whole layer: I then W, as the stage runs them, over one stash.
Differentiable DecoderLayer() {
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), h = s.hidden;
  return {"decoder layer (I then W)",
          {Uniform(r * h, -1, 1, 11), LayerParams(s, 12)},
          [=](const Tensors& in) {
            std::vector<float> stash(DecoderLayerStashFloats(s)), y(r * h);
            DecoderLayerForward(s, in[1].data(), in[0].data(), stash.data(), y.data());
            return y;
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> stash(DecoderLayerStashFloats(s)), y(r * h);
            std::vector<float> norms(2 * h, 0.0f), grads(in[1].size(), 0.0f);
            DecoderWorkspace ws(s);
            DecoderLayerForward(s, in[1].data(), in[0].data(), stash.data(), y.data());
            DecoderLayerBackwardInput(s, in[1].data(), dy.data(), stash.data(), norms.data(), ws);
            DecoderLayerBackwardWeight(s, dy.data(), stash.data(), grads.data());
            AddDecoderNormGrads(s, norms.data(), grads.data());
            const float* dx = DecoderLayerInputGrad(stash.data());
            return Tensors{std::vector<float>(dx, dx + r * h), grads};
          }};
}

Differentiable LossHead() {
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), h = s.hidden;
  const std::vector<int64_t> targets = Tokens(s, 13);
  std::vector<float> params = Uniform(LossHeadParamFloats(s), -0.5f, 0.5f, 14);
  for (int64_t j = 0; j < h; ++j) params[j] = 1.0f + 0.2f * params[j];
  return {"loss head",
          {Uniform(r * h, -1, 1, 15), params},
          [=](const Tensors& in) {
            std::vector<float> stash(LossHeadStashFloats(s));
            return std::vector<float>{static_cast<float>(
                LossHeadForward(s, in[1].data(), in[0].data(), targets.data(), stash.data()))};
          },
          [=](const Tensors& in, const std::vector<float>& dy) {
            std::vector<float> stash(LossHeadStashFloats(s)), grads(in[1].size(), 0.0f);
            DecoderWorkspace ws(s);
            LossHeadForward(s, in[1].data(), in[0].data(), targets.data(), stash.data());
            LossHeadBackwardInput(s, in[1].data(), targets.data(), dy[0], stash.data(),
                                  grads.data(), ws);
            LossHeadBackwardWeight(s, stash.data(), grads.data());
            return Tensors{std::vector<float>(stash.begin(), stash.begin() + r * h), grads};
          }};
}

class FiniteDifferenceTest : public ::testing::TestWithParam<Differentiable (*)()> {};

TEST_P(FiniteDifferenceTest, BackwardMatchesCentralDifferences) {
  UseOneBlasThread();
  const Differentiable f = GetParam()();
  const FdError e = CheckGradients(f, 99);
  EXPECT_LE(e.worst, kTolerance) << f.name << ": input " << e.worst_input;
  EXPECT_GT(e.smallest_scale, 1e-3) << f.name << ": a gradient is ~0, the check is vacuous";
}

INSTANTIATE_TEST_SUITE_P(Kernels, FiniteDifferenceTest,
                         ::testing::Values(&RmsNorm, &Rotary, &Attention, &SwiGlu, &CrossEntropy,
                                           &Embedding, &DecoderLayer, &LossHead));

// The check catches plausible mistakes: an RMSNorm backward without the
// normalisation's own derivative, a rotary backward that rotates forward
// again, an attention backward that forgets the softmax's D_i term.
TEST(FiniteDifferenceTest, WrongBackwardsFail) {
  Differentiable norm = RmsNorm();
  const TransformerBlockShape s = Tiny();
  const int64_t r = s.rows(), h = s.hidden;
  norm.backward = [=](const Tensors& in, const std::vector<float>& dy) {
    std::vector<float> y(r * h), rstd(r), dx(r * h), dw(h, 0.0f);
    RmsNormForward(in[0].data(), in[1].data(), r, h, y.data(), rstd.data());
    for (int64_t i = 0; i < r * h; ++i) dx[i] = dy[i] * in[1][i % h] * rstd[i / h];
    for (int64_t i = 0; i < r * h; ++i) dw[i % h] += dy[i] * in[0][i] * rstd[i / h];
    return Tensors{dx, dw};
  };
  EXPECT_GT(CheckGradients(norm, 99).worst, 10 * kTolerance);

  Differentiable rotary = Rotary();
  rotary.backward = [=](const Tensors&, const std::vector<float>& dy) {
    std::vector<float> dx = dy;
    RotaryInPlace(s, dx.data(), false);
    return Tensors{dx};
  };
  EXPECT_GT(CheckGradients(rotary, 99).worst, 10 * kTolerance);

  Differentiable attention = Attention();
  attention.backward = [=](const Tensors& in, const std::vector<float>& dy) {
    const int64_t n = s.rows() * s.qkv_width();
    std::vector<float> o(s.rows() * s.hidden), lse(AttentionLseFloats(s)), dqkv(n);
    AttentionForward(s, in[0].data(), o.data(), lse.data());
    std::vector<float> zero_o(o.size(), 0.0f);  // D_i = dO . O becomes 0
    AttentionBackward(s, in[0].data(), zero_o.data(), lse.data(), dy.data(), dqkv.data());
    return Tensors{dqkv};
  };
  EXPECT_GT(CheckGradients(attention, 99).worst, 10 * kTolerance);
}

}  // namespace
}  // namespace jitpipe::transformer_kernels_test
