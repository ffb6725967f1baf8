// A layered model (scheduler/ir/layered_model.h) from a decoder-only
// transformer's shape: per layer and microbatch, its FLOPs (hence times at a
// given throughput), its activation memory, its parameters, and the same for
// the embedding and the loss head. What `jitpipe model` writes.
//
// Symbols (as in the papers): L layers, h hidden size, a attention heads,
// g key/value heads (GQA; g = a is plain multi-head attention), d = h/a the
// head size, f the MLP's hidden size, V the vocabulary, s the sequence
// length, b the microbatch size, t the tensor-parallel size, e the bytes of
// an activation or parameter element (2 for bf16).
//
// Sources, each cited again where its formula is coded (transformer.cc):
//   [K] Korthikanti et al., "Reducing Activation Recomputation in Large
//       Transformer Models", MLSys 2023 (arXiv 2205.05198): §4.1 activations
//       per layer, sbh(34 + 5as/h) bytes; §4.2 with tensor parallelism,
//       sbh(10 + 24/t + 5as/(ht)); with sequence parallelism sbh/t(34 +
//       5as/h); §5 selective recomputation drops the 5as²b attention terms,
//       full recomputation keeps 2sbh per layer; §4.3 the embedding's dropout
//       mask sbh (per microbatch) and the output layer's 4sbh/t(1 + V/h).
//   [M] Megatron-LM megatron/training/theoretical_memory_usage.py: the layer
//       term generalised to f != 4h as sbh(18 + 4f/h); parameters per layer
//       2h²(1 + g/a) + 2hf (x 3/2 with SwiGLU) + 2h x (2 for LayerNorm, 1 for
//       RMSNorm); embedding Vh, untied output layer Vh; 8sb bytes of token
//       ids per microbatch; 18 bytes per parameter for bf16 training with
//       Adam (6 + 12/dp with the distributed optimizer).
//   [F] Dao, "FlashAttention-2: Faster Attention with Better Parallelism and
//       Work Partitioning", ICLR 2024 (arXiv 2307.08691), Alg. 2: a fused
//       attention kernel keeps for its backward the output O and the
//       row-wise log-sum-exp L (one fp32 per head and query), never the
//       s x s scores; dropout masks are regenerated from the RNG state.
//   [S] Shazeer, "GLU Variants Improve Transformer" (arXiv 2002.05202): the
//       SwiGLU MLP, down(silu(x W_gate) * x W_up); as Megatron-LM's fused
//       bias_swiglu runs it, the backward keeps the gate and up projections
//       (the activation recomputed from them) and the down projection's
//       input, their product.
//   [P] PyTorch's native_layer_norm and rms_norm: a LayerNorm keeps its
//       input and, per token, the mean and the reciprocal standard deviation
//       in fp32; an RMSNorm its input and the reciprocal RMS. A
//       log_softmax (inside cross_entropy) keeps its output, in the dtype
//       it ran in.
//   [N] Narayanan et al., "Efficient Large-Scale Language Model Training on
//       GPU Clusters Using Megatron-LM", SC 2021, §5.1: a layer's forward is
//       24bsh² + 4bs²h FLOPs (GEMMs, 2 FLOPs per multiply-add, full attention
//       scores), the backward twice the forward, full recomputation one more
//       forward; the logit layer 2bshV forward.
// Generalisations beyond the papers, each reducing to them at g = a, f = 4h:
// K and V projections and their stored activations scale with g/a; the MLP's
// GEMMs with f (and 3 matrices with SwiGLU); the backward splits into input
// gradients (I: every GEMM's dX, the attention core's two products twice)
// and weight gradients (W: every weight GEMM's dW), which add up to [N]'s
// twice the forward. Matrices are sharded over t, norms are not; with
// sequence parallelism every stored activation is.
//
// Pure functions; thread-compatible.
#ifndef JITPIPE_PLANNING_TRANSFORMER_H_
#define JITPIPE_PLANNING_TRANSFORMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/ir/layered_model.h"

