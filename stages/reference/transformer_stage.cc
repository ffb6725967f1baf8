#include "stages/reference/transformer_stage.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "stages/reference/blas_gemm.h"
#include "stages/reference/transformer_data.h"

namespace jitpipe {
namespace {

constexpr int64_t kFloat = sizeof(float);

const float* Floats(ConstBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<const float*>(bytes.data());
}
float* Floats(MutableBytes bytes) {
  return bytes.empty() ? nullptr : reinterpret_cast<float*>(bytes.data());
}
const int64_t* Tokens(ConstBytes bytes) { return reinterpret_cast<const int64_t*>(bytes.data()); }

// OpenBLAS's thread count is process-wide; set it once, before any stage runs.
void OneBlasThreadOnce() {
  static std::once_flag once;
  std::call_once(once, UseOneBlasThread);
}

// Floats of a part's norm weight gradients that I holds for W: 2h per layer,
// h for the head.
int64_t PendingNormFloats(const TransformerBlockShape& s, const TransformerStageParts& p) {
  return 2 * s.hidden * p.layers + (p.loss ? s.hidden : 0);
}

}  // namespace

absl::Status ValidateTransformerOptions(const TransformerOptions& o) {
  const TransformerBlockShape& s = o.shape;
  for (auto [value, name] : {std::pair{s.hidden, "hidden"}, {s.heads, "heads"},
                             {s.kv_heads, "kv-heads"}, {s.ffn, "ffn"}, {s.seq, "seq"},
                             {s.batch, "microbatch-size"}, {s.vocab, "vocab"}}) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrCat(name, " must be >= 1"));
  }
  if (s.hidden % s.heads != 0 || s.heads % s.kv_heads != 0 || s.head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the transformer stage needs hidden a multiple of heads, heads of kv-heads and an even "
        "head size (rotary pairs); got hidden ", s.hidden, ", heads ", s.heads, ", kv-heads ",
        s.kv_heads));
  }
  if (o.parts.empty() || !o.parts.front().embedding || !o.parts.back().loss) {
    return absl::InvalidArgumentError(
        "the transformer's first stage must hold the embedding and its last the loss head");
  }
  int next = 0;
  for (size_t i = 0; i < o.parts.size(); ++i) {
    const TransformerStageParts& p = o.parts[i];
    if ((p.embedding && i != 0) || (p.loss && i + 1 != o.parts.size()) ||
        p.first_layer != next || p.layers < 0 || (!p.embedding && !p.loss && p.layers == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "transformer stage ", i, " does not continue the chain: it holds layers ",
          p.first_layer, "..", p.first_layer + p.layers - 1, " after layer ", next - 1,
          " (every stage holds the next layers, the embedding first, the loss head last)"));
    }
    next += p.layers;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TransformerStageParts>> EvenTransformerParts(int layers, int stages) {
  if (stages < 1 || layers < 0 || (stages > 2 && layers < stages - 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot cut ", layers, " transformer layers into ", stages,
        " stages: every stage between the first and the last needs a layer"));
  }
  std::vector<TransformerStageParts> parts(static_cast<size_t>(stages));
  int next = 0;
  for (int i = 0; i < stages; ++i) {
    parts[i].embedding = i == 0;
    parts[i].loss = i == stages - 1;
    parts[i].first_layer = next;
    parts[i].layers = layers / stages + (i < layers % stages ? 1 : 0);
    next += parts[i].layers;
  }
  return parts;
}

int64_t PartParamFloats(const TransformerBlockShape& s, const TransformerStageParts& p) {
  return (p.embedding ? EmbeddingParamFloats(s) : 0) + p.layers * DecoderLayerParamFloats(s) +
         (p.loss ? LossHeadParamFloats(s) : 0);
}

int64_t PartStashFloats(const TransformerBlockShape& s, const TransformerStageParts& p) {
  return p.layers * DecoderLayerStashFloats(s) + (p.loss ? LossHeadStashFloats(s) : 0);
}

