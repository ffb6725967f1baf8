// The transformer front end's formulas against hand computations from the
// papers' own symbols (planning/transformer.h cites each).
#include "planning/transformer.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::transformer_test {
namespace {

using ::jitpipe::testing::Message;

// GPT-3 175B as Korthikanti et al. tabulate it: a = 96, h = 12288, s = 2048,
// t = 8, b = 1, L = 96 (V = 51200, padded).
// The block [K] counts: eager attention, dropout layers.
TransformerShape Gpt3() {
  return {.layers = 96, .hidden = 12288, .heads = 96, .vocab = 51200, .seq = 2048,
          .microbatch_size = 1, .tp = 8, .tflops = 100, .attention = AttentionImpl::kEager,
          .dropout = true};
}

// Llama 3 70B: L = 80, h = 8192, a = 64, g = 8, f = 28672, V = 128256, SwiGLU,
// RMSNorm.
TransformerShape Llama70b() {
  return {.layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8, .ffn = 28672,
          .vocab = 128256, .seq = 8192, .microbatch_size = 1, .tp = 1, .swiglu = true,
          .rmsnorm = true, .tflops = 400};
}

// [K] eq. 1 on a shape small enough to count by hand: s = 2, b = 1, h = 4,
// a = 2: sbh = 8, 34 x 8 + 5 x 2 x 2² x 1 = 272 + 40 = 312 bytes, plus what
// [K] leaves out: the two LayerNorms' fp32 mean and 1/std, 2 x 8sb = 32 [P].
TEST(TransformerTest, ActivationsPerLayerMatchKorthikantiEquationOne) {
  TransformerShape x{.layers = 1, .hidden = 4, .heads = 2, .vocab = 8, .seq = 2, .tflops = 1,
                     .attention = AttentionImpl::kEager, .dropout = true};
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 312 + 32);
  EXPECT_EQ(BodyLayerFormula(x).output_bytes, 16);  // 2sbh
}

// The block people train now, by hand, term by term: fused attention [F]
// (no s x s scores; an fp32 log-sum-exp per head and query), no dropout,
// SwiGLU [S] (gate, up and their product), GQA, RMSNorm (1/rms per token).
// s = 4, b = 1, h = 8, a = 4, g = 2 (d = 2), f = 12, bf16, t = 1:
//   norms: 2 x (2sbh = 64 input + 4sb = 16 statistics)     = 160
//   QKV input 2sbh = 64; Q, K, V 2sb(h + 2gd) = 8 x 16     = 192
//   log-sum-exp 4asb = 64; output projection input 2sbh    = 128
//   MLP input 2sbh = 64; gate, up, product 3 x 2sbf = 288  = 352
TEST(TransformerTest, TodaysBlockByHand) {
  TransformerShape x{.layers = 1, .hidden = 8, .heads = 4, .kv_heads = 2, .ffn = 12, .vocab = 16,
                     .seq = 4, .swiglu = true, .rmsnorm = true, .tflops = 1};
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 160 + 192 + 128 + 352);
  double sum = 0;
  for (const ActivationTerm& t : BodyLayerActivations(x)) {
    EXPECT_FALSE(t.name.empty());
    EXPECT_FALSE(t.source.empty()) << t.name;
    sum += t.bytes;
  }
  EXPECT_DOUBLE_EQ(sum, 832);
  // Eager attention adds the scores 2as²b = 128; dropout their mask as²b = 64,
  // its output 128, and two residual masks 2sbh = 64, while the fused
  // kernel's log-sum-exp goes.
  x.attention = AttentionImpl::kEager;
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 832 - 64 + 128);
  x.dropout = true;
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 832 - 64 + 128 + 64 + 128 + 64);
  // Selective recomputation drops the core (scores, mask, dropout output).
  x.recompute = Recompute::kSelective;
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 832 - 64 + 64);
  // A GeLU MLP keeps two f-wide tensors, not three.
  x = TransformerShape{.layers = 1, .hidden = 8, .heads = 4, .kv_heads = 2, .ffn = 12,
                       .vocab = 16, .seq = 4, .rmsnorm = true, .tflops = 1};
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 832 - 96);
}

