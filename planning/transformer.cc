#include "planning/transformer.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/byte_units.h"
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

// A term of a layer's activations, and whether it belongs to the attention
// core (what selective recomputation drops, [K] §5).
struct Term {
  ActivationTerm term;
  bool core = false;
};

void Add(std::vector<Term>& out, std::string name, std::string formula, std::string source,
         double bytes, bool core = false) {
  out.push_back({ActivationTerm{std::move(name), std::move(formula), std::move(source), bytes},
                 core});
}

// A norm's stored tensors [P]: its input (e per element) and its per-token
// fp32 statistics (LayerNorm: mean and 1/std; RMSNorm: 1/rms).
void AddNorm(std::vector<Term>& out, const Sym& y, const TransformerShape& x,
             const std::string& which) {
  const bool sp = x.sequence_parallel;
  Add(out, which + " input", sp ? "e·sbh/t" : "e·sbh", "[K] §4.1", y.e * y.s * y.b * y.h / y.r);
  Add(out, which + (x.rmsnorm ? " 1/rms (fp32 per token)" : " mean, 1/std (fp32 per token)"),
      absl::StrCat(x.rmsnorm ? "4" : "8", sp ? "·sb/t" : "·sb"), "[P]",
      (x.rmsnorm ? 4 : 8) * y.s * y.b / y.r);
}

std::vector<Term> BodyTerms(const TransformerShape& x) {
  const Sym y = Symbols(x);
  const bool sp = x.sequence_parallel;
  const std::string r = sp ? "/t" : "";
  const double sbh = y.s * y.b * y.h;
  std::vector<Term> out;
  AddNorm(out, y, x, "attention norm:");
  Add(out, "attention: QKV projection input (the norm's output)", "e·sbh" + r, "[K] §4.1",
      y.e * sbh / y.r);
  Add(out, "attention: Q, K, V (the core's inputs; K and V of g heads)", "e·sb(h + 2gd)/t",
      "[K] §4.1, GQA", y.e * y.s * y.b * (y.h + 2 * y.g * y.d) / y.t);
  if (x.attention == AttentionImpl::kFused) {
    Add(out, "attention core: log-sum-exp (fp32 per head and query)", "4·asb/t", "[F] Alg. 2",
        4 * y.a * y.s * y.b / y.t, /*core=*/true);
  } else {
    Add(out, "attention core: softmax output (s x s scores)", "e·as²b/t", "[K] §4.1",
        y.e * y.a * y.s * y.s * y.b / y.t, /*core=*/true);
    if (x.dropout) {
      Add(out, "attention core: dropout mask", "as²b/t", "[K] §4.1",
          y.a * y.s * y.s * y.b / y.t, /*core=*/true);
      Add(out, "attention core: dropout output", "e·as²b/t", "[K] §4.1",
          y.e * y.a * y.s * y.s * y.b / y.t, /*core=*/true);
    }
  }
  Add(out, "attention: output projection input (the core's output O)", "e·sbh/t", "[K] §4.1, [F]",
      y.e * sbh / y.t);
  if (x.dropout) Add(out, "attention: residual dropout mask", "sbh" + r, "[K] §4.1", sbh / y.r);
  AddNorm(out, y, x, "MLP norm:");
  Add(out, "MLP: first projections' input (the norm's output)", "e·sbh" + r, "[K] §4.1",
      y.e * sbh / y.r);
  if (x.swiglu) {
    Add(out, "MLP: gate projection (SwiGLU)", "e·sbf/t", "[S]", y.e * y.s * y.b * y.f / y.t);
    Add(out, "MLP: up projection (SwiGLU)", "e·sbf/t", "[S]", y.e * y.s * y.b * y.f / y.t);
    Add(out, "MLP: down projection input (silu(gate) · up)", "e·sbf/t", "[S]",
        y.e * y.s * y.b * y.f / y.t);
  } else {
    Add(out, "MLP: GeLU input", "e·sbf/t", "[K] §4.1, [M]", y.e * y.s * y.b * y.f / y.t);
    Add(out, "MLP: second projection input (GeLU output)", "e·sbf/t", "[K] §4.1, [M]",
        y.e * y.s * y.b * y.f / y.t);
  }
  if (x.dropout) Add(out, "MLP: residual dropout mask", "sbh" + r, "[K] §4.1", sbh / y.r);
  return out;
}

std::vector<ActivationTerm> Stored(const std::vector<Term>& terms, Recompute recompute,
                                   const Sym& y, bool sp) {
  std::vector<ActivationTerm> out;
  if (recompute == Recompute::kFull) {
    // Full recomputation keeps each layer's input: [K] §5's 2sbh.
    out.push_back({"layer input (the rest recomputed)", sp ? "e·sbh/t" : "e·sbh", "[K] §5",
                   y.e * y.s * y.b * y.h / y.r});
    return out;
  }
  for (const Term& t : terms) {
    if (t.core && recompute == Recompute::kSelective) continue;  // [K] §5
    out.push_back(t.term);
  }
  return out;
}