std::vector<float> PartInitialParams(const TransformerOptions& o, int part) {
  const TransformerBlockShape& s = o.shape;
  const TransformerStageParts& p = o.parts[part];
  std::vector<float> out(static_cast<size_t>(PartParamFloats(s, p)));
  float* at = out.data();
  if (p.embedding) {
    InitEmbeddingParams(s, o.seed, at);
    at += EmbeddingParamFloats(s);
  }
  for (int i = 0; i < p.layers; ++i) {
    InitDecoderLayerParams(s, o.seed, p.first_layer + i, at);
    at += DecoderLayerParamFloats(s);
  }
  if (p.loss) InitLossHeadParams(s, o.seed, at);
  return out;
}

TransformerStage::TransformerStage(const TransformerOptions& options, const MlpLayout& layout,
                                   int stage, int replica, std::vector<float>* finished_grads)
    : options_(options),
      shape_(options_.shape),
      layout_(layout),
      part_(options.parts[stage % layout.stages_per_chain]),
      stage_(stage),
      replica_(replica),
      chain_(stage / layout.stages_per_chain),
      layer_stash_(DecoderLayerStashFloats(options.shape)),
      params_(PartInitialParams(options, stage % layout.stages_per_chain)),
      workspace_(options.shape),
      targets_(static_cast<size_t>(options.shape.rows())),
      pending_norms_(static_cast<size_t>(PendingNormFloats(options.shape, part_)), 0.0f),
      losses_(static_cast<size_t>(layout.microbatches_per_chain()), 0.0),
      finished_grads_(finished_grads) {
  OneBlasThreadOnce();
}

std::vector<int64_t> PartStashSegments(const TransformerStageParts& part, int64_t layer_bytes,
                                       int64_t head_bytes) {
  std::vector<int64_t> segments(static_cast<size_t>(part.layers), layer_bytes);
  if (part.loss) segments.push_back(head_bytes);
  if (segments.size() < 2) segments.clear();
  return segments;
}

StageSizes TransformerStage::Sizes() const {
  const int64_t hidden_states = shape_.rows() * shape_.hidden * kFloat;
  return StageSizes{
      part_.embedding ? shape_.rows() * static_cast<int64_t>(sizeof(int64_t)) : hidden_states,
      part_.loss ? kFloat : hidden_states, PartStashFloats(shape_, part_) * kFloat,
      PartParamFloats(shape_, part_) * kFloat,
      PartStashSegments(part_, layer_stash_ * kFloat, LossHeadStashFloats(shape_) * kFloat)};
}

absl::StatusOr<StashSegments> TransformerStage::Segments(StashView stash,
                                                         const StageSizes& sizes) const {
  return SplitStash(stash, sizes.StashAllocations(), absl::StrCat("transformer stage ", stage_));
}

absl::Status TransformerStage::Check(absl::string_view role, size_t bytes, int64_t expected,
                                     bool may_be_empty) const {
  if (bytes == static_cast<size_t>(expected) || (may_be_empty && bytes == 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("transformer stage ", stage_, ": the ", role,
                                                 " buffer has ", bytes, " bytes; expected ",
                                                 expected));
}

absl::Status TransformerStage::CheckCall(const ExecutionContext& ctx, int microbatch) const {
  RETURN_IF_ERROR(RequireHost(ctx, absl::StrCat("transformer stage ", stage_)));
  if (microbatch >= 0 && microbatch < layout_.microbatches_per_chain()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("transformer stage ", stage_, ": microbatch ",
                                                 microbatch, " is outside 0..",
                                                 layout_.microbatches_per_chain() - 1));
}

absl::Status TransformerStage::LoadInput(const ExecutionContext& ctx, int microbatch,
                                         MutableBytes input) {
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), Sizes().input_bytes, false));
  if (!part_.embedding) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transformer stage ", stage_, " has no embedding: it receives its input"));
  }
  FillTokens(shape_, options_.seed, replica_, chain_, microbatch,
             reinterpret_cast<int64_t*>(input.data()), nullptr);
  return absl::OkStatus();
}

