// End-to-end runs of `jitpipe generate --schedule auto`: the schedule, the
// explanation, the exit codes.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/ir/schedule_io.h"
#include "scheduler/ir/schedule_json.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_generate_auto_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// 8 layers, a rank's two of them F = I = W = 1 and 1 MiB of stash; 8 MiB per
// rank (two units at pp 4).
constexpr char kModel[] = R"({"format": "jitpipe.model", "version": 2,
 "layers": [{"repeat": 8, "forward_us": 0.5, "backward_input_us": 0.5,
             "backward_weight_us": 0.5, "stash_bytes": 524288}],
 "optimizer": {"kind": "none"}, "device": {"memory_bytes": 8388608}})";

class CmdGenerateAutoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("auto");
    model_ = dir_ + "/model.json";
    WriteTextFile(model_, kModel);
  }
  std::string dir_, model_;
};

TEST_F(CmdGenerateAutoTest, WritesTheScheduleAndExplainsIt) {
  const std::string out = dir_ + "/auto.json";
  CliResult r = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                        "--model", model_, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("wrote " + out + "\nchose: "));
  EXPECT_THAT(r.out, HasSubstr("step: 25.5 us; lower bound 25.5 us"));
  EXPECT_THAT(r.out, HasSubstr("zero-bubble heuristic: 27 us (chosen: -5.6%)"));
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(out));
  EXPECT_EQ(s.name, "auto");
  EXPECT_EQ(s.pp, 4);
  // The file is a schedule like any other: it validates and simulates to
  // the step the search reported.
  EXPECT_EQ(RunCli({"validate", out}).exit_code, 0);
  CliResult sim = RunCli({"simulate", out, "--model", model_});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr("makespan 25.5 us"));
}

TEST_F(CmdGenerateAutoTest, WithoutOutputTheJsonGoesToStdoutTheExplanationToStderr) {
  CliResult r = RunCli({"generate", "--schedule", "AUTO", "--pp", "4", "--microbatches", "8",
                        "--model", model_, "--memory-limit", "6MiB", "--time-budget", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(r.out));
  EXPECT_EQ(s.microbatches, 8);
  EXPECT_THAT(r.err, StartsWith("chose: "));
  EXPECT_THAT(r.err, HasSubstr(" of 6.00 MiB"));
}

TEST_F(CmdGenerateAutoTest, Errors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> usage = {
      {{"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8"},
       "--schedule auto needs --model MODEL"},
      {{"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8", "--model", model_,
        "--memory-limit", "much"},
       "--memory-limit: \"much\" is not a byte size"},
      {{"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8", "--model", model_,
        "--time-budget", "0"},
       "--time-budget must be in (0, 86400] seconds, got 0"},
      {{"generate", "--schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--memory-limit",
        "1GiB"},
       "--memory-limit applies to --schedule auto only"},
      {{"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8", "--model", model_,
        "--stages-per-rank", "4"},
       "--stages-per-rank for auto must be 1 or 2, got 4"},
  };
  for (const auto& [args, message] : usage) {
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
  CliResult none = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                           "--model", model_, "--memory-limit", "1000"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr(model_ + ": no schedule fits the memory limit"));
}

}  // namespace
}  // namespace jitpipe::cmd_generate_auto_test
