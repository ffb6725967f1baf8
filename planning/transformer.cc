#include "planning/transformer.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace jitpipe {
namespace {

absl::Status AtLeastOne(int64_t value, absl::string_view name) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " must be >= 1, got ", value));
}

absl::Status MultipleOf(int64_t value, absl::string_view name, int64_t of,
                        absl::string_view of_name) {
  if (value % of == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " ", value, " is not a multiple of ", of_name, " ", of));
}

// Sizes as doubles for the products below (s²b overflows int64 long before
// a double loses the integers that matter here).
struct Sym {
  double h, a, g, d, f, V, s, b, t, e, r;  // r: the divisor of replicated activations
};

Sym Symbols(const TransformerShape& x) {
  const double t = x.tp;
  return Sym{.h = static_cast<double>(x.hidden),
             .a = static_cast<double>(x.heads),
             .g = static_cast<double>(x.KvHeads()),
             .d = static_cast<double>(x.hidden / x.heads),
             .f = static_cast<double>(x.Ffn()),
             .V = static_cast<double>(x.vocab),
             .s = static_cast<double>(x.seq),
             .b = static_cast<double>(x.microbatch_size),
             .t = t,
             .e = static_cast<double>(DtypeBytes(x.dtype)),
             .r = x.sequence_parallel ? t : 1.0};
}

int64_t Whole(double bytes) { return static_cast<int64_t>(std::llround(bytes)); }

double Microseconds(double flops, const TransformerShape& x) {
  return flops / x.tp / (x.tflops * 1e12) * 1e6;
}

LayerCost ToLayer(const LayerFormula& f, LayerKind kind, std::string name,
                  const TransformerShape& x) {
  return LayerCost{.kind = kind,
                   .name = std::move(name),
                   .forward_us = Microseconds(f.forward_flops, x),
                   .backward_input_us = Microseconds(f.backward_input_flops, x),
                   .backward_weight_us = Microseconds(f.backward_weight_flops, x),
                   .output_bytes = f.output_bytes,
                   .stash_bytes = f.stash_bytes,
                   .param_bytes = f.param_elements * DtypeBytes(x.dtype)};
}

int64_t NormElements(const TransformerShape& x) { return (x.rmsnorm ? 1 : 2) * x.hidden; }

}  // namespace

absl::string_view RecomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

absl::StatusOr<Recompute> ParseRecompute(absl::string_view name) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (RecomputeName(r) == name) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown recomputation \"", name,
                                                 "\"; expected none, selective or full"));
}