// Each layer writes its output straight into the next one's stash (its x
// slot), the last into the head's or into `output`.
absl::Status TransformerStage::Forward(const ExecutionContext& ctx, int microbatch,
                                       ConstBytes input, MutableBytes output,
                                       StashView stash) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), sizes.input_bytes, false));
  RETURN_IF_ERROR(Check("output", output.size(), sizes.output_bytes, part_.loss));
  ASSIGN_OR_RETURN(const StashSegments s, Segments(stash, sizes));
  const int64_t r = shape_.rows(), h = shape_.hidden;
  auto input_of = [&](int layer) -> float* {  // where layer `layer` (or the head) reads x
    if (layer < part_.layers) return LayerStash(s, layer);
    return part_.loss ? HeadStash(s) : Floats(output);
  };
  const float* x = Floats(input);
  if (part_.embedding) {
    const int64_t* tokens = Tokens(input);
    for (int64_t i = 0; i < r; ++i) {
      if (tokens[i] < 0 || tokens[i] >= shape_.vocab) {
        return absl::InvalidArgumentError(absl::StrCat("transformer stage ", stage_, ": token ",
                                                       tokens[i], " at row ", i,
                                                       " is outside the vocabulary"));
      }
    }
    EmbeddingForward(tokens, params_.data(), r, h, input_of(0));
    x = input_of(0);
  }
  const float* p = params_.data() + (part_.embedding ? EmbeddingParamFloats(shape_) : 0);
  for (int i = 0; i < part_.layers; ++i) {
    DecoderLayerForward(shape_, p, x, LayerStash(s, i), input_of(i + 1));
    x = input_of(i + 1);
    p += DecoderLayerParamFloats(shape_);
  }
  if (part_.loss) {
    FillTokens(shape_, options_.seed, replica_, chain_, microbatch, nullptr, targets_.data());
    const double sum = LossHeadForward(shape_, p, x, targets_.data(), HeadStash(s));
    losses_[microbatch] = sum / static_cast<double>(r) * layout_.loss_scale();
    if (!output.empty()) Floats(output)[0] = static_cast<float>(losses_[microbatch]);
  }
  return absl::OkStatus();
}

const float* TransformerStage::OutputGrad(const StashSegments& stash,
                                          ConstBytes output_grad) const {
  if (part_.loss) return HeadStash(stash);  // the head's dx (its first slot)
  return Floats(output_grad);
}

const float* TransformerStage::LayerOutputGrad(const StashSegments& stash, int i,
                                               ConstBytes output_grad) const {
  if (i + 1 < part_.layers) return DecoderLayerInputGrad(LayerStash(stash, i + 1));
  return OutputGrad(stash, output_grad);
}

absl::Status TransformerStage::BackwardInput(const ExecutionContext& ctx, int microbatch,
                                             ConstBytes output_grad, StashView stash,
                                             MutableBytes input_grad) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), part_.loss ? 0 : sizes.output_bytes,
                        part_.loss));
  ASSIGN_OR_RETURN(const StashSegments s, Segments(stash, sizes));
  RETURN_IF_ERROR(Check("input_grad", input_grad.size(), part_.embedding ? 0 : sizes.input_bytes,
                        part_.embedding));
  const int64_t h = shape_.hidden;
  const float* head_params = params_.data() + params_.size() - LossHeadParamFloats(shape_);
  if (part_.loss) {
    FillTokens(shape_, options_.seed, replica_, chain_, microbatch, nullptr, targets_.data());
    const float scale = static_cast<float>(layout_.loss_scale() / static_cast<double>(shape_.rows()));
    LossHeadBackwardInput(shape_, head_params, targets_.data(), scale, HeadStash(s),
                          pending_norms_.data() + 2 * h * part_.layers, workspace_);
  }
  const float* layer_params = params_.data() + (part_.embedding ? EmbeddingParamFloats(shape_) : 0);
  for (int i = part_.layers - 1; i >= 0; --i) {
    DecoderLayerBackwardInput(shape_, layer_params + i * DecoderLayerParamFloats(shape_),
                              LayerOutputGrad(s, i, output_grad), LayerStash(s, i),
                              pending_norms_.data() + 2 * h * i, workspace_);
  }
  if (!input_grad.empty()) {  // the first layer's input gradient (or the head's)
    std::memcpy(input_grad.data(), s.front().data(), input_grad.size());
  }
  return absl::OkStatus();
}

