// The version 2 model file: layers, blocks and repeats, heads, device,
// optimizer; round trip through LayeredModelToJson; errors naming the field;
// model_file.h reading either version.
#include "scheduler/ir/layered_model.h"

#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "scheduler/ir/model_file.h"
#include "tests/testing/status_matchers.h"

namespace jitpipe::layered_model_test {
namespace {

using ::jitpipe::testing::Message;

constexpr char kExample[] = R"({"format": "jitpipe.model", "version": 2,
 "input_bytes": 64,
 "embedding": {"output_bytes": 100, "stash_bytes": 10, "param_bytes": 4000},
 "layers": [{"name": "decoder", "repeat": 3, "forward_us": 2, "backward_input_us": 3,
             "backward_weight_us": 1, "output_bytes": 100, "stash_bytes": 700,
             "param_bytes": 800},
            {"repeat": 2, "block": [{"name": "attn", "forward_us": 1}, {"name": "moe",
                                                                         "forward_us": 5}]}],
 "loss": {"forward_us": 4, "output_bytes": 4, "stash_bytes": 900, "param_bytes": 4000},
 "device": {"memory_bytes": 1000000},
 "optimizer": {"kind": "adam", "shard_over_dp": true},
 "p2p": {"latency_us": 5, "gb_per_s": 10},
 "dp": {"size": 4, "param_dtype": "bf16", "grad_dtype": "fp32"}})";

std::string With(const std::string& body) {
  return R"({"format": "jitpipe.model", "version": 2, )" + body + "}";
}

TEST(LayeredModelTest, ParsesHeadsRepeatsAndBlocksInModelOrder) {
  ASSERT_OK_AND_ASSIGN(LayeredModel m, ParseLayeredModelJson(kExample));
  // embedding, 3 decoders, (attn, moe) x 2, loss
  ASSERT_EQ(m.layers.size(), 9u);
  EXPECT_TRUE(m.HasEmbedding());
  EXPECT_TRUE(m.HasLoss());
  EXPECT_EQ(m.NumBodyLayers(), 7);
  EXPECT_EQ(m.layers[0].kind, LayerKind::kEmbedding);
  EXPECT_EQ(m.layers[1].name, "decoder");
  EXPECT_EQ(m.layers[3].backward_input_us, 3);
  EXPECT_EQ(m.layers[3].stash_bytes, 700);
  EXPECT_EQ(m.layers[4].name, "attn");
  EXPECT_EQ(m.layers[5].name, "moe");
  EXPECT_EQ(m.layers[6].name, "attn");
  EXPECT_EQ(m.layers[7].forward_us, 5);
  EXPECT_EQ(m.layers[7].param_bytes, 0);  // absent keys are 0
  EXPECT_EQ(m.layers[8].kind, LayerKind::kLoss);
  EXPECT_EQ(m.input_bytes, 64);
  EXPECT_EQ(m.device.LimitFor(3), 1000000);
  EXPECT_EQ(m.p2p.latency_us, 5);
  EXPECT_EQ(m.dp.size, 4);
  // (4000 + 3 x 800 + 4000) bytes of bf16.
  EXPECT_EQ(m.ParamElements(), 5200);
}

// Megatron's bytes per parameter (theoretical_memory_usage.py): bf16
// parameters, fp32 gradients and Adam with fp32 master weights: 2 + 4 + 12 =
// 18; with the distributed optimizer 6 + 12/dp.
TEST(LayeredModelTest, OptimizerStateBytesByDtypeAndSharding) {
  OptimizerSpec adam;
  EXPECT_EQ(adam.StateBytes(1000, Dtype::kBf16, 8), 12000);  // master 4 + 2 states x 4
  EXPECT_EQ(adam.StateBytes(1000, Dtype::kFp32, 8), 8000);   // no master copy of fp32
  adam.shard_over_dp = true;
  EXPECT_EQ(adam.StateBytes(1000, Dtype::kBf16, 8), 1500);
  EXPECT_EQ(adam.StateBytes(1001, Dtype::kBf16, 8), 1502);  // rounded up
  OptimizerSpec bf16_states{.state_dtype = Dtype::kBf16, .master_weights = false};
  EXPECT_EQ(bf16_states.StateBytes(1000, Dtype::kBf16, 1), 4000);
  OptimizerSpec sgd{.kind = OptimizerKind::kSgd};
  EXPECT_EQ(sgd.StateBytes(1000, Dtype::kFp32, 1), 4000);
  OptimizerSpec none{.kind = OptimizerKind::kNone};
  EXPECT_EQ(none.StateBytes(1000, Dtype::kBf16, 1), 0);
}