absl::Status ValidateTransformerShape(const TransformerShape& x) {
  RETURN_IF_ERROR(AtLeastOne(x.layers, "layers"));
  RETURN_IF_ERROR(AtLeastOne(x.hidden, "hidden"));
  RETURN_IF_ERROR(AtLeastOne(x.heads, "heads"));
  RETURN_IF_ERROR(AtLeastOne(x.KvHeads(), "kv-heads"));
  RETURN_IF_ERROR(AtLeastOne(x.Ffn(), "ffn"));
  RETURN_IF_ERROR(AtLeastOne(x.vocab, "vocab"));
  RETURN_IF_ERROR(AtLeastOne(x.seq, "seq"));
  RETURN_IF_ERROR(AtLeastOne(x.microbatch_size, "microbatch-size"));
  RETURN_IF_ERROR(AtLeastOne(x.tp, "tp"));
  if (x.layers > kMaxLayers - 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be at most ", kMaxLayers - 2, ", got ", x.layers));
  }
  RETURN_IF_ERROR(MultipleOf(x.hidden, "hidden", x.heads, "heads"));
  RETURN_IF_ERROR(MultipleOf(x.heads, "heads", x.KvHeads(), "kv-heads"));
  RETURN_IF_ERROR(MultipleOf(x.heads, "heads", x.tp, "tp"));
  RETURN_IF_ERROR(MultipleOf(x.KvHeads(), "kv-heads", x.tp, "tp"));
  RETURN_IF_ERROR(MultipleOf(x.Ffn(), "ffn", x.tp, "tp"));
  RETURN_IF_ERROR(MultipleOf(x.vocab, "vocab", x.tp, "tp (pass the padded vocabulary)"));
  if (x.sequence_parallel) RETURN_IF_ERROR(MultipleOf(x.seq, "seq", x.tp, "tp"));
  if (x.dtype != Dtype::kFp32 && x.dtype != Dtype::kBf16 && x.dtype != Dtype::kFp16) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype must be fp32, bf16 or fp16, got ", DtypeName(x.dtype)));
  }
  if (!(std::isfinite(x.tflops) && x.tflops > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tflops must be a finite number > 0, got ", x.tflops));
  }
  // The largest per-microbatch buffers: a layer's stash without
  // recomputation and the loss head's logits.
  TransformerShape none = x;
  none.recompute = Recompute::kNone;
  const double largest = std::max<double>(BodyLayerFormula(none).stash_bytes,
                                          LossFormula(x).stash_bytes);
  if (largest > static_cast<double>(kMaxModelBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seq x microbatch-size: one layer's activations per microbatch would be ", largest,
        " bytes; at most ", kMaxModelBytes, " (1 TiB): lower them, or raise tp"));
  }
  return absl::OkStatus();
}

LayerFormula BodyLayerFormula(const TransformerShape& x) {
  const Sym y = Symbols(x);
  LayerFormula out;
  // Parameters ([M] compute_weight_and_optimizer_memory): Q and O are h x h,
  // K and V h x gd each, i.e. 2h²(1 + g/a); the MLP 2hf, 3hf with SwiGLU;
  // two norms of 2h (LayerNorm) or h (RMSNorm) each. Matrices split over t.
  const int64_t attention = 2 * x.hidden * x.hidden + 2 * x.hidden * x.KvHeads() *
                                                          (x.hidden / x.heads);
  const int64_t mlp = (x.swiglu ? 3 : 2) * x.hidden * x.Ffn();
  out.param_elements = (attention + mlp) / x.tp + 2 * NormElements(x);
  // FLOPs ([N] §5.1, 2 per multiply-add): the QKV projection 2bsh(h + 2gd),
  // the output projection 2bsh², the MLP 2bshf per matrix; the attention
  // core QK^T and scores x V 2bs²h each. At g = a, f = 4h: 24bsh² + 4bs²h.
  const double linear = 2 * y.b * y.s * y.h * (y.h + 2 * y.g * y.d) + 2 * y.b * y.s * y.h * y.h +
                        (x.swiglu ? 3 : 2) * 2 * y.b * y.s * y.h * y.f;
  const double core = 4 * y.b * y.s * y.s * y.h;
  out.forward_flops = linear + core;
  // The backward is twice the forward ([N]): each weight GEMM's dX (I) and
  // dW (W), and the weight-free core's two products, both in I.
  out.backward_input_flops = linear + 2 * core;
  out.backward_weight_flops = linear;
  // Recomputation reruns before the backward ([N]: full = one more forward;
  // [K] §5: selective reruns the attention core only).
  if (x.recompute == Recompute::kFull) out.backward_input_flops += out.forward_flops;
  if (x.recompute == Recompute::kSelective) out.backward_input_flops += core;
  // Activations ([K] §4.1, per microbatch, e = 2 bytes per element, 1 per
  // dropout mask), in three groups:
  //  - not split by tensor parallelism ([K] §4.2's 10sbh): the two norms'
  //    inputs 2e, the QKV projection's input e, the MLP's first GEMM's input
  //    e, two dropout masks 1 each = (4e + 2)sbh; split by t under sequence
  //    parallelism ([K] §4.2.2);
  //  - split by t ([K]'s 24sbh, [M]'s 8 + 4f/h): Q e·sbh, K and V e·sbgd each,
  //    the output projection's input e·sbh, the activation's input and the
  //    second GEMM's input e·sbf each;
  //  - the attention core, split by t ([K]'s 5as²b): softmax output e,
  //    its dropout mask 1, the dropout output e per a·s²b.
  // At e = 2, g = a, f = 4h, t = 1: 34sbh + 5as²b ([K] eq. 1).
  const double sbh = y.s * y.b * y.h;
  const double replicated = (4 * y.e + 2) * sbh;
  const double split = y.e * sbh + 2 * y.e * y.s * y.b * y.g * y.d + y.e * sbh +
                       2 * y.e * y.s * y.b * y.f;
  const double scores = (2 * y.e + 1) * y.a * y.s * y.s * y.b;
  double stash = replicated / y.r + split / y.t;
  if (x.recompute == Recompute::kNone) stash += scores / y.t;
  // Full recomputation keeps each layer's input: [K] §5's 2sbh (e·sbh/r).
  if (x.recompute == Recompute::kFull) stash = y.e * sbh / y.r;
  out.stash_bytes = Whole(stash);
  // What the next layer (or stage) receives: the hidden states, split by t
  // under sequence parallelism.
  out.output_bytes = Whole(y.e * sbh / y.r);
  return out;
}

