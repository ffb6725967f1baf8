// End-to-end runs of `jitpipe simulate`: JSON shape, anchors, notes, traces,
// exit codes.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe::cmd_simulate_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The anchors' unit costs.
constexpr char kUnitModel[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "stash_bytes": 1}})";

// Unit costs with data parallelism: each stage's reduction takes 2 us, in 8
// buckets; free transfers.
constexpr char kReducingModel[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"forward_us": 1, "backward_input_us": 1, "backward_weight_us": 1,
              "input_bytes": 500, "output_bytes": 500, "stash_bytes": 1, "param_bytes": 2000},
 "dp": {"size": 2, "gb_per_s": 1, "buckets": 8}})";

// pp 2, one microbatch, lowered without REDUCE_GRAD.
constexpr char kLowered[] = R"({"format": "jitpipe.schedule", "version": 1, "pp": 2,
 "stages_per_rank": 1, "microbatches": 1, "placement": "loop", "stage_to_rank": [0, 1],
 "lowered": true, "ranks": [["0F0", "0SEND_F0", "0RECV_B0", "0B0"],
                            ["1RECV_F0", "1F0", "1B0", "1SEND_B0"]]})";

// Two microbatches; rank 1 runs microbatch 1 first, which rank 0 sends only
// after its backward of microbatch 0: both wait forever.
constexpr char kDeadlock[] = R"({"format": "jitpipe.schedule", "version": 1, "pp": 2,
 "stages_per_rank": 1, "microbatches": 2, "placement": "loop", "stage_to_rank": [0, 1],
 "lowered": true,
 "ranks": [["0F0", "0SEND_F0", "0RECV_B0", "0B0", "0F1", "0SEND_F1", "0RECV_B1", "0B1"],
           ["1RECV_F1", "1F1", "1B1", "1SEND_B1", "1RECV_F0", "1F0", "1B0", "1SEND_B0"]]})";

class CmdSimulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("simulate");
    WriteTextFile(dir_ + "/unit.json", kUnitModel);
    WriteTextFile(dir_ + "/reducing.json", kReducingModel);
  }

  // Generates a built-in schedule into the temporary directory.
  std::string Generated(const std::string& name, int pp, int mbs) {
    const std::string path = dir_ + "/" + name + ".json";
    CliResult r = RunCli({"generate", "--schedule", name, "--pp", std::to_string(pp),
                          "--microbatches", std::to_string(mbs), "-o", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }

  std::string dir_;
};

TEST_F(CmdSimulateTest, JsonHasDesignShapeAndMatchesTheAnchor) {
  CliResult r = RunCli({"simulate", Generated("zbv", 4, 8), "--model", dir_ + "/unit.json",
                        "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"makespan_us", "bubble_fraction", "span_bubble_fraction",
                          "exposed_reduce_us", "ranks"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["makespan_us"], 51);
  EXPECT_EQ(j["exposed_reduce_us"], 0);
  ASSERT_EQ(j["ranks"].size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const nlohmann::json& row = j["ranks"][rank];
    EXPECT_EQ(row["rank"], rank);
    EXPECT_EQ(row["busy_us"], 48);
    EXPECT_EQ(row["span_us"], 48);
    EXPECT_TRUE(row["peak_bytes"].is_number_integer());
  }
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 1 - 48.0 / 51);
  EXPECT_EQ(j["span_bubble_fraction"], 0);
}

TEST_F(CmdSimulateTest, PrintsARankTableAndASummary) {
  CliResult r = RunCli({"simulate", Generated("1f1b", 4, 8), "--model", dir_ + "/unit.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pp 4, 4 stages, 8 microbatches; 1f1b, as lowered\n"));
  EXPECT_THAT(r.out, HasSubstr("   0        24 us        33 us        33 us         0 us            4 B"));
  EXPECT_THAT(r.out, HasSubstr("makespan 33 us; bubble 27.27% (1 - busy/makespan, worst rank)"));
}

TEST_F(CmdSimulateTest, ComparesExposedReductionWithoutAndWithTheOverlapPass) {
  CliResult r = RunCli({"simulate", Generated("dualpipev", 4, 8), "--model",
                        dir_ + "/reducing.json", "--compare-overlap", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["overlap"], false);
  const double without = j["compare_overlap"]["without"]["exposed_reduce_us"];
  const double with = j["compare_overlap"]["with"]["exposed_reduce_us"];
  EXPECT_EQ(without, j["exposed_reduce_us"]);
  EXPECT_LT(with, without);
  EXPECT_EQ(j["reduce_us"], 4);  // two stages of 2 us per rank
  CliResult text = RunCli({"simulate", Generated("dualpipev", 4, 8), "--model",
                           dir_ + "/reducing.json", "--overlap", "--compare-overlap"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("with the overlap pass\n"));
  EXPECT_THAT(text.out, HasSubstr("exposed reduction: "));
  EXPECT_THAT(text.out, HasSubstr(" without the overlap pass ("));
}

TEST_F(CmdSimulateTest, NotesWhenReductionsAreNotModelled) {
  WriteTextFile(dir_ + "/lowered.json", kLowered);
  CliResult r = RunCli({"simulate", dir_ + "/lowered.json", "--model", dir_ + "/reducing.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "jitpipe simulate: note: " + dir_ +
                       "/lowered.json has no REDUCE_GRAD but the model's dp.size is 2: gradient "
                       "reductions are not modelled (lower with --reduce-grad)\n");
  CliResult quiet = RunCli({"simulate", dir_ + "/lowered.json", "--model", dir_ + "/unit.json"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST_F(CmdSimulateTest, WritesATraceThatPassesTheChecker) {
  const std::string trace = dir_ + "/trace.json";
  CliResult r = RunCli({"simulate", Generated("interleaved-1f1b", 4, 8), "--model",
                        dir_ + "/reducing.json", "--overlap", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_GT(summary.slices, 4 * 2 * 8 * 2);  // every F and B, and more
  EXPECT_GT(summary.flows, 0);
  EXPECT_GT(summary.counters, 0);
}

TEST_F(CmdSimulateTest, ExitCodes) {
  const std::string s = Generated("gpipe", 2, 2);
  EXPECT_EQ(RunCli({"simulate", s}).exit_code, 2);  // --model is required
  EXPECT_EQ(RunCli({"simulate", "--model", dir_ + "/unit.json"}).exit_code, 2);
  CliResult missing = RunCli({"simulate", s, "--model", dir_ + "/none.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("jitpipe simulate: " + dir_ + "/none.json"));
  WriteTextFile(dir_ + "/deadlock.json", kDeadlock);
  CliResult stuck = RunCli({"simulate", dir_ + "/deadlock.json", "--model", dir_ + "/unit.json"});
  EXPECT_EQ(stuck.exit_code, 1);
  const std::string report =
      "/deadlock.json: deadlock under relaxed semantics: wait cycle 0 -> 1 -> 0: rank 0 at index "
      "3 (0B0) waits for rank 1 to post 1SEND_B0 (index 7); rank 1 at index 1 (1F1) waits for "
      "rank 0 to post 0SEND_F1 (index 5)";
  EXPECT_EQ(stuck.err, "jitpipe simulate: " + dir_ + report + "\n");
  // One report of a deadlock, whoever finds it: validate's first line is the same.
  CliResult validated = RunCli({"validate", dir_ + "/deadlock.json"});
  EXPECT_EQ(validated.exit_code, 1);
  EXPECT_THAT(validated.err, StartsWith("jitpipe validate: " + dir_ + report + "\n"));
}

}  // namespace
}  // namespace jitpipe::cmd_simulate_test