// The loss head keeps the final norm's input and statistics, the output
// layer's input and the log-softmax of the logits in the dtype the loss runs
// in [K] §4.3, [P]; the embedding nothing but its dropout mask, if any.
// s = 4, b = 1, h = 8, V = 16, RMSNorm: 64 + 16 + 64 + 4 x 64 (fp32) = 400;
// in bf16 the logits are 2 x 64 = 128 instead.
TEST(TransformerTest, TheLossHeadKeepsItsLogitsInTheLossDtype) {
  TransformerShape x{.layers = 1, .hidden = 8, .heads = 4, .kv_heads = 2, .ffn = 12, .vocab = 16,
                     .seq = 4, .swiglu = true, .rmsnorm = true, .tflops = 1};
  EXPECT_EQ(LossFormula(x).stash_bytes, 400);
  x.loss_dtype = Dtype::kBf16;
  EXPECT_EQ(LossFormula(x).stash_bytes, 400 - 128);
  EXPECT_EQ(EmbeddingFormula(x).stash_bytes, 0);
  x.dropout = true;
  EXPECT_EQ(EmbeddingFormula(x).stash_bytes, 32);  // sbh
}

// [K] §4.2 and §5 for GPT-3 (sbh = 25165824, 5as/h = 80, t = 8).
TEST(TransformerTest, ActivationsUnderTensorAndSequenceParallelismAndRecomputation) {
  TransformerShape x = Gpt3();
  // sbh (10 + 24/t + 5as/(ht)) = 25165824 x (10 + 3 + 10), plus the
  // LayerNorms' statistics 2 x 8sb = 32768 (split by t under SP) [P].
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 578813952 + 32768);
  x.sequence_parallel = true;  // sbh/t (34 + 5as/h) = 3145728 x 114
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 358612992 + 4096);
  x.recompute = Recompute::kSelective;  // 34 sbh/t
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 106954752 + 4096);
  x.sequence_parallel = false;  // sbh (10 + 24/t)
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 327155712 + 32768);
  x.recompute = Recompute::kFull;  // 2sbh
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 50331648);
  x.sequence_parallel = true;  // 2sbh/t
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 6291456);
  EXPECT_EQ(BodyLayerFormula(x).output_bytes, 6291456);  // hidden states, split under SP
}

// [M]'s generalisation under sequence parallelism and selective
// recomputation: sbh (18 + 4f/h) / t. h = 4096, f = 3.5h, s = 4096, t = 4:
// 16777216 x 32 / 4, plus the LayerNorms' statistics 2 x 8sb / t = 16384.
TEST(TransformerTest, ActivationsWithAnotherMlpWidthMatchMegatron) {
  TransformerShape x{.layers = 1, .hidden = 4096, .heads = 32, .ffn = 14336, .vocab = 32000,
                     .seq = 4096, .tp = 4, .sequence_parallel = true,
                     .recompute = Recompute::kSelective, .tflops = 1, .dropout = true};
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 134217728 + 16384);
}

// Grouped-query attention stores K and V of g heads only. Llama 3 70B at
// t = 8 with SP and selective recomputation, no dropout, by term
// (sbh = 67108864): the norms' and projections' inputs 4 x 2sbh/8 =
// 67108864; Q 2sbh + K, V 2 x 2sb x 1024 + out 2sbh + SwiGLU 3 x 2sbf =
// 134217728 + 33554432 + 134217728 + 1409286144, over 8 = 213909504; the
// RMSNorms' 1/rms 2 x 4sb/8 = 8192.
TEST(TransformerTest, GroupedQueryAttentionStoresFewerKeysAndValues) {
  TransformerShape x = Llama70b();
  x.tp = 8;
  x.sequence_parallel = true;
  x.recompute = Recompute::kSelective;
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 67108864 + 213909504 + 8192);
}

// Parameters ([M]): Llama 3 70B has 70,553,706,496 = 80 x (150994944
// attention + 704643072 MLP + 16384 norms) + 2 x 1050673152 (embedding,
// output layer) + 8192 (final norm).
TEST(TransformerTest, ParametersMatchLlama3And70bAndGpt3)  {
  ASSERT_OK_AND_ASSIGN(LayeredModel llama, BuildTransformerModel(Llama70b()));
  EXPECT_EQ(llama.ParamElements(), 70553706496);
  EXPECT_EQ(BodyLayerFormula(Llama70b()).param_elements, 855654400);
  TransformerShape sharded = Llama70b();
  sharded.tp = 8;  // matrices split, norms whole
  EXPECT_EQ(BodyLayerFormula(sharded).param_elements, 855638016 / 8 + 16384);
  EXPECT_EQ(EmbeddingFormula(sharded).param_elements, 1050673152 / 8);
  EXPECT_EQ(LossFormula(sharded).param_elements, 1050673152 / 8 + 8192);
  // GPT-3: 96 x (12h² + 4h) + 2Vh + 2h = 175,209,209,856 at t = 1.
  TransformerShape gpt = Gpt3();
  gpt.tp = 1;
  ASSERT_OK_AND_ASSIGN(LayeredModel g, BuildTransformerModel(gpt));
  EXPECT_EQ(g.ParamElements(), 175209209856);
  EXPECT_EQ(g.layers[1].param_bytes, 2 * (12 * 12288LL * 12288 + 4 * 12288));
}