double Sum(const std::vector<ActivationTerm>& terms) {
  double bytes = 0;
  for (const ActivationTerm& t : terms) bytes += t.bytes;
  return bytes;
}

}  // namespace

absl::string_view AttentionImplName(AttentionImpl impl) {
  return impl == AttentionImpl::kFused ? "fused" : "eager";
}

absl::StatusOr<AttentionImpl> ParseAttentionImpl(absl::string_view name) {
  if (name == "fused") return AttentionImpl::kFused;
  if (name == "eager") return AttentionImpl::kEager;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown attention \"", name, "\"; expected fused or eager"));
}

std::vector<ActivationTerm> BodyLayerActivations(const TransformerShape& x) {
  return Stored(BodyTerms(x), x.recompute, Symbols(x), x.sequence_parallel);
}

std::vector<ActivationTerm> EmbeddingActivations(const TransformerShape& x) {
  const Sym y = Symbols(x);
  std::vector<ActivationTerm> out;
  // A lookup's backward needs only the token ids (the stage's input); with
  // dropout, its mask ([K] §4.3).
  if (x.dropout) {
    out.push_back({"embedding dropout mask", x.sequence_parallel ? "sbh/t" : "sbh", "[K] §4.3",
                   y.s * y.b * y.h / y.r});
  }
  return out;
}

std::vector<ActivationTerm> LossActivations(const TransformerShape& x) {
  const Sym y = Symbols(x);
  std::vector<Term> terms;
  AddNorm(terms, y, x, "final norm:");
  Add(terms, "output layer input (the norm's output)",
      x.sequence_parallel ? "e·sbh/t" : "e·sbh", "[K] §4.3", y.e * y.s * y.b * y.h / y.r);
  const int loss_bytes = DtypeBytes(x.loss_dtype);
  Add(terms, absl::StrCat("cross entropy: log-softmax of the logits (", DtypeName(x.loss_dtype),
                          ")"),
      absl::StrCat(loss_bytes, "·sbV/t"), "[K] §4.3, [P]", loss_bytes * y.s * y.b * y.V / y.t);
  std::vector<ActivationTerm> out;
  for (const Term& t : terms) out.push_back(t.term);
  return out;
}

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
        "seq x microbatch-size: one layer's activations per microbatch would be ",
        largest < 9e18 ? FormatBytes(static_cast<int64_t>(largest)) : absl::StrCat(largest, " B"),
        "; at most 1.00 TiB: lower them, or raise tp"));
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
  // Activations: the terms of BodyLayerActivations (each cited there). At
  // e = 2, g = a, f = 4h, t = 1, eager attention with dropout and without
  // the norms' statistics: 34sbh + 5as²b ([K] eq. 1).
  out.stash_bytes = Whole(Sum(BodyLayerActivations(x)));
  // What the next layer (or stage) receives: the hidden states, split by t
  // under sequence parallelism.
  out.output_bytes = Whole(y.e * y.s * y.b * y.h / y.r);
  return out;
}

LayerFormula EmbeddingFormula(const TransformerShape& x) {
  const Sym y = Symbols(x);
  LayerFormula out;
  // Vh parameters, split over t (vocabulary-parallel) ([M]).
  out.param_elements = x.vocab * x.hidden / x.tp;
  // A lookup: no GEMM FLOPs; stores its dropout mask, if any.
  out.stash_bytes = Whole(Sum(EmbeddingActivations(x)));
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
  // [K] §4.3: the final norm's input, the projection's input, the logits
  // for the cross entropy (4sbh/t (1 + V/h) in [K]'s bf16/fp32); the norm's
  // statistics [P].
  out.stash_bytes = Whole(Sum(LossActivations(x)));
  out.output_bytes = 4;  // the loss, one fp32
  return out;
}

double ModelFlopsPerMicrobatch(const TransformerShape& x) {
  TransformerShape none = x;
  none.recompute = Recompute::kNone;
  auto total = [](const LayerFormula& f) {
    return f.forward_flops + f.backward_input_flops + f.backward_weight_flops;
  };
  return x.layers * total(BodyLayerFormula(none)) + total(EmbeddingFormula(none)) +
         total(LossFormula(none));
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
  model.workload = {.microbatch_size = x.microbatch_size,
                    .seq_len = x.seq,
                    .tp = x.tp,
                    .model_flops_per_microbatch = ModelFlopsPerMicrobatch(x)};
  RETURN_IF_ERROR(ValidateLayeredModel(model));
  return model;
}

}  // namespace jitpipe
