// End-to-end runs of `jitpipe replay`: the mlp check, --json, --trace, the
// cost stage, usage errors, and a timeout with flight records.
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"
#include "tests/testing/testdata.h"
#include "traces/trace_checker.h"

namespace jitpipe::cmd_replay_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::TestdataPath;
using ::jitpipe::testing::WriteTextFile;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kTorchtitan = TestdataPath("conformance/real/torchtitan_4-rank.csv");

// The issue's real file: lowered, planned, replayed and checked.
TEST(CmdReplayTest, ReplaysTheRealFileExactly) {
  CliResult r = RunCli({"replay", kTorchtitan, "--backend", "inproc", "--stage", "mlp"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith(kTorchtitan + ": replayed 1 step of pp 4 x dp 1 (8 stages, 6 "
                                              "microbatches, "));
  EXPECT_THAT(r.out, HasSubstr("\ncheck against the reference trainer: ok; loss "));
  EXPECT_THAT(r.out, HasSubstr("\nstep time: "));
  EXPECT_THAT(r.out, HasSubstr("\nexposed reduction: "));
  EXPECT_THAT(r.out, HasSubstr("  rank    pp replica  peak measured   peak planned          arena\n"));
  EXPECT_EQ(r.err, "");
}

// PyTorch main's WAIT actions (the hand-written lowering of
// tests/testdata/pytorch_main/) replay for real over two replicas: the
// executor waits at each WAIT_SEND and WAIT_REDUCE_GRAD, and the result is
// the reference trainer's.
TEST(CmdReplayTest, ReplaysAProgramWithWaitActions) {
  const std::string path = TestdataPath("pytorch_main/dualpipev_pp2_mb4_waits.csv");
  CliResult r = RunCli({"replay", path, "--stage", "mlp", "--dp", "2", "--steps", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\ncheck against the reference trainer: ok; loss "));
}

// At dp 1 there is nothing to reduce: no collective runs and no exposed
// reduction is reported (one-member collectives used to cost 38-1283 us).
TEST(CmdReplayTest, NoReductionIsExposedAtDpOne) {
  CliResult r = RunCli({"replay", kTorchtitan, "--stage", "mlp", "--steps", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dp"], 1);
  EXPECT_EQ(j["exposed_reduce_us"].get<double>(), 0);
  EXPECT_EQ(j["check"]["ok"], true);
}

TEST(CmdReplayTest, JsonSummary) {
  CliResult r = RunCli({"replay", kTorchtitan, "--stage", "mlp", "--dp", "2", "--steps", "2",
                        "--policy", "eager", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "inproc");
  EXPECT_EQ(j["stage"], "mlp");
  EXPECT_EQ(j["policy"], "eager");
  EXPECT_EQ(j["pp"], 4);
  EXPECT_EQ(j["dp"], 2);
  EXPECT_EQ(j["steps"], 2);
  ASSERT_EQ(j["step_loss"].size(), 2u);
  EXPECT_EQ(j["loss"], j["step_loss"][1]);
  EXPECT_EQ(j["step_us_all"].size(), 2u);
  EXPECT_GT(j["step_us"].get<double>(), 0);
  EXPECT_GE(j["exposed_reduce_us"].get<double>(), 0);
  EXPECT_GE(j["peak_in_flight_bytes"].get<int64_t>(), 0);
  ASSERT_EQ(j["ranks"].size(), 8u);
  for (int w = 0; w < 8; ++w) {
    const nlohmann::json& rank = j["ranks"][w];
    EXPECT_EQ(rank["rank"], w);
    EXPECT_EQ(rank["pipeline_rank"], w % 4);
    EXPECT_EQ(rank["replica"], w / 4);
    EXPECT_EQ(rank["measured_peak_bytes"], rank["planned_peak_bytes"]);
    EXPECT_GT(rank["arena_bytes"].get<int64_t>(), 0);
  }
  EXPECT_EQ(j["check"]["ok"], true);
  EXPECT_LE(j["check"]["worst_grad_error"].get<double>(), 1e-5);
}

TEST(CmdReplayTest, TraceOfTheMeasuredTimelinePassesTheViewerRules) {
  const std::string trace = MakeTempDir("replay_trace") + "/t.json";
  CliResult r = RunCli({"replay", kTorchtitan, "--stage", "mlp", "--steps", "2", "--trace", trace,
                        "--buffers", "arena"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_OK_AND_ASSIGN(ChromeTraceSummary summary, ReadAndCheckChromeTrace(trace));
  EXPECT_GT(summary.slices, 0);
  EXPECT_GT(summary.flows, 0);
  EXPECT_GT(summary.counters, 0);
}

// The cost stage spends the model's times and moves its sizes; its data
// stamps make the run fail if any buffer were routed wrongly.
TEST(CmdReplayTest, CostStageWithAModel) {
  const std::string dir = MakeTempDir("replay_cost");
  WriteTextFile(dir + "/m.json",
                R"({"format": "jitpipe.model", "version": 1,
                    "defaults": {"forward_us": 20, "backward_input_us": 20,
                                 "backward_weight_us": 20, "input_bytes": 4096,
                                 "output_bytes": 4096, "stash_bytes": 8192,
                                 "param_bytes": 65536},
                    "dp": {"size": 2}})");
  CliResult r = RunCli({"replay", kTorchtitan, "--stage", "cost", "--model", dir + "/m.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("of pp 4 x dp 2 (8 stages"));  // dp from the model
  EXPECT_THAT(r.out, HasSubstr("with cost stages"));
  EXPECT_THAT(r.out, Not(HasSubstr("reference trainer")));
}

// A version 2 model, as `jitpipe model` writes it, is staged for the
// schedule (even cut, or --layout) and replayed with its costs.
TEST(CmdReplayTest, ReplaysWithAVersion2ModelFromJitpipeModel) {
  const std::string dir = MakeTempDir("replay_v2");
  ASSERT_EQ(RunCli({"model", "--layers", "4", "--hidden", "64", "--heads", "4", "--ffn", "128",
                    "--vocab", "100", "--seq", "16", "--tflops", "1000", "-o", dir + "/m.json"})
                .exit_code,
            0);
  ASSERT_EQ(RunCli({"generate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "-o",
                    dir + "/s.json"})
                .exit_code,
            0);
  CliResult even = RunCli({"replay", dir + "/s.json", "--stage", "cost", "--model",
                           dir + "/m.json", "--timeout", "60"});
  EXPECT_EQ(even.exit_code, 0) << even.err;
  EXPECT_THAT(even.out, HasSubstr("with cost stages"));
  CliResult layout = RunCli({"replay", dir + "/s.json", "--stage", "cost", "--model",
                             dir + "/m.json", "--layout", "Et|tttL", "--timeout", "60"});
  EXPECT_EQ(layout.exit_code, 0) << layout.err;
  CliResult bad = RunCli({"replay", dir + "/s.json", "--stage", "cost", "--model",
                          dir + "/m.json", "--layout", "Et|tL"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("m.json: layout \"Et|tL\" places 2 body layers"));
}

// A buffer the machine cannot give is an error naming the rank, the action,
// the buffer and its bytes, for tracked buffers and for the arena; never an
// abort. (Sanitizers abort on such a request unless told to return null,
// as the allocator itself does.)
TEST(CmdReplayTest, AnAllocationThatFailsIsAnErrorNamingRankBufferAndBytes) {
  const std::string dir = MakeTempDir("replay_alloc");
  WriteTextFile(dir + "/m.json",
                R"({"format": "jitpipe.model", "version": 1,
                    "defaults": {"forward_us": 1, "backward_input_us": 1,
                                 "backward_weight_us": 1, "input_bytes": 1099511627776,
                                 "output_bytes": 1099511627776}})");
  const char* previous = std::getenv("ASAN_OPTIONS");
  const std::string options = previous == nullptr ? "" : previous;
  setenv("ASAN_OPTIONS", (options + (options.empty() ? "" : ":") +
                          "allocator_may_return_null=1").c_str(), 1);
  CliResult tracked =
      RunCli({"replay", kTorchtitan, "--stage", "cost", "--model", dir + "/m.json"});
  CliResult arena = RunCli({"replay", kTorchtitan, "--stage", "cost", "--model",
                            dir + "/m.json", "--buffers", "arena"});
  if (previous == nullptr) {
    unsetenv("ASAN_OPTIONS");
  } else {
    setenv("ASAN_OPTIONS", previous, 1);
  }
  EXPECT_EQ(tracked.exit_code, 1) << tracked.err;
  // (A sanitizer's allocator may warn on stderr first.)
  EXPECT_THAT(tracked.err, ::testing::ContainsRegex(
                               "jitpipe replay: .*: rank [0-9]+, index [0-9]+ \\([^)]*\\): "
                               "buffer [0-9]+: 1099511627776 bytes could not be allocated"));
  EXPECT_EQ(arena.exit_code, 1) << arena.err;
  EXPECT_THAT(arena.err, HasSubstr("bytes could not be allocated"));
  EXPECT_THAT(arena.err, HasSubstr(": the arena of "));
}

struct UsageCase {
  std::vector<std::string> args;
  std::string error;
};

class CmdReplayUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(CmdReplayUsageTest, ExitsTwoWithTheReason) {
  std::vector<std::string> args = {"replay", kTorchtitan};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jitpipe replay: " + GetParam().error + "\n(see: jitpipe replay --help)\n");
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Flags, CmdReplayUsageTest,
    ::testing::Values(
        UsageCase{{"--stage", "mlp", "--backend", "tcp"},
                  "--backend must be inproc, mpi, cuda, nccl or nccl-lazy, not \"tcp\""},
        UsageCase{{}, "--stage must be mlp, cost or transformer"},
        UsageCase{{"--stage", "gpu"}, "--stage must be mlp, cost or transformer, not \"gpu\""},
        UsageCase{{"--stage", "cost"}, "--stage cost needs --model MODEL"},
        UsageCase{{"--stage", "mlp", "--steps", "0"}, "--steps must be 1 or more"},
        UsageCase{{"--stage", "mlp", "--dp", "0"}, "--dp must be 1 or more"},
        UsageCase{{"--stage", "mlp", "--dp", "2147483647"},
                  "pp 4 x dp 2147483647 = 8589934588 ranks exceeds the limit of 4096 replayed "
                  "ranks"},
        UsageCase{{"--stage", "mlp", "--timeout", "0"},
                  "--timeout must be a positive number of seconds"},
        UsageCase{{"--stage", "mlp", "--policy", "lazy"}, "--policy must be jit or eager"},
        UsageCase{{"--stage", "mlp", "--buffers", "pool"}, "--buffers must be tracked or arena"},
        UsageCase{{"--stage", "mlp", "--measure-costs"},
                  "--measure-costs needs a device backend (cuda, nccl, nccl-lazy)"},
        UsageCase{{"--stage", "mlp", "--backend", "cuda", "--graph"},
                  "--graph needs --backend cuda, --stage mlp or transformer, --buffers arena "
                  "and --dp 1"},
        UsageCase{{"--stage", "mlp", "--reference-check=false"},
                  "--reference-check=false is for --stage transformer only"}));

// A device backend on a machine without a CUDA device (or in a build
// without CUDA) fails with exit 1 and says so, before loading the device
// module (runtime/gpu/replay.h): never a crash. On a machine with a GPU
// (/dev/nvidiactl) tools/gpu-check runs these backends instead.
class CmdReplayNoDeviceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CmdReplayNoDeviceTest, ExitsOneSayingThereIsNoCudaDevice) {
  if (std::filesystem::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has a GPU";
  CliResult r = RunCli({"replay", kTorchtitan, "--backend", GetParam(), "--stage", "mlp"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, StartsWith("jitpipe replay: " + kTorchtitan + ": no CUDA device"));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(Backends, CmdReplayNoDeviceTest,
                         ::testing::Values("cuda", "nccl", "nccl-lazy"),
                         [](const ::testing::TestParamInfo<std::string>& backend) {
                           std::string name = backend.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(CmdReplayTest, InvalidInputExitsOne) {
  CliResult missing = RunCli({"replay", "/nonexistent/s.csv", "--stage", "mlp"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("jitpipe replay: /nonexistent/s.csv: "));
  // Rank 0 waits in 0B0 for a gradient that needs its own later 0SEND_F0.
  const std::string path = MakeTempDir("replay_bad") + "/deadlock.csv";
  WriteTextFile(path, "0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CliResult deadlock = RunCli({"replay", path, "--stage", "mlp"});
  EXPECT_EQ(deadlock.exit_code, 1);
  EXPECT_THAT(deadlock.err, StartsWith("jitpipe replay: " + path + ": deadlock"));
}

// Rank 0's forward takes 1.5 s, the timeout is 0.5 s: rank 1 gives up
// waiting for its input, every rank's flight record is written, and both
// the error and fr-analyze name the receive that never matched.
TEST(CmdReplayTest, TimeoutWritesFlightRecordsThatFrAnalyzeReads) {
  const std::string dir = MakeTempDir("replay_timeout");
  WriteTextFile(dir + "/slow.json",
                R"({"format": "jitpipe.model", "version": 1,
                    "defaults": {"forward_us": 1500000, "input_bytes": 64, "output_bytes": 64}})");
  WriteTextFile(dir + "/g.csv", "0F0,0B0\n1F0,1B0\n");
  const std::string flight = dir + "/flight";
  CliResult r = RunCli({"replay", dir + "/g.csv", "--stage", "cost", "--model", dir + "/slow.json",
                        "--timeout", "0.5", "--flight-dir", flight});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe replay: " + dir + "/g.csv: rank 1, index 1 (1F0): timed out after "
                   "500ms waiting for receive 1RECV_F0 from rank 0 (index 0); other ranks: "
                   "aborted (0); flight analysis (records in " + flight + "): rank 1 waits at "
                   "index 0 (1RECV_F0) for rank 0; rank 0's last op was none, and it is at index "
                   "0 (0F0)\n");
  EXPECT_TRUE(std::filesystem::exists(flight + "/rank_0.json"));
  EXPECT_TRUE(std::filesystem::exists(flight + "/rank_1.json"));
  CliResult analysis = RunCli({"fr-analyze", flight});
  EXPECT_EQ(analysis.exit_code, 1);
  EXPECT_EQ(analysis.out, "first unmatched: rank 1 waits at index 0 (1RECV_F0) for rank 0; rank "
                          "0's last op was none, and it is at index 0 (0F0)\n");
}

// Rank 0's forward takes ten minutes (a kernel that never returns, as far
// as the run can tell): rank 1 times out after 0.5 s, every flight record
// is written, and the process exits 1 once rank 0 is still inside its stage
// 2 s later, instead of after the ten minutes (RunCli gives up after 60 s).
TEST(CmdReplayTest, AStuckStageCallEndsTheProcessAfterTheTimeout) {
  const std::string dir = MakeTempDir("replay_stuck");
  WriteTextFile(dir + "/stuck.json",
                R"({"format": "jitpipe.model", "version": 1,
                    "defaults": {"forward_us": 600000000, "input_bytes": 64, "output_bytes": 64}})");
  WriteTextFile(dir + "/g.csv", "0F0,0B0\n1F0,1B0\n");
  const std::string flight = dir + "/flight";
  CliResult r = RunCli({"replay", dir + "/g.csv", "--stage", "cost", "--model", dir + "/stuck.json",
                        "--timeout", "0.5", "--flight-dir", flight},
                       /*timeout_seconds=*/60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "jitpipe replay: " + dir + "/g.csv: rank 1, index 1 (1F0): timed out after "
                   "500ms waiting for receive 1RECV_F0 from rank 0 (index 0); other ranks: "
                   "stuck in a stage call (0); flight analysis (records in " + flight + "): "
                   "rank 1 waits at index 0 (1RECV_F0) for rank 0; rank 0's last op was none, "
                   "and it is at index 0 (0F0)\n");
  EXPECT_TRUE(std::filesystem::exists(flight + "/rank_0.json"));
  EXPECT_TRUE(std::filesystem::exists(flight + "/rank_1.json"));
}

}  // namespace
}  // namespace jitpipe::cmd_replay_test