// [N]: a layer's forward is 24bsh² + 4bs²h, the backward twice that, and
// with full recomputation a step is 96BsLh² (1 + s/(6h) + V/(16Lh)).
TEST(TransformerTest, FlopsMatchNarayanan) {
  const TransformerShape x = Gpt3();
  const double b = 1, s = 2048, h = 12288, V = 51200, L = 96;
  const LayerFormula layer = BodyLayerFormula(x);
  EXPECT_DOUBLE_EQ(layer.forward_flops, 24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_DOUBLE_EQ(layer.backward_input_flops + layer.backward_weight_flops,
                   2 * layer.forward_flops);
  EXPECT_DOUBLE_EQ(LossFormula(x).forward_flops, 2 * b * s * h * V);
  TransformerShape full = x;
  full.recompute = Recompute::kFull;
  const LayerFormula f = BodyLayerFormula(full);
  const LayerFormula loss = LossFormula(full);
  const double step = L * (f.forward_flops + f.backward_input_flops + f.backward_weight_flops) +
                      loss.forward_flops + loss.backward_input_flops + loss.backward_weight_flops;
  EXPECT_DOUBLE_EQ(step, 96 * b * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)));
  // Selective recomputation reruns only the attention core: 4bs²h.
  TransformerShape selective = x;
  selective.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(BodyLayerFormula(selective).backward_input_flops,
                   layer.backward_input_flops + 4 * b * s * s * h);
}

// The FLOPs MFU counts: [N] eq. 3 without its recomputation term, 3 x
// (L(24bsh² + 4bs²h) + 2bshV) = 72BsLh²(1 + s/(6h) + V/(12Lh)), whatever
// recomputation the times include; the model file records it with b, s, t.
TEST(TransformerTest, ModelFlopsLeaveRecomputationOut) {
  const TransformerShape x = Gpt3();
  const double b = 1, s = 2048, h = 12288, V = 51200, L = 96;
  const double expected = 72 * b * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  EXPECT_DOUBLE_EQ(ModelFlopsPerMicrobatch(x), expected);
  TransformerShape full = x;
  full.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(ModelFlopsPerMicrobatch(full), expected);
  ASSERT_OK_AND_ASSIGN(LayeredModel m, BuildTransformerModel(full));
  EXPECT_EQ(m.workload.microbatch_size, 1);
  EXPECT_EQ(m.workload.seq_len, 2048);
  EXPECT_EQ(m.workload.tp, 8);
  EXPECT_DOUBLE_EQ(m.workload.model_flops_per_microbatch, expected);
}

// Times: a layer's FLOPs over t GPUs at the given throughput.
TEST(TransformerTest, TimesAreFlopsOverTheTensorParallelGpus) {
  const TransformerShape x = Gpt3();  // t = 8, 100 TFLOP/s
  ASSERT_OK_AND_ASSIGN(LayeredModel m, BuildTransformerModel(x));
  const LayerFormula layer = BodyLayerFormula(x);
  EXPECT_DOUBLE_EQ(m.layers[1].forward_us, layer.forward_flops / 8 / 1e14 * 1e6);
  EXPECT_DOUBLE_EQ(m.layers[1].backward_weight_us, layer.backward_weight_flops / 8 / 1e14 * 1e6);
  EXPECT_EQ(m.layers.size(), 98u);  // embedding, 96 layers, loss
  EXPECT_EQ(m.layers.front().forward_us, 0);  // a lookup
  EXPECT_EQ(m.dp.param_dtype, Dtype::kBf16);
}