LayerFormula EmbeddingFormula(const TransformerShape& x) {
  const Sym y = Symbols(x);
  LayerFormula out;
  // Vh parameters, split over t (vocabulary-parallel) ([M]).
  out.param_elements = x.vocab * x.hidden / x.tp;
  // A lookup: no GEMM FLOPs. Stores its dropout mask, sbh bytes per
  // microbatch ([K] §4.3, sbhp/t for p microbatches under sequence
  // parallelism).
  out.stash_bytes = Whole(y.s * y.b * y.h / y.r);
  out.output_bytes = Whole(y.e * y.s * y.b * y.h / y.r);
  return out;
}

LayerFormula LossFormula(const TransformerShape& x) {
  const Sym y = Symbols(x);
  LayerFormula out;
  // The untied output layer Vh (split over t) and the final norm ([M]).
  out.param_elements = x.vocab * x.hidden / x.tp + NormElements(x);
  // The logit GEMM, 2bshV forward ([N]); its dX and dW as many each.
  const double logits = 2 * y.b * y.s * y.h * y.V;
  out.forward_flops = logits;
  out.backward_input_flops = logits;
  out.backward_weight_flops = logits;
  // [K] §4.3: the final norm's input 2sbh/t, the projection's input 2sbh/t,
  // the fp32 logits for the cross entropy 4sbV/t: 4sbh/t (1 + V/h).
  out.stash_bytes = Whole(2 * y.e * y.s * y.b * y.h / y.r + 4 * y.s * y.b * y.V / y.t);
  out.output_bytes = 4;  // the loss, one fp32
  return out;
}

int64_t InputBytes(const TransformerShape& x) { return 8 * x.seq * x.microbatch_size; }

absl::StatusOr<LayeredModel> BuildTransformerModel(const TransformerShape& x) {
  RETURN_IF_ERROR(ValidateTransformerShape(x));
  LayeredModel model;
  model.input_bytes = InputBytes(x);
  model.dp.param_dtype = x.dtype;
  model.layers.reserve(x.layers + 2);
  model.layers.push_back(ToLayer(EmbeddingFormula(x), LayerKind::kEmbedding, "embedding", x));
  const LayerCost body = ToLayer(BodyLayerFormula(x), LayerKind::kLayer, "decoder", x);
  for (int i = 0; i < x.layers; ++i) model.layers.push_back(body);
  model.layers.push_back(ToLayer(LossFormula(x), LayerKind::kLoss, "loss", x));
  RETURN_IF_ERROR(ValidateLayeredModel(model));
  return model;
}

}  // namespace jitpipe
