// End-to-end runs of `jitpipe replay --stage transformer`: the small
// shape (hidden 256, 4 heads, 2 K/V heads, ffn 688, seq 128, vocab 1000, 8
// layers, fp32) written by `jitpipe model`, replayed at pp 4 with 8
// microbatches under every built-in schedule: the loss and every gradient as
// the reference trainer's, each rank's measured peak equal to its plan's.
// Then the usage errors. Skipped when the build has no OpenBLAS.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/ir/model_file.h"
#include "scheduler/generators/generate.h"
#include "tests/testing/sanitizers.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::replay_transformer_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::testing::HasSubstr;

const std::vector<std::string> kShape = {
    "--layers", "8",   "--hidden", "256",  "--heads", "4",  "--kv-heads", "2",
    "--ffn",    "688", "--seq",    "128",  "--vocab", "1000", "--dtype",  "fp32",
    "--swiglu", "--rmsnorm"};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class ReplayTransformerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
    dir_ = MakeTempDir("replay_transformer");
    model_ = dir_ + "/model.json";
    CliResult m = RunCli(Concat({"model", "--tflops", "1", "-o", model_}, kShape));
    ASSERT_EQ(m.exit_code, 0) << m.err;
  }
  std::string dir_, model_;
};

TEST_P(ReplayTransformerTest, MatchesTheReferenceAndThePlan) {
  const std::string schedule = dir_ + "/schedule.json";
  CliResult g = RunCli({"generate", "--schedule", GetParam(), "--pp", "4", "--microbatches", "8",
                        "-o", schedule});
  if (g.exit_code != 0) GTEST_SKIP() << GetParam() << " at pp 4, m 8: " << g.err;
  CliResult r = RunCli(Concat({"replay", schedule, "--model", model_, "--stage", "transformer",
                               "--json"},
                              kShape));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_TRUE(out["check"]["ok"].get<bool>()) << r.out;
  EXPECT_LE(out["check"]["worst_grad_error"].get<double>(), 1e-5);
  EXPECT_GT(out["loss"].get<double>(), 6.0);  // ~log(1000) at initialisation
  ASSERT_EQ(out["ranks"].size(), 4u);
  for (const nlohmann::json& rank : out["ranks"]) {
    EXPECT_EQ(rank["measured_peak_bytes"], rank["planned_peak_bytes"]) << rank;
  }
}

// Every built-in schedule; under a sanitizer (the release stage of
// tools/test.sh runs all of them) three that cover the executor's paths:
// full backward (1F1B), I/W split in a V (ZB-V), two chains with
// overlapped F and B (DualPipeV). The math is the same in each, and an
// instrumented replay of it takes 8 s.
std::vector<std::string> Schedules() {
  std::vector<std::string> out;
  for (const GeneratorInfo& g : AllGenerators()) {
    if (::jitpipe::testing::kSanitized && g.name != "1f1b" && g.name != "zbv" &&
        g.name != "dualpipev") {
      continue;
    }
    out.push_back(g.name);
  }
  return out;
}

std::string Name(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, ReplayTransformerTest, ::testing::ValuesIn(Schedules()),
                         Name);

TEST(ReplayTransformerUsageTest, NamesWhatIsMissingOrDifferent) {
  if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
  const std::string dir = MakeTempDir("replay_transformer_usage");
  const std::string model = dir + "/model.json", schedule = dir + "/schedule.json";
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", model}, kShape)).exit_code, 0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "-o",
                    schedule})
                .exit_code,
            0);
  CliResult no_model = RunCli(Concat({"replay", schedule, "--stage", "transformer"}, kShape));
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_THAT(no_model.err, HasSubstr("--stage transformer needs --model MODEL"));
  std::vector<std::string> other = kShape;
  other[3] = "128";  // --hidden 128: not the shape the file was written with
  CliResult differs = RunCli(Concat({"replay", schedule, "--model", model, "--stage",
                                     "transformer"},
                                    other));
  EXPECT_EQ(differs.exit_code, 2);
  EXPECT_THAT(differs.err, HasSubstr(model + ": layer 0 (embedding"));
  CliResult bf16 = RunCli({"replay", schedule, "--model", model, "--stage", "transformer",
                           "--layers", "8", "--hidden", "256", "--heads", "4", "--seq", "128",
                           "--vocab", "1000"});
  EXPECT_EQ(bf16.exit_code, 2);
  EXPECT_THAT(bf16.err, HasSubstr("it needs --dtype fp32, --swiglu, --rmsnorm"));
}

