// End-to-end runs of `jitpipe model`: the file it writes, the summary, exit
// codes.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planning/transformer.h"
#include "scheduler/ir/model_file.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_model_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::vector<std::string> kLlama = {
    "model", "--layers", "80", "--hidden", "8192", "--heads", "64", "--kv-heads", "8",
    "--ffn", "28672", "--vocab", "128256", "--seq", "8192", "--microbatch-size", "1",
    "--tp", "8", "--dtype", "bf16", "--tflops", "400", "--swiglu", "--rmsnorm",
    "--sequence-parallel", "--recompute", "selective", "--device-memory", "80GiB",
    "--dp", "4", "--distributed-optimizer", "--p2p-gb-per-s", "50", "--p2p-latency-us", "10"};

TEST(CmdModelTest, WritesTheLayeredModelOfTheLibrary) {
  const std::string path = MakeTempDir("model") + "/llama.json";
  std::vector<std::string> args = kLlama;
  args.insert(args.end(), {"-o", path});
  CliResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("wrote " + path + ": embedding + 80 decoder layers + loss, "
                                "8.82 billion parameters per tp rank (tp 8, bf16, recompute "
                                "selective, attention fused, sequence parallel)\n"));
  EXPECT_THAT(r.out, HasSubstr("per parameter: 2 B bf16 + 4 B fp32 gradient + 3 B adam state "
                               "(sharded over dp 4, ZeRO-1)\n"));
  EXPECT_THAT(r.out, HasSubstr("device memory: 80.00 GiB per GPU\n"));
  ASSERT_OK_AND_ASSIGN(ModelFile file, LoadModelFile(path));
  ASSERT_TRUE(file.layered());
  const LayeredModel& m = file.layers;
  TransformerShape x{.layers = 80, .hidden = 8192, .heads = 64, .kv_heads = 8, .ffn = 28672,
                     .vocab = 128256, .seq = 8192, .tp = 8, .sequence_parallel = true,
                     .swiglu = true, .rmsnorm = true, .recompute = Recompute::kSelective,
                     .tflops = 400};
  ASSERT_OK_AND_ASSIGN(LayeredModel expected, BuildTransformerModel(x));
  ASSERT_EQ(m.layers.size(), expected.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(m.layers[i].stash_bytes, expected.layers[i].stash_bytes) << i;
    EXPECT_EQ(m.layers[i].param_bytes, expected.layers[i].param_bytes) << i;
    EXPECT_DOUBLE_EQ(m.layers[i].forward_us, expected.layers[i].forward_us) << i;
  }
  EXPECT_EQ(m.device.memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(m.dp.size, 4);
  EXPECT_TRUE(m.optimizer.shard_over_dp);
  EXPECT_EQ(m.p2p.gb_per_s, 50);
  EXPECT_EQ(m.input_bytes, 8 * 8192);
}

TEST(CmdModelTest, WithoutOutputPrintsTheFile) {
  CliResult r = RunCli({"model", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab",
                        "100", "--seq", "16", "--tflops", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ModelFile file, ParseModelFileJson(r.out));
  EXPECT_EQ(file.layers.NumBodyLayers(), 2);
  EXPECT_EQ(file.layers.device.memory_bytes, 0);  // no limit given
}

// --explain prints each kind of layer's kept tensors, term by term, summing
// to the stash the file carries; the attention implementation and dropout
// change which terms there are.
TEST(CmdModelTest, ExplainPrintsTheTermsOfEveryLayerKind) {
  const std::vector<std::string> small = {"model", "--layers", "2", "--hidden", "8", "--heads",
                                          "4", "--kv-heads", "2", "--ffn", "12", "--vocab", "16",
                                          "--seq", "4", "--tflops", "1", "--swiglu", "--rmsnorm",
                                          "--explain"};
  CliResult fused = RunCli(small);
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_THAT(fused.out, HasSubstr("decoder layer: 832 B per microbatch\n"));
  EXPECT_THAT(fused.out, HasSubstr("log-sum-exp"));
  EXPECT_THAT(fused.out, HasSubstr("MLP: up projection (SwiGLU)"));
  EXPECT_THAT(fused.out, HasSubstr("embedding: 0 B per microbatch\n"));
  EXPECT_THAT(fused.out, HasSubstr("loss head: 400 B per microbatch\n"));
  EXPECT_THAT(fused.out, ::testing::Not(HasSubstr("softmax output")));
  EXPECT_THAT(fused.out, ::testing::Not(HasSubstr("\"format\"")));  // no file without -o
  std::vector<std::string> eager = small;
  eager.insert(eager.end(), {"--attention", "eager", "--dropout"});
  CliResult e = RunCli(eager);
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("attention core: softmax output (s x s scores)"));
  EXPECT_THAT(e.out, HasSubstr("attention core: dropout mask"));
  EXPECT_THAT(e.out, HasSubstr("decoder layer: 1.12 KiB per microbatch\n"));  // 1152 B
  std::vector<std::string> bad = small;
  bad.insert(bad.end(), {"--attention", "flash3"});
  CliResult b = RunCli(bad);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_THAT(b.err, HasSubstr("--attention: unknown attention \"flash3\"; expected fused or eager"));
}

TEST(CmdModelTest, UsageErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"model", "--hidden", "64", "--heads", "4", "--vocab", "100", "--seq", "16", "--tflops",
        "1"},
       "missing --layers"},
      {{"model", "--layers", "2", "--hidden", "65", "--heads", "4", "--vocab", "100", "--seq",
        "16", "--tflops", "1"},
       "--hidden 65 is not a multiple of heads 4"},
      {{"model", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "100", "--seq",
        "16", "--tflops", "1", "--device-memory", "80XB"},
       "--device-memory: \"80XB\" is not a byte size"},
      {{"model", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "100", "--seq",
        "16", "--tflops", "1", "--recompute", "some"},
       "--recompute: unknown recomputation \"some\""},
      {{"model", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "100", "--seq",
        "16", "--tflops", "1", "--optimizer", "lion"},
       "--optimizer must be adam, sgd or none, not \"lion\""},
  };
  for (const auto& [args, message] : cases) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
}

}  // namespace
}  // namespace jitpipe::cmd_model_test