namespace jitpipe {

// How the attention core runs: a fused (flash-style) kernel that keeps no
// s x s scores [F], or eager softmax(QK^T)V that keeps them [K].
enum class AttentionImpl : uint8_t { kFused, kEager };
absl::string_view AttentionImplName(AttentionImpl impl);
absl::StatusOr<AttentionImpl> ParseAttentionImpl(absl::string_view name);

enum class Recompute : uint8_t {
  kNone,       // every activation stored
  kSelective,  // the attention core recomputed ([K] §5; what flash attention also saves)
  kFull,       // only each layer's input stored, the layer rerun before its backward
};

// "none", "selective", "full"; ParseRecompute errors: InvalidArgument
// `unknown recomputation "x"; expected none, selective or full`.
absl::string_view RecomputeName(Recompute recompute);
absl::StatusOr<Recompute> ParseRecompute(absl::string_view name);

struct TransformerShape {
  int layers = 0;              // L
  int64_t hidden = 0;          // h
  int heads = 0;               // a
  int kv_heads = 0;            // g; 0: = heads
  int64_t ffn = 0;             // f; 0: 4h
  int64_t vocab = 0;           // V (the padded vocabulary: a multiple of t)
  int64_t seq = 0;             // s
  int64_t microbatch_size = 1; // b
  int tp = 1;                  // t
  bool sequence_parallel = false;
  bool swiglu = false;   // gated MLP, three h x f matrices ([M]'s --swiglu)
  bool rmsnorm = false;  // one vector per norm instead of LayerNorm's two
  Recompute recompute = Recompute::kNone;
  Dtype dtype = Dtype::kBf16;  // activations and parameters: fp32, bf16 or fp16
  double tflops = 0;           // achieved per-GPU throughput, 10^12 FLOP/s
  AttentionImpl attention = AttentionImpl::kFused;
  bool dropout = false;          // dropout layers present (their masks stored)
  Dtype loss_dtype = Dtype::kFp32;  // the dtype the cross entropy runs in
  // The output layer shares the embedding's matrix: the model has Vh fewer
  // parameters, but a pipeline whose embedding and head are on different
  // stages keeps a copy on each (as Megatron-LM and torchtitan do), so the
  // per-layer costs are unchanged.
  bool tied_embeddings = false;

  int64_t KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t Ffn() const { return ffn > 0 ? ffn : 4 * hidden; }
};

// Errors: InvalidArgument naming the flag-level field, e.g.
//   hidden 1000 is not a multiple of heads 64
// Every size >= 1; h a multiple of a, a of g; with t > 1: a, g, f and V
// multiples of t, and s too with sequence parallelism; dtype fp32, bf16 or
// fp16; tflops finite and > 0; per-microbatch bytes of one layer within
// kMaxModelBytes.
absl::Status ValidateTransformerShape(const TransformerShape& shape);

// One layer's costs on one tensor-parallel rank, per microbatch.
struct LayerFormula {
  int64_t param_elements = 0;  // on one tensor-parallel rank
  double forward_flops = 0;    // of the whole layer (all t ranks together)
  double backward_input_flops = 0;
  double backward_weight_flops = 0;
  int64_t stash_bytes = 0;   // on one rank
  int64_t output_bytes = 0;  // on one rank
};

// One stored tensor of a layer's activations, per microbatch on one
// tensor-parallel rank: what `jitpipe model --explain` prints and what a
// real block's saved tensors are checked against.
struct ActivationTerm {
  std::string name;     // "attention: Q, K, V (the core's inputs)"
  std::string formula;  // "e·sb(h + 2gd)/t"
  std::string source;   // "[K] §4.1"
  double bytes = 0;
};

// The terms whose sum is each layer's stash_bytes (before rounding to whole
// bytes). REQUIRES: ValidateTransformerShape(shape) is ok.
std::vector<ActivationTerm> BodyLayerActivations(const TransformerShape& shape);
std::vector<ActivationTerm> EmbeddingActivations(const TransformerShape& shape);
std::vector<ActivationTerm> LossActivations(const TransformerShape& shape);

// The formulas, for tests against hand computations. REQUIRES:
// ValidateTransformerShape(shape) is ok.
LayerFormula BodyLayerFormula(const TransformerShape& shape);
LayerFormula EmbeddingFormula(const TransformerShape& shape);
LayerFormula LossFormula(const TransformerShape& shape);
// The FLOPs MFU counts for one microbatch through the whole model, all t
// GPUs together: every layer's forward and backward (I + W) and the loss
// head's, without recomputation (recomputed FLOPs are work the hardware
// does, not work the model needs: [N]'s model FLOPs, PaLM's MFU). At g = a,
// f = 4h: 3(L(24bsh² + 4bs²h) + 2bshV) ([N] eq. 3, before its recompute
// term). REQUIRES: ValidateTransformerShape(shape) is ok.
double ModelFlopsPerMicrobatch(const TransformerShape& shape);
// Bytes of a microbatch's token ids: 8sb ([M]).
int64_t InputBytes(const TransformerShape& shape);

// The layered model: embedding, L layers, loss, with times at shape.tflops
// per GPU (a layer's FLOPs over t GPUs), bytes per tensor-parallel rank and
// dp.param_dtype = shape.dtype, and its workload (b, s, t and
// ModelFlopsPerMicrobatch). p2p, the rest of dp, the optimizer and the
// device are left at their defaults for the caller to fill.
// Errors: those of ValidateTransformerShape.
absl::StatusOr<LayeredModel> BuildTransformerModel(const TransformerShape& shape);

}  // namespace jitpipe

#endif  // JITPIPE_PLANNING_TRANSFORMER_H_