// The shape flags of kShape at --dtype bf16: the model the cuda stage runs.
std::vector<std::string> Bf16Shape() {
  std::vector<std::string> shape = kShape;
  shape[15] = "bf16";  // --dtype
  return shape;
}

// --stage transformer on the other backends: the bf16 block on cuda only
// (the fp32 one in process), usage errors for the rest; --reference-check
// with another stage; --graph without cuda. Exit 2 with the reason.
TEST(ReplayTransformerUsageTest, BackendsAndFlagsThatDoNotFit) {
  if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
  const std::string dir = MakeTempDir("replay_transformer_backends");
  const std::string fp32 = dir + "/fp32.json", bf16 = dir + "/bf16.json";
  const std::string schedule = dir + "/schedule.json";
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", fp32}, kShape)).exit_code, 0);
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", bf16}, Bf16Shape())).exit_code, 0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "-o",
                    schedule})
                .exit_code,
            0);
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {Concat({"--model", bf16, "--backend", "nccl"}, Bf16Shape()),
       "--stage transformer runs on --backend inproc (fp32) or cuda (bf16), not nccl"},
      {Concat({"--model", fp32, "--backend", "cuda"}, kShape),
       "--stage transformer runs a bf16 block (--backend cuda) with SwiGLU, RMSNorm and fused "
       "attention; it needs --dtype bf16"},
      {Concat({"--model", bf16}, Bf16Shape()),
       "--stage transformer runs an fp32 block with SwiGLU, RMSNorm and fused attention; it "
       "needs --dtype fp32"},
      {Concat({"--model", fp32, "--graph", "--buffers", "arena"}, kShape),
       "--graph needs --backend cuda, --stage mlp or transformer, --buffers arena and --dp 1"},
      {Concat({"--model", bf16, "--backend", "cuda", "--graph"}, Bf16Shape()),
       "--graph needs --backend cuda, --stage mlp or transformer, --buffers arena and --dp 1"},
  };
  for (const Case& c : cases) {
    CliResult r = RunCli(Concat({"replay", schedule, "--stage", "transformer"}, c.args));
    EXPECT_EQ(r.exit_code, 2) << c.error;
    EXPECT_EQ(r.err, "jitpipe replay: " + c.error + "\n(see: jitpipe replay --help)\n");
    EXPECT_EQ(r.out, "");
  }
}

// On a machine without a CUDA device (or a build without CUDA), the bf16
// transformer on --backend cuda is planned, then refused before the device
// module is loaded: exit 1, "no CUDA device". tools/gpu-check runs it on a
// GPU.
TEST(ReplayTransformerCudaTest, WithoutADeviceExitsOneSayingSo) {
  if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has a GPU";
  const std::string dir = MakeTempDir("replay_transformer_cuda");
  const std::string model = dir + "/model.json", schedule = dir + "/schedule.json";
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", model}, Bf16Shape())).exit_code, 0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "zbv", "--pp", "4", "--microbatches", "8", "-o",
                    schedule})
                .exit_code,
            0);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--reference-check=false", "--measure-costs"},
        {"--buffers", "arena", "--graph"}}) {
    CliResult r = RunCli(Concat(Concat({"replay", schedule, "--model", model, "--stage",
                                        "transformer", "--backend", "cuda"},
                                       Bf16Shape()),
                                extra));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, ::testing::StartsWith("jitpipe replay: " + schedule + ": no CUDA device"));
    EXPECT_EQ(r.out, "");
  }
}

