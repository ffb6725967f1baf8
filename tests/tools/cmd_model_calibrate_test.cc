// `jitpipe model --calibrate REPLAY.json` from a hand-written replay report
// (the "stage_times" and "transformer_shape" of `replay --json`): the times
// it writes are the fit computed by hand, the bytes those of the FLOP model;
// a report of another shape or stage is refused naming what differs.
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model_file.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_model_calibrate_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::testing::HasSubstr;

const std::vector<std::string> kShape = {"--layers", "4",  "--hidden", "64",     "--heads",
                                         "4",        "--kv-heads", "2", "--ffn", "128",
                                         "--seq",    "32", "--vocab",  "100",    "--dtype",
                                         "fp32",     "--swiglu",   "--rmsnorm"};

nlohmann::json Shape(int64_t hidden) {
  return {{"layers", 4},       {"hidden", hidden},      {"heads", 4},
          {"kv_heads", 2},     {"ffn", 128},            {"vocab", 100},
          {"seq", 32},         {"microbatch_size", 1},  {"tp", 1},
          {"sequence_parallel", false}, {"swiglu", true}, {"rmsnorm", true},
          {"recompute", "none"}, {"dtype", "fp32"},     {"attention", "fused"},
          {"dropout", false},  {"loss_dtype", "fp32"},  {"tied_embeddings", false}};
}

nlohmann::json Stage(int stage, int first, int end, double f, double i, double w) {
  return {{"stage", stage}, {"first_layer", first}, {"end_layer", end}, {"forward_us", f},
          {"backward_input_us", i}, {"backward_weight_us", w}, {"backward_us", 0},
          {"forward_calls", 8}, {"backward_input_calls", 8}, {"backward_weight_calls", 8},
          {"backward_calls", 0}};
}

// ZB-style pp 2 report (I and W measured), cut E t t | t t L.
std::string WriteReport(const std::string& dir, const nlohmann::json& shape) {
  nlohmann::json report = {
      {"stage", "transformer"},
      {"stage_times",
       {{"skipped_steps", 1},
        {"counted_steps", 2},
        {"stages", {Stage(0, 0, 3, 50, 40, 80), Stage(1, 3, 6, 70, 46, 83)}}}},
      {"partition", {0, 3, 6}},
      {"transformer_shape", shape}};
  const std::string path = dir + "/replay.json";
  std::ofstream(path) << report.dump(1);
  return path;
}

std::vector<std::string> Model(std::vector<std::string> head) {
  head.insert(head.end(), kShape.begin(), kShape.end());
  return head;
}

// Two stages, three kinds: the layer's time is stage 0's over its 2 layers
// (the embedding's FLOPs are 0), the loss takes the rest of stage 1:
// F 50 / 2 = 25 and 70 - 50 = 20; I 20 and 6; W 40 and 3.
TEST(CmdModelCalibrateTest, WritesTheFittedTimesAndTheFlopModelsBytes) {
  const std::string dir = MakeTempDir("model_calibrate");
  const std::string report = WriteReport(dir, Shape(64));
  CliResult r = RunCli(Model({"model", "--calibrate", report, "-o", dir + "/m.json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("times measured by " + report + " (2 steps, 2 stages; "
                               "heads-scaled fit; worst stage residual 0.0% at stage "));
  CliResult flops = RunCli(Model({"model", "--tflops", "1", "-o", dir + "/flops.json"}));
  ASSERT_EQ(flops.exit_code, 0) << flops.err;
  ASSERT_OK_AND_ASSIGN(ModelFile m, LoadModelFile(dir + "/m.json"));
  ASSERT_OK_AND_ASSIGN(ModelFile base, LoadModelFile(dir + "/flops.json"));
  ASSERT_EQ(m.layers.layers.size(), 6u);
  for (size_t l = 0; l < 6; ++l) {
    const LayerCost& got = m.layers.layers[l];
    const LayerCost& want = base.layers.layers[l];
    EXPECT_EQ(got.stash_bytes, want.stash_bytes) << l;
    EXPECT_EQ(got.output_bytes, want.output_bytes) << l;
    EXPECT_EQ(got.param_bytes, want.param_bytes) << l;
    const double f = l == 0 ? 0 : l == 5 ? 20 : 25;
    const double i = l == 0 ? 0 : l == 5 ? 6 : 20;
    const double w = l == 0 ? 0 : l == 5 ? 3 : 40;
    EXPECT_NEAR(got.forward_us, f, 1e-9) << l;
    EXPECT_NEAR(got.backward_input_us, i, 1e-9) << l;
    EXPECT_NEAR(got.backward_weight_us, w, 1e-9) << l;
  }
  EXPECT_EQ(m.layers.input_bytes, base.layers.input_bytes);
}

TEST(CmdModelCalibrateTest, RefusesAReportOfAnotherShapeOrStage) {
  const std::string dir = MakeTempDir("model_calibrate_errors");
  const std::string other = WriteReport(dir, Shape(128));
  CliResult r = RunCli(Model({"model", "--calibrate", other}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(other + ": was measured with hidden 128; the flags give hidden "
                                       "64: calibrate with the shape flags the replay ran"));
  const std::string cost = dir + "/cost.json";
  std::ofstream(cost) << R"({"stage": "cost", "stage_times": {"stages": []}})";
  r = RunCli(Model({"model", "--calibrate", cost}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(cost + ": has no transformer_shape: --calibrate takes the --json "
                                      "output of `jitpipe replay --stage transformer`"));
  r = RunCli(Model({"model", "--calibrate", dir + "/missing.json"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("missing.json"));
}

}  // namespace
}  // namespace jitpipe::cmd_model_calibrate_test
