// End-to-end runs of `jitpipe replay --stage transformer`: the small
// shape (hidden 256, 4 heads, 2 K/V heads, ffn 688, seq 128, vocab 1000, 8
// layers, fp32) written by `jitpipe model`, replayed at pp 4 with 8
// microbatches under every built-in schedule: the loss and every gradient as
// the reference trainer's, each rank's measured peak equal to its plan's.
// Then the usage errors. Skipped when the build has no OpenBLAS.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/generators/generate.h"
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

std::vector<std::string> Schedules() {
  std::vector<std::string> out;
  for (const GeneratorInfo& g : AllGenerators()) out.push_back(g.name);
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

}  // namespace
}  // namespace jitpipe::replay_transformer_test