absl::Status TransformerStage::BackwardWeight(const ExecutionContext& ctx, int microbatch,
                                              ConstBytes input, ConstBytes output_grad,
                                              StashView stash, MutableBytes param_grad) {
  const StageSizes sizes = Sizes();
  RETURN_IF_ERROR(CheckCall(ctx, microbatch));
  RETURN_IF_ERROR(Check("input", input.size(), sizes.input_bytes, false));
  RETURN_IF_ERROR(Check("output_grad", output_grad.size(), part_.loss ? 0 : sizes.output_bytes,
                        part_.loss));
  ASSIGN_OR_RETURN(const StashSegments s, Segments(stash, sizes));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), sizes.param_grad_bytes, false));
  const int64_t h = shape_.hidden;
  float* g = Floats(param_grad);
  if (part_.embedding) {
    // The embedding's output gradient: the first layer's input gradient.
    const float* dy =
        part_.layers > 0 ? DecoderLayerInputGrad(LayerStash(s, 0)) : OutputGrad(s, output_grad);
    EmbeddingBackwardWeight(Tokens(input), dy, shape_.rows(), h, g);
    g += EmbeddingParamFloats(shape_);
  }
  for (int i = 0; i < part_.layers; ++i) {
    DecoderLayerBackwardWeight(shape_, LayerOutputGrad(s, i, output_grad), LayerStash(s, i), g);
    AddDecoderNormGrads(shape_, pending_norms_.data() + 2 * h * i, g);
    g += DecoderLayerParamFloats(shape_);
  }
  if (part_.loss) {
    LossHeadBackwardWeight(shape_, HeadStash(s), g);
    const float* pending = pending_norms_.data() + 2 * h * part_.layers;
    for (int64_t j = 0; j < h; ++j) g[j] += pending[j];
  }
  std::fill(pending_norms_.begin(), pending_norms_.end(), 0.0f);
  return absl::OkStatus();
}

double TransformerStage::Loss(int microbatch) const {
  if (!part_.loss || microbatch < 0 || microbatch >= static_cast<int>(losses_.size())) return 0;
  return losses_[microbatch];
}

absl::Status TransformerStage::FinishStep(const ExecutionContext& ctx, ConstBytes param_grad) {
  RETURN_IF_ERROR(RequireHost(ctx, absl::StrCat("transformer stage ", stage_)));
  RETURN_IF_ERROR(Check("param_grad", param_grad.size(), Sizes().param_grad_bytes, false));
  if (finished_grads_ != nullptr) {
    const float* g = Floats(param_grad);
    finished_grads_->assign(g, g + param_grad.size() / sizeof(float));
  }
  return absl::OkStatus();
}

TransformerStageFactory::TransformerStageFactory(const TransformerOptions& options,
                                                 const MlpLayout& layout)
    : options_(options),
      layout_(layout),
      finished_(static_cast<size_t>(layout.num_stages()) * layout.dp) {}

absl::StatusOr<std::unique_ptr<Stage>> TransformerStageFactory::Make(int stage, int replica) {
  if (stage < 0 || stage >= layout_.num_stages() || replica < 0 || replica >= layout_.dp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer: no stage ", stage, " of replica ", replica, " in a pipeline of ",
        layout_.num_stages(), " stages x dp ", layout_.dp));
  }
  absl::MutexLock lock(&mu_);
  std::vector<float>* slot = &finished_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
  return std::unique_ptr<Stage>(new TransformerStage(options_, layout_, stage, replica, slot));
}

const std::vector<float>& TransformerStageFactory::FinishedGrads(int stage, int replica) const {
  return finished_[static_cast<size_t>(replica) * layout_.num_stages() + stage];
}

}  // namespace jitpipe
