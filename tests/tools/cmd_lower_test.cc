// End-to-end runs of `jitpipe lower`: outputs, exit codes and messages.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/conformance.h"
#include "tests/testing/testdata.h"

namespace jitpipe::cmd_lower_test {
namespace {

using ::jitpipe::testing::CliResult;
using ::jitpipe::testing::CsvFromJson;
using ::jitpipe::testing::MakeTempDir;
using ::jitpipe::testing::ReadTestdataJson;
using ::jitpipe::testing::RunCli;
using ::jitpipe::testing::WriteTextFile;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Interleaved 1F1B, pp 4, v 2, 8 microbatches: its compute order as a CSV
// file in `dir`, and the golden data.
struct Golden {
  nlohmann::json d;
  std::string csv;
};

Golden WriteInterleaved(const std::string& dir) {
  Golden g{ReadTestdataJson("conformance/pytorch/Interleaved1F1B_pp4_mb8_v2.json"),
           dir + "/s.csv"};
  WriteTextFile(g.csv, CsvFromJson(g.d["ranks"]));
  return g;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(CmdLowerTest, EarlyEqualsPyTorchsAddSendRecv) {
  const std::string dir = MakeTempDir("lower");
  const Golden g = WriteInterleaved(dir);
  CliResult r = RunCli({"lower", g.csv, "--recv", "early", "-o", dir + "/out.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(ReadFile(dir + "/out.json"));
  EXPECT_EQ(out["lowered"], true);
  CliResult csv = RunCli({"convert", dir + "/out.json", "-o", dir + "/out.csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(ReadFile(dir + "/out.csv"),
            CsvFromJson(g.d["ranks_send_recv_only"]));
}

TEST(CmdLowerTest, FsdpAndReduceGradEqualPyTorchsFullLowering) {
  const std::string dir = MakeTempDir("lower");
  const Golden g = WriteInterleaved(dir);
  CliResult r = RunCli({"lower", g.csv, "--recv=early", "--fsdp", "--reduce-grad", "-o",
                        dir + "/out.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(dir + "/out.csv"),
            CsvFromJson(g.d["ranks_with_comms"]));
}

TEST(CmdLowerTest, JitByDefaultToStdoutAndValidates) {
  const std::string dir = MakeTempDir("lower");
  const Golden g = WriteInterleaved(dir);
  CliResult r = RunCli({"lower", g.csv});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(out.is_discarded()) << r.out;
  EXPECT_EQ(out["format"], "jitpipe.schedule");
  EXPECT_EQ(out["lowered"], true);
  WriteTextFile(dir + "/jit.json", r.out);
  CliResult v = RunCli({"validate", dir + "/jit.json"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

// The default placement is deadlock-free under relaxed semantics; for this
// schedule (ranks that send to each other before they receive) not under
// strict ones, which --recv jit-rendezvous is.
TEST(CmdLowerTest, JitRendezvousAlsoValidatesUnderStrictSemantics) {
  const std::string dir = MakeTempDir("lower");
  const Golden g = WriteInterleaved(dir);
  CliResult jit = RunCli({"lower", g.csv, "--recv", "jit", "-o", dir + "/jit.json"});
  ASSERT_EQ(jit.exit_code, 0) << jit.err;
  EXPECT_EQ(RunCli({"validate", dir + "/jit.json"}).exit_code, 0);
  CliResult strict_jit = RunCli({"validate", "--strict", dir + "/jit.json"});
  EXPECT_EQ(strict_jit.exit_code, 1);
  EXPECT_THAT(strict_jit.err, HasSubstr("under strict rendezvous semantics"));
  CliResult r = RunCli({"lower", g.csv, "--recv=jit-rendezvous", "-o", dir + "/r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CliResult strict = RunCli({"validate", "--strict", dir + "/r.json"});
  EXPECT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_THAT(strict.out, HasSubstr(" actions\n  safe for every transport: "));
}

TEST(CmdLowerTest, DumpAfterPrintsThatPassesGridToStderr) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/s.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  CliResult r = RunCli({"lower", dir + "/s.csv", "--dump-after", "lower_send_recv_early", "-o",
                        dir + "/out.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "after pass lower_send_recv_early:\n"
            "        Rank 0   Rank 1  \n"
            "Step 0: 0F0      1RECV_F0\n"
            "Step 1: 0SEND_F0 1F0     \n"
            "Step 2: 0F1      1RECV_F1\n"
            "Step 3: 0SEND_F1 1B0     \n"
            "Step 4: 0RECV_B0 1SEND_B0\n"
            "Step 5: 0B0      1F1     \n"
            "Step 6: 0RECV_B1 1B1     \n"
            "Step 7: 0B1      1SEND_B1\n");
}

struct UsageCase {
  std::string name;
  std::vector<std::string> flags;
  std::string message;
};

class CmdLowerUsageTest : public ::testing::TestWithParam<UsageCase> {};

TEST_P(CmdLowerUsageTest, ExitsTwo) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/s.csv", "0F0,0B0\n1F0,1B0\n");
  std::vector<std::string> args = {"lower", dir + "/s.csv"};
  args.insert(args.end(), GetParam().flags.begin(), GetParam().flags.end());
  CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "jitpipe lower: " + GetParam().message + "\n(see: jitpipe lower --help)\n");
}

INSTANTIATE_TEST_SUITE_P(
    Usage, CmdLowerUsageTest,
    ::testing::Values(
        UsageCase{"BadRecv",
                  {"--recv", "late"},
                  "--recv must be jit, jit-rendezvous, early or offset, not \"late\""},
        UsageCase{"OffsetWithoutModel",
                  {"--recv", "offset"},
                  "--recv offset needs --model: the cost model chooses each receive's offset"},
        UsageCase{"MemoryLimitWithoutOffset",
                  {"--memory-limit", "1GiB"},
                  "--memory-limit and --reserve go with --recv offset"},
        UsageCase{"OffsetOverFifoCommunicators",
                  {"--recv", "offset", "--comms", "per-edge"},
                  "--recv offset is deadlock-free with tag-matched transports only, not over "
                  "the FIFO communicators --comms names; use --recv jit (lowered as "
                  "jit-rendezvous there) or early"},
        UsageCase{"BadBackward",
                  {"--backward=fuse"},
                  "--backward must be keep, split or merge, not \"fuse\""},
        UsageCase{"DeferReduceWaitWithoutReduceGrad",
                  {"--defer-reduce-wait"},
                  "--defer-reduce-wait needs --reduce-grad"},
        UsageCase{"FsdpWindowWithoutFsdp",
                  {"--max-active-stages", "2"},
                  "--max-active-stages and --unshard-lookahead need --fsdp"},
        UsageCase{"BadUnshardLookahead",
                  {"--fsdp", "--unshard-lookahead", "soon"},
                  "--unshard-lookahead must be full, auto, a number >= 1 or one number per "
                  "rank (comma-separated), not \"soon\""},
        UsageCase{"NoResidency",
                  {"--fsdp", "--max-active-stages", "0"},
                  "--max-active-stages must be at least 1, not 0"},
        UsageCase{"NegativeSendBudget",
                  {"--send-budget", "-1"},
                  "--send-budget must be 0 (none) or at least 1, not -1"},
        UsageCase{"DumpOfAPassThatDoesNotRun",
                  {"--dump-after", "add_reduce_grad"},
                  "--dump-after add_reduce_grad: no such pass with these options; the passes "
                  "are: lower_send_recv_early, place_recvs_just_in_time"}),
    [](const ::testing::TestParamInfo<UsageCase>& param) { return param.param.name; });

// PyTorch main's options through the CLI: the waits appear where their
// passes put them, and the program validates.
TEST(CmdLowerTest, WaitOptionsAddWaitActions) {
  const std::string dir = MakeTempDir("lower");
  const Golden g = WriteInterleaved(dir);
  CliResult r = RunCli({"lower", g.csv, "--reduce-grad", "--defer-reduce-wait", "--wait-send",
                        "--send-budget", "2", "-o", dir + "/out.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = ReadFile(dir + "/out.csv");
  EXPECT_THAT(csv, HasSubstr("0WAIT_SEND_F0"));
  EXPECT_THAT(csv, HasSubstr("WAIT_SEND_B"));  // the budget waits for gradient sends too
  // Rank 0: stage 4 reduces first, is waited for before stage 0 reduces.
  EXPECT_THAT(csv, HasSubstr("4WAIT_REDUCE_GRAD,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"));
  CliResult v = RunCli({"validate", dir + "/out.csv"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  // A budget the just-in-time placement cannot keep exits 1, naming one it can.
  CliResult tight = RunCli({"lower", g.csv, "--send-budget", "1"});
  EXPECT_EQ(tight.exit_code, 1);
  EXPECT_THAT(tight.err, HasSubstr("pass add_wait_send_budget: send budget 1 cannot be kept: "));
  EXPECT_THAT(tight.err, HasSubstr("; budget 2 can be kept"));
  // FSDP windows: gathering one stage ahead validates.
  CliResult fsdp = RunCli({"lower", g.csv, "--fsdp", "--max-active-stages", "2",
                           "--unshard-lookahead", "1", "-o", dir + "/fsdp.json"});
  ASSERT_EQ(fsdp.exit_code, 0) << fsdp.err;
  EXPECT_EQ(RunCli({"validate", dir + "/fsdp.json"}).exit_code, 0);
}

// The hand-written PyTorch main lowering (tests/testdata/pytorch_main),
// through the CLI: generate, then lower with PyTorch's placement and its
// waits, byte for byte.
TEST(CmdLowerTest, EqualsTheHandWrittenPyTorchMainLowering) {
  const std::string dir = MakeTempDir("lower");
  ASSERT_EQ(RunCli({"generate", "--schedule", "interleaved-1f1b", "--pp", "2", "--microbatches",
                    "2", "--stages-per-rank", "2", "-o", dir + "/c.csv"})
                .exit_code,
            0);
  CliResult r = RunCli({"lower", dir + "/c.csv", "--recv", "early", "--fsdp", "--reduce-grad",
                        "--defer-reduce-wait", "--wait-send", "-o", dir + "/w.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(dir + "/w.csv"),
            ReadFile(::jitpipe::testing::TestdataPath(
                "pytorch_main/interleaved1f1b_pp2_mb2_v2_waits.csv")));
}

// `lower --schedule ...` writes what `generate` then `lower FILE` write, for
// every option set that changes which passes run.
TEST(CmdLowerTest, GeneratedInputEqualsGenerateThenLower) {
  const std::string dir = MakeTempDir("lower");
  const std::vector<std::string> spec = {"--schedule", "interleaved-1f1b", "--pp", "4",
                                         "--microbatches", "8", "--stages-per-rank", "2"};
  std::vector<std::string> generate = {"generate", "-o", dir + "/g.json"};
  generate.insert(generate.end(), spec.begin(), spec.end());
  ASSERT_EQ(RunCli(generate).exit_code, 0);
  // --overlap's memory limit comes from a model read against the input.
  WriteTextFile(dir + "/m.json",
                R"({"format": "jitpipe.model", "version": 1,
                    "defaults": {"input_bytes": 64, "output_bytes": 128, "stash_bytes": 256}})");
  const std::vector<std::vector<std::string>> option_sets = {
      {},
      {"--recv", "early", "--fsdp"},
      {"--recv", "jit-rendezvous", "--backward", "split", "--reduce-grad", "--overlap"},
      {"--reduce-grad", "--overlap", "--model", dir + "/m.json"},
      {"--recv", "early", "--send-budget", "2"},
  };
  for (const std::vector<std::string>& options : option_sets) {
    std::vector<std::string> two_steps = {"lower", dir + "/g.json", "-o", dir + "/a.json"};
    two_steps.insert(two_steps.end(), options.begin(), options.end());
    std::vector<std::string> one_step = {"lower", "-o", dir + "/b.json"};
    one_step.insert(one_step.end(), spec.begin(), spec.end());
    one_step.insert(one_step.end(), options.begin(), options.end());
    const CliResult a = RunCli(two_steps);
    const CliResult b = RunCli(one_step);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(ReadFile(dir + "/b.json"), ReadFile(dir + "/a.json"))
        << ::testing::PrintToString(options);
  }
  // To stdout, the same bytes as the file.
  std::vector<std::string> to_stdout = {"lower"};
  to_stdout.insert(to_stdout.end(), spec.begin(), spec.end());
  const CliResult printed = RunCli(to_stdout);
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  ASSERT_EQ(RunCli({"lower", dir + "/g.json", "-o", dir + "/c.json"}).exit_code, 0);
  EXPECT_EQ(printed.out, ReadFile(dir + "/c.json"));
}

struct InputUsageCase {
  std::string name;
  std::vector<std::string> args;  // after "lower"; "FILE" is a valid schedule file
  std::string message;  // the whole message, or its start
};

class CmdLowerInputUsageTest : public ::testing::TestWithParam<InputUsageCase> {};

TEST_P(CmdLowerInputUsageTest, ExitsTwo) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/s.csv", "0F0,0B0\n1F0,1B0\n");
  std::vector<std::string> args = {"lower"};
  for (const std::string& arg : GetParam().args) {
    args.push_back(arg == "FILE" ? dir + "/s.csv" : arg);
  }
  CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 2);
  // The message in full, or its start where it lists the synopsis or the schedules.
  EXPECT_THAT(r.err, StartsWith("jitpipe lower: " + GetParam().message));
  EXPECT_THAT(r.err, EndsWith("\n(see: jitpipe lower --help)\n"));
  EXPECT_TRUE(r.out.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Input, CmdLowerInputUsageTest,
    ::testing::Values(
        InputUsageCase{"Nothing", {}, "missing argument; usage: jitpipe lower FILE|--schedule"},
        InputUsageCase{"FileAndSchedule",
                       {"FILE", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4"},
                       "give FILE or --schedule NAME --pp P --microbatches M, not both"},
        InputUsageCase{"FileAndPp",
                       {"FILE", "--pp", "2"},
                       "give FILE or --schedule NAME --pp P --microbatches M, not both"},
        InputUsageCase{"PpWithoutSchedule",
                       {"--pp", "2", "--microbatches", "4"},
                       "--pp, --microbatches and --stages-per-rank go with --schedule"},
        InputUsageCase{"ScheduleWithoutMicrobatches",
                       {"--schedule", "1f1b", "--pp", "2"},
                       "--schedule needs --microbatches"},
        InputUsageCase{"ScheduleWithoutPp",
                       {"--schedule", "1f1b", "--microbatches", "4"},
                       "--schedule needs --pp"},
        InputUsageCase{"Auto",
                       {"--schedule", "auto", "--pp", "2", "--microbatches", "4"},
                       "--schedule auto searches with a model: run `jitpipe generate "
                       "--schedule auto --model MODEL -o FILE`, then lower FILE"},
        InputUsageCase{"UnknownSchedule",
                       {"--schedule", "2f2b", "--pp", "2", "--microbatches", "4"},
                       "unknown schedule \"2f2b\"; known: gpipe, 1f1b,"}),
    [](const ::testing::TestParamInfo<InputUsageCase>& param) { return param.param.name; });

// Parameters the schedule cannot run with are invalid input, worded as
// `generate` words them; nothing is written.
TEST(CmdLowerTest, GeneratorErrorsExitOne) {
  const std::string dir = MakeTempDir("lower");
  CliResult r = RunCli({"lower", "--schedule", "interleaved-1f1b", "--pp", "4",
                        "--microbatches", "9", "--stages-per-rank", "2", "-o", dir + "/l.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "jitpipe lower: interleaved-1f1b: 9 microbatches is not a multiple of max(1, 9 // "
            "4) = 2; use 8 or 10\n");
  EXPECT_FALSE(std::ifstream(dir + "/l.json").good());
}

TEST(CmdLowerTest, UnknownFlagAndBadOutputExtensionAreUsageErrors) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/s.csv", "0F0,0B0\n1F0,1B0\n");
  EXPECT_EQ(RunCli({"lower", dir + "/s.csv", "--overlap"}).exit_code, 2);
  EXPECT_EQ(RunCli({"lower", dir + "/s.csv", "-o", dir + "/out.txt"}).exit_code, 2);
  EXPECT_EQ(RunCli({"lower"}).exit_code, 2);
}

TEST(CmdLowerTest, InvalidInputExitsOneNamingFileRankIndexAndAction) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/bad.csv", "0F0,0F1,0B0,0B1\n1B0,1F0,1F1,1B1\n");
  CliResult r = RunCli({"lower", dir + "/bad.csv"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "jitpipe lower: " + dir +
                       "/bad.csv: rank 1, index 0 (1B0): full backward of stage 1 microbatch 0 "
                       "comes before its forward\n");
  EXPECT_TRUE(r.out.empty());
}

TEST(CmdLowerTest, ACyclicScheduleExitsOneNamingThePass) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/cyclic.csv", "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  CliResult r = RunCli({"lower", dir + "/cyclic.csv"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("jitpipe lower: " + dir +
                                "/cyclic.csv: pass lower_send_recv_early: no rank can make "
                                "progress"));
}

TEST(CmdLowerTest, ALoweredInputExitsOne) {
  const std::string dir = MakeTempDir("lower");
  WriteTextFile(dir + "/low.csv", "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  CliResult r = RunCli({"lower", dir + "/low.csv"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("the schedule is already lowered"));
  EXPECT_EQ(RunCli({"lower", dir + "/missing.csv"}).exit_code, 1);
}

}  // namespace
}  // namespace jitpipe::cmd_lower_test