TEST(LayeredModelTest, PerRankDeviceLimitsReplaceTheCommonOne) {
  ASSERT_OK_AND_ASSIGN(LayeredModel m,
                       ParseLayeredModelJson(With(R"("layers": [{}], "device": {
      "memory_bytes": 7, "rank_memory_bytes": [10, 20]})")));
  EXPECT_EQ(m.device.LimitFor(0), 10);
  EXPECT_EQ(m.device.LimitFor(1), 20);
  EXPECT_EQ(m.device.LimitFor(2), 0);  // none given for that rank
  ASSERT_OK_AND_ASSIGN(LayeredModel plain, ParseLayeredModelJson(With(R"("layers": [{}])")));
  EXPECT_EQ(plain.device.LimitFor(0), 0);
  EXPECT_FALSE(plain.HasEmbedding());
  EXPECT_FALSE(plain.HasLoss());
}

TEST(LayeredModelTest, JsonRoundTripCompressesRepeats) {
  ASSERT_OK_AND_ASSIGN(LayeredModel m, ParseLayeredModelJson(kExample));
  const std::string text = LayeredModelToJson(m);
  ASSERT_OK_AND_ASSIGN(LayeredModel back, ParseLayeredModelJson(text));
  EXPECT_EQ(back.layers, m.layers);
  EXPECT_EQ(back.input_bytes, m.input_bytes);
  EXPECT_EQ(back.device.memory_bytes, m.device.memory_bytes);
  EXPECT_EQ(back.optimizer.shard_over_dp, true);
  EXPECT_EQ(back.dp.param_dtype, Dtype::kBf16);
  EXPECT_EQ(back.p2p.gb_per_s, 10);
  // The three decoders are one entry; the block's alternating layers are not runs.
  EXPECT_NE(text.find("\"repeat\": 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"repeat\": 2"), std::string::npos) << text;
}

class LayeredModelErrorTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(LayeredModelErrorTest, NamesTheField) {
  const auto& [body, message] = GetParam();
  EXPECT_EQ(Message(ParseLayeredModelJson(With(body))), message) << body;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, LayeredModelErrorTest,
    ::testing::Values(
        std::tuple{R"("embedding": {})", R"(missing "layers")"},
        std::tuple{R"("layers": [])", R"("layers" must hold at least one layer)"},
        std::tuple{R"("layers": {})", R"("layers" must be an array, found {})"},
        std::tuple{R"("layers": [{"stash_bytes": -1}])",
                   R"("layers[0].stash_bytes" must be a whole number >= 0, found -1)"},
        std::tuple{R"("layers": [{}, {"forward_us": "slow"}])",
                   R"("layers[1].forward_us" must be a number from 0 to 1e+12, found "slow")"},
        std::tuple{R"("layers": [{"repeat": 0}])",
                   R"("layers[0].repeat" must be a whole number >= 1, found 0)"},
        std::tuple{R"("layers": [{"repeat": 100000}])",
                   R"("layers[0].repeat" is 100000; a model has at most 65536 layers)"},
        std::tuple{R"("layers": [{"repeat": 40000}, {"repeat": 40000}])",
                   R"("layers[1]": more than 65536 layers after repeats are expanded)"},
        std::tuple{R"("layers": [{"block": []}])",
                   R"("layers[0].block" must be a non-empty array of layers, found [])"},
        std::tuple{R"("layers": [{"block": [{"output_bytes": 1.5}]}])",
                   R"("layers[0].block[0].output_bytes" must be a whole number >= 0, found 1.5)"},
        std::tuple{R"("layers": [7])", R"("layers[0]" must be an object, found 7)"},
        std::tuple{R"("layers": [{}], "loss": 3)", R"("loss" must be an object, found 3)"},
        std::tuple{R"("layers": [{}], "embedding": {"param_bytes": 6})",
                   R"("embedding.param_bytes" is 6, not a whole number of fp32 elements )"
                   R"((4 bytes each; dp.param_dtype))"},
        std::tuple{R"("layers": [{}], "device": {"memory_bytes": -5})",
                   R"("device.memory_bytes" is -5; expected 0 to 1125899906842624 (1 PiB))"},
        std::tuple{R"("layers": [{}], "device": {"rank_memory_bytes": [1, 2000000000000000000]})",
                   R"("device.rank_memory_bytes[1]" is 2000000000000000000; expected 0 to )"
                   R"(1125899906842624 (1 PiB))"},
        std::tuple{R"("layers": [{}], "device": {"rank_memory_bytes": [1, 2.5]})",
                   R"("device.rank_memory_bytes[1]" must be a whole number >= 0, found 2.5)"},
        std::tuple{R"("layers": [{}], "optimizer": {"kind": "lion"})",
                   R"("optimizer.kind" is "lion"; expected adam, sgd or none)"},
        std::tuple{R"("layers": [{}], "optimizer": {"state_dtype": "fp64"})",
                   R"("optimizer.state_dtype": unknown dtype "fp64"; expected fp32, bf16, )"
                   R"(fp16, fp8_e4m3 or fp8_e5m2)"},
        std::tuple{R"("layers": [{}], "dp": {"size": 0})",
                   R"("dp.size" must be a whole number >= 1, found 0)"},
        std::tuple{R"("layers": [{}], "workload": {"tp": 0})",
                   R"("workload.tp" is 0; expected 1 to 65536)"},
        std::tuple{R"("layers": [{}], "workload": {"microbatch_size": -1})",
                   R"("workload.microbatch_size" is -1; expected 0 to 1048576)"},
        std::tuple{R"("layers": [{}], "workload": {"seq_len": 2.5})",
                   R"("workload.seq_len" must be a whole number, found 2.5)"},
        std::tuple{R"("layers": [{}], "workload": {"model_flops_per_microbatch": -1})",
                   R"("workload.model_flops_per_microbatch" is -1; expected a finite number )"
                   R"(from 0 to 1e+30)"},
        std::tuple{R"("layers": [{}], "workload": 5)",
                   R"("workload" must be an object, found 5)"},
        std::tuple{R"("layers": [{}], "device": {"peak_tflops": -989})",
                   R"("device.peak_tflops" is -989; expected a finite number from 0 to 1e+09)"},
        std::tuple{R"("layers": [{}], "device": {"peak_tflops": "fast"})",
                   R"("device.peak_tflops" must be a number, found a string)"}));

// The workload and the peak: absent in a file written before them (every
// field unknown, tp 1), read back equal when written, and kept out of a
// file that does not know them.
TEST(LayeredModelTest, WorkloadAndPeakAreOptionalAndRoundTrip) {
  ASSERT_OK_AND_ASSIGN(LayeredModel old, ParseLayeredModelJson(With(R"("layers": [{}])")));
  EXPECT_EQ(old.workload, WorkloadSpec{});
  EXPECT_EQ(old.workload.tp, 1);
  EXPECT_EQ(old.workload.TokensPerMicrobatch(), 0);
  EXPECT_EQ(old.device.peak_tflops, 0);
  const std::string plain = LayeredModelToJson(old);
  EXPECT_EQ(plain.find("workload"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("peak_tflops"), std::string::npos) << plain;
  ASSERT_OK_AND_ASSIGN(
      LayeredModel m,
      ParseLayeredModelJson(With(R"("layers": [{}], "device": {"peak_tflops": 989.5},
          "workload": {"microbatch_size": 2, "seq_len": 4096, "tp": 8,
                       "model_flops_per_microbatch": 1.5e15})")));
  EXPECT_EQ(m.workload, (WorkloadSpec{.microbatch_size = 2, .seq_len = 4096, .tp = 8,
                                      .model_flops_per_microbatch = 1.5e15}));
  EXPECT_EQ(m.workload.TokensPerMicrobatch(), 8192);
  EXPECT_EQ(m.device.peak_tflops, 989.5);
  ASSERT_OK_AND_ASSIGN(LayeredModel back, ParseLayeredModelJson(LayeredModelToJson(m)));
  EXPECT_EQ(back.workload, m.workload);
  EXPECT_EQ(back.device.peak_tflops, 989.5);
}

TEST(LayeredModelTest, ValidatesModelsBuiltInCode) {
  LayeredModel m;
  m.layers.push_back({.kind = LayerKind::kLayer});
  EXPECT_OK(ValidateLayeredModel(m));
  m.layers.push_back({.kind = LayerKind::kLayer, .forward_us = -1});
  EXPECT_EQ(Message(ValidateLayeredModel(m)),
            R"("layer 1.forward_us" must be a number from 0 to 1e+12, found -1)");
  m.layers[1] = {.kind = LayerKind::kEmbedding};
  EXPECT_EQ(Message(ValidateLayeredModel(m)),
            "layer 1 is an embedding; only the first layer may be one");
  m.layers[1] = {.kind = LayerKind::kLoss};
  m.layers.push_back({.kind = LayerKind::kLayer});
  EXPECT_EQ(Message(ValidateLayeredModel(m)), "layer 1 is a loss; only the last layer may be one");
}

TEST(LayeredModelTest, RefusesVersionOneAndNewer) {
  EXPECT_EQ(Message(ParseLayeredModelJson(R"({"format": "jitpipe.model", "version": 1})")),
            "a version 1 model gives per-stage costs; expected version 2 (layers)");
  EXPECT_EQ(Message(ParseLayeredModelJson(R"({"format": "jitpipe.model", "version": 3})")),
            "jitpipe.model version 3 was written by a newer jitpipe; this build reads versions "
            "up to 2");
}

TEST(ModelFileTest, ReadsEitherVersion) {
  ASSERT_OK_AND_ASSIGN(ModelFile v1, ParseModelFileJson(
      R"({"format": "jitpipe.model", "version": 1, "defaults": {"forward_us": 3}})"));
  EXPECT_FALSE(v1.layered());
  EXPECT_EQ(v1.stages.ForStage(0).forward_us, 3);
  ASSERT_OK_AND_ASSIGN(ModelFile v2, ParseModelFileJson(kExample));
  EXPECT_TRUE(v2.layered());
  EXPECT_EQ(v2.layers.layers.size(), 9u);
  EXPECT_EQ(Message(ParseModelFileJson(R"({"format": "jitpipe.model", "version": 2})")),
            R"(missing "layers")");
  EXPECT_EQ(Message(LoadModelFile("/nonexistent/m.json")).find("/nonexistent/m.json"), 0u);
}

}  // namespace
}  // namespace jitpipe::layered_model_test
