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

// The text after `label` up to the next ';' or end of line.
std::string After(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return "";
  const size_t from = at + label.size();
  return text.substr(from, text.find_first_of(";\n", from) - from);
}

// A model `jitpipe model` writes (embedding, 8 decoder layers, a loss head
// whose logits outweigh a layer's stash): auto cuts it balanced, writes the
// lowered program it judged with its cut and the model's fingerprint, and
// simulate of that file under the model gives the step auto printed; no
// row of compare --partition balanced that fits is faster.
TEST_F(CmdGenerateAutoTest, TheFileSimulatesToTheStepItPrintedAndBeatsCompare) {
  const std::string model = dir_ + "/llama.json";
  ASSERT_EQ(RunCli({"model", "--layers", "8", "--hidden", "1024", "--heads", "8", "--kv-heads",
                    "2", "--ffn", "2816", "--vocab", "32000", "--seq", "2048", "--tflops", "400",
                    "--swiglu", "--rmsnorm", "--device-memory", "2GiB", "-o", model})
                .exit_code,
            0);
  const std::string out = dir_ + "/auto.json";
  CliResult r = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                        "--model", model, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(balanced cut)"));
  const std::string step = After(r.out, "step: ");
  ASSERT_FALSE(step.empty()) << r.out;
  ASSERT_OK_AND_ASSIGN(Schedule s, LoadSchedule(out));
  EXPECT_TRUE(s.lowered);
  EXPECT_THAT(r.out, HasSubstr("layers \"" + s.layout + "\" (balanced cut)"));
  EXPECT_THAT(s.model_fingerprint, StartsWith("fnv1a64:"));

  CliResult sim = RunCli({"simulate", out, "--model", model});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(After(sim.out, "makespan "), step);
  EXPECT_THAT(sim.out, HasSubstr("cut: " + s.layout + " (as the schedule file records it)"));
  EXPECT_EQ(sim.err, "");
  CliResult even = RunCli({"simulate", out, "--model", model, "--partition", "even"});
  ASSERT_EQ(even.exit_code, 0) << even.err;
  EXPECT_THAT(even.out, HasSubstr(" (even)"));

  CliResult compare = RunCli({"compare", "--model", model, "--pp", "4", "--microbatches", "8",
                              "--partition", "balanced", "--json"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  CliResult sim_json = RunCli({"simulate", out, "--model", model, "--json"});
  ASSERT_EQ(sim_json.exit_code, 0) << sim_json.err;
  const double auto_us = std::stod(After(sim_json.out, "\"makespan_us\": "));
  const std::string rows = compare.out;
  int fitting = 0;
  for (size_t at = rows.find("\"makespan_us\": "); at != std::string::npos;
       at = rows.find("\"makespan_us\": ", at + 1)) {
    const size_t fits = rows.find("\"fits\": ", at);
    ASSERT_NE(fits, std::string::npos);
    if (rows.compare(fits + 8, 4, "true") != 0) continue;
    ++fitting;
    EXPECT_LE(auto_us, std::stod(rows.substr(at + 15)) * (1 + 1e-12));
  }
  EXPECT_GT(fitting, 0);

  // Another model (its limit changed) is noted, not refused.
  const std::string other = dir_ + "/other.json";
  ASSERT_EQ(RunCli({"model", "--layers", "8", "--hidden", "1024", "--heads", "8", "--kv-heads",
                    "2", "--ffn", "2816", "--vocab", "32000", "--seq", "2048", "--tflops", "400",
                    "--swiglu", "--rmsnorm", "--device-memory", "3GiB", "-o", other})
                .exit_code,
            0);
  CliResult noted = RunCli({"simulate", out, "--model", other});
  EXPECT_EQ(noted.exit_code, 0) << noted.err;
  EXPECT_THAT(noted.err, HasSubstr("note: " + other + ": the schedule was made for another model ("
                                   + s.model_fingerprint + "; this one is fnv1a64:"));
}

// A given layout is the cut of every candidate; one that no placement
// searched has the stages of is refused; a CSV holds the compute order.
TEST_F(CmdGenerateAutoTest, HonoursALayoutAndSaysWhatACsvCannotHold) {
  const std::string out = dir_ + "/auto.json";
  CliResult r = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                        "--model", model_, "--layout", "t*3|t|t*2|t*2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("layers \"t*3|t|t*2|t*2\" (layout cut)"));
  ASSERT_OK_AND_ASSIGN(Schedule s, ParseScheduleJson(r.out));
  EXPECT_EQ(s.layout, "t*3|t|t*2|t*2");
  EXPECT_EQ(s.stages_per_chain(), 4);  // one stage per rank, or DualPipe's two chains

  CliResult three = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                            "--model", model_, "--layout", "t*3|t*3|t*2"});
  EXPECT_EQ(three.exit_code, 1);
  EXPECT_THAT(three.err, HasSubstr("layout \"t*3|t*3|t*2\" fits none of the placements searched"));

  const std::string csv = dir_ + "/auto.csv";
  CliResult c = RunCli({"generate", "--schedule", "auto", "--pp", "4", "--microbatches", "8",
                        "--model", model_, "-o", csv});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_THAT(c.out, StartsWith("wrote " + csv + ": the compute order (a CSV holds neither "
                                "lowering nor cut)\n"));
  EXPECT_THAT(c.out, HasSubstr("to run what was judged: jitpipe lower " + csv +
                               " --reduce-grad --recv "));
  ASSERT_OK_AND_ASSIGN(Schedule compute, LoadSchedule(csv));
  EXPECT_FALSE(compute.lowered);
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