// [K] §4.3 with SP: the embedding's dropout mask sbh/t; the output layer's
// 4sbh/t (1 + V/h) = 12582912 + 52428800, plus the final LayerNorm's
// statistics 8sb/t = 2048 [P]; token ids 8sb ([M]).
TEST(TransformerTest, HeadsAndInput) {
  TransformerShape x = Gpt3();
  x.sequence_parallel = true;
  EXPECT_EQ(EmbeddingFormula(x).stash_bytes, 3145728);
  EXPECT_EQ(EmbeddingFormula(x).output_bytes, 6291456);
  EXPECT_EQ(LossFormula(x).stash_bytes, 65011712 + 2048);
  EXPECT_EQ(LossFormula(x).output_bytes, 4);
  EXPECT_EQ(InputBytes(x), 16384);
}

// fp32 activations double every 2-byte term; dropout masks stay 1 byte:
// (4 x 4 + 2) sbh + (4 + 4 + 8 + 4 x 4 x 4) sbh + (2 x 4 + 1) as²b at s = 2,
// b = 1, h = 4, a = 2 = 18 x 8 + 88 x 8... counted per term below.
TEST(TransformerTest, Fp32ActivationsDoubleTheTwoByteTerms) {
  TransformerShape x{.layers = 1, .hidden = 4, .heads = 2, .vocab = 8, .seq = 2,
                     .dtype = Dtype::kFp32, .tflops = 1, .attention = AttentionImpl::kEager,
                     .dropout = true};
  // replicated 18 sbh = 144; split 4sbh (Q) + 8sbh (K, V) + 4sbh (out) +
  // 8sbf (f = 16) = 32 + 64 + 32 + 256 = 384; scores 9as²b = 72; the
  // LayerNorms' statistics stay fp32: 2 x 8sb = 32.
  EXPECT_EQ(BodyLayerFormula(x).stash_bytes, 144 + 384 + 72 + 32);
}

class TransformerShapeErrorTest
    : public ::testing::TestWithParam<std::tuple<TransformerShape, std::string>> {};

TEST_P(TransformerShapeErrorTest, NamesTheField) {
  const auto& [shape, message] = GetParam();
  EXPECT_EQ(Message(ValidateTransformerShape(shape)), message);
  EXPECT_EQ(Message(BuildTransformerModel(shape)), message);
}

TransformerShape With(void (*change)(TransformerShape&)) {
  TransformerShape x = Llama70b();
  change(x);
  return x;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, TransformerShapeErrorTest,
    ::testing::Values(
        std::tuple{With([](TransformerShape& x) { x.layers = 0; }),
                   "layers must be >= 1, got 0"},
        std::tuple{With([](TransformerShape& x) { x.hidden = 8100; }),
                   "hidden 8100 is not a multiple of heads 64"},
        std::tuple{With([](TransformerShape& x) { x.kv_heads = 6; }),
                   "heads 64 is not a multiple of kv-heads 6"},
        std::tuple{With([](TransformerShape& x) { x.tp = 16; }),
                   "kv-heads 8 is not a multiple of tp 16"},
        std::tuple{With([](TransformerShape& x) { x.vocab = 128257; x.tp = 8; }),
                   "vocab 128257 is not a multiple of tp (pass the padded vocabulary) 8"},
        std::tuple{With([](TransformerShape& x) { x.tp = 8; x.seq = 8191; x.sequence_parallel = true; }),
                   "seq 8191 is not a multiple of tp 8"},
        std::tuple{With([](TransformerShape& x) { x.dtype = Dtype::kFp8E4m3; }),
                   "dtype must be fp32, bf16 or fp16, got fp8_e4m3"},
        std::tuple{With([](TransformerShape& x) { x.tflops = 0; }),
                   "tflops must be a finite number > 0, got 0"},
        std::tuple{With([](TransformerShape& x) { x.seq = 1 << 22; x.microbatch_size = 64; }),
                   "seq x microbatch-size: one layer's activations per microbatch would be "
                   "133.25 TiB; at most 1.00 TiB: lower them, or "
                   "raise tp"}));

TEST(TransformerTest, RecomputeNames) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ASSERT_OK_AND_ASSIGN(Recompute back, ParseRecompute(RecomputeName(r)));
    EXPECT_EQ(back, r);
  }
  EXPECT_EQ(Message(ParseRecompute("some")),
            "unknown recomputation \"some\"; expected none, selective or full");
}

}  // namespace
}  // namespace jitpipe::transformer_test
