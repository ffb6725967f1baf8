#include "stages/reference/transformer_reference.h"

#include <vector>

#include "stages/reference/blas_gemm.h"
#include "stages/reference/transformer_data.h"
#include "stages/reference/transformer_layer.h"

namespace jitpipe {
namespace {

// The whole model's parameters (or gradients) as one vector, [embedding]
// [layer 0] ... [layer L-1] [head]: the parts' layouts back to back.
struct WholeModel {
  const TransformerBlockShape& s;
  int layers;
  int64_t Layer(int i) const {
    return EmbeddingParamFloats(s) + static_cast<int64_t>(i) * DecoderLayerParamFloats(s);
  }
  int64_t Head() const { return Layer(layers); }
  int64_t Size() const { return Head() + LossHeadParamFloats(s); }
};

// One microbatch forward and backward; adds its gradients; returns the loss.
double Microbatch(const TransformerOptions& o, const WholeModel& m, const float* params,
                  int replica, int chain, int microbatch, double loss_scale, float* grads) {
  const TransformerBlockShape& s = o.shape;
  const int64_t r = s.rows(), h = s.hidden;
  std::vector<int64_t> tokens(r), targets(r);
  FillTokens(s, o.seed, replica, chain, microbatch, tokens.data(), targets.data());
  std::vector<std::vector<float>> xs(m.layers + 1, std::vector<float>(r * h));
  std::vector<std::vector<float>> stashes(m.layers,
                                          std::vector<float>(DecoderLayerStashFloats(s)));
  std::vector<float> head(LossHeadStashFloats(s));
  EmbeddingForward(tokens.data(), params, r, h, xs[0].data());
  for (int i = 0; i < m.layers; ++i) {
    DecoderLayerForward(s, params + m.Layer(i), xs[i].data(), stashes[i].data(),
                        xs[i + 1].data());
  }
  const double loss = LossHeadForward(s, params + m.Head(), xs[m.layers].data(), targets.data(),
                                      head.data()) /
                      static_cast<double>(r) * loss_scale;
  DecoderWorkspace ws(s);
  std::vector<float> norms(2 * h, 0.0f);
  LossHeadBackwardInput(s, params + m.Head(), targets.data(),
                        static_cast<float>(loss_scale / static_cast<double>(r)), head.data(),
                        norms.data(), ws);
  LossHeadBackwardWeight(s, head.data(), grads + m.Head());
  for (int64_t j = 0; j < h; ++j) grads[m.Head() + j] += norms[j];
  std::vector<float> dy(head.begin(), head.begin() + r * h);  // the head's input gradient
  for (int i = m.layers - 1; i >= 0; --i) {
    std::fill(norms.begin(), norms.end(), 0.0f);
    DecoderLayerBackwardInput(s, params + m.Layer(i), dy.data(), stashes[i].data(), norms.data(),
                              ws);
    DecoderLayerBackwardWeight(s, dy.data(), stashes[i].data(), grads + m.Layer(i));
    AddDecoderNormGrads(s, norms.data(), grads + m.Layer(i));
    const float* dx = DecoderLayerInputGrad(stashes[i].data());
    dy.assign(dx, dx + r * h);
  }
  EmbeddingBackwardWeight(tokens.data(), dy.data(), r, h, grads);
  return loss;
}

}  // namespace

MlpReference RunTransformerReference(const TransformerOptions& o, const MlpLayout& layout) {
  UseOneBlasThread();
  int layers = 0;
  for (const TransformerStageParts& p : o.parts) layers += p.layers;
  const WholeModel m{o.shape, layers};
  std::vector<float> params;
  for (int part = 0; part < static_cast<int>(o.parts.size()); ++part) {
    const std::vector<float> p = PartInitialParams(o, part);
    params.insert(params.end(), p.begin(), p.end());
  }
  std::vector<float> grads(static_cast<size_t>(m.Size()), 0.0f);
  MlpReference out;
  for (int k = 0; k < layout.dp; ++k) {
    for (int c = 0; c < layout.chains; ++c) {
      for (int mb = 0; mb < layout.microbatches_per_chain(); ++mb) {
        out.loss += Microbatch(o, m, params.data(), k, c, mb, layout.loss_scale(), grads.data());
      }
    }
  }
  // The parts' slices of the whole model's gradients.
  int64_t at = 0;
  for (const TransformerStageParts& p : o.parts) {
    const int64_t n = PartParamFloats(o.shape, p);
    out.block_grads.emplace_back(grads.begin() + at, grads.begin() + at + n);
    at += n;
  }
  return out;
}

}  // namespace jitpipe
