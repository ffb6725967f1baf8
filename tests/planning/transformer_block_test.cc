// `jitpipe model`'s bytes against a real block: for the same shape, the terms
// BuildTransformerModel sums (planning/transformer.h) equal, one for one and
// in order, the tensors the reference transformer stage keeps
// (stages/reference/transformer_layer.h), at the dtype's element size; the
// outputs, the input token ids and the parameters too; and a stage's
// Sizes() equal the sum of its layers in the model. Table-driven over shapes
// (plain multi-head, GQA, several sequences per microbatch) and the
// activation dtype. Built only with OpenBLAS (the stage's GEMMs).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "planning/transformer.h"
#include "stages/reference/transformer_layer.h"
#include "stages/reference/transformer_stage.h"

namespace jitpipe::transformer_block_test {
namespace {

struct Case {
  std::string name;
  int64_t hidden, heads, kv_heads, ffn, seq, batch, vocab;
  Dtype dtype;
};

TransformerShape ModelShape(const Case& c) {
  TransformerShape x;
  x.layers = 4;
  x.hidden = c.hidden;
  x.heads = static_cast<int>(c.heads);
  x.kv_heads = static_cast<int>(c.kv_heads);
  x.ffn = c.ffn;
  x.vocab = c.vocab;
  x.seq = c.seq;
  x.microbatch_size = c.batch;
  x.swiglu = true;
  x.rmsnorm = true;
  x.attention = AttentionImpl::kFused;
  x.dtype = c.dtype;
  x.tflops = 1;
  return x;
}

TransformerBlockShape BlockShape(const Case& c) {
  return TransformerBlockShape{c.hidden, c.heads, c.kv_heads, c.ffn, c.seq, c.batch, c.vocab};
}

// A stored tensor's element size: the per-token statistics and the loss's
// log-softmax are fp32 whatever the activation dtype ([P], [F]).
int64_t ElementBytes(const std::string& name, Dtype dtype) {
  return name.find("fp32") != std::string::npos ? 4 : DtypeBytes(dtype);
}

void ExpectSameTerms(const std::vector<ActivationTerm>& model,
                     const std::vector<StashTerm>& block, Dtype dtype) {
  ASSERT_EQ(model.size(), block.size());
  for (size_t i = 0; i < model.size(); ++i) {
    EXPECT_EQ(model[i].name, block[i].name) << "term " << i;
    EXPECT_EQ(model[i].bytes,
              static_cast<double>(block[i].floats * ElementBytes(block[i].name, dtype)))
        << model[i].name << " (" << model[i].formula << ")";
  }
}

class TransformerBlockTest : public ::testing::TestWithParam<Case> {};

TEST_P(TransformerBlockTest, EveryStashTermIsATensorTheBlockKeeps) {
  const Case& c = GetParam();
  const TransformerShape x = ModelShape(c);
  const TransformerBlockShape s = BlockShape(c);
  ASSERT_TRUE(ValidateTransformerShape(x).ok());
  ExpectSameTerms(BodyLayerActivations(x), DecoderLayerStashTerms(s), c.dtype);
  ExpectSameTerms(LossActivations(x), LossHeadStashTerms(s), c.dtype);
  EXPECT_TRUE(EmbeddingActivations(x).empty());  // the lookup keeps nothing but the token ids
}

TEST_P(TransformerBlockTest, OutputsInputsAndParametersAreTheBlocks) {
  const Case& c = GetParam();
  const TransformerShape x = ModelShape(c);
  const TransformerBlockShape s = BlockShape(c);
  const int64_t e = DtypeBytes(c.dtype), hidden_states = s.rows() * s.hidden;
  EXPECT_EQ(BodyLayerFormula(x).output_bytes, e * hidden_states);
  EXPECT_EQ(EmbeddingFormula(x).output_bytes, e * hidden_states);
  EXPECT_EQ(LossFormula(x).output_bytes, 4);  // the loss, one fp32
  EXPECT_EQ(InputBytes(x), 8 * s.rows());     // int64 token ids
  EXPECT_EQ(BodyLayerFormula(x).param_elements, DecoderLayerParamFloats(s));
  EXPECT_EQ(EmbeddingFormula(x).param_elements, EmbeddingParamFloats(s));
  EXPECT_EQ(LossFormula(x).param_elements, LossHeadParamFloats(s));
}

// A whole stage: its Sizes() are the sums of its layers' model costs, for
// every stage of a 3-stage cut. REQUIRES: c.dtype is fp32 (the stage's).
void ExpectStageSizesAreTheModels(const Case& c) {
  SCOPED_TRACE(c.name);
  const TransformerShape x = ModelShape(c);
  absl::StatusOr<LayeredModel> model = BuildTransformerModel(x);
  ASSERT_TRUE(model.ok()) << model.status();
  TransformerOptions options;
  options.shape = BlockShape(c);
  absl::StatusOr<std::vector<TransformerStageParts>> parts = EvenTransformerParts(x.layers, 3);
  ASSERT_TRUE(parts.ok());
  options.parts = *parts;
  int index = 0;  // into model->layers: embedding, layers, loss
  for (int stage = 0; stage < 3; ++stage) {
    const TransformerStageParts& p = options.parts[stage];
    const int count = (p.embedding ? 1 : 0) + p.layers + (p.loss ? 1 : 0);
    int64_t stash = 0, params = 0;
    for (int i = index; i < index + count; ++i) {
      stash += model->layers[i].stash_bytes;
      params += model->layers[i].param_bytes;
    }
    const int64_t input = stage == 0 ? model->input_bytes : model->layers[index - 1].output_bytes;
    const int64_t output = model->layers[index + count - 1].output_bytes;
    index += count;
    TransformerStage real(options, MlpLayout{3, 1, 1, 1}, stage, 0, nullptr);
    const StageSizes sizes = real.Sizes();
    EXPECT_EQ(sizes.stash_bytes, stash) << "stage " << stage;
    EXPECT_EQ(sizes.param_grad_bytes, params) << "stage " << stage;
    EXPECT_EQ(sizes.input_bytes, input) << "stage " << stage;
    EXPECT_EQ(sizes.output_bytes, output) << "stage " << stage;
  }
}

std::vector<Case> Cases();

TEST(TransformerStageSizesTest, AStagesSizesAreItsLayersInTheModel) {
  for (const Case& c : Cases()) {
    if (c.dtype == Dtype::kFp32) ExpectStageSizesAreTheModels(c);
  }
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (Dtype dtype : {Dtype::kFp32, Dtype::kBf16}) {
    const std::string d(DtypeName(dtype));
    out.push_back({"issue_gqa_" + d, 256, 4, 2, 688, 128, 1, 1000, dtype});
    out.push_back({"multi_head_" + d, 64, 8, 8, 176, 32, 1, 500, dtype});
    out.push_back({"two_sequences_mqa_" + d, 96, 6, 1, 256, 20, 2, 301, dtype});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransformerBlockTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return param.param.name;
                         });

}  // namespace
}  // namespace jitpipe::transformer_block_test
