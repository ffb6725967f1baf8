// End-to-end runs of `jitpipe plan`: table, --json, --trace, --map, exit codes.
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/conformance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe::cmd_plan_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// pp 2, one microbatch, already lowered.
constexpr char kLowered[] = R"({"format": "jitpipe.schedule", "version": 1, "pp": 2,
 "stages_per_rank": 1, "microbatches": 1, "placement": "loop", "stage_to_rank": [0, 1],
 "lowered": true, "ranks": [["0F0", "0SEND_F0", "0RECV_B0", "0B0"],
                            ["1RECV_F0", "1F0", "1B0", "1SEND_B0"]]})";

constexpr char kModel[] = R"({"format": "jitpipe.model", "version": 1,
 "defaults": {"input_bytes": 64, "output_bytes": 128, "stash_bytes": 256}})";

class CmdPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("plan");
    WriteTextFile(dir_ + "/s.json", kLowered);
    WriteTextFile(dir_ + "/m.json", kModel);
  }
  std::string dir_;
};

TEST_F(CmdPlanTest, PrintsOneRowPerRankAndTheWorstPeak) {
  // Rank 0 holds output 0/0 until its SEND_F and receives the grad at
  // RECV_B: 448 B under jit; eager keeps both to step end: 576 B. Then
  // PyTorch main's runtime (issue 17): rank 0 receives one 128 B gradient,
  // rank 1 one 64 B activation: one slot each at every granularity; sent
  // buffers drained at the step end cost rank 0 the eager peak, as do
  // _add_wait_send's waits (rank 0's wait follows its backward, the last
  // action) and the budget's (nothing to wait for before the step ends).
  CliResult r = RunCli({"plan", dir_ + "/s.json", "--model", dir_ + "/m.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dir_ +
                       "/s.json: 2 ranks; arena under policy jit\n"
                       "rank     jit peak   eager peak jit/eager  lower bound        arena "
                       "arena/peak\n"
                       "   0        448 B        576 B     0.778        448 B        448 B      "
                       "1.000\n"
                       "   1        448 B        448 B     1.000        448 B        448 B      "
                       "1.000\n"
                       "worst peak: rank 0, 448 B at index 0 (0F0)\n"
                       "PyTorch's runtime: receive pools per stage and direction (A), per "
                       "direction (B), per rank (C), in slots and bytes; the receives in one "
                       "arena; the jit peak with sent buffers released at the step end "
                       "(drain), once sent (poll), at _add_wait_send's waits (wait-send), "
                       "under send budget 1\n"
                       "rank                A                B                C  recv arena "
                       "arena/best   drain peak    poll peak    wait-send       budget\n"
                       "   0    1       128 B    1       128 B    1       128 B       128 B      "
                       "1.000        576 B        448 B        576 B        576 B\n"
                       "   1    1        64 B    1        64 B    1        64 B        64 B      "
                       "1.000        448 B        448 B        448 B        448 B\n"
                       " sum    2       192 B    2       192 B    2       192 B       192 B      "
                       "1.000\n");
}

TEST_F(CmdPlanTest, JsonHasOneObjectPerRank) {
  CliResult r =
      RunCli({"plan", dir_ + "/s.json", "--model", dir_ + "/m.json", "--policy", "eager",
              "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "eager");
  EXPECT_EQ(j["prefetch"], 0);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const nlohmann::json& first = j["ranks"][0];
  EXPECT_EQ(first["rank"], 0);
  EXPECT_EQ(first["peak_bytes"], 576);
  EXPECT_EQ(first["lower_bound_bytes"], 448);
  EXPECT_EQ(first["arena_bytes"], 576);
  EXPECT_EQ(first["jit_peak_bytes"], 448);
  EXPECT_EQ(first["eager_peak_bytes"], 576);
  EXPECT_EQ(first["peak_action"], "0F0");
  EXPECT_EQ(first["buffers"], 5);
  EXPECT_EQ(j["worst_rank"], 0);
  // PyTorch main's runtime, per rank (issue 17).
  const nlohmann::json& pytorch = j["pytorch"];
  EXPECT_EQ(pytorch["send_budget"], 1);
  EXPECT_EQ(pytorch["budget_error"], "");
  ASSERT_EQ(pytorch["ranks"].size(), 2u);
  const nlohmann::json& p0 = pytorch["ranks"][0];
  EXPECT_EQ(p0["receives"], 1);
  EXPECT_EQ(p0["pool_per_stage_direction"]["slots"], 1);
  EXPECT_EQ(p0["pool_per_stage_direction"]["bytes"], 128);
  EXPECT_EQ(p0["pools_per_stage_direction"][0]["direction"], "backward");
  EXPECT_EQ(p0["pool_per_direction"]["bytes"], 128);
  EXPECT_EQ(p0["pool_per_rank"]["slots"], 1);
  EXPECT_EQ(p0["recv_arena_bytes"], 128);
  EXPECT_EQ(p0["peak_drain_bytes"], 576);
  EXPECT_EQ(p0["peak_poll_bytes"], 448);
  EXPECT_EQ(p0["peak_wait_send_bytes"], 576);
  EXPECT_EQ(p0["peak_budget_bytes"], 576);
}

TEST_F(CmdPlanTest, LowersAComputeOnlyScheduleFirst) {
  // PyTorch's 1F1B runtime order (pp 4, m 8), stash only: 4, 3, 2, 1 units.
  nlohmann::json d = ReadTestdataJson("conformance/pytorch/1F1B_pp4_mb8_v1.json");
  WriteTextFile(dir_ + "/c.csv", CsvFromJson(d["ranks_runtime_equivalent"]));
  WriteTextFile(dir_ + "/stash.json",
                R"({"format": "jitpipe.model", "version": 1, "defaults": {"stash_bytes": 1024}})");
  CliResult r = RunCli({"plan", dir_ + "/c.csv", "--model", dir_ + "/stash.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<int64_t> peaks;
  for (const nlohmann::json& rank : j["ranks"]) peaks.push_back(rank["peak_bytes"]);
  EXPECT_EQ(peaks, (std::vector<int64_t>{4096, 3072, 2048, 1024}));
}

// Without times in the model: the planned timeline over program index, in
// the schema every timeline trace shares (traces/timeline_trace.h).
TEST_F(CmdPlanTest, TraceHasMemoryCountersPerRankOverProgramIndex) {
  const std::string trace = dir_ + "/t.json";
  CliResult r =
      RunCli({"plan", dir_ + "/s.json", "--model", dir_ + "/m.json", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_EQ(summary.slices, 8);  // one per action
  // 0F0 -> 1F0 and 1B0 -> 0B0: each RECV is posted no later than its SEND in
  // program order, so the arrows join producer and consumer.
  EXPECT_EQ(summary.flows, 2);
  std::ifstream in(trace);
  nlohmann::json doc = nlohmann::json::parse(in);
  // Rank 1's received input: 64 B from index 0 to 2, sampled at ts = index + 1
  // and once more at the end (ts 5 = 4 actions + 1).
  std::vector<std::pair<double, double>> receive;
  std::vector<std::string> threads;
  bool arena_high = false;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "C" && e["pid"] == 1 && e["name"] == "mem.receive") {
      receive.push_back({e["ts"].get<double>(), e["args"]["bytes"].get<double>()});
    }
    if (e["ph"] == "M" && e["pid"] == 1 && e["name"] == "thread_name") {
      threads.push_back(e["args"]["name"]);
    }
    arena_high = arena_high || (e["ph"] == "C" && e["name"] == "mem.arena_high");
  }
  EXPECT_EQ(receive, (std::vector<std::pair<double, double>>{{1, 64}, {4, 0}, {5, 0}}));
  EXPECT_EQ(threads, (std::vector<std::string>{"compute", "send", "recv"}));
  EXPECT_TRUE(arena_high);
  EXPECT_EQ(doc["otherData"]["format"], "jitpipe.trace");
  EXPECT_EQ(doc["otherData"]["time_axis"], "program index");
}

// A model with times: the trace shows the simulated step (as jitpipe
// simulate --trace does), memory under the plan's policy at simulated times.
TEST_F(CmdPlanTest, TraceWithTimesIsInSimulatedTime) {
  WriteTextFile(dir_ + "/timed.json", R"({"format": "jitpipe.model", "version": 1,
   "defaults": {"forward_us": 10, "backward_input_us": 10, "backward_weight_us": 10,
                "input_bytes": 64, "output_bytes": 128, "stash_bytes": 256}})");
  const std::string trace = dir_ + "/t.json";
  CliResult r =
      RunCli({"plan", dir_ + "/s.json", "--model", dir_ + "/timed.json", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_GT(summary.counters, 0);
  std::ifstream in(trace);
  nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["otherData"]["clock"], "simulated");
  EXPECT_EQ(doc["otherData"]["time_axis"], "microseconds");
  // F0 on rank 1 runs [10, 20] us (written 1 us later), B0 [20, 40].
  std::vector<std::pair<double, double>> compute;
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 1 && e["cat"] == "compute") {
      compute.push_back({e["ts"].get<double>(), e["dur"].get<double>()});
    }
  }
  EXPECT_EQ(compute, (std::vector<std::pair<double, double>>{{11, 10}, {21, 20}}));
}

TEST_F(CmdPlanTest, MapPrintsOneRanksBuffersAndArena) {
  CliResult r =
      RunCli({"plan", dir_ + "/s.json", "--model", dir_ + "/m.json", "--map", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 1, jit: peak 448 B at index 1 (1F0), lower bound 448 B"));
  EXPECT_THAT(r.out, HasSubstr("     1 1F0                    |"));
}

struct BadInvocation {
  std::vector<std::string> args;  // after "plan FILE"; "M" is the model path
  int exit_code;
  std::string err;                // prefix of stderr
};

TEST_F(CmdPlanTest, ExitCodes) {
  WriteTextFile(dir_ + "/bad_model.json",
                R"({"format": "jitpipe.model", "version": 1, "dp": {"size": 0}})");
  WriteTextFile(dir_ + "/far.json",
                R"({"format": "jitpipe.model", "version": 1, "stages": [{"index": 5}]})");
  const std::vector<BadInvocation> cases = {
      {{}, 2, "jitpipe plan: --model MODEL is required\n"},
      {{"--model", "M", "--policy", "lazy"}, 2,
       "jitpipe plan: --policy must be jit or eager, not \"lazy\"\n"},
      {{"--model", "M", "--policy", "eager", "--prefetch", "2"}, 2,
       "jitpipe plan: --prefetch applies to the jit policy only\n"},
      {{"--model", "M", "--prefetch", "-1"}, 2, "jitpipe plan: --prefetch must be >= 0, got -1\n"},
      {{"--model", "M", "--map", "2"}, 2, "jitpipe plan: --map 2: the schedule has ranks 0 to 1\n"},
      {{"--model", dir_ + "/bad_model.json"}, 1,
       "jitpipe plan: " + dir_ + "/bad_model.json: \"dp.size\" must be a whole number >= 1, "
       "found 0\n"},
      {{"--model", dir_ + "/far.json"}, 1,
       "jitpipe plan: " + dir_ + "/far.json: \"stages[0].index\" is 5 but the schedule has 2 "
       "stages (0 to 1)\n"},
      {{"--model", dir_ + "/none.json"}, 1, "jitpipe plan: " + dir_ + "/none.json: no such file\n"},
  };
  for (const BadInvocation& c : cases) {
    std::vector<std::string> args = {"plan", dir_ + "/s.json"};
    for (const std::string& a : c.args) args.push_back(a == "M" ? dir_ + "/m.json" : a);
    CliResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << args.back() << ": " << r.err;
    EXPECT_THAT(r.err, StartsWith(c.err));
  }
}

}  // namespace
}  // namespace jitpipe::cmd_plan_test