// --reference-check=false runs the replay without the reference trainer:
// no check in the report, and it says so.
TEST(ReplayTransformerNoCheckTest, ReportsNoCheckAndSaysSo) {
  if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
  const std::string dir = MakeTempDir("replay_transformer_nocheck");
  const std::string model = dir + "/model.json", schedule = dir + "/schedule.json";
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", model}, kShape)).exit_code, 0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2", "-o",
                    schedule})
                .exit_code,
            0);
  const std::vector<std::string> args =
      Concat({"replay", schedule, "--model", model, "--stage", "transformer",
              "--reference-check=false"},
             kShape);
  CliResult text = RunCli(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("check against the reference trainer: not run "
                                  "(--reference-check=false)"));
  CliResult json = RunCli(Concat(args, {"--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json out = nlohmann::json::parse(json.out);
  EXPECT_FALSE(out.contains("check")) << json.out;
  EXPECT_GT(out["loss"].get<double>(), 6.0);
}

// The calibration flow on the shape at pp 2 (even cut: E t*4 | t*4
// L): replay --json reports each stage's call times with its layers, model
// --calibrate fits them (two stages: the decoder layer's time from stage 0,
// the loss head the rest of stage 1, or, if that rest is negative, the loss
// at 0 and the layer the mean over both stages' 4 layers each), and the
// calibrated model simulates the schedule.
TEST(ReplayTransformerCalibrationTest, ReplayThenCalibrateThenSimulate) {
  if (!JITPIPE_HAVE_BLAS) GTEST_SKIP() << "built without OpenBLAS: no transformer stage";
  const std::string dir = MakeTempDir("replay_transformer_calibrate");
  const std::string model = dir + "/model.json", schedule = dir + "/schedule.json";
  const std::string report = dir + "/replay.json", calibrated = dir + "/calibrated.json";
  ASSERT_EQ(RunCli(Concat({"model", "--tflops", "1", "-o", model}, kShape)).exit_code, 0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "-o",
                    schedule})
                .exit_code,
            0);
  CliResult r = RunCli(Concat({"replay", schedule, "--model", model, "--stage", "transformer",
                               "--steps", "2", "--json"},
                              kShape));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["partition"], nlohmann::json({0, 5, 10}));
  EXPECT_EQ(out["transformer_shape"]["hidden"], 256);
  const nlohmann::json& times = out["stage_times"];
  EXPECT_EQ(times["skipped_steps"], 1);
  EXPECT_EQ(times["counted_steps"], 1);
  ASSERT_EQ(times["stages"].size(), 2u);
  const nlohmann::json& s0 = times["stages"][0];
  const nlohmann::json& s1 = times["stages"][1];
  EXPECT_EQ(s0["first_layer"], 0);
  EXPECT_EQ(s0["end_layer"], 5);
  EXPECT_EQ(s1["first_layer"], 5);
  EXPECT_EQ(s1["end_layer"], 10);
  EXPECT_EQ(s0["forward_calls"], 4);
  EXPECT_EQ(s1["backward_calls"], 4);  // 1F1B runs B
  { std::ofstream(report) << r.out; }
  CliResult c = RunCli(Concat({"model", "--calibrate", report, "-o", calibrated}, kShape));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr("heads-scaled fit, B split into I and W by the FLOP ratio"));
  ASSERT_OK_AND_ASSIGN(ModelFile m, LoadModelFile(calibrated));
  const auto layer_time = [](double t0, double t1) {
    return t1 >= t0 ? t0 / 4 : (t0 + t1) / 8;
  };
  const LayerCost& layer = m.layers.layers[1];
  EXPECT_NEAR(layer.forward_us,
              layer_time(s0["forward_us"].get<double>(), s1["forward_us"].get<double>()), 1e-6);
  EXPECT_NEAR(layer.backward_input_us + layer.backward_weight_us,
              layer_time(s0["backward_us"].get<double>(), s1["backward_us"].get<double>()),
              1e-6);
  CliResult sim = RunCli({"simulate", schedule, "--model", calibrated});
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
}

}  // namespace
}  // namespace jitpipe::replay_transformer_test
